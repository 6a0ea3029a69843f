"""The model provider (transport) contract: what every ``ModelTransport`` must do.

A transport (harness/models/transport.py) answers a canonical request with a
``ModelResponse`` that the agent loop (``harness.agents.ModelAgent``) takes as a turn and
records as a ``model_call``. A provider author subclasses ``ModelTransportContract``
(named ``Test...``) and gives it a fresh transport::

    class TestMyProvider(ModelTransportContract):
        def create_transport(self):
            return MyTransport("my-model", base_url=self.server_url)

        def create_failing_transport(self, retryable):
            ...  # one whose endpoint is down (retryable) or refuses the key (not)

The request every test sends is ``request()``: the recall episode of benchledger's first
lifecycle protocol (``episode()``), with one search tool; override either to change it.
"""

from __future__ import annotations

import asyncio
from typing import Any, ClassVar, Final

import msgspec
import pytest

from benchledger import protocols
from benchledger.harness.agents.base import Episode, Turn
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.errors import InfraError
from benchledger.harness.models.request import CanonicalRequest, build_request, request_hash
from benchledger.harness.models.response import ModelResponse, response_from_json, response_json
from benchledger.harness.models.transport import FAILURE_KINDS, AttemptFailure, ModelTransport
from benchledger.harness.prompts import SYSTEM

USAGE_KEYS: Final = frozenset(
    {"input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens"}
)
SEARCH: Final = {
    "name": "search",
    "description": "Search memory for what you were told before.",
    "input_schema": {"type": "object", "properties": {"intent": {"type": "string"}}},
}


class FailedAttempts:
    """A ModelObserver keeping every failed attempt it is told about."""

    def __init__(self) -> None:
        self.failures: list[AttemptFailure] = []

    def attempt_failed(self, request: CanonicalRequest, failure: AttemptFailure) -> None:
        self.failures.append(failure)


class ModelTransportContract:
    """The contract every model transport passes; subclass it with ``create_transport``."""

    # Whether the transport claims one answer per request: two fresh transports answer
    # the same request alike (a fake or a replay log does; a live provider need not).
    deterministic: ClassVar[bool] = False
    model: ClassVar[str] = "contract-model"

    def create_transport(self) -> ModelTransport:
        """A fresh transport that answers ``request()``."""
        raise NotImplementedError(f"{type(self).__name__} must define create_transport()")

    def create_failing_transport(self, retryable: bool) -> ModelTransport | None:
        """A transport whose every attempt fails: transiently (``retryable``: unreachable,
        overloaded) or for good (the key refused); None when it has no endpoint to fail."""
        return None

    def episode(self) -> Episode:
        """The episode the request belongs to (passed as ``hint``, as the agent loop does)."""
        p = protocols.load(protocols.LIFECYCLE_DIR).protocols[0]
        return Episode("recall", SYSTEM["recall"], p.recall.prompt, p, p.budget_tool_calls)

    def request(self) -> CanonicalRequest:
        """The canonical request every test sends, built from ``episode()``."""
        ep = self.episode()
        return build_request(
            self.model,
            ep.system_prompt,
            [{"role": "user", "text": ep.user_prompt}],
            [SEARCH],
            params={"max_tokens": 512, "temperature": 0.0},
        )

    def complete(
        self, transport: ModelTransport, observer: FailedAttempts | None = None
    ) -> ModelResponse:
        """``request()`` sent once through ``transport``, with the episode as hint."""
        return asyncio.run(
            transport.complete(self.request(), observer=observer, hint=self.episode())
        )

    def test_it_has_a_name(self) -> None:
        name = self.create_transport().name
        assert isinstance(name, str) and name, "a transport's name names its agents"

    def test_it_answers_a_canonical_request_with_a_model_response(self) -> None:
        response = self.complete(self.create_transport())
        assert isinstance(response, ModelResponse)
        assert response.text or response.tool_calls, "an answer is text or tool calls"
        assert response.stop_reason, "a response says why it stopped"

    def test_tool_calls_name_offered_tools_with_unique_ids(self) -> None:
        request, response = self.request(), self.complete(self.create_transport())
        offered = {t.name for t in request.tools}
        assert all(c.name in offered for c in response.tool_calls)
        ids = [c.id for c in response.tool_calls]
        assert all(ids) and len(set(ids)) == len(ids)
        assert all(isinstance(c.arguments, dict) for c in response.tool_calls)
        if response.tool_calls:
            assert response.stop_reason == "tool_use"

    def test_usage_is_reported_in_tokens(self) -> None:
        usage = self.complete(self.create_transport()).usage
        assert {"input_tokens", "output_tokens"} <= set(usage) <= USAGE_KEYS, usage
        assert all(isinstance(n, int) and n >= 0 for n in usage.values()), usage

    def test_the_response_records_and_reads_back_unchanged(self) -> None:
        # A model_call records response_json; replay serves response_from_json of it.
        response = self.complete(self.create_transport())
        assert response_from_json(response_json(response)) == response

    def test_the_call_leaves_the_request_as_it_was(self) -> None:
        request = self.request()
        before = request_hash(request)
        asyncio.run(self.create_transport().complete(request, hint=self.episode()))
        assert request_hash(request) == before, "the hash is recorded after the call"

    def test_the_agent_loop_takes_the_answer_as_a_turn_and_records_it(self) -> None:
        request, episode = self.request(), self.episode()
        agent = ModelAgent(self.create_transport(), model=request.model, params=request.params)
        tools: list[dict[str, Any]] = msgspec.to_builtins(request.tools)
        turn: Turn = asyncio.run(agent.next_turn(episode, request.messages, tools))
        assert turn.request_hash == request_hash(request)
        assert turn.text or turn.tool_calls
        assert turn.usage == response_from_json(turn.response).usage
        assert turn.retry == 0

    def test_the_same_request_gets_the_same_answer_where_it_claims_so(self) -> None:
        if not self.deterministic:
            pytest.skip(f"{type(self).__name__} does not claim determinism (deterministic=False)")
        first = self.complete(self.create_transport())
        assert self.complete(self.create_transport()) == first

    @pytest.mark.parametrize("retryable", [True, False], ids=["transient", "refused"])
    def test_a_call_that_fails_is_an_infra_error_saying_whether_a_retry_may_help(
        self, retryable: bool
    ) -> None:
        transport = self.create_failing_transport(retryable)
        if transport is None:
            pytest.skip(f"{type(self).__name__} has no endpoint to fail (no failing transport)")
        seen = FailedAttempts()
        with pytest.raises(InfraError) as err:
            self.complete(transport, seen)
        assert err.value.retryable is retryable
        assert err.value.kind in FAILURE_KINDS
        # Every failed attempt was told to the observer (each becomes a model_call event).
        assert [f.attempt for f in seen.failures] == list(range(len(seen.failures)))
        assert seen.failures and all(f.kind in FAILURE_KINDS for f in seen.failures)
        assert seen.failures[-1].kind == err.value.kind
