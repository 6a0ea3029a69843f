"""Scorecards rendered: a terminal table, a Markdown scorecard, JSON, and one HTML page."""

from __future__ import annotations

import html
import json
from typing import Any, Final

from projections.compare import GateRow, Row
from projections.lifecycle import (
    CHECKS,
    CI_CLUSTER,
    CI_LABELS,
    CI_WILSON,
    METRICS,
    Metric,
    Scorecard,
)

FORMATS: Final = ("table", "markdown", "json", "html")
FUNNEL: Final = (
    ("teach", None),
    ("capture", "capture_rate"),
    ("recall", "personal_recall"),
    ("promote", None),
    ("transfer", "transfer_rate"),
)
_DESCRIPTIONS: Final = {m.name: m.description for m in METRICS} | {
    "pass_k": "every attempt of a protocol passed the full lifecycle (unbiased pass^k)"
}


def fmt_num(x: float, digits: int = 2) -> str:
    """A count as an integer; a fractional numerator (pass^k) with ``digits`` decimals."""
    return str(int(x)) if float(x).is_integer() else f"{x:.{digits}f}"


def _rate(m: Metric) -> str:
    return f"{m.rate:6.1%}" if m.rate is not None else "   n/a"


def _ci(m: Metric) -> str:
    return f"[{m.ci.low:.3f}, {m.ci.high:.3f}]" if m.ci is not None else ""


def _ci_note(m: Metric, card: Scorecard) -> str:
    """The interval's method when it is not the one the header names."""
    default = _interval_method(card)
    return "" if m.ci is None or m.ci_method == default else f"CI: {CI_LABELS[m.ci_method]}"


def _interval_method(card: Scorecard) -> str:
    return CI_CLUSTER if card.clustered else CI_WILSON


def _note(m: Metric, card: Scorecard) -> str:
    return "; ".join(x for x in (m.label, _ci_note(m, card)) if x)


def intervals_line(card: Scorecard) -> str:
    """How the report's 95% intervals were computed (and seeded)."""
    if card.clustered:
        return (
            CI_LABELS[CI_CLUSTER] + "; a protocol's attempts are not independent "
            "(Wilson, which treats them as independent: --ci wilson)"
        )
    if all(len(us) == 1 for us in card.per_protocol().values()):
        return "Wilson score interval, one attempt per protocol"
    return CI_LABELS[CI_WILSON] + "; chosen with --ci wilson"


def header_lines(card: Scorecard) -> list[tuple[str, str]]:
    """What every report names: runs, roots, set hash, agent, model, platform, k, tokens."""
    m = card.meta
    runs = ", ".join(r.run_id for r in card.runs)
    roots = ", ".join(r.root or "(unsealed)" for r in card.runs)
    tokens = card.tokens
    token_text = (
        f"input {tokens.get('input', 0):,}, output {tokens.get('output', 0):,}, "
        f"cache read {tokens.get('cache_read', 0):,}, "
        f"cache creation {tokens.get('cache_creation', 0):,}"
    )
    coupled = any(r.coupled for r in card.runs)
    k_text = str(card.k)
    if len(card.runs) > 1:
        k_text += f" ({len(card.runs)} runs merged as independent passes)"
    return [
        ("run" if len(card.runs) == 1 else "runs", runs),
        ("run root" if len(card.runs) == 1 else "run roots", roots),
        ("protocol set", m.protocol_set_hash or "(not recorded)"),
        ("agent", m.agent or "-"),
        ("model", m.model or "-"),
        ("platform", f"{m.platform or '-'} {m.platform_version}".strip()),
        ("k", k_text + ("  COUPLED: attempts shared platform state" if coupled else "")),
        (
            "units",
            f"{sum(u.counted for u in card.units)} finished, {card.harness_failures} "
            f"infra-failed (excluded from rates), {card.incomplete} incomplete",
        ),
        ("tokens", token_text),
        ("intervals", "95%, " + intervals_line(card)),
    ]


