"""Runs judged together: ``compare`` (side by side, paired with a baseline) and ``gate``
(a candidate against a baseline, by a bar), as the commands of those names judge them."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger, LedgerError
from benchledger.ledger.verified import RunEvents
from benchledger.ledgers import LedgerLike, reader
from benchledger.projections import determinism
from benchledger.projections.card import RunMeta
from benchledger.projections.errors import Refused
from benchledger.projections.gate import GateVerdict, bar_of, baseline_of, verdict
from benchledger.projections.passes import merge, refuse
from benchledger.projections.prices import PriceTable
from benchledger.projections.suites import ReadSuite, of_run
from benchledger.scoring import Scorecard, card_alone, price_table, summary
from benchledger.trust import PubKeys, read, trusted_keys

__all__ = ["Comparison", "GateVerdict", "columns_of", "compare", "gate"]


@dataclass(frozen=True)
class Comparison:
    """Runs of one suite side by side: each column's scorecard (the baseline first) and
    the comparison as the suite renders it in ``format``."""

    suite: str
    targets: tuple[str, ...]  # each column as given (``A+B``: passes merged)
    columns: tuple[Scorecard, ...]
    format: str
    text: str

    def __str__(self) -> str:
        return self.text


def passes_of(target: str) -> list[str]:
    """``A+B+C``: runs merged as passes into one column (a file of that name is one run)."""
    if "+" not in target or os.path.exists(target):
        return [target]
    parts = target.split("+")
    if not all(parts):
        raise Refused(f"{target!r}: join the passes of one column as RUN+RUN")
    return parts


def columns_of(runs: Sequence[str], baseline: str | None) -> list[str]:
    """The compared columns' targets, the baseline first (``baseline``, else the first)."""
    targets = list(runs)
    if baseline:
        if baseline in targets:
            targets.remove(baseline)
        targets.insert(0, baseline)
    if len(targets) < 2:
        raise Refused("compare needs at least two runs: RUN RUN [RUN ...] [--baseline RUN]")
    return targets


def compare(
    runs: Sequence[str],
    *,
    baseline: str | None = None,
    format: str = "table",
    ledger: LedgerLike = None,
    pubkey: PubKeys = None,
    prices: str | PriceTable | None = None,
    settings: Settings | None = None,
) -> Comparison:
    """Runs of one suite side by side, the baseline first (``baseline``, else the first),
    as that suite compares them; ``A+B`` merges passes into one column. Refused when the
    runs are of different suites, or differ in what a comparison holds fixed."""
    keys = trusted_keys(pubkey)  # a bad key file: refused first
    table = price_table(prices)  # and a bad price table
    opener = reader(ledger, settings)
    targets = columns_of(runs, baseline)
    columns = [passes_of(t) for t in targets]
    read_runs = [[read(t, opener, keys) for t in parts] for parts in columns]
    suite = of_run(read_runs[0][0])
    for target, group in zip(targets, read_runs, strict=True):
        for run in group:
            other = of_run(run)
            if other.name != suite.name:
                raise Refused(f"cannot compare: {targets[0]} is a {suite.name} run, "
                              f"{target} a {other.name} run")  # fmt: skip
    refuse(targets[0], suite, "compare", _compares, "compare judges")
    assert suite.compare is not None
    cards = _cards(suite, targets, columns, read_runs, opener, table)
    for card, group in zip(cards, read_runs, strict=True):  # compare leads with the traces
        meta = getattr(card, "meta", None)
        if isinstance(meta, RunMeta):
            meta.traces = determinism.of_run([(r.run_id, r.events) for r in group])
    try:
        text = suite.compare(cards, targets, format)
    except ValueError as exc:  # Incomparable: what differs that a comparison holds fixed
        raise Refused(f"cannot compare: {exc}") from None
    scored = tuple(summary(suite, card) for card in cards)
    return Comparison(suite.name, tuple(targets), scored, format, text)


def _compares(suite: ReadSuite) -> bool:
    return suite.compare is not None


def _cards(
    suite: ReadSuite,
    targets: list[str],
    columns: list[list[str]],
    runs: Sequence[Sequence[RunEvents]],
    ledger: Callable[[], Ledger],
    prices: PriceTable | None,
) -> list[object]:
    """Each column's card: passes merged (a suite that merges), else its one run read as
    ``report`` reads it (who vouches for it, and its origin)."""
    if suite.merges:
        return [merge(parts, group, prices=prices)
                for parts, group in zip(columns, runs, strict=True)]  # fmt: skip
    if any(len(parts) > 1 for parts in columns):
        raise Refused(f"a {suite.name} run is compared on its own: no RUN+RUN columns")
    return [card_alone(group[0], suite, t, ledger, replay=False, prices=prices)
            for t, group in zip(targets, runs, strict=True)]  # fmt: skip


def gate(
    candidate: str,
    baseline: str | None = None,
    *,
    tolerance: float | None = None,
    metrics: Sequence[str] | None = None,
    strict: bool = False,
    override: bool = False,
    allow_undecided: bool = False,
    ledger: LedgerLike = None,
    pubkey: PubKeys = None,
    settings: Settings | None = None,
) -> GateVerdict:
    """Gate ``candidate`` against ``baseline`` (default: its pre-registered one) by the bar
    it pre-registered, or the one given (``override``: instead of a pre-registered one).

    ``passed`` (exit 0: every gated metric resolved) or not (1: a regression; with
    ``strict``, also an inconclusive metric; or a run that broke its pre-registration;
    3: undecided, a metric the runs are too small or too alike to resolve, with the size
    that would; ``allow_undecided`` makes that exit 0, still not ``passed``). Refused
    (exit 2) when the runs cannot be gated: damaged, unsealed, incomplete, all infra
    errors, coupled, or differing in protocol set, k, agent, platform or model.
    """
    keys = trusted_keys(pubkey)  # a bad key file: refused first
    opener = reader(ledger, settings)

    def verified(target: str) -> RunEvents:
        # An unsealed run's chain is still checked here; the gate then refuses it with what
        # is missing (how many planned units finished, and how to resume).
        try:
            return read(target, opener, keys)
        except LedgerError as exc:  # damaged, unreadable or unknown: nothing to judge
            raise Refused(f"cannot gate: {exc}") from None

    cand = verified(candidate)
    refuse(candidate, of_run(cand), "gate")
    base = verified(baseline_of(cand, baseline))
    refuse("the baseline", of_run(base), "gate")
    bar = bar_of(cand, base, tolerance=tolerance, metrics=metrics, strict=strict,
                 override=override)  # fmt: skip
    return verdict(cand, base, bar, allow_undecided=allow_undecided)
