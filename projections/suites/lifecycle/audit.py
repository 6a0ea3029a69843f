"""Audit a lifecycle metric: every contributing unit with its decision and evidence."""

from __future__ import annotations

from benchledger.ledger.events import Event
from benchledger.projections.audit import Audit, Contribution, UnknownMetric, evidence_of
from benchledger.projections.fold import fold
from benchledger.projections.source import RunEvents
from benchledger.projections.suites.lifecycle.scorecard import (
    METRIC_NAMES,
    METRICS,
    LifecycleFold,
    scorecard,
)


def audit(run: RunEvents, metric_name: str) -> Audit:
    """A lifecycle run's metric value and every contributing unit with its decision and evidence."""
    if metric_name not in METRIC_NAMES:
        raise UnknownMetric(metric_name, METRIC_NAMES)
    lf = fold(LifecycleFold(), run.events)
    card = scorecard([lf])
    metric = card.metrics[metric_name]
    streams: dict[str, dict[int, tuple[Event, str]]] = {}
    for event, link in run.events:
        streams.setdefault(event.stream, {})[event.seq] = (event, link)
    num_refs = set(metric.num_refs)
    spec = next((s for s in METRICS if s.name == metric_name), None)
    short = {pid for pid, _ in card.pass_k_short}
    out = []
    for unit in card.units:
        if spec is not None:
            if not spec.in_den(unit):
                continue
            decision = unit.decisions.get(spec.num_check) or unit.decisions.get(spec.den_check)
            in_num = spec.in_num(unit)
        else:  # pass_k: every counted unit of a protocol with k attempts, by all its decisions
            if not unit.counted or unit.protocol_id in short:
                continue
            failing = [d for d in unit.decisions.values() if d.verdict is False]
            decision = failing[0] if failing else None
            in_num = unit.passed()
        refs = decision.refs if decision else ()
        evidence = evidence_of(streams.get(unit.stream, {}), refs)
        out.append(
            Contribution(unit.stream, unit.protocol_id, unit.attempt, in_num, decision, evidence)
        )
    assert spec is None or len(num_refs) <= metric.num
    withheld = tuple(u.stream for u in card.units if u.outcome_withheld)
    return Audit(run.run_id, run.root or card.meta.root, metric, tuple(out), withheld)
