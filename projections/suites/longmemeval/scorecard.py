"""The longmemeval suite's card as a fold over a run's events: LongMemEval's retrieval
metrics at turn and session level, the judge's accuracy beside the judge-free answer bounds,
per question type.

Every number is recomputed from the recorded run by the functions the decisions use
(``decisions.graded``). Retrieval means are over the questions LongMemEval's evaluation
scores (``ranking.scored``: no abstention question, none without a user evidence turn);
answer means over every graded question; the judge's over every judged one (a reply it
could not read counts as not correct, never a pass). A cut-off past the recorded search
depth, and a judge the run did not have (or one sample per answer, for agreement and
flips), are "not measured" (``projections.measured``). Binary means
carry a Wilson interval; NDCG and token F1 a bootstrap over the questions
(``projections.stats``). docs/longmemeval.md lists the metrics.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.ledger.events import Body
from benchledger.projections import measured, stats
from benchledger.projections.card import CI_EPISODES, CI_WILSON, Metric, Ref, RunMeta
from benchledger.projections.prices import Cost, Unpriced
from benchledger.projections.prices import priced as price_usage
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.locomo.decisions import Judged, judged
from benchledger.projections.suites.locomo.scorecard import (
    JUDGE_AGREEMENT,
    JUDGE_FLIP_RATE,
    LocomoFold,
)
from benchledger.projections.suites.longmemeval import ranking
from benchledger.projections.suites.longmemeval.decisions import (
    ANSWER,
    ASK,
    INGESTED,
    JUDGE,
    RETRIEVAL,
    Asked,
    graded,
)
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem, items

SUITE: Final = "longmemeval"
NOUN: Final = "questions"
ABSTENTION: Final = "abstention"  # the group an abstention question is reported in
ANSWER_F1: Final = "answer_f1"
ANSWER_CONTAINS: Final = "answer_contains_gold"
JUDGE_ACCURACY: Final = "judge_accuracy"
LEVELS: Final = ("turn", "session")
KINDS: Final = ("recall_any", "recall_all", "ndcg_any")


def retrieval_name(kind: str, k: int, level: str) -> str:
    """``recall_any_at_5_session``: LongMemEval's ``recall_any@5`` at session level."""
    return f"{kind}_at_{k}_{level}"


RETRIEVAL_NAMES: Final = tuple(retrieval_name(m, k, lv) for lv in LEVELS for k in ranking.KS
                               for m in KINDS)  # fmt: skip
JUDGE_NAMES: Final = (JUDGE_ACCURACY, JUDGE_AGREEMENT, JUDGE_FLIP_RATE)
METRIC_NAMES: Final = (ANSWER_CONTAINS, ANSWER_F1, *JUDGE_NAMES, *RETRIEVAL_NAMES)
BINARY: Final = frozenset({ANSWER_CONTAINS, JUDGE_ACCURACY, JUDGE_FLIP_RATE,
                           *(n for n in RETRIEVAL_NAMES if not n.startswith("ndcg"))})  # fmt: skip
_SAY = {"recall_any": "any evidence {u} among the first {k} retrieved",
        "recall_all": "every evidence {u} among the first {k} retrieved",
        "ndcg_any": "NDCG of the first {k} retrieved {u}s (binary relevance)"}  # fmt: skip
DESCRIPTIONS: Final = {
    ANSWER_CONTAINS: "judge-free bound: the answer contains the normalised gold answer "
    "(abstention questions: it abstains)",
    ANSWER_F1: "judge-free bound: token F1 of the answer against the gold answer "
    "(abstention questions: 1 when it abstains)",
    JUDGE_ACCURACY: "questions the judge ruled correct (LongMemEval's prompt for the "
    "question's type, unless the run named another)",
    JUDGE_AGREEMENT: "mean share of a question's judge samples agreeing with its verdict",
    JUDGE_FLIP_RATE: "questions whose judge samples did not all agree",
    **{
        retrieval_name(m, k, lv): f"LongMemEval {m}@{k}, {lv} level: "
        + _SAY[m].format(u=lv, k=k) + ("" if lv == "turn" else " (LongMemEval's effective k)")
        for lv in LEVELS for k in ranking.KS for m in KINDS
    },
}  # fmt: skip


@dataclass(frozen=True)
class Row:
    """One question as the card shows it."""

    unit: lc.Unit
    item: LongMemEvalItem
    asked: Asked
    judged: Judged | None = None  # the judge's verdict (None: not judged)

    @property
    def group(self) -> str:
        q = self.item.question
        return ABSTENTION if q.abstention else q.type

    def as_json(self) -> dict[str, Any]:
        q = self.item.question
        return {
            "id": q.id,
            "stream": self.unit.stream,
            "attempt": self.unit.attempt,
            "question_type": q.type,
            "abstention": q.abstention,
            "question": q.question,
            "question_date": q.date,
            "prediction": self.asked.prediction,
            "gold_answer": q.answer,
            "retrieved": list(self.asked.retrieved),
            "retrieval_scored": ranking.scored(q),
            "judge": None
            if self.judged is None
            else {
                "verdict": self.judged.verdict,
                "samples": list(self.judged.verdicts),
                "agreement": self.judged.agreement,
            },
            **row_values(self),
        }


