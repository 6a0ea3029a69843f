"""The suite contract: what a suite must do on both floors, the harness's ``Suite``
(harness/suites/base.py: load items, plan units, run one) and the readers' ``ReadSuite``
(projections/suites/base.py: fold, score, render, audit, decide).

A suite author subclasses ``SuiteContract`` (named ``Test...``) and names the suite::

    class TestMySuite(SuiteContract):
        suite_name = "my-suite"

The suite must be registered on both floors under that name; a suite registered in code
rather than on import overrides ``registered`` to register it while the tests run.
One run of ``units`` items is made per class, on the embedded reference platform with the
scripted agent, into a ledger of its own; the tests read it as every reader does.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, NamedTuple

import pytest

from benchledger.harness.driver import RunDriver, RunResult
from benchledger.harness.plan import unit_plans
from benchledger.harness.record import RunConfig
from benchledger.harness.suites import Suite, suite_for
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    RunStartedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
    is_probe_stream,
)
from benchledger.ledger.verified import VerifiedRun, open_run
from benchledger.projections.audit import Audit, UnknownMetric
from benchledger.projections.suites import ReadSuite, lookup, of_run
from benchledger.replay.levels import replay

RUN_ID = "contract-run"


class Floors(NamedTuple):
    """The suite as the harness runs it and as the readers read it."""

    suite: Suite
    reader: ReadSuite


class ContractRun(NamedTuple):
    """The run the contract made: the ledger it is in and how the driver saw it end."""

    ledger: Ledger
    result: RunResult
    planned: int

    def opened(self) -> VerifiedRun:
        """The run read through the verified door, as every reader reads it."""
        return open_run(RUN_ID, self.ledger, require_seal=True, allow_partial=False)


class SuiteContract:
    """The contract every suite passes; subclass it with ``suite_name``."""

    suite_name: ClassVar[str] = ""
    units: ClassVar[int] = 2  # the items the contract's run runs (the first ones)

    @contextmanager
    def registered(self) -> Iterator[None]:
        """While open, the suite is registered on both floors (nothing to do for a suite
        that registers itself on import or through its entry points)."""
        yield

    def items_path(self) -> str:
        """Where the items the tests load and run are ("": the suite's ``default_path``)."""
        return ""

    def run_options(self) -> dict[str, Any]:
        """More ``RunConfig`` fields for the contract's run (a pack, chosen item ids)."""
        return {}

    def loaded_path(self, suite: Suite) -> str:
        return self.items_path() or suite.default_path()

    @pytest.fixture(scope="class")
    def floors(self) -> Iterator[Floors]:
        if not self.suite_name:
            raise NotImplementedError(f"{type(self).__name__} must set suite_name")
        with self.registered():
            yield Floors(suite_for(self.suite_name), lookup(self.suite_name))

    @pytest.fixture(scope="class")
    def contract_run(
        self, floors: Floors, tmp_path_factory: pytest.TempPathFactory
    ) -> Iterator[ContractRun]:
        folder: Path = tmp_path_factory.mktemp("suite-contract")
        ledger = Ledger(open_store(str(folder / "ledger.sqlite")))
        options: dict[str, Any] = {"limit": self.units, **self.run_options()}
        config = RunConfig(suite=self.suite_name, agent="scripted", platform="embedded",
                           protocols_path=self.items_path(), run_id=RUN_ID, concurrency=2,
                           **options)  # fmt: skip
        try:
            result = asyncio.run(RunDriver(ledger, config).execute())
            header = next(e.body for e, _ in ledger.events(RUN_ID, RUN_ID)
                          if isinstance(e, RunStartedEvent))  # fmt: skip
            planned = len(header.record.units) if header.record is not None else 0
            yield ContractRun(ledger, result, planned)
        finally:
            ledger.store.close()

    # -- the harness's floor --------------------------------------------------------------

    def test_both_floors_know_it_by_the_one_name_its_runs_record(self, floors: Floors) -> None:
        assert floors.suite.name == floors.reader.name == self.suite_name

    def test_it_loads_its_items_each_with_an_id_and_the_set_with_one_hash(
        self, floors: Floors
    ) -> None:
        suite = floors.suite
        loaded = suite.load(self.loaded_path(suite))
        ids = [str(item.id) for item in loaded.items]
        assert ids and len(set(ids)) == len(ids), "items with unique ids"
        assert isinstance(loaded.set_hash, str) and loaded.set_hash
        again = suite.load(self.loaded_path(suite))
        assert again.set_hash == loaded.set_hash and [str(i.id) for i in again.items] == ids
        for item in loaded.items:
            assert isinstance(suite.entity(item), str) and suite.entity(item)
            assert suite.item_hash(item) == suite.item_hash(item)

    def test_it_plans_k_units_of_every_item_each_with_its_own_identities(
        self, floors: Floors
    ) -> None:
        suite = floors.suite
        items = suite.load(self.loaded_path(suite)).items[: self.units]
        plans = unit_plans(suite, items, 2, RUN_ID)
        assert len(plans) == 2 * len(items)
        assert len({p.stream for p in plans}) == len(plans)
        identities = [i for p in plans for i in p.identities]
        assert all(len(p.identities) == suite.identities_per_unit for p in plans)
        assert len(set(identities)) == len(identities), "no identity shared by two units"

    def test_its_units_run_on_the_embedded_platform_with_the_scripted_agent(
        self, floors: Floors, contract_run: ContractRun
    ) -> None:
        result = contract_run.result
        assert not result.failed, [(o.stream, o.error) for o in result.failed]
        assert result.root, "every planned unit finished: the run is sealed"
        assert len(result.outcomes) == contract_run.planned > 0
        for outcome in result.outcomes:
            assert isinstance(floors.suite.passed(outcome.outcome), bool)
            assert isinstance(floors.suite.unit_status(outcome.outcome), str)
        run = contract_run.opened()
        assert run.verification.sealed and run.root == result.root
        streams: dict[str, list[Any]] = {}
        for event, _ in run.events:
            if event.stream != RUN_ID and not is_probe_stream(event.stream):  # units only
                streams.setdefault(event.stream, []).append(event)
        assert len(streams) == contract_run.planned
        for events in streams.values():
            assert isinstance(events[0], UnitStartedEvent)
            assert isinstance(events[-1], UnitFinishedEvent)

    # -- the readers' floor ---------------------------------------------------------------

    def test_the_read_side_folds_and_scores_the_run_in_every_format(
        self, floors: Floors, contract_run: ContractRun
    ) -> None:
        run = contract_run.opened()
        reader = of_run(run)
        assert reader is floors.reader
        card = reader.card([run])
        assert reader.passed(card) in (True, False, None)
        assert reader.formats
        for fmt in reader.formats:
            shown = reader.render(card, fmt)
            assert isinstance(shown, str) and shown.strip(), fmt
            if fmt == "json":
                json.loads(shown)

    def test_every_metric_it_names_traces_to_the_run_or_is_refused_by_name(
        self, floors: Floors, contract_run: ContractRun
    ) -> None:
        run = contract_run.opened()
        traced = []
        for metric in floors.reader.metric_names:
            try:  # a metric of some runs only (an imported one's) is refused, named
                traced.append(floors.reader.audit(run, metric))
            except UnknownMetric as exc:
                assert metric in str(exc)
        assert traced and all(isinstance(a, Audit) for a in traced)

    def test_the_readers_find_the_runs_items_again(
        self, floors: Floors, contract_run: ContractRun
    ) -> None:
        run = contract_run.opened()
        header = next(e.body for e, _ in run.events if isinstance(e, RunStartedEvent))
        found = floors.reader.items(header, None)  # from the run alone, as replay finds them
        ran = {e.body.protocol_id for e, _ in run.events if isinstance(e, UnitStartedEvent)}
        assert ran and ran <= set(found.by_id)

    def test_decide_rederives_every_recorded_verdict(self, contract_run: ContractRun) -> None:
        report = replay(RUN_ID, level="rederive", ledger=lambda: contract_run.ledger)
        assert report.ok, report.first_mismatch
        assert report.compared["decisions"] > 0, "the run recorded no decisions to re-derive"
