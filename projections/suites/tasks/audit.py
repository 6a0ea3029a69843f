"""Audit a tasks metric: every attempt in its denominator, its decision and the answer."""

from __future__ import annotations

from benchledger.ledger.events import Event
from benchledger.projections.audit import Audit, Contribution, UnknownMetric, evidence_of
from benchledger.projections.fold import fold
from benchledger.projections.source import RunEvents
from benchledger.projections.suites.tasks.scorecard import (
    METRIC_NAMES,
    PEER_CORRECT,
    TasksFold,
    scorecard,
)

AUDITABLE = (*METRIC_NAMES, PEER_CORRECT)


def audit(run: RunEvents, metric_name: str) -> Audit:
    """The metric's value and each attempt in its denominator with its decision and evidence."""
    if metric_name not in AUDITABLE:
        raise UnknownMetric(metric_name, AUDITABLE)
    card = scorecard(fold(TasksFold(), run.events))
    metric = card.metrics.get(metric_name)
    if metric is None:  # peer_correct: only when benchledger's correct is recorded beside it
        raise UnknownMetric(metric_name, tuple(card.metrics))
    streams: dict[str, dict[int, tuple[Event, str]]] = {}
    for event, link in run.events:
        streams.setdefault(event.stream, {})[event.seq] = (event, link)
    units = {u.stream: u for u in card.units}
    counted = set(metric.num_refs)
    out = []
    for stream, seq in metric.den_refs:
        unit = units[stream]
        decision = card.peer.get(stream) if metric_name == PEER_CORRECT else None
        decision = decision or next(d for d in unit.decisions.values() if d.seq == seq)
        evidence = evidence_of(streams.get(stream, {}), decision.refs)
        out.append(Contribution(stream, unit.protocol_id, unit.attempt, (stream, seq) in counted,
                                decision, evidence))  # fmt: skip
    return Audit(run.run_id, run.root or card.meta.root, metric, tuple(out))
