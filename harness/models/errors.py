"""Model-layer errors. A transport that gives up raises ``harness.errors.InfraError``."""

from __future__ import annotations

from typing import Any

from benchledger.harness.errors import HarnessError


class ModelError(HarnessError):
    """Root of the model layer's own errors."""


class PreflightFailed(ModelError):
    """A model endpoint cannot serve a run (unreachable, key refused, no such model or path).

    The message is one line, names the endpoint and what to check, and never the key.
    """


class Divergence(ModelError):
    """Replay asked for a response the log does not hold; a live call is never made instead.

    ``request_hash`` is the replayed request's hash; ``expected_hash`` the next recorded
    request hash (the earliest recorded response not yet served), or "" when the log
    is exhausted; ``position`` the 0-based number of model calls served before this
    one. ``request`` is the replayed request as recorded JSON and ``expected`` the
    recorded request behind ``expected_hash`` (None if none), so a caller can diff them.
    """

    def __init__(
        self,
        request_hash: str,
        expected_hash: str,
        position: int,
        *,
        reason: str = "unknown request",
        request: Any = None,
        expected: Any = None,
    ) -> None:
        self.request_hash = request_hash
        self.expected_hash = expected_hash
        self.position = position
        self.reason = reason
        self.request = request
        self.expected = expected
        where = (
            f"the log's next recorded request is {expected_hash[:12]}"
            if expected_hash
            else "the log has no recorded model calls left"
        )
        super().__init__(
            f"replay diverged at model call {position}: request {request_hash[:12]} "
            f"({reason}); {where}. The agent's inputs differ from the recorded run "
            "(prompts, tools, tool results, params or agent code changed): diff the request "
            "against the recorded one to find the first difference"
        )
