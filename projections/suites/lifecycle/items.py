"""A lifecycle run's protocols, found again: the recorded set, or one given.

Order: ``--protocols PATH``; else the folder the run recorded if it exists here (a
benchledger run's ``record.protocols_path``, an imported run's ``config["protocols_path"]``);
else a committed set (the lifecycle set, or its paraphrase variant) when its hash is
the recorded one. A set whose hash differs from
the recorded one is used, with a note: a changed grading rule is exactly what
re-derivation is for. The recorded hash is ``protocol_set_hash`` (either recipe: an
import records the peer's) and, when an import recorded it, the content identity
``protocol_set_id``; a set must match both.
"""

from __future__ import annotations

import os

from benchledger import protocols
from benchledger.ledger import UnusableInput
from benchledger.ledger.events import RunStartedBody
from benchledger.projections.suites.base import ItemSet
from benchledger.protocols.hashing import benchledger_hash, content_id, set_hash
from benchledger.protocols.schema import Protocol

RECIPES = ("benchledger", "peer")


def _hashes(items: tuple[Protocol, ...]) -> dict[str, str]:
    return {recipe: set_hash(items, recipe) for recipe in RECIPES}


def _recorded_folder(header: RunStartedBody) -> str:
    """The protocol folder the run recorded: its record's, or an import's config key."""
    if header.record is not None and header.record.protocols_path:
        return header.record.protocols_path
    imported = header.config.get("protocols_path")
    return imported if isinstance(imported, str) else ""


def _is_recorded(header: RunStartedBody, recorded_hash: str, items: tuple[Protocol, ...]) -> bool:
    """Whether ``items`` are the set the run recorded (every recorded hash matches)."""
    if header.protocol_set_id and content_id(items) != header.protocol_set_id:
        return False
    return not recorded_hash or recorded_hash in _hashes(items).values()


def item_hash(item: Protocol) -> str:
    """One protocol's content hash, as pre-registration records it."""
    return benchledger_hash([item])


def items(header: RunStartedBody, given: str | None = None) -> ItemSet:
    """The run's protocols (``given`` wins); UnusableInput when none can be found."""
    record = header.record
    recorded_hash = header.protocol_set_hash or (record.protocol_set_hash if record else "")
    folder = _recorded_folder(header)
    candidates = [given] if given else [folder]
    path = next((c for c in candidates if c and os.path.exists(c)), None)
    if given and path is None:
        raise UnusableInput(given, "--protocols: no such file or folder")
    if path is None and (recorded_hash or header.protocol_set_id):
        for committed_dir in (protocols.LIFECYCLE_DIR, protocols.LIFECYCLE_PARAPHRASE_DIR):
            committed = protocols.load(committed_dir).protocols
            if _is_recorded(header, recorded_hash, committed):
                path = committed_dir
                break
    if path is None:
        where = f" at {folder}" if folder else ""
        raise UnusableInput(
            "--protocols",
            f"the run's protocol set{where} (set hash {recorded_hash[:12] or 'unrecorded'}) is "
            "not on this machine; pass the protocol folder with --protocols PATH",
        )
    loaded = protocols.load(path).protocols
    notes = []
    if not _is_recorded(header, recorded_hash, loaded):
        content = f", content id {header.protocol_set_id[:12]}" if header.protocol_set_id else ""
        notes.append(
            f"the protocol set at {path} is not the recorded one (set hash "
            f"{recorded_hash[:12]}{content}): differences may come from changed protocols"
        )
    return ItemSet({p.id: p for p in loaded}, path, notes)
