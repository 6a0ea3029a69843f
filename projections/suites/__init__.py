"""The suite registry: a run's recorded suite name -> the suite's ``ReadSuite``.

Every reader (report, compare, gate, audit, the runs table, re-derivation, replay's item
lookup) asks ``lookup(run_started.suite)`` for what it needs instead of testing the name:
fold, scorecard, render, decide, audit, items, unit status, item hash, its items' noun, its
gate and live view. One folder per suite holds its read side (``lifecycle/``,
``provenance/``, ``tasks/``); a suite is one ``SuitePlugin`` registration (``builtin`` for
benchledger's three, the entry-point group ``benchledger.suites`` for another package's).
An unknown name is ``UnknownSuite`` (unusable input).
"""

from __future__ import annotations

from benchledger.projections.suites import builtin  # noqa: F401  (registers the three)
from benchledger.projections.suites.base import (
    DEFAULT_SUITE,
    SUITES,
    ItemOption,
    ItemSet,
    ReadSuite,
    SuitePlugin,
    UnitScore,
    UnknownSuite,
    gated_metrics,
    installed,
    lookup,
    names,
    of_run,
    owners,
    plugin,
    register,
    unregister,
)

__all__ = [
    "DEFAULT_SUITE",
    "SUITES",
    "ItemOption",
    "ItemSet",
    "ReadSuite",
    "SuitePlugin",
    "UnitScore",
    "UnknownSuite",
    "gated_metrics",
    "installed",
    "lookup",
    "names",
    "of_run",
    "owners",
    "plugin",
    "register",
    "unregister",
]
