"""What a redacted run withholds, for reports: withheld is shown as withheld, never as zero.

A unit whose decisions (or start or end) are withheld is left out of every rate and
named here; a unit whose evidence alone is withheld keeps its decisions, and its
withheld evidence is counted by kind. Each withheld event's digest is its link hash,
which the redacted bundle carries and ``benchledger verify --reveal`` checks.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple, Protocol


class _Run(Protocol):
    @property
    def withheld(self) -> Sequence[str]: ...  # the header-stream kinds withheld


class _Unit(Protocol):
    @property
    def stream(self) -> str: ...
    @property
    def withheld(self) -> Sequence[tuple[int, str]]: ...  # (seq, kind) of each withheld event
    @property
    def outcome_withheld(self) -> bool: ...


class Disclosed(Protocol):
    """A card that says what its runs withhold: its runs and units, each with its withheld."""

    @property
    def runs(self) -> Sequence[_Run]: ...
    @property
    def units(self) -> Sequence[_Unit]: ...


class Disclosure(NamedTuple):
    """The withheld part of a scorecard's runs."""

    units: tuple[str, ...]  # streams whose outcome is withheld: in no rate
    evidence_units: tuple[str, ...]  # streams with only evidence withheld: decisions shown
    by_kind: dict[str, int]  # withheld events per kind (header stream included)
    header: tuple[str, ...]  # header-stream kinds withheld (run_started)

    @property
    def any(self) -> bool:
        return bool(self.by_kind)

    @property
    def events(self) -> int:
        return sum(self.by_kind.values())


def disclosure(card: Disclosed) -> Disclosure:
    """What the scorecard's runs withhold (empty for a full run)."""
    by_kind: dict[str, int] = {}
    header = tuple(k for r in card.runs for k in r.withheld)
    for kind in header:
        by_kind[kind] = by_kind.get(kind, 0) + 1
    units, evidence = [], []
    for u in card.units:
        for _seq, kind in u.withheld:
            by_kind[kind] = by_kind.get(kind, 0) + 1
        if u.outcome_withheld:
            units.append(u.stream)
        elif u.withheld:
            evidence.append(u.stream)
    return Disclosure(tuple(units), tuple(evidence), dict(sorted(by_kind.items())), header)


def summary_line(d: Disclosure) -> str:
    """One line for a report's header: what is withheld and what that means for the rates."""
    kinds = ", ".join(f"{n} {k}" for k, n in d.by_kind.items())
    parts = [f"{d.events} events withheld ({kinds}); each shown by its digest in the bundle"]
    if d.units:
        parts.append(
            f"decisions of {units_text(len(d.units))} withheld: in no rate, never counted as 0"
        )
    if d.evidence_units:
        parts.append(f"evidence of {units_text(len(d.evidence_units))} withheld, decisions shown")
    if "episode_finished" in d.by_kind:
        parts.append("token totals leave out the withheld episode summaries")
    if d.header:
        parts.append(f"header withheld: {', '.join(d.header)}")
    return "; ".join(parts)


def units_text(n: int) -> str:
    return f"{n} unit" if n == 1 else f"{n} units"


def as_json(d: Disclosure) -> dict[str, Any]:
    """The disclosure for a JSON report."""
    return {
        "events": d.events,
        "by_kind": d.by_kind,
        "units": list(d.units),
        "evidence_units": list(d.evidence_units),
        "header": list(d.header),
    }
