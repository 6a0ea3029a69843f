"""The locomo suite's card as a fold over a run's events: LoCoMo's F1 and retrieval metrics.

Every number is recomputed from the recorded run by the functions the decisions use
(``decisions.graded``): the answer each ask episode recorded, graded by LoCoMo's rules,
and the dialogue ids its tool calls returned. Means are over the questions that finished
without a harness failure; a metric a question cannot have (retrieval of a question with
no evidence) leaves it out of that mean. docs/locomo.md lists the metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.ledger.events import (
    Body,
    EpisodeFinishedEvent,
    Event,
    InfraErrorEvent,
    ModelCallEvent,
    SessionCallEvent,
)
from benchledger.projections import measured, retrieval
from benchledger.projections.card import CI_LABELS, CI_STRATIFIED, Metric, Ref, RunMeta
from benchledger.projections.prices import Cost, Unpriced
from benchledger.projections.prices import priced as price_usage
from benchledger.projections.stats import (
    MIN_BOOTSTRAP_GROUPS,
    Interval,
    stratified_means,
)
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.locomo import grading
from benchledger.projections.suites.locomo.conditions import Conditions, of_card
from benchledger.projections.suites.locomo.decisions import (
    ASK,
    CATEGORY_NAMES,
    EVIDENCE,
    F1,
    INGESTED,
    Asked,
    J,
    Judged,
    graded,
    judged,
)
from benchledger.projections.suites.locomo.items import LocomoItem, items

SUITE: Final = "locomo"
NOUN: Final = "questions"
ADVERSARIAL_ACCURACY: Final = "adversarial_accuracy"
MRR: Final = "mrr"
RECALL_AT: Final = {k: f"recall_at_{k}" for k in grading.RECALL_KS}
_CATEGORY: Final = {c: n.replace("-", "_") for c, n in CATEGORY_NAMES.items()}
PER_CATEGORY: Final = {c: f"f1_{n}" for c, n in _CATEGORY.items()}
# recall@k by category: (k, category) -> ``recall_at_5_single_hop``
RECALL_BY_CATEGORY: Final = {(k, c): f"{RECALL_AT[k]}_{n}" for k in grading.RECALL_KS
                             for c, n in _CATEGORY.items()}  # fmt: skip
# LoCoMo's J: the share of answers a judge accepted, over categories 1-4 (the field's
# convention: mem0, Zep and the rest leave adversarial questions out) and over all five.
J_CAT_1_4: Final = "j_cat_1_4"
J_ALL: Final = "j_all"
JUDGE_AGREEMENT: Final = "judge_agreement"
JUDGE_FLIP_RATE: Final = "judge_flip_rate"
JUDGED_METRICS: Final = (J_CAT_1_4, J_ALL, JUDGE_AGREEMENT, JUDGE_FLIP_RATE)
METRIC_NAMES: Final = (F1, J_CAT_1_4, J_ALL, *PER_CATEGORY.values(), ADVERSARIAL_ACCURACY,
                       EVIDENCE, *RECALL_AT.values(), MRR, JUDGE_AGREEMENT, JUDGE_FLIP_RATE,
                       *RECALL_BY_CATEGORY.values())  # fmt: skip
DESCRIPTIONS: Final = {
    F1: "mean LoCoMo score over every question (token F1 by its category's rule)",
    **{
        m: f"mean LoCoMo score over the {CATEGORY_NAMES[c]} questions (category {c})"
        for c, m in PER_CATEGORY.items()
    },
    ADVERSARIAL_ACCURACY: "adversarial questions answered 'no information available' or "
    "'not mentioned'",
    EVIDENCE: "mean share of a question's evidence ids among every dialogue id retrieved "
    "(all the question's searches, to their depth; a session retrieved counts its turns)",
    **{
        m: f"mean share of a question's evidence ids among the first {k} retrieved"
        for k, m in RECALL_AT.items()
    },
    MRR: "mean reciprocal rank of the first evidence id among those retrieved (0: none)",
    J_CAT_1_4: "LoCoMo's J: answers the judge accepted, over categories 1-4 (the field's "
    "convention)",
    J_ALL: "answers the judge accepted, over all five categories",
    JUDGE_AGREEMENT: "mean share of a question's judge samples agreeing with its verdict",
    JUDGE_FLIP_RATE: "questions whose judge samples did not all agree",
    **{
        m: f"recall@{k} over the {CATEGORY_NAMES[c]} questions (category {c})"
        for (k, c), m in RECALL_BY_CATEGORY.items()
    },
}
# Every mean's 95% interval: questions resampled within their conversation (docs/locomo.md).
CI_METHOD: Final = CI_LABELS[CI_STRATIFIED]


class LocomoFold:
    """Folds a run's events into units (the lifecycle fold's) and, per unit stream, the
    events the grading reads (tool calls, finished episodes, infra errors)."""

    def __init__(self) -> None:
        self.base = lc.LifecycleFold(NOUN)
        self.events: dict[str, list[tuple[int, Body]]] = {}

    def apply(self, event: Event, link: str) -> None:
        self.base.apply(event, link)
        if isinstance(event, SessionCallEvent | EpisodeFinishedEvent | InfraErrorEvent
                      | ModelCallEvent):  # fmt: skip
            self.events.setdefault(event.stream, []).append((event.seq, event.body))

    def result(self) -> tuple[RunMeta, list[lc.Unit], dict[str, list[tuple[int, Body]]]]:
        meta, units = self.base.result()
        return meta, units, self.events


@dataclass(frozen=True)
class Row:
    """One question as the card shows it."""

    unit: lc.Unit
    item: LocomoItem
    asked: Asked
    judged: Judged | None = None  # the judge's verdict (None: not judged)

    @property
    def reciprocal_rank(self) -> float | None:
        ranks = [r for r in self.asked.ranks if r is not None]
        if not self.item.question.evidence:
            return None
        return 1.0 / min(ranks) if ranks else 0.0

    def recall(self, k: int) -> float | None:
        return retrieval.recall_at(self.asked.ranks, k)

    @property
    def conversation(self) -> str:
        """The sample the question is asked of: the stratum its interval resamples within."""
        return self.item.sample.sample_id

    def as_json(self) -> dict[str, Any]:
        q = self.item.question
        return {
            "id": q.id,
            "stream": self.unit.stream,
            "attempt": self.unit.attempt,
            "category": q.category,
            "category_name": CATEGORY_NAMES[q.category],
            "question": q.question,
            "prediction": self.asked.prediction,
            "gold_answer": q.answer,
            "f1": self.asked.f1,
            "evidence": list(q.evidence),
            "evidence_recall": self.asked.evidence_recall,
            "retrieved": list(self.asked.retrieved),
            "evidence_ranks": list(self.asked.ranks),
            **{RECALL_AT[k]: self.recall(k) for k in grading.RECALL_KS},
            "reciprocal_rank": self.reciprocal_rank,
            "latency_ms": round(self.asked.latency_ms, 3),
            "tokens": dict(self.unit.tokens),
            "judge": None if self.judged is None else {
                "verdict": self.judged.verdict, "samples": list(self.judged.verdicts),
                "agreement": self.judged.agreement},
        }  # fmt: skip


class Card(NamedTuple):
    """One locomo run's metrics, the questions behind them and what the run is."""

    meta: RunMeta
    units: tuple[lc.Unit, ...]
    rows: tuple[Row, ...]
    metrics: dict[str, Metric]
    harness_failures: int
    incomplete: int
    ingests: tuple[tuple[str, bool | None, str], ...]  # (stream, verdict, reason)
    notes: tuple[str, ...] = ()
    conditions: Conditions | None = None  # what the answers were given (conditions.py)

    @property
    def usage(self) -> Any:
        return self.meta.usage

    def priced(self) -> Cost | Unpriced | None:
        """The run's cost at the packaged price table (what compare's facts show)."""
        return price_usage(self.usage, None)

    @property
    def passed_units(self) -> int:
        """Questions answered with F1 1 (what cost per passed unit divides by)."""
        return sum(1 for r in self.rows if r.asked.f1 == 1.0)


