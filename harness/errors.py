"""The harness's error tree: one root; platform and model failures carry what to retry."""

from __future__ import annotations

from benchledger.ledger.errors import BenchledgerError


class HarnessError(BenchledgerError):
    """Root of every error the harness raises."""


class PlatformStartFailed(HarnessError):
    """The embedded platform did not start (its first line is kept as evidence)."""


class InfraError(HarnessError):
    """A platform or model call failed for infrastructure reasons, not the agent's.

    ``retryable`` says whether a bounded retry may help (transport failures, 5xx,
    timeouts) or not (auth refused, unknown session). ``kind`` is a short tag such as
    ``transport``, ``http_5xx``, ``timeout``, ``refused``.
    """

    def __init__(self, kind: str, message: str, *, retryable: bool) -> None:
        super().__init__(f"{kind}: {message}")
        self.kind = kind
        self.message = message
        self.retryable = retryable
