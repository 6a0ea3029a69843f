"""Audit a longmemeval metric: every question in its mean, its decision and the calls it
cites (the ask episode's answer for the answer bounds; the tool calls that returned the
retrieved turns for the retrieval metrics). The locomo suite's audit of a card of means."""

from __future__ import annotations

from benchledger.projections.audit import Audit, UnknownMetric
from benchledger.projections.fold import fold
from benchledger.projections.source import RunEvents
from benchledger.projections.suites.locomo.audit import of_card
from benchledger.projections.suites.longmemeval.scorecard import (
    METRIC_NAMES,
    LocomoFold,
    scorecard,
)

AUDITABLE = METRIC_NAMES


def audit(run: RunEvents, metric_name: str) -> Audit:
    """The metric's value and each question in its denominator with its decision and evidence."""
    if metric_name not in AUDITABLE:
        raise UnknownMetric(metric_name, AUDITABLE)
    return of_card(run, scorecard(fold(LocomoFold(), run.events)), metric_name)
