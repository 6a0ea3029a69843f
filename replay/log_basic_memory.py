"""basic-memory answering from the log: the HTTP adapter over recorded I/O.

The adapter's lifecycle steps run unchanged (a changed adapter shows up as a divergence);
only its I/O is replaced: every MCP session (the agent's, and each the harness opens for a
read-back) replays its recorded ``initialize`` and then its calls, and a read of a
project's files on disk serves the recorded ``DISK`` read-back, which must be the one the
recording holds next. No project is made, nothing is started and nothing is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import Description, Observer, ReadBack
from benchledger.harness.platforms.basic_memory import DISK, BasicMemory, Scope
from benchledger.ledger.events import ReadBackBody
from benchledger.replay.log_platform import LogSession
from benchledger.replay.tape import Tape, ToolDivergence, describe


class LogNotesSession(LogSession):
    """A recorded basic-memory session: its handshake is ``initialize`` alone."""

    def __init__(self, tape: Tape, observer: Observer | None, email: str) -> None:
        super().__init__(tape, observer)
        self.email = email

    async def open(self) -> None:
        self._take("initialize", "", {})


class LogBasicMemory(BasicMemory):
    """The basic-memory adapter whose sessions and disk reads come from ``tape``."""

    def __init__(self, tape: Tape, *, pool_size: int) -> None:
        super().__init__("log:", "", pool_size=pool_size)
        self.tape = tape

    async def ensure_project(self, project: str) -> None:
        """Projects were made by the recorded run's harness, unrecorded: nothing to do."""

    @asynccontextmanager
    async def _open(  # type: ignore[override]  # a PlatformSession, as the adapter uses it
        self, observer: Observer | None, scope: Scope, email: str
    ) -> AsyncIterator[LogNotesSession]:
        session = LogNotesSession(self.tape, observer, email)
        await session.open()
        yield session

    async def _disk(self, project: str) -> ReadBack:
        """The recorded read of the project's files, which must be the next on the tape."""
        path = f"file:{project}/"
        nxt = self.tape.peek()
        rb = nxt[1] if nxt is not None else None
        if not isinstance(rb, ReadBackBody) or (rb.method, rb.path) != (DISK, path):
            actual = {"kind": "read_back", "method": DISK, "path": path}
            raise ToolDivergence(self.tape.stream, nxt[0] if nxt else -1, describe(rb), actual,
                                 "a different platform read than the recorded one")  # fmt: skip
        self.tape.take(ReadBackBody, None)
        return ReadBack(rb.method, rb.path, rb.status, rb.body, rb.latency_ms)

    async def describe(self) -> Description:
        # The run record already says what the platform was; the tape holds no preflight.
        raise InfraError("refused", "a replayed platform is never described", retryable=False)
