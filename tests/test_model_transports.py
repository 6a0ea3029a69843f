"""Model transports over real HTTP: the Anthropic SDK and chat completions against loopback fakes.

No network beyond loopback and no patching: the fakes are real HTTP servers, sleeps
are injected (they record the delays they were asked for), and runs go through the
real driver and command line.
"""

from __future__ import annotations

import asyncio
import collections
import email.utils
import gzip
import os
import re
import shlex
import socket
import time
from collections.abc import Iterator
from typing import Any

import pytest

from benchledger import protocols
from benchledger.cli import build_parser, main
from benchledger.harness.agents import ModelAgent, ScriptedAgent, from_spec
from benchledger.harness.driver import Progress, RunDriver
from benchledger.harness.errors import InfraError
from benchledger.harness.models import AttemptFailure, CanonicalRequest, build_request, request_hash
from benchledger.harness.models.anthropic import AnthropicTransport, messages, messages_body
from benchledger.harness.models.limiter import RateLimiter, estimate_tokens, used_tokens
from benchledger.harness.models.openai import OpenAICompatTransport, chat_body, to_response
from benchledger.harness.models.preflight import PROMPT as PREFLIGHT_PROMPT
from benchledger.harness.models.retry import RetryPolicy, retry_after
from benchledger.harness.record import RunConfig, contradictions
from benchledger.harness.settings import Settings
from benchledger.harness.unit import SystemClock
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    InfraErrorEvent,
    ModelCallEvent,
    PlatformRecord,
    RunRecord,
    RunStartedEvent,
    UnitFinishedEvent,
    is_probe_stream,
)
from benchledger.projections.fold import fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from tests.conftest import protocol_subset
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.brain import ScriptedBrain
from tests.fakes.openai_api import FakeOpenAI
from tests.fakes.server import FakeProvider, Fault, Reply

SUBSET = ["bl-keystone-region", "bl-margin-region", "bl-focus-region", "bl-showcase-region"]
KEY = "sk-ant-PLANTED-" + "q7Zx" * 10
OPENAI_KEY = "sk-PLANTED-openai-" + "w9Yv" * 8
MODEL = "claude-test"
SYSTEM_PROMPT = "You are a careful analyst."
TOOLS: list[dict[str, Any]] = [
    {
        "name": "search",
        "description": "Search memory.",
        "input_schema": {"type": "object", "properties": {"intent": {"type": "string"}}},
    },
    {
        "name": "query_sql",
        "description": "Run SQL.",
        "input_schema": {"type": "object", "properties": {"sql": {"type": "string"}}},
    },
]
CONVERSATION: list[dict[str, Any]] = [
    {"role": "user", "text": "Which region leads?"},
    {
        "role": "assistant",
        "text": "Let me look.",
        "tool_calls": [
            {"id": "c1", "name": "search", "arguments": {"intent": "region"}},
            {"id": "c2", "name": "query_sql", "arguments": {"sql": "SELECT 1"}},
        ],
    },
    {"role": "tool", "call_id": "c1", "name": "search", "text": '{"hits": []}', "is_error": False},
    {"role": "tool", "call_id": "c2", "name": "query_sql", "text": "refused", "is_error": True},
    {"role": "user", "text": "Answer now."},
]


# -- helpers ------------------------------------------------------------------------------------


class Sleeps:
    """An injected sleep: records each delay, advances a fake clock, never waits."""

    def __init__(self) -> None:
        self.delays: list[float] = []
        self.now = 1000.0

    def time(self) -> float:
        return self.now

    async def __call__(self, seconds: float) -> None:
        self.delays.append(round(seconds, 3))
        self.now += seconds


class Observed:
    """A ModelObserver that keeps the failed attempts."""

    def __init__(self) -> None:
        self.failures: list[AttemptFailure] = []

    def attempt_failed(self, request: CanonicalRequest, failure: AttemptFailure) -> None:
        self.failures.append(failure)


class NoWaitClock(SystemClock):
    """The unit's clock with its retry backoff skipped (the episode retries are under test)."""

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


def request(messages_: list[dict[str, Any]] | None = None, **params: Any) -> CanonicalRequest:
    return build_request(
        MODEL,
        SYSTEM_PROMPT,
        messages_ if messages_ is not None else CONVERSATION,
        TOOLS,
        params={"max_tokens": 512, "temperature": 0.0, **params},
    )


def subset(tmp_path, ids=SUBSET) -> str:
    return protocol_subset(tmp_path, list(ids))


def brain_for(path: str) -> ScriptedBrain:
    return ScriptedBrain(protocols.load(path).protocols)


def first_user_text(body: dict[str, Any]) -> str:
    first = next(m for m in body["messages"] if m["role"] == "user")
    content = first["content"]
    return content if isinstance(content, str) else content[0].get("text", "")


def fake(provider: str, brain: ScriptedBrain | None = None, **kw: Any) -> FakeProvider:
    return (FakeAnthropic if provider == "anthropic" else FakeOpenAI)(brain, **kw)


