"""Locomo runs side by side: each run's means with their intervals, each run's difference
from the baseline paired by question with its interval and test, and who vouches for each.

Every locomo metric is a mean of per-question values (``scorecard.row_values``), so:

- a run's interval is its card's: a percentile bootstrap resampling questions within
  their conversation (``scorecard.intervals``, the project's fixed seed and resample
  count; none below ``stats.MIN_BOOTSTRAP_GROUPS`` questions, where a resample's spread is
  no 95% interval); a judge asked several times per answer gives J a
  two-stage one, over the questions and each question's samples (``_judge_interval``), so
  the judge's variance is in it;
- a difference B - A pairs the questions both runs graded (the same question and
  attempt): its estimate is the mean paired gain (``stats.mean_gain``), its interval the
  same bootstrap over the pairs' differences, and when every paired value is 0 or 1
  (adversarial accuracy, often recall@1) McNemar's exact test on the discordant pairs
  gives its p as well; it is resolved when its interval excludes 0.

The lead is the shared what-differs section (``projections.differences``), each differing
metric noted with its paired difference; docs/locomo.md describes the output.
"""

from __future__ import annotations

import html
import json
import random
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger.inert import inert, inert_md
from benchledger.projections import differences
from benchledger.projections.card import (
    card_runs,
    fmt_signed,
    fmt_why,
    standing_json,
    standing_lines,
)
from benchledger.projections.stats import (
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    MIN_BOOTSTRAP_GROUPS,
    Interval,
    bootstrap,
    draw,
    mcnemar_exact,
    mean_gain,
)
from benchledger.projections.suites.locomo.decisions import F1
from benchledger.projections.suites.locomo.grading import ADVERSARIAL
from benchledger.projections.suites.locomo.report import banners
from benchledger.projections.suites.locomo.scorecard import (
    CI_METHOD,
    J_ALL,
    J_CAT_1_4,
    METRIC_NAMES,
    Card,
    intervals,
    row_values,
)

QUESTIONS: Final = CI_METHOD
PAIRED: Final = (
    f"bootstrap over paired questions resampled within conversations ({BOOTSTRAP_REPS} "
    f"resamples, seed {BOOTSTRAP_SEED})"
)
MCNEMAR: Final = "McNemar's exact test where every paired value is 0 or 1"
SAMPLED: Final = (
    f"bootstrap over questions and each question's judge samples ({BOOTSTRAP_REPS} "
    f"resamples, seed {BOOTSTRAP_SEED})"
)
Key = tuple[str, int]  # a question's id and attempt: what pairs two runs' answers


class Paired(NamedTuple):
    """One run's difference from the baseline on one metric, paired by question."""

    diff: float | None  # the mean of B - A over the pairs
    ci: Interval | None
    pairs: int
    mcnemar_p: float | None  # every paired value 0 or 1: McNemar's exact p

    @property
    def resolved(self) -> bool:
        """Whether the interval excludes no difference."""
        return self.ci is not None and (self.ci.low > 0 or self.ci.high < 0)


class Column(NamedTuple):
    """One run: its id, card, per-question values, each metric's interval and each
    question's conversation (the stratum its intervals resample within)."""

    run_id: str
    card: Card
    values: dict[Key, dict[str, float]]
    intervals: dict[str, Interval | None]
    conversations: dict[Key, str]

    def terms(self, name: str) -> list[float]:
        return [v[name] for v in self.values.values() if name in v]


def _mean(xs: Sequence[float]) -> float | None:
    return sum(xs) / len(xs) if xs else None


def column(run_id: str, card: Card) -> Column:
    """``card`` with its per-question values and its intervals."""
    gone = {n for n, m in card.metrics.items() if m.not_measured}  # no terms: nothing paired
    values = {(r.item.id, r.unit.attempt): {n: v for n, v in row_values(r).items()
                                             if n not in gone} for r in card.rows}  # fmt: skip
    cis = {n: card.metrics[n].ci for n in METRIC_NAMES}  # the card's, as report shows them
    strata = {(r.item.id, r.unit.attempt): r.conversation for r in card.rows}
    for name in (J_ALL, J_CAT_1_4):
        if name not in gone and (sampled := _judge_interval(card, name)) is not None:
            cis[name] = sampled
    return Column(run_id, card, values, cis, strata)


def _sampled(card: Card) -> bool:
    """Whether the judge was asked more than once for some answer."""
    return any(r.judged is not None and len(r.judged.verdicts) > 1 for r in card.rows)


