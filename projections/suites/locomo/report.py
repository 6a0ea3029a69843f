"""A locomo run's card rendered: a terminal table, Markdown, JSON (every question with its
id, category, prediction, gold answer, F1, evidence recall and retrieved dialogue ids in
rank order) and a plain HTML page. Runs side by side are ``compare.py``."""

from __future__ import annotations

import html
import statistics
from typing import Any, Final

from benchledger.ledger.events import RunRecord
from benchledger.ledger.inert import inert, inert_md
from benchledger.projections.card import (
    card_standing,
    completeness_json,
    fmt_num,
    fmt_why,
    html_banner,
    render_card,
    standing_json,
)
from benchledger.projections.source import completeness
from benchledger.projections.suites.locomo.decisions import EVIDENCE
from benchledger.projections.suites.locomo.scorecard import (
    CI_METHOD,
    DESCRIPTIONS,
    J_ALL,
    J_CAT_1_4,
    METRIC_NAMES,
    RECALL_AT,
    Card,
    search_depth,
)
from benchledger.projections.usage_view import usage_json

ROWS_SHOWN: Final = 50  # the table and Markdown list this many questions (JSON lists all)


def _value(card: Card, name: str) -> str:
    m = card.metrics[name]
    if m.not_measured:
        return fmt_why(m)
    if m.rate is not None and name in (J_CAT_1_4, J_ALL):  # the denominator stated
        return f"{m.rate:.3f} ({m.num:.0f}/{m.den})"
    return "n/a" if m.rate is None else f"{m.rate:.3f}"


def calibration_line(card: Card) -> str:
    """A judge calibration run's false accepts and rejects ("": not one): over the answers
    planted wrong, and those planted right (correct and paraphrased)."""
    from benchledger.protocols.locomo_calibration import SHOULD_ACCEPT, kind_of

    judged = [(kind_of(r.item.sample.sample_id), r.judged.verdict) for r in card.rows
              if r.judged is not None and kind_of(r.item.sample.sample_id)]  # fmt: skip
    wrong = [v for k, v in judged if k not in SHOULD_ACCEPT]
    right = [v for k, v in judged if k in SHOULD_ACCEPT]
    if not wrong or not right:
        return ""
    fa, fr = sum(v is True for v in wrong), sum(v is not True for v in right)
    return (f"false accept {fa}/{len(wrong)} ({fa / len(wrong):.3f}) of wrong on-topic "
            f"answers, false reject {fr}/{len(right)} ({fr / len(right):.3f}) of correct "
            "and paraphrased ones")  # fmt: skip


def judge_line(card: Card) -> str:
    """The judge as the run recorded it (``judged_by``)."""
    return judged_by(card.meta.started.record)


def judged_by(record: RunRecord | None) -> str:
    """The judge as a run's ``record`` holds it: model, prompt and its hash, temperature,
    seed, samples, the run it regraded ("none": no judge). Every suite with a judge."""
    j = record.judge if record is not None else {}
    if not j:
        return "none"
    seed = "none" if j.get("seed") is None else j.get("seed")
    line = (f"{j.get('spec')} (model {j.get('model')}), prompt {j.get('prompt')} sha256 "
            f"{str(j.get('prompt_sha256'))[:12]}, temperature {j.get('temperature')}, seed "
            f"{seed}, {j.get('samples')} sample(s) per answer")  # fmt: skip
    source = record.regraded if record is not None else {}
    if source:  # a regrade: the answers are another run's, named by its root
        line += f"; regraded from run {source.get('run')} (root {source.get('root')})"
    return line


def _ci(card: Card, name: str) -> str:
    """The mean's 95% interval (``-``: not measured, or too few questions for one)."""
    ci = card.metrics[name].ci
    return "-" if ci is None or card.metrics[name].not_measured else f"[{ci.low:.3f},{ci.high:.3f}]"


def depth_line(card: Card) -> str:
    """How deep the run's searches reached, and what evidence recall is beside recall@k."""
    depth = search_depth(card.rows)
    if depth is None:
        return "none: no question searched"
    same = f"; evidence_recall counts every id retrieved: here recall_at_{depth}" if (
        depth in RECALL_AT) else ""  # fmt: skip
    return f"{depth} (recall@k for k above it: not measured){same}"


def _n(card: Card, name: str) -> str:
    m = card.metrics[name]
    return "-" if m.not_measured else str(m.den)


