"""Runs side by side: one column per run, one row per metric, each against a baseline.

Runs are comparable when their protocol sets have the same content (``identity``: the
recorded content id, else the recorded set hash); agent, model, sampling, platform and
its version, k and the subset may differ, and ``differences`` names each one that does.
Every non-baseline cell carries its paired difference against the baseline
(``compare.compare``: protocols as pairs at k = 1, a protocol-cluster bootstrap at k > 1);
the protocols on which the runs disagree are listed after the metrics.
"""

from __future__ import annotations

import html
import json
import os
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger.inert import inert, inert_md
from benchledger.projections import differences as diffs
from benchledger.projections.card import (
    RunMeta,
    card_runs,
    fmt_interval,
    fmt_num,
    fmt_pct,
    fmt_signed,
    fmt_why,
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
from benchledger.projections.source import Completeness
from benchledger.projections.suites.lifecycle import ranks
from benchledger.projections.suites.lifecycle.compare import METRICS, Incomparable, Row, compare
from benchledger.projections.suites.lifecycle.page import DECIDES_PASS, GOOD_WHEN_FALSE
from benchledger.projections.suites.lifecycle.report import not_applicable, run_completeness
from benchledger.projections.suites.lifecycle.scorecard import CHECKS, Scorecard, Unit
from benchledger.projections.usage_view import usage_cells

METRIC_ORDER: Final = (
    "full_lifecycle",
    "pass_k",
    *(s.name for s in METRICS if s.name != "full_lifecycle"),
    *(n for n in ranks.NAMES if n != ranks.LEAK),  # retrieval: overall, then by stage
)
DECIDES_PASS_ORDER: Final = tuple(c for c in CHECKS if c in DECIDES_PASS)


class Column(NamedTuple):
    """One run (or several merged as passes) as a column: its letter, name and card."""

    letter: str
    target: str  # what the user named it by (run id, bundle, or A+B merged passes)
    card: Scorecard
    label: str  # agent/model @ platform


class Matrix(NamedTuple):
    """The compared columns (the baseline first), per metric each column's row against it."""

    columns: tuple[Column, ...]
    rows: dict[str, tuple[Row, ...]]  # metric -> one row per non-baseline column
    differs: tuple[str, ...]
    disagree: tuple[tuple[str, tuple[str, ...]], ...]  # protocol, each column's passes
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # cost/latency rows, per column
    what: diffs.Differences | None = None  # what the output leads with

    @property
    def baseline(self) -> Column:
        return self.columns[0]


def identity(meta: RunMeta) -> str:
    """The protocol set's content identity: the recorded content id, else its set hash."""
    return meta.protocol_set_id or meta.protocol_set_hash


def label(meta: RunMeta) -> str:
    """``agent (model) @ platform version``; the model only when the agent does not name it."""
    who = meta.agent or "-"
    if who.startswith("recorded:"):  # a recorded run's folder: its name, not its whole path
        who = "recorded:" + os.path.basename(who.removeprefix("recorded:").rstrip("/"))
    if meta.model and meta.model not in who:
        who += f" ({meta.model})"
    where = meta.platform_label
    return inert(f"{who} @ {where}", value=True)  # the run's own words: one line, inert


def same_set(cards: Sequence[Scorecard], targets: Sequence[str]) -> None:
    """Raise Incomparable unless every card's protocol set has the baseline's content."""
    first = cards[0].meta
    for card, target in zip(cards[1:], targets[1:], strict=True):
        a, b = identity(first), identity(card.meta)
        if a != b:
            raise Incomparable(
                f"runs {targets[0]} and {target} differ in protocol set: {a[:12] or '?'} vs "
                f"{b[:12] or '?'} (content identity); runs are compared on the same protocols"
            )


def _sampling(meta: RunMeta) -> str:
    return ", ".join(f"{k}={v}" for k, v in sorted(meta.sampling.items())) or "-"


_FIELDS: Final[tuple[tuple[str, Callable[[Scorecard], str]], ...]] = (
    ("agent", lambda c: c.meta.agent or "-"),
    ("model", lambda c: c.meta.model or "-"),
    ("sampling", lambda c: _sampling(c.meta)),
    ("platform", lambda c: c.meta.platform_label),
    ("k", lambda c: str(c.k)),
    ("subset", lambda c: c.meta.subset or "whole set"),
)


def differences(columns: Sequence[Column]) -> list[str]:
    """Each field that differs between the columns, with every column's value."""
    out = []
    for name, get in _FIELDS:
        values = [get(c.card) for c in columns]
        if len(set(values)) > 1:
            out.append(
                f"{name}: "
                + ", ".join(f"{c.letter} = {v}" for c, v in zip(columns, values, strict=True))
            )
    return out


def _failed(unit: Unit) -> str:
    """Why a unit did not pass: its error, else the first deciding check that failed."""
    if unit.error:
        return "error"
    failed = [c for c in DECIDES_PASS_ORDER if unit.verdict(c) is (c in GOOD_WHEN_FALSE)]
    return f"fail ({failed[0]})" if failed else "fail"


def _passes(units: Sequence[Unit]) -> str:
    if len(units) == 1:
        return "pass" if units[0].passed() else _failed(units[0])
    return f"{sum(u.passed() for u in units)}/{len(units)}"


def disagreements(cards: Sequence[Scorecard]) -> list[tuple[str, tuple[str, ...]]]:
    """The protocols whose pass rate differs between the cards, each card's passes."""
    per = [c.per_protocol() for c in cards]
    out = []
    for pid in sorted(set().union(*per)):
        groups = [p.get(pid, []) for p in per]
        rates = {(sum(u.passed() for u in g) / len(g)) if g else None for g in groups}
        if len(rates) > 1:
            out.append((pid, tuple(_passes(g) if g else "-" for g in groups)))
    return out


def matrix(cards: Sequence[Scorecard], targets: Sequence[str]) -> Matrix:
    """The columns (``cards[0]`` the baseline) compared; Incomparable on another set."""
    if len(cards) < 2:
        raise Incomparable("compare needs at least two runs")
    same_set(cards, targets)
    labels = [label(c.meta) for c in cards]
    columns = tuple(
        Column(letter, t, c, lab)
        for letter, t, c, lab in zip(letters(len(cards)), targets, cards, labels, strict=True)
    )
    names = [n for n in METRIC_ORDER if n in cards[0].metrics]
    pairs = [compare(cards[0], c, names) for c in cards[1:]]
    rows = {n: tuple(p[i] for p in pairs) for i, n in enumerate(names)}
    extra = tuple(usage_cells([(c.usage, c.priced(), c.passed_units) for c in cards]))
    what = diffs.what_differs(
        [c.letter for c in columns],
        [_metric_fact(columns, n, rs) for n, rs in rows.items()],
        [*diffs.run_facts(cards), _not_applicable_fact(cards)],
    )
    return Matrix(
        columns, rows, tuple(differences(columns)), tuple(disagreements(cards)), extra, what
    )


def _metric_fact(columns: Sequence[Column], name: str, rows: Sequence[Row]) -> diffs.Fact:
    """A metric as the lead shows it: each column's rate, judged equal by rate (3/3 and
    6/6 agree), and each other column's paired difference, resolved or not."""
    ms = [c.card.metrics[name] for c in columns]
    notes = [
        f"{c.letter}: {_diff(r)}, "
        + ("resolved" if _direction(r) != "flat" else "not resolved at 95%")
        for c, m, r in zip(columns[1:], ms[1:], rows, strict=True)
        if m.rate != ms[0].rate
    ]
    rates = [(m.num, m.den) for m in ms]
    return diffs.rate_fact(name, rates, "; ".join(notes), mean=name.startswith("mrr"))


def _not_applicable_fact(cards: Sequence[Scorecard]) -> diffs.Fact:
    """The stages each run's platform could not run, and its recorded reason."""
    stages = [
        "; ".join(f"{stage} in {n} unit(s): {why}" for (stage, why), n in found.items()) or "none"
        for found in (not_applicable(c) for c in cards)
    ]
    return diffs.Fact(diffs.NOT_APPLICABLE, tuple(stages))


# -- rendering ---------------------------------------------------------------------------


def _rate(num: float, den: int) -> str:
    return f"{fmt_num(num)}/{den} {fmt_pct(num / den) if den else 'n/a'}"


def _own(m: Matrix, name: str, i: int) -> tuple[str, str]:
    """Column ``i``'s own rate and interval for ``name``."""
    metric = m.columns[i].card.metrics[name]
    if metric.not_measured:
        return fmt_why(metric), ""
    ci = fmt_interval(metric.ci.low, metric.ci.high) if metric.ci is not None else ""
    if name.startswith("mrr"):  # a mean, not a share: shown as numbers, its interval too
        ci = f"[{metric.ci.low:.3f}, {metric.ci.high:.3f}]" if metric.ci is not None else ""
        return f"{ranks.display(metric)} ({metric.den} episodes)", ci
    return _rate(metric.num, metric.den), ci


def _diff_parts(r: Row) -> tuple[str, ...]:
    """The paired difference against the baseline: estimate, interval, resolution, McNemar."""
    if r.ci is None:
        return ("Δ skipped", f"({r.note or 'empty denominator'})")
    parts = [f"Δ {fmt_signed(r.diff or 0)}", f"[{fmt_signed(r.ci.low)}, {fmt_signed(r.ci.high)}]"]
    if r.resolution is not None:
        parts.append(f"±{r.resolution:.3f}")
    if r.mcnemar_p is not None:
        parts.append(f"p={r.mcnemar_p:.3g}")
    return tuple(parts)


def _diff(r: Row) -> str:
    return " ".join(_diff_parts(r))


def _progress(m: Matrix) -> list[Completeness]:
    return [c for col in m.columns for c in run_completeness(col.card)]


def _runs(m: Matrix) -> list[RunMeta]:
    return [r for col in m.columns for r in col.card.runs]


def _methods(m: Matrix) -> str:
    found = sorted({r.method for rows in m.rows.values() for r in rows if r.method})
    return "; ".join(found) or "-"


def _legend(m: Matrix) -> list[tuple[str, str]]:
    out = []
    for col in m.columns:
        roots = ", ".join((r.root[:12] if r.root else "unsealed") for r in col.card.runs)
        base = " (baseline)" if col is m.baseline else ""
        out.append((col.letter, f"{col.label}{base}: {col.target}, root {roots}"))
    return out


def _cells(m: Matrix) -> dict[str, list[Cell]]:
    """Per metric, each column's own rate and interval and its difference from the baseline."""
    out = {}
    for name, rows in m.rows.items():
        own = [" ".join(_own(m, name, i)).strip() for i in range(len(m.columns))]
        out[name] = [Cell(o, _diff(rows[i - 1]) if i else "") for i, o in enumerate(own)]
    return out


def _notes(m: Matrix) -> list[str]:
    out = []
    for name, rows in m.rows.items():
        for col, r in zip(m.columns[1:], rows, strict=True):
            if r.ci is not None and r.note:
                out.append(f"{name} {col.letter}: {r.note}")
    return out


def _top(m: Matrix) -> list[str]:
    """Partial-run banners, each run's standing, then what differs: the first lines."""
    lines = [x for x in (c.banner() for c in _progress(m)) if x]
    lines += standing_lines(card_runs(_runs(m)), named=True)
    return lines + [f"differs: {d}" for d in m.differs]


def _what(m: Matrix) -> diffs.Differences:
    assert m.what is not None  # matrix() always sets it
    return m.what


def _table(m: Matrix) -> str:
    lines = _top(m) + diffs.text_lines(_what(m)) + [""]
    lines += [f"{letter} = {text}" for letter, text in _legend(m)]
    lines += [
        f"verified {c.letter}: {r.verified}" for c in m.columns for r in c.card.runs if r.verified
    ]
    lines += [f"intervals: 95%, {_methods(m)}", ""]
    heads = [c.letter for c in m.columns]
    lines += table_lines(heads, _cells(m), m.extra, m.baseline.letter)
    lines += _disagree_text(m)
    notes = _notes(m)
    if notes:
        lines += ["", "notes:", *(f"  {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def _disagree_text(m: Matrix) -> list[str]:
    if not m.disagree:
        return ["", "the runs agree on every protocol's full-lifecycle pass"]
    width = max(len(p) for p, _ in m.disagree) + 2
    cols = [max(len(c.letter), *(len(v[i]) for _, v in m.disagree)) + 2
            for i, c in enumerate(m.columns)]  # fmt: skip
    head = "".join(c.letter.ljust(w) for c, w in zip(m.columns, cols, strict=True)).rstrip()
    out = ["", f"protocols on which the runs disagree ({len(m.disagree)}; full lifecycle passes):"]
    out.append(f"  {'protocol'.ljust(width)}{head}")
    for pid, values in m.disagree:
        cells = "".join(v.ljust(w) for v, w in zip(values, cols, strict=True))
        out.append(f"  {pid.ljust(width)}{cells}".rstrip())
    return out


def _markdown(m: Matrix) -> str:
    # A run's recorded names (its agent, its platform's options) are shown, never rendered.
    lines = [f"**{inert_md(x)}**" for x in _top(m)] + [""]
    lines += diffs.markdown_lines(_what(m))
    lines += [f"- **{letter}**: {inert_md(text)}" for letter, text in _legend(m)]
    lines += [
        f"- **verified {c.letter}**: {r.verified}"
        for c in m.columns
        for r in c.card.runs
        if r.verified
    ]
    lines += [f"- **intervals**: 95%, {_methods(m)}", ""]
    lines += markdown_lines([c.letter for c in m.columns], _cells(m), m.extra)
    if m.disagree:
        lines += ["", f"Protocols on which the runs disagree ({len(m.disagree)}):", ""]
        lines.append("| protocol | " + " | ".join(c.letter for c in m.columns) + " |")
        lines.append("| --- |" + " --- |" * len(m.columns))
        lines += [f"| {pid} | " + " | ".join(v) + " |" for pid, v in m.disagree]
    notes = _notes(m)
    if notes:
        lines += ["", *(f"- {n}" for n in notes)]
    return "\n".join(lines) + "\n"


def _row_json(r: Row) -> dict[str, Any]:
    return {
        "diff": r.diff,
        "ci_low": r.ci.low if r.ci else None,
        "ci_high": r.ci.high if r.ci else None,
        "ci_method": r.method or None,
        "pairs": r.pairs,
        "resolution": r.resolution,
        "mcnemar_p": r.mcnemar_p,
        "note": r.note,
    }


def as_json(m: Matrix) -> dict[str, Any]:
    """The matrix as one JSON document: runs by letter, metrics by name then letter."""
    keys = [c.letter.lower() for c in m.columns]
    found = {
        k: [c.as_json() for c in run_completeness(col.card)]
        for k, col in zip(keys, m.columns, strict=True)
    }
    stood = {k: standing_json(list(col.card.runs)) for k, col in zip(keys, m.columns, strict=True)}
    warning = " | ".join(x for x in (c.banner() for c in _progress(m)) if x)
    metrics: dict[str, Any] = {}
    for name, rows in m.rows.items():
        per: dict[str, Any] = {}
        for i, (k, col) in enumerate(zip(keys, m.columns, strict=True)):
            metric = col.card.metrics[name]
            per[k] = {
                **{
                    key: metric.as_json()[key]
                    for key in ("num", "den", "rate", "ci_low", "ci_high")
                },
                **({"not_measured": metric.not_measured} if metric.not_measured else {}),
                **({"vs_baseline": _row_json(rows[i - 1])} if i else {}),
            }
        metrics[name] = per
    return {
        "baseline": keys[0],
        "runs": {
            k: {
                "target": col.target,
                "label": col.label,
                "run_ids": [r.run_id for r in col.card.runs],
                "roots": [r.root for r in col.card.runs],
                "agent": col.card.meta.agent,
                "model": col.card.meta.model,
                "sampling": col.card.meta.sampling,
                "platform": col.card.meta.platform,
                "platform_version": col.card.meta.platform_version,
                "platform_label": col.card.meta.platform_label,
                "platform_facts": col.card.meta.platform_facts,
                "k": col.card.k,
                "protocol_set": identity(col.card.meta),
                "verified": [r.verified for r in col.card.runs if r.verified],
            }
            for k, col in zip(keys, m.columns, strict=True)
        },
        "completeness": {k: v[0] if len(v) == 1 else v for k, v in found.items()},
        **({"warning": warning} if warning else {}),
        **(
            {
                "authentication": {k: j["authentication"] for k, j in stood.items() if j},
                "origin": {k: j["origin"] for k, j in stood.items() if j},
            }
            if any(stood.values())
            else {}
        ),
        "differs": list(m.differs),
        "what_differs": diffs.as_json(_what(m)),
        "metrics": metrics,
        "extra": extra_json(keys, m.extra),
        "disagree": [{"protocol": pid, **dict(zip(keys, v, strict=True))} for pid, v in m.disagree],
    }


_STYLE: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;padding:0 24px;color:#222;
max-width:1400px}
table{border-collapse:collapse;margin:.6em 0 1.2em;width:100%}
td,th{border:1px solid #ccc;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}td.m{font-weight:600}th small{font-weight:normal}
table.matrix{table-layout:fixed}.matrix td,.matrix th{overflow-wrap:anywhere}
.matrix th:first-child{width:11em}
.rate{white-space:nowrap}.ci{color:#555;font-size:12px;white-space:nowrap}
.d{display:block;font-size:12px}.d span{white-space:nowrap}.d span.note{white-space:normal}
.up{color:#1a7f37}.down{color:#c00}.flat{color:#666}
.legend td:first-child{width:2em;font-weight:bold}.legend td{overflow-wrap:anywhere}
.differs{background:#eef3fb;border:1px solid #8aa8d8;padding:6px 12px}
"""


def _direction(r: Row) -> str:
    if r.ci is None or r.diff is None:
        return "flat"
    better = r.diff if r.higher_is_better else -r.diff
    sure = r.ci.low > 0 or r.ci.high < 0
    return ("up" if better > 0 else "down") if sure else "flat"


def _lead(m: Matrix) -> list[str]:
    """A compare page's box, but the shared section that goes between: how the runs were
    set up differently, then how many protocols the runs disagree on."""
    lead = list(m.differs) or ["setup: agent, model, sampling, platform, k and subset alike"]
    if m.disagree:
        lead.append(f"{len(m.disagree)} protocol(s) on which the runs disagree (listed below)")
    else:
        lead.append("the runs agree on every protocol's full-lifecycle pass")
    return lead


def _breakable(name: str) -> str:
    """A metric name that may wrap after its underscores, never inside a word."""
    return "_<wbr>".join(html.escape(part) for part in name.split("_"))


def page(m: Matrix) -> str:
    """The matrix as a self-contained HTML page (no scripts, nothing fetched)."""
    esc = html.escape
    heads = "".join(f"<th>{esc(c.letter)}<br><small>{esc(c.label)}</small></th>" for c in m.columns)
    body = []
    for name, rows in m.rows.items():
        cells = []
        for i in range(len(m.columns)):
            rate, ci = _own(m, name, i)
            diff = ""
            if i:
                r = rows[i - 1]
                note = ' class="note"' if r.ci is None else ""  # the why wraps; figures do not
                parts = " ".join(
                    f"<span{note if j else ''}>{esc(x)}</span>"
                    for j, x in enumerate(_diff_parts(r))
                )
                diff = f'<span class="d {_direction(r)}" title="{esc(r.method)}">{parts}</span>'

            cells.append(
                f'<td><span class="rate">{esc(rate)}</span> '
                f'<span class="ci">{esc(ci)}</span>{diff}</td>'
            )
        body.append(f'<tr><td class="m">{_breakable(name)}</td>{"".join(cells)}</tr>')
    body.append(extra_html(m.extra, "m"))
    legend = "".join(f"<tr><td>{esc(k)}</td><td>{esc(v)}</td></tr>" for k, v in _legend(m))
    lead, n = _lead(m), max(len(m.differs), 1)  # the setup lines, then the protocols line
    differs = "".join(f"<li>{esc(d)}</li>" for d in lead[:n]) + diffs.html_items(_what(m))
    differs += "".join(f"<li>{esc(d)}</li>" for d in lead[n:])
    disagree = ""
    if m.disagree:
        rows_html = "".join(
            f"<tr><td>{esc(pid)}</td>" + "".join(f"<td>{esc(v)}</td>" for v in values) + "</tr>"
            for pid, values in m.disagree
        )
        letters = "".join(f"<th>{esc(c.letter)}</th>" for c in m.columns)
        disagree = (
            f'<h2 id="disagree">Protocols on which the runs disagree ({len(m.disagree)})</h2>'
            f"<table><tr><th>protocol</th>{letters}</tr>{rows_html}</table>"
        )
    else:
        disagree = "<p>The runs agree on every protocol's full-lifecycle pass.</p>"
    notes = "".join(f"<li>{esc(n)}</li>" for n in _notes(m))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>benchledger compare {esc(", ".join(c.target for c in m.columns))}</title>
<style>{_STYLE}</style></head><body>
<div class="differs"><strong>What differs</strong><ul>{differs}</ul></div>
{html_top_combined(_runs(m), [x for x in (c.banner() for c in _progress(m)) if x])}
<h1>benchledger compare: {len(m.columns)} runs, baseline {esc(m.baseline.letter)}</h1>
<table class="legend">{legend}</table>
<p>95% intervals: {esc(_methods(m))}. Δ is each run minus the baseline, paired by protocol.</p>
<table class="matrix"><tr><th>metric</th>{heads}</tr>{"".join(body)}</table>
{disagree}
{f"<h2>Notes</h2><ul>{notes}</ul>" if notes else ""}
</body></html>
"""


def render(m: Matrix, fmt: str) -> str:
    """The matrix in ``fmt`` (table, markdown, json, html)."""
    if fmt == "json":
        return json.dumps(as_json(m), indent=2, sort_keys=True) + "\n"
    if fmt == "markdown":
        return _markdown(m)
    if fmt == "html":
        return page(m)
    return _table(m)