def transport(provider: str, url: str, sleeps: Sleeps, **kw: Any) -> Any:
    if provider == "anthropic":
        return AnthropicTransport(MODEL, api_key=KEY, base_url=url, sleep=sleeps, **kw)
    return OpenAICompatTransport(MODEL, base_url=f"{url}/v1", sleep=sleeps, **kw)


def run_driver(tmp_path, path: str, agent_transport: Any, **kw: Any) -> tuple[Any, list[Any]]:
    """Run the suite with a model agent over ``agent_transport``; (result, events)."""
    ledger = Ledger(open_store(str(tmp_path / "drive.sqlite")))
    agent = ModelAgent(agent_transport, model=MODEL, params={"max_tokens": 512}, name="m:x")
    cfg = RunConfig(protocols_path=path, run_id="r", concurrency=1)
    try:
        result = asyncio.run(RunDriver(ledger, cfg, agent=agent, **kw).execute())
        failure, _ = ledger.verify("r", require_seal=bool(result.root))
        assert failure is None
        return result, [e for e, _ in ledger.events("r")]
    finally:
        ledger.store.close()


def metrics(path: str, run_id: str) -> dict[str, tuple[int, int]]:
    store = open_store(path)
    try:
        card = scorecard([fold(LifecycleFold(), from_ledger(Ledger(store), run_id).events)])
    finally:
        store.close()
    return {k: (m.num, m.den) for k, m in card.metrics.items()}


def ledger_events(path: str, run_id: str) -> list[Any]:
    store = open_store(path)
    try:
        return [e for e, _ in Ledger(store).events(run_id)]
    finally:
        store.close()


@pytest.fixture
def no_provider_env(monkeypatch) -> None:
    """Provider variables from the developer's shell must not leak into these tests."""
    for name in ("ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "OPENAI_API_KEY"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def one(tmp_path) -> str:
    return subset(tmp_path, ["bl-keystone-region"])


@pytest.fixture
def served() -> Iterator[list[FakeProvider]]:
    """Fakes started by a test, stopped after it."""
    started: list[FakeProvider] = []
    yield started
    for srv in started:
        srv.stop()


def start(served: list[FakeProvider], srv: FakeProvider) -> FakeProvider:
    served.append(srv.start())
    return srv


# -- request translation ------------------------------------------------------------------------


def test_the_anthropic_request_is_pinned_to_the_messages_api_shape():
    assert messages_body(request()) == {
        "model": MODEL,
        "max_tokens": 512,
        "system": [
            {"type": "text", "text": SYSTEM_PROMPT, "cache_control": {"type": "ephemeral"}}
        ],
        "messages": [
            {"role": "user", "content": [{"type": "text", "text": "Which region leads?"}]},
            {
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "c1", "name": "search",
                     "input": {"intent": "region"}},
                    {"type": "tool_use", "id": "c2", "name": "query_sql",
                     "input": {"sql": "SELECT 1"}},
                ],
            },
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": "c1", "content": '{"hits": []}'},
                    {"type": "tool_result", "tool_use_id": "c2", "content": "refused",
                     "is_error": True},
                    {"type": "text", "text": "Answer now.",
                     "cache_control": {"type": "ephemeral"}},
                ],
            },
        ],
        "tools": [
            {"name": t["name"], "description": t["description"], "input_schema": t["input_schema"]}
            for t in TOOLS
        ],
        "tool_choice": {"type": "auto"},
        "temperature": 0.0,
    }  # fmt: skip


@pytest.mark.parametrize(
    ("tail", "user_turns"),
    [
        ([CONVERSATION[2]], [["tool_result"]]),
        (CONVERSATION[2:4], [["tool_result", "tool_result"]]),
        (CONVERSATION[2:5], [["tool_result", "tool_result", "text"]]),
    ],
    ids=["one-result", "two-results-one-turn", "results-then-text-one-turn"],
)
def test_consecutive_tool_results_go_back_as_one_user_turn(tail, user_turns):
    out = messages(CONVERSATION[:2] + tail)
    assert [m["role"] for m in out] == ["user", "assistant", "user"]
    assert [[b["type"] for b in m["content"]] for m in out[2:]] == user_turns


def test_the_sdk_sends_exactly_the_translated_body_with_the_key_only_in_a_header(served):
    srv = start(served, FakeAnthropic(replies=[Reply("FINAL ANSWER: West")], key=KEY))
    resp = asyncio.run(transport("anthropic", srv.url, Sleeps()).complete(request()))
    assert resp.text == "FINAL ANSWER: West" and resp.stop_reason == "end_turn"
    (seen,) = srv.seen
    assert seen.body == messages_body(request())
    assert KEY not in seen.raw.decode()
    assert seen.headers.get("authorization") == f"Bearer {KEY}" or seen.headers["x-api-key"] == KEY


