"""``report RUN --watch``: the scorecard re-rendered as units land, until the run is sealed.

The run's suite gives its live view (``ReadSuite.live``): its fold is fed from the ledger's
notification log (``LiveView``), so each frame applies only the events committed since
the last one, and a watch costs one small read per poll however large the run. Every
frame before the seal is labelled LIVE and unsealed: its numbers cover the units finished
so far, not the run.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

from benchledger.cli.common import raw
from benchledger.projections.fold import LiveView
from benchledger.projections.suites import ReadSuite


def live_frames(
    view: LiveView[Any],
    suite: ReadSuite,
    fmt: str,
    wait: Callable[[], None],
    *,
    ci: str = "auto",
    extra: Callable[[], str] = lambda: "",
) -> Iterator[str]:
    """A labelled scorecard whenever the run has new events; the last one once it is sealed.

    ``view`` folds with ``suite.fold()``; ``suite.live`` must be set. ``wait`` is called
    between polls that found nothing new (the CLI sleeps there). ``extra``: a line to
    show under a LIVE frame's label, if any (a queued run's jobs and workers).
    """
    assert suite.live is not None, f"suite {suite.name} has no live view"
    while True:
        if not view.catch_up():
            wait()
            continue
        folded = view.projection.result()
        meta, done = suite.live(folded)
        if not meta.run_id:  # the header has not landed yet
            continue
        card = suite.scorecard([folded], ci=ci)
        if meta.root:
            label = f"run {meta.run_id}: sealed, root {meta.root} ({done.finished} units, final)"
        else:
            label = (
                f"LIVE run {meta.run_id}: unsealed, {done.counts()}{done.infra_text()} as of "
                f"{time.strftime('%H:%M:%S')} (partial: not the run's result)"
            )
            more = extra()
            label += f"\n{more}" if more else ""
        yield f"{label}\n\n{suite.render(card, fmt)}"
        if meta.root:
            return


def watch(
    view: LiveView[Any],
    suite: ReadSuite,
    fmt: str,
    interval: float,
    *,
    ci: str = "auto",
    extra: Callable[[], str] = lambda: "",
) -> None:
    """Print frames to stdout (clearing a terminal between them) until the seal lands."""
    clear = "\x1b[2J\x1b[H" if sys.stdout.isatty() else ""
    frames = live_frames(view, suite, fmt, lambda: time.sleep(interval), ci=ci, extra=extra)
    for n, frame in enumerate(frames):
        raw(sys.stdout).write(clear or ("\n" + "-" * 72 + "\n" if n else ""))  # our own ESC
        sys.stdout.write(frame)
        sys.stdout.flush()
