"""Runs side by side as one sheet, the layout every suite's ``compare`` shares.

One column per run (lettered A, B, ...; A the baseline), one row per metric: each cell the
column's own value and, under it, its difference from the baseline (none for the baseline
itself), then plain rows of one value per column (cost and latency). A suite says what
goes in the cells; the sheet lays them out as a terminal grid, Markdown, JSON and HTML rows.
"""

from __future__ import annotations

import html
import string
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from benchledger.ledger.inert import inert_md

Rows = Mapping[str, Sequence["Cell"]]  # metric -> one cell per column, the baseline first
Extra = Sequence[tuple[str, Sequence[str]]]  # (row name, one value per column)


class Cell(NamedTuple):
    """One column's value for a metric and its difference from the baseline ("" for it)."""

    own: str
    diff: str = ""


def letters(n: int) -> tuple[str, ...]:
    """The letters of ``n`` columns: A to Z, then AA to ZZ, and so on."""
    abc = string.ascii_uppercase
    return tuple(abc[i % 26] * (1 + i // 26) for i in range(n))


def table_lines(heads: Sequence[str], rows: Rows, extra: Extra, baseline: str) -> list[str]:
    """The sheet as a terminal grid: per metric a row of values and a ``vs`` row of
    differences, then the extra rows; every column as wide as its widest cell."""
    grid = [["metric", *heads]]
    for name, cells in rows.items():
        grid.append([name, *(c.own for c in cells)])
        grid.append([f"  vs {baseline}", *(c.diff for c in cells)])
    grid += [[name, *values] for name, values in extra]
    return align(grid)


def align(grid: Sequence[Sequence[str]]) -> list[str]:
    """Rows of cells as lines, each column as wide as its widest cell plus two spaces."""
    widths = [max(len(row[i]) for row in grid) + 2 for i in range(len(grid[0]))]
    return ["".join(v.ljust(w) for v, w in zip(row, widths, strict=True)).rstrip() for row in grid]


def markdown_lines(heads: Sequence[str], rows: Rows, extra: Extra) -> list[str]:
    """The sheet as a Markdown table: a difference under its value (``<br>``)."""
    lines = ["| metric | " + " | ".join(heads) + " |", "| --- |" + " --- |" * len(heads)]
    for name, cells in rows.items():
        joined = [f"{c.own}<br>{c.diff}" if c.diff else c.own for c in cells]
        lines.append(f"| {name} | " + " | ".join(joined) + " |")
    lines += [f"| {name} | " + " | ".join(map(inert_md, values)) + " |" for name, values in extra]
    return lines


# Header values of our own grammar (run ids, hex roots and hashes: docs/ledger-format.md,
# "Names"), shown as code; they hold no backtick to end the span early.
CODE_KEYS = frozenset({"run", "runs", "run root", "run roots", "protocol set", "case set"})


def markdown_items(rows: Sequence[tuple[str, str]]) -> list[str]:
    """A card's header rows as Markdown bullets: our ids and hashes as code, every other
    value escaped (``inert_md``), so a recorded name shows as written and renders nothing."""
    return [f"- **{k}**: `{v}`" if k in CODE_KEYS else f"- **{k}**: {inert_md(v)}"
            for k, v in rows]  # fmt: skip


def extra_json(keys: Sequence[str], extra: Extra) -> dict[str, Any]:
    """The extra rows as JSON: row name -> column key -> value."""
    return {name: dict(zip(keys, values, strict=True)) for name, values in extra}


def extra_html(extra: Extra, name_class: str = "") -> str:
    """The extra rows as HTML table rows (the name cell of class ``name_class``, if given)."""
    cls = f' class="{name_class}"' if name_class else ""
    return "".join(
        f"<tr><td{cls}>{html.escape(name)}</td>"
        + "".join(f"<td>{html.escape(v)}</td>" for v in values)
        + "</tr>"
        for name, values in extra
    )
