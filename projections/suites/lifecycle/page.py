"""The lifecycle scorecard as one HTML page: the headline first, then what the run was, then
the detail (funnel, intervals chart, metrics, per-protocol outcomes with each failure's reason).

Self-contained: no scripts, no fonts, nothing fetched at view time. Hashes show as their
first 12 characters with the full value on hover; the full header sits in a ``<details>``.
"""

from __future__ import annotations

import html
import os
import re
from collections.abc import Sequence
from typing import Final, NamedTuple

from benchledger.projections.card import (
    Decision,
    Metric,
    fmt_frac,
    fmt_interval,
    fmt_num,
    fmt_pct,
    fmt_rate,
    fmt_why,
    html_top,
)
from benchledger.projections.suites.lifecycle import ranks
from benchledger.projections.suites.lifecycle.scorecard import (
    CHECKS,
    DUPLICATED,
    METRICS,
    TEACH_BUDGET_EXHAUSTED,
    Scorecard,
    Unit,
    lifecycle_passed,
)

SHORT: Final = 12  # characters of a hash shown in place (the whole one on hover)
_HASH: Final = re.compile(r"\b[0-9a-f]{32,}\b")
_DESCRIPTIONS: Final = (
    {m.name: m.description for m in METRICS}
    | {"pass_k": "every attempt of a protocol passed the full lifecycle (unbiased pass^k)"}
    | dict(ranks.DESCRIPTIONS)
)
# Checks whose good outcome is ``false``, by the name of that outcome: the per-protocol
# table heads their columns so, and a fully passing unit shows no ✗.
GOOD_WHEN_FALSE: Final = {
    TEACH_BUDGET_EXHAUSTED: "within teach budget",
    DUPLICATED: "no duplicate",
}


def _decides_pass(check: str) -> bool:
    """Whether the check's bad outcome alone fails an otherwise passing unit."""
    good = {c: c not in GOOD_WHEN_FALSE for c in CHECKS}
    return not lifecycle_passed(lambda c: (not good[c]) if c == check else good[c])


# The checks that decide a unit's pass show ✓ or ✗; the others are diagnostics (what the
# agent did, e.g. whether the fact surfaced in a tool result), shown as yes or no, so a
# passing unit never carries a ✗.
DECIDES_PASS: Final = frozenset(c for c in CHECKS if _decides_pass(c))


class Prose(NamedTuple):
    """What the page says in the words every format shares (``report`` writes them)."""

    header: list[tuple[str, str]]  # report.header_lines: the full header, hashes whole
    banners: list[str]  # one per unsealed or incomplete run
    intervals: str  # how the 95% intervals were computed
    notes: dict[str, str]  # metric name -> its note (label, interval method, withheld)
    usage: list[tuple[str, str]]  # cost, duration, ... for the headline ([] if unknown)


def metrics(card: Scorecard) -> list[Metric]:
    """The card's metrics in report order, pass^k, then the retrieval metrics."""
    rates = [card.metrics[s.name] for s in METRICS] + [card.metrics["pass_k"]]
    return rates + [card.metrics[n] for n in ranks.NAMES]


def short_hashes(text: str) -> str:
    """``text`` escaped, each hash in it shortened to 12 characters with the whole on hover."""
    out, at = [], 0
    for m in _HASH.finditer(text):
        full = m.group(0)
        out.append(html.escape(text[at : m.start()]))
        out.append(f'<span class="hash" title="{full}">{full[:SHORT]}…</span>')
        at = m.end()
    return "".join(out) + html.escape(text[at:])


def _good(check: str, v: bool) -> bool:
    return v is not (check in GOOD_WHEN_FALSE)


def _check_name(check: str) -> str:
    """A check named for its good outcome (so ✓ always reads as good)."""
    return GOOD_WHEN_FALSE.get(check, check.replace("_", " "))


def _why(d: Decision) -> str:
    """A decision's hover text: its verdict, the grader's reason, what was said and expected."""
    parts = [f"{d.check} = {str(d.verdict).lower()}: {d.reason or '(no reason recorded)'}"]
    if d.answer:
        answer = " ".join(str(d.answer).split())
        parts.append("answer: " + (answer[:197] + "…" if len(answer) > 200 else answer))
    if d.expected not in (None, ""):
        parts.append(f"expected: {d.expected}")
    return "\n".join(parts)


