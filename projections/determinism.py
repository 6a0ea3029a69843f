"""Determinism across runs: whether compared runs' units behaved the same (docs/metrics.md,
"Determinism across runs").

Each unit records its trace hash (``unit_finished.trace_hash``, docs/trace-hash.md): equal
hashes mean the same inputs produced the same behaviour, whatever the timestamps, session
handles and platform ids. ``compare`` (every suite, through ``projections.differences``)
leads with how many units' hashes agree across the runs (``trace hashes equal: 304 of 304
units``), says per unit whether they do, and for each run that differs from the baseline,
where it first does: the first unit (in unit order) and, in that unit's trace, the first
item (its event kind and seq in each run) and field that differ. Runs whose configuration
is the same (``comparability.configuration``: protocol set, agent and its parameters,
platform, platform options, judge) should be identical, and are said to be not when they
differ; runs of another configuration say which of it differs.

Pure functions over recorded events; ``judging.compare`` hands each run's in
(``of_run``, set on its card's ``RunMeta.traces``).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger.events import (
    Body,
    Event,
    UnitAbandonedBody,
    UnitFinishedBody,
    stream_unit,
)
from benchledger.projections.card import RunMeta
from benchledger.projections.comparability import configuration_differs
from benchledger.projections.trace import trace

UNITS_LISTED: Final = 10  # the text lists this many differing units (JSON lists every unit)
SHOWN: Final = 60  # characters of a differing value shown

__all__ = ["Agreement", "RunTraces", "agreement", "first_difference", "of_run", "traced"]


class RunTraces(NamedTuple):
    """One run's (or merged column's) finished units: unit -> trace hash ("": not recorded),
    and each unit's events, from which a first difference is found."""

    run_id: str
    hashes: dict[str, str]
    events: dict[str, list[tuple[int, Body]]]


def of_run(parts: Sequence[tuple[str, Iterable[tuple[Event, str]]]]) -> RunTraces:
    """The finished, not abandoned units of a column's runs ((run id, events) per pass).
    A unit is named by its protocol and attempt (``p001/1``, ``ledger.events.stream_unit``),
    a merged pass's units after their pass (``2:p001/1``), so the columns' units pair by
    name."""
    hashes: dict[str, str] = {}
    events: dict[str, list[tuple[int, Body]]] = {}
    for i, (run_id, evs) in enumerate(parts):
        prefix = f"{i + 1}:" if len(parts) > 1 else ""
        streams: dict[str, list[tuple[int, Body]]] = {}
        finished: dict[str, str] = {}
        gone: set[str] = set()
        for event, _ in evs:
            body = getattr(event, "body", None)  # every recorded kind has one
            if not event.stream.startswith(run_id + "/") or not isinstance(body, Body):
                continue  # the run's header stream
            streams.setdefault(event.stream, []).append((event.seq, body))
            if isinstance(body, UnitFinishedBody):
                finished[event.stream] = body.trace_hash
            elif isinstance(body, UnitAbandonedBody):
                gone.add(event.stream)
        for stream, trace_hash in finished.items():
            if stream not in gone:  # a resumed attempt's new stream (``-rN``) pairs as it
                unit = prefix + "/".join(stream_unit(run_id, stream))
                hashes[unit], events[unit] = trace_hash, streams[stream]
    return RunTraces("+".join(r for r, _ in parts), hashes, events)


class Versus(NamedTuple):
    """One run against the baseline: its units with the baseline's hash, what of its
    configuration differs (none: it should be identical), and where it first differs."""

    run_id: str
    equal: int
    paired: int
    configuration: tuple[str, ...]
    first: str  # "": no difference


class Agreement(NamedTuple):
    """The runs' trace hashes, unit by unit (``agreement``)."""

    runs: tuple[str, ...]
    units: tuple[tuple[str, tuple[str, ...]], ...]  # units every run finished, each's hashes
    missing: tuple[str, ...]  # units some run did not finish
    versus: tuple[Versus, ...]  # each run but the baseline

    @property
    def equal(self) -> tuple[str, ...]:
        """The units whose every run recorded the same trace hash."""
        return tuple(u for u, hs in self.units if hs[0] and len(set(hs)) == 1)

    @property
    def unrecorded(self) -> int:
        """Units some run recorded no trace hash for (a run older than trace hashes)."""
        return sum(1 for _, hs in self.units if not all(hs))

    def lead(self) -> str:
        """``trace hashes equal: 304 of 304 units``, with what the count leaves out."""
        line = f"trace hashes equal: {len(self.equal)} of {len(self.units)} units"
        if self.unrecorded:
            line += f" ({self.unrecorded} with no trace hash recorded)"
        if self.missing:
            line += f"; {len(self.missing)} not finished in every run"
        return line

    def lines(self) -> list[str]:
        """The lead, then each run against the baseline, then the units that differ."""
        out = [self.lead()]
        base = self.runs[0]
        for v in self.versus:
            said = f"{v.run_id}: {v.equal} of {v.paired} units equal to {base}'s"
            if not v.configuration:
                said += "; same configuration"
                said += ": not identical" if v.first else ", identical traces"
            else:
                said += "; configuration differs: " + "; ".join(v.configuration)
            if v.first:
                said += f"; first differs at {v.first}"
            out.append(said)
        differ = [u for u, hs in self.units if all(hs) and len(set(hs)) > 1]
        if differ:
            shown = ", ".join(differ[:UNITS_LISTED])
            more = f" ... {len(differ) - UNITS_LISTED} more" if differ[UNITS_LISTED:] else ""
            out.append(f"units whose trace hashes differ: {shown}{more}")
        return out

    def as_json(self) -> dict[str, Any]:
        return {
            "equal": len(self.equal),
            "units": len(self.units),
            "unrecorded": self.unrecorded,
            "missing": list(self.missing),
            "per_unit": {u: {"equal": u in set(self.equal), "hashes": dict(zip(self.runs, hs,
                                                                            strict=True))}
                         for u, hs in self.units},
            "versus": {v.run_id: {"equal": v.equal, "units": v.paired,
                                  "same_configuration": not v.configuration,
                                  "configuration_differs": list(v.configuration),
                                  "first_difference": v.first or None}
                       for v in self.versus},
        }  # fmt: skip


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= SHOWN else text[: SHOWN - 3] + "..."


