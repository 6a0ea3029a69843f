"""Suites: what a run's units are and how one unit runs, on the suite-agnostic driver.

Suites are found by name in the one suite registry (``projections.suites.SUITES``: each
installed suite is a ``SuitePlugin`` giving both floors); the driver, full replay and the
command line look a run's suite up by the name it records. A suite's write side loads on
first use, so listing the names costs no import.
"""

from __future__ import annotations

import importlib
from typing import cast

from benchledger.harness.record import RunRefused
from benchledger.harness.suites.base import Loaded, Suite, run_config
from benchledger.ledger.registry import BrokenPlugin
from benchledger.projections.suites import SUITES, owners, plugin

# What the driver calls on a suite: an object missing one is not a suite.
_SUITE_API = ("default_path", "load", "entity", "item_hash", "passed", "unit_status",
              "settle", "configure", "run_unit")  # fmt: skip


def names() -> tuple[str, ...]:
    """The installed suites' names, sorted."""
    return SUITES.names()


def suite_for(name: str) -> Suite:
    """A fresh write-side suite called ``name``; UnknownSuite (unusable input) lists the
    suites there are, BrokenPlugin says why an installed one cannot run."""
    found = plugin(name)
    make = found.harness
    if make is None:
        raise BrokenPlugin("suite", name, "it has a read side only: its runs can be read, not run")
    try:
        if isinstance(make, str):  # "package.module:NAME", imported only now
            module, _, attr = make.partition(":")
            make = getattr(importlib.import_module(module), attr)
        suite = make()
    except Exception as exc:  # a third party's write side: one line, never a traceback
        raise BrokenPlugin("suite", name, f"its harness side cannot be made ({exc})") from exc
    missing = [a for a in _SUITE_API if not callable(getattr(suite, a, None))]
    if missing:
        raise BrokenPlugin("suite", name, f"its harness side lacks {', '.join(missing)}")
    named = getattr(suite, "name", None)
    if named != found.name:  # the name its runs record
        raise BrokenPlugin("suite", name, f"its harness side is named {named!r}")
    return cast(Suite, suite)  # checked above: it has every method the driver calls


def check_items_options(name: str, given: tuple[str, ...]) -> None:
    """RunRefused when an item option ``given`` is not suite ``name``'s own, naming the
    suites it belongs to (one rule for every suite: none refuses another's by name)."""
    found = plugin(name)
    own = found.items.flag if found.items is not None else None
    for flag in given:
        if flag == own:
            continue
        belongs = owners(flag)
        theirs = f"belongs to suite {', '.join(belongs)}" if belongs else "names no suite's items"
        use = f"; suite {name} reads its items with {own}" if own else f"; suite {name} takes none"
        raise RunRefused(f"{flag} {theirs}{use}")


__all__ = ["Loaded", "Suite", "check_items_options", "names", "run_config", "suite_for"]
