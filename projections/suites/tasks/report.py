"""A tasks run's card rendered: a terminal table, Markdown, JSON and a plain HTML page.

An attempt the peer set aside (an excluded arm folder) says so in its first line,
``EXCLUDED: <label>: <meaning>``, in every format, before anything else.
"""

from __future__ import annotations

import html
from typing import Any, Final

from benchledger.ledger.inert import inert_rows
from benchledger.projections.card import (
    CI_LABELS,
    CI_WILSON,
    Metric,
    card_standing,
    completeness_json,
    fmt_interval,
    fmt_pct,
    html_top,
    options_text,
    render_card,
    standing_json,
)
from benchledger.projections.sheet import markdown_items
from benchledger.projections.source import Completeness, completeness
from benchledger.projections.suites.tasks.scorecard import PASSED_NOUN, SUITE, Card
from benchledger.projections.usage_view import usage_json, usage_lines
from benchledger.protocols.task_grading import CORRECT

INTERVALS: Final = f"95% intervals: {CI_LABELS[CI_WILSON]}"


def run_completeness(card: Card) -> Completeness:
    """How much of its plan the run finished (the banner of an unsealed or partial run)."""
    return completeness(card.meta, card.units)


def top_lines(card: Card) -> list[str]:
    """The first lines: EXCLUDED (when set aside), a partial run's banner, its standing."""
    banner = run_completeness(card).banner()
    return [x for x in (card.excluded, banner) if x] + card_standing([card.meta])


@inert_rows  # values from the run's own events: shown inert
def header_lines(card: Card) -> list[tuple[str, str]]:
    """What the run is: id, root, family, arm, planted claim, agent, model, tasks, attempts."""
    m = card.meta
    return [
        ("run", m.run_id),
        ("run root", m.root or "(unsealed)"),
        ("family", card.setting("family") or "-"),
        ("arm", card.setting("arm") or "-"),
        ("label", card.setting("label") or "(analysed)"),
        ("planted", card.treatment),
        ("agent", m.agent or "-"),
        ("model", m.model or "-"),
        ("platform", m.platform_label),
        ("platform options", options_text(m.platform_options)),
        ("tasks", ", ".join(card.task_ids) or "-"),
        (
            "attempts",
            f"{sum(u.counted for u in card.units)} finished, "
            f"{card.harness_failures} harness failures (in no rate), "
            f"{card.incomplete} incomplete",
        ),
        *usage_rows(card),
    ]


def usage_rows(card: Card) -> list[tuple[str, str]]:
    """Duration, model calls, tokens and cost (docs/metrics.md, "Cost and latency")."""
    if card.usage is None:
        return []
    return usage_lines(card.usage, card.priced(), card.passed_units, PASSED_NOUN)


def usage_doc(card: Card) -> dict[str, Any]:
    """The JSON ``usage`` of a card (empty when it has none)."""
    if card.usage is None:
        return {}
    return {"usage": usage_json(card.usage, card.priced(), card.passed_units)}


def cell(m: Metric) -> str:
    """``num/den rate [low, high]``, or ``0/0 n/a``."""
    ci = f" {fmt_interval(m.ci.low, m.ci.high)}" if m.ci is not None else ""
    return f"{int(m.num)}/{m.den} {fmt_pct(m.rate)}{ci}"


def _agreement(card: Card) -> list[str]:
    agree, both = card.agreement()
    if not both:
        return []
    return [f"the peer's recorded correct agrees with benchledger's on {agree}/{both} attempts"]


def table(card: Card) -> str:
    """A plain-text table for the terminal."""
    lines = [*top_lines(card), *(f"{k:<9} {v}" for k, v in header_lines(card))]
    lines += ["", INTERVALS, "", f"{'metric':<14} {'num/den rate [95% CI]':<34} definition"]
    for m in card.metrics.values():
        lines.append(f"{m.name:<14} {cell(m):<34} {card.definition(m.name)}")
    lines += ["", *_agreement(card)] if card.peer else []
    lines += [f"note: {n}" for n in card.notes]
    return "\n".join(lines) + "\n"


def markdown(card: Card) -> str:
    """A Markdown card to paste in a pull request."""
    out = [f"**{x}**" for x in top_lines(card)]
    out += [""] if out else []
    out += ["### benchledger tasks", ""]
    out += markdown_items(header_lines(card))
    out += ["", f"{INTERVALS}.", "", "| metric | num/den | rate | 95% CI | definition |",
            "| --- | ---: | ---: | --- | --- |"]  # fmt: skip
    for m in card.metrics.values():
        ci = fmt_interval(m.ci.low, m.ci.high) if m.ci is not None else ""
        out.append(f"| {m.name} | {int(m.num)}/{m.den} | {fmt_pct(m.rate)} | {ci} | "
                   f"{card.definition(m.name)} |")  # fmt: skip
    out += ["", *(f"- {x}" for x in [*_agreement(card), *card.notes])]
    return "\n".join(out).rstrip() + "\n"


