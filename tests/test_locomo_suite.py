"""The locomo suite end to end on the embedded reference platform: LoCoMo's questions asked
of the memory each conversation was ingested into, graded by LoCoMo's rules, with the
retrieval metrics read off the recorded search results (docs/locomo.md).

One run of the shipped LoCoMo-shaped set with the retrieval reader backs most tests (it
takes a few seconds); the subset, ``--data`` and resume tests make runs of their own.
"""

from __future__ import annotations

import asyncio
import copy
import json
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.driver import RunDriver
from benchledger.harness.record import RunConfig
from benchledger.harness.suites.locomo import DEFAULT_DATA
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeStartedEvent,
    GraderDecisionEvent,
    RunStartedEvent,
    SessionCallEvent,
    UnitStartedEvent,
    is_probe_stream,
)
from benchledger.protocols import locomo
from benchledger.replay.levels import replay
from tests.conftest import cli, interrupted_after, one_line_exit_2

RUN = "lm1"
SHIPPED = locomo.load(DEFAULT_DATA)
TURNS = {s.sample_id: sum(len(x.turns) for x in s.sessions) for s in SHIPPED.samples}
QUESTIONS = [q for s in SHIPPED.samples for q in s.questions]


def _events(path: str, run_id: str) -> list[Any]:
    with open_store(path) as store:
        return [e for e, _ in Ledger(store).events(run_id)]


def _opener(path: str) -> Any:
    return lambda: Ledger(open_store(path))


@pytest.fixture(scope="module")
def shipped(tmp_path_factory) -> dict[str, Any]:
    """One sealed run of the shipped set with the retrieval reader on the embedded platform."""
    ledger = str(tmp_path_factory.mktemp("locomo") / "l.sqlite")
    code = main(["run", "--suite", "locomo", "--agent", "retrieval", "--platform", "embedded",
                 "--ledger", ledger, "--run-id", RUN])  # fmt: skip
    return {"code": code, "ledger": ledger, "events": _events(ledger, RUN)}


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
    # One ask per question and one ingest per conversation were re-run from the log.
    n = len(QUESTIONS)
    assert f"compared {n + len(SHIPPED.samples)} episodes, {n} units" in full.lines()[-1]


def test_the_run_records_the_files_sha256_and_each_samples_content_hash(shipped):
    started = next(e for e in shipped["events"] if isinstance(e, RunStartedEvent)).body
    assert started.config["file_sha256"] == SHIPPED.sha256
    assert started.record is not None and started.record.protocol_set_hash == SHIPPED.sha256
    recorded = started.config["samples"]
    assert {sid: v["content_hash"] for sid, v in recorded.items()} == {
        s.sample_id: s.content_hash for s in SHIPPED.samples
    }


def test_each_conversations_first_unit_ingests_every_turn_and_the_others_ask_as_its_identity(
    shipped,
):
    events = shipped["events"]
    writes: dict[str, list[str]] = {}
    identity: dict[str, str] = {}  # stream -> the identity it asked as
    for e in events:
        if is_probe_stream(e.stream):  # the probe's writes are no unit's
            continue
        if isinstance(e, SessionCallEvent) and e.body.tool == "memory_capture":
            writes.setdefault(e.stream, []).append(str(e.body.arguments.get("content", "")))
        if isinstance(e, EpisodeStartedEvent) and e.body.episode == "ask":
            identity[e.stream] = e.body.identity
    # One ingesting unit per conversation, writing every turn, dialogue id first, in order.
    assert sorted(len(w) for w in writes.values()) == sorted(TURNS.values())
    first = next(iter(writes.values()))
    assert first[0].startswith("[D1:1 | ") and first[1].startswith("[D1:2 | ")
    for sample in SHIPPED.samples:
        streams = [s for s in identity if f"/{sample.sample_id}:" in s]
        assert len(streams) == len(sample.questions)
        assert len({identity[s] for s in streams}) == 1  # the whole conversation, one identity
    ingested = [e.body for e in events
                if isinstance(e, GraderDecisionEvent) and e.body.check == "ingested"]  # fmt: skip
    assert [(d.verdict, d.reason) for d in ingested] == [
        (True, f"{n} of {n} turns landed") for n in TURNS.values()
    ]


