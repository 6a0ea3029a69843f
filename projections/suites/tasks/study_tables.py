"""A planted-claim study's tables: their cells (counts with their intervals, differences,
spend), rows and columns (printed by study_render.py).

Every count carries the decisions behind it (audit refs), so a cell traces to its events
(docs/peer-studies.md, "The published tables"); the study (``study.py``) fills the tables.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from benchledger.projections.stats import newcombe, wilson
from benchledger.projections.suites.tasks.arm import (
    Arm,
    Ref,
    graded_units,
)
from benchledger.protocols.task_grading import ADOPTED

# -- cells -------------------------------------------------------------------------------


class Count(NamedTuple):
    """k of n, with its Wilson 95% interval and the decisions behind k (audit refs)."""

    k: int
    n: int
    refs: tuple[Ref, ...] = ()

    def as_json(self) -> dict[str, Any]:
        ci = wilson(self.k, self.n)
        return {"k": self.k, "n": self.n,
                "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None}  # fmt: skip

    def text(self, interval: bool = False) -> str:
        if not interval or not self.n:
            return f"{self.k}/{self.n}"
        ci = wilson(self.k, self.n)
        assert ci is not None
        return (f"{self.k}/{self.n} = {100 * self.k / self.n:.1f}% "
                f"[{100 * ci.low:.1f}, {100 * ci.high:.1f}]")  # fmt: skip


class Diff(NamedTuple):
    """p1 - p2 of two counts, with its Newcombe hybrid-score 95% interval."""

    a: Count
    b: Count

    def as_json(self) -> dict[str, Any]:
        ci = newcombe(self.a.k, self.a.n, self.b.k, self.b.n)
        return {"a": self.a.as_json(), "b": self.b.as_json(),
                "diff": self.a.k / self.a.n - self.b.k / self.b.n if ci else None,
                "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None}  # fmt: skip

    def text(self, interval: bool = False) -> str:
        ci = newcombe(self.a.k, self.a.n, self.b.k, self.b.n)
        if ci is None:
            return "-"
        d = self.a.k / self.a.n - self.b.k / self.b.n
        return f"{100 * d:+.1f} pts [{100 * ci.low:+.1f}, {100 * ci.high:+.1f}]"


class Usd(NamedTuple):
    """A spend in USD, with the token counts it prices and the attempts behind them."""

    usd: float
    tokens: dict[str, int]
    refs: tuple[Ref, ...] = ()

    def as_json(self) -> dict[str, Any]:
        return {"usd": self.usd, "tokens": self.tokens}

    def text(self, interval: bool = False) -> str:
        return f"${self.usd:.2f}"


Cell = Count | Diff | Usd | int | str | bool | None  # None: the design's arm is not in the ledger


class Row(NamedTuple):
    key: str  # stable, for json and tests
    label: str
    cells: tuple[Cell, ...]
    coords: tuple[tuple[str, str], ...] = ()  # what the row is, for json and tests


class Table(NamedTuple):
    """One of the report's tables: its id, what it shows, its columns and rows."""

    id: str
    title: str
    section: str  # where the published report states it
    columns: tuple[str, ...]
    rows: tuple[Row, ...]
    interval: tuple[str, ...] = ()  # the columns whose counts carry an interval
    notes: tuple[str, ...] = ()


def count_of(arm: Arm | None, check: str) -> Count | None:
    """k/n of a check's True verdicts among the attempts it ruled on; on an arm that planted
    no wrong value nothing could be adopted: 0 of its graded attempts, as the report counts."""
    if arm is None:
        return None
    m = arm.metric(check)
    if check == ADOPTED and not m.den:
        return Count(0, len(graded_units(arm)))
    return Count(int(m.num), m.den, tuple(m.num_refs))


def applies(arm: Arm | None, check: str) -> Count | str | None:
    """The count where the check rules on the arm, else '-' (it does not apply)."""
    if arm is None:
        return None
    return count_of(arm, check) if arm.metric(check).den else "-"


__all__ = [
    "Cell",
    "Count",
    "Diff",
    "Row",
    "Table",
    "Usd",
    "applies",
    "count_of",
]
