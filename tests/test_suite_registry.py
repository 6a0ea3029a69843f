"""The readers find a run's suite by its recorded name: a toy suite registered here is read
by report, audit, compare, gate, re-derivation and the runs table without a change to them."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, NamedTuple

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    Event,
    GraderDecisionBody,
    GraderDecisionEvent,
    PlannedUnit,
    PlatformRecord,
    RunRecord,
    RunStartedBody,
    RunStartedEvent,
    UnitFinishedBody,
    UnitStartedBody,
    UnitStartedEvent,
)
from benchledger.projections.audit import Audit, Contribution, UnknownMetric
from benchledger.projections.card import Decision, Metric, RunMeta
from benchledger.projections.card import Ruling as Derived
from benchledger.projections.runs import run_row
from benchledger.projections.source import RunEvents
from benchledger.projections.stats import wilson
from benchledger.projections.suites import (
    ItemSet,
    ReadSuite,
    SuitePlugin,
    UnknownSuite,
    lookup,
    register,
    unregister,
)
from benchledger.replay.levels import replay
from tests.sample import build_run, counter_clock

TOY = "toy"
ITEMS = ("w1", "w2", "w3")


class ToyCard(NamedTuple):
    meta: RunMeta
    metrics: dict[str, Metric]
    notes: tuple[str, ...] = ()


class ToyFold:
    """Run meta and, per unit stream, its item id and its recorded ``shiny`` verdict."""

    def __init__(self) -> None:
        self.meta = RunMeta()
        self.units: dict[str, tuple[str, GraderDecisionEvent | None]] = {}

    def apply(self, event: Event, link: str) -> None:
        if isinstance(event, RunStartedEvent):
            self.meta = RunMeta(event.stream, event.body)
        elif isinstance(event, UnitStartedEvent):
            self.units[event.stream] = (event.body.protocol_id, None)
        elif isinstance(event, GraderDecisionEvent):
            self.units[event.stream] = (self.units[event.stream][0], event)

    def result(self) -> tuple[RunMeta, dict[str, tuple[str, GraderDecisionEvent | None]]]:
        return self.meta, self.units


def verdict_metric(name: str, folded: Any) -> Metric:
    """The share of ``ToyFold``'s decided units whose recorded verdict is true, as ``name``."""
    _, units = folded
    decided = [d for _, d in units.values() if d is not None]
    true = [d for d in decided if d.body.verdict]
    refs = tuple((d.stream, d.seq) for d in true)
    return Metric(name, len(true), len(decided), wilson(len(true), len(decided)), refs, refs)


def verdict_audit(name: str, run: RunEvents, metric: str) -> Audit:
    """``verdict_metric`` traced to each unit's recorded decision."""
    if metric != name:
        raise UnknownMetric(metric, (name,))
    folded = ToyFold()
    for event, link in run.events:
        folded.apply(event, link)
    found = folded.result()
    out = []
    for stream, (item, d) in sorted(found[1].items()):
        if d is not None:
            b = d.body
            decision = Decision(stream, d.seq, "", b.stage, b.check, b.verdict, b.reason, "",
                                None, b.origin, ())  # fmt: skip
            out.append(Contribution(stream, item, 1, bool(b.verdict), decision, ()))
    return Audit(run.run_id, run.root, verdict_metric(name, found), tuple(out), ())


def _shiny(folded: Any) -> Metric:
    return verdict_metric("shiny", folded)


def _scorecard(
    folded: Sequence[Any], *, ci: str = "auto", replayed: Mapping[str, bool] | None = None
) -> ToyCard:
    [one] = folded
    return ToyCard(one[0], {"shiny": _shiny(one)})


def _render(card: ToyCard, fmt: str) -> str:
    m = card.metrics["shiny"]
    if fmt == "json":
        return json.dumps({"suite": TOY, "shiny": [m.num, m.den]}) + "\n"
    return f"toy card of {card.meta.run_id}: shiny {m.num:g}/{m.den}\n"


def _decide(item: str, events: Sequence[tuple[int, Any]]) -> list[Derived]:
    """An item is shiny when its id ends in an odd digit (the toy's whole grader)."""
    shiny = int(item[-1]) % 2 == 1
    body = GraderDecisionBody(stage="look", check="shiny", verdict=shiny, reason="toy")
    return [Derived(body, ())]


def _audit(run: RunEvents, metric: str) -> Audit:
    return verdict_audit("shiny", run, metric)


def _items(header: RunStartedBody, given: str | None) -> ItemSet:
    return ItemSet({i: i for i in ITEMS}, "(the toy's own)", [])


@pytest.fixture
def toy() -> Iterator[ReadSuite]:
    suite = ReadSuite(
        name=TOY,
        noun="widgets",
        fold=ToyFold,
        scorecard=_scorecard,
        render=_render,
        formats=("table", "json"),
        decide=_decide,
        audit=_audit,
        metric_names=("shiny",),
        items=_items,
        unit_status=lambda o: "ok",
    )
    register(SuitePlugin(TOY, lambda: suite))  # read side only: its runs are made below
    yield suite
    unregister(TOY)


