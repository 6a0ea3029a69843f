"""How much of its plan a run finished: the one count every display, gate, ``runs`` and the
verified door use (fed from events, a fold, or stream heads)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from benchledger.ledger.events import RunStartedBody, failed_units, stream_unit


class Completeness(NamedTuple):
    """How much of its plan a run finished: what every display of a partial run says first."""

    run_id: str
    sealed: bool
    planned: int  # the run record's planned units, else protocols × k (0: nothing recorded)
    finished: int  # planned units with a finished, not abandoned stream (any, without a plan)
    missing: tuple[str, ...] = ()  # planned ``unit/attempt`` with none, in plan order
    # Finished units whose every counting attempt ended in an infrastructure error: a run
    # that finished with some is left unsealed, to retry them (``run --retry-infra``).
    infra_failed: tuple[str, ...] = ()
    # Finished units that ended in an error of ours (``events.INTERNAL_ERROR``): excluded
    # from rates like infra-failed ones, but never retried (a retry would repeat the bug).
    harness_failed: tuple[str, ...] = ()

    @property
    def whole(self) -> bool:
        """Sealed, with every planned unit finished: nothing to warn about."""
        return self.sealed and self.finished >= self.planned and not self.missing

    @property
    def short(self) -> int:
        """How many planned units have not finished."""
        return max(self.planned - self.finished, len(self.missing))

    def counts(self) -> str:
        """``26 of 30 planned units finished`` (or, with no plan recorded, ``26 units``)."""
        if not self.planned:
            return f"{self.finished} units finished (the run recorded no plan)"
        return f"{self.finished} of {self.planned} planned units finished"

    def missing_text(self, shown: int = 3) -> str:
        """``4 planned units missing: p026/1, p027/1, p028/1, ...`` (or none missing)."""
        if not self.short:
            return "no planned unit missing"
        names = ", ".join(self.missing[:shown]) + (", ..." if len(self.missing) > shown else "")
        units = "unit" if self.short == 1 else "units"
        return f"{self.short} planned {units} missing" + (f": {names}" if names else "")

    def infra_text(self, shown: int = 3) -> str:
        """``, 2 in infrastructure errors (p003/1, p007/1)`` ("" when none is)."""
        n = len(self.infra_failed)
        if not n:
            return ""
        names = ", ".join(self.infra_failed[:shown]) + (", ..." if n > shown else "")
        errors = "an infrastructure error" if n == 1 else "infrastructure errors"
        return f", {n} in {errors} ({names})"

    def did_not_run(self, *, infra: bool = True) -> str:
        """``2 of 30 units did not run (harness failure)``, and likewise (with ``infra``) for
        the units that ended in infrastructure errors: why some finished units measured
        nothing ("" when none did). Each word is the one ``events.failed_units`` gives, so a
        display never calls a bug of ours an infrastructure failure, nor the other way round."""
        total = self.planned or self.finished
        failed = [(self.harness_failed, "harness failure")]
        if infra:
            failed.append((self.infra_failed, "infrastructure failure"))
        return "; ".join(f"{len(units)} of {total} units did not run ({why})"
                         for units, why in failed if units)  # fmt: skip

    def banner(self) -> str:
        """The first line of any display of this run; "" for a whole one whose every unit
        ran (a sealed run with failed units opens with ``did_not_run``; a partial run's line
        names its infrastructure errors already, and adds its harness failures)."""
        if self.whole:
            return self.did_not_run()
        ours = self.did_not_run(infra=False)
        return self._partial() + (f"; {ours}" if ours else "")

    def _partial(self) -> str:
        """The banner of a run that is unsealed or sealed short of its plan."""
        if not self.sealed and self.infra_failed and not self.short:
            run = self.run_id
            return (
                f"UNSEALED: {self.counts()}{self.infra_text()}; run {run} is left unsealed so "
                f"they can be retried (`benchledger run --resume {run} --retry-infra`) or the "
                f"run sealed as it is (`benchledger seal {run}`)"
            )
        if not self.sealed:
            return (
                f"UNSEALED: {self.counts()}{self.infra_text()}; run {self.run_id} was "
                "interrupted or is still running, so every number here covers only its "
                "finished units"
            )
        return f"INCOMPLETE: sealed with {self.counts()}; every number here covers only those units"

    def as_json(self) -> dict[str, Any]:
        """The JSON ``completeness`` field of reports and comparisons."""
        return {
            "run_id": self.run_id,
            "sealed": self.sealed,
            "planned_units": self.planned,
            "finished_units": self.finished,
            "missing_units": list(self.missing),
            "infra_failed_units": list(self.infra_failed),
            "harness_failed_units": list(self.harness_failed),
        }


class UnitState(NamedTuple):
    """One unit stream as completeness sees it (from its events, a fold, or its head)."""

    stream: str
    protocol: str  # "" when its unit_started is not at hand: read from the stream name
    attempt: int
    finished: bool  # it has a unit_finished (shown, or withheld as a placeholder)
    abandoned: bool  # it has a unit_abandoned: interrupted or retried, not a result
    error: str = ""  # its unit_finished.error ("" when none, or not at hand)


class Plan(NamedTuple):
    """What a run's ``run_started`` planned: its record's units, else protocols × k."""

    keys: tuple[tuple[str, int], ...] = ()  # the record's planned (unit, attempt) keys
    total: int = 0  # len(keys), else protocols × k (0: nothing recorded)


def plan_of(body: RunStartedBody | None) -> Plan:
    """The plan a run_started body records (an empty one when there is none)."""
    if body is None:
        return Plan()
    rec = body.record
    units = tuple((u.unit_id, u.attempt) for u in rec.units) if rec else ()
    return Plan(units, len(units) if units else body.protocols * (rec.k if rec else body.k))


def completeness(run_id: str, sealed: bool, plan: Plan, units: Iterable[UnitState]) -> Completeness:
    """The one count of a run's planned and finished units (every display, gate, --watch,
    ``runs``, the door).

    A unit counts once its stream finished and was not abandoned; a finished unit whose end
    a redacted bundle withholds still counts (it is in the chain, only its body is not
    shown). A unit is matched to the plan by its (protocol, attempt), read from its stream
    name (``RUN/<protocol>/<attempt>[-rN]``) when its start is not at hand.
    """
    done: set[tuple[str, int]] = set()
    ends: list[tuple[str, str]] = []
    for u in units:
        if u.finished and not u.abandoned:
            key = _unit_key(u, run_id)
            done.add(key)
            ends.append((f"{key[0]}/{key[1]}", u.error))
    infra, ours = (tuple(names) for names in failed_units(ends))
    if not plan.keys:
        return Completeness(run_id, sealed, plan.total, len(done), (), infra, ours)
    missing = tuple(f"{u}/{a}" for u, a in plan.keys if (u, a) not in done)
    planned = len(plan.keys)
    return Completeness(run_id, sealed, planned, planned - len(missing), missing, infra, ours)


def _unit_key(unit: UnitState, run_id: str) -> tuple[str, int]:
    if unit.protocol:
        return unit.protocol, unit.attempt
    name, attempt = stream_unit(run_id, unit.stream)
    return name, int(attempt) if attempt.isdigit() else -1
