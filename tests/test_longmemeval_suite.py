"""The longmemeval suite end to end on the embedded reference platform: each LongMemEval
question asked of the memory its own haystack was ingested into, its retrieval scored as
LongMemEval's own ``eval_utils.py`` scores it (docs/longmemeval.md).

One run of the shipped LongMemEval-shaped set with the retrieval reader backs most tests
(a few seconds); a file the suite never saw, written here by a generator of the test's
own, makes one more run with the scripted agent.

THE check (``_official``): LongMemEval's ``src/retrieval/eval_utils.py`` is imported by
path from ../shared (skipped when absent) and run on the ranking read straight off each
question's recorded search result; every recorded turn- and session-level recall_any,
recall_all and NDCG@k must equal what it returns.
"""

from __future__ import annotations

import importlib.util
import json
import os
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.suites.longmemeval import DEFAULT_DATA
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeStartedEvent,
    GraderDecisionEvent,
    RunStartedEvent,
    SessionCallEvent,
)
from benchledger.protocols import longmemeval, longmemeval_synthetic
from benchledger.replay.levels import replay
from tests.conftest import cli, one_line_exit_2

RUN = "lme1"
SHIPPED = longmemeval.load(DEFAULT_DATA)
EVAL_UTILS = [
    Path(__file__).resolve().parents[1] / ".." / "shared" / "benchmarks" / "longmemeval",
    Path("/work/shared/benchmarks/longmemeval"),
]
KS = (1, 3, 5, 10, 30, 50)  # the cut-offs run_retrieval.py evaluates