@pytest.mark.parametrize(
    "conversation",
    [CONVERSATION[:1], CONVERSATION[:3], CONVERSATION],
    ids=["first-turn", "after-a-tool-result", "after-results-and-text"],
)
def test_cache_breakpoints_sit_on_the_system_prompt_and_the_last_block_only(served, conversation):
    srv = start(served, FakeAnthropic(replies=[Reply("ok")]))
    asyncio.run(transport("anthropic", srv.url, Sleeps()).complete(request(conversation)))
    body = srv.seen[0].body
    marked = [("system", i) for i, b in enumerate(body["system"]) if "cache_control" in b]
    for mi, m in enumerate(body["messages"]):
        marked += [(mi, bi) for bi, b in enumerate(m["content"]) if "cache_control" in b]
    last = len(body["messages"]) - 1
    assert marked == [("system", 0), (last, len(body["messages"][last]["content"]) - 1)]


def test_the_chat_completions_request_is_pinned():
    tools = [
        {"type": "function", "function": {
            "name": t["name"], "description": t["description"], "parameters": t["input_schema"]}}
        for t in TOOLS
    ]  # fmt: skip
    assert chat_body(request(top_p=0.9)) == {
        "model": MODEL,
        "messages": [
            {"role": "system", "content": SYSTEM_PROMPT},
            {"role": "user", "content": "Which region leads?"},
            {
                "role": "assistant",
                "content": "Let me look.",
                "tool_calls": [
                    {"id": "c1", "type": "function",
                     "function": {"name": "search", "arguments": '{"intent": "region"}'}},
                    {"id": "c2", "type": "function",
                     "function": {"name": "query_sql", "arguments": '{"sql": "SELECT 1"}'}},
                ],
            },
            {"role": "tool", "tool_call_id": "c1", "content": '{"hits": []}'},
            {"role": "tool", "tool_call_id": "c2", "content": "refused"},
            {"role": "user", "content": "Answer now."},
        ],
        "tools": tools,
        "tool_choice": "auto",
        "max_tokens": 512,
        "temperature": 0.0,
        "top_p": 0.9,
    }  # fmt: skip


@pytest.mark.parametrize(("key", "header"), [("", None), (OPENAI_KEY, f"Bearer {OPENAI_KEY}")],
                         ids=["no-key-no-header", "key-as-bearer"])  # fmt: skip
def test_chat_completions_send_a_bearer_header_only_when_a_key_is_given(served, key, header):
    srv = start(served, FakeOpenAI(replies=[Reply("hi")]))
    t = OpenAICompatTransport(MODEL, base_url=f"{srv.url}/v1/", api_key=key)
    asyncio.run(t.complete(request()))
    (seen,) = srv.seen
    assert seen.path == "/v1/chat/completions" and seen.body == chat_body(request())
    assert seen.headers.get("authorization") == header
    assert not key or key not in seen.raw.decode()


@pytest.mark.parametrize(
    ("finish", "with_call", "stop", "calls"),
    [("stop", False, "end_turn", 0), ("stop", True, "tool_use", 1),
     ("tool_calls", True, "tool_use", 1), ("length", True, "max_tokens", 0),
     ("content_filter", True, "refusal", 0)],
    ids=["stop", "stop-with-calls-is-tool-use", "tool_calls", "length-drops-cut-calls",
         "content_filter-drops-calls"],
)  # fmt: skip
def test_finish_reasons_map_to_stop_reasons(finish, with_call, stop, calls):
    call = {"id": "x", "type": "function", "function": {"name": "search", "arguments": "{}"}}
    message = {"content": "t", "tool_calls": [call] if with_call else None}
    data = {
        "model": "m",
        "choices": [{"message": message, "finish_reason": finish}],
        "usage": {"prompt_tokens": 100, "completion_tokens": 7,
                  "prompt_tokens_details": {"cached_tokens": 60}},
    }  # fmt: skip
    resp = to_response(data)
    assert (resp.stop_reason, len(resp.tool_calls)) == (stop, calls)
    assert resp.usage == {"input_tokens": 40, "output_tokens": 7, "cache_read_tokens": 60,
                          "cache_creation_tokens": 0}  # fmt: skip


