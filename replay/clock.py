"""Virtual time for replay: waiting takes no time, and the wall clock is never slept on."""

from __future__ import annotations

import asyncio


class ReplayClock:
    """A ``harness.platforms.base.Clock`` whose ``sleep`` advances it at once.

    ``time()`` starts at ``start`` (the wall clock when a live platform stamps records, so
    ``since`` filters still match them) and moves only when something sleeps; polls and
    retry backoffs therefore run as often as they would have, without the wait.
    """

    def __init__(self, start: float = 0.0) -> None:
        self._start = start
        self._elapsed = 0.0

    def time(self) -> float:
        return self._start + self._elapsed

    def monotonic(self) -> float:
        return self._elapsed

    async def sleep(self, seconds: float) -> None:
        self._elapsed += max(0.0, seconds)
        await asyncio.sleep(0)  # still a scheduling point, as a real sleep is
