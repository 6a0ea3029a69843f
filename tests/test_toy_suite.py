"""A fourth suite, defined only here, runs end to end through the command line: run, report,
compare, audit and both replay levels find it by the name its runs record, on both floors
(the harness's ``harness.suites`` and the readers' ``projections.suites``). Nothing outside
this file knows it exists: ``PLUGIN`` is its one registration, made in code or named by an
entry point of an installed distribution, as a third party's package would."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

import pytest

from benchledger.cli import main
from benchledger.harness.episode import ToolSets
from benchledger.harness.record import RunConfig
from benchledger.harness.suites.base import Loaded
from benchledger.harness.unit import UnitContext
from benchledger.ledger.events import (
    GraderDecisionBody,
    RunStartedBody,
)
from benchledger.projections import suites as read_suites
from benchledger.projections.card import Metric, Ruling, RunMeta
from benchledger.testing import SuiteContract
from tests.test_suite_registry import ToyFold, verdict_audit, verdict_metric

NAME = "riddles"


class Riddle(NamedTuple):
    id: str
    answer: int


RIDDLES = (Riddle("r1", 1), Riddle("r2", 2), Riddle("r3", 3))


def judge(riddle: Riddle, events: Sequence[tuple[int, Any]]) -> list[Ruling]:
    """The suite's one decision function: an odd answer is solved (the harness records what
    this says, re-derivation recomputes it from the recorded run)."""
    solved = riddle.answer % 2 == 1
    body = GraderDecisionBody(stage="solve", check="solved", verdict=solved, reason="odd")
    return [Ruling(body, ())]


class RiddleSuite:
    """The write side: each unit makes its one decision, no episode, no platform call."""

    name = NAME
    identities_per_unit = 1
    run_prefix = "rd"
    item_noun = "riddle"
    tools = ToolSets()

    def default_path(self) -> str:
        return "riddles:builtin"

    def load(self, path: str) -> Loaded:
        return Loaded(list(RIDDLES), "riddle-set", path)

    def entity(self, item: Any) -> str:
        return f"riddle:{item.id}"

    def item_hash(self, item: Any) -> str:
        return f"riddle-{item.id}"

    def passed(self, outcome: Mapping[str, bool | None]) -> bool:
        return outcome.get("solved") is True

    def unit_status(self, outcome: Mapping[str, bool | None]) -> str:
        return "solved" if self.passed(outcome) else "stumped"

    def settle(self, config: RunConfig, external: bool) -> None:
        pass

    def configure(self, record: Any) -> None:
        pass

    async def run_unit(self, ctx: UnitContext) -> None:
        ctx.stage = "solve"
        ctx.decisions(judge(ctx.plan.item, []))
        await ctx.commit()


class RiddleCard(NamedTuple):
    meta: RunMeta
    metrics: dict[str, Metric]
    notes: tuple[str, ...] = ()


def _scorecard(
    folded: Sequence[Any], *, ci: str = "auto", replayed: Mapping[str, bool] | None = None
) -> RiddleCard:
    [one] = folded
    return RiddleCard(one[0], {"solved": verdict_metric("solved", one)})


def _render(card: RiddleCard, fmt: str) -> str:
    m = card.metrics["solved"]
    if fmt == "json":
        return json.dumps({"suite": NAME, "solved": [m.num, m.den]}) + "\n"
    return f"riddles of {card.meta.run_id}: solved {m.num:g}/{m.den}\n"


def _compare(cards: Sequence[RiddleCard], ids: Sequence[str], fmt: str) -> str:
    solved = [c.metrics["solved"] for c in cards]
    return (
        "solved "
        + " -> ".join(f"{i} {m.num:g}/{m.den}" for i, m in zip(ids, solved, strict=True))
        + "\n"
    )


def _items(header: RunStartedBody, given: str | None) -> read_suites.ItemSet:
    return read_suites.ItemSet({r.id: r for r in RIDDLES}, "(the riddles' own)", [])


def _audit(run: Any, metric: str) -> Any:
    return verdict_audit("solved", run, metric)


def _status(outcome: Any) -> str:
    return "ok"


def _item_hash(item: Riddle) -> str:
    return f"riddle-{item.id}"


READER = read_suites.ReadSuite(
    name=NAME,
    noun="riddles",
    fold=ToyFold,
    scorecard=_scorecard,
    render=_render,
    formats=("table", "json"),
    decide=judge,
    audit=_audit,
    metric_names=("solved",),
    items=_items,
    unit_status=_status,
    item_hash=_item_hash,
    compare=_compare,
)


def _reader() -> read_suites.ReadSuite:
    return READER


# The suite's one registration: both floors, and its own item option.
PLUGIN = read_suites.SuitePlugin(
    NAME,
    reader=_reader,
    harness=RiddleSuite,
    items=read_suites.ItemOption("--riddles", "riddles: the riddle set (default: the built-in)"),
    summary="odd answers solve (a test's toy)",
)


@contextmanager
def riddles_registered() -> Iterator[None]:
    """The suite registered while open, as a third suite's package would (one plugin)."""
    read_suites.register(PLUGIN)
    try:
        yield
    finally:
        read_suites.unregister(NAME)


@pytest.fixture
def riddles() -> Iterator[None]:
    with riddles_registered():
        yield


class TestRiddleSuiteContract(SuiteContract):
    """The toy suite passes the contract a third party's suite runs."""

    suite_name = NAME

    @contextmanager
    def registered(self) -> Iterator[None]:
        with riddles_registered():
            yield


def test_a_suite_defined_only_in_a_test_runs_reports_compares_audits_and_replays(
    riddles, tmp_path, capsys
):
    ledger = str(tmp_path / "l.sqlite")
    for run_id in ("a", "b"):
        assert main(["run", "--suite", NAME, "--ledger", ledger, "--run-id", run_id]) == 0
    ran = capsys.readouterr().out
    assert "riddles of a: solved 2/3" in ran and "run b sealed" in ran

    assert main(["report", "a", "--ledger", ledger, "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out.splitlines()[-1]) == {
        "suite": NAME,
        "solved": [2, 3],
    }

    assert main(["compare", "a", "b", "--ledger", ledger]) == 0
    assert "solved a 2/3 -> b 2/3" in capsys.readouterr().out

    assert main(["audit", "a", "solved", "--ledger", ledger]) == 0
    audited = capsys.readouterr().out
    assert "r1" in audited and "r3" in audited

    rederived = _replay(ledger, "rederive", capsys)
    assert rederived["compared"] == {"decisions": 3, "metrics": 1, "trace hashes": 3,
                                     "probe findings": 8}  # fmt: skip
    full = _replay(ledger, "full", capsys)
    assert full["compared"]["units"] == 3  # each unit re-driven through the toy's run_unit


def _replay(ledger: str, level: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    assert main(["replay", "a", "--level", level, "--ledger", ledger, "--format", "json"]) == 0
    found: dict[str, Any] = json.loads(capsys.readouterr().out)
    assert found["ok"] and found["mismatches"] == 0, found
    return found
