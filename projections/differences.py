"""What differs between compared runs: the section every suite's compare leads with.

A suite hands in rows of ``(name, one value per run)``: its metrics (``metrics=``) and
the facts beside them (``facts=``: wall time, latency, cost, tokens, stages not
applicable, platform options, the platform). It gets back only the rows on which the runs disagree,
laid out as text, Markdown, HTML or JSON, to print before its full matrix; when the
cards carry their runs' traces (``compare``), ``run_facts`` adds whether the runs' units
behaved the same (``projections.determinism``), which the section leads with
(docs/metrics.md, "What differs"). No statistic is computed here, only equality: whether
a difference is resolved is the suite's own interval (``projections.stats``), handed in as
a row's ``note``; ``run_facts`` reads the rows every card shares (``usage_view``). Every
value is made inert (``ledger.inert``) as it comes in.

One line in a suite's compare::

    lead = differences.what_differs(letters, metrics=rows, facts=differences.run_facts(cards))
"""

from __future__ import annotations

import html
from collections.abc import Hashable, Iterable, Sequence
from typing import Any, Final, NamedTuple, Protocol

from benchledger.ledger.inert import inert, inert_md
from benchledger.projections.card import RunMeta, fmt_num, fmt_pct, options_text
from benchledger.projections.determinism import Agreement, traced
from benchledger.projections.prices import Cost, Unpriced
from benchledger.projections.usage import Usage
from benchledger.projections.usage_view import usage_cells

TITLE: Final = "What differs"
NOT_APPLICABLE: Final = "n/a stages"  # the fact row naming what a platform could not run
OPTIONS: Final = "platform options"  # the fact row naming a run's recorded platform options
PLATFORM: Final = "platform"  # the fact row naming what each run measured (platform_label)
__all__ = [  # options_text is card's, re-exported: a suite's compare needs only this module
    "Card", "Differences", "Fact", "Row", "as_json", "html_items", "items", "markdown_lines",
    "options_text", "rate_fact", "run_facts", "text_lines", "what_differs",
]  # fmt: skip


class Fact(NamedTuple):
    """One row: its name, one display value per run (the baseline first), and a note
    (``B: Δ -0.300 [...], resolved``); ``keys``, when given, are what equality is judged
    on (a metric's rate, so ``3/3`` and ``6/6`` agree), else the values themselves."""

    name: str
    values: tuple[str, ...]
    note: str = ""
    keys: tuple[Hashable, ...] = ()

    @property
    def differs(self) -> bool:
        """Whether the runs disagree on this row."""
        return len(set(self.keys or self.values)) > 1


Row = Fact | tuple[str, Sequence[str]] | Agreement  # a Fact, a (name, values) pair, traces


class Differences(NamedTuple):
    """The rows on which the runs disagree: metrics first, then the run facts."""

    letters: tuple[str, ...]
    metrics: tuple[Fact, ...]  # the metrics that differ
    agree: tuple[str, ...]  # the metrics that agree, by name
    facts: tuple[Fact, ...]  # the facts (timing, cost, stages, options) that differ
    traces: Agreement | None = None  # whether the runs' units behaved the same (compare)

    @property
    def nothing(self) -> bool:
        """Nothing differs: every metric and every fact agrees."""
        return not self.metrics and not self.facts


def _fact(row: Fact | tuple[str, Sequence[str]]) -> Fact:
    f = row if isinstance(row, Fact) else Fact(row[0], tuple(row[1]))
    keys = f.keys or f.values  # judged on what came in, before escaping
    clean = tuple(inert(v, value=True) for v in f.values)
    return Fact(inert(f.name, value=True), clean, inert(f.note, value=True), tuple(keys))


def what_differs(
    letters: Sequence[str], metrics: Iterable[Row] = (), facts: Iterable[Row] = ()
) -> Differences:
    """The metrics and facts on which the runs (one value per letter) disagree; an
    ``Agreement`` among the facts (``run_facts``) is the runs' traces."""
    facts = list(facts)
    traces = next((r for r in facts if isinstance(r, Agreement)), None)
    ms = [_fact(r) for r in metrics if not isinstance(r, Agreement)]
    fs = [_fact(r) for r in facts if not isinstance(r, Agreement)]
    for f in (*ms, *fs):
        if len(f.values) != len(letters):
            raise ValueError(f"row {f.name!r} has {len(f.values)} values for {len(letters)} runs")
    return Differences(
        tuple(letters),
        tuple(f for f in ms if f.differs),
        tuple(f.name for f in ms if not f.differs),
        tuple(f for f in fs if f.differs),
        traces,
    )


class Card(Protocol):
    """What every suite's card carries that the run facts are read from."""

    @property
    def meta(self) -> RunMeta: ...
    @property
    def usage(self) -> Usage | None: ...
    @property
    def passed_units(self) -> int: ...
    def priced(self) -> Cost | Unpriced | None: ...