def _metrics(card: Scorecard) -> list[Metric]:
    return [card.metrics[s.name] for s in METRICS] + [card.metrics["pass_k"]]


def table(card: Scorecard) -> str:
    """A plain-text table for the terminal."""
    lines = [f"{k:<13} {v}" for k, v in header_lines(card)]
    lines.append("")
    lines.append(f"{'metric':<30} {'num/den':>11} {'rate':>7}  {'95% CI':<16}  note")
    for m in _metrics(card):
        frac = f"{fmt_num(m.num)}/{m.den}"
        lines.append(f"{m.name:<30} {frac:>11} {_rate(m):>7}  {_ci(m):<16}  {_note(m, card)}")
    return "\n".join(lines) + "\n"


def markdown(card: Scorecard) -> str:
    """A Markdown scorecard to paste in a pull request."""
    out = ["### benchledger lifecycle scorecard", ""]
    out += [
        f"- **{k}**: `{v}`"
        if k in ("run", "runs", "run root", "run roots", "protocol set")
        else f"- **{k}**: {v}"
        for k, v in header_lines(card)
    ]
    out += ["", "| metric | num/den | rate | 95% CI | note |", "| --- | ---: | ---: | --- | --- |"]
    for m in _metrics(card):
        rate = f"{m.rate:.1%}" if m.rate is not None else "n/a"
        out.append(
            f"| {m.name} | {fmt_num(m.num)}/{m.den} | {rate} | {_ci(m)} | {_note(m, card)} |"
        )
    return "\n".join(out) + "\n"


def as_json(card: Scorecard) -> dict[str, Any]:
    """Every metric as {num, den, rate, ci_low, ci_high}, run metadata, per-protocol outcomes."""
    metrics: dict[str, Any] = {}
    for m in _metrics(card):
        entry = m.as_json()
        if m.label:
            entry["label"] = m.label
        metrics[m.name] = entry
    metrics["pass_k"]["k"] = card.k_used
    metrics["pass_k"]["left_out"] = [
        {"protocol": pid, "attempts": n} for pid, n in card.pass_k_short
    ]
    return {
        "runs": [
            {
                "run_id": r.run_id,
                "root": r.root,
                "protocol_set_hash": r.protocol_set_hash,
                "agent": r.agent,
                "model": r.model,
                "platform": r.platform,
                "platform_version": r.platform_version,
                "k": r.k,
                "coupled": r.coupled,
            }
            for r in card.runs
        ],
        "k": card.k,
        "intervals": {
            "method": _interval_method(card),
            "level": 0.95,
            "description": intervals_line(card),
        },
        "metrics": metrics,
        "harness_failures": card.harness_failures,
        "incomplete": card.incomplete,
        "tokens": card.tokens,
        "protocols": {
            pid: [
                {
                    "stream": u.stream,
                    "attempt": u.attempt,
                    "passed": u.passed(),
                    "error": u.error,
                    "outcome": {c: u.verdict(c) for c in CHECKS if c in u.decisions},
                }
                for u in units
            ]
            for pid, units in card.per_protocol().items()
        },
    }


def _bar_chart(card: Scorecard) -> str:
    """Inline SVG: each metric's rate as a dot with its interval as a line."""
    ms = [m for m in _metrics(card) if m.den and m.ci is not None]
    row, left, width = 22, 230, 420
    height = row * len(ms) + 30
    parts = [
        f'<svg width="{left + width + 90}" height="{height}" role="img" '
        'aria-label="metric rates with 95% intervals">'
    ]
    for tick in (0, 0.25, 0.5, 0.75, 1.0):
        x = left + tick * width
        parts.append(f'<line x1="{x}" y1="10" x2="{x}" y2="{height - 15}" class="grid"/>')
        parts.append(f'<text x="{x}" y="{height - 2}" class="tick">{tick:.0%}</text>')
    for i, m in enumerate(ms):
        y = 20 + i * row
        assert m.ci is not None
        lo, hi, r = (left + v * width for v in (m.ci.low, m.ci.high, m.rate or 0))
        parts.append(f'<text x="{left - 8}" y="{y + 4}" class="label">{html.escape(m.name)}</text>')
        parts.append(f'<line x1="{lo:.1f}" y1="{y}" x2="{hi:.1f}" y2="{y}" class="ci"/>')
        parts.append(f'<circle cx="{r:.1f}" cy="{y}" r="4" class="dot"/>')
        parts.append(
            f'<text x="{left + width + 8}" y="{y + 4}" class="value">'
            f"{m.rate:.1%} ({fmt_num(m.num)}/{m.den})</text>"
        )
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


