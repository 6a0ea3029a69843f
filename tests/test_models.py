"""The model layer: canonical requests and their hash, fake and log transports, model agents."""

from __future__ import annotations

import asyncio
import json
from typing import Any, NamedTuple

import msgspec
import pytest

from benchledger import protocols
from benchledger.harness.agents import FakeModelAgent, ModelAgent, ScriptedAgent, from_spec
from benchledger.harness.agents.base import Episode, Turn, UnitInfo
from benchledger.harness.errors import InfraError
from benchledger.harness.models import (
    AttemptFailure,
    CanonicalRequest,
    Divergence,
    FakeTransport,
    ModelResponse,
    ModelToolCall,
    build_request,
    request_hash,
    request_json,
    response_json,
)
from benchledger.harness.prompts import SYSTEM
from benchledger.harness.settings import load as load_settings
from benchledger.ledger.events import ModelCallBody
from benchledger.replay.log_transport import LogTransport

TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "description": "Search memory and the catalog.",
        "input_schema": {"type": "object", "properties": {"intent": {"type": "string"}}},
    },
    {
        "name": "query_sql",
        "description": "Run SQL.",
        "input_schema": {"type": "object", "properties": {"sql": {"type": "string"}}},
    },
]
MESSAGES: list[dict[str, Any]] = [{"role": "user", "text": "Which region leads?"}]


def fixed_request(**change: Any) -> CanonicalRequest:
    args: dict[str, Any] = {
        "model": "fake-model",
        "system": "You are a careful analyst.",
        "messages": MESSAGES,
        "tools": TOOLS,
        "params": {"max_tokens": 1024, "temperature": 0.0},
        "tool_choice": "auto",
    }
    args.update(change)
    return build_request(
        args["model"],
        args["system"],
        args["messages"],
        args["tools"],
        params=args["params"],
        tool_choice=args["tool_choice"],
    )


def protocol() -> protocols.schema.Protocol:
    return protocols.load(protocols.LIFECYCLE_DIR).by_id()["bl-keystone-region"]


def recall_episode() -> Episode:
    p = protocol()
    return Episode("recall", SYSTEM["recall"], p.recall.prompt, p, 15)


# -- the canonical request and its hash ---------------------------------------------------


# blake3 of the sorted-key, whitespace-free UTF-8 JSON of fixed_request() (checked against
# json.dumps(sort_keys=True, separators=(",", ":")) when pinned).
PINNED = "3484e2c3710c62e895999fc892e0f09088697103d50090596b534e796e0a62c7"


def test_the_hash_of_a_fixed_request_is_pinned():
    # A change here means every recorded run's request hashes change: replay of old runs
    # breaks. Change the literal only together with a deliberate encoding change.
    req = fixed_request()
    assert request_hash(req) == PINNED
    assert request_json(req) == {
        "model": "fake-model",
        "system": "You are a careful analyst.",
        "messages": MESSAGES,
        "tools": TOOLS,
        "params": {"max_tokens": 1024, "temperature": 0.0},
    }


def _schema_changed() -> list[dict[str, Any]]:
    tools = json.loads(json.dumps(TOOLS))
    tools[0]["input_schema"]["required"] = ["intent"]
    return tools


@pytest.mark.parametrize(
    "change",
    [
        {"model": "other-model"},
        {"system": "You are terse."},
        {"messages": [*MESSAGES, {"role": "assistant", "text": "ok"}]},
        {"messages": [{"role": "user", "text": "Which region lags?"}]},
        {"tools": TOOLS[:1]},
        {"tools": TOOLS[::-1]},
        {"tools": _schema_changed()},
        {"tool_choice": "any"},
        {"params": {"max_tokens": 1024, "temperature": 0.5}},
        {"params": {"max_tokens": 1024, "temperature": 0.0, "top_p": 0.9}},
        {"params": {}},
    ],
    ids=[
        "model",
        "system",
        "messages-appended",
        "message-text",
        "tool-dropped",
        "tool-order",
        "tool-schema",
        "tool_choice",
        "param-value",
        "param-added",
        "params-empty",
    ],
)
def test_the_request_hash_changes_when_any_input_changes(change):
    assert request_hash(fixed_request(**change)) != request_hash(fixed_request())


def test_mutating_the_callers_messages_after_building_does_not_change_the_request():
    messages = [{"role": "user", "text": "Which region leads?"}]
    params = {"max_tokens": 1024, "temperature": 0.0}
    tools = json.loads(json.dumps(TOOLS))
    req = fixed_request(messages=messages, params=params, tools=tools)
    before = request_hash(req)
    messages.append({"role": "assistant", "text": "later"})
    messages[0]["text"] = "changed"
    params["temperature"] = 1.0
    tools[0]["input_schema"]["properties"]["intent"]["type"] = "integer"
    assert request_hash(req) == before == request_hash(fixed_request())


