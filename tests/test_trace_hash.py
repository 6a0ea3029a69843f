"""Trace hashes: the documented worked example, the normalization rules, and what they buy."""

from __future__ import annotations

import os
import re

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.codec import canonical_json, decode_event
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    EpisodeFinishedEvent,
    EpisodeStartedBody,
    GraderDecisionBody,
    InfraErrorBody,
    ModelCallBody,
    ReadBackBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitFinishedEvent,
    UnitStartedBody,
    is_probe_stream,
)
from benchledger.projections.trace import (
    Ids,
    check_hashes,
    episode_trace_hash,
    normalize,
    normalize_path,
    trace,
    unit_trace_hash,
)
from tests.conftest import REPO

DOC = os.path.join(REPO, "docs", "trace-hash.md")


def doc_block(name: str) -> list[str]:
    """The lines of the fenced block after ``<!-- trace-example: NAME ...-->`` in the doc."""
    with open(DOC, encoding="utf-8") as fh:
        text = fh.read()
    found = re.search(rf"<!-- trace-example: {name}\b[^>]*-->\s*```text\n(.*?)```", text, re.S)
    assert found, f"docs/trace-hash.md has no {name} block"
    return found.group(1).strip().splitlines()


# -- the worked example -------------------------------------------------------------------------


def test_the_documented_example_recomputes_to_the_documented_items_and_hash():
    events = [decode_event(line.encode()) for line in doc_block("events")]
    pairs = [(e.seq, e.body) for e in events]  # type: ignore[attr-defined]
    items = [canonical_json(s.item).decode() for s in trace(pairs)]
    assert items == doc_block("stable")
    (documented,) = doc_block("hash")
    assert episode_trace_hash(b for _, b in pairs) == documented
    finished = events[-1]
    assert isinstance(finished, EpisodeFinishedEvent)
    assert finished.body.trace_hash == documented  # what the live runner recorded


# -- normalization ------------------------------------------------------------------------------

ID_A = "02f94e6645ebdf5a3cc82c5cc3396d18"
ID_B = "71f6d40a4260355ac4a8a2e0faf73c13"


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"a": 1, "created_at": "x", "nested": [{"updated_at": 1, "latency_ms": 2.5, "b": 2}]},
         {"a": 1, "nested": [{"b": 2}]}),
        ({"session_id": "dps_1", "stats": {"duration_ms": 6, "rows": 3}}, {"stats": {"rows": 3}}),
        (f'{{"id": "{ID_A}", "created_at": "2026"}}', {"id": "<id:1>"}),
        (f"insight {ID_A} then {ID_B} then {ID_A} again",
         "insight <id:1> then <id:2> then <id:1> again"),
        ("page kp_1234abcd-1111-2222-3333-444455556666 and evt_0123456789abcdef01234567",
         "page <id:1> and <id:2>"),
        ("a number 12345678901234567890123 is not an id", "a number 12345678901234567890123 is "
         "not an id"),
        ("handle dps_b719a158789eb893af5227fe96c51277 used", "handle <handle> used"),
        ("saved at 2026-11-30T05:15:31.022397Z by bench-agent-003@apikey.local",
         "saved at <time> by <email:1>"),
        ("apikey:bench-agent-007 and apikey:bench-agent-001",
         "apikey:<agent:1> and apikey:<agent:2>"),
        ({"score": 0.1234567891234, "n": 3, "ok": True},
         {"score": 0.123456789, "n": 3, "ok": True}),
        ('{"not": "json"', '{"not": "json"'),
    ],
    ids=[
        "volatile-keys-at-any-depth",
        "handles-and-durations",
        "json-text-is-a-structure",
        "ids-numbered-by-first-appearance",
        "prefixed-ids-and-uuids",
        "numbers-are-not-ids",
        "session-handles-removed",
        "times-and-emails",
        "pool-identity-names",
        "floats-rounded-to-9-decimals",
        "broken-json-stays-text",
    ],
)  # fmt: skip
def test_normalization(value, expected):
    assert normalize(value, Ids()) == expected


def test_a_read_back_path_drops_clock_parameters_and_decodes_the_rest():
    path = (
        f"/api/v1/admin/knowledge/insights/{ID_A}?captured_by=bench-agent-003%40apikey.local"
        "&since=2026-11-30T05%3A04%3A27.457021Z&status=pending"
    )
    assert normalize_path(path, Ids()) == [
        "/api/v1/admin/knowledge/insights/<id:1>",
        [["captured_by", "<email:1>"], ["status", "pending"]],
    ]


# -- what a trace holds -------------------------------------------------------------------------


def episode(stage: str = "recall", answer: str = "FINAL ANSWER: West", **call: object) -> list:
    args = call.get("arguments", {"intent": "which region"})
    return [
        EpisodeStartedBody(episode=stage, identity="pool:001 x", user_prompt="Which region?"),
        SessionCallBody(episode=stage, method="tools/call", tool="search", arguments=args,
                        content=[{"type": "text", "text": f'{{"ref": "{ID_A}"}}'}],
                        latency_ms=float(call.get("latency_ms", 3.0))),
        EpisodeFinishedBody(episode=stage, final_answer=answer, tool_calls=1,
                            input_tokens=int(call.get("tokens", 10))),
    ]  # fmt: skip