def _mean(
    name: str, scored: Sequence[tuple[Row, float | None, Ref]], ci: Interval | None
) -> Metric:
    kept = [(row, v, ref) for row, v, ref in scored if v is not None]
    total = sum(v for _, v, _ in kept if v is not None)
    num_refs = tuple(ref for _, v, ref in kept if v)
    den_refs = tuple(ref for _, _, ref in kept)
    values = tuple((row.unit.stream, float(v)) for row, v, _ in kept if v is not None)
    return Metric(name, total, len(kept), ci, num_refs, den_refs, DESCRIPTIONS[name],
                  tuple(row.unit.stream for row, _, _ in kept), CI_STRATIFIED, values)  # fmt: skip


def _ref(row: Row, check: str) -> Ref:
    return row.unit.ref(check)[0] if row.unit.ref(check) else (row.unit.stream, row.asked.finished)


# The metrics graded from the answer (their decision is ``locomo_f1``); the others from the
# retrieval (``evidence_recall``).
ANSWERED: Final = frozenset({F1, *PER_CATEGORY.values(), ADVERSARIAL_ACCURACY})


def _check(metric: str) -> str:
    """The decision a metric's terms cite."""
    if metric in JUDGED_METRICS:
        return J
    return F1 if metric in ANSWERED else EVIDENCE


