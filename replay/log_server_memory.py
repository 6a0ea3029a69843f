"""server-memory answering from the log: the stdio adapter over recorded I/O.

The adapter's lifecycle steps (capture, promote, update, refs) run unchanged, as for
mcp-data-platform (``replay.log_platform``); only the sessions are replaced, so a
changed adapter shows up as a divergence. A session on an identity's file replays its
server process's ``initialize`` and then its calls (a pool session's read answers with
the merged graph the agent saw, as recorded); the shared graph's session is the
long-lived server whose handshake was never recorded. The adapter's read-backs are
made from those answers, as live. Nothing is started and nothing is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import Description, Observer
from benchledger.harness.platforms.server_memory import SHARED_FILE, ServerMemory
from benchledger.replay.log_platform import LogSession
from benchledger.replay.tape import Tape


class LogMemorySession(LogSession):
    """A recorded server-memory session: a process's handshake is ``initialize`` alone."""

    def __init__(self, tape: Tape, observer: Observer | None, email: str) -> None:
        super().__init__(tape, observer)
        self.email = email

    async def open(self) -> None:
        self._take("initialize", "", {})


class LogServerMemory(ServerMemory):
    """The server-memory adapter whose sessions come from ``tape``."""

    def __init__(self, tape: Tape, *, pool_size: int) -> None:
        # No processes and no folder: only the adapter's own logic runs.
        self.argv = ()
        self.folder = ""
        self.pool_size = pool_size
        self.tape = tape

    @asynccontextmanager
    async def session(  # type: ignore[override]  # a PlatformSession, as the adapter uses it
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[LogMemorySession]:
        """A pool identity's session (its process's handshake first), or the reviewer's."""
        if pool_index is None:
            yield LogMemorySession(self.tape, observer, f"reviewer ({SHARED_FILE})")
            return
        session = LogMemorySession(self.tape, observer, self.email(pool_index))
        await session.open()
        yield session

    @asynccontextmanager
    async def _graph(  # type: ignore[override]  # the recorded session stands in for both
        self, who: int | None, rec: Observer
    ) -> AsyncIterator[LogMemorySession]:
        """A session on one graph file: recorded with the same handshakes as a session."""
        async with self.session(who, rec) as session:
            yield session

    async def describe(self) -> Description:
        # The run record already says what the platform was; the tape holds no preflight.
        raise InfraError("refused", "a replayed platform is never described", retryable=False)