@pytest.mark.parametrize(
    ("changed", "equal"),
    [
        (episode(latency_ms=99.0, tokens=999), True),
        (episode(), True),
        (episode(answer="FINAL ANSWER: East"), False),
        (episode(arguments={"intent": "which city"}), False),
        (episode(stage="transfer"), False),
    ],
    ids=["latency-and-tokens-are-volatile", "same-inputs", "another-answer", "another-call",
         "another-stage"],
)  # fmt: skip
def test_an_episode_hash_changes_with_behaviour_and_only_with_behaviour(changed, equal):
    assert (episode_trace_hash(changed) == episode_trace_hash(episode())) is equal


def test_a_failed_model_attempt_is_not_part_of_the_trace():
    ok = ModelCallBody(episode="teach", request_hash="h", request={"m": 1}, response={"text": "x"})
    failed = ModelCallBody(episode="teach", request_hash="h", request={"m": 1},
                           error="rate_limited: slow down", retry=0)  # fmt: skip
    start = EpisodeStartedBody(episode="teach")
    end = EpisodeFinishedBody(episode="teach")
    assert episode_trace_hash([start, failed, ok, end]) == episode_trace_hash([start, ok, end])


def test_an_unfinished_attempt_leaves_nothing_and_its_retry_counts():
    died = episode()[:2]
    error = InfraErrorBody(stage="recall", error="timeout", message="slow", retryable=True)
    with_retry = [UnitStartedBody(protocol_id="p", attempt=1), *died, error, *episode()]
    clean = [UnitStartedBody(protocol_id="p", attempt=1), *episode()]
    assert unit_trace_hash(with_retry) == unit_trace_hash(clean)
    kept = trace(enumerate(died), keep_unfinished=True)
    assert [s.item[0] for s in kept] == ["episode_started", "session_call"]


def test_consecutive_identical_read_backs_count_once():
    def poll(ids: list[str], since: str) -> ReadBackBody:
        return ReadBackBody(stage="capture", method="GET", path=f"/i?since={since}&s=pending",
                            body={"data": ids}, purpose="capture", observed={"ids": ids},
                            latency_ms=1.0)  # fmt: skip

    three = [poll([], "1"), poll([], "2"), poll([ID_A], "3")]
    once = [poll([], "9"), poll([ID_A], "10")]
    assert unit_trace_hash(three) == unit_trace_hash(once)
    assert unit_trace_hash([poll([], "1"), poll([ID_A], "2"), poll([], "3")]) != unit_trace_hash(
        [poll([], "1"), poll([ID_A], "2")]
    )


def test_the_unit_hash_covers_verdicts_and_recorded_hashes_are_checked():
    verdict = GraderDecisionBody(stage="recall", check="recall_correct", verdict=True)
    flipped = GraderDecisionBody(stage="recall", check="recall_correct", verdict=False)
    bodies = [*episode(), verdict]
    assert unit_trace_hash(bodies) != unit_trace_hash([*episode(), flipped])
    finished = UnitFinishedBody(trace_hash=unit_trace_hash(bodies))
    checks = check_hashes(list(enumerate([*bodies, finished])))
    assert [(c.scope, c.recorded_at_all, c.equal) for c in checks] == [
        ("episode", False, False),  # an old event: nothing recorded
        ("unit", True, True),
    ]


# -- two fresh runs -----------------------------------------------------------------------------


def test_two_runs_on_fresh_platforms_have_equal_trace_hashes_and_another_protocol_differs(
    tmp_path,
):
    folder = tmp_path / "protocols"
    folder.mkdir()
    for pid in ("bl-margin-region", "bl-focus-region"):
        with open(os.path.join(protocols.LIFECYCLE_DIR, f"{pid}.yaml")) as fh:
            (folder / f"{pid}.yaml").write_text(fh.read())
    path = str(tmp_path / "l.sqlite")
    for run_id in ("first", "second"):
        args = ["run", "--protocols", str(folder), "--ledger", path, "--run-id", run_id,
                "--platform-scope", "unit"]  # fmt: skip
        assert main(args) == 0
    led = Ledger(open_store(path))
    try:
        hashes = {
            run_id: {(e.stream.split("/", 1)[1], e.seq): e.body.trace_hash
                     for e, _ in led.events(run_id)
                     if isinstance(e, EpisodeFinishedEvent | UnitFinishedEvent)
                     and not is_probe_stream(e.stream)}
            for run_id in ("first", "second")
        }  # fmt: skip
    finally:
        led.store.close()
    assert hashes["first"] == hashes["second"]
    assert all(len(h) == 64 for h in hashes["first"].values())
    units = {k[0]: h for k, h in hashes["first"].items() if k[1] == max(
        s for (u, s) in hashes["first"] if u == k[0])}  # fmt: skip
    assert len(set(units.values())) == 2  # different protocols, different behaviour