def _items(card: Card) -> list[dict[str, Any]]:
    """Every question as JSON; where the run could not measure retrieval (its hits had no
    ids), a question's evidence recall and ranks are not given (never a 0)."""
    out = [r.as_json() for r in card.rows]
    for name in RECALL_AT.values():  # a cut-off beyond the search depth: no number
        if card.metrics[name].not_measured:
            for j in out:
                j[name] = None
    if card.metrics[EVIDENCE].not_measured:
        for j in out:
            j.update(evidence_recall=None, evidence_ranks=None, reciprocal_rank=None,
                     retrieved=None)  # fmt: skip
    return out


def header(card: Card) -> list[tuple[str, str]]:
    """What the run is: id, root, agent, platform, data, questions, ingestion."""
    m = card.meta
    config = m.started.config
    landed = sum(1 for _, v, _ in card.ingests if v)
    calibrated = calibration_line(card)
    return [(k, inert(v, value=True)) for k, v in (  # the run's own words: one line each
        ("run", m.run_id),
        ("run root", m.root or "(unsealed)"),
        ("agent", m.agent or "-"),
        ("judge", judge_line(card)),
        *((("calibration", calibrated),) if calibrated else ()),
        ("platform", m.platform_label),
        ("data sha256", str(config.get("file_sha256", "-"))),
        ("questions", f"{len(card.rows)} graded of {len(card.units)} units"
                      + (f" ({m.subset})" if m.subset else "")),
        ("ingested", f"{landed} of {len(card.ingests)} sample ingestions landed whole"),
        ("search depth", depth_line(card)),
        ("ask latency", _latency(card)),
        ("tokens", _tokens(card)),
        ("harness failures", str(card.harness_failures)),
        *(card.conditions.lines() if card.conditions is not None else ()),
    )]  # fmt: skip


def banners(card: Card) -> list[str]:
    """The line every format starts with when the run is partial or some of its questions
    did not run (``Completeness.banner``: "2 of 12 units did not run (harness failure)")."""
    banner = completeness(card.meta, card.units).banner()
    return [banner] if banner else []


def _latency(card: Card) -> str:
    """The median and the slowest question's tool-call time, over the graded questions."""
    times = sorted(r.asked.latency_ms for r in card.rows)
    if not times:
        return "-"
    return f"median {statistics.median(times):.1f} ms, max {times[-1]:.1f} ms per question"


def _tokens(card: Card) -> str:
    """The model tokens the run's questions used (none for the model-free agents)."""
    total: dict[str, int] = {}
    for r in card.rows:
        for key, n in r.unit.tokens.items():
            total[key] = total.get(key, 0) + int(n)
    return ", ".join(f"{k} {v}" for k, v in sorted(total.items()) if v) or "none recorded"


def table(card: Card) -> str:
    """The card as terminal text."""
    lines = [*banners(card), *card_standing([card.meta])]
    lines += [f"{k:<17} {v}" for k, v in header(card)]
    lines.append("")
    values = {n: _value(card, n) for n in METRIC_NAMES}
    # J states its denominator ("0.600 (6/10)"): the column is as wide as the widest number
    w = max([6, *(len(v) for n, v in values.items() if not card.metrics[n].not_measured)])
    lines.append(f"{'metric':<26} {'mean':>{w}}  {'95% CI':<15}")
    lines += [f"{n:<26} {values[n]:>{w}}  {_ci(card, n):<15} (n={_n(card, n)})"
              for n in METRIC_NAMES]  # fmt: skip
    lines += [f"95% CI: {CI_METHOD}", ""]
    for j in _items(card)[:ROWS_SHOWN]:
        ev = "-" if j["evidence_recall"] is None else fmt_num(j["evidence_recall"], 2)
        lines.append(f"{inert(j['id']):<16} c{j['category']} f1={j['f1']:.2f} ev={ev} "
                     f"answer={inert(j['prediction'])[:60]!s}")  # fmt: skip
    if len(card.rows) > ROWS_SHOWN:
        lines.append(f"... {len(card.rows) - ROWS_SHOWN} more (report --format json lists all)")
    lines += [f"note: {n}" for n in card.notes]
    return "\n".join(lines) + "\n"


