"""A longmemeval run's card rendered: a terminal table, Markdown, JSON (every question with
its type, prediction, gold answer, retrieved turn ids in rank order and its terms in each
metric) and a plain HTML page. Each shows the metrics overall and per question type."""

from __future__ import annotations

import html
from typing import Any, Final

from benchledger.ledger.inert import inert, inert_md
from benchledger.projections.card import (
    Metric,
    card_standing,
    completeness_json,
    fmt_why,
    html_banner,
    render_card,
    standing_json,
)
from benchledger.projections.source import completeness
from benchledger.projections.suites.locomo.report import judged_by
from benchledger.projections.suites.longmemeval.scorecard import (
    ANSWER_CONTAINS,
    ANSWER_F1,
    DESCRIPTIONS,
    JUDGE_ACCURACY,
    METRIC_NAMES,
    Card,
    retrieval_name,
)
from benchledger.projections.usage_view import usage_json

ROWS_SHOWN: Final = 50  # the table and Markdown list this many questions (JSON lists all)
# The per-type table's columns: the answer bounds and LongMemEval's headline retrieval.
BY_TYPE: Final = (
    ANSWER_CONTAINS,
    ANSWER_F1,
    JUDGE_ACCURACY,
    retrieval_name("recall_all", 5, "session"),
    retrieval_name("ndcg_any", 5, "session"),
    retrieval_name("recall_all", 10, "turn"),
    retrieval_name("ndcg_any", 10, "turn"),
)


def _value(m: Metric) -> str:
    if m.not_measured:
        return fmt_why(m)
    if m.rate is None:
        return "n/a"
    ci = f" [{m.ci.low:.3f}, {m.ci.high:.3f}]" if m.ci is not None else ""
    return f"{m.rate:.3f}{ci}"


def _n(m: Metric) -> str:
    return "-" if m.not_measured else str(m.den)


def header(card: Card) -> list[tuple[str, str]]:
    """What the run is: id, root, agent, platform, data, questions, ingestion, depth."""
    m = card.meta
    landed = sum(1 for _, v, _ in card.ingests if v)
    return [(k, inert(v, value=True)) for k, v in (
        ("run", m.run_id),
        ("run root", m.root or "(unsealed)"),
        ("agent", m.agent or "-"),
        ("platform", m.platform_label),
        ("data sha256", str(m.started.config.get("file_sha256", "-"))),
        ("questions", f"{len(card.rows)} graded of {len(card.units)} units"
                      + (f" ({m.subset})" if m.subset else "")),
        ("ingested", f"{landed} of {len(card.ingests)} haystacks landed whole"),
        ("search depth", f"at most {card.depth} hits per question"),
        ("judge", judged_by(m.started.record)),
        ("harness failures", str(card.harness_failures)),
    )]  # fmt: skip


def banners(card: Card) -> list[str]:
    banner = completeness(card.meta, card.units).banner()
    return [banner] if banner else []


def _items(card: Card) -> list[dict[str, Any]]:
    """Every question as JSON, without a term in a metric the run did not measure."""
    gone = {n for n, m in card.metrics.items() if m.not_measured}
    return [{k: v for k, v in r.as_json().items() if k not in gone} for r in card.rows]


def _said(item: dict[str, Any]) -> str:
    """The judge's verdict on a question, as the table shows it ("": not judged)."""
    found = item.get("judge")
    if not found:
        return ""
    v = found["verdict"]
    return f"judge={'yes' if v else 'no' if v is False else 'not-understood'} "


def table(card: Card) -> str:
    lines = [*banners(card), *card_standing([card.meta])]
    lines += [f"{k:<17} {v}" for k, v in header(card)]
    lines.append("")
    lines += [f"{n:<28} {_value(card.metrics[n]):>6}  (n={_n(card.metrics[n])})"
              for n in METRIC_NAMES]  # fmt: skip
    lines += ["", "per question type:"]
    for group, ms in sorted(card.by_type.items()):
        shown = "  ".join(f"{n}={_value(ms[n])}" for n in BY_TYPE if not ms[n].not_measured)
        lines.append(f"  {group:<26} {shown}")
    lines.append("")
    for j in _items(card)[:ROWS_SHOWN]:
        lines.append(f"{inert(j['id']):<16} {j['question_type']:<26} "
                     f"contains={j[ANSWER_CONTAINS]:.0f} f1={j[ANSWER_F1]:.2f} "
                     + _said(j) + f"answer={inert(j['prediction'])[:60]!s}")  # fmt: skip
    if len(card.rows) > ROWS_SHOWN:
        lines.append(f"... {len(card.rows) - ROWS_SHOWN} more (report --format json lists all)")
    lines += [f"note: {n}" for n in card.notes]
    return "\n".join(lines) + "\n"


