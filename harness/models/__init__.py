"""The model layer under the agents: one canonical request, transports beneath it.

An agent's policy builds a ``CanonicalRequest`` with ``build_request`` and hands it to
a ``ModelTransport``: a real provider, the ``FakeTransport``, the recorded run's
``RecordedTransport`` or, in replay, ``replay.log_transport.LogTransport``, which serves
recorded responses by ``request_hash`` and raises ``Divergence`` on a miss.
"""

from __future__ import annotations

from benchledger.harness.models.errors import Divergence, ModelError
from benchledger.harness.models.fake import FakeTransport, fake_usage
from benchledger.harness.models.request import (
    CanonicalRequest,
    ToolSpec,
    build_request,
    looks_like_credential,
    request_hash,
    request_json,
)
from benchledger.harness.models.response import (
    ModelResponse,
    ModelToolCall,
    response_from_json,
    response_json,
)
from benchledger.harness.models.transport import (
    FAILURE_KINDS,
    AttemptFailure,
    ModelObserver,
    ModelTransport,
)

__all__ = [
    "FAILURE_KINDS",
    "AttemptFailure",
    "CanonicalRequest",
    "Divergence",
    "FakeTransport",
    "ModelError",
    "ModelObserver",
    "ModelResponse",
    "ModelToolCall",
    "ModelTransport",
    "ToolSpec",
    "build_request",
    "fake_usage",
    "looks_like_credential",
    "request_hash",
    "request_json",
    "response_from_json",
    "response_json",
]
