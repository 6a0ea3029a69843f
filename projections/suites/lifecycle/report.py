"""Scorecards rendered: a terminal table, a Markdown scorecard, JSON, and one HTML page."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from benchledger.ledger.inert import inert_rows
from benchledger.projections import disclosure, measured
from benchledger.projections.card import (
    CI_CLUSTER,
    CI_LABELS,
    CI_WILSON,
    Metric,
    RunMeta,
    card_standing,
    completeness_json,
    failed_text,
    fmt_frac,
    fmt_interval,
    fmt_num,
    fmt_rate,
    fmt_signed,
    fmt_why,
    options_text,
    render_card,
    standing_json,
)
from benchledger.projections.sheet import markdown_items
from benchledger.projections.source import Completeness, completeness
from benchledger.projections.suites.lifecycle import page as html_page
from benchledger.projections.suites.lifecycle import ranks
from benchledger.projections.suites.lifecycle.compare import GateRow, Row
from benchledger.projections.suites.lifecycle.scorecard import (
    CHECKS,
    METRICS,
    Scorecard,
)
from benchledger.projections.usage_view import cost_text, seconds, usage_json, usage_lines

NOT_APPLICABLE: Final = "not applicable"  # how a decision for a stage the platform lacks begins
FUNNEL: Final = (
    ("teach", None),
    ("capture", "capture_rate"),
    ("recall", "personal_recall"),
    ("promote", None),
    ("transfer", "transfer_rate"),
)


def _rate(m: Metric) -> str:
    return f"{fmt_rate(m):>6}"


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
    return "; ".join(x for x in (fmt_why(m), m.label, _ci_note(m, card), withheld) if x)


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


@inert_rows  # values from the run's own events: shown inert
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
        ("platform", m.platform_label),
        ("platform options", options_text(m.platform_options)),
        ("k", k_text + ("  COUPLED: attempts shared platform state" if coupled else "")),
        (
            "units",
            f"{sum(u.counted for u in card.units)} finished, "
            f"{failed_text(run_completeness(card))} (excluded from rates), "
            f"{card.incomplete} incomplete",
        ),
        *(usage_rows(card) or [("tokens", token_text)]),
        ("intervals", "95%, " + intervals_line(card)),
        *_withheld_line(card),
        *_not_applicable_line(card),
        *_not_measured_line(card),
    ]


def _not_measured_line(card: Scorecard) -> list[tuple[str, str]]:
    """What the probe declared, before any unit, that the run cannot measure."""
    found = measured.declared_lines(r.started.record for r in card.runs)
    return [("not measured", "; ".join(found))] if found else []


def _passed_noun(card: Scorecard) -> str:
    return "protocol" if card.k == 1 else "protocol attempt"


def usage_rows(card: Scorecard) -> list[tuple[str, str]]:
    """Duration, model calls, tokens and cost (docs/metrics.md, "Cost and latency")."""
    if card.usage is None:
        return []
    return usage_lines(card.usage, card.priced(), card.passed_units, _passed_noun(card))


def usage_doc(card: Scorecard) -> dict[str, Any]:
    """The JSON ``usage`` of a card (empty when it has none)."""
    if card.usage is None:
        return {}
    return {"usage": usage_json(card.usage, card.priced(), card.passed_units)}


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
        frac = fmt_frac(m)
        row = f"{m.name:<30} {frac:>11} {_rate(m):>7}  {_ci(m):<16}  {_note(m, card)}"
        lines.append(row.rstrip())
    lines += ["", *retrieval_lines(card)]
    return "\n".join(lines) + "\n"


RETRIEVAL_HEAD: Final = ("stage", "episodes", "recall@1", "recall@5", "recall@10", "MRR")


def retrieval_rows(card: Scorecard) -> list[tuple[str, ...]]:
    """The retrieval table: all ranked stages, then each stage, as display strings."""
    out = []
    for stage in ("", *ranks.RANKED):
        mrr = card.metrics[ranks.mrr_name(stage)]
        cells = [ranks.display(card.metrics[ranks.recall_name(k, stage)]) for k in (1, 5, 10)]
        out.append((stage or "all ranked", str(mrr.den), *cells, ranks.display(mrr)))
    return out


def retrieval_title(card: Scorecard) -> str:
    """What the retrieval table is, and why it is empty when it is."""
    title = "retrieval: the taught fact's rank in each episode's first search call"
    why = fmt_why(card.metrics[ranks.mrr_name()])
    return title + (f" ({why})" if why else f" (no ranks: {card.ranks_note})" if card.ranks_note
                    else "")  # fmt: skip


def leak_line(card: Scorecard) -> str:
    """The abstain distractor diagnostic as one line."""
    m = card.metrics[ranks.LEAK]
    return (
        f"{ranks.LEAK} {fmt_frac(m)} {ranks.display(m)}: abstain episodes whose "
        f"first search put the taught (non-answering) fact in its top {ranks.LEAK_K}; "
        "a diagnostic, in no recall@k"
    )


def retrieval_lines(card: Scorecard) -> list[str]:
    """The retrieval table for the terminal."""
    rows = [RETRIEVAL_HEAD, *retrieval_rows(card)]
    widths = [max(len(r[i]) for r in rows) for i in range(len(RETRIEVAL_HEAD))]
    lines = [retrieval_title(card)]
    for r in rows:
        lines.append(
            "  "
            + "  ".join(
                c.ljust(w) if i == 0 else c.rjust(w)
                for i, (c, w) in enumerate(zip(r, widths, strict=True))
            )
        )
    return [*lines, leak_line(card)]


def markdown(card: Scorecard) -> str:
    """A Markdown scorecard to paste in a pull request (a partial run's banner first)."""
    out = [f"**{b}**" for b in [*banners(card), *card_standing(card.runs)]]
    out += [""] if out else []
    out += ["### benchledger lifecycle scorecard", ""]
    out += markdown_items(header_lines(card))
    out += ["", "| metric | num/den | rate | 95% CI | note |", "| --- | ---: | ---: | --- | --- |"]
    for m in _metrics(card):
        out.append(f"| {m.name} | {fmt_frac(m)} | {fmt_rate(m)} | {_ci(m)} | {_note(m, card)} |")
    out += ["", f"**{retrieval_title(card)}**", ""]
    out += ["| " + " | ".join(RETRIEVAL_HEAD) + " |", "| --- |" + " ---: |" * 5]
    out += ["| " + " | ".join(r) + " |" for r in retrieval_rows(card)]
    out += ["", leak_line(card)]
    return "\n".join(out) + "\n"


def as_json(card: Scorecard) -> dict[str, Any]:
    """Every metric as {num, den, rate, ci_low, ci_high}, run metadata, per-protocol outcomes."""
    metrics: dict[str, Any] = {}
    for m in _metrics(card):
        entry = m.as_json()
        if m.label:
            entry["label"] = m.label
        metrics[m.name] = entry
    for name in ranks.NAMES:
        m = card.metrics[name]
        metrics[name] = {**m.as_json(), "ci_method": m.ci_method if m.ci else None,
                         **({"label": m.label} if m.label else {})}  # fmt: skip
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
                "platform_options": r.platform_options,
                "platform_label": r.platform_label,
                "platform_facts": r.platform_facts,
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
        "retrieval": {
            "rule": "rank of the stage's fact (protocols.grading.surfaced) among the hits "
            "(projections.retrieval.hits) of the episode's first search call; null: a miss",
            "stages": list(ranks.RANKED),
            "diagnostic": ranks.LEAK,
            "note": card.ranks_note,
        },
        "harness_failures": card.harness_failures,
        "incomplete": card.incomplete,
        "tokens": card.tokens,
        **usage_doc(card),
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
                    "ranks": dict(u.ranks),
                }
                for u in units
            ]
            for pid, units in card.per_protocol().items()
        },
    }


