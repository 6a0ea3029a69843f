"""The provenance lane: every answer points back to a real source, and runs are deterministic.

Pure parts first (the SOURCES line, the scripted agent's case policy, the decision
function on hand-built events, the metrics on hand-built replicates), then the lane end
to end on a fresh embedded platform per unit, and one run per metric that makes it fail.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
from collections.abc import Callable
from typing import Any

import msgspec
import pytest

from benchledger.cli import main
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.agents.base import Episode, Turn
from benchledger.harness.agents.scripted_cases import capture_type, case_turn, question_parts
from benchledger.harness.driver import RunDriver
from benchledger.harness.platforms.provision import EmbeddedProvisioner, PlatformSpec
from benchledger.harness.record import RunConfig
from benchledger.harness.unit import UnitContext, UnitPlan
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    EpisodeStartedBody,
    ReadBackBody,
    SessionCallBody,
    SessionCallEvent,
)
from benchledger.projections.source import from_ledger
from benchledger.projections.suites import lookup
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.provenance import scorecard as pv
from benchledger.projections.suites.provenance.decisions import (
    ATTRIBUTION,
    PRECISION,
    VALIDITY,
    decide_case,
    resolve,
)
from benchledger.protocols.cases import Case, case_set_hash, cited_sources
from benchledger.replay.levels import replay

URN = "urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.orders,PROD)"
MEMORY, INSIGHT, MADE_UP = "a" * 31 + "1", "b" * 31 + "2", "0123456789abcdef" * 2
ME = "pool:001 bench-agent-001@apikey.local"

# -- the SOURCES line -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("answer", "refs"),
    [
        (f"FINAL ANSWER: x\nSOURCES: {URN}, kp-bl-1", [URN, "kp-bl-1"]),
        ("FINAL ANSWER: x\n**Sources:** `abc`; 'def'.", ["abc", "def"]),
        ("SOURCES: old\nFINAL ANSWER: x\nSOURCES: new, new", ["new"]),
        ("FINAL ANSWER: x\nSOURCES: none", []),
        ("FINAL ANSWER: x", []),
    ],
    ids=["a-urn-keeps-its-commas", "markdown-and-quotes", "the-last-line-once", "none", "absent"],
)
def test_the_sources_line_lists_the_cited_refs(answer, refs):
    assert cited_sources(answer) == refs


def test_a_case_set_hash_ignores_order_and_sees_content():
    a = Case("A", "pack_axiom", "p?", ("pack",))
    b = Case("B", "vault_recall", "q?", ("vault",), ("Remember q.",))
    assert case_set_hash([a, b]) == case_set_hash([b, a])
    assert case_set_hash([a, b]) != case_set_hash([a, msgspec.structs.replace(b, prompt="r?")])


# -- the scripted agent on a case ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("prompt", "parts"),
    [
        ("What is X?", ["What is X?"]),
        ("What is X, and which table holds Y?", ["What is X", "which table holds Y?"]),
        ("Who owns X; when is Y?", ["Who owns X", "when is Y?"]),
    ],
    ids=["one-question", "comma-and", "semicolon"],
)
def test_the_scripted_agent_asks_each_part_of_a_question_on_its_own(prompt, parts):
    assert question_parts(prompt) == parts


@pytest.mark.parametrize(
    ("prompt", "kind"),
    [
        ("Save this definition: a 'big order' is over 1,000 USD.", "business_knowledge"),
        ("Remember that the sync is on Thursdays.", "episodic_event"),
    ],
    ids=["a-definition-is-taught-for-review", "a-note-is-a-personal-memory"],
)
def test_the_scripted_agent_saves_a_prime_as_its_kind(prompt, kind):
    case = Case("C", "teaching", "q?", ("teaching",), (prompt,))
    turn = case_turn(Episode("prime_1", "", prompt, case, 6), [{"role": "user", "text": prompt}])
    (call,) = turn.tool_calls
    assert call.name == "memory_capture" and call.arguments["type"] == kind
    assert capture_type(prompt) == kind


def _search(*groups: tuple[str, list[str]]) -> dict[str, Any]:
    hits = [{"source": s, "hits": [{"ref": r, "text": f"text of {r}"} for r in refs]}
            for s, refs in groups]  # fmt: skip
    return {"role": "tool", "name": "search", "text": json.dumps({"groups": hits})}


def test_the_scripted_agent_cites_one_unused_best_hit_per_part_and_never_reads_the_expectation():
    case = Case("C", "mixed", "What is X, and which table holds Y?", ("pack", "vault"), ("R.",))
    ep = Episode("answer", "", case.prompt, case, 6)
    first = case_turn(ep, [])
    assert [c.arguments["intent"] for c in first.tool_calls] == ["What is X"]
    found = [_search(("memory", [MEMORY]), ("catalog", [URN])),
             _search(("memory", [MEMORY]), ("knowledge_pages", ["kp-bl-1"]))]  # fmt: skip
    final = case_turn(ep, found)
    assert not final.tool_calls
    assert final.text.startswith("FINAL ANSWER: text of ")
    assert cited_sources(final.text) == [MEMORY, "kp-bl-1"]
    other = msgspec.structs.replace(case, expected_sources=("teaching",))
    blind = case_turn(ep._replace(protocol=other), found)
    assert blind == final


def test_with_no_hits_the_scripted_agent_abstains_and_cites_nothing():
    case = Case("C", "pack_axiom", "What is X?", ("pack",))
    final = case_turn(Episode("answer", "", case.prompt, case, 6), [_search()])
    assert final.text == "FINAL ANSWER: INSUFFICIENT INFORMATION"
    assert cited_sources(final.text) == []


# -- the decision function on hand-built events -------------------------------------------------


def _text(value: Any) -> list[dict[str, Any]]:
    return [{"type": "text", "text": json.dumps(value)}]


def _call(episode: str, tool: str, result: Any) -> SessionCallBody:
    return SessionCallBody(episode=episode, method="tools/call", tool=tool, content=_text(result))


def _read(ref: str, kind: str, record: str, exists: bool, body: Any = None) -> ReadBackBody:
    observed = {"ref": ref, "kind": kind, "record": record, "exists": exists}
    return ReadBackBody(stage="provenance", method="GET", path="/x", body=body, purpose="ref",
                        observed=observed)  # fmt: skip


def _events(
    sources: list[str],
    *,
    taught: dict[str, str] | None = None,
    surfaced: tuple[str, ...] = (),
    made_in_turn: tuple[str, ...] = (),
    reads: tuple[ReadBackBody, ...] = (),
) -> list[tuple[int, Body]]:
    bodies: list[Body] = []
    for n, (rid, sink) in enumerate((taught or {}).items(), 1):
        bodies += [EpisodeStartedBody(episode=f"prime_{n}", identity=ME),
                   _call(f"prime_{n}", "memory_capture", {"id": rid, "sink_class": sink}),
                   EpisodeFinishedBody(episode=f"prime_{n}", final_answer="Saved.")]  # fmt: skip
    bodies.append(EpisodeStartedBody(episode="answer", identity=ME, user_prompt="q?"))
    hits = [{"ref": r, "text": "t", "reference": f"mcp:memory:{r}"} for r in surfaced]
    bodies.append(_call("answer", "search", {"groups": [{"source": "memory", "hits": hits}]}))
    for rid in made_in_turn:
        bodies.append(_call("answer", "memory_capture", {"id": rid}))
    answer = "FINAL ANSWER: x" + (f"\nSOURCES: {', '.join(sources)}" if sources else "")
    bodies.append(EpisodeFinishedBody(episode="answer", final_answer=answer, sources=sources))
    bodies += list(reads)
    return list(enumerate(bodies))


RESOLUTIONS = {
    "a-seeded-catalog-entity-is-pack": (
        _events([URN], reads=(_read(URN, "pack", "catalog", True),)), ("pack",), ""),
    "a-made-up-id-resolves-nowhere": (
        _events([MADE_UP], reads=(_read(MADE_UP, "vault", "insight", False),
                                  _read(MADE_UP, "pack", "page", False),
                                  _read(MADE_UP, "vault", "memory", False),)),
        None, "the platform knows no such source"),
    "a-ref-never-looked-up-is-invalid": (
        _events([URN]), None, "never looked up on the platform"),
    "a-memory-the-turn-surfaced-is-vault": (
        _events([MEMORY], taught={MEMORY: "episodic_event"}, surfaced=(MEMORY,),
                reads=(_read(MEMORY, "vault", "memory", True),)), ("vault",), ""),
    "a-memory-the-turn-never-surfaced-is-invalid": (
        _events([MEMORY], taught={MEMORY: "episodic_event"},
                reads=(_read(MEMORY, "vault", "memory", True),)),
        None, "a memory the turn's tool results never surfaced"),
    "an-insight-a-prime-taught-and-the-turn-found-is-teaching-and-vault": (
        _events([INSIGHT], taught={INSIGHT: "business_knowledge"}, surfaced=(INSIGHT,),
                reads=(_read(INSIGHT, "vault", "insight", True),)), ("teaching", "vault"), ""),
    "an-insight-a-prime-taught-is-teaching-unsurfaced": (
        _events([INSIGHT], taught={INSIGHT: "business_knowledge"},
                reads=(_read(INSIGHT, "vault", "insight", True),)), ("teaching",), ""),
    "an-id-the-turns-own-capture-returned-was-made-not-found": (
        _events([MEMORY], made_in_turn=(MEMORY,), reads=(_read(MEMORY, "vault", "memory", True),)),
        None, "never surfaced"),
    "a-page-the-cases-own-identity-wrote-is-not-seeded": (
        _events(["kp_x"], reads=(_read("kp_x", "pack", "page", True,
                                       {"created_email": "bench-agent-001@apikey.local"}),)),
        None, "not seeded knowledge"),
}  # fmt: skip


@pytest.mark.parametrize(("name"), list(RESOLUTIONS), ids=list(RESOLUTIONS))
def test_a_cited_ref_is_resolved_against_the_ledger_and_the_platform(name):
    events, kinds, why = RESOLUTIONS[name]
    (source,) = resolve(events)
    if kinds is None:
        assert not source.valid and source.kinds == () and why in source.why
    else:
        assert source.valid and source.kinds == kinds
    assert source.evidence[0] == max(s for s, b in events if isinstance(b, EpisodeFinishedBody))


def _verdicts(case: Case, events: list[tuple[int, Body]]) -> dict[str, Any]:
    return {d.body.check: (d.body.verdict, d.body.reason) for d in decide_case(case, events)}


def test_an_answer_without_sources_fails_validity_and_attribution():
    case = Case("C", "pack_axiom", "q?", ("pack",))
    v = _verdicts(case, _events([]))
    assert v[VALIDITY] == (False, "no sources cited (no SOURCES: line after FINAL ANSWER)")
    assert v[ATTRIBUTION][0] is False and "missing pack" in v[ATTRIBUTION][1]
    assert v[PRECISION] == (None, "no cited source resolved")


def test_attribution_names_the_missing_kind_and_precision_the_unexpected_source():
    case = Case("C", "teaching", "q?", ("teaching",), ("Save this definition: d.",))
    events = _events([MEMORY, URN], taught={MEMORY: "episodic_event"}, surfaced=(MEMORY,),
                     reads=(_read(MEMORY, "vault", "memory", True),
                            _read(URN, "pack", "catalog", True),))  # fmt: skip
    v = _verdicts(case, events)
    assert v[VALIDITY][0] is True
    assert v[ATTRIBUTION] == (False, "expected teaching; found pack, vault; missing teaching")
    assert v[PRECISION][0] is False and URN in v[PRECISION][1]


def test_every_decision_cites_the_scored_turn_and_the_reads_it_judged():
    case = Case("C", "pack_axiom", "q?", ("pack",))
    events = _events([URN], reads=(_read(URN, "pack", "catalog", True),))
    for d in decide_case(case, events):
        assert set(d.refs) >= {len(events) - 2, len(events) - 1}


def test_before_the_scored_turn_finished_nothing_is_decided():
    case = Case("C", "pack_axiom", "q?", ("pack",))
    assert decide_case(case, _events([URN])[:-2]) == []


# -- the metrics on hand-built replicates -------------------------------------------------------


def _unit(case: str, attempt: int, trace: str, prompt: str = "q?", prime: str = "") -> pv.CaseUnit:
    stream = f"r/{case}/{attempt}"
    unit = lc.Unit(stream, case, attempt, finished=(stream, 99))
    prompts = {"answer": prompt} | ({"prime_1": prime} if prime else {})
    return pv.CaseUnit(unit, (stream, 9), trace, (), prompts)


def test_replay_determinism_fails_a_case_whose_replicates_hash_differently():
    metric, failures, short = pv.replay_determinism(
        [_unit("A", 1, "h1"), _unit("A", 2, "h1"), _unit("B", 1, "h2"), _unit("B", 2, "h3"),
         _unit("C", 1, "h4")]
    )  # fmt: skip
    assert (metric.num, metric.den, short) == (1, 2, 1)
    assert [f.case for f in failures] == ["B"] and "h2" in failures[0].detail
    assert metric.num_refs == (("r/A/1", 9), ("r/A/2", 9))


def test_input_sensitivity_pairs_different_inputs_and_gates_the_same_prompt_pairs():
    units = [_unit("A", 1, "h1", "q?", "East"), _unit("B", 1, "h1", "q?", "West"),
             _unit("C", 1, "h2", "other?"), _unit("D", 1, "h3", "other?")]  # fmt: skip
    every, same, failures = pv.input_sensitivity(units)
    assert (every.num, every.den) == (4, 5)  # C/D share their inputs: not a pair; A/B collide
    assert (same.num, same.den) == (0, 1)  # A/B: the same final prompt, different primes
    assert [f.case for f in failures] == ["A / B"]
    assert "same final prompt, different primes" in failures[0].detail
    card = pv.scorecard((lc.RunMeta(), units))
    assert not card.passed[pv.M2]


def test_pairs_with_the_same_inputs_are_not_compared():
    every, same, _ = pv.input_sensitivity([_unit("A", 1, "h"), _unit("B", 1, "h")])
    assert every.den == same.den == 0


@pytest.mark.parametrize(
    ("name", "rate", "met"),
    [(pv.M1, 1.0, True), (pv.M1, 0.99, False), (pv.M2, 0.95, False), (pv.M2, 0.96, True),
     (pv.M4, None, False)],
    ids=["m1-at-1.00", "m1-below", "m2-at-the-bar-fails", "m2-above", "empty-never-passes"],
)  # fmt: skip
def test_thresholds_are_the_contracts(name, rate, met):
    assert pv.THRESHOLDS[name].met(rate) is met


def test_a_run_with_nothing_to_judge_does_not_pass():
    card = pv.scorecard((lc.RunMeta(), []))
    assert card.passed == dict.fromkeys(pv.GATED, False) and not card.overall_pass


# -- the lane end to end --------------------------------------------------------------------------

HOLDOUT = [
    {"id": "H-PACK", "category": "pack_axiom", "prime": [],
     "prompt": "How is net revenue defined in the seeded revenue conventions?",
     "expected_sources": ["pack"]},
    {"id": "H-VAULT", "category": "vault_recall",
     "prime": ["Remember that the weekly sync happens on Thursdays."],
     "prompt": "When does the weekly sync happen?", "expected_sources": ["vault"]},
    {"id": "H-TEACH-E", "category": "teaching",
     "prime": ["Save this definition: the 'pilot region' for this project is East."],
     "prompt": "Which region is the pilot region?", "expected_sources": ["teaching"]},
    {"id": "H-TEACH-W", "category": "teaching",
     "prime": ["Save this definition: the 'pilot region' for this project is West."],
     "prompt": "Which region is the pilot region?", "expected_sources": ["teaching"]},
    {"id": "H-MIXED", "category": "mixed",
     "prime": ["Remember that our team calls the South region 'Harbor'."],
     "prompt": "Which region is Harbor, and how many sales regions does the catalog list?",
     "expected_sources": ["pack", "vault"]},
]  # fmt: skip


def _write(folder, rows: list[dict[str, Any]]) -> str:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "cases.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


@pytest.fixture(scope="module")
def lane(tmp_path_factory):
    """One scripted run of a holdout-style case file kept outside the repository."""
    base = tmp_path_factory.mktemp("holdout")
    cases = _write(base / "elsewhere", HOLDOUT)
    ledger = str(base / "l.sqlite")
    code = main(["run", "--suite", "provenance", "--cases", str(base / "elsewhere"),
                 "--ledger", ledger, "--run-id", "p1"])  # fmt: skip
    return {"code": code, "ledger": ledger, "cases": cases, "base": base}


def _json(capsys, *argv: str) -> dict[str, Any]:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_the_scripted_lane_passes_all_four_metrics_on_cases_from_outside_the_repo(lane, capsys):
    assert lane["code"] == 0
    card = _json(capsys, "report", "p1", "--ledger", lane["ledger"], "--format", "json")
    assert card["overall_pass"] is True
    m = card["metrics"]
    for name in ("replay_determinism", "input_sensitivity", "source_attribution",
                 "source_validity", "replay_determinism_log"):  # fmt: skip
        assert m[name]["passed"] is True and m[name]["rate"] == 1.0, name
    assert (m["replay_determinism"]["num"], m["replay_determinism"]["den"]) == (5, 5)
    assert (
        m["input_sensitivity_same_prompt"]["num"],
        m["input_sensitivity_same_prompt"]["den"],
    ) == (1, 1)
    assert m["source_precision"]["rate"] == 1.0 and m["source_precision"]["gated"] is False
    kinds = {cid: units[0]["kinds"] for cid, units in card["cases"].items()}
    assert kinds == {"H-MIXED": ["pack", "vault"], "H-PACK": ["pack"],
                     "H-TEACH-E": ["vault", "teaching"], "H-TEACH-W": ["vault", "teaching"],
                     "H-VAULT": ["vault"]}  # fmt: skip
    identities = {u["stream"] for units in card["cases"].values() for u in units}
    assert len(identities) == 10


def test_each_replicate_ran_as_a_fresh_identity_on_a_fresh_platform(lane):
    store = open_store(lane["ledger"])
    try:
        events = [e for e, _ in Ledger(store).events("p1")]
    finally:
        store.close()
    starts = [e.body for e in events if type(e).__name__ == "UnitStartedEvent"]
    assert len({s.teacher for s in starts}) == 10
    record = next(e.body.record for e in events if type(e).__name__ == "RunStartedEvent")
    assert record.runtime_scope == "unit" and record.k == 2 and record.suite == "provenance"
    assert record.protocols_path.endswith("elsewhere")


@pytest.mark.parametrize("level", ["rederive", "full"], ids=["rederive", "full-from-the-log"])
def test_the_lane_replays_with_zero_divergences(lane, level):
    report = replay("p1", level=level, ledger=lambda: Ledger(open_store(lane["ledger"])))
    assert report.ok, report.lines()


@pytest.mark.parametrize("metric", ["source_validity", "replay_determinism"],
                         ids=["a-decision-metric", "a-trace-metric"])  # fmt: skip
def test_audit_traces_a_lane_metric_to_its_events(lane, capsys, metric):
    capsys.readouterr()
    assert main(["audit", "p1", metric, "--ledger", lane["ledger"]]) == 0
    out = capsys.readouterr().out
    assert f"{metric} = 100.0%" in out and "10 contributing units" in out
    assert "episode_finished" in out


def test_a_lane_audit_shows_each_search_result_as_recorded_and_whole_with_full(lane, capsys):
    argv = ["audit", "p1", "source_validity", "--ledger", lane["ledger"]]
    capsys.readouterr()
    assert main(argv) == 0
    out = capsys.readouterr().out
    with open_store(lane["ledger"]) as store:
        searches = [
            (e.body.text(), link)
            for e, link in Ledger(store).events("p1")
            if isinstance(e, SessionCallEvent) and e.body.tool == "search"
        ]
    recorded, link = next((text, link) for text, link in searches if link[:12] in out)
    line = next(x for x in out.splitlines() if link[:12] in x)
    assert "-> null" not in out and re.search(r" -> .+… \(\+\d+ chars\)$", line)
    assert " ".join(recorded.split())[:60] in line
    assert main([*argv, "--full"]) == 0
    assert "-> " + recorded.replace("\n", "\n        ") in capsys.readouterr().out


@pytest.mark.parametrize("command", [["compare", "p1", "p1"], ["gate", "p1", "--baseline", "p1"]],
                         ids=["compare", "gate"])  # fmt: skip
def test_compare_and_gate_refuse_a_provenance_run(lane, capsys, command):
    capsys.readouterr()
    assert main([*command, "--ledger", lane["ledger"]]) == 2
    assert "is a provenance run" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [["--cases", "x.jsonl"], ["--suite", "provenance", "--k", "1"],
     ["--suite", "provenance", "--protocols", "p"]],
    ids=["cases-without-the-lane", "one-replicate", "protocols-instead-of-cases"],
)  # fmt: skip
def test_run_refuses_options_the_lane_cannot_use(tmp_path, capsys, argv):
    assert main(["run", *argv, "--ledger", str(tmp_path / "l.sqlite")]) == 2


# -- a failing run per metric -------------------------------------------------------------------


class Rewriting(ScriptedAgent):
    """The scripted agent whose scored answer ``rewrite`` changes (None: answer with it at once)."""

    def __init__(self, rewrite: Callable[[str], str], *, blind: str = "") -> None:
        self.rewrite = rewrite
        self.blind = blind

    def decide(self, episode: Episode, messages: list[dict[str, Any]], tools: Any = ()) -> Turn:
        if episode.stage == "answer" and self.blind:
            return Turn(self.blind)  # answers without looking at anything
        turn = super().decide(episode, messages, tools)
        if episode.stage == "answer" and not turn.tool_calls:
            return turn._replace(text=self.rewrite(turn.text))
        return turn


def _lane_card(tmp_path, rows: list[dict[str, Any]], agent: Any) -> pv.Card:
    path = _write(tmp_path / "cases", rows)
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    try:
        cfg = RunConfig(suite="provenance", protocols_path=path, k=2, runtime_scope="unit",
                        run_id="f1")  # fmt: skip
        result = asyncio.run(RunDriver(ledger, cfg, agent=agent).execute())
        assert result.root and not result.failed
        return lookup(pv.SUITE).card([from_ledger(ledger, "f1")])
    finally:
        ledger.store.close()


TWO_PACK = [HOLDOUT[0], {**HOLDOUT[0], "id": "H-PACK-2",
                          "prompt": "What does a refunded order mean according to the order "
                                    "status guide?"}]  # fmt: skip


def _failed(card: pv.Card) -> set[str]:
    return {name for name, ok in card.passed.items() if not ok}


def test_m1_fails_an_agent_that_answers_differently_each_time(tmp_path):
    drafts = itertools.count(1)
    agent = Rewriting(
        lambda text: text.replace("FINAL ANSWER: ", f"FINAL ANSWER: ({next(drafts)}) ")
    )
    card = _lane_card(tmp_path, TWO_PACK, agent)
    assert _failed(card) == {pv.M1} and not card.overall_pass
    assert card.metrics[pv.M1].num == 0
    assert {f.case for f in card.failures} == {"H-PACK", "H-PACK-2"}


def test_m2_fails_two_different_cases_answered_identically(tmp_path):
    # Same final prompt, different primes; the agent answers without looking at anything.
    rows = [
        {"id": f"H-{r}", "category": "pack_axiom", "prime": [f"Remember that the lead is {r}."],
         "prompt": "Who is the lead?", "expected_sources": ["pack"]}
        for r in ("Ann", "Bo")
    ]  # fmt: skip
    agent = Rewriting(str, blind=f"FINAL ANSWER: see the catalog\nSOURCES: {URN}")
    card = _lane_card(tmp_path, rows, agent)
    assert _failed(card) == {pv.M2}
    (failure,) = card.failures
    assert (
        failure.case == "H-Ann / H-Bo" and "same final prompt, different primes" in failure.detail
    )


def test_m3_fails_a_case_whose_expected_kind_never_appears_and_the_run_exits_1(tmp_path, capsys):
    # A personal note is a memory (vault), never a teaching, whatever the case expects.
    wrong = {"id": "H-WRONG", "category": "teaching", "prime": [HOLDOUT[1]["prime"][0]],
             "prompt": HOLDOUT[1]["prompt"], "expected_sources": ["teaching"]}  # fmt: skip
    path = _write(tmp_path / "cases", [HOLDOUT[0], wrong])
    code = main(["run", "--suite", "provenance", "--cases", path,
                 "--ledger", str(tmp_path / "l.sqlite"), "--run-id", "m3"])  # fmt: skip
    out = capsys.readouterr().out
    assert code == 1
    assert "source_attribution" in out and "FAIL" in out
    assert "H-WRONG: attempt 1: expected teaching; found vault; missing teaching" in out
    assert "run FAILED: the provenance lane's overall verdict did not pass" in out


def test_m4_fails_an_agent_citing_a_made_up_id(tmp_path):
    agent = Rewriting(lambda text: f"{text}, {MADE_UP}")
    card = _lane_card(tmp_path, TWO_PACK, agent)
    assert _failed(card) == {pv.M4}
    assert card.metrics[pv.M4].num == 0
    assert all(f"{MADE_UP}: the platform knows no such source" in f.detail
               for f in card.failures)  # fmt: skip


# -- the adapter resolves refs on a live platform ----------------------------------------------


@pytest.fixture(scope="module")
def resolved() -> dict[str, Any]:
    """Every kind of ref, looked up once on one fresh embedded platform."""

    async def go() -> dict[str, Any]:
        prov = EmbeddedProvisioner(PlatformSpec("embedded"), pool_size=4)
        async with prov.runtime() as client:
            async with client.session(1) as s:
                memory = (
                    await s.call_tool(
                        "memory_capture",
                        {"type": "episodic_event", "content": "The sync is on Thursdays."},
                    )
                ).data["id"]
                insight = (await s.call_tool("memory_capture", {
                    "type": "business_knowledge", "content": "A 'big order' is over 1,000 USD."
                })).data["id"]  # fmt: skip
            case = Case("C", "pack_axiom", "q?", ("pack",))
            ledger = Ledger(open_store(":memory:"))
            ctx = UnitContext(ledger, client, ScriptedAgent(), UnitPlan(case, 1, "t/C/1", (1,)))
            ctx.stage = "provenance"
            refs = {"dataset": URN, "unknown-dataset": URN.replace("orders", "nope"),
                    "term": "urn:li:glossaryTerm:nope", "page": "kp-bl-1",
                    "page-reference": "mcp:knowledge_page:kp-bl-2", "memory": memory,
                    "memory-reference": f"mcp:memory:{memory}", "insight": insight,
                    "made-up": MADE_UP, "blank": " "}  # fmt: skip
            out = {name: await client.read_ref(ctx, ref) for name, ref in refs.items()}
            out["events"] = list(ctx.log)
            ledger.store.close()
            return out

    return asyncio.run(go())


REFS = [("dataset", "pack", True, "catalog"), ("unknown-dataset", "unknown", False, "catalog"),
        ("term", "unknown", False, "catalog"), ("page", "pack", True, "page"),
        ("page-reference", "pack", True, "page"), ("memory", "vault", True, "memory"),
        ("memory-reference", "vault", True, "memory"), ("insight", "vault", True, "insight"),
        ("made-up", "unknown", False, ""), ("blank", "unknown", False, "not a ref")]  # fmt: skip


@pytest.mark.parametrize(("name", "kind", "exists", "record"), REFS, ids=[r[0] for r in REFS])
def test_the_adapter_resolves_each_kind_of_ref(resolved, name, kind, exists, record):
    check = resolved[name]
    assert (check.kind, check.exists, check.detail) == (kind, exists, record)


def test_every_lookup_is_a_recorded_read_back_with_its_observed_reading(resolved):
    reads = [b for _, b in resolved["events"] if isinstance(b, ReadBackBody)]
    assert reads and all(b.purpose == "ref" and b.stage == "provenance" for b in reads)
    assert all(set(b.observed) == {"ref", "kind", "record", "exists"} for b in reads)