# -- faults and retries -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("provider", "kind", "status", "recorded_kind"),
    [
        ("anthropic", "rate_limited", 429, "rate_limited"),
        ("anthropic", "overloaded", 529, "overloaded"),
        ("anthropic", "server_error", 500, "http_5xx"),
        ("openai", "rate_limited", 429, "rate_limited"),
        ("openai", "overloaded", 503, "http_5xx"),
        ("openai", "server_error", 500, "http_5xx"),
    ],
    ids=["anthropic-429", "anthropic-529", "anthropic-500", "openai-429", "openai-503",
         "openai-500"],
)  # fmt: skip
def test_each_fault_is_retried_and_each_retry_is_a_model_call_event_with_its_error(
    tmp_path, one, served, provider, kind, status, recorded_kind
):
    srv = start(served, fake(provider, brain_for(one)))
    srv.fail(kind, kind)
    sleeps = Sleeps()
    result, evs = run_driver(tmp_path, one, transport(provider, srv.url, sleeps))
    assert result.root and not result.failed
    calls = [e.body for e in evs if isinstance(e, ModelCallEvent)]
    failed = [c for c in calls if c.error]
    assert [(c.error.split(":")[0], c.status, c.retry) for c in failed] == [
        (recorded_kind, status, 0),
        (recorded_kind, status, 1),
    ]
    assert all(c.response is None and c.request_hash == failed[0].request_hash for c in failed)
    answered = next(c for c in calls if not c.error)
    assert answered.retry == 2 and answered.request_hash == failed[0].request_hash
    assert sleeps.delays == [1.0, 2.0]  # no Retry-After: exponential backoff


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_timeout_is_retried_as_a_timeout(served, provider):
    srv = start(served, fake(provider, replies=[Reply("late"), Reply("on time")]))
    srv.fail(Fault("slow", delay_s=1.0))
    obs = Observed()
    t = transport(provider, srv.url, Sleeps(), timeout_s=0.2)
    resp = asyncio.run(t.complete(request(), observer=obs))
    assert obs.failures[0].kind == "timeout" and obs.failures[0].status == 0
    assert resp.text in ("late", "on time")


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_an_unreachable_server_is_retried_then_given_up_as_a_retryable_infra_error(provider):
    srv = fake(provider).start()
    url = srv.url
    srv.stop()  # nothing listens on the port now
    obs, sleeps = Observed(), Sleeps()
    t = transport(provider, url, sleeps, max_retries=2)
    with pytest.raises(InfraError) as err:
        asyncio.run(t.complete(request(), observer=obs))
    assert (err.value.kind, err.value.retryable) == ("transport", True)
    assert "after 3 attempts" in err.value.message
    assert [f.kind for f in obs.failures] == ["transport"] * 3
    assert sleeps.delays == [1.0, 2.0]


@pytest.mark.parametrize(
    ("headers", "delay"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5),
        ({"retry-after": "600"}, RetryPolicy.max_retry_after_s),
        ({}, 1.0),
    ],
    ids=["seconds", "milliseconds-first", "capped", "absent-backoff"],
)
@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_retry_after_is_honoured(served, provider, headers, delay):
    srv = start(served, fake(provider, replies=[Reply("ok")]))
    srv.fail(Fault("rate_limited", headers=headers))
    obs, sleeps = Observed(), Sleeps()
    asyncio.run(transport(provider, srv.url, sleeps).complete(request(), observer=obs))
    assert sleeps.delays == [delay]
    assert [(f.kind, f.status, f.retry_after_s) for f in obs.failures] == [
        ("rate_limited", 429, delay)
    ]


def test_retry_after_reads_an_http_date():
    now = time.time()
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after({"retry-after": date}, now=now) == pytest.approx(30, abs=1)
    assert retry_after({"retry-after": "soon"}) is None


@pytest.mark.parametrize(
    ("provider", "kind", "kind_recorded", "retryable"),
    [
        ("anthropic", "overloaded", "overloaded", True),
        ("openai", "server_error", "http_5xx", True),
    ],
    ids=["anthropic-overloaded", "openai-5xx"],
)
def test_after_the_last_retry_the_call_fails_as_an_infra_error(
    served, provider, kind, kind_recorded, retryable
):
    srv = start(served, fake(provider, replies=[Reply("never")]))
    srv.fail(*[kind] * 3)
    obs, sleeps = Observed(), Sleeps()
    with pytest.raises(InfraError) as err:
        t = transport(provider, srv.url, sleeps, max_retries=2)
        asyncio.run(t.complete(request(), observer=obs))
    assert (err.value.kind, err.value.retryable) == (kind_recorded, retryable)
    assert [f.attempt for f in obs.failures] == [0, 1, 2]
    assert obs.failures[-1].retry_after_s == 0  # the last attempt is not followed by a wait
    assert sleeps.delays == [1.0, 2.0] and len(srv.seen) == 3


def test_a_unit_whose_model_keeps_failing_records_infra_errors_and_fails(tmp_path, one, served):
    srv = start(served, FakeAnthropic(brain_for(one)))
    srv.fail(*["overloaded"] * 4)  # every try of the teach episode (the unit retries it 3 times)
    t = transport("anthropic", srv.url, Sleeps(), max_retries=0)
    result, evs = run_driver(tmp_path, one, t, clock=NoWaitClock())
    (failed,) = result.failed
    assert "overloaded" in failed.error
    infra = [e.body for e in evs if isinstance(e, InfraErrorEvent)]
    assert [(i.stage, i.error, i.retryable) for i in infra] == [("teach", "overloaded", True)] * 4
    assert sum(1 for e in evs if isinstance(e, ModelCallEvent) and e.body.status == 529) == 4


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_401_is_not_retried_and_names_the_status_never_the_key(tmp_path, one, served, provider):
    srv = start(served, fake(provider, brain_for(one)))
    srv.fail("unauthorized")  # a key revoked after the model preflight passed
    sleeps = Sleeps()
    t = transport(provider, srv.url, sleeps, **({} if provider == "anthropic" else
                                                {"api_key": OPENAI_KEY}))  # fmt: skip
    result, evs = run_driver(tmp_path, one, t)
    assert len(srv.seen) == 1 and sleeps.delays == []  # one attempt, one unit try
    (failed,) = result.failed
    infra = [e.body for e in evs if isinstance(e, InfraErrorEvent)]
    assert [(i.error, i.retryable) for i in infra] == [("refused", False)]
    assert "HTTP 401" in infra[0].message
    calls = [e.body for e in evs if isinstance(e, ModelCallEvent)]
    assert [(c.status, c.error.split(":")[0]) for c in calls] == [(401, "refused")]
    for text in (failed.error, infra[0].message, calls[0].error):
        assert KEY not in text and OPENAI_KEY not in text