def row_values(row: Row) -> dict[str, float]:
    """The question's term in each card mean it is in: its F1 (overall and its category's),
    whether it abstained (adversarial), its evidence recall, recall@k and reciprocal rank
    (a question with no evidence is in no retrieval mean). The card's means, the Inspect
    export's scores and compare's pairs are all these values."""
    q = row.item.question
    out = {F1: row.asked.f1}
    if q.category in PER_CATEGORY:
        out[PER_CATEGORY[q.category]] = row.asked.f1
    if q.category == grading.ADVERSARIAL:
        out[ADVERSARIAL_ACCURACY] = 1.0 if grading.abstains(row.asked.prediction) else 0.0
    if row.asked.evidence_recall is not None:
        out[EVIDENCE] = row.asked.evidence_recall
    for k, name in RECALL_AT.items():
        if (hit := row.recall(k)) is not None:
            out[name] = hit
            out[RECALL_BY_CATEGORY[k, q.category]] = hit
    if row.reciprocal_rank is not None:
        out[MRR] = row.reciprocal_rank
    if row.judged is not None:  # a reply the judge's words could not be read from: not accepted
        accepted = 1.0 if row.judged.verdict else 0.0
        out[J_ALL] = accepted
        if q.category != grading.ADVERSARIAL:
            out[J_CAT_1_4] = accepted
        out[JUDGE_AGREEMENT] = row.judged.agreement
        out[JUDGE_FLIP_RATE] = 0.0 if len(set(row.judged.verdicts)) == 1 else 1.0
    return out


def intervals(
    keyed: Sequence[tuple[str, Mapping[str, float]]], names: Sequence[str] = METRIC_NAMES
) -> dict[str, Interval | None]:
    """Each mean's 95% interval over (conversation, question's values) rows: a bootstrap
    resampling questions within their conversation (``stats.stratified_means``, the fixed
    seed); None below ``MIN_BOOTSTRAP_GROUPS`` questions. Compare's paired differences
    pass each question's B - A here."""
    if not keyed:  # no question graded: no interval
        return dict.fromkeys(names)
    found = stratified_means([c for c, _ in keyed], [[v.get(n) for n in names] for _, v in keyed],
                             min_groups=MIN_BOOTSTRAP_GROUPS)  # fmt: skip
    return dict(zip(names, found, strict=True))


def metrics(rows: Sequence[Row], depth: int | None = None) -> dict[str, Metric]:
    """Every metric of ``METRIC_NAMES`` over ``rows``: the mean of its ``row_values``, with
    its interval (``intervals``); a recall@k beyond the run's search ``depth`` is not
    measured (``measured.beyond_depth``) and takes no part."""
    deep = {n for n in METRIC_NAMES if not measured.beyond_depth(measured.cut_off(n), depth)}
    valued = [(r, {n: x for n, x in row_values(r).items() if n in deep}) for r in rows]
    cis = intervals([(r.conversation, v) for r, v in valued])
    found = {
        name: _mean(name, [(r, v[name], _ref(r, _check(name)))
                           for r, v in valued if name in v], cis[name])
        for name in METRIC_NAMES
    }  # fmt: skip
    return measured.depth_limited(found, depth)


def search_depth(rows: Sequence[Row]) -> int | None:
    """The run's search depth: the least any question's searches reached (``Asked.depth``),
    over the questions that searched (None: none did)."""
    depths = [r.asked.depth for r in rows if r.asked.depth]
    return min(depths) if depths else None


def unit_values(card: Card) -> dict[str, dict[str, float]]:
    """Each graded question's ``row_values``, by its unit stream."""
    return {r.unit.stream: row_values(r) for r in card.rows}


def scorecard(folded: tuple[RunMeta, list[lc.Unit], Mapping[str, list[tuple[int, Body]]]]
              ) -> Card:  # fmt: skip
    """The run's card: every graded question's row and the metrics over them."""
    meta, units, events = folded
    notes: list[str] = []
    try:
        by_id = items(meta.started).by_id if meta.started.config else {}
    except UnusableInput as exc:
        by_id, notes = {}, [f"the run's questions cannot be read: {exc}"]
    rows = []
    for u in units:
        item = by_id.get(u.protocol_id)
        if item is None or not u.graded:
            continue
        mine = events.get(u.stream, [])
        asked = graded(item, mine)
        if asked is not None:
            rows.append(Row(u, item, asked, judged(mine)))
    order = {qid: i for i, qid in enumerate(by_id)}  # the data's order, not the streams'
    rows.sort(key=lambda r: (order.get(r.item.id, len(order)), r.unit.attempt))
    ingests = tuple((u.stream, d.verdict, d.reason) for u in units
                    if (d := u.decisions.get(INGESTED)) is not None)  # fmt: skip
    errored = sum(1 for u in units if u.counted and u.error)
    incomplete = sum(1 for u in units if u.finished is None and not u.abandoned)
    shown = measured.declared(metrics(rows, search_depth(rows)), (meta.started.record,))
    card = Card(meta, tuple(units), tuple(rows), shown, errored, incomplete, ingests,
                tuple(notes))  # fmt: skip
    return card._replace(conditions=of_card(card, events))


def score(folded: Iterable[Any]) -> Card:
    """The card of one folded run (a locomo run is reported on its own)."""
    [one] = list(folded)
    return scorecard(one)


__all__ = ["ASK", "METRIC_NAMES", "Card", "LocomoFold", "Row", "intervals", "row_values",
           "score", "scorecard", "search_depth", "unit_values"]  # fmt: skip
