"""A mapped MCP server answering from the log: the generic adapter over recorded calls.

The adapter's lifecycle steps run unchanged (a changed adapter or mapping shows up as a
divergence); only its calls are replaced: an agent's session and every read the adapter
makes serve the recorded ``tools/list`` and ``tools/call`` events in order. The mapping
is the one the run recorded (``PlatformRecord.mapping``), never the file as it is now.
Nothing is started and nothing is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import CallResult, Description, Observer
from benchledger.harness.platforms.generic_mcp import GenericMcp
from benchledger.harness.platforms.mcp_mapping import loaded
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.events import PlatformRecord
from benchledger.replay.log_platform import LogSession
from benchledger.replay.tape import Tape


class LogGenericMcp(GenericMcp):
    """The generic adapter whose calls come from ``tape``, on the run's recorded mapping."""

    wants_record = True  # full replay hands it the run's platform record

    def __init__(self, tape: Tape, *, pool_size: int, record: PlatformRecord | None = None) -> None:
        if record is None or not record.mapping:
            raise UnusableInput(tape.stream, "the run records no mapping to replay it with")
        mapping = loaded(record.mapping, record.url.removeprefix("mcp:") or "(recorded mapping)")
        super().__init__(mapping, (), {}, "", pool_size=pool_size)
        self.tape = tape

    @asynccontextmanager
    async def session(  # type: ignore[override]  # a PlatformSession, as the adapter uses it
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[LogSession]:
        """A session whose calls are the recorded ones (no handshake: servers live long)."""
        session = LogSession(self.tape, observer)
        session.email = self.email(pool_index) if pool_index is not None else "reviewer"
        yield session

    async def _call(
        self, who: int | None, rec: Observer, tool: str, args: dict[str, Any]
    ) -> CallResult:
        return await LogSession(self.tape, rec).call_tool(tool, args)

    async def describe(self) -> Description:
        # The run record already says what the platform was; the tape holds no preflight.
        raise InfraError("refused", "a replayed platform is never described", retryable=False)
