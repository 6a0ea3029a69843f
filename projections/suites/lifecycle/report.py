"""Scorecards rendered: a terminal table, a Markdown scorecard, JSON, and one HTML page."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Sequence
from typing import Any, Final

from projections import disclosure
from projections.card import (
    CI_CLUSTER,
    CI_LABELS,
    CI_WILSON,
    Metric,
    RunMeta,
    card_runs,
    card_standing,
    completeness_json,
    fmt_interval,
    fmt_num,
    fmt_pct,
    fmt_signed,
    html_top,
    render_card,
    standing_json,
    standing_lines,
)
from projections.source import Completeness, completeness
from projections.suites.lifecycle.compare import GateRow, Row
from projections.suites.lifecycle.scorecard import (
    CHECKS,
    DUPLICATED,
    METRICS,
    TEACH_BUDGET_EXHAUSTED,
    Scorecard,
    Unit,
    lifecycle_passed,
)

NOT_APPLICABLE: Final = "not applicable"  # how a decision for a stage the platform lacks begins
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


def _rate(m: Metric) -> str:
    return f"{fmt_pct(m.rate):>6}"


def _ci(m: Metric) -> str:
    return fmt_interval(m.ci.low, m.ci.high) if m.ci is not None else ""


def _ci_note(m: Metric, card: Scorecard) -> str:
    """The interval's method when it is not the one the header names."""
    default = _interval_method(card)
    return "" if m.ci is None or m.ci_method == default else f"CI: {CI_LABELS[m.ci_method]}"


def _interval_method(card: Scorecard) -> str:
    return CI_CLUSTER if card.clustered else CI_WILSON


def _note(m: Metric, card: Scorecard) -> str:
    units = disclosure.disclosure(card).units
    withheld = f"excludes {disclosure.units_text(len(units))} withheld" if units else ""
    return "; ".join(x for x in (m.label, _ci_note(m, card), withheld) if x)


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


def run_completeness(card: Scorecard) -> list[Completeness]:
    """How much of its plan each run of the card finished (merged runs by stream prefix)."""
    if len(card.runs) == 1:
        return [completeness(card.meta, card.units)]
    return [
        completeness(r, [u for u in card.units if u.stream.startswith(r.run_id + "/")])
        for r in card.runs
    ]


def banners(card: Scorecard) -> list[str]:
    """The lines every format starts with: one per unsealed or incomplete run (else none)."""
    return [b for b in (c.banner() for c in run_completeness(card)) if b]


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
        *[("verified", r.verified) for r in card.runs if r.verified],
        ("protocol set", m.protocol_set_hash or "(not recorded)"),
        *subset_lines(card.runs),
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
        *_withheld_line(card),
        *_not_applicable_line(card),
    ]


def subset_lines(runs: Sequence[RunMeta]) -> list[tuple[str, str]]:
    """A subset run's header row: what it ran of its set (nothing for a run of the whole set)."""
    merged = len(runs) > 1
    subsets = [(f"{r.run_id}: " if merged else "") + r.subset for r in runs if r.subset]
    if not subsets:
        return []
    return [("subset", "SUBSET: " + "; ".join(subsets) + "; not comparable with a full run")]


def _withheld_line(card: Scorecard) -> list[tuple[str, str]]:
    """A redacted run's header row saying what is withheld (nothing for a full run)."""
    d = disclosure.disclosure(card)
    return [("withheld", disclosure.summary_line(d))] if d.any else []


def not_applicable(card: Scorecard) -> dict[tuple[str, str], int]:
    """Stages the platform could not run: (stage, the platform's reason) -> units."""
    out: dict[tuple[str, str], int] = {}
    for u in card.units:
        for d in u.decisions.values():
            if d.verdict is None and d.reason.startswith(NOT_APPLICABLE):
                key = (d.stage, d.reason.removeprefix(NOT_APPLICABLE).lstrip(": "))
                out[key] = out.get(key, 0) + 1
    return dict(sorted(out.items()))


def _not_applicable_line(card: Scorecard) -> list[tuple[str, str]]:
    """A header row per run naming the stages its platform could not run, and why."""
    found = not_applicable(card)
    text = "; ".join(f"{stage} in {n} unit(s): {why}" for (stage, why), n in found.items())
    return [("n/a stages", text)] if found else []


def _metrics(card: Scorecard) -> list[Metric]:
    return [card.metrics[s.name] for s in METRICS] + [card.metrics["pass_k"]]


