"""Suites: what a run's units are and how one unit runs, on the suite-agnostic driver.

Suites are found by name in one registry; the driver, full replay and the command line
look a run's suite up by the name it records. The built-in suites load on first use,
so listing the names costs no import.
"""

from __future__ import annotations

from collections.abc import Callable

from benchledger.harness.suites.base import Loaded, Suite, run_config


def _lifecycle() -> Suite:
    from benchledger.harness.suites.lifecycle import LifecycleSuite

    return LifecycleSuite()


def _provenance() -> Suite:
    from benchledger.harness.suites.provenance import ProvenanceSuite

    return ProvenanceSuite()


def _tasks() -> Suite:
    from benchledger.harness.suites.tasks import TasksSuite

    return TasksSuite()


SUITES: dict[str, Callable[[], Suite]] = {
    "lifecycle": _lifecycle,
    "provenance": _provenance,
    "tasks": _tasks,
}


def register(name: str, factory: Callable[[], Suite]) -> None:
    """Make ``factory``'s suite runnable as ``name`` (a new suite, or a test's)."""
    SUITES[name] = factory


def names() -> list[str]:
    """The registered suites' names, the default (lifecycle) first."""
    return list(SUITES)


def suite_for(name: str) -> Suite:
    """A fresh suite called ``name``; ValueError lists the suites there are."""
    try:
        factory = SUITES[name]
    except KeyError:
        raise ValueError(f"--suite {name!r}: use one of {', '.join(SUITES)}") from None
    return factory()


__all__ = ["SUITES", "Loaded", "Suite", "names", "register", "run_config", "suite_for"]
