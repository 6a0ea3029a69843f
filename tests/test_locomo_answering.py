"""A model answers LoCoMo (docs/locomo.md, "A model answers" and "Controls"): the harness
searches the platform at the recorded depth, the model answers from exactly the recorded
hits with the shipped prompt, and the no-memory and full-context controls run beside it and
lead ``compare``.

The model is the loopback OpenAI-compatible fake (and once the Anthropic fake) answering by
rule from the memories in its prompt (tests/fakes/locomo_brain.py). One module fixture
makes the runs every test reads: a model run at ``--search-k 5`` and its two model
controls, on the first 12 questions of the shipped set (one conversation).
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.agents import from_spec
from benchledger.harness.agents.answering import PROMPT_HASH, prompt
from benchledger.harness.agents.base import Episode
from benchledger.harness.agents.retrieval import RetrievalAgent
from benchledger.harness.plan import _answering
from benchledger.harness.platforms.vocabulary import REFPLATFORM
from benchledger.harness.record import RunConfig
from benchledger.harness.suites.locomo import DEFAULT_DATA, LocomoSuite
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    ModelCallEvent,
    RunStartedEvent,
    SessionCallEvent,
)
from benchledger.projections import retrieval
from benchledger.projections.suites.locomo.controls import conversation
from benchledger.projections.suites.locomo.items import LocomoItem, memory_id
from benchledger.protocols import locomo
from benchledger.replay.levels import replay
from tests.conftest import cli, one_line_exit_2
from tests.fakes.anthropic_api import FakeAnthropic
from tests.fakes.locomo_brain import LocomoBrain, parse
from tests.fakes.openai_api import FakeOpenAI

SHIPPED = locomo.load(DEFAULT_DATA)
LIMIT = 12  # the first conversation's questions
BUDGET = 300  # tokens: less than a shipped conversation, so full-context cuts it
KEY = "sk-ant-test-locomo-answering-0001"


def _events(path: str, run_id: str) -> list[Any]:
    with open_store(path) as store:
        return [e for e, _ in Ledger(store).events(run_id)]


def _opener(path: str) -> Any:
    return lambda: Ledger(open_store(path))


def _searches(events: list[Any]) -> list[SessionCallEvent]:
    """The ask episodes' search calls (the session's own probe is no search)."""
    return [e for e in events if isinstance(e, SessionCallEvent) and e.body.episode == "ask"
            and e.body.tool in REFPLATFORM.search_tools]  # fmt: skip


def _user(event: ModelCallEvent) -> str:
    """The user prompt of a recorded (canonical) model request."""
    [message] = event.body.request["messages"]
    return str(message["text"] if "text" in message else message["content"])


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, Any]:
    """A model run (``--search-k 5``) and its no-memory and full-context controls."""
    ledger = str(tmp_path_factory.mktemp("answering") / "l.sqlite")
    brain = LocomoBrain()
    with FakeOpenAI(brain) as srv:
        model = f"openai:m1@{srv.url}/v1"
        common = ["--suite", "locomo", "--ledger", ledger, "--limit", str(LIMIT)]
        codes = {
            "lma": main(["run", *common, "--agent", model, "--search-k", "5", "--run-id", "lma"]),
            "lmn": main(["run", *common, "--agent", f"no-memory:{model}", "--run-id", "lmn"]),
            "lmf": main(["run", *common, "--agent", f"full-context:{model}", "--run-id", "lmf",
                         "--context-budget", str(BUDGET)]),
        }  # fmt: skip
        seen = list(srv.seen)
    return {"codes": codes, "ledger": ledger, "brain": brain, "seen": seen}


def test_each_run_seals_and_verifies_rederives_and_replays_in_full(runs, capsys):
    assert runs["codes"] == {"lma": 0, "lmn": 0, "lmf": 0}
    for run_id in ("lma", "lmn", "lmf"):
        code, out, _ = cli(capsys, "verify", run_id, "--ledger", runs["ledger"])
        assert code == 0 and out.startswith(f"ok run {run_id}")
        for level in ("rederive", "full"):
            got = replay(run_id, level=level, ledger=_opener(runs["ledger"]))
            assert got.ok, got.lines()


def test_the_header_records_the_depth_and_the_shipped_prompts_hash(runs):
    records = {r: next(e for e in _events(runs["ledger"], r) if isinstance(e, RunStartedEvent)
                       ).body.record for r in ("lma", "lmn", "lmf")}  # fmt: skip
    assert records["lma"].search_k == 5 and records["lma"].answer_prompt_hash == PROMPT_HASH
    assert records["lmf"].context_budget == BUDGET and records["lmf"].search_k == 0
    assert records["lmn"].answer_prompt_hash == PROMPT_HASH and records["lmn"].search_k == 0
    assert [r.control for r in records.values()] == ["", "no-memory", "full-context"]
    # The no-memory reader: no model, so no prompt; a control, so no depth.
    reader = _answering(RunConfig(suite="locomo", agent="no-memory"), LocomoSuite(),
                        from_spec("no-memory"))  # fmt: skip
    assert reader == {"search_k": 0, "answer_prompt_hash": "", "control": "no-memory",
                      "context_budget": 0}  # fmt: skip


def test_the_model_is_shown_exactly_the_recorded_hits_of_the_harness_search(runs):
    events = _events(runs["ledger"], "lma")
    by_stream: dict[str, list[Any]] = {}
    for e in events:
        by_stream.setdefault(e.stream, []).append(e)
    asked = 0
    for stream in by_stream.values():
        models = [e for e in stream if isinstance(e, ModelCallEvent) and e.body.episode == "ask"]
        if not models:
            continue
        asked += 1
        [model] = models  # one answer per question: the search was the harness's, no model call
        assert model.body.request["tools"] == []
        finished = next(e for e in stream if isinstance(e, EpisodeFinishedEvent)
                        and e.body.episode == "ask")  # fmt: skip
        assert finished.body.tool_calls == 1  # the harness's one search (a probe is before it)
        [search] = _searches(stream)
        assert search.body.arguments["limit"] == 5  # the recorded depth
        recorded = retrieval.hits(search.body.text(), finished.body.hits)
        memories, question = parse(_user(model))
        assert memories == recorded
        assert sum(1 for h in recorded if memory_id(h)) == 5  # five turns at k=5
        assert _user(model) == prompt(question, recorded)
        assert search.seq < model.seq  # searched first, then asked
    assert asked == LIMIT
    assert len(runs["brain"].prompts) == 3 * LIMIT  # the model run and two model controls


def test_the_full_context_control_shows_the_conversation_cut_to_its_budget(runs):
    item_sample = SHIPPED.samples[0]
    context = conversation(item_sample, BUDGET)
    assert context.truncated and 0 < len(context.memories) < context.turns
    models = [e for e in _events(runs["ledger"], "lmf") if isinstance(e, ModelCallEvent)]
    assert len(models) == LIMIT
    for m in models:
        memories, _ = parse(_user(m))
        assert memories == list(context.memories)  # the latest turns, in order
    assert _searches(_events(runs["ledger"], "lmf")) == []  # no search
    nomem = [e for e in _events(runs["ledger"], "lmn") if isinstance(e, ModelCallEvent)]
    assert {tuple(parse(_user(m))[0]) for m in nomem} == {()}


def test_the_card_shows_depth_empty_searches_coverage_and_the_models_means(runs, capsys):
    code, out, _ = cli(capsys, "report", "lma", "--ledger", runs["ledger"])
    assert code == 0
    assert "searches that returned nothing: 0 of 12" in out
    # k=5 reaches the 4 sessions of the shipped conversation: the card says so.
    assert "top-k covers 18% of the conversation" in out
    code, out, _ = cli(capsys, "report", "lma", "--ledger", runs["ledger"], "--format", "json")
    got = json.loads(out)["conditions"]
    models = [e for e in _events(runs["ledger"], "lma") if isinstance(e, ModelCallEvent)]
    assert got["model_answers"] == LIMIT
    assert got["mean_context_tokens"] == sum(m.body.usage["input_tokens"] for m in models) / LIMIT
    assert got["mean_answer_tokens"] == sum(m.body.usage["output_tokens"] for m in models) / LIMIT
    assert got["mean_model_latency_ms"] == pytest.approx(
        sum(m.body.latency_ms for m in models) / LIMIT
    )
    assert got["answer_prompt_hash"] == PROMPT_HASH and got["search_k"] == 5
    code, out, _ = cli(capsys, "report", "lmf", "--ledger", runs["ledger"])
    assert f"{BUDGET} tokens (estimated); 12 of 12 questions' conversations cut" in out
    assert re.search(
        r"^evidence_recall +not measured: a full-context control does not search", out, re.M
    )


def test_compare_leads_with_the_controls_and_labels_them(runs, capsys):
    code, out, _ = cli(capsys, "compare", "lma", "lmn", "lmf", "--ledger", runs["ledger"])
    assert code == 0
    first = out.splitlines()[0]
    assert first.startswith("controls: lmn (no-memory, locomo_f1 ") and "lmf (full-context" in first
    assert "lmn (control: no-memory): no-memory:openai:m1@" in out
    code, out, _ = cli(capsys, "compare", "lma", "lmn", "lmf", "--ledger", runs["ledger"],
                       "--format", "json")  # fmt: skip
    assert json.loads(out)["controls"] == {"lmn": "no-memory", "lmf": "full-context"}


def test_the_no_memory_reader_abstains_without_searching():
    sample = SHIPPED.samples[0]
    item = LocomoItem(sample.questions[0], sample)
    episode = Episode("ask", "", item.question.question, item, 6, REFPLATFORM, search_k=10)
    turn = from_spec("no-memory").decide(episode, [{"role": "user", "text": "q"}], ())  # type: ignore[attr-defined]
    assert turn.tool_calls == () and turn.text == "FINAL ANSWER: no information available"


def test_the_retrieval_reader_searches_at_the_episodes_depth():
    sample = SHIPPED.samples[0]
    item = LocomoItem(sample.questions[0], sample)
    episode = Episode("ask", "", item.question.question, item, 6, REFPLATFORM, search_k=50)
    turn = RetrievalAgent().decide(episode, [{"role": "user", "text": "q"}], REFPLATFORM.tools)
    [call] = turn.tool_calls
    assert call.arguments["limit"] == 50


def test_an_anthropic_model_answers_from_the_recorded_hits_too(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    ledger = str(tmp_path / "l.sqlite")
    brain = LocomoBrain()
    with FakeAnthropic(brain) as srv:
        code = main(["run", "--suite", "locomo", "--ledger", ledger, "--limit", "2", "--agent",
                     "anthropic:m1", "--base-url", srv.url, "--run-id", "lmc"])  # fmt: skip
    assert code == 0
    events = _events(ledger, "lmc")
    models = [e for e in events if isinstance(e, ModelCallEvent)]
    searches = _searches(events)
    assert len(models) == len(searches) == 2
    for model, search in zip(models, searches, strict=True):
        assert search.body.arguments["limit"] == 10  # the default depth
        assert parse(_user(model))[0] == retrieval.hits(search.body.text(), REFPLATFORM.hits)
    assert [m for m, _ in brain.prompts] == [parse(_user(m))[0] for m in models]
    with open(ledger, "rb") as fh:
        assert KEY.encode() not in fh.read()


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["--agent", "no-memory"], "--agent no-memory is a LoCoMo control: it runs with --suite "
                                   "locomo only"),
        (["--search-k", "5"], "--search-k and --context-budget apply to --suite locomo"),
    ],
)  # fmt: skip
def test_controls_and_depth_on_another_suite_are_refused_in_one_line(tmp_path, capsys, args, says):
    code, _, err = cli(capsys, "run", "--ledger", str(tmp_path / "l.sqlite"), *args)
    one_line_exit_2(code, err, says)


def test_a_full_context_control_without_a_model_is_refused_in_one_line(tmp_path, capsys):
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--ledger",
                       str(tmp_path / "l.sqlite"), "--agent", "full-context")  # fmt: skip
    one_line_exit_2(code, err, "name it, e.g. --agent full-context:openai")
