"""The read-side suite registry: a run's recorded suite name -> the suite's ``ReadSuite``.

Every reader (report, compare, gate, audit, the runs table, re-derivation, replay's item
lookup) asks ``lookup(run_started.suite)`` for what it needs instead of testing the name:
fold, scorecard, render, decide, audit, items, unit status, item hash, its items' noun.
One folder per suite holds its code (``lifecycle/``, ``provenance/``); a new suite is a
new folder and one ``register`` call. An unknown name is ``UnknownSuite`` (unusable input).
"""

from __future__ import annotations

from benchledger.projections.suites import lifecycle, provenance, tasks
from benchledger.projections.suites.base import (
    ItemSet,
    ReadSuite,
    UnknownSuite,
    lookup,
    names,
    of_run,
    register,
    unregister,
)

register(lifecycle.SUITE, default=True)  # a run that records no suite name is a lifecycle one
register(provenance.SUITE)
register(tasks.SUITE)

__all__ = [
    "ItemSet",
    "ReadSuite",
    "UnknownSuite",
    "lookup",
    "names",
    "of_run",
    "register",
    "unregister",
]