def markdown(card: Card) -> str:
    """The card as Markdown."""
    out = [f"**{inert_md(b)}**" for b in banners(card)]
    out += [""] if out else []
    out += [f"# LoCoMo run {inert_md(card.meta.run_id)}", ""]
    out += [f"- {k}: {inert_md(v)}" for k, v in header(card)]
    out += ["", "| metric | value | 95% CI | n | what |", "|---|---|---|---|---|"]
    out += [f"| {n} | {_value(card, n)} | {_ci(card, n)} | {_n(card, n)} | {DESCRIPTIONS[n]} |"
            for n in METRIC_NAMES]  # fmt: skip
    out += ["", f"95% CI: {CI_METHOD}"]
    out += ["", "| question | category | F1 | evidence recall | prediction | gold |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for j in _items(card)[:ROWS_SHOWN]:
        ev = "n/a" if j["evidence_recall"] is None else f"{j['evidence_recall']:.2f}"
        said, gold = inert_md(j["prediction"][:80]), inert_md(j["gold_answer"][:80])
        out.append(f"| {inert_md(j['id'])} | {j['category_name']} | {j['f1']:.2f} | {ev} | "
                   f"{said} | {gold} |")  # fmt: skip
    out += [f"\nnote: {inert_md(n)}" for n in card.notes]
    return "\n".join(out) + "\n"


def as_json(card: Card) -> dict[str, Any]:
    """The card as JSON: the run, every metric, every question."""
    m = card.meta
    return {
        "suite": "locomo",
        "run_id": m.run_id,
        "root": m.root,
        "standing": standing_json([m]),
        "agent": m.agent,
        "platform": m.platform,
        "platform_label": m.platform_label,
        "platform_facts": m.platform_facts,
        "file_sha256": m.started.config.get("file_sha256"),
        "judge": dict(m.started.record.judge) if m.started.record is not None else {},
        "calibration": calibration_line(card) or None,
        "metrics": {
            n: {**card.metrics[n].as_json(), "label": DESCRIPTIONS[n]} for n in METRIC_NAMES
        },
        "search_depth": search_depth(card.rows),
        "interval_method": CI_METHOD,
        "items": _items(card),
        "ingestion": [{"stream": s, "verdict": v, "reason": why} for s, v, why in card.ingests],
        "harness_failures": card.harness_failures,
        "incomplete": card.incomplete,
        "usage": usage_json(card.usage, None, 0) if card.usage is not None else None,
        "ask_latency_ms": {
            "median": statistics.median(t)
            if (t := [r.asked.latency_ms for r in card.rows])
            else None,
            "max": max(t) if t else None,
        },
        "notes": list(card.notes),
        "conditions": card.conditions.as_json() if card.conditions is not None else None,
        **completeness_json([completeness(card.meta, card.units)]),
    }


def page(card: Card) -> str:
    """The card as a plain HTML page (every value escaped)."""
    e = html.escape
    rows = "".join(f"<tr><td>{e(n)}</td><td>{e(_value(card, n))}</td><td>{e(_ci(card, n))}</td>"
                   f"<td>{_n(card, n)}</td><td>{e(DESCRIPTIONS[n])}</td></tr>"
                   for n in METRIC_NAMES)  # fmt: skip
    items = "".join(
        f"<tr><td>{e(j['id'])}</td><td>{e(j['category_name'])}</td><td>{j['f1']:.2f}</td>"
        f"<td>{e(j['prediction'])}</td><td>{e(j['gold_answer'])}</td>"
        f"<td>{e(' '.join((j['retrieved'] or [])[:10]))}</td></tr>"
        for j in _items(card)
    )
    head = "".join(f"<li>{e(k)}: {e(v)}</li>" for k, v in header(card))
    return (
        f"<!doctype html><meta charset=utf-8><title>LoCoMo {e(card.meta.run_id)}</title>"
        f"{html_banner(banners(card))}<ul>{head}</ul>"
        f"<table><tr><th>metric</th><th>value</th><th>95% CI</th><th>n</th><th>what</th>"
        f"</tr>{rows}</table><p>95% CI: {e(CI_METHOD)}</p>"
        f"<table><tr><th>question</th><th>category</th><th>F1</th>"
        f"<th>prediction</th><th>gold</th><th>retrieved</th></tr>{items}</table>\n"
    )


def render(card: Card, fmt: str) -> str:
    """``card`` in ``fmt`` (table, markdown, json, html)."""
    return render_card(card, fmt, table=table, markdown=markdown, as_json=as_json, page=page)