def test_a_recorded_request_decodes_back_to_an_equal_request_with_the_same_hash():
    req = fixed_request(tool_choice="any")
    wire = msgspec.json.decode(msgspec.json.encode(request_json(req)))
    back = msgspec.convert(wire, CanonicalRequest)
    assert back == req and request_hash(back) == request_hash(req)


@pytest.mark.parametrize(
    "params",
    [
        {"api_key": "sk-1"},
        {"Authorization": "Bearer x"},
        {"x-api-key": "k"},
        {"token": "t"},
        {"access_token": "t"},
        {"client_secret": "s"},
        {"extra_headers": {"X-Api-Key": "k"}},
    ],
    ids=["api_key", "authorization", "x-api-key", "token", "access_token", "secret", "nested"],
)
def test_credential_looking_params_are_refused(params):
    with pytest.raises(ValueError, match="look like credentials"):
        build_request("m", "s", MESSAGES, TOOLS, params={"max_tokens": 10, **params})


@pytest.mark.parametrize(
    "params",
    [
        {"max_tokens": 10},
        {"max_completion_tokens": 10},
        {"temperature": 0.2, "top_p": 0.9, "stop_sequences": ["END"]},
        {"prompt_cache_key": "unit-1"},
    ],
    ids=["max_tokens", "max_completion_tokens", "sampling", "prompt_cache_key"],
)
def test_sampling_params_that_merely_mention_tokens_are_accepted(params):
    assert build_request("m", "s", MESSAGES, TOOLS, params=params).params == params


def test_a_model_agent_refuses_credential_params_at_construction():
    with pytest.raises(ValueError, match="api_key"):
        FakeModelAgent(0, params={"api_key": "sk-1"})


# -- transports ---------------------------------------------------------------------------


def test_the_fake_transport_is_deterministic_and_derives_usage_from_sizes():
    def decide(request: CanonicalRequest, hint: Any) -> ModelResponse:
        return ModelResponse(text=f"{hint}: {len(request.messages)} messages")

    transport = FakeTransport(decide, delay_s=0, model="fm")
    req = fixed_request()
    first, second = asyncio.run(_twice(transport, req, "h"))
    assert first == second
    chars = len(MESSAGES[0]["text"])
    assert first.usage == {
        "input_tokens": 1 + chars // 4,
        "output_tokens": 1 + len(first.text) // 4,
    }
    assert first.model == "fm" and first.stop_reason == "end_turn"


def test_the_fake_transport_waits_its_delay_and_marks_tool_use():
    def decide(request: CanonicalRequest, hint: Any) -> ModelResponse:
        return ModelResponse(tool_calls=[ModelToolCall("c1", "search", {"intent": "x"})])

    transport = FakeTransport(decide, delay_s=0.05)

    async def timed() -> tuple[float, ModelResponse]:
        loop = asyncio.get_running_loop()
        start = loop.time()
        resp = await transport.complete(fixed_request())
        return loop.time() - start, resp

    elapsed, resp = asyncio.run(timed())
    assert elapsed >= 0.05 and resp.stop_reason == "tool_use"


async def _twice(transport: Any, req: CanonicalRequest, hint: Any) -> list[ModelResponse]:
    return [await transport.complete(req, hint=hint) for _ in range(2)]


class Recorded(NamedTuple):
    """A model_call body as LogTransport reads it, with the ``error`` field of failed attempts."""

    request_hash: str
    request: Any
    response: Any
    error: str = ""


def recorded(req: CanonicalRequest, text: str, error: str = "") -> Recorded:
    return Recorded(request_hash(req), request_json(req), response_json(ModelResponse(text)), error)


def test_the_log_serves_responses_of_one_hash_in_recorded_order():
    a, b = fixed_request(), fixed_request(system="other")
    log = LogTransport([recorded(a, "a1"), recorded(b, "b1"), recorded(a, "a2")])
    texts = asyncio.run(_serve(log, [a, a, b]))
    assert texts == ["a1", "a2", "b1"] and log.unused() == []


async def _serve(log: LogTransport, reqs: list[CanonicalRequest]) -> list[str]:
    return [(await log.complete(r)).text for r in reqs]


def test_the_log_raises_divergence_for_a_request_it_never_recorded():
    a, b, c = fixed_request(), fixed_request(system="b"), fixed_request(system="c")
    log = LogTransport([recorded(a, "a1"), recorded(b, "b1")])
    asyncio.run(_serve(log, [a]))
    with pytest.raises(Divergence) as err:
        asyncio.run(_serve(log, [c]))
    d = err.value
    assert (d.request_hash, d.expected_hash, d.position) == (request_hash(c), request_hash(b), 1)
    assert d.request == request_json(c) and d.expected == request_json(b)
    assert "diverged at model call 1" in str(d) and "diff the request" in str(d)


