"""Replay's model transport: responses served from recorded ``model_call`` events by hash.

It lives in replay, which alone uses it; the harness takes it as any ``ModelTransport``
through ``harness.agents.from_spec(..., transport=...)`` and never names it.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any

from benchledger.harness.models.errors import Divergence
from benchledger.harness.models.request import CanonicalRequest, request_hash, request_json
from benchledger.harness.models.response import ModelResponse, response_from_json
from benchledger.harness.models.transport import ModelObserver


class LogTransport:
    """Serves recorded responses for matching request hashes; a miss raises ``Divergence``.

    Built from ``model_call`` bodies (``ledger.events.ModelCallBody`` or anything with
    ``request_hash``, ``request``, ``response``) in recorded order. Bodies with a
    non-empty ``error`` are failed attempts and are skipped. Responses recorded for
    one hash are served in recorded order. Never makes a live call.
    """

    name = "log"

    def __init__(self, recorded: Iterable[Any]) -> None:
        self._order: list[tuple[str, Any]] = []  # (hash, recorded request) of each response
        self._queues: dict[str, deque[tuple[int, ModelResponse]]] = {}
        for body in recorded:
            if getattr(body, "error", ""):
                continue
            index = len(self._order)
            self._order.append((body.request_hash, body.request))
            # Decode now: a malformed recorded response fails at load, not mid-replay.
            resp = response_from_json(body.response)
            self._queues.setdefault(body.request_hash, deque()).append((index, resp))
        self._served = 0

    async def complete(
        self,
        request: CanonicalRequest,
        *,
        observer: ModelObserver | None = None,
        hint: Any = None,
    ) -> ModelResponse:
        """The next recorded response for ``request``'s hash; ``Divergence`` if there is none."""
        h = request_hash(request)
        queue = self._queues.get(h)
        if not queue:
            heads = [q[0][0] for q in self._queues.values() if q]
            expected_hash, expected = self._order[min(heads)] if heads else ("", None)
            used_up = queue is not None
            raise Divergence(
                h,
                expected_hash,
                self._served,
                reason="its recorded responses are used up" if used_up else "not in the log",
                request=request_json(request),
                expected=expected,
            )
        self._served += 1
        return queue.popleft()[1]

    def unused(self) -> list[str]:
        """Hashes of recorded responses never served, in recorded order (replay reports them)."""
        left = sorted(i for q in self._queues.values() for i, _ in q)
        return [self._order[i][0] for i in left]
