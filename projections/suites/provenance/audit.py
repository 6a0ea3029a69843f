"""Audit a provenance metric: every event in its denominator, with the evidence behind it.

``benchledger audit RUN METRIC`` on a provenance run lands here. M3, M4 and precision
list each replicate's ``grader_decision`` and what it cites (the scored turn, the
resolution read-backs, the prime captures); M1 and M2 list each scored turn's
``episode_finished`` and the turn's own events. An audit bundle of the listed streams
proves them against the run root, as for lifecycle metrics.
"""

from __future__ import annotations

from benchledger.ledger.events import Event
from benchledger.projections.audit import Audit, Contribution, UnknownMetric, evidence_of
from benchledger.projections.fold import fold
from benchledger.projections.source import RunEvents
from benchledger.projections.suites.provenance import scorecard as pv

AUDITABLE = tuple(name for name in pv.METRIC_NAMES if name != pv.M1_LOG)


class UnknownProvenanceMetric(UnknownMetric):
    """The metric name is not one the provenance lane records."""

    def __init__(self, name: str) -> None:
        ValueError.__init__(
            self,
            f"no provenance metric {name!r}; known metrics: {', '.join(AUDITABLE)} "
            f"({pv.M1_LOG} is measured by replaying: benchledger replay RUN --level full)",
        )
        self.name = name


def audit(run: RunEvents, metric_name: str) -> Audit:
    """The metric's value and every event in its denominator with its decision and evidence."""
    if metric_name not in AUDITABLE:
        raise UnknownProvenanceMetric(metric_name)
    card = pv.scorecard(fold(pv.ProvenanceFold(), run.events))
    metric = card.metrics[metric_name]
    streams: dict[str, dict[int, tuple[Event, str]]] = {}
    for event, link in run.events:
        streams.setdefault(event.stream, {})[event.seq] = (event, link)
    units = {u.stream: u for u in card.units}
    counted = set(metric.num_refs)
    out = []
    for stream, seq in dict.fromkeys(metric.den_refs):
        unit = units.get(stream)
        if unit is None:
            continue
        decision = next((d for d in unit.unit.decisions.values() if d.seq == seq), None)
        refs = decision.refs if decision is not None else (seq,)
        evidence = evidence_of(streams.get(stream, {}), refs)
        in_num = (stream, seq) in counted
        out.append(Contribution(stream, unit.case_id, unit.attempt, in_num, decision, evidence))
    return Audit(run.run_id, run.root or card.meta.root, metric, tuple(out))