def _withheld_json(card: Scorecard) -> dict[str, Any]:
    d = disclosure.disclosure(card)
    return {"withheld": disclosure.as_json(d)} if d.any else {}


def headline_usage(card: Scorecard) -> list[tuple[str, str]]:
    """What the run cost and how long it took, as (label, value) for the HTML headline."""
    if card.usage is None:
        return []
    out = []
    shown = cost_text(card.priced(), card.passed_units)
    if shown.usd and not shown.nominal:  # a nominal price (the fake model) is a detail only
        out.append(("cost", shown.usd))
    if shown.each and not shown.nominal:
        out.append((f"cost per passed {_passed_noun(card)}", shown.each))
    if card.usage.wall_s is not None:
        out.append(("wall duration", seconds(card.usage.wall_s)))
    return out


def page(card: Scorecard) -> str:
    """A self-contained HTML page: no scripts, no fonts, nothing fetched at view time."""
    notes = {m.name: _note(m, card) for m in html_page.metrics(card)}
    prose = html_page.Prose(
        header_lines(card), banners(card), intervals_line(card), notes, headline_usage(card)
    )
    return html_page.page(card, prose)


def render(card: Scorecard, fmt: str) -> str:
    """The scorecard in ``fmt`` (table, markdown, json, html)."""
    return render_card(card, fmt, table=table, markdown=markdown, as_json=as_json, page=page)


def _resolves(r: Row) -> str:
    return "" if r.resolution is None else f"±{r.resolution:.3f}"


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
        if r.not_measured:  # no number for what a run could not measure
            fa = fb = "-"
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