def table(card: Scorecard) -> str:
    """A plain-text table for the terminal (a partial run's banner first, then its standing)."""
    lines = [*banners(card), *card_standing(card.runs)]
    lines += [f"{k:<13} {v}" for k, v in header_lines(card)]
    lines.append("")
    lines.append(f"{'metric':<30} {'num/den':>11} {'rate':>7}  {'95% CI':<16}  note")
    for m in _metrics(card):
        frac = f"{fmt_num(m.num)}/{m.den}"
        row = f"{m.name:<30} {frac:>11} {_rate(m):>7}  {_ci(m):<16}  {_note(m, card)}"
        lines.append(row.rstrip())
    return "\n".join(lines) + "\n"


def markdown(card: Scorecard) -> str:
    """A Markdown scorecard to paste in a pull request (a partial run's banner first)."""
    out = [f"**{b}**" for b in [*banners(card), *card_standing(card.runs)]]
    out += [""] if out else []
    out += ["### benchledger lifecycle scorecard", ""]
    out += [
        f"- **{k}**: `{v}`"
        if k in ("run", "runs", "run root", "run roots", "protocol set")
        else f"- **{k}**: {v}"
        for k, v in header_lines(card)
    ]
    out += ["", "| metric | num/den | rate | 95% CI | note |", "| --- | ---: | ---: | --- | --- |"]
    for m in _metrics(card):
        out.append(
            f"| {m.name} | {fmt_num(m.num)}/{m.den} | {fmt_pct(m.rate)} | {_ci(m)} "
            f"| {_note(m, card)} |"
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
    found = run_completeness(card)
    return {
        **completeness_json(found),
        **standing_json(card.runs),
        "runs": [
            {
                "run_id": r.run_id,
                "root": r.root,
                "verified": r.verified,
                **standing_json([r]),
                "completeness": c.as_json(),
                "protocol_set_hash": r.protocol_set_hash,
                "agent": r.agent,
                "model": r.model,
                "platform": r.platform,
                "platform_version": r.platform_version,
                "k": r.k,
                "coupled": r.coupled,
                "subset": r.subset,
            }
            for r, c in zip(card.runs, found, strict=True)
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
        "not_applicable": [
            {"stage": stage, "reason": why, "units": n}
            for (stage, why), n in not_applicable(card).items()
        ],
        **_withheld_json(card),
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


def _withheld_json(card: Scorecard) -> dict[str, Any]:
    d = disclosure.disclosure(card)
    return {"withheld": disclosure.as_json(d)} if d.any else {}


def _bar_chart(card: Scorecard) -> str:
    """Inline SVG: each metric's rate as a dot with its interval as a line."""
    ms = [m for m in _metrics(card) if m.den and m.ci is not None]
    lower = {s.name for s in METRICS if not s.higher_is_better}
    values = [
        f"{fmt_pct(m.rate)} ({fmt_num(m.num)}/{m.den})"
        + (", lower is better" if m.name in lower else "")
        for m in ms
    ]
    # SVG text never wraps or grows its box, so the margins are sized from the longest
    # label at a generous 8 px per 12 px character (the render test measures the result).
    left = 24 + 8 * max((len(m.name) for m in ms), default=0)
    right = 24 + 8 * max((len(v) for v in values), default=0)
    row, width = 24, 600
    height = row * len(ms) + 36
    parts = [
        f'<svg width="{left + width + right}" height="{height}" role="img" '
        'aria-label="metric rates with 95% intervals">'
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
    name = html.escape(GOOD_WHEN_FALSE.get(check, check.replace("_", " ")))
    kind = "" if check in DECIDES_PASS else ' class="diag"'
    return f'<th{kind} title="{html.escape(check)}">{name}</th>'


def _mark(check: str, v: bool | None) -> str:
    """✓/✗ (a check that decides the pass) or yes/no (a diagnostic) for the good/bad outcome."""
    if v is None:
        return '<td class="na">–</td>'
    good = v is not (check in GOOD_WHEN_FALSE)
    title = f"{check} = {str(v).lower()}"
    if check not in DECIDES_PASS:
        word, cls = ("yes", "diag") if good else ("no", "diag no")
        return f'<td class="{cls}" title="{title}">{word}</td>'
    return (
        f'<td class="ok" title="{title}">✓</td>'
        if good
        else f'<td class="bad" title="{title}">✗</td>'
    )


def _run_of(unit: Unit, card: Scorecard) -> str:
    """The run a unit came from (its stream is ``RUN/<protocol>/<attempt>``)."""
    for r in card.runs:
        if unit.stream.startswith(r.run_id + "/"):
            return r.run_id
    return unit.stream.rsplit("/", 2)[0]


def _status(unit: Unit) -> str:
    if unit.error:
        return '<td class="bad">infra error</td>'
    return '<td class="ok">pass</td>' if unit.passed() else '<td class="bad">fail</td>'


def _metric_row(m: Metric, card: Scorecard) -> str:
    esc = html.escape
    extra = _note(m, card)
    note = esc(_DESCRIPTIONS.get(m.name, "")) + (" — " + esc(extra) if extra else "")
    note = re.sub(r"`([^`]+)`", r"<code>\1</code>", note)  # the labels' Markdown code spans
    return (
        f'<tr><td class="name">{esc(m.name)}</td><td class="num">{fmt_num(m.num)}/{m.den}</td>'
        f'<td class="num">{fmt_pct(m.rate)}</td>'
        f'<td class="num"><span class="interval">{_ci(m)}</span></td><td>{note}</td></tr>'
    )


def _head_value(key: str, value: str, card: Scorecard) -> str:
    """A header value for HTML: merged runs and their roots one per line."""
    if key == "runs":
        return "<br>".join(html.escape(r.run_id) for r in card.runs)
    if key == "run roots":
        return "<br>".join(html.escape(r.root or "(unsealed)") for r in card.runs)
    return html.escape(value)


def page(card: Scorecard) -> str:
    """A self-contained HTML page: no scripts, no fonts, nothing fetched at view time."""
    esc = html.escape
    head = "".join(
        f"<tr><th>{esc(k)}</th><td><code>{_head_value(k, v, card)}</code></td></tr>"
        for k, v in header_lines(card)
    )
    metric_rows = "".join(_metric_row(m, card) for m in _metrics(card))
    shown = [c for c in CHECKS if any(c in u.decisions for u in card.units)]
    # Merged runs all number their attempts from 1: only the run tells their rows apart.
    merged = len(card.runs) > 1
    proto_rows = []
    for pid, units in card.per_protocol().items():
        for u in units:
            run = f'<td class="name">{esc(_run_of(u, card))}</td>' if merged else ""
            cells = "".join(_mark(c, u.verdict(c)) for c in shown)
            proto_rows.append(
                f'<tr class="unit"><td class="name">{esc(pid)}</td>{run}'
                f'<td class="num">{u.attempt}</td>{cells}{_status(u)}</tr>'
            )
    check_heads = "".join(_check_head(c) for c in shown)
    run_head = "<th>run</th>" if merged else ""
    negative = "; ".join(
        f"<em>{esc(name)}</em> is {esc(check)} = false"
        for check, name in GOOD_WHEN_FALSE.items()
        if check in shown
    )
    legend = (
        "Checks that decide a unit's pass: ✓ passed, ✗ failed. Diagnostics (grey heads) "
        "say what the agent did, yes or no, and decide nothing. – not applicable."
        + (f" Columns are named for the good outcome: {negative}." if negative else "")
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>benchledger scorecard {esc(card.meta.run_id)}</title>
<style>
body{{font:14px/1.45 system-ui,sans-serif;margin:24px auto;padding:0 24px;color:#222;
max-width:1400px}}
table{{border-collapse:collapse;margin:.6em 0 1.2em}}
td,th{{border:1px solid #ccc;padding:3px 8px;text-align:left;vertical-align:top}}
th{{background:#f4f4f4}}.head th{{white-space:nowrap}}.head code{{overflow-wrap:anywhere}}
.full{{width:100%}}.scroll{{overflow-x:auto}}
.name,.num,.interval{{white-space:nowrap}}.num{{text-align:right}}
.outcomes td{{text-align:center;vertical-align:middle}}.outcomes td.name{{text-align:left}}
.outcomes th{{font-size:12px;text-align:center;vertical-align:bottom}}
.outcomes th:first-child{{text-align:left}}.outcomes td:last-child{{white-space:nowrap}}
.grid{{stroke:#ddd}}.tick,.value,.label{{font-size:12px}}.tick{{text-anchor:middle}}
.label{{text-anchor:end}}.ci{{stroke:#3465a4;stroke-width:3}}.dot{{fill:#a40000}}
.frow{{display:flex;align-items:center;gap:8px;margin:3px 0}}
.fname{{flex:none;width:140px;white-space:nowrap}}
.fbar{{display:inline-block;height:14px;background:#3465a4}}
.ok{{color:#1a7f37}}.bad{{color:#c00;font-weight:bold}}.na{{color:#999}}
td.diag{{color:#777;font-size:12px}}td.diag.no{{color:#a15c00}}th.diag{{color:#666;font-weight:normal}}
</style></head><body>
{html_top(card.runs, banners(card))}<h1>benchledger lifecycle scorecard</h1>
<table class="head">{head}</table>
<h2>Lifecycle funnel</h2>{_funnel(card)}
<h2>Rates with 95% intervals</h2><p>{esc(intervals_line(card))}</p>
<div class="scroll">{_bar_chart(card)}</div>
<h2>Metrics</h2>
<div class="scroll"><table class="full metrics"><tr><th>metric</th><th>num/den</th><th>rate</th>
<th>95% CI</th><th>definition</th></tr>
{metric_rows}</table></div>
<h2>Per-protocol outcomes</h2>
<p>{legend}</p>
<div class="scroll"><table class="full outcomes"><tr><th>protocol</th>{run_head}<th>attempt</th>
{check_heads}<th>unit</th></tr>{"".join(proto_rows)}</table></div>
</body></html>
"""


def render(card: Scorecard, fmt: str) -> str:
    """The scorecard in ``fmt`` (table, markdown, json, html)."""
    return render_card(card, fmt, table=table, markdown=markdown, as_json=as_json, page=page)


def _diff_cells(r: Row) -> tuple[str, str, str]:
    if r.ci is None:
        return "skipped", f"({r.note or 'empty denominator'})", ""
    diff = fmt_signed(r.diff or 0)
    ci = f"[{fmt_signed(r.ci.low)}, {fmt_signed(r.ci.high)}]"
    return diff, ci, "" if r.mcnemar_p is None else f"{r.mcnemar_p:.3g}"


def _resolves(r: Row) -> str:
    return "" if r.resolution is None else f"±{r.resolution:.3f}"


def compare_text(
    rows: list[Row],
    a: str,
    b: str,
    fmt: str = "table",
    differs: Sequence[str] = (),
    verified: Sequence[str] = (),
    progress: Sequence[Completeness] = (),
    runs: Sequence[RunMeta] = (),
) -> str:
    """The paired comparison of runs A and B: difference, interval, method, resolution.

    ``differs`` names what differs between the runs (``compare.differences``: the platform);
    ``verified`` says, for A and B, what reading them verified against which root;
    ``progress`` how much of its plan each finished (a partial run's banner comes first);
    ``runs`` A's and B's metadata, whose standing and origin come next.
    """
    methods = sorted({r.method for r in rows if r.method})
    partial = [x for x in (c.banner() for c in progress) if x]
    partial += standing_lines(card_runs(runs), named=True)
    if fmt == "json":
        found = {x: c.as_json() for x, c in zip("ab", progress, strict=True)}
        stood = {x: standing_json([r]) for x, r in zip("ab", runs, strict=True)} if runs else {}
        warning = " | ".join(c.banner() for c in progress if c.banner())
        body = {
            "a": a,
            "b": b,
            **({"completeness": found} if found else {}),
            **({"warning": warning} if warning else {}),
            **(
                {
                    "authentication": {x: j["authentication"] for x, j in stood.items() if j},
                    "origin": {x: j["origin"] for x, j in stood.items() if j},
                }
                if stood
                else {}
            ),
            "differs": list(differs),
            "verified": list(verified),
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
        lines = [f"**{x}**" for x in partial] + ([""] if partial else [])
        lines += [
            f"- **A**: `{a}`",
            f"- **B**: `{b}`",
            *(f"- **differs**: {d}" for d in differs),
            *(f"- **verified {x}**: {v}" for x, v in zip("AB", verified, strict=False)),
            f"- **intervals**: 95%, {'; '.join(methods) or '-'}",
            "",
            "| metric | A | B | B - A | 95% CI | resolves | McNemar p | note |",
            "| --- | ---: | ---: | ---: | --- | ---: | ---: | --- |",
        ]
    else:
        lines = [*partial, f"A = {a}", f"B = {b}", *(f"differs: {d}" for d in differs)]
        lines += [f"verified {x}: {v}" for x, v in zip("AB", verified, strict=False)]
        lines += [f"intervals: 95%, {'; '.join(methods) or '-'}", ""]
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
        ci = (
            "" if g.better is None else f"[{fmt_signed(g.better.low)}, {fmt_signed(g.better.high)}]"
        )
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
