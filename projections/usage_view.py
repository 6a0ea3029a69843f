"""A run's usage and cost as report rows and as JSON (docs/metrics.md, "Cost and latency").

Numbers are rounded here for display only; ``usage_json`` keeps full precision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

from benchledger.projections.prices import Cost, Unpriced, per_pass
from benchledger.projections.usage import PERCENTILE_METHOD, Usage, percentile

USAGE_ROWS: Final = ("cost (USD)", "cost per passed unit", "wall", "unit p50 / p95",
                     "model call p50 / p95", "tool call p50 / p95", "model calls",
                     "tokens in / out")  # fmt: skip
NOT_RECORDED: Final = "not recorded"  # model calls of a run that records tokens only
TOKEN_LABELS = (
    ("input", "in"),
    ("output", "out"),
    ("cache_read", "cache read"),
    ("cache_creation", "cache write"),
)


def seconds(s: float) -> str:
    """A duration in seconds for display: ``0.21 s``, ``8.3 s``, ``7,341 s (2 h 2 min)``."""
    if s < 1:
        return f"{s:.2f} s"
    if s < 100:
        return f"{s:.1f} s"
    minutes = round(s / 60)
    human = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min"
    return f"{s:,.0f} s ({human})"


def millis(ms: float) -> str:
    """A latency for display: ``9.6 ms``, ``812 ms``, ``2.1 s``."""
    if ms < 10:
        return f"{ms:.1f} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    return f"{ms / 1000:.1f} s"


def dollars(usd: float) -> str:
    """USD for display with enough digits to show a small cost: ``$20.25``, ``$0.0123``."""
    if usd == 0 or usd >= 1:
        return f"${usd:,.2f}"
    if usd >= 0.01:
        return f"${usd:.4f}"
    return f"${usd:.6f}"


def _duration(u: Usage) -> str:
    wall = "wall not known" if u.wall_s is None else f"{seconds(u.wall_s)} wall"
    if not u.unit_s:
        return f"{wall}; per-unit timing not recorded"
    p50, p95 = percentile(u.unit_s, 50), percentile(u.unit_s, 95)
    assert p50 is not None and p95 is not None  # unit_s is not empty
    n = len(u.unit_s)
    return f"{wall}; per unit p50 {seconds(p50)}, p95 {seconds(p95)} ({n} unit{'s' * (n != 1)})"


def _calls(u: Usage) -> str:
    if not u.calls_recorded:
        return (f"{NOT_RECORDED}: the run holds tokens but no model_call events (an import "
                "records the source's token counts, not its model calls)")  # fmt: skip
    if not (u.model_calls or u.failed_calls or u.withheld_calls):
        return "none recorded"
    text = f"{u.model_calls:,}"
    p50, p95 = percentile(u.latencies_ms, 50), percentile(u.latencies_ms, 95)
    if p50 is not None and p95 is not None:
        text += f", latency p50 {millis(p50)}, p95 {millis(p95)}"
    extra = [
        f"{n:,} {what}{'s' * (n != 1 and what.endswith('attempt'))}"
        for n, what in (
            (u.retries, "answered after a retry"),
            (u.failed_calls, "failed attempt"),
            (u.withheld_calls, "withheld by redaction"),
        )
        if n
    ]
    return "; ".join([text, *extra])


def _tool_calls(u: Usage) -> str:
    """The platform's tool calls and how fast it answered (session_call latency_ms)."""
    p50, p95 = percentile(u.tool_latencies_ms, 50), percentile(u.tool_latencies_ms, 95)
    if p50 is None or p95 is None:
        return "none timed"
    return f"{len(u.tool_latencies_ms):,}, latency p50 {millis(p50)}, p95 {millis(p95)}"


class CostText(NamedTuple):
    """A cost as display text: its total and per-pass amounts, or why it has none."""

    usd: str  # "$0.0123"; "" when not priced
    each: str  # per passed unit; "" when not priced or nothing passed
    nominal: str  # " (nominal)" when a NOMINAL row priced it, else ""
    why: str  # not priced: the reason in a sentence ("" when priced)
    brief: str  # not priced: the reason in a few words, for a table cell


def cost_text(priced: Cost | Unpriced | None, passed: int) -> CostText:
    """The one formatting of a cost (report rows, the HTML headline, compare's cells)."""
    if priced is None:
        return CostText("", "", "", "no price table", "no price table")
    if isinstance(priced, Unpriced):
        return CostText("", "", "", priced.reason, priced.brief or priced.reason)
    each = per_pass(priced, passed)
    nominal = " (nominal)" if priced.nominal else ""
    return CostText(dollars(priced.usd), "" if each is None else dollars(each), nominal, "", "")


def _cost(priced: Cost | Unpriced | None, passed: int, noun: str) -> str:
    shown = cost_text(priced, passed)
    if not isinstance(priced, Cost):
        return f"not priced: {shown.why}"
    text = f"{shown.usd} at prices of {priced.date.isoformat()} ({priced.source})"
    if priced.nominal:
        text += f", a NOMINAL price for {priced.priced_as}"
    elif priced.match != "exact":
        text += f", {priced.model} priced as {priced.priced_as} ({priced.match})"
    text += f"; {shown.each} per passed {noun}" if shown.each else "; nothing passed"
    return text


