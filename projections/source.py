"""Where a run's events come from: a ledger (by run id) or a bundle file."""

from __future__ import annotations

import os
from typing import NamedTuple

from ledger import Ledger, UnusableInput
from ledger.bundle import BundleHeader, read_header, records
from ledger.chain import link_hash
from ledger.codec import decode_event
from ledger.events import Event


class RunEvents(NamedTuple):
    """Every event of one run with its link hash, ordered by stream then seq."""

    run_id: str
    root: str
    events: list[tuple[Event, str]]
    bundle: BundleHeader | None = None


def from_ledger(ledger: Ledger, run_id: str) -> RunEvents:
    """A run's events read from a ledger (UnknownRun if absent)."""
    info = ledger.run_info(run_id)
    return RunEvents(run_id, info.root, list(ledger.events(run_id)))


def from_bundle(path: str) -> RunEvents:
    """A run's events read from a bundle (or audit bundle) file."""
    header = read_header(path)
    events = []
    for n, rec in enumerate(records(path), start=2):
        try:
            events.append((decode_event(rec.data), link_hash(rec.data)))
        except Exception as exc:  # msgspec errors: a damaged line
            raise UnusableInput(path, f"not a benchledger event ({exc})", line=n) from None
    return RunEvents(header.run, header.root, events, header)


def is_bundle(target: str) -> bool:
    """Whether ``target`` names a bundle file rather than a run id."""
    return target.endswith((".jsonl", ".jsonl.gz", ".gz")) or os.path.isfile(target)