def test_report_json_lists_every_question_with_its_grades_and_retrieved_ids_in_rank_order(
    shipped, capsys
):
    code, out, _ = cli(capsys, "report", RUN, "--ledger", shipped["ledger"], "--format", "json")
    assert code == 0
    card = json.loads(out)
    items = card["items"]
    assert [i["id"] for i in items] == [q.id for q in QUESTIONS]
    gold = {q.id: q for q in QUESTIONS}
    for item in items:
        q = gold[item["id"]]
        assert item["category"] == q.category and item["gold_answer"] == q.answer
        assert isinstance(item["prediction"], str) and 0.0 <= item["f1"] <= 1.0
        assert item["evidence_recall"] is not None  # every shipped question has evidence
        assert all(d.startswith("D") for d in item["retrieved"])
        assert len(set(item["retrieved"])) == len(item["retrieved"])  # each id once
    # The retrieved ids are the search result's hits in its own order.
    stream = f"{RUN}/{items[0]['id']}/1"
    search = next(e for e in shipped["events"] if isinstance(e, SessionCallEvent)
                  and e.stream == stream and e.body.tool == "search")  # fmt: skip
    texts = [h["text"] for g in json.loads(search.body.text())["groups"] for h in g["hits"]]
    assert items[0]["retrieved"] == [t[1 : t.index(" | ")] for t in texts][: len(texts)]
    names = set(card["metrics"])
    assert {"locomo_f1", "f1_multi_hop", "f1_temporal", "f1_open_domain", "f1_single_hop",
            "f1_adversarial", "adversarial_accuracy", "evidence_recall", "recall_at_1",
            "recall_at_5", "recall_at_10", "mrr"} <= names  # fmt: skip
    mean = sum(i["f1"] for i in items) / len(items)
    assert card["metrics"]["locomo_f1"]["rate"] == pytest.approx(mean)


@pytest.mark.parametrize("metric", ["locomo_f1", "recall_at_5", "mrr"])
def test_audit_traces_a_metric_to_the_decisions_and_the_search_that_retrieved_the_turns(
    shipped, capsys, metric
):
    code, out, _ = cli(capsys, "audit", RUN, metric, "--ledger", shipped["ledger"])
    assert code == 0
    assert f"{len(QUESTIONS)} contributing units" in out
    assert "tools/call search" in out and "[D" in out


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_the_card_renders_in_every_format_with_the_metrics(shipped, capsys, fmt):
    code, out, _ = cli(capsys, "report", RUN, "--ledger", shipped["ledger"], "--format", fmt)
    assert code == 0 and "recall_at_5" in out and "f1_adversarial" in out
    assert "ask latency" in out and "median" in out


def test_compare_sets_two_runs_side_by_side_the_metrics_they_differ_on_first(shipped, capsys):
    # The scripted agent asks the same searches but answers the gold answer: its F1 differs
    # from the reader's, its retrieval does not.
    ledger = shipped["ledger"]
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--ledger", ledger, "--run-id", "lm2")
    assert code == 0, err
    code, out, _ = cli(capsys, "compare", RUN, "lm2", "--ledger", ledger)
    assert code == 0
    # Who vouches for each run, the shared what-differs lead, then every metric.
    lead, table = out.split("\n\n", 1)
    assert lead.startswith(f"run {RUN}: ") and "\nwhat differs:\n" in lead
    assert "  locomo_f1: " in lead
    assert "recall_at_5:" not in lead and "wall: " in lead
    rows = [
        line.split() for line in table.splitlines() if line.split()[:1] and "_" in line.split()[0]
    ]
    names = [r[0] for r in rows]
    assert names[0] == "locomo_f1" and rows[0][2] == "1.000"
    recall = next(r for r in rows if r[0] == "recall_at_5")
    assert recall[1] == recall[2]
    assert names.index("recall_at_5") > names.index("f1_single_hop")


# -- subsets, other data, refusals ---------------------------------------------------------------


def test_a_glob_runs_one_conversation_and_limit_keeps_its_first_questions(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--protocol", "synth-2:*",
                       "--limit", "3", "--ledger", ledger, "--run-id", "sub")  # fmt: skip
    assert code == 0, err
    started = [
        e.body.protocol_id for e in _events(ledger, "sub") if isinstance(e, UnitStartedEvent)
    ]
    assert sorted(started) == ["synth-2:q1", "synth-2:q2", "synth-2:q3"]
    code, out, _ = cli(capsys, "report", "sub", "--ledger", ledger, "--format", "json")
    card = json.loads(out)
    # The scripted agent answers the gold answer: the plumbing grades it 1 everywhere.
    assert [i["f1"] for i in card["items"]] == [1.0, 1.0, 1.0]