def _judge_interval(card: Card, name: str) -> Interval | None:
    """J's interval with the judge's variance in it, when the judge was asked more than once
    per answer: a two-stage bootstrap, over the questions and, for each question drawn, over
    its samples (one drawn at random, a rejected or unread one counting 0), from the
    project's seed; None with one sample per answer (the questions' bootstrap stands)."""
    groups = [[1.0 if v else 0.0 for v in r.judged.verdicts] for r in card.rows
              if r.judged is not None and (name == J_ALL or
                                           r.item.question.category != ADVERSARIAL)]  # fmt: skip
    if not any(len(g) > 1 for g in groups):
        return None
    rng = random.Random(BOOTSTRAP_SEED + 1)  # the samples' draws, apart from the questions'

    def one_call(drawn: Sequence[list[float]]) -> float | None:
        return _mean([g[draw(rng, len(g))] for g in drawn])

    return bootstrap(groups, one_call, min_groups=MIN_BOOTSTRAP_GROUPS)


def _pairs(base: Column, other: Column, name: str) -> list[tuple[Key, float, float]]:
    return [(key, a[name], b[name]) for key, a in base.values.items()
            if (b := other.values.get(key)) is not None and name in a and name in b]  # fmt: skip


def differences_of(base: Column, other: Column) -> dict[str, Paired]:
    """``other`` - ``base`` on every metric over the questions both graded: each paired
    difference's interval from one bootstrap resampling the pairs within conversations."""
    found = {n: _pairs(base, other, n) for n in METRIC_NAMES}
    keys = sorted({key for pairs in found.values() for key, _, _ in pairs})
    gains = {n: {key: b - a for key, a, b in pairs} for n, pairs in found.items()}
    cis = intervals([(base.conversations[k], {n: g[k] for n, g in gains.items() if k in g})
                     for k in keys])  # fmt: skip
    out = {}
    for name, pairs in found.items():
        if not pairs:
            out[name] = Paired(None, None, 0, None)
            continue
        values = [(a, b) for _, a, b in pairs]
        p = None
        if all(x in (0.0, 1.0) and y in (0.0, 1.0) for x, y in values):
            only_a = sum(1 for x, y in values if x > y)
            p = mcnemar_exact(only_a, sum(1 for x, y in values if y > x))
        out[name] = Paired(mean_gain(values), cis[name], len(pairs), p)
    return out


def _value(card: Card, name: str) -> str:
    m = card.metrics[name]
    if m.not_measured:
        return fmt_why(m)
    return "n/a" if m.rate is None else f"{m.rate:.3f}"


def _interval(ci: Interval | None) -> str:
    return "-" if ci is None else f"[{ci.low:.3f},{ci.high:.3f}]"


def _diff_cells(d: Paired) -> list[str]:
    if d.diff is None:
        return ["n/a", "-", "-", "unpaired"]
    ci = "-" if d.ci is None else f"[{fmt_signed(d.ci.low)},{fmt_signed(d.ci.high)}]"
    p = "-" if d.mcnemar_p is None else f"p={d.mcnemar_p:.3f}"
    verdict = "resolved" if d.resolved else ("unresolved" if d.ci else "too-few-pairs")
    return [fmt_signed(d.diff), ci, p, verdict]


class Sheet(NamedTuple):
    """What every format shows: the runs, each metric's cells, the lead."""

    columns: tuple[Column, ...]
    names: tuple[str, ...]  # the metrics, those on which the runs differ first
    diffs: dict[str, dict[str, Paired]]  # metric -> run id (not the baseline) -> difference
    lead: differences.Differences

    @property
    def heads(self) -> list[str]:
        ids = [inert(c.run_id) for c in self.columns]
        out = ["metric", *ids, *(f"{i} 95% CI" for i in ids)]
        for i in ids[1:]:
            out += [f"{i}-{ids[0]}", "95% CI", "McNemar", "verdict"]
        return out

    def row(self, name: str) -> list[str]:
        cols = self.columns
        out = [name, *(_value(c.card, name) for c in cols),
               *(_interval(c.intervals[name]) for c in cols)]  # fmt: skip
        for c in cols[1:]:
            out += _diff_cells(self.diffs[name][c.run_id])
        return out

    def legend(self) -> list[str]:
        out = []
        for i, c in enumerate(self.columns):
            m = c.card.meta
            base = " (baseline)" if i == 0 else ""
            root = m.root[:12] if m.root else "unsealed"
            kind = c.card.conditions.control if c.card.conditions is not None else ""
            base += f" (control: {kind})" if kind else ""
            said = f"{c.run_id}{base}: {m.agent or '-'} @ {m.platform_label}, root {root}"
            out.append(inert(said, value=True))
        return out

    def controls(self) -> list[str]:
        """The lead line naming the runs that are controls (docs/locomo.md, "Controls"),
        each with its F1, so the platforms' runs are read against them."""
        said = [f"{c.run_id} ({c.card.conditions.control}, {F1} {_value(c.card, F1)})"
                for c in self.columns
                if c.card.conditions is not None and c.card.conditions.control]  # fmt: skip
        return [inert("controls: " + "; ".join(said), value=True)] if said else []

    def partial(self) -> list[str]:
        """Each run's line saying it is partial or some of its questions did not run."""
        return [f"{inert(c.run_id)}: {b}" for c in self.columns for b in banners(c.card)]

    def standing(self) -> list[str]:
        own = standing_lines(card_runs([c.card.meta for c in self.columns]), named=True)
        return [*self.controls(), *self.partial(), *own]


