"""Per-model requests-per-minute and tokens-per-minute limits for asyncio.

Two token buckets (the shape providers enforce: full at start, refilled continuously
at limit/60 per second). A call waits, in arrival order, until one request and its
estimated tokens are available; afterwards the estimate is corrected by the tokens
the response reports, so a run converges on the real spend.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import Final

from benchledger.harness.models.request import CanonicalRequest, request_json
from benchledger.ledger.codec import canonical_json

CHARS_PER_TOKEN: Final = 4  # a rough, provider-neutral estimate; usage corrects it


def estimate_tokens(request: CanonicalRequest) -> int:
    """Input tokens a request will likely cost: its canonical JSON size over 4."""
    return 1 + len(canonical_json(request_json(request))) // CHARS_PER_TOKEN


def used_tokens(usage: Mapping[str, int]) -> int:
    """Tokens a response counts against a per-minute limit (cache reads are not counted)."""
    keys = ("input_tokens", "output_tokens", "cache_creation_tokens")
    return sum(int(usage.get(k, 0)) for k in keys)


class _Bucket:
    def __init__(self, per_minute: int, now: float) -> None:
        self.capacity = float(per_minute)
        self.rate = per_minute / 60.0
        self.level = self.capacity
        self.at = now

    def refill(self, now: float) -> None:
        self.level = min(self.capacity, self.level + (now - self.at) * self.rate)
        self.at = now

    def wait_for(self, amount: float) -> float:
        """Seconds until ``amount`` is available (0 if it is)."""
        return max(0.0, (amount - self.level) / self.rate)


class RateLimiter:
    """Requests and tokens per minute for one model; 0 means no limit of that kind."""

    def __init__(
        self,
        rpm: int = 0,
        tpm: int = 0,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
    ) -> None:
        if rpm < 0 or tpm < 0:
            raise ValueError("--rpm and --tpm must be positive")
        self.rpm, self.tpm = rpm, tpm
        self._clock, self._sleep = clock, sleep
        now = clock()
        self._requests = _Bucket(rpm, now) if rpm else None
        self._tokens = _Bucket(tpm, now) if tpm else None
        self._locks: dict[asyncio.AbstractEventLoop, asyncio.Lock] = {}

    def _lock(self) -> asyncio.Lock:
        # A Lock binds to the loop it first waits on; keep one per loop.
        loop = asyncio.get_running_loop()
        lock = self._locks.get(loop)
        if lock is None:
            self._locks = {lp: lk for lp, lk in self._locks.items() if not lp.is_closed()}
            lock = self._locks[loop] = asyncio.Lock()
        return lock

    async def acquire(self, tokens: int) -> None:
        """Wait until a request and ``tokens`` (capped at the limit) are free, then take them."""
        need = float(min(tokens, self.tpm)) if self.tpm else 0.0
        async with self._lock():  # FIFO: a large request is not starved by small ones
            while True:
                now = self._clock()
                wait = 0.0
                if self._requests is not None:
                    self._requests.refill(now)
                    wait = self._requests.wait_for(1.0)
                if self._tokens is not None:
                    self._tokens.refill(now)
                    wait = max(wait, self._tokens.wait_for(need))
                if wait <= 0:
                    break
                await self._sleep(wait)
            if self._requests is not None:
                self._requests.level -= 1.0
            if self._tokens is not None:
                self._tokens.level -= need

    def settle(self, estimated: int, used: int) -> None:
        """Correct a taken estimate by the tokens really used (may leave the bucket in debt)."""
        if self._tokens is not None:
            taken = min(estimated, self.tpm)
            self._tokens.level = min(self._tokens.capacity, self._tokens.level + taken - used)

    def available(self) -> tuple[float, float]:
        """(requests, tokens) available now; inf for an unlimited kind."""
        now = self._clock()
        out = []
        for bucket in (self._requests, self._tokens):
            if bucket is None:
                out.append(float("inf"))
            else:
                bucket.refill(now)
                out.append(bucket.level)
        return out[0], out[1]
