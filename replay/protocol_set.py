"""Which protocols a run is re-derived against: the recorded set, found again, or one given.

Order: ``--protocols PATH``; else the run record's ``protocols_path`` if it exists here;
else the committed set when its hash is the recorded one. A set whose hash differs from
the recorded one is used, with a note: a changed grading rule is exactly what
re-derivation is for. A unit whose protocol is missing makes the input unusable.
"""

from __future__ import annotations

import os
from typing import Any, NamedTuple

import protocols
from ledger import UnusableInput
from ledger.events import RunStartedBody
from protocols.cases import case_set_hash, load_cases
from protocols.hashing import set_hash
from protocols.schema import Protocol

RECIPES = ("benchledger", "peer")


class ProtocolSet(NamedTuple):
    """The protocols (a provenance run's cases) by id, where they came from, and notes."""

    by_id: dict[str, Any]
    path: str
    notes: list[str]


def _hashes(items: tuple[Protocol, ...]) -> dict[str, str]:
    return {recipe: set_hash(items, recipe) for recipe in RECIPES}


def _cases(header: RunStartedBody, given: str | None) -> ProtocolSet:
    """A provenance run's cases: ``given``, else the recorded path (holdouts live elsewhere)."""
    record = header.record
    recorded_hash = header.protocol_set_hash or (record.protocol_set_hash if record else "")
    path = given or (record.protocols_path if record else "") or protocols.CASES_PUBLIC_V1
    if not os.path.exists(path):
        raise UnusableInput(
            "--protocols",
            f"the run's cases at {path} are not on this machine; pass the case file with "
            "--protocols PATH",
        )
    loaded = load_cases(path).cases
    notes = []
    if recorded_hash and case_set_hash(loaded) != recorded_hash:
        notes.append(
            f"the cases at {path} are not the recorded ones (set hash {recorded_hash[:12]}): "
            "differences may come from changed cases"
        )
    return ProtocolSet({c.id: c for c in loaded}, path, notes)


def resolve(header: RunStartedBody, given: str | None = None) -> ProtocolSet:
    """The run's protocols (``given`` wins); UnusableInput when none can be found."""
    if header.suite == "provenance":
        return _cases(header, given)
    record = header.record
    recorded_hash = header.protocol_set_hash or (record.protocol_set_hash if record else "")
    candidates = [given] if given else []
    if not given and record is not None and record.protocols_path:
        candidates.append(record.protocols_path)
    path = next((c for c in candidates if c and os.path.exists(c)), None)
    if given and path is None:
        raise UnusableInput(given, "--protocols: no such file or folder")
    if path is None:
        committed = protocols.load(protocols.LIFECYCLE_DIR).protocols
        if recorded_hash and recorded_hash in _hashes(committed).values():
            path = protocols.LIFECYCLE_DIR
    if path is None:
        where = f" at {record.protocols_path}" if record and record.protocols_path else ""
        raise UnusableInput(
            "--protocols",
            f"the run's protocol set{where} (set hash {recorded_hash[:12] or 'unrecorded'}) is "
            "not on this machine; pass the protocol folder with --protocols PATH",
        )
    loaded = protocols.load(path).protocols
    notes = []
    if recorded_hash and recorded_hash not in _hashes(loaded).values():
        notes.append(
            f"the protocol set at {path} is not the recorded one (set hash "
            f"{recorded_hash[:12]}): differences may come from changed protocols"
        )
    return ProtocolSet({p.id: p for p in loaded}, path, notes)
