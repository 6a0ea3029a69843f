"""Scorecards: a run's (or passes') card as ``benchledger report`` computes it, and its
typed summary.

Each suite scores its own runs (``projections.suites``); its card is the suite's own type.
``Scorecard`` is what every card has in common, typed (units, passes, failures, each
metric's rate), with the suite's card itself in ``card`` and ``render(fmt)`` for its text.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger, LedgerError, UnusableInput
from benchledger.ledger.command_line import command_line
from benchledger.ledger.verified import RunEvents
from benchledger.ledgers import LedgerLike, reader
from benchledger.projections.card import Metric
from benchledger.projections.errors import Refused
from benchledger.projections.passes import CiChoice, merge
from benchledger.projections.prices import PriceTable, load_prices
from benchledger.projections.suites import ReadSuite, lookup, of_run
from benchledger.protocols.errors import InvalidInput
from benchledger.trust import PubKeys, read, trusted_keys

__all__ = ["CiChoice", "Rate", "Scorecard", "card_alone", "log_replay", "report", "scorecard_of"]


@dataclass(frozen=True)
class Rate:
    """One metric of a card: ``num`` of ``den`` (``rate``), with its 95% interval."""

    name: str
    num: float
    den: int
    rate: float | None  # None when the denominator is empty
    low: float | None
    high: float | None

    @classmethod
    def of(cls, metric: Metric) -> Rate:
        ci = metric.ci
        return cls(metric.name, metric.num, metric.den, metric.rate,
                   ci.low if ci else None, ci.high if ci else None)  # fmt: skip


@dataclass(frozen=True)
class Scorecard:
    """What every suite's card says, typed: of the counted units how many passed, how many
    were harness failures or did not finish, each metric, the suite's overall verdict
    (None when it has none); the suite's own card in ``card``."""

    suite: str
    runs: tuple[str, ...]  # the run ids scored (several: merged as passes)
    units: int  # finished, not abandoned (0 when the suite's card lists no units)
    passed: int  # of those, passed (every applicable stage or check)
    harness_failures: int
    incomplete: int
    metrics: Mapping[str, Rate]
    verdict: bool | None  # the suite's overall verdict, if it has one
    card: object = field(repr=False, compare=False)  # the suite's own card

    def render(self, fmt: str = "table") -> str:
        """The card as ``benchledger report --format FMT`` prints it."""
        return lookup(self.suite).render(self.card, fmt)

    def __str__(self) -> str:
        runs = ", ".join(self.runs)
        return f"{self.passed}/{self.units} units passed ({self.suite} run {runs})"


def _units_passed(card: object) -> tuple[int, int]:
    """(counted units, passed units) of a suite's card: the card's own count of passes
    when it keeps one, else units graded with no check failed (0, 0 when the card lists
    no units)."""
    units = [getattr(u, "unit", u) for u in getattr(card, "units", ())]
    counted = [u for u in units if getattr(u, "counted", True)]
    passes = getattr(card, "passed_units", None)
    if passes is None:
        passes = sum(
            getattr(u, "graded", False)
            and False not in (d.verdict for d in getattr(u, "decisions", {}).values())
            for u in counted
        )
    return len(counted), int(passes)


def summary(suite: ReadSuite, card: object) -> Scorecard:
    """``card`` (of ``suite``) as the typed ``Scorecard``."""
    metrics: dict[str, Metric] = getattr(card, "metrics", {})
    meta = getattr(card, "meta", None)
    runs = getattr(card, "runs", None) or ((meta,) if meta is not None else ())
    units, passed = _units_passed(card)
    return Scorecard(
        suite=suite.name,
        runs=tuple(r.run_id for r in runs),
        units=units,
        passed=passed,
        harness_failures=int(getattr(card, "harness_failures", 0)),
        incomplete=int(getattr(card, "incomplete", 0)),
        metrics={name: Rate.of(m) for name, m in metrics.items()},
        verdict=suite.passed(card),
        card=card,
    )