def row_values(row: Row) -> dict[str, float]:
    """The question's term in each card mean it is in: its answer bounds, its judge's
    verdict (when recorded) and, when LongMemEval scores its retrieval, the three metrics
    at every cut-off and both levels. The card, the exports and compare all use these."""
    q = row.item.question
    out = {ANSWER_F1: row.asked.f1, ANSWER_CONTAINS: 1.0 if row.asked.contains else 0.0}
    if row.judged is not None:  # a reply the judge's words could not be read from: not correct
        out[JUDGE_ACCURACY] = 1.0 if row.judged.verdict else 0.0
        out[JUDGE_AGREEMENT] = row.judged.agreement
        out[JUDGE_FLIP_RATE] = 0.0 if len(set(row.judged.verdicts)) == 1 else 1.0
    if ranking.scored(q):
        found = ranking.corpus(q)
        for k in ranking.KS:
            for level, fn in (("turn", ranking.turn_level), ("session", ranking.session_level)):
                for m, v in zip(KINDS, fn(found, row.asked.ranks, k), strict=True):
                    out[retrieval_name(m, k, level)] = v
    return out


def _ref(row: Row, check: str) -> Ref:
    refs = row.unit.ref(check)
    return refs[0] if refs else (row.unit.stream, row.asked.finished)


def _mean(name: str, scored: Sequence[tuple[Row, float, Ref]]) -> Metric:
    values = tuple((row.unit.stream, float(v)) for row, v, _ in scored)
    total = sum(v for _, v in values)
    if name in BINARY:
        ci, method = stats.wilson(total, len(values)), CI_WILSON
    else:
        method = CI_EPISODES
        ci = stats.bootstrap([v for _, v in values], lambda s: sum(s) / len(s) if s else None,
                             min_groups=stats.MIN_BOOTSTRAP_GROUPS)  # fmt: skip
    return Metric(name, total, len(values), ci, tuple(ref for _, v, ref in scored if v),
                  tuple(ref for _, _, ref in scored), DESCRIPTIONS[name],
                  tuple(row.unit.stream for row, _, _ in scored), method, values)  # fmt: skip


def _check(name: str) -> str:
    if name in JUDGE_NAMES:
        return JUDGE
    return ANSWER if name in (ANSWER_F1, ANSWER_CONTAINS) else RETRIEVAL


def metrics(rows: Sequence[Row], depth: int) -> dict[str, Metric]:
    """Every metric of ``METRIC_NAMES`` over ``rows``: the mean of its ``row_values``, or
    not measured past the search depth ``depth`` (a judge the run lacked: ``measured``'s,
    by the card)."""
    valued = [(r, row_values(r)) for r in rows]
    out = {}
    for name in METRIC_NAMES:
        m = _mean(name, [(r, v[name], _ref(r, _check(name))) for r, v in valued if name in v])
        if name in RETRIEVAL_NAMES and (why := measured.beyond_depth(_k(name), depth)):
            m = measured.unmeasured(m, why)
        out[name] = m
    return out


def _k(name: str) -> int:
    return int(name.split("_at_")[1].split("_")[0])


class Card(NamedTuple):
    """One longmemeval run's metrics (overall and per question type) and its questions."""

    meta: RunMeta
    units: tuple[lc.Unit, ...]
    rows: tuple[Row, ...]
    metrics: dict[str, Metric]
    by_type: dict[str, dict[str, Metric]]
    depth: int  # the most hits any question's searches returned
    harness_failures: int
    incomplete: int
    ingests: tuple[tuple[str, bool | None, str], ...]
    notes: tuple[str, ...] = ()

    @property
    def usage(self) -> Any:
        return self.meta.usage

    def priced(self) -> Cost | Unpriced | None:
        return price_usage(self.usage, None)

    @property
    def passed_units(self) -> int:
        """Questions whose answer contains the gold answer."""
        return sum(1 for r in self.rows if r.asked.contains)


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
    order = {qid: i for i, qid in enumerate(by_id)}
    rows.sort(key=lambda r: (order.get(r.item.id, len(order)), r.unit.attempt))
    depth = max((len(r.asked.retrieved) for r in rows), default=0)
    records = (meta.started.record,)
    shown = measured.declared(metrics(rows, depth), records)
    groups: dict[str, list[Row]] = {}
    for r in rows:
        groups.setdefault(r.group, []).append(r)
    by_type = {g: measured.declared(metrics(rs, depth), records) for g, rs in groups.items()}
    ingests = tuple((u.stream, d.verdict, d.reason) for u in units
                    if (d := u.decisions.get(INGESTED)) is not None)  # fmt: skip
    errored = sum(1 for u in units if u.counted and u.error)
    incomplete = sum(1 for u in units if u.finished is None and not u.abandoned)
    return Card(meta, tuple(units), tuple(rows), shown, by_type, depth, errored, incomplete,
                ingests, tuple(notes))  # fmt: skip


def score(folded: Iterable[Any]) -> Card:
    """The card of one folded run."""
    [one] = list(folded)
    return scorecard(one)


__all__ = ["ASK", "METRIC_NAMES", "Card", "LocomoFold", "Row", "row_values", "score",
           "scorecard", "unit_values"]  # fmt: skip