def run_facts(cards: Sequence[Card]) -> list[Row]:
    """The facts every card carries, one value per card: cost, wall, unit and call
    latencies, model calls and tokens (``usage_view.usage_cells``), and the platform
    options each run recorded, and the platform each measured with them (its label). A suite
    adds its own (the lifecycle's stages not applicable). First, when every card carries
    its run's traces, whether the runs' units behaved the same (``determinism.traced``)."""
    usage = usage_cells([(c.usage, c.priced(), c.passed_units) for c in cards])
    traces = traced([c.meta for c in cards])
    return [*([traces] if traces else []), *usage,
            (OPTIONS, [options_text(c.meta.platform_options) for c in cards]),
            (PLATFORM, [c.meta.platform_label for c in cards])]  # fmt: skip


def rate_fact(
    name: str, rates: Sequence[tuple[float, int]], note: str = "", *, mean: bool = False
) -> Fact:
    """A rate metric as a row: each run's ``num/den rate``, judged equal by the rate alone
    (``3/3`` and ``6/6`` agree; ``0/0`` agrees only with ``0/0``). ``mean``: a mean of
    scores that are not shares (MRR's reciprocal ranks), shown ``0.516 (43 episodes)``."""
    if mean:
        values = tuple(f"{n / d:.3f} ({d} episodes)" if d else "n/a (0 episodes)"
                       for n, d in rates)  # fmt: skip
    else:
        values = tuple(f"{fmt_num(n)}/{d} {fmt_pct(n / d) if d else 'n/a'}" for n, d in rates)
    return Fact(name, values, note, tuple(n / d if d else None for n, d in rates))


# -- rendering -----------------------------------------------------------------------------


def _values(d: Differences, f: Fact) -> str:
    return ", ".join(f"{x} = {v}" for x, v in zip(d.letters, f.values, strict=True))


def _agree_line(d: Differences) -> str:
    n = len(d.agree) + len(d.metrics)
    if not d.metrics:
        return f"no metric differs: all {n} agree"
    return f"the other {len(d.agree)} of {n} metrics agree" if d.agree else ""


def items(d: Differences) -> list[str]:
    """The section's lines, unformatted: each differing row with every run's value."""
    if d.nothing:
        n = len(d.agree)
        return [f"nothing differs: all {n} metrics and every recorded run fact agree"]
    out = [f"{f.name}: {_values(d, f)}" + (f" ({f.note})" if f.note else "") for f in d.metrics]
    out += [x for x in (_agree_line(d),) if x]
    out += [f"{f.name}: {_values(d, f)}" + (f" ({f.note})" if f.note else "") for f in d.facts]
    return out


def trace_lines(d: Differences) -> list[str]:
    """The runs' traces, when compared (``determinism.Agreement.lines``), values inert."""
    return [inert(x, value=True) for x in d.traces.lines()] if d.traces else []


def text_lines(d: Differences) -> list[str]:
    """The section for a terminal: the traces' lead (``trace hashes equal: 30 of 30
    units``) and lines, then a heading line and one indented line per row."""
    found, traces = items(d), trace_lines(d)
    lead = [traces[0], *(f"  {x}" for x in traces[1:])] if traces else []
    if d.nothing:
        return [*lead, f"{TITLE.lower()}: {found[0].removeprefix('nothing differs: ')}"]
    return [*lead, f"{TITLE.lower()}:", *(f"  {x}" for x in found)]


def markdown_lines(d: Differences) -> list[str]:
    """The section as Markdown: the traces' lines, a bold heading and a bullet per row."""
    traces = [f"- {inert_md(x)}" for x in trace_lines(d)]
    return [*traces, *([""] if traces else []), f"**{TITLE}**", "",
            *(f"- {inert_md(x)}" for x in items(d)), ""]  # fmt: skip


def html_items(d: Differences) -> str:
    """The section's rows as HTML list items (escaped; the caller's box holds them), the
    traces' lines first."""
    return "".join(f"<li>{html.escape(x)}</li>" for x in [*trace_lines(d), *items(d)])


def as_json(d: Differences) -> dict[str, Any]:
    """The section as JSON: each differing row by name, its value per run letter."""
    keys = [x.lower() for x in d.letters]

    def rows(fs: Sequence[Fact]) -> list[dict[str, Any]]:
        return [
            {"name": f.name, "values": dict(zip(keys, f.values, strict=True)), "note": f.note}
            for f in fs
        ]

    out = {"metrics": rows(d.metrics), "agree": list(d.agree), "facts": rows(d.facts)}
    if d.traces is not None:
        out["traces"] = d.traces.as_json()
    return out