def cost_cells(priced: Cost | Unpriced | None, passed: int) -> tuple[str, str]:
    """A compare column's cost and cost per passed unit (``-`` for none), nominal marked."""
    shown = cost_text(priced, passed)
    if shown.brief:
        return f"not priced: {shown.brief}", "-"
    return shown.usd + shown.nominal, shown.each + shown.nominal if shown.each else "-"


def _pair(values: Sequence[float], show: Callable[[float], str]) -> str:
    p50, p95 = percentile(values, 50), percentile(values, 95)
    return "-" if p50 is None or p95 is None else f"{show(p50)} / {show(p95)}"


def usage_cells(
    columns: Sequence[tuple[Usage | None, Cost | Unpriced | None, int]],
) -> list[tuple[str, tuple[str, ...]]]:
    """Compare's cost and latency rows, one cell per (usage, priced, passed) column; none
    when no column has a usage (docs/metrics.md, "Cost and latency")."""
    if all(u is None for u, _, _ in columns):
        return []
    rows: dict[str, list[str]] = {k: [] for k in USAGE_ROWS}
    for u, priced, passed in columns:
        usd, each = cost_cells(priced, passed)
        rows["cost (USD)"].append(usd)
        rows["cost per passed unit"].append(each)
        if u is None:
            for key in USAGE_ROWS[2:]:
                rows[key].append("-")
            continue
        rows["wall"].append("-" if u.wall_s is None else seconds(u.wall_s))
        rows["unit p50 / p95"].append(_pair(u.unit_s, seconds))
        rows["model call p50 / p95"].append(_pair(u.latencies_ms, millis))
        rows["tool call p50 / p95"].append(_pair(u.tool_latencies_ms, millis))
        rows["model calls"].append(f"{u.model_calls:,}" if u.calls_recorded else NOT_RECORDED)
        rows["tokens in / out"].append(
            f"{u.tokens.get('input', 0):,} / {u.tokens.get('output', 0):,}"
        )
    return [(k, tuple(v)) for k, v in rows.items()]


def usage_lines(
    usage: Usage, priced: Cost | Unpriced | None, passed: int, noun: str = "protocol"
) -> list[tuple[str, str]]:
    """(label, value) rows for a report: duration, model calls, tokens, cost, timings.

    ``passed`` counts what passed (``noun``: a protocol at k = 1, a protocol attempt at k > 1).
    """
    tokens = ", ".join(f"{label} {usage.tokens.get(k, 0):,}" for k, label in TOKEN_LABELS)
    return [
        ("duration", _duration(usage)),
        ("model calls", _calls(usage)),
        ("tool calls", _tool_calls(usage)),
        ("tokens", tokens),
        ("cost", _cost(priced, passed, noun)),
        ("timings", usage.source),
    ]


def _summary(values: tuple[float, ...]) -> dict[str, Any]:
    return {
        "n": len(values),
        "p50": percentile(values, 50),
        "p95": percentile(values, 95),
        "mean": sum(values) / len(values) if values else None,
        "max": max(values) if values else None,
    }


def usage_json(usage: Usage, priced: Cost | Unpriced | None, passed: int) -> dict[str, Any]:
    """The usage and cost as JSON values at full precision (None where not known)."""
    cost: dict[str, Any]
    if priced is None:
        cost = {"usd": None, "reason": "no price table"}
    elif isinstance(priced, Unpriced):
        cost = {"usd": None, "reason": priced.reason, "model": priced.model,
                "prices_date": priced.date.isoformat(), "prices_source": priced.source}  # fmt: skip
    else:
        cost = {
            "usd": priced.usd,
            "per_passed_usd": per_pass(priced, passed),
            "passed": passed,
            "parts_usd": dict(priced.parts),
            "model": priced.model,
            "priced_as": priced.priced_as,
            "match": priced.match,
            "nominal": priced.nominal,
            "prices_date": priced.date.isoformat(),
            "prices_source": priced.source,
        }
    return {
        "wall_s": usage.wall_s,
        "unit_s": _summary(usage.unit_s),
        "model_calls": {
            "recorded": usage.calls_recorded,  # false: the counts below are not known
            "answered": usage.model_calls if usage.calls_recorded else None,
            "failed": usage.failed_calls,
            "retries": usage.retries,
            "withheld": usage.withheld_calls,
            "latency_ms": _summary(usage.latencies_ms),
        },
        "tool_calls": {"latency_ms": _summary(usage.tool_latencies_ms)},
        "tokens": dict(usage.tokens),
        "model": usage.model,
        "models": list(usage.models),
        "runs": usage.runs,
        "cost": cost,
        "percentile": PERCENTILE_METHOD,
        "source": usage.source,
    }