def test_the_log_raises_divergence_when_the_recorded_responses_are_used_up():
    a = fixed_request()
    log = LogTransport([recorded(a, "a1")])
    asyncio.run(_serve(log, [a]))
    with pytest.raises(Divergence) as err:
        asyncio.run(_serve(log, [a]))
    d = err.value
    assert (d.request_hash, d.expected_hash, d.position) == (request_hash(a), "", 1)
    assert d.expected is None and "used up" in str(d) and "no recorded model calls left" in str(d)


def test_the_log_skips_failed_attempts():
    a = fixed_request()
    log = LogTransport([recorded(a, "", error="rate_limited: 429"), recorded(a, "ok")])
    assert asyncio.run(_serve(log, [a])) == ["ok"]
    with pytest.raises(Divergence):
        asyncio.run(_serve(log, [a]))


def test_the_log_reports_responses_it_never_served_in_recorded_order():
    a, b, c = fixed_request(), fixed_request(system="b"), fixed_request(system="c")
    log = LogTransport([recorded(a, "1"), recorded(b, "2"), recorded(c, "3"), recorded(a, "4")])
    asyncio.run(_serve(log, [b]))
    assert log.unused() == [request_hash(a), request_hash(c), request_hash(a)]


def test_the_log_returns_tool_calls_and_usage_as_recorded():
    a = fixed_request()
    resp = ModelResponse(
        text="",
        tool_calls=[ModelToolCall("c1", "search", {"intent": "x", "limit": 10})],
        stop_reason="tool_use",
        usage={"input_tokens": 5, "output_tokens": 2, "cache_read_tokens": 3},
        model="m-1",
    )
    wire = msgspec.json.decode(msgspec.json.encode(response_json(resp)))
    log = LogTransport(
        [ModelCallBody(episode="recall", request_hash=request_hash(a), response=wire)]
    )
    assert asyncio.run(log.complete(a)) == resp


# -- agents over transports ---------------------------------------------------------------


def tool_result(call_name: str, fact: str) -> str:
    """What the platform would answer: the fact surfaces, the stored query returns a row."""
    return (
        json.dumps({"groups": [{"text": fact}]})
        if call_name == "search"
        else '{"rows": [["North"]]}'
    )


async def drive(agent: Any, episode: Episode, observer: Any = None) -> list[Turn]:
    """An episode-like loop without a platform: turns until the agent answers."""
    messages: list[dict[str, Any]] = [{"role": "user", "text": episode.user_prompt}]
    turns: list[Turn] = []
    for _ in range(6):
        turn = await agent.next_turn(episode, messages, TOOLS, observer)
        turns.append(turn)
        if not turn.tool_calls:
            return turns
        messages.append(
            {
                "role": "assistant",
                "text": turn.text,
                "tool_calls": [c._asdict() for c in turn.tool_calls],
            }
        )
        for call in turn.tool_calls:
            text = tool_result(call.name, episode.protocol.fact)
            messages.append(
                {
                    "role": "tool",
                    "call_id": call.id,
                    "name": call.name,
                    "text": text,
                    "is_error": False,
                }
            )
    raise AssertionError("the agent never answered")


def test_a_model_agent_over_the_log_reproduces_a_recorded_fake_episode():
    ep = recall_episode()
    live = asyncio.run(drive(FakeModelAgent(0), ep))
    assert [t.tool_calls[0].name for t in live[:-1]] == ["search", "trino_query"]
    assert live[-1].text == "FINAL ANSWER: North"
    bodies = [
        ModelCallBody(
            episode=ep.stage,
            request_hash=t.request_hash,
            request=t.request,
            response=t.response,
            usage=t.usage or {},
        )
        for t in live
    ]
    # Through the ledger's JSON, as a replay would read them.
    bodies = [msgspec.json.decode(msgspec.json.encode(b), type=ModelCallBody) for b in bodies]
    log = LogTransport(bodies)
    replayed = asyncio.run(drive(from_spec("fake:0", transport=log), ep))
    assert [t._replace(latency_ms=0) for t in replayed] == [t._replace(latency_ms=0) for t in live]
    assert log.unused() == []


def test_a_fake_model_turn_records_the_canonical_request_and_its_hash():
    ep = recall_episode()
    turn = asyncio.run(FakeModelAgent(0, params={"max_tokens": 512}).next_turn(ep, MESSAGES, TOOLS))
    req = build_request("fake-model", ep.system_prompt, MESSAGES, TOOLS, params={"max_tokens": 512})
    assert turn.request == request_json(req) and turn.request_hash == request_hash(req)
    assert turn.request["tools"][0]["input_schema"] == TOOLS[0]["input_schema"]
    assert turn.response == response_json(msgspec.convert(turn.response, ModelResponse))
    assert turn.usage == turn.response["usage"] and turn.retry == 0


