"""The ledger's runs at a glance (``benchledger runs``): one row per run, newest first.

A row is read from the run's stream heads and its header alone, never from its unit
events, so listing stays fast on a large ledger: a unit stream whose head is
``unit_finished`` is a finished unit (an interrupted or retried one ends in
``unit_abandoned``), counted against the plan by ``ledger.completeness.completeness`` as every
display counts; the header's head says whether the run is sealed (and signed), and the
header's first event, ``run_started``, says when it started, with what, and what
it planned. Of an unsealed run, the finished heads are decoded too, for the units that
ended in infrastructure errors (``Ledger.infra_failed``). Only ``ledger`` is imported at
start (the suite registry only to name a subset run's items): the command starts without
the harness.
"""

from __future__ import annotations

import datetime as dt
from typing import Any, NamedTuple

from benchledger.ledger import Ledger, UnknownRun
from benchledger.ledger.completeness import Plan, UnitState, completeness, plan_of
from benchledger.ledger.events import RunStartedEvent
from benchledger.projections.card import subset_label
from benchledger.projections.platform_label import platform_facts


class RunRow(NamedTuple):
    """One run as ``runs`` lists it."""

    run_id: str
    started_at: int  # ns since the epoch, the run_started event's ``at`` (0: no header event)
    agent: str
    platform: str  # platform_label: what it is and what it ran with
    units_finished: int
    units_planned: int
    sealed: bool
    signed: bool
    subset: str  # subset_label: "" for a run of its whole set
    streams: int
    events: int
    root: str  # "" while unsealed
    # An unsealed run's units that ended in infrastructure errors (``unit/attempt``): a run
    # that finished with some is left unsealed until they are retried or it is sealed.
    infra_failed: tuple[str, ...] = ()
    platform_facts: dict[str, Any] = {}  # noqa: RUF012 - never mutated: platform_facts's JSON

    @property
    def started(self) -> str:
        """The start time in UTC, ISO 8601 to the second (``-`` when unknown)."""
        if not self.started_at:
            return "-"
        at = dt.datetime.fromtimestamp(self.started_at / 1e9, dt.UTC)
        return at.strftime("%Y-%m-%dT%H:%M:%SZ")

    def as_json(self) -> dict[str, Any]:
        """The row as ``runs --json`` prints it."""
        return {
            "run_id": self.run_id,
            "started_at": self.started,
            "agent": self.agent,
            "platform": self.platform,
            "platform_facts": self.platform_facts,
            "units_finished": self.units_finished,
            "units_planned": self.units_planned,
            "sealed": self.sealed,
            "signed": self.signed,
            "subset": bool(self.subset),
            "selection": self.subset,
            "streams": self.streams,
            "events": self.events,
            "root": self.root,
            "infra_failed_units": list(self.infra_failed),
        }


def _noun(suite: str) -> str:
    """What ``suite`` calls its items (``ReadSuite.noun``); "items" for a suite not known here."""
    # Imported only for a subset run's label: listing runs starts without the suites' readers.
    from benchledger.projections.suites import UnknownSuite, lookup

    try:
        return lookup(suite).noun
    except UnknownSuite:
        return "items"


def run_row(ledger: Ledger, run_id: str) -> RunRow:
    """One run's row (UnknownRun when absent); reads its heads and its header's first event."""
    heads = ledger.store.heads(run_id)
    if not heads or heads[0].stream != run_id:
        raise UnknownRun(run_id, ledger.store.recent_run_ids())
    seal = ledger.sealed(run_id) if heads[0].kind == "run_sealed" else None
    first = next(ledger.events(run_id, run_id), None)
    header = first[0] if first else None
    started_at, agent, platform, plan, subset = 0, "", "", Plan(), ""
    facts: dict[str, Any] = {}
    if isinstance(header, RunStartedEvent):
        body, record = header.body, header.body.record
        started_at = header.at
        agent = (record.agent if record else "") or body.agent
        facts = platform_facts(body)
        platform = facts["label"]
        plan = plan_of(body)
        if record is not None and (record.only or record.limit):
            subset = subset_label(record, _noun(record.suite))
    # The one count of finished units, from the heads: a stream's last event says whether
    # it finished (unit_finished) or was abandoned (unit_abandoned, after any finish).
    ends = (UnitState(h.stream or "", "", 0, h.kind == "unit_finished",
                      h.kind == "unit_abandoned") for h in heads[1:])  # fmt: skip
    done = completeness(run_id, seal is not None, plan, ends)
    events = sum((h.seq or 0) + 1 for h in heads)
    # Decodes only the unsealed run's finished heads (one event per unit).
    infra = () if seal is not None else tuple(ledger.infra_failed(run_id, heads))
    return RunRow(run_id, started_at, agent, platform, done.finished, done.planned,
                  seal is not None, seal is not None and seal.signature is not None, subset,
                  len(heads), events, seal.root if seal else "", infra, facts)  # fmt: skip


def run_rows(ledger: Ledger) -> list[RunRow]:
    """Every run's row, newest first (by start time, then run id)."""
    rows = [run_row(ledger, run_id) for run_id in ledger.store.run_ids()]
    return sorted(rows, key=lambda r: (-r.started_at, r.run_id))