def _toy_run(ledger: Ledger, run_id: str, suite: str = TOY) -> None:
    planned = [PlannedUnit(i, 1) for i in ITEMS[:2]]
    record = RunRecord(suite=suite, platform=PlatformRecord("embedded"), k=1,
                       only=["w1", "w2"], set_items=len(ITEMS), units=planned)  # fmt: skip
    ledger.start_run(run_id, RunStartedBody(suite=suite, protocol_set_hash="toy-set", k=1,
                                            agent="a", model="m", platform="p",
                                            platform_version="1", record=record))  # fmt: skip
    for item in ITEMS[:2]:
        w = ledger.new_stream(f"{run_id}/{item}/1")
        w.append(UnitStartedBody(protocol_id=item, attempt=1))
        [decision] = _decide(item, [])
        w.append(decision.body)
        w.append(UnitFinishedBody(outcome={"shiny": decision.body.verdict}))
        ledger.commit(w)
    ledger.seal(run_id)


@pytest.fixture
def ledger_path(tmp_path) -> str:
    path = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(path))
    _toy_run(ledger, "t1")
    _toy_run(ledger, "t2")
    _toy_run(ledger, "odd", suite="nosuch")
    ledger.store.close()
    return path


def _cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_report_renders_a_run_with_the_card_of_its_recorded_suite(toy, ledger_path, capsys):
    code, out, _ = _cli(capsys, "report", "t1", "--ledger", ledger_path)
    assert (code, out) == (0, "toy card of t1: shiny 1/2\n")
    code, out, _ = _cli(capsys, "report", "t1", "--format", "json", "--ledger", ledger_path)
    assert json.loads(out) == {"suite": TOY, "shiny": [1, 2]}


def test_a_suite_that_neither_merges_nor_compares_is_reported_alone(toy, ledger_path, capsys):
    code, _, err = _cli(capsys, "report", "t1", "t2", "--ledger", ledger_path)
    assert code == 2 and "a toy run is reported on its own" in err
    code, _, err = _cli(capsys, "compare", "t1", "t2", "--ledger", ledger_path)
    judges = "compare judges lifecycle, locomo, tasks runs"
    assert code == 2 and "t1 is a toy run" in err and judges in err


def test_audit_traces_a_metric_through_the_suites_own_audit(toy, ledger_path, capsys):
    code, out, _ = _cli(capsys, "audit", "t1", "shiny", "--ledger", ledger_path)
    assert code == 0 and "shiny = 50.0%  (1/2)" in out and "w1 attempt 1" in out
    code, _, err = _cli(capsys, "audit", "t1", "dull", "--ledger", ledger_path)
    assert code == 2 and "known metrics: shiny" in err


def test_rederive_uses_the_suites_decision_function_and_items(toy, ledger_path):
    ledger = Ledger(open_store(ledger_path))
    report = replay("t1", ledger=lambda: ledger)
    assert report.failure is None and not report.mismatches
    assert report.compared["decisions"] == 2 and report.compared["metrics"] == 1
    flipped = replay("t1", ledger=lambda: ledger, decide=lambda item, ev: _decide(item + "1", ev))
    found = {(m.stream, m.what) for m in flipped.mismatches}
    assert {("t1/w2/1", "shiny"), ("t1", "metric shiny")} <= found


def test_the_runs_table_names_a_subset_with_the_suites_noun(toy, ledger_path):
    ledger = Ledger(open_store(ledger_path))
    assert run_row(ledger, "t1").subset == "2 of 3 widgets (--protocol w1, w2)"
    assert run_row(ledger, "odd").subset == "2 of 3 items (--protocol w1, w2)"


def test_a_run_of_an_unknown_suite_is_unusable_input_naming_the_known_ones(
    toy, ledger_path, capsys
):
    known = "known suites: lifecycle, locomo, longmemeval, provenance, tasks, toy"
    with pytest.raises(UnknownSuite, match=known):
        lookup("nosuch")
    code, _, err = _cli(capsys, "report", "odd", "--ledger", ledger_path)
    assert code == 2 and "suite 'nosuch'" in err and err.count("\n") == 1


def test_watch_follows_only_a_suite_that_gives_a_live_view(toy, ledger_path, capsys):
    code, _, err = _cli(capsys, "report", "t1", "--watch", "--ledger", ledger_path)
    assert code == 2 and err.count("\n") == 1
    assert "--watch: a toy run has no live view; report it once it is sealed" in err


def test_watch_follows_a_lifecycle_run_through_its_suites_live_view(tmp_path, capsys):
    path = str(tmp_path / "w.sqlite")
    ledger = Ledger(open_store(path), clock=counter_clock())
    root = build_run(ledger, "w", units=2)
    ledger.store.close()
    code, out, _ = _cli(capsys, "report", "w", "--watch", "--interval", "0.01", "--ledger", path)
    assert code == 0 and out.startswith(f"run w: sealed, root {root} (")