@pytest.mark.parametrize(
    ("provider", "ending", "answer"),
    [
        ("anthropic", "refusal", ""),
        ("anthropic", "max_tokens", "FINAL ANSWER: 12"),
        ("openai", "refusal", ""),
        ("openai", "max_tokens", "FINAL ANSWER: 12"),
    ],
    ids=["anthropic-refusal", "anthropic-max_tokens", "openai-refusal", "openai-max_tokens"],
)
def test_refusal_and_max_tokens_end_the_episode_with_its_text_and_the_grader_judges_it(
    tmp_path, one, served, provider, ending, answer
):
    p = protocols.load(one).protocols[0]
    srv = start(served, fake(provider, brain_for(one)))
    srv.fail(Fault(ending, when=lambda body: first_user_text(body) == p.recall.prompt))
    result, evs = run_driver(tmp_path, one, transport(provider, srv.url, Sleeps()))
    assert result.root and not result.failed
    recall = next(e.body for e in evs if isinstance(e, EpisodeFinishedEvent)
                  and e.body.episode == "recall")  # fmt: skip
    assert recall.final_answer == answer and recall.tool_calls == 0
    call = next(e.body for e in evs if isinstance(e, ModelCallEvent) and e.body.episode == "recall")
    assert call.stop_reason == ending and "tool_calls" not in call.response  # a cut call is dropped
    finished = next(e.body for e in evs if isinstance(e, UnitFinishedEvent))
    assert finished.outcome["recall_correct"] is False
    assert finished.outcome["abstain_correct"] is True  # the later stages still ran


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_usage_with_cache_tokens_is_recorded_per_call_and_rolled_up_per_episode(
    tmp_path, one, served, provider
):
    srv = start(served, fake(provider, brain_for(one)))
    result, evs = run_driver(tmp_path, one, transport(provider, srv.url, Sleeps()))
    assert result.root
    evs = [e for e in evs if not is_probe_stream(e.stream)]  # the run's unit, not its probe
    per_episode: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for e in evs:
        if isinstance(e, ModelCallEvent):
            assert set(e.body.usage) == {"input_tokens", "output_tokens", "cache_read_tokens",
                                         "cache_creation_tokens"}  # fmt: skip
            per_episode[e.body.episode].update(e.body.usage)
    episodes = [e.body for e in evs if isinstance(e, EpisodeFinishedEvent)]
    assert episodes
    for ep in episodes:
        got = per_episode[ep.episode]
        assert (ep.input_tokens, ep.output_tokens, ep.cache_read_tokens,
                ep.cache_creation_tokens) == (got["input_tokens"], got["output_tokens"],
                got["cache_read_tokens"], got["cache_creation_tokens"])  # fmt: skip
    assert sum(ep.cache_read_tokens for ep in episodes) > 0
    if provider == "anthropic":
        assert sum(ep.cache_creation_tokens for ep in episodes) > 0


# -- the limiter ---------------------------------------------------------------------------------


def acquire_all(limiter: RateLimiter, *tokens: int) -> None:
    async def go() -> None:
        for n in tokens:
            await limiter.acquire(n)

    asyncio.run(go())


@pytest.mark.parametrize(
    ("rpm", "tpm", "tokens", "waits"),
    [
        (2, 0, [1, 1, 1], [30.0]),
        (60, 0, [1] * 61, [1.0]),
        (0, 1000, [600, 600], [12.0]),
        (0, 100, [500], []),
        (2, 1000, [900, 50, 600], [33.0]),
    ],
    ids=["rpm-third-waits", "rpm-refills-per-second", "tpm-waits-for-tokens",
         "larger-than-a-minute-is-capped", "both-limits"],
)  # fmt: skip
def test_the_limiter_waits_for_requests_and_tokens_on_an_injected_clock(rpm, tpm, tokens, waits):
    clock = Sleeps()
    limiter = RateLimiter(rpm, tpm, clock=clock.time, sleep=clock)
    acquire_all(limiter, *tokens)
    assert clock.delays == waits


def test_the_limiter_corrects_its_estimate_by_the_usage_reported():
    clock = Sleeps()
    limiter = RateLimiter(0, 1000, clock=clock.time, sleep=clock)
    acquire_all(limiter, 600)
    limiter.settle(600, 100)  # the call used less: the difference comes back
    assert limiter.available()[1] == 900
    acquire_all(limiter, 500)
    limiter.settle(500, 1500)  # it used more: the bucket goes into debt
    assert limiter.available()[1] == -600
    acquire_all(limiter, 100)
    assert clock.delays == [42.0]  # (100 - -600) tokens at 1000/min


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_transports_acquire_the_limiter_before_every_attempt_and_settle_by_usage(served, provider):
    srv = start(served, fake(provider, replies=[Reply("ok")]))
    srv.fail(Fault("rate_limited", headers={"retry-after": "1"}))
    clock = Sleeps()
    limiter = RateLimiter(1, 100_000, clock=clock.time, sleep=clock)
    t = transport(provider, srv.url, clock, limiter=limiter)
    resp = asyncio.run(t.complete(request()))
    # Retry-After 1 s, then the limiter holds the retry until the minute's request is back.
    assert clock.delays == [1.0, 59.0]
    assert limiter.available()[1] == 100_000 - used_tokens(resp.usage)
    assert estimate_tokens(request()) > 0