def _note(ids: Sequence[str], ds: dict[str, Paired]) -> str:
    said = []
    for run_id in ids[1:]:
        d = ds[run_id]
        if d.diff is not None:
            ci = "" if d.ci is None else f" [{fmt_signed(d.ci.low)}, {fmt_signed(d.ci.high)}]"
            verdict = "resolved" if d.resolved else "not resolved at 95%"
            if d.ci is None:
                verdict = f"{d.pairs} pairs: too few for an interval"
            if d.mcnemar_p is not None:
                verdict += f", McNemar p={d.mcnemar_p:.3f}"
            said.append(f"{run_id}: Δ {fmt_signed(d.diff)}{ci}, {verdict}")
    return "; ".join(said)


def sheet(cards: Sequence[Card], ids: Sequence[str]) -> Sheet:
    """The runs compared, ``cards[0]`` the baseline."""
    cols = tuple(column(i, c) for i, c in zip(ids, cards, strict=True))
    by_run = {c.run_id: differences_of(cols[0], c) for c in cols[1:]}
    diffs = {n: {i: d[n] for i, d in by_run.items()} for n in METRIC_NAMES}
    names = tuple(sorted(METRIC_NAMES, key=lambda n: len({_value(c, n) for c in cards}) == 1))
    lead = differences.what_differs(
        [inert(i) for i in ids],
        metrics=[differences.Fact(n, tuple(_value(c, n) for c in cards), _note(ids, diffs[n]))
                 for n in names],
        facts=differences.run_facts(cards),
    )  # fmt: skip
    return Sheet(cols, names, diffs, lead)


def _methods() -> str:
    return f"95%, {QUESTIONS}; differences paired by question: {PAIRED}, {MCNEMAR}"


def as_json(s: Sheet) -> dict[str, Any]:
    """The comparison as JSON: every run's means, intervals and paired differences."""
    ids = [c.run_id for c in s.columns]

    def interval(c: Column, n: str) -> dict[str, Any]:
        ci = c.intervals[n]
        sampled = n in (J_ALL, J_CAT_1_4) and _sampled(c.card)
        return {"low": ci.low if ci else None, "high": ci.high if ci else None,
                "n": len(c.terms(n)), "method": SAMPLED if sampled else QUESTIONS}  # fmt: skip

    def diff(d: Paired) -> dict[str, Any]:
        return {"diff": d.diff, "ci_low": d.ci.low if d.ci else None,
                "ci_high": d.ci.high if d.ci else None, "pairs": d.pairs,
                "mcnemar_p": d.mcnemar_p, "resolved": d.resolved, "method": PAIRED}  # fmt: skip

    return {
        "suite": "locomo",
        "runs": ids,
        "baseline": ids[0],
        "metrics": {n: {c.run_id: c.card.metrics[n].rate for c in s.columns} for n in s.names},
        "not_measured": _not_measured(s),
        "intervals": {n: {c.run_id: interval(c, n) for c in s.columns} for n in s.names},
        "paired": {n: {i: diff(d) for i, d in s.diffs[n].items()} for n in s.names},
        "standing": {c.run_id: standing_json([c.card.meta]) for c in s.columns},
        "platforms": {c.run_id: c.card.meta.platform_facts for c in s.columns},
        "what_differs": differences.as_json(s.lead),
        "controls": {
            c.run_id: c.card.conditions.control
            for c in s.columns
            if c.card.conditions is not None and c.card.conditions.control
        },
        "judge_changes": judge_changes(s),
        **({"warning": " | ".join(s.partial())} if s.partial() else {}),
    }