def test_a_replay_with_changed_params_diverges_at_the_first_call():
    ep = recall_episode()
    live = asyncio.run(drive(FakeModelAgent(0), ep))
    log = LogTransport([Recorded(t.request_hash, t.request, t.response) for t in live])
    with pytest.raises(Divergence) as err:
        asyncio.run(drive(from_spec("fake:0", transport=log, params={"temperature": 0.0}), ep))
    assert err.value.position == 0 and err.value.expected_hash == live[0].request_hash


class FlakyTransport:
    """Test-only: fails ``failures`` times (reporting each), then answers; gives up at ``limit``."""

    name = "flaky"

    def __init__(self, failures: int, limit: int = 3) -> None:
        self.failures, self.limit = failures, limit

    async def complete(
        self, request: CanonicalRequest, *, observer: Any = None, hint: Any = None
    ) -> ModelResponse:
        for attempt in range(self.limit):
            if attempt >= self.failures:
                return ModelResponse(text="done", usage={"input_tokens": 1, "output_tokens": 1})
            failure = AttemptFailure(attempt, "rate_limited", "429 Too Many Requests", 429, 0.5)
            if observer is not None:
                observer.attempt_failed(request, failure)
        raise InfraError("rate_limited", f"gave up after {self.limit} attempts", retryable=True)


class Failures:
    def __init__(self) -> None:
        self.seen: list[tuple[str, AttemptFailure]] = []

    def attempt_failed(self, request: CanonicalRequest, failure: AttemptFailure) -> None:
        self.seen.append((request_hash(request), failure))


def test_an_observer_receives_every_failed_attempt_and_the_turn_counts_them():
    observer = Failures()
    agent = ModelAgent(FlakyTransport(failures=2), model="m")
    turn = asyncio.run(agent.next_turn(recall_episode(), MESSAGES, TOOLS, observer))
    assert turn.text == "done" and turn.retry == 2
    assert [f.attempt for _, f in observer.seen] == [0, 1]
    assert {h for h, _ in observer.seen} == {turn.request_hash}
    assert observer.seen[0][1].status == 429 and observer.seen[0][1].kind == "rate_limited"


def test_a_transport_that_gives_up_raises_an_infra_error():
    observer = Failures()
    agent = ModelAgent(FlakyTransport(failures=5), model="m")
    with pytest.raises(InfraError) as err:
        asyncio.run(agent.next_turn(recall_episode(), MESSAGES, TOOLS, observer))
    assert err.value.kind == "rate_limited" and len(observer.seen) == 3


# -- agent specs ----------------------------------------------------------------------------


def test_a_fake_spec_with_a_transport_gives_a_model_agent_over_it():
    log = LogTransport([])
    agent = from_spec("fake:0", transport=log)
    assert isinstance(agent, ModelAgent) and not isinstance(agent, FakeModelAgent)
    assert (
        agent.transport is log and agent.model == "fake-model" and agent.name == "fake:fake-model"
    )


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ("anthropic:claude-x", "needs an API key: set ANTHROPIC_API_KEY"),
        ("openai:gpt-x", "name the server"),
        ("fake:soon", "delay must be seconds"),
        (
            "llama",
            r"no such model provider \(known: anthropic, calibration, fake, full-context, "
            r"no-memory, openai, recorded, retrieval, scripted\)",
        ),
    ],
    ids=["anthropic", "openai", "bad-delay", "unknown"],
)
def test_unusable_agent_specs_are_refused_with_what_to_use(spec, message):
    with pytest.raises(ValueError, match=message):
        from_spec(spec, settings=load_settings({}))  # no keys in this environment


def test_a_provider_spec_with_a_transport_uses_the_named_model():
    agent = from_spec("anthropic:claude-x", transport=LogTransport([]), params={"max_tokens": 5})
    assert isinstance(agent, ModelAgent)
    assert (agent.model, agent.name, agent.params) == (
        "claude-x",
        "anthropic:claude-x",
        {"max_tokens": 5},
    )


@pytest.mark.parametrize("spec", ["scripted", "fake:0"], ids=["scripted", "fake"])
def test_stateless_agents_are_their_own_per_unit_agent(spec):
    agent = from_spec(spec)
    assert agent.for_unit(UnitInfo("r/p/1", "p", 1, "a@x", "b@x")) is agent


def test_the_fake_model_agent_plays_the_scripted_agents_decisions():
    ep = recall_episode()
    live = asyncio.run(drive(FakeModelAgent(0), ep))
    scripted = asyncio.run(drive(ScriptedAgent(), ep))
    assert [(t.text, t.tool_calls) for t in live] == [(t.text, t.tool_calls) for t in scripted]
