"""Ledgers by location, as the library and the command line open them.

A location is an SQLite file path or a ``postgresql://`` URL; ``None`` means the settings'
ledger (``Settings.ledger``, given as a value: nothing here reads the environment).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator

from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger, open_store

# What a library call takes as its ledger: a location, an open Ledger, or None (settings).
LedgerLike = str | Ledger | None


def location_of(ledger: LedgerLike, settings: Settings | None = None) -> str:
    """The location ``ledger`` names (the settings' ledger when it names none)."""
    if isinstance(ledger, Ledger):
        return ""
    return ledger or (settings or Settings()).ledger


def reader(ledger: LedgerLike, settings: Settings | None = None) -> Callable[[], Ledger]:
    """A function that opens ``ledger`` for reading on first call, then hands out the same
    one; a bundle is read without it, so nothing is opened unless a run id needs it."""
    if isinstance(ledger, Ledger):
        given = ledger
        return lambda: given
    location = location_of(ledger, settings)
    opened: list[Ledger] = []

    def open_once() -> Ledger:
        if not opened:
            opened.append(Ledger(open_store(location, create=False, read_only=True)))
        return opened[0]

    return open_once


@contextlib.contextmanager
def new_or_existing(location: str) -> Iterator[Ledger]:
    """The ledger at ``location``, created if missing, for a command that adds a run; a file
    this made is removed again when the work fails before any run is in it (nothing
    written)."""
    fresh = "://" not in location and not os.path.exists(location)
    ledger = Ledger(open_store(location, create=True, read_only=False))
    try:
        yield ledger
    except BaseException:
        if fresh and not _holds_runs(ledger):
            ledger.store.close()
            for suffix in ("", "-wal", "-shm"):
                with contextlib.suppress(OSError):
                    os.unlink(location + suffix)
        raise


def _holds_runs(ledger: Ledger) -> bool:
    """Whether the ledger holds any run (True when it cannot even say: keep it)."""
    try:
        return bool(ledger.store.run_ids())
    except Exception:
        return True
