"""Runs merged as passes: one card of several runs of one suite, each run counted once.

``report A B``, a ``compare`` column ``A+B`` and the library's ``report([...])`` all merge
here. A suite merges only when it says it can (``ReadSuite.merges``); the runs must agree
on everything a pass holds fixed (``comparable``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, Literal

from benchledger.ledger.command_line import command_line
from benchledger.projections.comparability import Incomparable, comparable
from benchledger.projections.errors import Refused
from benchledger.projections.fold import fold
from benchledger.projections.prices import PriceTable
from benchledger.projections.source import RunEvents
from benchledger.projections.suites import ReadSuite, lookup, names, of_run

# ``--ci``: how a card's 95% intervals are made ("bootstrap" is another name for cluster).
CiChoice = Literal["auto", "wilson", "cluster", "bootstrap"]
CI_CHOICES: Final[tuple[str, ...]] = ("auto", "wilson", "cluster", "bootstrap")


def ci_method(choice: str) -> str:
    """The interval method a ``--ci`` choice names (its alias resolved)."""
    return "cluster" if choice == "bootstrap" else choice


def _merges(suite: ReadSuite) -> bool:
    return suite.merges


def refuse(
    target: str,
    suite: ReadSuite,
    command: str,
    can: Callable[[ReadSuite], bool] = _merges,
    judge: str = "compare and gate judge",
) -> None:
    """Refused when ``target``'s suite cannot do ``command`` (``can``: by default, merge
    runs as passes, which the gate needs), naming the suites that can."""
    if not can(suite):
        judged = ", ".join(n for n in names() if can(lookup(n)))
        raise Refused(
            f"cannot {command}: {target} is a {suite.name} run; its verdicts are in "
            f"`{command_line('benchledger', 'report', target)}` ({judge} {judged} runs)"
        )


def merge(
    targets: Sequence[str],
    runs: Sequence[RunEvents],
    *,
    ci: str = "auto",
    prices: PriceTable | None = None,
) -> Any:  # the suite's own card
    """The card of ``runs`` (read through the door; ``targets`` names each as it was given)
    merged as passes. Refused when a run is given twice, its suite does not merge, or the
    runs differ in what passes hold fixed."""
    seen: dict[tuple[str, str], str] = {}
    for target, run in zip(targets, runs, strict=True):
        first = seen.setdefault((run.run_id, run.root), target)
        if first != target or list(targets).count(target) > 1:
            raise Refused(f"run {run.run_id} is given twice ({first}, {target}): merging a "
                          "run with itself would count its units twice")  # fmt: skip
    suites = [of_run(run) for run in runs]
    for target, suite in zip(targets, suites, strict=True):
        refuse(target, suite, "merge, compare or gate")
    folds = [fold(suites[0].fold(), run.events) for run in runs]
    for (meta, _), run in zip(folds, runs, strict=True):
        meta.verified = run.check.line() if run.check else ""
        meta.standing, meta.origin = run.standing, run.origin
    try:
        comparable([m for m, _ in folds], what="passes")
    except Incomparable as exc:
        raise Refused(f"cannot merge these runs: {exc}") from None
    return suites[0].scorecard(folds, ci=ci_method(ci), prices=prices)
