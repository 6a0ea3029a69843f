"""mem0 answering from the log: the adapter over recorded I/O.

The adapter's lifecycle steps run unchanged (a changed adapter shows up as a divergence);
only its sessions are replaced: every session, the agent's and each the harness opens for
a read-back, is a view of the runtime's one long-lived server, whose handshake was never
recorded, so a session replays its calls alone, each checked against the recorded tool and
arguments (as the agent gave them: the users the adapter adds are not an agent's). No
server is started and nothing is sent.

A run with ``--mem0-llm`` recorded the model calls mem0's fact extraction made during a
session call just before that call's own event; they are served back the same way, in
order, and recorded again in the replayed episode, so its trace is the recorded one.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import CallResult, Description, Observer
from benchledger.harness.platforms.mem0 import Mem0, Scope
from benchledger.ledger.events import ModelCallBody
from benchledger.replay.log_platform import LogSession
from benchledger.replay.tape import Tape


class LogMem0Session(LogSession):
    """A recorded mem0 session: no handshake of its own."""

    def __init__(self, tape: Tape, observer: Observer | None, email: str) -> None:
        super().__init__(tape, observer)
        self.email = email

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """The model calls mem0 made during this call (as recorded), then the call."""
        # An agent's own model call is taken by its turn before the tools it asks for, so
        # a model call ahead of a session call is mem0's.
        while (nxt := self._tape.peek()) is not None and isinstance(nxt[1], ModelCallBody):
            _, body = self._tape.take(ModelCallBody, None)
            assert isinstance(body, ModelCallBody)
            rec = self._observer
            append = getattr(rec, "append", None)
            if rec is not None and append is not None:
                append(msgspec.structs.replace(body, episode=rec.episode), rec.seqs[-1:])  # type: ignore[attr-defined]
        return await super().call_tool(name, arguments)


class LogMem0(Mem0):
    """The mem0 adapter whose sessions come from ``tape``."""

    def __init__(self, tape: Tape, *, pool_size: int) -> None:
        super().__init__(None, pool_size=pool_size)
        self.tape = tape

    @asynccontextmanager
    async def _open(  # type: ignore[override]  # a PlatformSession, as the adapter uses it
        self, observer: Observer | None, scope: Scope, email: str
    ) -> AsyncIterator[LogMem0Session]:
        yield LogMem0Session(self.tape, observer, email)

    async def describe(self) -> Description:
        # The run record already says what the platform was; the tape holds no preflight.
        raise InfraError("refused", "a replayed platform is never described", retryable=False)