def _mark(v: bool | None) -> str:
    return {True: '<td class="ok">✓</td>', False: '<td class="bad">✗</td>'}.get(v, "<td>–</td>")  # type: ignore[arg-type]


def _metric_row(m: Metric, card: Scorecard) -> str:
    esc = html.escape
    rate = f"{m.rate:.1%}" if m.rate is not None else "n/a"
    extra = _note(m, card)
    note = esc(_DESCRIPTIONS.get(m.name, "")) + (" — " + esc(extra) if extra else "")
    return (
        f"<tr><td>{esc(m.name)}</td><td>{fmt_num(m.num)}/{m.den}</td><td>{rate}</td>"
        f"<td>{_ci(m)}</td><td>{note}</td></tr>"
    )


def page(card: Scorecard) -> str:
    """A self-contained HTML page: no scripts, no fonts, nothing fetched at view time."""
    esc = html.escape
    head = "".join(
        f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>" for k, v in header_lines(card)
    )
    metric_rows = "".join(_metric_row(m, card) for m in _metrics(card))
    shown = [c for c in CHECKS if any(c in u.decisions for u in card.units)]
    proto_rows = []
    for pid, units in card.per_protocol().items():
        for u in units:
            cells = "".join(_mark(u.verdict(c)) for c in shown)
            status = "infra error" if u.error else ("pass" if u.passed() else "fail")
            proto_rows.append(
                f"<tr><td>{esc(pid)}</td><td>{u.attempt}</td>{cells}<td>{esc(status)}</td></tr>"
            )
    check_heads = "".join(f"<th>{esc(c.replace('_', ' '))}</th>" for c in shown)
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>benchledger scorecard {esc(card.meta.run_id)}</title>
<style>
body{{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}}
table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 7px;text-align:left}}
.grid{{stroke:#ddd}}.tick,.value,.label{{font-size:11px}}.label{{text-anchor:end}}
.ci{{stroke:#3465a4;stroke-width:3}}.dot{{fill:#a40000}}
.frow{{display:flex;align-items:center;gap:8px;margin:3px 0}}.fname{{width:130px}}
.fbar{{display:inline-block;height:14px;background:#3465a4}}.ok{{color:#2a7}}.bad{{color:#c00}}
</style></head><body>
<h1>benchledger lifecycle scorecard</h1>
<table>{head}</table>
<h2>Lifecycle funnel</h2>{_funnel(card)}
<h2>Rates with 95% intervals</h2><p>{esc(intervals_line(card))}</p>{_bar_chart(card)}
<h2>Metrics</h2>
<table><tr><th>metric</th><th>num/den</th><th>rate</th><th>95% CI</th><th>definition</th></tr>
{metric_rows}</table>
<h2>Per-protocol outcomes</h2>
<table><tr><th>protocol</th><th>attempt</th>{check_heads}<th>unit</th></tr>{"".join(proto_rows)}</table>
</body></html>
"""


def render(card: Scorecard, fmt: str) -> str:
    """The scorecard in ``fmt`` (table, markdown, json, html)."""
    if fmt == "table":
        return table(card)
    if fmt == "markdown":
        return markdown(card)
    if fmt == "json":
        return json.dumps(as_json(card), indent=2, sort_keys=True) + "\n"
    if fmt == "html":
        return page(card)
    raise ValueError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")


def _diff_cells(r: Row) -> tuple[str, str, str]:
    if r.ci is None:
        return "skipped", f"({r.note or 'empty denominator'})", ""
    diff = f"{(r.diff or 0):+.3f}"
    ci = f"[{r.ci.low:+.3f}, {r.ci.high:+.3f}]"
    return diff, ci, "" if r.mcnemar_p is None else f"{r.mcnemar_p:.3g}"


def _resolves(r: Row) -> str:
    return "" if r.resolution is None else f"±{r.resolution:.3f}"


def compare_text(rows: list[Row], a: str, b: str, fmt: str = "table") -> str:
    """The paired comparison of runs A and B: difference, interval, method, resolution."""
    methods = sorted({r.method for r in rows if r.method})
    if fmt == "json":
        body = {
            "a": a,
            "b": b,
            "metrics": {
                r.name: {
                    "a": [r.a_num, r.a_den],
                    "b": [r.b_num, r.b_den],
                    "diff": r.diff,
                    "ci_low": r.ci.low if r.ci else None,
                    "ci_high": r.ci.high if r.ci else None,
                    "ci_method": r.method or None,
                    "pairs": r.pairs,
                    "resolution": r.resolution,
                    "mcnemar_p": r.mcnemar_p,
                    "note": r.note,
                }
                for r in rows
            },
        }
        return json.dumps(body, indent=2, sort_keys=True) + "\n"
    md = fmt == "markdown"
    if md:
        lines = [
            f"- **A**: `{a}`",
            f"- **B**: `{b}`",
            f"- **intervals**: 95%, {'; '.join(methods) or '-'}",
            "",
            "| metric | A | B | B - A | 95% CI | resolves | McNemar p | note |",
            "| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |",
        ]
    else:
        lines = [f"A = {a}", f"B = {b}", f"intervals: 95%, {'; '.join(methods) or '-'}", ""]
        lines.append(
            f"{'metric':<30} {'A':>9} {'B':>9} {'B - A':>8}  {'95% CI':<18} "
            f"{'resolves':>8} {'McNemar p':>9}  note"
        )
    for r in rows:
        fa, fb = f"{fmt_num(r.a_num)}/{r.a_den}", f"{fmt_num(r.b_num)}/{r.b_den}"
        diff, ci, p = _diff_cells(r)
        note = "" if r.ci is None else r.note
        if md:
            lines.append(
                f"| {r.name} | {fa} | {fb} | {diff} | {ci} | {_resolves(r)} | {p} | {note} |"
            )
        else:
            lines.append(
                f"{r.name:<30} {fa:>9} {fb:>9} {diff:>8}  {ci:<18} {_resolves(r):>8} "
                f"{p:>9}  {note}".rstrip()
            )
    return "\n".join(lines) + "\n"


def gate_text(rows: list[GateRow], tolerance: float) -> str:
    """The gate's verdict table, with what each metric can resolve at this size and why."""
    methods = sorted({g.row.method for g in rows if g.row.method})
    lines = [
        f"intervals: 95%, {'; '.join(methods) or '-'}",
        "",
        f"{'metric':<20} {'baseline':>9} {'candidate':>9} {'better by (95% CI)':<18} "
        f"{'resolves':>8}  {'verdict':<12} why",
    ]
    for g in rows:
        r = g.row
        fa, fb = f"{fmt_num(r.a_num)}/{r.a_den}", f"{fmt_num(r.b_num)}/{r.b_den}"
        ci = "" if g.better is None else f"[{g.better.low:+.3f}, {g.better.high:+.3f}]"
        lines.append(
            f"{r.name:<20} {fa:>9} {fb:>9} {ci:<18} {_resolves(r):>8}  {g.verdict:<12} {g.reason}"
        )
    lines.append(
        f"(regress = the whole interval is below -{tolerance:g}; pass = the whole interval is "
        f"at or above -{tolerance:g} and the suite resolves {tolerance:g}; higher duplicate "
        "rate counts as worse)"
    )
    lines.append(
        "(resolves = the smallest regression this many pairs can tell apart from no change; "
        'how many protocols × k a tolerance needs: docs/metrics.md, "How big a suite")'
    )
    return "\n".join(lines) + "\n"
