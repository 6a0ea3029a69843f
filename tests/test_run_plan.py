"""A run's plan: new runs and resumes are planned the same way, then executed once; any
registered suite runs, the driver knowing it only by name."""

from __future__ import annotations

import asyncio
from typing import Any, NamedTuple

import pytest

from benchledger.harness.driver import Progress, RunDriver, RunPlan
from benchledger.harness.episode import ToolSets
from benchledger.harness.record import RunConfig, RunRefused
from benchledger.harness.suites.base import Loaded
from benchledger.harness.unit import UnitContext
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import RunStartedEvent, UnitAbandonedEvent, UnitStartedEvent
from benchledger.projections.suites import ReadSuite, SuitePlugin, register, unregister


class Item(NamedTuple):
    id: str


class ToySuite:
    """A suite the harness has never heard of: each unit makes one decision, no episode."""

    name = "toy"
    identities_per_unit = 1
    run_prefix = "toy"
    item_noun = "riddle"
    tools = ToolSets()

    def __init__(self) -> None:
        self.configured: Any = None

    def default_path(self) -> str:
        return "toy:builtin"

    def load(self, path: str) -> Loaded:
        return Loaded([Item("a"), Item("b"), Item("c")], "toyset", path)

    def entity(self, item: Any) -> str:
        return f"toy:{item.id}"

    def item_hash(self, item: Any) -> str:
        return f"hash-of-{item.id}"

    def passed(self, outcome: Any) -> bool:
        return outcome.get("solved") is True

    def unit_status(self, outcome: Any) -> str:
        return "solved" if self.passed(outcome) else "stumped"

    def settle(self, config: RunConfig, external: bool) -> None:
        if "k" not in config.given:
            config.k = 2  # the toy's own default

    def configure(self, record: Any) -> None:
        self.configured = record.suite

    async def run_unit(self, ctx: UnitContext) -> None:
        ctx.stage = "solve"
        ctx.decide("solve", "solved", ctx.plan.item.id != "b", "b is hard", [])
        await ctx.commit()


def _no_reader() -> ReadSuite:
    raise TypeError("the toy has no read side: these tests only plan and run it")


@pytest.fixture
def toy():
    register(SuitePlugin("toy", _no_reader, ToySuite))
    yield
    unregister("toy")


@pytest.fixture
def ledger():
    led = Ledger(open_store(":memory:"))
    yield led
    led.store.close()


def test_the_driver_runs_a_suite_it_knows_only_by_its_registered_name(toy, ledger):
    outcomes: list[Any] = []
    progress = Progress(unit_done=lambda outcome, n, total: outcomes.append(outcome))
    result = asyncio.run(RunDriver(ledger, RunConfig(suite="toy"), progress).execute())
    assert result.root and result.run_id.startswith("toy-")  # sealed, under the toy's prefix
    events = [e for e, _ in ledger.events(result.run_id)]
    started = next(e for e in events if isinstance(e, RunStartedEvent)).body
    assert started.suite == "toy" and started.record is not None and started.record.k == 2
    hashes = sorted(e.body.protocol_hash for e in events if isinstance(e, UnitStartedEvent))
    assert hashes == ["hash-of-a", "hash-of-a", "hash-of-b", "hash-of-b", "hash-of-c", "hash-of-c"]
    by_item = {(o.unit_id, o.attempt): (o.passed, o.status) for o in outcomes}
    assert by_item[("a", 1)] == (True, "solved") and by_item[("b", 2)] == (False, "stumped")


def test_a_new_run_and_a_resume_are_each_one_plan_written_only_by_execute(ledger):
    cfg = RunConfig(
        run_id="p", protocol=["bl-keystone-region", "bl-margin-region"], k=2, concurrency=1
    )  # one unit at a time: the interruption leaves exactly two
    driver = RunDriver(ledger, cfg)
    plan = driver.plan()
    assert isinstance(plan, RunPlan) and not plan.resumed
    assert ledger.store.head("p") is None  # planning writes nothing
    assert [(u.unit_id, u.attempt) for u in plan.units] == [
        ("bl-keystone-region", 1), ("bl-margin-region", 1),
        ("bl-keystone-region", 2), ("bl-margin-region", 2),
    ]  # fmt: skip

    async def interrupted() -> None:
        task = asyncio.current_task()
        assert task is not None

        def done(outcome: Any, n: int, total: int) -> None:
            if n == 2:
                task.cancel()

        driver.progress = Progress(unit_done=done)
        await driver.execute(plan)

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(interrupted())
    head = ledger.store.head("p")

    again = RunDriver(ledger, RunConfig(resume="p"))
    resumed = again.plan()
    assert isinstance(resumed, RunPlan) and resumed.resumed
    assert resumed.suite.name == plan.suite.name and resumed.record == ledger_record(ledger, "p")
    assert ledger.store.head("p") == head  # planning the resume wrote nothing either
    assert len(resumed.units) == 2  # the two units the interruption left unfinished
    result = asyncio.run(again.execute(resumed))
    assert result.root and len(result.outcomes) == 2
    abandoned = [e for e, _ in ledger.events("p") if isinstance(e, UnitAbandonedEvent)]
    assert len(abandoned) == len(resumed.abandon)


def ledger_record(ledger: Ledger, run_id: str) -> Any:
    first = next(e for e, _ in ledger.events(run_id, run_id) if isinstance(e, RunStartedEvent))
    return first.body.record


@pytest.mark.parametrize(
    ("cfg", "says"),
    [
        (RunConfig(retry_infra=True), "--retry-infra re-runs an unsealed run's infra-failed"),
        (RunConfig(agent="fake", time_scale=0.5, given=frozenset({"time_scale"})),
         "--time-scale scales a recorded agent's latencies"),
        (RunConfig(platform="embedded", platform_options={"server_memory_cmd": "node x.js"}),
         "--server-memory-cmd starts server-memory with the given command"),
        (RunConfig(suite="provenance", k=1, given=frozenset({"k"})),
         "--suite provenance needs --k 2 or more"),
        (RunConfig(items_options=("--cases",)),
         "--cases belongs to suite provenance; suite lifecycle reads its items with --protocols"),
        (RunConfig(items_options=("--tasks",)), "--tasks belongs to suite tasks"),
        (RunConfig(suite="provenance", items_options=("--tasks",)),
         "--tasks belongs to suite tasks; suite provenance reads its items with --cases"),
    ],
)  # fmt: skip
def test_the_harness_refuses_an_unusable_option_before_anything_is_written(ledger, cfg, says):
    with pytest.raises(RunRefused, match=says.replace("(", r"\(")):
        RunDriver(ledger, cfg).plan()
    assert not ledger.store.run_ids()
