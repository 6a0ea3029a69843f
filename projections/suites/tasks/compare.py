"""Tasks runs side by side: one column per run (named by its model), one row per rate.

Arms are independent samples (different attempts, often different tasks), so nothing is
paired: every non-baseline cell carries the difference of its rate and the baseline's
(this column minus the baseline, as a fraction) with Newcombe's hybrid score 95%
interval (``projections.stats.newcombe``). Runs of different task sets may be set side by
side (the study compares claim classes across them); ``differs`` names what differs.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger.inert import inert, inert_md
from benchledger.projections import differences as diffs
from benchledger.projections.card import (
    Metric,
    card_runs,
    fmt_signed,
    html_top_combined,
    standing_json,
    standing_lines,
)
from benchledger.projections.sheet import (
    Cell,
    extra_html,
    extra_json,
    letters,
    markdown_lines,
    table_lines,
)
from benchledger.projections.stats import Interval, newcombe
from benchledger.projections.suites.lifecycle.matrix import label
from benchledger.projections.suites.tasks.report import INTERVALS, cell, run_completeness
from benchledger.projections.suites.tasks.scorecard import METRIC_NAMES, Card
from benchledger.projections.usage_view import usage_cells

METHOD: Final = "Newcombe hybrid score (independent arms), this run minus the baseline"


class Column(NamedTuple):
    """One run as a column: its letter, what the user named it by, its card."""

    letter: str
    target: str
    card: Card

    @property
    def head(self) -> str:
        """The column's name: the run's model (its agent when no model was recorded), one
        inert line (the run's own words)."""
        return inert(self.card.meta.model or self.card.meta.agent or self.target, value=True)


class Diff(NamedTuple):
    """A column's rate minus the baseline's, with its Newcombe interval (None: a side is 0/0)."""

    diff: float | None
    ci: Interval | None


class Sheet(NamedTuple):
    """The compared columns (the baseline first) and each rate's difference from it."""

    columns: tuple[Column, ...]
    rows: dict[str, tuple[Diff, ...]]  # metric -> one Diff per non-baseline column
    differs: tuple[str, ...]
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # cost/latency rows, per column
    what: diffs.Differences | None = None  # what the output leads with

    @property
    def baseline(self) -> Column:
        return self.columns[0]


def difference(base: Metric, other: Metric) -> Diff:
    """``other``'s rate minus ``base``'s, with Newcombe's interval; empty when one is 0/0."""
    if not base.den or not other.den:
        return Diff(None, None)
    return Diff(other.num / other.den - base.num / base.den,
                newcombe(other.num, other.den, base.num, base.den))  # fmt: skip


_FIELDS: Final[tuple[tuple[str, Callable[[Card], str]], ...]] = (
    ("family", lambda c: c.setting("family") or "-"),
    ("arm", lambda c: c.setting("arm") or "-"),
    ("planted", lambda c: c.treatment),
    ("label", lambda c: c.setting("label") or "(analysed)"),
    ("agent", lambda c: c.meta.agent or "-"),
    ("model", lambda c: c.meta.model or "-"),
    ("platform", lambda c: c.meta.platform_label),
    ("tasks", lambda c: ", ".join(c.task_ids) or "-"),
)


def differences(columns: Sequence[Column]) -> list[str]:
    """Each recorded fact that differs between the columns, with every column's value."""
    out = []
    for name, get in _FIELDS:
        values = [get(c.card) for c in columns]
        if len(set(values)) > 1:
            out.append(f"{name}: " + ", ".join(
                f"{c.letter} = {v}" for c, v in zip(columns, values, strict=True)))  # fmt: skip
    return out


def sheet(cards: Sequence[Card], targets: Sequence[str]) -> Sheet:
    """The columns (``cards[0]`` the baseline) and every rate against the baseline."""
    if len(cards) < 2:
        raise ValueError("compare needs at least two runs")
    columns = tuple(
        Column(letter, t, c)
        for letter, t, c in zip(letters(len(cards)), targets, cards, strict=True)
    )
    base = cards[0].metrics
    rows = {
        name: tuple(difference(base[name], c.metrics[name]) for c in cards[1:])
        for name in METRIC_NAMES
    }
    extra = usage_cells([(c.usage, c.priced(), c.passed_units) for c in cards])
    what = diffs.what_differs(
        [c.letter for c in columns],
        [_metric_fact(columns, n, ds) for n, ds in rows.items()],
        diffs.run_facts(cards),
    )
    return Sheet(columns, rows, tuple(differences(columns)), tuple(extra), what)


def _metric_fact(columns: Sequence[Column], name: str, ds: Sequence[Diff]) -> diffs.Fact:
    """A rate as the lead shows it, with each column's difference from the baseline and
    whether its Newcombe interval excludes 0 (resolved)."""
    ms = [c.card.metrics[name] for c in columns]
    notes = [
        f"{c.letter}: {diff_text(d)}"
        + ("" if d.ci is None else ", resolved" if d.ci.low > 0 or d.ci.high < 0
           else ", not resolved at 95%")
        for c, m, d in zip(columns[1:], ms[1:], ds, strict=True)
        if m.rate != ms[0].rate
    ]  # fmt: skip
    return diffs.rate_fact(name, [(m.num, m.den) for m in ms], "; ".join(notes))


def _what(s: Sheet) -> diffs.Differences:
    assert s.what is not None  # sheet() always sets it
    return s.what


# -- rendering ---------------------------------------------------------------------------


def diff_text(d: Diff) -> str:
    """``Δ -0.667 [-0.820, -0.424]``, or why it is skipped."""
    if d.diff is None or d.ci is None:
        return "Δ skipped (a side has no attempts in the denominator)"
    return f"Δ {fmt_signed(d.diff)} [{fmt_signed(d.ci.low)}, {fmt_signed(d.ci.high)}]"


def _top(s: Sheet) -> list[str]:
    """EXCLUDED and partial-run lines per column, each run's standing, then what differs."""
    lines = []
    for c in s.columns:
        banner = run_completeness(c.card).banner()
        lines += [f"{c.letter}: {x}" for x in (c.card.excluded, banner) if x]
    lines += standing_lines(card_runs([c.card.meta for c in s.columns]), named=True)
    return lines + [f"differs: {d}" for d in s.differs]


def _legend(s: Sheet) -> list[tuple[str, str]]:
    out = []
    for c in s.columns:
        base = " (baseline)" if c is s.baseline else ""
        root = c.card.meta.root[:12] if c.card.meta.root else "unsealed"
        out.append((c.letter, f"{c.head}{base}: {label(c.card.meta)}; {c.target}, root {root}"))
    return out


def _cells(s: Sheet, name: str) -> list[Cell]:
    """Per column: its own cell, and its difference from the baseline ("" for the baseline)."""
    return [
        Cell(cell(c.card.metrics[name]), diff_text(s.rows[name][i - 1]) if i else "")
        for i, c in enumerate(s.columns)
    ]


def _heads(s: Sheet) -> list[str]:
    return [f"{c.letter} {c.head}" for c in s.columns]


def _table(s: Sheet) -> str:
    lines = _top(s) + diffs.text_lines(_what(s)) + [""]
    lines += [f"{k} = {v}" for k, v in _legend(s)]
    lines += [INTERVALS, f"Δ: {METHOD}", ""]
    lines += table_lines(_heads(s), {n: _cells(s, n) for n in s.rows}, s.extra, s.baseline.letter)
    return "\n".join(lines) + "\n"


def _markdown(s: Sheet) -> str:
    # A run's recorded names (its agent, its platform's options) are shown, never rendered.
    lines = [f"**{inert_md(x)}**" for x in _top(s)] + [""] + diffs.markdown_lines(_what(s))
    lines += [f"- **{k}**: {inert_md(v)}" for k, v in _legend(s)]
    lines += [f"- {INTERVALS}; Δ: {METHOD}", ""]
    lines += markdown_lines(_heads(s), {n: _cells(s, n) for n in s.rows}, s.extra)
    return "\n".join(lines) + "\n"


def as_json(s: Sheet) -> dict[str, Any]:
    """The sheet as one JSON document: runs by letter, metrics by name then letter."""
    keys = [c.letter.lower() for c in s.columns]
    stood = {k: standing_json([c.card.meta]) for k, c in zip(keys, s.columns, strict=True)}
    metrics: dict[str, Any] = {}
    for name, deltas in s.rows.items():
        per: dict[str, Any] = {}
        for i, (k, c) in enumerate(zip(keys, s.columns, strict=True)):
            per[k] = c.card.metrics[name].as_json()
            if i:
                d = deltas[i - 1]
                per[k]["vs_baseline"] = {
                    "diff": d.diff,
                    "ci_low": d.ci.low if d.ci else None,
                    "ci_high": d.ci.high if d.ci else None,
                    "ci_method": "newcombe",
                }
        metrics[name] = per
    return {
        "baseline": keys[0],
        "runs": {
            k: {
                "target": c.target,
                "head": c.head,
                "label": label(c.card.meta),
                "run_id": c.card.meta.run_id,
                "root": c.card.meta.root,
                "family": c.card.setting("family"),
                "arm": c.card.setting("arm"),
                "planted": c.card.treatment,
                "excluded": c.card.excluded,
                "agent": c.card.meta.agent,
                "model": c.card.meta.model,
                "platform_label": c.card.meta.platform_label,
                "platform_facts": c.card.meta.platform_facts,
                "task_set_hash": c.card.meta.protocol_set_hash,
                **stood[k],
                "completeness": run_completeness(c.card).as_json(),
            }
            for k, c in zip(keys, s.columns, strict=True)
        },
        "differs": list(s.differs),
        "what_differs": diffs.as_json(_what(s)),
        "metrics": metrics,
        "extra": extra_json(keys, s.extra),
    }


def page(s: Sheet) -> str:
    """The sheet as a self-contained HTML page (no scripts, nothing fetched)."""
    esc = html.escape
    heads = "".join(f"<th>{esc(c.letter)} {esc(c.head)}</th>" for c in s.columns)
    body = "".join(
        f"<tr><td>{esc(name)}</td>"
        + "".join(f"<td>{esc(own)}<br><small>{esc(d)}</small></td>" for own, d in _cells(s, name))
        + "</tr>"
        for name in s.rows
    ) + extra_html(s.extra)
    excluded = [f"{c.letter}: {c.card.excluded}" for c in s.columns if c.card.excluded]
    partial = [f"{c.letter}: {b}" for c in s.columns if (b := run_completeness(c.card).banner())]
    legend = "".join(f"<li><b>{esc(k)}</b>: {esc(v)}</li>" for k, v in _legend(s))
    setup = "".join(f"<li>{esc(d)}</li>" for d in s.differs)
    differs = setup + diffs.html_items(_what(s))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>benchledger compare {esc(", ".join(c.target for c in s.columns))}</title>
<style>
body{{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1300px}}
table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}}
.differs{{background:#eef3fb;border:1px solid #8aa8d8;padding:6px 12px}}
</style></head><body>
<div class="differs"><strong>What differs</strong><ul>{differs}</ul></div>
{html_top_combined([c.card.meta for c in s.columns], [*excluded, *partial])}
<h1>benchledger compare: {len(s.columns)} tasks runs, baseline {esc(s.baseline.letter)}</h1>
<ul>{legend}</ul>
<p>{esc(INTERVALS)}. Δ: {esc(METHOD)}.</p>
<table><tr><th>metric</th>{heads}</tr>{body}</table>
</body></html>
"""


def render(s: Sheet, fmt: str) -> str:
    """The sheet in ``fmt`` (table, markdown, json, html)."""
    if fmt == "json":
        return json.dumps(as_json(s), indent=2, sort_keys=True) + "\n"
    if fmt == "markdown":
        return _markdown(s)
    if fmt == "html":
        return page(s)
    return _table(s)