def _failed(u: Unit) -> list[Decision]:
    """The decisions that failed the unit (its decisive checks with the bad outcome)."""
    return [
        d
        for c in CHECKS
        if c in DECIDES_PASS
        and (d := u.decisions.get(c)) is not None
        and d.verdict is not None
        and not _good(c, d.verdict)
    ]


def _fail_text(u: Unit) -> str:
    """Why a graded unit failed, when no decisive check says it (a stage never decided)."""
    missing = [_check_name(c) for c in ("captured", "recall_correct") if u.verdict(c) is None]
    return "no decision for " + ", ".join(missing) if missing else "not every stage passed"


def _bar_chart(card: Scorecard) -> str:
    """Inline SVG scaled to the page: each metric's rate as a dot, its interval as a line."""
    # The retrieval metrics by stage are in the table only (the chart keeps the overall ones).
    shown = [m for m in metrics(card) if "." not in m.name and m.name != ranks.LEAK]
    ms = [m for m in shown if m.den and m.ci is not None]
    lower = {s.name for s in METRICS if not s.higher_is_better}
    values = [
        f"{fmt_pct(m.rate)} ({fmt_num(m.num)}/{m.den})"
        + (", lower is better" if m.name in lower else "")
        for m in ms
    ]
    # SVG text never wraps or grows its box, so the margins are sized from the longest
    # label at a generous 8 px per 12 px character (the render test measures the result);
    # the viewBox scales the drawing down to the window, never above its own size.
    left = 24 + 8 * max((len(m.name) for m in ms), default=0)
    right = 24 + 8 * max((len(v) for v in values), default=0)
    row, width = 24, 400
    total, height = left + width + right, row * len(ms) + 36
    parts = [
        f'<svg viewBox="0 0 {total} {height}" width="100%" style="max-width:{total}px" '
        'role="img" aria-label="metric rates with 95% intervals">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = left + tick * width
        parts.append(f'<line x1="{x}" y1="10" x2="{x}" y2="{height - 20}" class="grid"/>')
        parts.append(f'<text x="{x}" y="{height - 4}" class="tick">{tick:.0%}</text>')
    for i, (m, value) in enumerate(zip(ms, values, strict=True)):
        y = 22 + i * row
        assert m.ci is not None
        lo, hi, r = (left + v * width for v in (m.ci.low, m.ci.high, m.rate or 0))
        parts.append(
            f"<g><title>{html.escape(m.name)}: {value}, 95% CI "
            f"{fmt_interval(m.ci.low, m.ci.high)}</title>"
        )
        parts.append(
            f'<text x="{left - 10}" y="{y + 4}" class="label">{html.escape(m.name)}</text>'
        )
        parts.append(f'<line x1="{lo:.1f}" y1="{y}" x2="{hi:.1f}" y2="{y}" class="ci"/>')
        parts.append(f'<circle cx="{r:.1f}" cy="{y}" r="4.5" class="dot"/>')
        parts.append(f'<text x="{left + width + 12}" y="{y + 4}" class="value">{value}</text></g>')
    parts.append("</svg>")
    return "".join(parts)


def _funnel(card: Scorecard) -> str:
    graded = [u for u in card.units if u.graded]
    counts = [
        ("teach", len(graded)),
        ("capture", sum(u.verdict("captured") is True for u in graded)),
        ("recall", sum(u.verdict("recall_correct") is True for u in graded)),
        ("promote", sum(u.verdict("promoted") is True for u in graded)),
        ("transfer", sum(u.verdict("transfer_correct") is True for u in graded)),
        ("update (landed)", sum(u.verdict("update_captured") is True for u in graded)),
        ("update (correct)", sum(u.verdict("update_correct") is True for u in graded)),
        ("abstain", sum(u.verdict("abstain_correct") is True for u in graded)),
    ]
    top = max(1, counts[0][1])
    rows = []
    for name, n in counts:
        w = 360 * n / top
        rows.append(
            f'<div class="frow"><span class="fname">{name}</span>'
            f'<span class="fbar" style="width:{w:.0f}px"></span><span>{n}</span></div>'
        )
    return "".join(rows)


def _check_head(check: str) -> str:
    """A check's column, named for its good outcome (so ✓ always reads as good)."""
    kind = "" if check in DECIDES_PASS else ' class="diag"'
    return f'<th{kind} title="{html.escape(check)}">{html.escape(_check_name(check))}</th>'


def _mark(check: str, d: Decision | None, tag: str = "td") -> str:
    """✓/✗ (a check that decides the pass) or yes/no (a diagnostic) for the good/bad outcome;
    a ✗ carries the grader's reason on hover."""
    if d is None or d.verdict is None:
        title = "" if d is None else f' title="{html.escape(_why(d))}"'
        return f'<{tag} class="na"{title}>–</{tag}>'
    good = _good(check, d.verdict)
    title = html.escape(_why(d))
    if check not in DECIDES_PASS:
        word, cls = ("yes", "diag") if good else ("no", "diag no")
        return f'<{tag} class="{cls}" title="{title}">{word}</{tag}>'
    cls, sign = ("ok", "✓") if good else ("bad", "✗")
    return f'<{tag} class="{cls}" title="{title}">{sign}</{tag}>'


def _run_of(unit: Unit, card: Scorecard) -> str:
    """The run a unit came from (its stream is ``RUN/<protocol>/<attempt>``)."""
    for r in card.runs:
        if unit.stream.startswith(r.run_id + "/"):
            return r.run_id
    return unit.stream.rsplit("/", 2)[0]


def _status(unit: Unit) -> str:
    if unit.error:
        return f'<td class="bad" title="{html.escape(unit.error)}">infra error</td>'
    return '<td class="ok">pass</td>' if unit.passed() else '<td class="bad">fail</td>'


def _metric_row(m: Metric, prose: Prose) -> str:
    esc = html.escape
    extra = prose.notes.get(m.name, "")
    note = esc(_DESCRIPTIONS.get(m.name, "")) + (" — " + esc(extra) if extra else "")
    note = re.sub(r"`([^`]+)`", r"<code>\1</code>", note)  # the labels' Markdown code spans
    ci = fmt_interval(m.ci.low, m.ci.high) if m.ci is not None else ""
    return (
        f'<tr><td class="name">{esc(m.name)}</td><td class="num">{fmt_frac(m)}</td>'
        f'<td class="num">{ranks.display(m) if ranks.is_retrieval(m.name) else fmt_rate(m)}'
        f'</td><td class="num"><span class="interval">{ci}</span></td><td>{note}</td></tr>'
    )


def _head_value(key: str, value: str, card: Scorecard) -> str:
    """A header value for HTML: merged runs and their roots one per line."""
    if key == "runs":
        return "<br>".join(html.escape(r.run_id) for r in card.runs)
    if key == "run roots":
        return "<br>".join(html.escape(r.root or "(unsealed)") for r in card.runs)
    return html.escape(value)


def _figure(label: str, value: str, sub: str = "") -> str:
    sub_html = f'<div class="fsub">{sub}</div>' if sub else ""
    return (
        f'<div class="figure"><div class="flabel">{label}</div>'
        f'<div class="fvalue">{html.escape(value)}</div>{sub_html}</div>'
    )


def _headline(card: Scorecard, prose: Prose) -> str:
    """The first screen's figures: full-lifecycle pass rate and pass^k, then cost and time."""
    figures = []
    for m, label, of in (
        (card.metrics["full_lifecycle"], "full lifecycle pass", "units"),
        (card.metrics["pass_k"], f"pass^{card.k_used}", "protocols"),
    ):
        ci = f"95% CI {fmt_interval(m.ci.low, m.ci.high)} · " if m.ci is not None else ""
        figures.append(
            _figure(
                html.escape(label),
                fmt_rate(m),
                html.escape(fmt_why(m) or f"{ci}{fmt_num(m.num)}/{m.den} {of}"),
            )
        )
    figures += [_figure(html.escape(k), v) for k, v in prose.usage]
    return f'<section class="headline">{"".join(figures)}</section>'


def _set_name(card: Scorecard) -> str:
    """The protocol set by its folder's name (when the run recorded it), and its short hash."""
    path = card.meta.protocols_path  # the run's record, or the folder an import found
    name = html.escape(os.path.basename(path.rstrip("/"))) if path else ""
    digest = card.meta.protocol_set_hash
    if not digest:
        return name or "(not recorded)"
    hashed = short_hashes(digest) if _HASH.fullmatch(digest) else html.escape(digest)
    return f"{name} ({hashed})" if name else hashed


_CAVEATS: Final = ("subset", "withheld", "n/a stages")  # header rows the headline repeats


def _what(card: Scorecard, prose: Prose) -> str:
    """What the run was: runs (short roots), agent and model, platform, protocol set, k, units."""
    header = dict(prose.header)
    m = card.meta
    runs = "<br>".join(
        f"{html.escape(r.run_id)} · "
        + (f"root {short_hashes(r.root)}" if r.root else '<span class="bad">unsealed</span>')
        for r in card.runs
    )
    rows = [
        ("run" if len(card.runs) == 1 else "runs", runs),
        (
            "agent",
            html.escape(m.agent or "-") + (f" · model {html.escape(m.model)}" * bool(m.model)),
        ),
        ("platform", html.escape(m.platform_label)),
        ("platform options", html.escape(header.get("platform options", ""))),
        ("protocol set", _set_name(card)),
        ("k", html.escape(header.get("k", str(card.k)))),
        ("units", html.escape(header.get("units", ""))),
        *[(k, short_hashes(header[k])) for k in _CAVEATS if k in header],
    ]
    return '<dl class="what">' + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _slots(units: Sequence[Unit], card: Scorecard) -> list[tuple[str, int]]:
    """The attempt columns of a grouped table: (run, attempt) in run order, then attempt."""
    order = {r.run_id: i for i, r in enumerate(card.runs)}
    seen = {(_run_of(u, card), u.attempt) for u in units}
    return sorted(seen, key=lambda s: (order.get(s[0], len(order)), s[0], s[1]))


def _slot_head(slot: tuple[str, int], slots: Sequence[tuple[str, int]], merged: bool) -> str:
    run, attempt = slot
    if not merged:
        return f"attempt {attempt}"
    several = sum(r == run for r, _ in slots) > 1
    return html.escape(run) + (f" #{attempt}" if several else "")


def _attempt_cell(u: Unit | None) -> str:
    """One attempt of a protocol: ✓, or ✗ naming its first failed check (reasons on hover)."""
    if u is None:
        return '<td class="att na">–</td>'
    if u.error:
        return f'<td class="att bad" title="{html.escape(u.error)}">infra error</td>'
    if u.passed():
        return '<td class="att ok" title="passed the full lifecycle">✓</td>'
    failed = _failed(u)
    title = html.escape("\n".join(_why(d) for d in failed) or _fail_text(u))
    what = _check_name(failed[0].check) if failed else "fail"
    more = f" +{len(failed) - 1}" if len(failed) > 1 else ""
    fails = f'<span class="fails">{html.escape(what)}{more}</span>'
    return f'<td class="att bad" title="{title}">✗ {fails}</td>'


def _reasons(attempts: Sequence[tuple[str, Unit]]) -> list[str]:
    """Each failure of a protocol's attempts, grouped by check and reason, as visible lines."""
    found: dict[tuple[str, str], list[str]] = {}
    for label, u in attempts:
        if u.error:
            found.setdefault(("infra error", u.error), []).append(label)
        elif not u.passed():
            failed = [(_check_name(d.check), d.reason or "(no reason)") for d in _failed(u)]
            for key in failed or [("fail", _fail_text(u))]:
                found.setdefault(key, []).append(label)
    return [
        f'<span class="reason">✗ <b>{html.escape(what)}</b>'
        + (f" ({html.escape(', '.join(labels))})" if len(attempts) > 1 else "")
        + f": {html.escape(why)}</span>"
        for (what, why), labels in found.items()
    ]


def _single_rows(card: Scorecard, shown: Sequence[str]) -> tuple[str, list[str]]:
    """k=1: one row per protocol, one column per check; a failed unit's reasons below it."""
    merged = len(card.runs) > 1
    heads = "<th>protocol</th>" + ("<th>run</th>" if merged else "")
    heads += "".join(_check_head(c) for c in shown) + "<th>unit</th>"
    span = 2 + len(shown) + merged
    rows = []
    for pid, units in card.per_protocol().items():
        for u in units:
            run = f'<td class="name">{html.escape(_run_of(u, card))}</td>' if merged else ""
            cells = "".join(_mark(c, u.decisions.get(c)) for c in shown)
            rows.append(f'<tr class="unit"><td class="name">{html.escape(pid)}</td>{run}'
                        f"{cells}{_status(u)}</tr>")  # fmt: skip
            if not u.passed():
                why = " ".join(_reasons([("", u)]))
                rows.append(f'<tr class="more"><td class="why" colspan="{span}">{why}</td></tr>')
    return heads, rows


def _grouped_rows(card: Scorecard, shown: Sequence[str]) -> tuple[str, list[str]]:
    """k>1: one row per protocol, one cell per attempt; the per-check detail in a details."""
    merged = len(card.runs) > 1
    slots = _slots(card.units, card)
    labels = [_slot_head(s, slots, merged) for s in slots]
    heads = (
        "<th>protocol</th>"
        + "".join(f"<th>{x}</th>" for x in labels)
        + '<th class="name">passed</th>'
    )
    rows = []
    for pid, units in card.per_protocol().items():
        by_slot = {(_run_of(u, card), u.attempt): u for u in units}
        cells = "".join(_attempt_cell(by_slot.get(s)) for s in slots)
        passed = sum(u.passed() for u in units)
        rows.append(
            f'<tr class="unit"><td class="name">{html.escape(pid)}</td>{cells}'
            f'<td class="num">{passed}/{len(units)}</td></tr>'
        )
        attempts = [(x, by_slot[s]) for x, s in zip(labels, slots, strict=True) if s in by_slot]
        reasons = _reasons(attempts)
        summary = (
            f'<span class="reasons">{"".join(reasons)}</span>'
            if reasons
            else '<span class="quiet">per-check detail</span>'
        )
        check_rows = "".join(
            f"<tr>{_check_head(c)}"
            + "".join(_mark(c, u.decisions.get(c)) for _, u in attempts)
            + "</tr>"
            for c in shown
        )
        table = (
            '<table class="checks"><tr><th>check</th>'
            + "".join(f"<th>{x}</th>" for x, _ in attempts)
            + f"</tr>{check_rows}</table>"
        )
        rows.append(
            f'<tr class="more"><td class="why" colspan="{len(slots) + 2}"><details>'
            f'<summary><span class="tw">▸</span>{summary}</summary>{table}</details></td></tr>'
        )
    return heads, rows


def _outcomes(card: Scorecard) -> str:
    shown = [c for c in CHECKS if any(c in u.decisions for u in card.units)]
    grouped = any(len(us) > 1 for us in card.per_protocol().values())
    heads, rows = (_grouped_rows if grouped else _single_rows)(card, shown)
    negative = "; ".join(
        f"<em>{html.escape(name)}</em> is {html.escape(check)} = false"
        for check, name in GOOD_WHEN_FALSE.items()
        if check in shown
    )
    layout = (
        "One row per protocol, one cell per attempt: ✓ passed the full lifecycle, ✗ failed "
        "(naming its first failed check; every failure's reason is listed under the row; "
        "open it for each check of each attempt). "
        if grouped
        else "Under a failed unit, each failed check's reason (the grader's). "
    )
    legend = (
        layout + "Checks that decide a unit's pass: ✓ passed, ✗ failed. Diagnostics (grey "
        "heads) say what the agent did, yes or no, and decide nothing. – not applicable. "
        "Hover a mark for the grader's reason."
        + (f" Checks are named for the good outcome: {negative}." if negative else "")
    )
    cls = "grouped" if grouped else "single"
    return (
        f"<p>{legend}</p>\n"
        f'<div class="scroll"><table class="full outcomes {cls}"><tr>{heads}</tr>'
        f"{''.join(rows)}</table></div>"
    )


_STYLE: Final = """
body{font:14px/1.45 system-ui,sans-serif;margin:24px auto;padding:0 24px;color:#222;
max-width:1400px}
h1{font-size:22px;margin:.4em 0}h2{font-size:18px;margin:1.2em 0 .4em}
table{border-collapse:collapse;margin:.6em 0 1.2em}
td,th{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}
th{background:#f4f4f4}.head th{white-space:nowrap}.head code{overflow-wrap:anywhere}
.full{width:100%}.scroll{overflow-x:auto}
.name,.num,.interval{white-space:nowrap}.num{text-align:right}
.headline{display:flex;flex-wrap:wrap;gap:12px;margin:.6em 0}
.figure{border:1px solid #ccc;border-radius:6px;padding:8px 16px;min-width:180px}
.flabel{font-size:13px;color:#555}.fvalue{font-size:30px;font-weight:bold;line-height:1.2}
.fsub{font-size:13px;color:#444;white-space:nowrap}
dl.what{display:grid;grid-template-columns:max-content 1fr;gap:2px 14px;margin:.6em 0}
dl.what dt{font-weight:bold;color:#444}dl.what dd{margin:0;overflow-wrap:anywhere}
.hash{font-family:monospace;border-bottom:1px dotted #888;cursor:help}
details.run>summary{cursor:pointer;color:#345}
.outcomes td{text-align:center;vertical-align:middle}.outcomes td.name{text-align:left}
.outcomes th{font-size:12px;text-align:center;vertical-align:bottom}
.outcomes.grouped th{overflow-wrap:anywhere}
@media (max-width:1100px){.outcomes.single th:not(:first-child):not(:last-child){
writing-mode:vertical-rl;transform:rotate(180deg);text-align:left;white-space:nowrap}
.outcomes.single td,.outcomes.single th{padding:3px 5px}}
.outcomes th:first-child{text-align:left}.outcomes tr.unit td:last-child{white-space:nowrap}
.outcomes.grouped tr.unit td{white-space:nowrap}.fails{font-size:12px;font-weight:normal}
@media (max-width:1100px){.outcomes.grouped .fails{display:block;white-space:normal}}
.outcomes td.why{text-align:left;font-size:12px;color:#555;border-top:none;padding:1px 8px 4px}
.reason{display:block}.reason b{color:#c00}.quiet{color:#888}
td.why summary{cursor:pointer;list-style:none;display:flex;gap:6px}
td.why summary::-webkit-details-marker{display:none}td.why details[open] summary{margin-bottom:4px}
.tw{flex:none;color:#666}td.why details[open] .tw{transform:rotate(90deg)}
table.checks{margin:2px 0 6px}table.checks th,table.checks td{font-size:12px;padding:1px 6px}
.grid{stroke:#ddd}.tick,.value,.label{font-size:12px}.tick{text-anchor:middle}
.label{text-anchor:end}.ci{stroke:#3465a4;stroke-width:3}.dot{fill:#a40000}
.frow{display:flex;align-items:center;gap:8px;margin:3px 0}
.fname{flex:none;width:140px;white-space:nowrap}
.fbar{display:inline-block;height:14px;background:#3465a4}
.ok{color:#1a7f37}.bad{color:#c00;font-weight:bold}.na{color:#999}
td.diag{color:#777;font-size:12px}td.diag.no{color:#a15c00}th.diag{color:#666;font-weight:normal}
"""


def page(card: Scorecard, prose: Prose) -> str:
    """A self-contained HTML page: no scripts, no fonts, nothing fetched at view time."""
    esc = html.escape
    head = "".join(
        f"<tr><th>{esc(k)}</th><td><code>{_head_value(k, v, card)}</code></td></tr>"
        for k, v in prose.header
    )
    metric_rows = "".join(_metric_row(m, prose) for m in metrics(card))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>benchledger scorecard {esc(card.meta.run_id)}</title>
<style>{_STYLE}</style></head><body>
{html_top(card.runs, prose.banners)}<h1>benchledger lifecycle scorecard</h1>
{_headline(card, prose)}
{_what(card, prose)}
<details class="run"><summary>Run details: full hashes, verification, tokens, intervals</summary>
<table class="head">{head}</table></details>
<h2>Rates with 95% intervals</h2><p>{esc(prose.intervals)}</p>
{_bar_chart(card)}
<h2>Per-protocol outcomes</h2>
{_outcomes(card)}
<h2>Lifecycle funnel</h2>{_funnel(card)}
<h2>Metrics</h2>
<div class="scroll"><table class="full metrics"><tr><th>metric</th><th>num/den</th><th>rate</th>
<th>95% CI</th><th>definition</th></tr>
{metric_rows}</table></div>
</body></html>
"""
