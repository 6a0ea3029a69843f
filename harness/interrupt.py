"""An interrupt of a run (SIGINT, SIGTERM, or the run's task cancelled): once one is under
way, whatever a unit raises is the interrupt unwinding, never a failure of the unit.

A cancellation does not always reach a unit as ``CancelledError``: unwinding through the
MCP SDK's task groups and memory streams it can surface as ``BrokenResourceError``, a
closed stream, or a transport failure the adapter reads as an ``InfraError``. Recorded as
the unit's error, such an end would seal a failure that never happened. So the unit's
fault barrier and its retries ask ``unwinding()`` first: an interrupted unit records no
terminal event and is re-run by ``run --resume`` (docs/reliability.md, "Interrupts").
"""

from __future__ import annotations

import asyncio
import signal

_requested: int = 0  # the signal that asked for the interrupt (0: none)


def request(signum: int = signal.SIGINT) -> None:
    """Mark an interrupt as asked for by ``signum`` (the command line's signal handlers)."""
    global _requested
    _requested = _requested or signum


def requested() -> int:
    """The signal that asked for an interrupt of this process's run, 0 when none did."""
    return _requested


def exit_code() -> int:
    """How an interrupted command exits: 128 plus the signal that asked, as a shell says
    (130 after Ctrl-C or with no signal recorded, 143 after SIGTERM)."""
    return 128 + (_requested or signal.SIGINT)


def clear() -> None:
    """Forget an earlier interrupt: a new run in this process starts uninterrupted."""
    global _requested
    _requested = 0


def unwinding() -> bool:
    """Whether an interrupt is under way: asked for by a signal, or the current task cancelled
    (an exception raised now is the cancellation's unwinding, not a failure)."""
    if _requested:
        return True
    try:
        task = asyncio.current_task()
    except RuntimeError:  # no running loop
        return False
    return task is not None and task.cancelling() > 0
