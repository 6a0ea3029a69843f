"""A lifecycle run's protocols, found again: the recorded set, or one given.

Order: ``--protocols PATH``; else the run record's ``protocols_path`` if it exists here;
else the committed set when its hash is the recorded one. A set whose hash differs from
the recorded one is used, with a note: a changed grading rule is exactly what
re-derivation is for.
"""

from __future__ import annotations

import os

import protocols
from ledger import UnusableInput
from ledger.events import RunStartedBody
from projections.suites.base import ItemSet
from protocols.hashing import benchledger_hash, set_hash
from protocols.schema import Protocol

RECIPES = ("benchledger", "peer")


def _hashes(items: tuple[Protocol, ...]) -> dict[str, str]:
    return {recipe: set_hash(items, recipe) for recipe in RECIPES}


def item_hash(item: Protocol) -> str:
    """One protocol's content hash, as pre-registration records it."""
    return benchledger_hash([item])


def items(header: RunStartedBody, given: str | None = None) -> ItemSet:
    """The run's protocols (``given`` wins); UnusableInput when none can be found."""
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
    return ItemSet({p.id: p for p in loaded}, path, notes)