def _said(verdict: bool | None) -> str:
    return "CORRECT" if verdict else "WRONG" if verdict is False else "not understood"


def judge_changes(s: Sheet) -> dict[str, list[dict[str, Any]]]:
    """Question by question, where each run's judge ruled otherwise than the baseline's on
    the same question and attempt (a regrade's effect): run id -> the questions, in the
    baseline's order, each with both verdicts and the answer each judged."""
    base = {(r.item.id, r.unit.attempt): r for r in s.columns[0].card.rows}
    out: dict[str, list[dict[str, Any]]] = {}
    for c in s.columns[1:]:
        rows = {(r.item.id, r.unit.attempt): r for r in c.card.rows}
        for key, b in base.items():
            o = rows.get(key)
            if o is None or b.judged is None or o.judged is None:
                continue
            if b.judged.verdict == o.judged.verdict:
                continue
            out.setdefault(c.run_id, []).append({
                "id": key[0], "attempt": key[1], "baseline": _said(b.judged.verdict),
                "verdict": _said(o.judged.verdict), "answer": o.asked.prediction,
                "baseline_answer": b.asked.prediction, "gold": o.item.question.answer,
            })  # fmt: skip
    return out


def _change_lines(s: Sheet) -> list[str]:
    out = []
    for run, changes in judge_changes(s).items():
        out.append(f"judge verdicts that differ, {inert(run)} vs {inert(s.columns[0].run_id)} "
                   f"({len(changes)} questions):")  # fmt: skip
        out += [f"  {inert(ch['id'])}: {ch['baseline']} -> {ch['verdict']}  answer "
                f"{inert(ch['answer'])[:60]!s}  gold {inert(ch['gold'])[:40]!s}"
                for ch in changes]  # fmt: skip
    return out


def _not_measured(s: Sheet) -> dict[str, dict[str, str]]:
    """Each metric some run could not measure: run id -> why (projections/measured.py)."""
    out: dict[str, dict[str, str]] = {}
    for n in s.names:
        for c in s.columns:
            if why := c.card.metrics[n].not_measured:
                out.setdefault(n, {})[c.run_id] = why
    return out


def _table(s: Sheet) -> str:
    head, rows = s.heads, [s.row(n) for n in s.names]
    widths = [max(len(x[i]) for x in [head, *rows]) + 2 for i in range(len(head))]
    out = [*s.standing(), *differences.text_lines(s.lead), ""]
    out += [*s.legend(), f"intervals: {_methods()}", ""]
    out += ["".join(v.ljust(w) for v, w in zip(x, widths, strict=True)).rstrip()
            for x in [head, *rows]]  # fmt: skip
    changes = _change_lines(s)
    out += ["", *changes] if changes else []
    return "\n".join(out) + "\n"


def _markdown(s: Sheet) -> str:
    out = [f"**{inert_md(x)}**" for x in s.standing()] + [""]
    out += differences.markdown_lines(s.lead)
    out += [f"- {inert_md(x)}" for x in s.legend()]
    out += [f"- intervals: {_methods()}", ""]
    out += ["| " + " | ".join(inert_md(h) for h in s.heads) + " |", "|" + "---|" * len(s.heads)]
    out += ["| " + " | ".join(inert_md(v) for v in s.row(n)) + " |" for n in s.names]
    return "\n".join(out) + "\n"


def _page(s: Sheet) -> str:
    e = html.escape
    top = "".join(f"<p>{e(x)}</p>" for x in s.standing())
    box = f'<div class="differs"><ul>{differences.html_items(s.lead)}</ul></div>'
    legend = "".join(f"<li>{e(x)}</li>" for x in [*s.legend(), f"intervals: {_methods()}"])
    heads = "".join(f"<th>{e(h)}</th>" for h in s.heads)
    cells = "".join("<tr>" + "".join(f"<td>{e(v)}</td>" for v in s.row(n)) + "</tr>"
                    for n in s.names)  # fmt: skip
    return (f"<!doctype html><meta charset=utf-8>{top}{box}<ul>{legend}</ul>"
            f"<table><tr>{heads}</tr>{cells}</table>\n")  # fmt: skip


def compare(cards: Sequence[Card], ids: Sequence[str], fmt: str) -> str:
    """Runs side by side in ``fmt``, ``cards[0]`` the baseline (module docstring)."""
    s = sheet(cards, ids)
    if fmt == "json":
        return json.dumps(as_json(s), indent=2, sort_keys=True) + "\n"
    if fmt == "markdown":
        return _markdown(s)
    if fmt == "html":
        return _page(s)
    return _table(s)