def _eval_utils() -> ModuleType:
    """LongMemEval's own eval_utils.py, imported by path (its one dependency is numpy)."""
    pytest.importorskip("numpy", reason="LongMemEval's eval_utils.py needs numpy")
    import numpy as np

    for root in EVAL_UTILS:
        path = root / "src" / "retrieval" / "eval_utils.py"
        if path.is_file():
            if not hasattr(np, "asfarray"):  # removed in numpy 2; eval_utils.py calls it
                np.asfarray = lambda a: np.asarray(a, dtype=float)  # type: ignore[attr-defined]
            spec = importlib.util.spec_from_file_location("longmemeval_eval_utils", path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            spec.loader.exec_module(module)
            return module
    pytest.skip("LongMemEval's eval_utils.py (../shared/benchmarks/longmemeval) is not here")


def _events(path: str, run_id: str) -> list[Any]:
    with open_store(path) as store:
        return [e for e, _ in Ledger(store).events(run_id)]


def _opener(path: str) -> Any:
    return lambda: Ledger(open_store(path))


def _run(ledger: str, run_id: str, *extra: str) -> int:
    return main(["run", "--suite", "longmemeval", "--platform", "embedded", "--ledger", ledger,
                 "--run-id", run_id, *extra])  # fmt: skip


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict[str, Any]:
    """One sealed run of the shipped set with the retrieval reader on the embedded platform."""
    ledger = str(tmp_path_factory.mktemp("longmemeval") / "l.sqlite")
    code = _run(ledger, RUN, "--agent", "retrieval")
    return {"code": code, "ledger": ledger, "events": _events(ledger, RUN)}


def _card(capsys, ledger: str, run_id: str) -> dict[str, Any]:
    code, out, err = cli(capsys, "report", run_id, "--ledger", ledger, "--format", "json")
    assert code == 0, err
    return json.loads(out)


def _searched(events: list[Any], stream: str) -> list[str]:
    """The turn ids the question's ask episode's searches returned, in rank order, each
    once: read off the refplatform's recorded answer (``groups[].hits[].text``)."""
    out: list[str] = []
    for e in events:
        if (isinstance(e, SessionCallEvent) and e.stream == stream
                and e.body.episode == "ask" and e.body.tool == "search"):  # fmt: skip
            for group in json.loads(e.body.text())["groups"]:
                for hit in group["hits"]:
                    tid = hit["text"][1 : hit["text"].index(" | ")]
                    if tid not in out:
                        out.append(tid)
    return out


def _official(question: dict[str, Any], retrieved: list[str]) -> dict[str, float] | None:
    """What LongMemEval's run_retrieval.py records for ``question`` (its JSON) at turn
    granularity when its retriever ranks ``retrieved``; None for a question it leaves out.

    The corpus as its process_item_flat_index builds it (user turns, ids SESSION_N; an
    evidence session's turns without has_answer renamed ``noans``), an evidence session
    being one of answer_session_ids (LongMemEval names them answer_*; the README defines
    them by that list); correct_docs and the ranking as it makes them; then its own
    evaluate_retrieval and evaluate_retrieval_turn2session."""
    utils = _eval_utils()
    if question["question_id"].endswith("_abs"):
        return None
    turns = [t for s in question["haystack_sessions"] for t in s if t["role"] == "user"]
    if not any(t.get("has_answer") for t in turns):
        return None
    evidence_sessions = set(question["answer_session_ids"])
    corpus_ids, correct = [], []
    for sid, session in zip(question["haystack_session_ids"], question["haystack_sessions"],
                            strict=True):  # fmt: skip
        for i, turn in enumerate(session):
            if turn["role"] != "user":
                continue
            tid = f"{sid}_{i + 1}"
            if sid in evidence_sessions and not turn.get("has_answer"):
                corpus_ids.append(f"noans-{tid}")  # strips to a session of its own
                continue
            corpus_ids.append(tid)
            if sid in evidence_sessions:
                correct.append(tid)
    place = {}
    for i, cid in enumerate(corpus_ids):
        place.setdefault(cid.removeprefix("noans-"), i)
    rankings = [place[t] for t in retrieved if t in place]
    out: dict[str, float] = {}
    for k in KS:
        turn = utils.evaluate_retrieval(rankings, correct, corpus_ids, k=k)
        session = utils.evaluate_retrieval_turn2session(rankings, correct, corpus_ids, k=k)
        for level, values in (("turn", turn), ("session", session)):
            for name, v in zip(("recall_any", "recall_all", "ndcg_any"), values, strict=True):
                out[f"{name}_at_{k}_{level}"] = float(v)
    return out


def _check_equal_to_eval_utils(card: dict[str, Any], events: list[Any],
                               questions: list[dict[str, Any]]) -> int:  # fmt: skip
    """Every question's recorded retrieval metrics equal eval_utils.py's on the ranking read
    off its recorded search; a cut-off the card does not measure is in no item. Returns how
    many values were compared."""
    by_id = {q["question_id"]: q for q in questions}
    measured = {n for n, m in card["metrics"].items() if not m.get("not_measured")}
    compared = 0
    for item in card["items"]:
        official = _official(by_id[item["id"]], _searched(events, item["stream"]))
        mine = {k: v for k, v in item.items() if "_at_" in k}
        if official is None:
            assert mine == {} and item["retrieval_scored"] is False, item["id"]
            continue
        assert set(mine) == {n for n in official if n in measured}, item["id"]
        for name, value in mine.items():
            assert value == pytest.approx(official[name], abs=1e-12), (item["id"], name)
            compared += 1
    return compared


# -- the run on the shipped set ----------------------------------------------------------------


def test_the_shipped_set_runs_to_a_sealed_run_that_verifies_rederives_and_replays_in_full(
    shipped, capsys
):
    assert shipped["code"] == 0
    code, out, _ = cli(capsys, "verify", RUN, "--ledger", shipped["ledger"])
    assert code == 0 and out.startswith(f"ok run {RUN}")
    rederived = replay(RUN, level="rederive", ledger=_opener(shipped["ledger"]))
    assert rederived.ok, rederived.lines()
    full = replay(RUN, level="full", ledger=_opener(shipped["ledger"]))
    assert full.ok, full.lines()
    n = len(SHIPPED.questions)  # an ingest and an ask per question, re-run from the log
    assert f"compared {2 * n} episodes, {n} units" in full.lines()[-1]


def test_the_shipped_set_has_every_question_type_and_an_abstention_question():
    types = {q.type for q in SHIPPED.questions}
    assert types == set(longmemeval.QUESTION_TYPES)
    assert any(q.abstention for q in SHIPPED.questions)
    assert any(len(q.answer_session_ids) >= 3 for q in SHIPPED.questions)


def test_the_committed_set_is_exactly_what_its_generator_writes(tmp_path):
    print(f"seed {longmemeval_synthetic.SEED}")
    with open(DEFAULT_DATA, encoding="utf-8") as fh:
        assert fh.read() == longmemeval_synthetic.render()
    out = tmp_path / "again.json"
    assert longmemeval_synthetic.main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == longmemeval_synthetic.render()


def test_the_run_records_the_files_sha256_and_each_questions_content_hash(shipped):
    started = next(e for e in shipped["events"] if isinstance(e, RunStartedEvent)).body
    assert started.config["file_sha256"] == SHIPPED.sha256
    assert started.record is not None and started.record.protocol_set_hash == SHIPPED.sha256
    recorded = {qid: v["content_hash"] for qid, v in started.config["questions"].items()}
    assert recorded == {q.id: q.content_hash for q in SHIPPED.questions}


def test_each_question_ingests_its_own_haystack_and_is_asked_at_its_date(shipped):
    events = shipped["events"]
    writes: dict[str, list[str]] = {}
    identity: dict[str, set[str]] = {}
    asked: dict[str, str] = {}
    for e in events:
        if isinstance(e, SessionCallEvent) and e.body.tool == "memory_capture":
            writes.setdefault(e.stream, []).append(str(e.body.arguments.get("content", "")))
        if isinstance(e, EpisodeStartedEvent):
            identity.setdefault(e.stream, set()).add(e.body.identity)
            if e.body.episode == "ask":
                asked[e.stream] = e.body.user_prompt
    for q in SHIPPED.questions:
        stream = f"{RUN}/{q.id}/1"
        s = q.sessions[0]
        expected = [f"[{x.id}_{i + 1} | {x.date}] {t.role}: {t.content}"
                    for x in q.sessions for i, t in enumerate(x.turns)]  # fmt: skip
        assert writes[stream] == expected, q.id
        assert writes[stream][0].startswith(f"[{s.id}_1 | {s.date}] ")
        assert asked[stream] == f"Current date: {q.date}\nQuestion: {q.question}"
        assert len(identity[stream]) == 1  # ingested and asked as its own identity
        searches = [e.body.arguments for e in events if isinstance(e, SessionCallEvent)
                    and e.stream == stream and e.body.tool == "search"]  # fmt: skip
        assert [a["intent"] for a in searches] == [q.question]  # the question, not its date
    assert len({i for ids in identity.values() for i in ids}) == len(SHIPPED.questions)
    ingested = [e.body for e in events
                if isinstance(e, GraderDecisionEvent) and e.body.check == "ingested"]  # fmt: skip
    sizes = [sum(len(s.turns) for s in q.sessions) for q in SHIPPED.questions]
    assert sorted(d.reason for d in ingested) == sorted(f"{n} of {n} turns landed" for n in sizes)


def test_every_questions_retrieval_metrics_equal_longmemevals_eval_utils(shipped, capsys):
    card = _card(capsys, shipped["ledger"], RUN)
    with open(DEFAULT_DATA, encoding="utf-8") as fh:
        questions = json.load(fh)
    assert _check_equal_to_eval_utils(card, shipped["events"], questions) > 0
    # The card's means are the official evaluation's: abstention and no-target questions
    # left out, the others averaged.
    scored = [i for i in card["items"] if i["retrieval_scored"]]
    assert {i["id"] for i in card["items"]} - {i["id"] for i in scored} == {
        q.id for q in SHIPPED.questions if q.abstention or q.type == "single-session-assistant"
    }
    for name in ("recall_any_at_1_turn", "recall_all_at_5_session", "ndcg_any_at_3_session"):
        metric = card["metrics"][name]
        assert metric["den"] == len(scored)
        assert metric["rate"] == pytest.approx(sum(i[name] for i in scored) / len(scored))
        if name.startswith("ndcg"):  # a bootstrap over questions: none from under ten
            assert metric["ci_method"] == "episode bootstrap" and metric["ci_low"] is None
        else:
            assert metric["ci_method"] == "wilson"
            assert metric["ci_low"] <= metric["rate"] <= metric["ci_high"]


def test_a_cut_off_past_the_recorded_search_depth_is_not_measured(shipped, capsys):
    card = _card(capsys, shipped["ledger"], RUN)
    depth = card["search_depth"]
    assert 0 < depth < 50
    for name, m in card["metrics"].items():
        if "_at_" not in name:
            continue
        k = int(name.split("_at_")[1].split("_")[0])
        if k > depth:
            assert m["rate"] is None and "search depth" in m["not_measured"], name
        else:
            assert not m.get("not_measured") and m["rate"] is not None, name


def test_answers_get_the_judge_free_bound_and_the_judge_is_not_measured(shipped, capsys):
    card = _card(capsys, shipped["ledger"], RUN)
    judge = card["metrics"]["judge_accuracy"]
    assert judge["rate"] is None and "judge" in judge["not_measured"]
    items = card["items"]
    assert card["metrics"]["answer_contains_gold"]["rate"] == pytest.approx(
        sum(i["answer_contains_gold"] for i in items) / len(items)
    )
    gold = {q.id: q for q in SHIPPED.questions}
    for i in items:
        q = gold[i["id"]]
        assert i["question_type"] == q.type and i["gold_answer"] == q.answer
        said = i["prediction"].lower()
        if not q.abstention:
            assert i["answer_contains_gold"] == float(q.answer.lower() in said), i["id"]
    assert set(card["by_type"]) == {*longmemeval.QUESTION_TYPES, "abstention"}


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_the_card_renders_in_every_format_with_the_metrics(shipped, capsys, fmt):
    code, out, _ = cli(capsys, "report", RUN, "--ledger", shipped["ledger"], "--format", fmt)
    assert code == 0 and "recall_all_at_5_session" in out and "multi-session" in out


def test_audit_traces_a_retrieval_metric_to_the_searches(shipped, capsys):
    code, out, _ = cli(capsys, "audit", RUN, "recall_any_at_1_turn", "--ledger",
                       shipped["ledger"])  # fmt: skip
    assert code == 0 and "longmemeval_retrieval" in out


# -- a file the suite never saw --------------------------------------------------------------


def _other_file(path: str) -> list[dict[str, Any]]:
    """A LongMemEval-format file from a generator of this test's own (not the shipped one's):
    evidence sessions named ``ev-*`` (no ``answer`` in them), a question whose evidence
    spans three sessions, an abstention question, a number as an answer, keys the format
    does not name, assistant turns flagged has_answer."""

    def session(*pairs: tuple[str, str, bool]) -> list[dict[str, Any]]:
        out: list[dict[str, Any]] = []
        for user, assistant, has in pairs:
            out += [{"role": "user", "content": user, "has_answer": has},
                    {"role": "assistant", "content": assistant}]  # fmt: skip
        return out

    chat = ("Tell me about tides.", "The moon's pull makes them.", False)
    spans = {
        "question_id": "q-three",
        "question_type": "multi-session",
        "question": "How many violins did I buy this year?",
        "answer": 3,
        "question_date": "2024/03/01 (Fri) 10:00",
        "haystack_session_ids": ["noise-1", "ev-a", "noise-2", "ev-b", "ev-c"],
        "haystack_dates": [f"2024/01/0{d} (Mon) 09:00" for d in range(1, 6)],
        "haystack_sessions": [
            session(chat, chat),
            session(chat, ("I bought a violin from a shop in Cremona.", "Lovely!", True)),
            session(chat),
            session(("I bought a second violin, a cheap one.", "Nice.", True), chat),
            session(
                ("Another violin arrived today, I bought it online.", "Wow.", True),
                ("It is the third violin I bought this year.", "Great.", False),
            ),
        ],
        "answer_session_ids": ["ev-a", "ev-b", "ev-c"],
        "source": "not a key LongMemEval names",
    }
    abstain = {
        "question_id": "q-none_abs",
        "question_type": "single-session-assistant",
        "question": "Which cello did you recommend to me?",
        "answer": "You never asked about a cello; the assistant recommended a violin tutor.",
        "question_date": "2024/03/02 (Sat) 10:00",
        "haystack_session_ids": ["ev-z", "noise-9"],
        "haystack_dates": ["2024/02/01 (Thu) 09:00", "2024/02/02 (Fri) 09:00"],
        "haystack_sessions": [
            [{"role": "user", "content": "Can you recommend a violin tutor?"},
             {"role": "assistant", "content": "Try Ms Ortiz, she teaches violin.",
              "has_answer": True}],
            session(chat),
        ],
        "answer_session_ids": ["ev-z"],
    }  # fmt: skip
    doc = [spans, abstain]
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return doc


def test_a_file_the_suite_never_saw_loads_runs_and_grades_with_the_same_equality(tmp_path, capsys):
    data = str(tmp_path / "theirs.json")
    doc = _other_file(data)
    code, out, _ = cli(capsys, "protocols", "validate", data)
    assert code == 0 and "LongMemEval, 2 questions (1 abstention)" in out
    ledger = str(tmp_path / "l.sqlite")
    code = _run(ledger, "other", "--data", data, "--agent", "scripted")
    printed = capsys.readouterr()
    assert code == 0, printed.err
    card = _card(capsys, ledger, "other")
    events = _events(ledger, "other")
    assert _check_equal_to_eval_utils(card, events, doc) > 0
    items = {i["id"]: i for i in card["items"]}
    assert items["q-three"]["gold_answer"] == "3" and items["q-three"]["retrieval_scored"]
    # The scripted agent answers the gold answer (abstains on the abstention question).
    assert card["metrics"]["answer_contains_gold"]["rate"] == 1.0
    assert items["q-none_abs"]["prediction"] == "no information available"
    assert replay("other", level="full", ledger=_opener(ledger)).ok


@pytest.mark.parametrize(
    ("change", "needle"),
    [
        (lambda q: q.pop("haystack_dates"), "[0] q-three.haystack_dates: must be a list of text"),
        (lambda q: q.update(question_type="multi"), "[0] q-three.question_type: 'multi' is not"),
        (lambda q: q["haystack_sessions"][1][1].update(role="bot"),
         "[0] q-three.haystack_sessions[1][1].role: must be user or assistant, got 'bot'"),
        (lambda q: q.update(answer_session_ids=["ev-q"]),
         "[0] q-three.answer_session_ids: 'ev-q' is not among haystack_session_ids"),
        (lambda q: q["haystack_sessions"].pop(),
         "[0] q-three.haystack_sessions: the haystack lists differ in length"),
        (lambda q: q["haystack_sessions"][0][0].update(has_answer="yes"),
         "[0] q-three.haystack_sessions[0][0].has_answer: must be true or false"),
    ],
)  # fmt: skip
def test_a_malformed_file_is_refused_in_one_line_naming_question_and_field(
    tmp_path, capsys, change, needle
):
    data = str(tmp_path / "bad.json")
    doc = _other_file(data)
    change(doc[0])
    with open(data, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    code, _, err = cli(capsys, "protocols", "validate", data)
    one_line_exit_2(code, err, f"{data}: {needle}")
    ledger = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, "run", "--suite", "longmemeval", "--data", data, "--ledger", ledger)
    one_line_exit_2(code, err, needle)
    assert not os.path.exists(ledger)  # nothing half-written


def test_bench_longmemeval_runs_the_shape_at_three_haystack_sizes(capsys):
    code, out, _ = cli(capsys, "bench", "longmemeval", "--questions", "2", "--sessions", "4",
                       "--turns", "2", "--concurrency", "2", "--json")  # fmt: skip
    assert code == 0
    rows = json.loads(out)
    assert [r["sessions"] for r in rows] == [1, 2, 4]
    for r in rows:
        doc = longmemeval_synthetic.full_size(2, r["sessions"], 2)
        assert r["turns"] == sum(len(s) for q in doc for s in q["haystack_sessions"])
        assert r["cpu_ms_per_turn"] > 0 and r["peak_rss_mib"] > 0
    code, _, err = cli(capsys, "bench", "longmemeval", "--sessions", "0")
    one_line_exit_2(code, err, "--sessions must be at least 1")