def test_a_glob_matching_no_question_is_refused_in_one_line(tmp_path, capsys):
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--protocol", "conv-26/*",
                       "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    one_line_exit_2(code, err, "--protocol conv-26/*: no question matching that pattern")


def _users_file(path: str) -> str:
    """A small LoCoMo-shaped file of the test's own, with keys the suite ignores."""
    conv: dict[str, Any] = {"speaker_a": "Mira", "speaker_b": "Tom",
                            "session_1_date_time": "9:00 am on 2 May, 2023",
                            "session_1": [
                                {"speaker": "Mira", "dia_id": "D1:1", "text": "Hi Tom!",
                                 "img_url": ["x.png"], "blip_caption": "a wave"},
                                {"speaker": "Tom", "dia_id": "D1:2",
                                 "text": "I adopted a beagle named Rufus."}],
                            "session_1_summary": "they talk"}  # fmt: skip
    qa = [{"question": "What is the name of Tom's beagle?", "answer": "Rufus",
           "evidence": ["D1:2"], "category": 4},
          {"question": "What is Mira's cat called?", "adversarial_answer": "Rufus",
           "evidence": ["D1:2"], "category": 5}]  # fmt: skip
    doc = [{"sample_id": "u-1", "conversation": conv, "qa": qa, "event_summary": {},
            "observation": {}}]  # fmt: skip
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return path


def test_data_runs_a_users_locomo_file_with_keys_it_ignores(tmp_path, capsys):
    data = _users_file(str(tmp_path / "mine.json"))
    ledger = str(tmp_path / "l.sqlite")
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--data", data, "--agent",
                       "retrieval", "--ledger", ledger, "--run-id", "u")  # fmt: skip
    assert code == 0, err
    code, out, _ = cli(capsys, "report", "u", "--ledger", ledger, "--format", "json")
    items = {i["id"]: i for i in json.loads(out)["items"]}
    assert items["u-1:q1"]["retrieved"][0] == "D1:2"
    assert items["u-1:q1"]["prediction"] == "I adopted a beagle named Rufus."
    assert items["u-1:q1"]["evidence_recall"] == 1.0 and items["u-1:q1"]["recall_at_1"] == 1.0
    assert replay("u", level="full", ledger=_opener(ledger)).ok


def test_protocols_validate_names_the_sample_and_field_of_a_bad_locomo_file(tmp_path, capsys):
    path = _users_file(str(tmp_path / "bad.json"))
    with open(path, encoding="utf-8") as fh:
        doc = json.load(fh)
    bad = copy.deepcopy(doc)
    bad[0]["qa"][0]["category"] = 9
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(bad, fh)
    code, _, err = cli(capsys, "protocols", "validate", path)
    one_line_exit_2(code, err, f"{path}: u-1:qa[0].category: must be one of 1 to 5, got 9")
    code, out, _ = cli(capsys, "protocols", "validate", DEFAULT_DATA)
    assert code == 0 and f"{len(QUESTIONS)} questions" in out and SHIPPED.sha256 in out


def test_a_platform_per_unit_is_refused_since_a_conversations_units_share_its_memory(
    tmp_path, capsys
):
    code, _, err = cli(capsys, "run", "--suite", "locomo", "--platform-scope", "unit",
                       "--ledger", str(tmp_path / "l.sqlite"))  # fmt: skip
    one_line_exit_2(code, err, "--platform-scope pass")


# -- resume ------------------------------------------------------------------------------------


def test_a_resumed_run_reingests_for_the_units_it_runs_and_replays_in_full(tmp_path):
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    cfg = RunConfig(suite="locomo", agent="retrieval", run_id="rs", concurrency=1,
                    protocol=["synth-1:*"])  # fmt: skip
    interrupted_after(ledger, cfg, 2)
    resumed = asyncio.run(RunDriver(ledger, RunConfig(resume="rs")).execute())
    assert resumed.root
    events = list(e for e, _ in ledger.events("rs"))
    ingests = [e.stream for e in events
               if isinstance(e, EpisodeStartedEvent) and e.body.episode == "ingest"]  # fmt: skip
    assert len(ingests) == 2  # the first process's and the resumed one's, each its own
    asked = {e.stream: e.body.identity for e in events
             if isinstance(e, EpisodeStartedEvent) and e.body.episode == "ask"}  # fmt: skip
    assert len(set(asked.values())) == 2  # before and after the resume: fresh identities
    ledger.store.close()
    path = str(tmp_path / "l.sqlite")
    assert replay("rs", level="rederive", ledger=_opener(path)).ok
    full = replay("rs", level="full", ledger=_opener(path))
    assert full.ok, full.lines()