def _unit_json(card: Card, stream: str) -> dict[str, Any]:
    unit = next(u for u in card.units if u.stream == stream)
    peer = card.peer.get(stream)
    return {
        "stream": stream,
        "task": unit.protocol_id,
        "attempt": unit.attempt,
        "answer": next((d.answer for d in unit.decisions.values() if d.answer), ""),
        "verdicts": {check: d.verdict for check, d in unit.decisions.items()},
        "reasons": {check: d.reason for check, d in unit.decisions.items()},
        **({"peer_correct": peer.verdict} if peer is not None else {}),
        "error": unit.error,
    }


def as_json(card: Card) -> dict[str, Any]:
    """Each metric with num, den, rate and Wilson bounds; the run's facts; every attempt."""
    m = card.meta
    metrics = {x.name: x.as_json() | {"description": card.definition(x.name)}
               for x in card.metrics.values()}  # fmt: skip
    if card.by_design:  # correct's attempts the agent cannot answer by design
        metrics[CORRECT]["unanswerable_by_design"] = len(card.by_design)
    return {
        **({"excluded": card.excluded} if card.excluded else {}),
        **completeness_json([run_completeness(card)]),
        **standing_json([card.meta]),
        "suite": SUITE,
        "run": {
            "run_id": m.run_id,
            "root": m.root,
            "task_set_hash": m.protocol_set_hash,
            "family": card.setting("family"),
            "arm": card.setting("arm"),
            "label": card.setting("label"),
            "excluded": bool(card.excluded),
            "planted": card.treatment,
            "agent": m.agent,
            "model": m.model,
            "platform": m.platform,
            "platform_version": m.platform_version,
            "platform_options": m.platform_options,
            "platform_label": m.platform_label,
            "platform_facts": m.platform_facts,
            "k": m.k,
        },
        "metrics": metrics,
        **usage_doc(card),
        "harness_failures": card.harness_failures,
        "incomplete": card.incomplete,
        "notes": [*_agreement(card), *card.notes],
        "attempts": [_unit_json(card, u.stream) for u in card.units if u.counted],
    }


def page(card: Card) -> str:
    """A self-contained HTML page: no scripts, nothing fetched at view time."""
    esc = html.escape
    excluded = (
        f'<p class="excluded" role="alert" style="background:#fff3cd;border:2px solid #c00;'
        f'padding:8px 12px;font-weight:bold;color:#800">{esc(card.excluded)}</p>\n'
        if card.excluded
        else ""
    )
    banner = run_completeness(card).banner()
    head = "".join(f"<tr><th>{esc(k)}</th><td><code>{esc(v)}</code></td></tr>"
                   for k, v in header_lines(card))  # fmt: skip
    rows = "".join(
        f"<tr><td>{esc(x.name)}</td><td>{esc(cell(x))}</td><td>{esc(card.definition(x.name))}</td></tr>"
        for x in card.metrics.values()
    )
    attempts = "".join(
        f"<tr><td>{esc(u.protocol_id)}</td><td>{u.attempt}</td>"
        f"<td>{esc(next((d.answer for d in u.decisions.values() if d.answer), ''))}</td>"
        f"<td>{esc(_class(u.decisions))}</td></tr>"
        for u in card.units
        if u.counted
    )
    notes = "".join(f"<li>{esc(n)}</li>" for n in [*_agreement(card), *card.notes])
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8">
<title>benchledger tasks {esc(card.meta.run_id)}</title>
<style>
body{{font:14px/1.45 system-ui,sans-serif;margin:2em;color:#222;max-width:1100px}}
table{{border-collapse:collapse;margin:1em 0}}
td,th{{border:1px solid #ccc;padding:3px 7px;text-align:left;vertical-align:top}}
</style></head><body>
{excluded}{html_top([card.meta], [banner] if banner else [])}<h1>benchledger tasks</h1>
<table>{head}</table>
<p>{esc(INTERVALS)}</p>
<table><tr><th>metric</th><th>num/den rate [95% CI]</th><th>definition</th></tr>{rows}</table>
{f"<ul>{notes}</ul>" if notes else ""}
<h2>Attempts</h2>
<table><tr><th>task</th><th>attempt</th><th>answer</th><th>class</th></tr>{attempts}</table>
</body></html>
"""


def _class(decisions: dict[str, Any]) -> str:
    """The class an attempt's rulings put it in (``correct``, ``adopted``, ...), or "-"."""
    found = [check for check, d in decisions.items() if d.verdict is True]
    return ", ".join(found) or "-"


def render(card: Card, fmt: str) -> str:
    """The card in ``fmt`` (table, markdown, json, html)."""
    return render_card(card, fmt, table=table, markdown=markdown, as_json=as_json, page=page)
