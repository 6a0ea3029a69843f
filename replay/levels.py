"""One entry point per target: verify it, find its items (its suite's ``items``), replay it."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from benchledger.ledger import Ledger, UnusableInput
from benchledger.projections.suites import lookup
from benchledger.replay.findings import LEVELS, Report
from benchledger.replay.rederive import Decider, rederive
from benchledger.replay.target import verified

if TYPE_CHECKING:
    from benchledger.ledger.verified import RunEvents
    from benchledger.replay.full import Runtime


def _no_ledger() -> Ledger:
    raise UnusableInput("--ledger", "a run id needs a ledger; give --ledger or a bundle file")


def replay(
    target: str,
    *,
    level: str = "rederive",
    tools: str = "log",
    protocols: str | None = None,
    ledger: Callable[[], Ledger] = _no_ledger,
    decide: Decider | None = None,
    runtime: Runtime | None = None,
    opened: RunEvents | None = None,
) -> Report:
    """Verify ``target`` (a bundle, or a run id in ``ledger()``), then replay it at ``level``.

    A target that does not verify gives a report carrying the failure (nothing replayed);
    UnusableInput when it cannot be read or its protocols cannot be found. ``decide``
    replaces the decision function (rederive), ``runtime`` the live platform (full);
    ``opened`` is ``target`` already read through the door (not read again).
    """
    if level not in LEVELS:
        raise UnusableInput("--level", f"{level!r}: use {' or '.join(LEVELS)}")
    run, failure = verified(target, ledger, opened)
    if run is None:
        return Report(level, target, failure=failure)
    suite = lookup(run.header.suite)  # the recorded suite's reader (UnusableInput if none)
    found = suite.items(run.header, protocols)
    if level == "rederive":
        report = rederive(run, found.by_id, decide=decide or suite.decide, target=target)
    else:
        # Imported here: full replay loads the harness (agents, MCP clients, the embedded
        # platform), which rederive, verify and every other command do without.
        from benchledger.replay.full import replay_full

        report = replay_full(run, found.by_id, tools=tools, runtime=runtime, target=target)
    report.notes = found.notes + report.notes
    return report