def _field(a: Any, b: Any, path: str = "") -> tuple[str, Any, Any]:
    """The first path at which ``a`` and ``b`` differ (they do), and the two values there."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if a.get(key) != b.get(key) or (key in a) != (key in b):
                return _field(a.get(key), b.get(key), f"{path}.{key}" if path else str(key))
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _field(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            return f"{path} (length)", len(a), len(b)
    if isinstance(a, str) and isinstance(b, str) and len(a) > SHOWN and len(b) > SHOWN:
        # long texts (prompts, answers) share a long prefix: show where they part
        at = next(
            (i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y), min(len(a), len(b))
        )
        start = max(0, at - 8)
        return f"{path or '(value)'} (from char {start})", a[start:], b[start:]
    return path or "(value)", a, b


def first_difference(a: Sequence[tuple[int, Body]], b: Sequence[tuple[int, Body]]) -> str:
    """Where two units' traces first differ: the item's number, its kind and seq in each,
    and the first field (``item 7 (session_call, seq 9 vs 9): result.content[0].text:
    'x' vs 'y'``); "" when the traces are equal."""
    ta, tb = trace(a), trace(b)
    for i, (x, y) in enumerate(zip(ta, tb, strict=False)):
        if x.item != y.item:
            kind = x.item[0] if x.item[0] == y.item[0] else f"{x.item[0]} vs {y.item[0]}"
            path, va, vb = _field(x.item[1], y.item[1])
            return (f"item {i + 1} ({kind}, seq {x.seq} vs {y.seq}): {path}: "
                    f"{_short(va)} vs {_short(vb)}")  # fmt: skip
    if len(ta) != len(tb):
        longer, n = ("the baseline", len(ta)) if len(ta) > len(tb) else ("this run", len(tb))
        return f"item {min(len(ta), len(tb)) + 1}: {longer} has {n - min(len(ta), len(tb))} more"
    return ""


def agreement(metas: Sequence[RunMeta], runs: Sequence[RunTraces]) -> Agreement:
    """The runs' trace hashes unit by unit, the first (``metas[0]``) the baseline."""
    names = [r.run_id for r in runs]
    every = set(runs[0].hashes).intersection(*(r.hashes for r in runs[1:]))
    some = set().union(*(r.hashes for r in runs))
    units = tuple((u, tuple(r.hashes[u] for r in runs)) for u in sorted(every))
    base = runs[0]
    versus = []
    for meta, other in zip(metas[1:], runs[1:], strict=True):
        shared = sorted(set(base.hashes) & set(other.hashes))
        same = [u for u in shared if base.hashes[u] and base.hashes[u] == other.hashes[u]]
        first = ""
        for u in shared:
            if base.hashes[u] and other.hashes[u] and base.hashes[u] != other.hashes[u]:
                first = f"unit {u}, " + (first_difference(base.events[u], other.events[u])
                                         or "its trace hashes alone")  # fmt: skip
                break
        config = tuple(f"{label}: {names[0]} = {a}, {other.run_id} = {b}"
                       for label, a, b in configuration_differs(metas[0], meta))  # fmt: skip
        versus.append(Versus(other.run_id, len(same), len(shared), config, first))
    return Agreement(tuple(names), units, tuple(sorted(some - every)), tuple(versus))


def traced(metas: Sequence[RunMeta]) -> Agreement | None:
    """The agreement of cards' runs when every card carries its traces (set by
    ``judging.compare``); None otherwise (a report, a gate)."""
    found: list[RunTraces] = [m.traces for m in metas if isinstance(m.traces, RunTraces)]
    return agreement(metas, found) if len(found) == len(metas) > 1 else None
