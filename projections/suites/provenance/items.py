"""A provenance run's cases, found again: the ones given, else the recorded path."""

from __future__ import annotations

import os

from benchledger import protocols
from benchledger.ledger import UnusableInput
from benchledger.ledger.events import RunStartedBody
from benchledger.ledger.inert import inert
from benchledger.projections.suites.base import ItemSet
from benchledger.protocols.cases import case_set_hash, load_cases


def items(header: RunStartedBody, given: str | None = None) -> ItemSet:
    """A provenance run's cases: ``given``, else the recorded path (holdouts live elsewhere)."""
    record = header.record
    recorded_hash = header.protocol_set_hash or (record.protocol_set_hash if record else "")
    path = given or (record.protocols_path if record else "") or protocols.CASES_PUBLIC_V1
    if not os.path.exists(path):
        raise UnusableInput(
            "--protocols",
            f"the run's cases at {inert(path, value=True)} are not on this machine; pass the "
            "case file with "
            "--protocols PATH",
        )
    loaded = load_cases(path).cases
    notes = []
    if recorded_hash and case_set_hash(loaded) != recorded_hash:
        notes.append(
            f"the cases at {path} are not the recorded ones (set hash {recorded_hash[:12]}): "
            "differences may come from changed cases"
        )
    return ItemSet({c.id: c for c in loaded}, path, notes)
