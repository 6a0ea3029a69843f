"""mem0's own fact extraction (``--mem0-llm``): mem0 calls the harness's loopback endpoint,
the harness answers with the operator's model and records each call (docs/mem0.md).

The model here is the loopback OpenAI-compatible fake (tests/fakes/openai_api.py) with a
brain that answers mem0's extraction prompt deterministically: one memory per line of the
prompt's new messages, as said. The run tests use the real mem0 (installed once, as
tests/test_mem0.py does) and are slow; the endpoint's own tests are fast.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import sys
from typing import Any

import httpx2
import pytest

from benchledger.cli import main
from benchledger.harness.agents.base import Turn
from benchledger.harness.models.fake import FakeTransport
from benchledger.harness.models.response import ModelResponse
from benchledger.harness.needs import Given, unmet
from benchledger.harness.platforms.mem0 import server_argv
from benchledger.harness.platforms.mem0_llm import Mem0Llm
from benchledger.harness.probe import MEMORY as PROBE_MEMORY
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    ModelCallEvent,
    RunStartedEvent,
    SessionCallEvent,
    is_probe_stream,
)
from tests.fakes.openai_api import FakeOpenAI
from tests.test_mem0 import SUBSET, _mem0_dir
from tests.test_runner import subset

KEY = "sk-mem0llm-test-0123456789abcdef"  # the operator's key: only the harness holds it
MODEL = "fake-extractor"
NEW = "## New Messages\n"


class ExtractionBrain:
    """Answers mem0's additive extraction prompt: each line of its new messages (``user:
    TEXT``) is one memory, as said."""

    def decide(self, system: str, messages: list[dict[str, Any]]) -> Turn:
        prompt = messages[-1]["text"]
        said = prompt.split(NEW, 1)[1].split("\n## ", 1)[0] if NEW in prompt else ""
        facts = [line.split(": ", 1)[-1].strip() for line in said.splitlines() if line.strip()]
        return Turn(json.dumps({"memory": [{"text": f} for f in facts]}))


def _events(path: str, run_id: str) -> list:
    store = open_store(path)
    try:
        return [e for e, _ in Ledger(store).events(run_id)]
    finally:
        store.close()


# -- the endpoint ---------------------------------------------------------------------------


class Seen:
    """An observer as the episode recorder is: an episode, seqs, and what it was given."""

    episode = "teach"

    def __init__(self) -> None:
        self.seqs: list[int] = []
        self.bodies: list[Any] = []

    def append(self, body: Any, refs: list[int]) -> int:
        self.bodies.append(body)
        self.seqs.append(len(self.seqs))
        return self.seqs[-1]

    def session_call(self, body: Any) -> None:
        self.append(body, [])

    def attempt_failed(self, request: Any, failure: Any) -> None:
        pass


def _post(llm: Mem0Llm, body: dict[str, Any], token: str) -> httpx2.Response:
    headers = {"Authorization": f"Bearer {token}"}
    return httpx2.post(f"{llm.url}/chat/completions", json=body, headers=headers, timeout=10)


def test_the_endpoint_answers_only_its_token_and_records_each_request_in_the_call_in_flight():
    request = {"model": "anything", "temperature": 0.1, "max_tokens": 50, "top_p": 0.1,
               "messages": [{"role": "system", "content": "extract"},
                            {"role": "user", "content": "user: I like tea"}]}  # fmt: skip

    async def go() -> tuple[Any, Any, Any, Seen]:
        seen = Seen()
        transport = FakeTransport(lambda req, hint: ModelResponse('{"memory": []}'), delay_s=0)
        async with Mem0Llm(transport, model=MODEL).running() as llm:
            assert llm.url.startswith("http://127.0.0.1:")
            refused = await asyncio.to_thread(_post, llm, request, "not-the-token")
            idle = await asyncio.to_thread(_post, llm, request, llm.token)
            async with llm.serving(seen):
                answered = await asyncio.to_thread(_post, llm, request, llm.token)
        return refused, idle, answered, seen

    refused, idle, answered, seen = asyncio.run(go())
    assert refused.status_code == 401
    assert idle.status_code == 409  # no session call in flight: nothing answered unrecorded
    assert answered.status_code == 200
    assert answered.json()["choices"][0]["message"]["role"] == "assistant"
    (call,) = seen.bodies
    assert call.episode == "teach" and call.request["model"] == MODEL
    assert call.request["system"] == "extract"
    assert call.request["messages"] == [{"role": "user", "text": "user: I like tea"}]
    assert call.request["params"] == {"temperature": 0.1, "max_tokens": 50}  # top_p dropped


def test_an_anthropic_spec_answers_mem0_through_the_anthropic_api_with_mems_own_limits():
    from benchledger.harness.platforms.mem0 import llm_agent
    from benchledger.harness.settings import Settings
    from tests.fakes.anthropic_api import FakeAnthropic

    prompt = f"{NEW}user: I like tea\n## Current Date\n2026-12-07"
    extract = {"model": "ignored", "temperature": 0.1, "max_tokens": 2000,
               "response_format": {"type": "json_object"},
               "messages": [{"role": "system", "content": "You extract memories."},
                            {"role": "user", "content": prompt}]}  # fmt: skip

    async def go(url: str) -> tuple[Any, Seen]:
        agent = llm_agent(f"anthropic:{MODEL}", Settings(anthropic_api_key=KEY,
                                                         anthropic_base_url=url))  # fmt: skip
        seen = Seen()
        async with (
            Mem0Llm(agent.transport, model=agent.model, params=agent.params).running() as llm,
            llm.serving(seen),
        ):
            answered = await asyncio.to_thread(_post, llm, extract, llm.token)
        return answered, seen

    with FakeAnthropic(ExtractionBrain(), key=KEY) as fake:  # type: ignore[arg-type]
        answered, seen = asyncio.run(go(fake.url))
    assert answered.status_code == 200
    said = json.loads(answered.json()["choices"][0]["message"]["content"])
    assert said == {"memory": [{"text": "I like tea"}]}
    (call,) = seen.bodies
    assert call.request["params"] == {"max_tokens": 2000, "temperature": 0.1}
    assert fake.seen[0].body["max_tokens"] == 2000 and "response_format" not in fake.seen[0].body
    assert KEY not in json.dumps([call.request, call.response])


def test_a_run_refuses_a_mem0_llm_that_is_not_a_model(tmp_path, capsys):
    argv = ["run", "--platform", "mem0", "--mem0-llm", "scripted", "--ledger",
            str(tmp_path / "l.sqlite")]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "--mem0-llm 'scripted'" in err and "Traceback" not in err


def test_a_worker_or_resume_needs_the_mem0_llm_named_again():
    from benchledger.ledger.events import PlatformRecord, RunRecord

    platform = PlatformRecord(kind="mem0", url="pypi:mem0ai==2.2.1")
    record = RunRecord(suite="lifecycle", platform=platform, agent="scripted",
                       platform_options={"mem0_llm": "anthropic:m"})  # fmt: skip
    assert any("--mem0-llm anthropic:m" in r for r in unmet(record, Given()))
    assert not any("mem0" in r for r in unmet(record, Given(mem0_llm="anthropic:m")))


# -- a whole run on the real mem0 -----------------------------------------------------------


@pytest.fixture(scope="module")
def mem0_python() -> str:
    from benchledger.harness.platforms.mem0 import install
    from benchledger.harness.platforms.mem0_platform import VERSION

    try:
        return install(VERSION, _mem0_dir())
    except Exception as exc:  # no index, no venv module: say why and skip
        pytest.skip(f"cannot make mem0's venv: {exc}")


@pytest.fixture(scope="module")
def extracted(mem0_python, tmp_path_factory) -> tuple[str, FakeOpenAI]:
    """A ledger holding the subset run on the real mem0 with its fact extraction on, the
    fake as its model (the server not cut off: it must reach the harness's loopback)."""
    folder = tmp_path_factory.mktemp("m0-llm")
    path = subset(folder, SUBSET)
    ledger = str(folder / "l.sqlite")
    fake = FakeOpenAI(ExtractionBrain(), key=KEY).start()  # type: ignore[arg-type]
    old = os.environ.get("OPENAI_API_KEY")
    os.environ["OPENAI_API_KEY"] = KEY
    try:
        argv = ["run", "--protocols", path, "--ledger", ledger, "--platform", "mem0",
                "--mem0-cmd", shlex.join(server_argv(mem0_python)),
                "--mem0-llm", f"openai:{MODEL}@{fake.url}/v1", "--run-id", "llm"]  # fmt: skip
        assert main(argv) == 0
    finally:
        if old is None:
            os.environ.pop("OPENAI_API_KEY", None)
        else:
            os.environ["OPENAI_API_KEY"] = old
    yield ledger, fake
    fake.stop()


@pytest.mark.slow
def test_mem0s_extraction_calls_are_model_calls_of_the_writes_that_made_them(extracted):
    ledger, fake = extracted
    events = _events(ledger, "llm")
    calls = [e.body for e in events if isinstance(e, ModelCallEvent)]
    writes = [e.body for e in events if isinstance(e, SessionCallEvent)
              and e.body.tool == "add_memory"]  # fmt: skip
    # Every extraction the fake saw is a recorded model call, the probe's memory too: its
    # write, before any unit, is an event of the run's probe stream (harness/probe.py).
    assert calls and len(calls) == len(writes) == len(fake.seen)
    probe = [e.body for e in events if isinstance(e, ModelCallEvent) and is_probe_stream(e.stream)]
    wrote = [c for c in probe if c.episode == "probe"]  # its write (then its lifecycle checks)
    assert len(wrote) == 1 and PROBE_MEMORY in wrote[0].request["messages"][0]["text"]
    assert {c.request["model"] for c in calls} == {MODEL}
    assert all("## New Messages" in c.request["messages"][0]["text"] for c in calls)
    assert {c.episode for c in calls} >= {"teach"}
    # Each write's answer is what the model extracted, stored by mem0.
    first = json.loads(writes[0].text())["results"]
    assert first and first[0]["memory"] in calls[0].request["messages"][0]["text"]


@pytest.mark.slow
def test_the_run_names_the_mode_and_its_llm_and_no_key_reaches_the_ledger(extracted, capsys):
    ledger, fake = extracted
    started = next(e for e in _events(ledger, "llm") if isinstance(e, RunStartedEvent))
    assert started.body.record.platform_options["mem0_llm"] == f"openai:{MODEL}@{fake.url}/v1"
    assert main(["report", "llm", "--format", "json", "--ledger", ledger]) == 0
    label = json.loads(capsys.readouterr().out)["runs"][0]["platform_label"]
    assert f"fact extraction: infer=True, LLM openai:{MODEL}@{fake.url}/v1, wordllama" in label
    assert all(s.headers.get("authorization") == f"Bearer {KEY}" for s in fake.seen)
    with open(ledger, "rb") as f:
        raw = f.read()
    assert KEY.encode() not in raw


@pytest.mark.slow
def test_a_run_with_mem0s_extraction_verifies_rederives_and_replays_in_full(extracted, capsys):
    ledger, _ = extracted
    assert main(["verify", "llm", "--ledger", ledger]) == 0
    assert main(["replay", "llm", "--level", "rederive", "--ledger", ledger]) == 0
    assert main(["replay", "llm", "--level", "full", "--ledger", ledger]) == 0
    out = capsys.readouterr().out
    assert "ok full llm" in out and "all equal" in out


def test_the_server_refuses_an_llm_for_its_dictionary_backend(tmp_path):
    import subprocess

    done = subprocess.run([*server_argv(sys.executable), "--backend", "memory", "--folder",
                           str(tmp_path), "--llm-url", "http://127.0.0.1:9/v1"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 2 and "no fact extraction" in done.stderr


@pytest.mark.slow
def test_a_model_refusing_the_key_refuses_the_run_before_anything_is_written(
    mem0_python, tmp_path, capsys, monkeypatch
):
    wrong = "sk-not-the-fakes-key-0123456789"
    monkeypatch.setenv("OPENAI_API_KEY", wrong)
    ledger = str(tmp_path / "l.sqlite")
    with FakeOpenAI(ExtractionBrain(), key=KEY) as fake:  # type: ignore[arg-type]
        argv = ["run", "--protocols", subset(tmp_path, SUBSET[:1]), "--ledger", ledger,
                "--platform", "mem0", "--mem0-cmd", shlex.join(server_argv(mem0_python)),
                "--mem0-llm", f"openai:{MODEL}@{fake.url}/v1", "--run-id", "refused"]  # fmt: skip
        assert main(argv) == 2
        assert fake.preflights and not fake.seen  # one preflight request, no extraction
    err = capsys.readouterr().err
    assert "--mem0-llm" in err and "Traceback" not in err and wrong not in err
    assert len(err.strip().splitlines()) == 1
    assert not os.path.exists(ledger) or not _events(ledger, "refused")
