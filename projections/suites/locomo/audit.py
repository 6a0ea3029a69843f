"""Audit a locomo metric: every question in its mean, its decision and the calls it cites
(the ask episode's answer for F1; the tool calls that returned the retrieved turns for
evidence recall, recall@k and MRR)."""

from __future__ import annotations

from typing import Any

from benchledger.ledger.events import Event
from benchledger.projections.audit import Audit, Contribution, UnknownMetric, evidence_of
from benchledger.projections.fold import fold
from benchledger.projections.source import RunEvents
from benchledger.projections.suites.locomo.scorecard import METRIC_NAMES, LocomoFold, scorecard

AUDITABLE = METRIC_NAMES


def audit(run: RunEvents, metric_name: str) -> Audit:
    """The metric's value and each question in its denominator with its decision and evidence."""
    if metric_name not in AUDITABLE:
        raise UnknownMetric(metric_name, AUDITABLE)
    return of_card(run, scorecard(fold(LocomoFold(), run.events)), metric_name)


def of_card(run: RunEvents, card: Any, metric_name: str) -> Audit:
    """The audit of a card whose metrics are all means of per-question scores (the locomo
    card's; the longmemeval suite's too): each question in the metric's denominator."""
    metric = card.metrics[metric_name]
    streams: dict[str, dict[int, tuple[Event, str]]] = {}
    for event, link in run.events:
        streams.setdefault(event.stream, {})[event.seq] = (event, link)
    units = {u.stream: u for u in card.units}
    counted = set(metric.num_refs)
    out = []
    for stream, seq in metric.den_refs:
        unit = units[stream]
        decision = next((d for d in unit.decisions.values() if d.seq == seq), None)
        refs = decision.refs if decision is not None else (seq,)
        evidence = evidence_of(streams.get(stream, {}), refs)
        out.append(Contribution(stream, unit.protocol_id, unit.attempt, (stream, seq) in counted,
                                decision, evidence))  # fmt: skip
    # Every locomo metric is a mean of per-question scores, shown as the card shows it.
    return Audit(run.run_id, run.root or card.meta.root, metric, tuple(out), mean=True)
