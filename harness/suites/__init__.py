"""Suites: what a run's units are and how one unit runs, on the suite-agnostic driver."""

from __future__ import annotations

from collections.abc import Callable

from harness.suites.base import Loaded, Suite
from harness.suites.lifecycle import LifecycleSuite
from harness.suites.provenance import ProvenanceSuite

SUITES: dict[str, Callable[[], Suite]] = {
    "lifecycle": LifecycleSuite,
    "provenance": ProvenanceSuite,
}


def suite_for(name: str) -> Suite:
    """The suite called ``name``; ValueError lists the suites there are."""
    try:
        return SUITES[name]()
    except KeyError:
        raise ValueError(f"--suite {name!r}: use one of {', '.join(SUITES)}") from None


__all__ = ["SUITES", "LifecycleSuite", "Loaded", "ProvenanceSuite", "Suite", "suite_for"]
