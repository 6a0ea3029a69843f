"""The provenance lane's card rendered: a terminal table, Markdown, JSON and one HTML page.

Every format names the four metrics as the lane's contract does (``replay_determinism``,
``input_sensitivity``, ``source_attribution``, ``source_validity``, ``overall_pass``),
each with its threshold and verdict, and lists every failing case with why.
"""

from __future__ import annotations

import html
from typing import Any, Final

from benchledger.ledger.inert import inert_md, inert_rows
from benchledger.projections.card import (
    Metric,
    card_standing,
    completeness_json,
    failed_text,
    html_top,
    options_text,
    render_card,
    standing_json,
)
from benchledger.projections.sheet import markdown_items
from benchledger.projections.source import Completeness, completeness
from benchledger.projections.suites.provenance.decisions import ATTRIBUTION, CHECKS, VALIDITY
from benchledger.projections.suites.provenance.scorecard import (
    DESCRIPTIONS,
    GATED,
    M1,
    M1_LOG,
    M2,
    M3,
    M4,
    OVERALL,
    PRECISION_METRIC,
    SAME_PROMPT,
    SUITE,
    THRESHOLDS,
    Card,
    CaseUnit,
)

# Display order; an indented row belongs to the gated metric above it.
ROWS: Final = ((M1, False), (M1_LOG, True), (M2, False), (SAME_PROMPT, True), (M3, False),
               (PRECISION_METRIC, True), (M4, False))  # fmt: skip


@inert_rows  # values from the run's own events: shown inert
def header_lines(card: Card) -> list[tuple[str, str]]:
    """What the run was: id, root, case set, agent, model, platform, replicates."""
    m = card.meta
    return [
        ("run", m.run_id),
        ("run root", m.root or "(unsealed)"),
        ("case set", m.protocol_set_hash or "(not recorded)"),
        *([("subset", f"SUBSET: {m.subset}")] if m.subset else []),
        ("agent", m.agent or "-"),
        ("model", m.model or "-"),
        ("platform", m.platform_label),
        ("platform options", options_text(m.platform_options)),
        ("replicates", f"k={m.k} per case"),
        (
            "units",
            f"{sum(u.unit.counted for u in card.units)} finished, "
            f"{failed_text([run_completeness(card)])} (excluded from rates), "
            f"{card.incomplete} incomplete",
        ),
    ]


def run_completeness(card: Card) -> Completeness:
    """How much of its plan the run finished (the banner of an unsealed or incomplete run)."""
    return completeness(card.meta, [u.unit for u in card.units])


def _banners(card: Card) -> list[str]:
    banner = run_completeness(card).banner()
    return [banner] if banner else []


def _top(card: Card) -> list[str]:
    """The first lines of every format: a partial run's banner, then the run's standing."""
    return [*_banners(card), *card_standing([card.meta])]


def _shown(card: Card) -> list[tuple[Metric, bool]]:
    return [(card.metrics[name], sub) for name, sub in ROWS if name in card.metrics]


def _rate(m: Metric) -> str:
    return f"{m.rate:.1%}" if m.rate is not None else "n/a"


def _ci(m: Metric) -> str:
    return f"[{m.ci.low:.3f}, {m.ci.high:.3f}]" if m.ci is not None else ""


def _verdict(card: Card, m: Metric) -> str:
    bar = THRESHOLDS.get(m.name)
    ok = card.passed.get(m.name, bar.met(m.rate) if bar is not None else None)
    return "reported" if ok is None else ("pass" if ok else "FAIL")


def _threshold(m: Metric) -> str:
    found = THRESHOLDS.get(m.name)
    return str(found) if found is not None else "-"


def overall_line(card: Card) -> str:
    """The overall verdict in one line, naming the metrics that failed."""
    failed = [name for name, ok in card.passed.items() if not ok]
    if not failed:
        return f"{OVERALL}: PASS (all of {', '.join(card.passed)} pass)"
    return f"{OVERALL}: FAIL ({', '.join(failed)} did not pass)"


def table(card: Card) -> str:
    """A plain-text table for the terminal, then every failure with why."""
    lines = [*_top(card), *[f"{k:<11} {v}" for k, v in header_lines(card)]]
    lines += ["", f"{'metric':<32} {'num/den':>9} {'rate':>7}  {'bar':<8} {'verdict':<8} 95% CI"]
    for m, sub in _shown(card):
        name = ("  " + m.name) if sub else m.name
        frac = f"{int(m.num)}/{m.den}"
        lines.append(
            f"{name:<32} {frac:>9} {_rate(m):>7}  {_threshold(m):<8} {_verdict(card, m):<8} "
            f"{_ci(m)}".rstrip()
        )
    lines += ["", overall_line(card)]
    lines += [f"note: {n}" for n in card.notes]
    if card.failures:
        lines += ["", "failures:"]
        for f in card.failures:
            lines.append(f"  {f.metric:<20} {f.case}: {f.detail}")
            lines.append(f"  {'':<20} streams: {', '.join(f.streams)}")
    return "\n".join(lines) + "\n"


def markdown(card: Card) -> str:
    """A Markdown card to paste in a pull request."""
    out = [f"**{b}**" for b in _top(card)]
    out += [""] if out else []
    out += ["### benchledger provenance lane", ""]
    out += markdown_items(header_lines(card))
    out += ["", "| metric | num/den | rate | bar | verdict | 95% CI |",
            "| --- | ---: | ---: | --- | --- | --- |"]  # fmt: skip
    for m, sub in _shown(card):
        name = f"&nbsp;&nbsp;{m.name}" if sub else f"**{m.name}**"
        out.append(
            f"| {name} | {int(m.num)}/{m.den} | {_rate(m)} | {_threshold(m)} | "
            f"{_verdict(card, m)} | {_ci(m)} |"
        )
    out += ["", f"**{overall_line(card)}**"]
    if card.failures:
        out += ["", "| metric | case | why | streams |", "| --- | --- | --- | --- |"]
        for f in card.failures:
            out.append(f"| {f.metric} | {inert_md(f.case)} | {inert_md(f.detail)} | "
                       f"{', '.join(f.streams)} |")  # fmt: skip
    return "\n".join(out) + "\n"


