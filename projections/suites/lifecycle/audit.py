"""Audit a lifecycle metric: every contributing unit with its decision and evidence.

A retrieval metric (``ranks``) has no recorded decision behind it: each ranked episode
is shown with a line computed from its first search call (origin ``projection``) and,
as evidence, that call and the episode's end.
"""

from __future__ import annotations

from benchledger.ledger.events import Event
from benchledger.projections.audit import Audit, Contribution, UnknownMetric, evidence_of
from benchledger.projections.fold import fold
from benchledger.projections.source import RunEvents
from benchledger.projections.suites.lifecycle import ranks
from benchledger.projections.suites.lifecycle.scorecard import (
    METRIC_NAMES,
    METRICS,
    LifecycleFold,
    Scorecard,
    scorecard,
)


def audit(run: RunEvents, metric_name: str) -> Audit:
    """A lifecycle run's metric value and every contributing unit with its decision and evidence."""
    if metric_name not in METRIC_NAMES:
        raise UnknownMetric(metric_name, METRIC_NAMES)
    lf = fold(LifecycleFold(), run.events)
    known, why = ranks.known_facts([lf[0]])
    card = scorecard([lf], facts=known, facts_note=why)
    metric = card.metrics[metric_name]
    streams: dict[str, dict[int, tuple[Event, str]]] = {}
    for event, link in run.events:
        streams.setdefault(event.stream, {})[event.seq] = (event, link)
    num_refs = set(metric.num_refs)
    if ranks.is_retrieval(metric_name):
        return _ranked(run, card, metric_name, streams)
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


def _ranked(
    run: RunEvents, card: Scorecard, name: str, streams: dict[str, dict[int, tuple[Event, str]]]
) -> Audit:
    """A retrieval metric: every episode in its denominator, where its first search put the
    fact, and that search call (with the episode's end) as evidence."""
    metric = card.metrics[name]
    stage = name.partition(".")[2]
    wanted = (ranks.ABSTAIN,) if name == ranks.LEAK else ((stage,) if stage else ranks.RANKED)
    k = ranks.LEAK_K if name == ranks.LEAK else None
    if k is None and not name.startswith("mrr"):
        k = int(name.partition(".")[0].rsplit("_", 1)[1])
    out = []
    for r in card.ranked:
        if r.stage not in wanted:
            continue
        in_num = r.rank is not None and (k is None or r.rank <= k)
        by_seq = streams.get(r.stream, {})
        seq = r.searched.call if r.searched.call is not None else r.searched.finished
        link = by_seq[seq][1] if seq in by_seq else ""
        decision = ranks.decision(r, link, name, in_num)
        refs = tuple(x for x in (r.searched.call, r.searched.finished) if x is not None)
        # The search call and the episode's end only (not every event the episode refs).
        evidence = tuple(e for e in evidence_of(by_seq, refs) if e.seq in refs)
        out.append(Contribution(r.stream, r.protocol_id, r.attempt, in_num, decision, evidence))
    withheld = tuple(u.stream for u in card.units if u.graded and not u.ranked)
    # MRR is a mean of reciprocal ranks: a number on the card (ranks.display), so here too.
    return Audit(run.run_id, run.root or card.meta.root, metric, tuple(out), withheld,
                 mean=name.startswith("mrr"))  # fmt: skip