# -- agent specs, settings, the run record -----------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "kw", "message"),
    [
        ("anthropic:claude-x", {}, "set ANTHROPIC_API_KEY"),
        ("openai:gpt-x", {}, "name the server, openai:gpt-x@BASE_URL"),
        ("openai:m@http://user:pw@127.0.0.1:1/v1", {}, "must not carry credentials"),
        ("anthropic:claude-x", {"base_url": "http://h/?key=1"}, "must not carry credentials"),
        ("scripted", {"params": {"temperature": 0.5}}, "scripted calls no model"),
        ("scripted", {"rpm": 5}, "scripted calls no model"),
        ("anthropic:", {}, "name the model"),
    ],
    ids=["anthropic-no-key", "openai-no-url", "url-with-userinfo", "url-with-query",
         "scripted-params", "scripted-rpm", "no-model"],
)  # fmt: skip
def test_unusable_model_specs_are_refused_naming_what_to_fix(spec, kw, message):
    with pytest.raises(ValueError, match=message):
        from_spec(spec, settings=Settings(ledger="", test_postgres=""), **kw)


def test_an_anthropic_spec_takes_key_and_base_url_from_settings_and_records_max_tokens():
    conf = Settings(ledger="", test_postgres="", anthropic_api_key=KEY,
                    anthropic_base_url="http://gateway.local")  # fmt: skip
    agent = from_spec("anthropic:claude-x", settings=conf, params={"temperature": 0.2}, rpm=50)
    assert isinstance(agent, ModelAgent) and isinstance(agent.transport, AnthropicTransport)
    assert agent.params == {"max_tokens": 4096, "temperature": 0.2}
    assert agent.transport.base_url == "http://gateway.local"
    assert agent.transport.limiter is not None and agent.transport.limiter.rpm == 50
    assert KEY not in repr(agent.transport) and KEY not in repr(conf)
    given = from_spec("anthropic:claude-x", settings=conf, base_url="http://other:1")
    assert given.transport.base_url == "http://other:1"  # type: ignore[attr-defined]


def test_an_openai_spec_splits_model_and_server_url():
    conf = Settings(ledger="", test_postgres="", openai_api_key=OPENAI_KEY)
    agent = from_spec("openai:llama3.2:3b@http://127.0.0.1:8000/v1", settings=conf)
    assert isinstance(agent, ModelAgent) and isinstance(agent.transport, OpenAICompatTransport)
    assert (agent.model, agent.transport.base_url, agent.params) == (
        "llama3.2:3b", "http://127.0.0.1:8000/v1", {})  # fmt: skip
    assert agent.name == "openai:llama3.2:3b@http://127.0.0.1:8000/v1"
    assert isinstance(from_spec("scripted", params={}), ScriptedAgent)


def test_a_resume_refuses_sampling_options_that_contradict_the_record():
    record = RunRecord(suite="lifecycle", platform=PlatformRecord(kind="embedded"),
                       agent_params={"max_tokens": 4096, "temperature": 0.0})  # fmt: skip
    same = RunConfig(agent_params={"temperature": 0.0}, given=frozenset({"agent_params"}))
    other = RunConfig(agent_params={"temperature": 0.5}, given=frozenset({"agent_params"}))
    assert contradictions(same, record) == []
    assert contradictions(other, record) == ["--temperature 0.5 (the run recorded 0.0)"]


# -- the command line, end to end ---------------------------------------------------------------