def markdown(card: Card) -> str:
    out = [f"**{inert_md(b)}**" for b in banners(card)]
    out += [""] if out else []
    out += [f"# LongMemEval run {inert_md(card.meta.run_id)}", ""]
    out += [f"- {k}: {inert_md(v)}" for k, v in header(card)]
    out += ["", "| metric | value [95% interval] | n | what |", "|---|---|---|---|"]
    out += [f"| {n} | {_value(card.metrics[n])} | {_n(card.metrics[n])} | {DESCRIPTIONS[n]} |"
            for n in METRIC_NAMES]  # fmt: skip
    out += ["", "| question type | " + " | ".join(BY_TYPE) + " |",
            "|---|" + "---|" * len(BY_TYPE)]  # fmt: skip
    for group, ms in sorted(card.by_type.items()):
        out.append(f"| {group} | " + " | ".join(_value(ms[n]) for n in BY_TYPE) + " |")
    out += ["", "| question | type | contains gold | F1 | prediction | gold |",
            "|---|---|---|---|---|---|"]  # fmt: skip
    for j in _items(card)[:ROWS_SHOWN]:
        said, gold = inert_md(j["prediction"][:80]), inert_md(j["gold_answer"][:80])
        out.append(f"| {inert_md(j['id'])} | {j['question_type']} | {j[ANSWER_CONTAINS]:.0f} | "
                   f"{j[ANSWER_F1]:.2f} | {said} | {gold} |")  # fmt: skip
    out += [f"\nnote: {inert_md(n)}" for n in card.notes]
    return "\n".join(out) + "\n"


def as_json(card: Card) -> dict[str, Any]:
    m = card.meta
    return {
        "suite": "longmemeval",
        "run_id": m.run_id,
        "root": m.root,
        "standing": standing_json([m]),
        "agent": m.agent,
        "platform": m.platform,
        "platform_label": m.platform_label,
        "platform_facts": m.platform_facts,
        "file_sha256": m.started.config.get("file_sha256"),
        "judge": dict(m.started.record.judge) if m.started.record is not None else {},
        "search_depth": card.depth,
        "metrics": {
            n: {**card.metrics[n].as_json(), "label": DESCRIPTIONS[n]} for n in METRIC_NAMES
        },
        "by_type": {
            g: {n: ms[n].as_json() for n in METRIC_NAMES} for g, ms in sorted(card.by_type.items())
        },
        "items": _items(card),
        "ingestion": [{"stream": s, "verdict": v, "reason": why} for s, v, why in card.ingests],
        "harness_failures": card.harness_failures,
        "incomplete": card.incomplete,
        "usage": usage_json(card.usage, None, 0) if card.usage is not None else None,
        "notes": list(card.notes),
        **completeness_json([completeness(card.meta, card.units)]),
    }


def page(card: Card) -> str:
    e = html.escape
    rows = "".join(f"<tr><td>{e(n)}</td><td>{e(_value(card.metrics[n]))}</td>"
                   f"<td>{_n(card.metrics[n])}</td><td>{e(DESCRIPTIONS[n])}</td></tr>"
                   for n in METRIC_NAMES)  # fmt: skip
    types = "".join(
        f"<tr><td>{e(g)}</td>" + "".join(f"<td>{e(_value(ms[n]))}</td>" for n in BY_TYPE) + "</tr>"
        for g, ms in sorted(card.by_type.items())
    )
    items = "".join(
        f"<tr><td>{e(j['id'])}</td><td>{e(j['question_type'])}</td>"
        f"<td>{j[ANSWER_CONTAINS]:.0f}</td><td>{j[ANSWER_F1]:.2f}</td>"
        f"<td>{e(j['prediction'])}</td><td>{e(j['gold_answer'])}</td>"
        f"<td>{e(' '.join(j['retrieved'][:10]))}</td></tr>"
        for j in _items(card)
    )
    head = "".join(f"<li>{e(k)}: {e(v)}</li>" for k, v in header(card))
    cols = "".join(f"<th>{e(n)}</th>" for n in BY_TYPE)
    return (
        f"<!doctype html><meta charset=utf-8><title>LongMemEval {e(card.meta.run_id)}</title>"
        f"{html_banner(banners(card))}<ul>{head}</ul>"
        f"<table><tr><th>metric</th><th>value</th><th>n</th><th>what</th></tr>{rows}</table>"
        f"<table><tr><th>question type</th>{cols}</tr>{types}</table>"
        f"<table><tr><th>question</th><th>type</th><th>contains gold</th><th>F1</th>"
        f"<th>prediction</th><th>gold</th><th>retrieved</th></tr>{items}</table>\n"
    )


def render(card: Card, fmt: str) -> str:
    """``card`` in ``fmt`` (table, markdown, json, html)."""
    return render_card(card, fmt, table=table, markdown=markdown, as_json=as_json, page=page)