def _unit_json(u: CaseUnit) -> dict[str, Any]:
    attribution = u.unit.decisions.get(ATTRIBUTION)
    validity = u.unit.decisions.get(VALIDITY)
    return {
        "stream": u.stream,
        "attempt": u.attempt,
        "trace_hash": u.trace_hash,
        "sources": list(u.sources),
        "kinds": [k for k in (attribution.answer if attribution else "").split(",") if k],
        "expected": attribution.expected if attribution else None,
        "verdicts": {c: u.verdict(c) for c in CHECKS if c in u.unit.decisions},
        "validity": validity.reason if validity else "",
        "attribution": attribution.reason if attribution else "",
        "error": u.unit.error,
    }


def as_json(card: Card) -> dict[str, Any]:
    """The contract's names: each metric with num, den, rate, bar and verdict; overall_pass."""
    m = card.meta
    metrics: dict[str, Any] = {}
    for metric, _ in _shown(card):
        entry = metric.as_json()
        bar = THRESHOLDS.get(metric.name)
        entry.update(
            description=DESCRIPTIONS.get(metric.name, ""),
            threshold=None if bar is None else {"value": bar.value, "strict": bar.strict},
            passed=card.passed.get(metric.name),
            gated=metric.name in GATED or metric.name == M1_LOG,
        )
        if metric.label:
            entry["label"] = metric.label
        metrics[metric.name] = entry
    return {
        **completeness_json([run_completeness(card)]),
        **standing_json([card.meta]),
        "suite": SUITE,
        "run": {
            "run_id": m.run_id,
            "root": m.root,
            "case_set_hash": m.protocol_set_hash,
            "agent": m.agent,
            "model": m.model,
            "platform": m.platform,
            "platform_version": m.platform_version,
            "platform_options": m.platform_options,
            "platform_label": m.platform_label,
            "platform_facts": m.platform_facts,
            "k": m.k,
            "subset": m.subset,
        },
        "metrics": metrics,
        OVERALL: card.overall_pass,
        "failures": [f._asdict() | {"streams": list(f.streams)} for f in card.failures],
        "harness_failures": card.harness_failures,
        "incomplete": card.incomplete,
        "notes": list(card.notes),
        "cases": {cid: [_unit_json(u) for u in us] for cid, us in card.per_case().items()},
    }


def page(card: Card) -> str:
    """A self-contained HTML page: no scripts, no fonts, nothing fetched at view time."""
    esc = html.escape
    head = "".join(
        f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>" for k, v in header_lines(card)
    )
    rows = "".join(
        f"<tr><td>{'&nbsp;&nbsp;' if sub else ''}{esc(m.name)}</td><td>{int(m.num)}/{m.den}</td>"
        f"<td>{_rate(m)}</td><td>{esc(_threshold(m))}</td><td>{esc(_verdict(card, m))}</td>"
        f"<td>{_ci(m)}</td><td>{esc(DESCRIPTIONS.get(m.name, ''))}</td></tr>"
        for m, sub in _shown(card)
    )
    fails = "".join(
        f"<tr><td>{esc(f.metric)}</td><td>{esc(f.case)}</td><td>{esc(f.detail)}</td>"
        f"<td>{esc(', '.join(f.streams))}</td></tr>"
        for f in card.failures
    )
    cases = "".join(
        f"<tr><td>{esc(u.case_id)}</td><td>{u.attempt}</td><td><code>{esc(u.trace_hash[:12])}"
        f"</code></td><td>{esc(', '.join(u.sources))}</td>"
        + "".join(f"<td>{_mark(u.verdict(c))}</td>" for c in CHECKS)
        + "</tr>"
        for us in card.per_case().values()
        for u in us
    )
    checks = "".join(f"<th>{esc(c.replace('_', ' '))}</th>" for c in CHECKS)
    verdict = "ok" if card.overall_pass else "bad"
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>benchledger provenance {esc(card.meta.run_id)}</title>
<style>
body{{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}}
table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}}
.ok{{color:#2a7}}.bad{{color:#c00}}
</style></head><body>
{html_top([card.meta], _banners(card))}<h1>benchledger provenance lane</h1>
<table>{head}</table>
<h2>Metrics</h2>
<table><tr><th>metric</th><th>num/den</th><th>rate</th><th>bar</th><th>verdict</th>
<th>95% CI</th><th>definition</th></tr>{rows}</table>
<p class="{verdict}"><strong>{esc(overall_line(card))}</strong></p>
<h2>Failures</h2>
<table><tr><th>metric</th><th>case</th><th>why</th><th>streams</th></tr>{fails}</table>
<h2>Per case</h2>
<table><tr><th>case</th><th>attempt</th><th>trace hash</th><th>sources</th>{checks}</tr>{cases}
</table>
</body></html>
"""


def _mark(v: bool | None) -> str:
    return "–" if v is None else ("✓" if v else "✗")


def render(card: Card, fmt: str) -> str:
    """The card in ``fmt`` (table, markdown, json, html)."""
    return render_card(card, fmt, table=table, markdown=markdown, as_json=as_json, page=page)