def log_replay(
    target: str, ledger: Callable[[], Ledger], run: RunEvents, stage: str
) -> tuple[dict[str, bool] | None, str]:
    """Per unit stream of ``run``, whether the log-driven replay reproduced its ``stage`` turn.

    None, with why, when it cannot run (the run is unsealed or damaged, or its items are
    not on this machine).
    """
    from benchledger.replay.levels import replay

    try:  # the run the display read, replayed without reading ``target`` again
        report = replay(target, level="full", tools="log", ledger=ledger, opened=run)
    except (UnusableInput, InvalidInput, LedgerError) as exc:
        return None, f"log-driven replay not run: {exc}"
    if report.failure is not None:
        return None, f"log-driven replay not run: {report.failure}"
    units = {m.stream for m in report.mismatches}
    missed = {m.stream for m in report.mismatches if m.what == f"episode {stage}"}
    if report.first is not None and report.first.what == f"episode {stage}":
        missed.add(report.first.stream)
    note = ""
    if units - missed:
        note = (
            f"log-driven replay: {len(units - missed)} unit(s) differ outside the scored turn; "
            f"see `{command_line('benchledger', 'replay', target, '--level', 'full')}`"
        )
    streams = {e.stream for e, _ in run.events if e.stream != run.run_id}
    return {s: s not in missed for s in sorted(streams)}, note


def card_alone(
    run: RunEvents,
    suite: ReadSuite,
    target: str,
    ledger: Callable[[], Ledger],
    *,
    replay: bool = True,
    stood: bool = True,
    prices: PriceTable | None = None,
) -> object:
    """The card of one run (``target``) of a suite that does not merge (or of any suite,
    read alone, as ``run`` shows it).

    With ``replay``, the log-driven replay the suite's card counts (if it counts one); with
    ``stood``, the card says who vouches for the run and where its units came from; with
    ``prices``, a card that carries a price table (tasks) is priced at it.
    """
    reproduced, note = None, ""
    if suite.replayed_stage is not None and replay:
        reproduced, note = log_replay(target, ledger, run, suite.replayed_stage)
    found = suite.card([run], replayed=reproduced)
    if stood:
        found.meta.standing, found.meta.origin = run.standing, run.origin  # open_run set them
    if note:
        found = found._replace(notes=(*found.notes, note))
    if prices is not None and "prices" in getattr(found, "_fields", ()):
        found = found._replace(prices=prices)
    return found


def price_table(prices: str | PriceTable | None) -> PriceTable | None:
    """A price table given as one, or as the TOML file it is read from (None: packaged)."""
    return load_prices(prices) if isinstance(prices, str) else prices


def scored(
    targets: Sequence[str],
    runs: Sequence[RunEvents],
    ledger: Callable[[], Ledger],
    *,
    ci: CiChoice = "auto",
    prices: PriceTable | None = None,
    replay: bool = True,
    what: str = "reported",
) -> tuple[ReadSuite, object]:
    """The suite of ``runs`` and their card: merged as passes when the suite merges, else
    the one run's card (Refused when several are given)."""
    suite = of_run(runs[0])
    if suite.merges:
        return suite, merge(targets, runs, ci=ci, prices=prices)
    if len(runs) > 1:
        raise Refused(f"a {suite.name} run is {what} on its own: give one RUN")
    return suite, card_alone(runs[0], suite, targets[0], ledger, replay=replay, prices=prices)


def scorecard_of(
    target: str,
    run: RunEvents,
    ledger: Callable[[], Ledger],
    *,
    ci: CiChoice = "auto",
    prices: str | PriceTable | None = None,
    replay: bool = True,
) -> Scorecard:
    """The scorecard of ``run`` (read as ``target``), as ``benchledger report RUN`` computes
    it (``reading.Run.scorecard``)."""
    suite, card = scored([target], [run], ledger, ci=ci, prices=price_table(prices),
                         replay=replay)  # fmt: skip
    return summary(suite, card)


def report(
    runs: str | Sequence[str],
    *,
    ledger: LedgerLike = None,
    pubkey: PubKeys = None,
    ci: CiChoice = "auto",
    prices: str | PriceTable | None = None,
    settings: Settings | None = None,
) -> Scorecard:
    """The scorecard of one run, or of several merged as passes (a suite that merges), each
    read through the door; ``render(fmt)`` is ``benchledger report``'s output."""
    targets = [runs] if isinstance(runs, str) else list(runs)
    keys = trusted_keys(pubkey)  # a bad key file: refused first
    table = price_table(prices)  # and a bad price table
    opener = reader(ledger, settings)
    # Routed on what the door read, not on a peek at the file first: a bundle is read
    # once (a FIFO, or a file that changes between reads, gives no second read to trust).
    first = read(targets[0], opener, keys)
    suite = of_run(first)
    read_runs = [first] + ([read(t, opener, keys) for t in targets[1:]] if suite.merges else [])
    if not suite.merges and len(targets) > 1:
        raise Refused(f"a {suite.name} run is reported on its own: give one RUN")
    suite, card = scored(targets, read_runs, opener, ci=ci, prices=table)
    return summary(suite, card)