def run_args(provider: str, url: str, path: str, ledger: str, run_id: str) -> list[str]:
    agent = ["--agent", f"anthropic:{MODEL}", "--base-url", url] if provider == "anthropic" else [
        "--agent", f"openai:{MODEL}@{url}/v1"]  # fmt: skip
    return ["run", "--protocols", path, "--ledger", ledger, "--run-id", run_id, *agent]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_every_lifecycle_stage_runs_end_to_end_through_the_fake_server_and_verifies(
    tmp_path, served, monkeypatch, capsys, provider
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    path = subset(tmp_path)
    srv = start(served, fake(provider, brain_for(path)))
    ledger = str(tmp_path / "l.sqlite")
    args = run_args(provider, srv.url, path, ledger, "e2e")
    assert main([*args, "--temperature", "0", "--max-tokens", "700", "--rpm", "6000"]) == 0
    assert main(["verify", "e2e", "--ledger", ledger]) == 0
    m = metrics(ledger, "e2e")
    assert m["full_lifecycle"] == (4, 4)
    assert m["transfer_rate"] == (2, 2) and m["update_correctness"] == (2, 2)
    evs = ledger_events(ledger, "e2e")
    stages = {e.body.episode for e in evs if isinstance(e, ModelCallEvent)}
    assert stages == {"teach", "recall", "transfer", "update", "update_recall", "abstain"}
    for e in evs:
        if isinstance(e, ModelCallEvent):
            assert e.body.request_hash == request_hash(e.body.request)  # type: ignore[arg-type]
            assert e.body.request["params"] == {"max_tokens": 700, "temperature": 0.0}
    record = next(e for e in evs if isinstance(e, RunStartedEvent)).body.record
    assert record is not None and record.agent_params == {"max_tokens": 700, "temperature": 0.0}
    assert all(s.body["temperature"] == 0.0 and s.body["max_tokens"] == 700 for s in srv.seen)


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
def test_a_planted_key_appears_in_no_ledger_byte_bundle_report_or_output_line(
    tmp_path, served, monkeypatch, capsys, caplog, provider
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    path = subset(tmp_path, SUBSET[:2])
    key = KEY if provider == "anthropic" else OPENAI_KEY
    srv = start(served, fake(provider, brain_for(path), key=key))
    # Faults put error messages in the ledger too; a short Retry-After keeps the run fast.
    srv.fail(Fault("rate_limited", headers={"retry-after-ms": "1"}),
             Fault("server_error", headers={"retry-after-ms": "1"}))  # fmt: skip
    ledger = str(tmp_path / "l.sqlite")
    assert main(run_args(provider, srv.url, path, ledger, "k")) == 0
    bundle = str(tmp_path / "k.jsonl.gz")
    assert main(["export", "k", "-o", bundle, "--ledger", ledger]) == 0
    for fmt in ("table", "json", "html"):
        assert main(["report", "k", "--format", fmt, "--ledger", ledger]) == 0
    assert main(["log", "k", "--ledger", ledger]) == 0
    out = capsys.readouterr()
    errors = [
        e for e in ledger_events(ledger, "k") if isinstance(e, ModelCallEvent) and e.body.error
    ]
    assert len(errors) == 2
    assert all(s.headers.get("authorization") == f"Bearer {key}" or s.headers.get("x-api-key")
               == key for s in srv.seen)  # fmt: skip
    stored = b""
    for name in (ledger, ledger + "-wal"):
        if os.path.exists(name):
            with open(name, "rb") as fh:
                stored += fh.read()
    with gzip.open(bundle) as fh:
        exported = fh.read()
    for planted in (KEY, OPENAI_KEY):
        assert planted.encode() not in stored and planted.encode() not in exported
        assert planted not in out.out + out.err + caplog.text
        assert all(planted.encode() not in s.raw for s in srv.seen)


def test_a_missing_key_is_one_line_and_exit_2_before_any_ledger_exists(
    tmp_path, no_provider_env, capsys
):
    ledger = tmp_path / "never.sqlite"
    assert main(["run", "--agent", "anthropic:claude-x", "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ANTHROPIC_API_KEY" in err[0]
    assert not ledger.exists() and not list(tmp_path.iterdir())


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--max-tokens", "0"], "--max-tokens must be at least 1"),
        (["--rpm", "0"], "--rpm must be at least 1"),
        (["--temperature", "-1"], "--temperature must be at least 0"),
        (["--agent", "scripted", "--temperature", "0.5"], "scripted calls no model"),
    ],
    ids=["max-tokens", "rpm", "temperature", "scripted-with-sampling"],
)
def test_impossible_model_options_are_refused_before_the_run(tmp_path, capsys, extra, message):
    ledger = tmp_path / "never.sqlite"
    args = ["run", "--agent", "openai:m@http://127.0.0.1:9/v1", "--ledger", str(ledger)]
    assert main([*args, *extra]) == 2
    assert message in capsys.readouterr().err and not ledger.exists()


def test_the_readme_model_runs_parse_and_name_usable_agents():
    with open(os.path.join(os.path.dirname(os.path.dirname(__file__)), "README.md")) as fh:
        readme = fh.read()
    block = re.search(r"<!-- model-runs -->\n```console\n(.*?)```", readme, re.S)
    assert block
    lines = block.group(1).strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("ANTHROPIC_API_KEY=")
    conf = Settings(ledger="", test_postgres="", anthropic_api_key=KEY)
    for line in lines:
        words = [w for w in shlex.split(line) if "=" not in w or w.startswith("-")]
        assert words[0] == "benchledger"
        args = build_parser().parse_args(words[1:])
        agent = from_spec(args.agent.replace("MODEL", "m"), settings=conf, rpm=args.rpm or 0)
        assert isinstance(agent, ModelAgent)


# -- the model preflight ------------------------------------------------------------------------


@pytest.fixture
def closed_port() -> Iterator[int]:
    """A loopback port bound by no listener: connecting to it is refused."""
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    yield sock.getsockname()[1]
    sock.close()


def preflight_args(provider: str, url: str, path: str, ledger: str, model: str = MODEL) -> list:
    """``run`` with the model at ``url``: the Anthropic base URL, or the OpenAI server URL."""
    agent = ["--agent", f"anthropic:{model}", "--base-url", url] if provider == "anthropic" else [
        "--agent", f"openai:{model}@{url}"]  # fmt: skip
    return ["run", "--protocols", path, "--ledger", ledger, "--run-id", "pf", *agent]


UNSERVABLE = ["unauthorized", "forbidden", "unknown-model", "wrong-path", "unreachable"]


@pytest.mark.parametrize("provider", ["anthropic", "openai"])
@pytest.mark.parametrize("case", UNSERVABLE)
def test_a_model_endpoint_that_cannot_serve_the_run_is_one_line_exit_2_and_no_run(
    tmp_path, one, served, monkeypatch, capsys, closed_port, provider, case
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    key = "the-right-key" if case == "unauthorized" else ""
    models = (f"{MODEL}-other",) if case == "unknown-model" else ()
    srv = start(served, fake(provider, brain_for(one), key=key, models=models))
    if case == "forbidden":
        srv.fail(*[Fault("forbidden", preflight=True)] * 2)  # one per run below
    url = {"wrong-path": f"{srv.url}/nowhere", "unreachable": f"http://127.0.0.1:{closed_port}"}
    base = url.get(case, srv.url) + ("/v1" if provider == "openai" else "")
    says = {"unauthorized": "HTTP 401", "forbidden": "HTTP 403", "unknown-model":
            f"the server has no model '{MODEL}'", "wrong-path": "HTTP 404",
            "unreachable": "is the server running?"}[case]  # fmt: skip
    key_var = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
    existing = tmp_path / "existing.sqlite"
    open_store(str(existing)).close()
    for ledger in (tmp_path / "fresh.sqlite", existing):
        assert main(preflight_args(provider, base, one, str(ledger))) == 2
        out = capsys.readouterr()
        err = out.err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("benchledger: error: model preflight failed")
        assert says in err[0] and "nothing was written" in err[0], err[0]
        if case in ("unauthorized", "forbidden"):
            assert f"check {key_var}" in err[0]
        if case == "wrong-path":
            assert "no such endpoint" in err[0]
        assert KEY not in out.out + out.err and OPENAI_KEY not in out.out + out.err
    assert not (tmp_path / "fresh.sqlite").exists()  # the file the command made is gone
    store = open_store(str(existing))
    try:
        assert store.run_ids() == []
    finally:
        store.close()
    assert srv.seen == []  # no unit's request was ever sent


@pytest.mark.parametrize(
    ("provider", "fault"),
    [("anthropic", None), ("openai", None), ("anthropic", "overloaded"),
     ("openai", "rate_limited")],
    ids=["anthropic-healthy", "openai-healthy", "anthropic-529", "openai-429"],
)  # fmt: skip
def test_a_healthy_or_transiently_failing_endpoint_gets_one_preflight_recorded_nowhere(
    tmp_path, one, served, monkeypatch, capsys, provider, fault
):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    srv = start(served, fake(provider, brain_for(one)))
    if fault:
        srv.fail(Fault(fault, preflight=True))
    base = srv.url + ("/v1" if provider == "openai" else "")
    ledger = str(tmp_path / "l.sqlite")
    assert main(preflight_args(provider, base, one, ledger)) == 0
    (sent,) = srv.preflights
    assert sent.body["max_tokens"] == 1 and PREFLIGHT_PROMPT in sent.raw.decode()
    assert srv.seen and not srv.faults  # the run went on, and its own calls were answered
    calls = [e for e in ledger_events(ledger, "pf") if isinstance(e, ModelCallEvent)]
    assert calls and all(PREFLIGHT_PROMPT not in str(c.body.request) for c in calls)
    assert len(calls) == len(srv.seen)


class Stopped(Exception):
    """Raised by the progress callback: the run stops right after its header is written."""


def stop_after_the_header(total: int) -> None:
    raise Stopped


def test_a_resume_against_an_endpoint_that_refuses_the_key_now_is_refused_and_writes_nothing(
    tmp_path, one, served, monkeypatch, capsys
):
    monkeypatch.setenv("OPENAI_API_KEY", OPENAI_KEY)
    srv = start(served, fake("openai", brain_for(one)))
    path = str(tmp_path / "l.sqlite")
    cfg = RunConfig(protocols_path=one, run_id="rs", agent=f"openai:{MODEL}@{srv.url}/v1")
    ledger = Ledger(open_store(path))
    with pytest.raises(Stopped):
        asyncio.run(RunDriver(ledger, cfg, Progress(started=stop_after_the_header)).execute())
    ledger.store.close()
    before = link_hashes(path, "rs")
    srv.fail(Fault("forbidden", preflight=True))  # the key lost its access since
    assert main(["run", "--resume", "rs", "--agent", cfg.agent, "--ledger", path]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "model preflight failed" in line and "HTTP 403" in line and OPENAI_KEY not in line
    assert link_hashes(path, "rs") == before and srv.seen == []


def link_hashes(path: str, run_id: str) -> list[str]:
    store = open_store(path)
    try:
        return [h for _, h in Ledger(store).events(run_id)]
    finally:
        store.close()
