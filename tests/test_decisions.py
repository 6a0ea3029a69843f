"""The one decision function: what the runner decided live is what it decides again."""

from __future__ import annotations

import asyncio
import os

import pytest

from benchledger import protocols
from benchledger.harness.driver import RunDriver
from benchledger.harness.record import RunConfig
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import GraderDecisionEvent, UnitStartedEvent, is_probe_stream
from benchledger.projections.suites.lifecycle.decisions import decide_stage, decide_unit

SUBSET = ["bl-keystone-region", "bl-focus-region", "bl-core-cohort", "bl-showcase-region"]


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    folder = tmp_path_factory.mktemp("protocols")
    for pid in SUBSET:
        with open(os.path.join(protocols.LIFECYCLE_DIR, f"{pid}.yaml")) as fh:
            (folder / f"{pid}.yaml").write_text(fh.read())
    ledger = Ledger(open_store(":memory:"))
    asyncio.run(RunDriver(ledger, RunConfig(protocols_path=str(folder), run_id="d")).execute())
    by_id = protocols.load(str(folder)).by_id()
    streams: dict[str, list] = {}
    for event, _ in ledger.events("d"):
        streams.setdefault(event.stream, []).append(event)
    yield by_id, {s: evs for s, evs in streams.items() if s != "d" and not is_probe_stream(s)}
    ledger.store.close()


def test_re_deciding_a_recorded_unit_gives_exactly_the_live_decisions(recorded):
    by_id, streams = recorded
    assert len(streams) == len(SUBSET)
    for stream, evs in streams.items():
        start = next(e for e in evs if isinstance(e, UnitStartedEvent))
        live = [(e.body, e.refs) for e in evs if isinstance(e, GraderDecisionEvent)]
        again = decide_unit(by_id[start.body.protocol_id], [(e.seq, e.body) for e in evs])
        assert [(d.body, d.refs) for d in again] == live, stream
        assert len(live) >= 7  # teach 2, capture, recall 3, abstain at least


def test_every_decision_cites_evidence_recorded_before_it(recorded):
    _, streams = recorded
    for evs in streams.values():
        for e in evs:
            if isinstance(e, GraderDecisionEvent):
                assert e.refs and max(e.refs) < e.seq


def test_a_stage_without_its_evidence_decides_nothing():
    p = protocols.load(protocols.LIFECYCLE_DIR).by_id()[SUBSET[0]]
    for stage in ("teach", "capture", "recall", "promote", "update", "abstain"):
        assert decide_stage(p, stage, []) == []
    with pytest.raises(ValueError, match="unknown lifecycle stage"):
        decide_stage(p, "celebrate", [])
