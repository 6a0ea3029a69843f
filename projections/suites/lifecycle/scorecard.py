"""The lifecycle suite's metrics as a fold over a run's events (docs/metrics.md).

Every metric is computed from ``grader_decision`` events alone (plus unit and
episode bookkeeping for errors and tokens), never from a results file, and carries
the (stream, seq) of every decision in its numerator and its denominator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    EpisodeStartedEvent,
    Event,
    GraderDecisionEvent,
    InfraErrorEvent,
    RunSealedEvent,
    RunStartedEvent,
    SessionCallEvent,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
    is_probe_stream,
)
from benchledger.ledger.redaction import WithheldEvent
from benchledger.projections import measured
from benchledger.projections.card import (
    CI_CHOICES,
    CI_CLUSTER,
    CI_WILSON,
    CI_WILSON_PROTOCOLS,
    OUTCOME_KINDS,
    Decision,
    Metric,
    Ref,
    RunMeta,
    subset_label,
)
from benchledger.projections.prices import Cost, PriceTable, Unpriced
from benchledger.projections.prices import priced as price_usage
from benchledger.projections.stats import (
    Interval,
    cluster_rate_interval,
    pass_hat,
    pass_hat_k,
    wilson,
)
from benchledger.projections.suites.lifecycle import ranks as rk
from benchledger.projections.usage import Usage, UsageFold, merge, sum_tokens

# The checks a lifecycle unit's grader decisions carry (``GraderDecisionBody.check``).
CAPTURE_ATTEMPTED: Final = "capture_attempted"
TEACH_BUDGET_EXHAUSTED: Final = "teach_budget_exhausted"
CAPTURED: Final = "captured"
RECALL_CORRECT: Final = "recall_correct"
RECALL_SEARCH_CALLED: Final = "recall_search_called"  # the peer's `recall_surfaced`
RECALL_FACT_SURFACED: Final = "recall_fact_surfaced"  # ours: the fact in a tool result
PROMOTED: Final = "promoted"
TRANSFER_CORRECT: Final = "transfer_correct"
TRANSFER_SURFACED: Final = "transfer_surfaced"
UPDATE_CAPTURED: Final = "update_captured"
UPDATE_CORRECT: Final = "update_correct"
DUPLICATED: Final = "duplicated"
ABSTAIN_CORRECT: Final = "abstain_correct"
CHECKS: Final = (
    CAPTURE_ATTEMPTED, TEACH_BUDGET_EXHAUSTED, CAPTURED, RECALL_CORRECT, RECALL_SEARCH_CALLED,
    RECALL_FACT_SURFACED, PROMOTED, TRANSFER_CORRECT, TRANSFER_SURFACED, UPDATE_CAPTURED,
    UPDATE_CORRECT, DUPLICATED, ABSTAIN_CORRECT,
)  # fmt: skip
# Peer run records name the search-called boolean `recall_surfaced`.
PEER_NAMES: Final = {RECALL_SEARCH_CALLED: "recall_surfaced"}


def lifecycle_passed(v: Callable[[str], bool | None]) -> bool:
    """Whether the verdicts ``v(check)`` of an error-free unit pass the full lifecycle.

    Captured and recall correct; promote, transfer and abstain not applicable or true;
    the update not applicable or (landed, correct, no duplicate).
    """
    update_ok = v(UPDATE_CAPTURED) is None or (
        v(UPDATE_CAPTURED) is True and v(UPDATE_CORRECT) is True and v(DUPLICATED) is not True
    )
    return (
        v(CAPTURED) is True
        and v(RECALL_CORRECT) is True
        and v(PROMOTED) in (None, True)
        and v(TRANSFER_CORRECT) in (None, True)
        and v(ABSTAIN_CORRECT) in (None, True)
        and update_ok
    )


@dataclass
class Unit:
    """One protocol attempt as the fold sees it."""

    stream: str
    protocol_id: str = ""
    attempt: int = 0
    decisions: dict[str, Decision] = field(default_factory=dict)
    finished: Ref | None = None
    error: str = ""
    abandoned: bool = False
    infra_errors: int = 0
    tokens: dict[str, int] = field(default_factory=dict)  # its stream's, from the usage fold
    withheld: list[tuple[int, str]] = field(default_factory=list)  # (seq, kind), redacted
    # Each ranked stage's first search call (projections.suites.lifecycle.ranks), and the
    # taught fact's rank in it once the scorecard knows the facts (None: a miss).
    searches: dict[str, rk.Searched] = field(default_factory=dict)
    ranks: dict[str, int | None] = field(default_factory=dict)

    @property
    def outcome_withheld(self) -> bool:
        """A redacted bundle withholds one of its decisions (or its start or end)."""
        return any(kind in OUTCOME_KINDS for _, kind in self.withheld)

    def verdict(self, check: str) -> bool | None:
        d = self.decisions.get(check)
        return None if d is None else d.verdict

    def ref(self, check: str) -> list[Ref]:
        d = self.decisions.get(check)
        return [] if d is None else [(d.stream, d.seq)]

    @property
    def graded(self) -> bool:
        """Finished without an infrastructure error (and not abandoned, nor withheld)."""
        return (
            self.finished is not None
            and not self.error
            and not self.abandoned
            and not self.outcome_withheld
        )

    @property
    def counted(self) -> bool:
        """Counts toward pass^k: finished (an error counts as a failure), not abandoned."""
        return self.finished is not None and not self.abandoned and not self.outcome_withheld

    def passed(self) -> bool:
        """Graded, and every applicable stage passed (docs/metrics.md, full lifecycle pass)."""
        return self.graded and lifecycle_passed(self.verdict)

    @property
    def ranked(self) -> bool:
        """Its ranks count: graded, and no search result of it withheld by a redaction."""
        return self.graded and not any(kind == "session_call" for _, kind in self.withheld)

    def all_refs(self) -> list[Ref]:
        refs = [(d.stream, d.seq) for d in self.decisions.values()]
        return refs + ([self.finished] if self.finished else [])


class MetricSpec(NamedTuple):
    """A metric: which units are in the denominator, which of those in the numerator."""

    name: str
    description: str
    in_den: Callable[[Unit], bool]
    den_check: str
    in_num: Callable[[Unit], bool]
    num_check: str
    label: str = ""
    gated: bool = False
    higher_is_better: bool = True


def _is(check: str, value: bool | None = True) -> Callable[[Unit], bool]:
    return lambda u: u.verdict(check) is value


def _graded(u: Unit) -> bool:
    return u.graded


def _graded_and(check: str, value: bool | None = True) -> Callable[[Unit], bool]:
    return lambda u: u.graded and u.verdict(check) is value


def _graded_has(check: str) -> Callable[[Unit], bool]:
    return lambda u: u.graded and u.verdict(check) is not None


def _budget_starved(u: Unit) -> bool:
    return u.verdict(CAPTURE_ATTEMPTED) is False and u.verdict(TEACH_BUDGET_EXHAUSTED) is True


METRICS: Final = (
    MetricSpec("capture_rate", "a pending insight by the teacher, linked to the entity",
               _graded_has(CAPTURED), CAPTURED, _is(CAPTURED), CAPTURED, gated=True),
    MetricSpec("personal_recall", "recall answered correctly in a fresh session",
               _graded, RECALL_CORRECT, _is(RECALL_CORRECT), RECALL_CORRECT, gated=True),
    MetricSpec("unprompted_surface", "search was called in the recall episode (captured units)",
               _graded_and(CAPTURED), CAPTURED, _is(RECALL_SEARCH_CALLED), RECALL_SEARCH_CALLED,
               label="peer-compatible: the peer's `recall_surfaced`"),
    MetricSpec("recall_surfaced", "the taught fact appeared in a recall tool result (captured)",
               lambda u: _graded_and(CAPTURED)(u) and u.verdict(RECALL_FACT_SURFACED) is not None,
               CAPTURED, _is(RECALL_FACT_SURFACED), RECALL_FACT_SURFACED,
               label="benchledger's stricter definition"),
    MetricSpec("transfer_rate", "another identity answered after promotion",
               _graded_has(TRANSFER_CORRECT), TRANSFER_CORRECT, _is(TRANSFER_CORRECT),
               TRANSFER_CORRECT, gated=True),
    MetricSpec("transfer_surfaced", "the promoted fact appeared in a transfer tool result",
               _graded_has(TRANSFER_CORRECT), TRANSFER_CORRECT, _is(TRANSFER_SURFACED),
               TRANSFER_SURFACED),
    MetricSpec("transfer_used_given_surfaced", "transfer correct when the fact surfaced",
               _graded_and(TRANSFER_SURFACED), TRANSFER_SURFACED, _is(TRANSFER_CORRECT),
               TRANSFER_CORRECT),
    MetricSpec("update_capture_rate", "the correction landed (captured update units)",
               _graded_has(UPDATE_CAPTURED), UPDATE_CAPTURED, _is(UPDATE_CAPTURED),
               UPDATE_CAPTURED),
    MetricSpec("update_correctness", "recall flipped to the new value (correction landed)",
               _graded_and(UPDATE_CAPTURED), UPDATE_CAPTURED, _is(UPDATE_CORRECT), UPDATE_CORRECT,
               gated=True),
    MetricSpec("duplicate_rate", "the original insight stayed live (correction landed)",
               _graded_and(UPDATE_CAPTURED), UPDATE_CAPTURED, _is(DUPLICATED), DUPLICATED,
               gated=True, higher_is_better=False),
    MetricSpec("abstention_rate", "refused to answer an untaught question",
               _graded, ABSTAIN_CORRECT, _is(ABSTAIN_CORRECT), ABSTAIN_CORRECT, gated=True),
    MetricSpec("full_lifecycle", "every applicable stage passed",
               _graded, CAPTURED, lambda u: u.passed(), CAPTURED),
    MetricSpec("capture_attempt_rate", "memory_capture was called while teaching",
               _graded_has(CAPTURE_ATTEMPTED), CAPTURE_ATTEMPTED, _is(CAPTURE_ATTEMPTED),
               CAPTURE_ATTEMPTED),
    MetricSpec("capture_given_attempted", "captured, when a capture was attempted",
               _graded_and(CAPTURE_ATTEMPTED), CAPTURE_ATTEMPTED, _is(CAPTURED), CAPTURED),
    MetricSpec("capture_budget_starved", "misses where the teach budget ran out before capturing",
               _graded_and(CAPTURED, False), CAPTURED, _budget_starved, TEACH_BUDGET_EXHAUSTED),
)  # fmt: skip
METRIC_NAMES: Final = (*(m.name for m in METRICS), "pass_k", *rk.NAMES)
GATED: Final = (*(m.name for m in METRICS if m.gated), "pass_k")


NOUN: Final = "protocols"  # what the lifecycle's items are called (a subset's label)


class LifecycleFold:
    """Folds a run's events into units (a ``Fold`` of ``(RunMeta, list[Unit])``).

    ``noun`` names the items in a subset run's label (a suite folding with it says its own).
    """

    def __init__(self, noun: str = NOUN) -> None:
        self.noun = noun
        self.meta = RunMeta()
        self.units: dict[str, Unit] = {}
        self._usage = UsageFold()  # durations, latencies and tokens ride along

    def _unit(self, stream: str) -> Unit:
        unit = self.units.get(stream)
        if unit is None:
            unit = self.units[stream] = Unit(stream)
        return unit

    def apply(self, event: Event, link: str) -> None:
        self._usage.apply(event, link)
        if is_probe_stream(event.stream):
            return  # the probe's calls are the run's (usage), no unit's (its findings: record)
        if isinstance(event, RunStartedEvent):
            subset = subset_label(event.body.record, self.noun)
            self.meta = RunMeta(event.stream, event.body, self.meta.root, subset=subset)
        elif isinstance(event, RunSealedEvent):
            self.meta.root = event.body.root
        elif isinstance(event, UnitStartedEvent):
            unit = self._unit(event.stream)
            unit.protocol_id, unit.attempt = event.body.protocol_id, event.body.attempt
        elif isinstance(event, GraderDecisionEvent):
            gd = event.body
            self._unit(event.stream).decisions[gd.check] = Decision(
                event.stream, event.seq, link, gd.stage, gd.check, gd.verdict, gd.reason,
                gd.answer, gd.expected, gd.origin, tuple(event.refs),
            )  # fmt: skip
        elif isinstance(event, EpisodeStartedEvent | SessionCallEvent | EpisodeFinishedEvent):
            rk.apply(self._unit(event.stream).searches, event)
        elif isinstance(event, InfraErrorEvent):
            self._unit(event.stream).infra_errors += 1
        elif isinstance(event, UnitFinishedEvent):
            unit = self._unit(event.stream)
            unit.finished = (event.stream, event.seq)
            unit.error = event.body.error
        elif isinstance(event, UnitAbandonedEvent):
            self._unit(event.stream).abandoned = True
        elif isinstance(event, WithheldEvent):
            if "/" in event.stream:
                self._unit(event.stream).withheld.append((event.seq, event.withheld_kind))
            else:
                self.meta.withheld.append(event.withheld_kind)

    def result(self) -> tuple[RunMeta, list[Unit]]:
        self.meta.usage = self._usage.result()
        for stream, tokens in self._usage.by_stream.items():  # a unit's tokens: its stream's
            if not is_probe_stream(stream):  # the probe's episodes are no unit's
                self._unit(stream).tokens = dict(tokens)
        return self.meta, [u for _, u in sorted(self.units.items())]


class Scorecard(NamedTuple):
    """Every lifecycle metric of one run (or of several runs merged as passes)."""

    meta: RunMeta
    runs: tuple[RunMeta, ...]
    units: tuple[Unit, ...]
    metrics: dict[str, Metric]
    k_used: int
    harness_failures: int
    incomplete: int
    tokens: dict[str, int]
    pass_k_short: tuple[tuple[str, int], ...] = ()  # (protocol, attempts) below k, left out
    clustered: bool = False  # intervals resample protocols (a protocol has several attempts)
    usage: Usage | None = None  # the runs' durations, model calls and tokens, merged
    prices: PriceTable | None = None  # what cost is computed at (None: the packaged table)
    # Every ranked episode (projections.suites.lifecycle.ranks), and why there are none
    # when the run's facts could not be found ("" otherwise).
    ranked: tuple[rk.Ranked, ...] = ()
    ranks_note: str = ""

    def priced(self) -> Cost | Unpriced | None:
        """The card's cost at its price table (the packaged one unless given)."""
        return price_usage(self.usage, self.prices)

    @property
    def passed_units(self) -> int:
        """Units that passed every applicable stage (what cost per pass divides by)."""
        return sum(u.passed() for u in self.units)

    def per_protocol(self) -> dict[str, list[Unit]]:
        return by_protocol(self.units)

    @property
    def k(self) -> int:
        """The run's k (several runs merged as passes: the sum of their k)."""
        return sum(r.k for r in self.runs) if len(self.runs) > 1 else self.meta.k

    @property
    def finished_keys(self) -> set[tuple[str, int]]:
        """(protocol, attempt) of every finished, not abandoned unit."""
        return {(u.protocol_id, u.attempt) for u in self.units if u.counted}

    @property
    def graded(self) -> int:
        return sum(u.graded for u in self.units)


def by_protocol(units: Iterable[Unit]) -> dict[str, list[Unit]]:
    """Counted units grouped by protocol (sorted), each group in attempt order."""
    out: dict[str, list[Unit]] = {}
    for u in units:
        if u.counted:
            out.setdefault(u.protocol_id, []).append(u)
    for group in out.values():
        group.sort(key=lambda u: (u.attempt, u.stream))
    return dict(sorted(out.items()))


def _den_ref(unit: Unit, check: str) -> list[Ref]:
    """The decision that put ``unit`` in a denominator (its unit_finished if none)."""
    refs = unit.ref(check)
    if not refs and unit.finished is not None:
        refs = [unit.finished]
    return refs


def clustered_interval(clusters: Sequence[tuple[float, int]]) -> tuple[Interval | None, str]:
    """A rate's interval with protocols as the unit of resampling, and how it was made.

    The percentile bootstrap over protocols; when it collapses to a point (every
    protocol at the same rate, e.g. all at 100%), Wilson over the number of protocols
    instead: a protocol's attempts then count as one observation, never as many.
    """
    interval = cluster_rate_interval(clusters)
    if interval is None or interval.width > 0:
        return interval, CI_CLUSTER
    return wilson(interval.low * len(clusters), len(clusters)), CI_WILSON_PROTOCOLS


def _metric(spec: MetricSpec, units: Sequence[Unit], clustered: bool) -> Metric:
    den_units = [u for u in units if spec.in_den(u)]
    num_units = [u for u in den_units if spec.in_num(u)]
    den_refs = tuple(r for u in den_units for r in _den_ref(u, spec.den_check))
    num_refs = tuple(r for u in num_units for r in u.ref(spec.num_check))
    if clustered:
        clusters: dict[str, list[int]] = {}
        for u in den_units:
            cell = clusters.setdefault(u.protocol_id, [0, 0])
            cell[0] += spec.in_num(u)
            cell[1] += 1
        interval, method = clustered_interval([(x, d) for x, d in clusters.values()])
    else:
        interval, method = wilson(len(num_units), len(den_units)), CI_WILSON
    values = tuple((u.stream, 1.0 if spec.in_num(u) else 0.0) for u in den_units)
    return Metric(spec.name, len(num_units), len(den_units), interval, num_refs, den_refs,
                  spec.label, tuple(u.stream for u in den_units), method, values)  # fmt: skip


def pass_k_values(groups: dict[str, list[Unit]], k: int) -> dict[str, float]:
    """Each protocol's unbiased pass^k, for the protocols with at least k attempts."""
    return {
        pid: pass_hat(sum(u.passed() for u in us), len(us), k)
        for pid, us in groups.items()
        if len(us) >= k
    }


def pass_k_metric(units: Sequence[Unit], k: int) -> tuple[Metric, tuple[tuple[str, int], ...]]:
    """pass^k over the protocols with at least k attempts, infra-failed units as failures.

    Returns the metric and the protocols left out for having fewer than k attempts,
    with their attempt counts; they are named in the label, never scored at a lower k.
    """
    groups = by_protocol(units)
    pids = list(groups)
    counts = [(sum(u.passed() for u in us), len(us)) for us in groups.values()]
    result = pass_hat_k(counts, k)
    short = tuple((pids[i], counts[i][1]) for i in result.short)
    used = [pid for pid in pids if len(groups[pid]) >= k]
    den = result.used
    num = (result.value or 0.0) * den
    den_refs = tuple(r for p in used for u in groups[p] for r in u.all_refs())
    num_refs = tuple(r for p in used for u in groups[p] if u.passed() for r in u.all_refs())
    label = f"unbiased estimator, k={k}"
    if short:
        named = ", ".join(f"{pid} ({n})" for pid, n in short[:5])
        if len(short) > 5:
            named += ", ..."
        label += (
            f"; attempts differ: {len(short)} protocol(s) with fewer than {k} attempts "
            f"left out: {named}"
        )
    per_protocol = pass_k_values(groups, k)
    values = list(per_protocol.values())
    if all(v in (0.0, 1.0) for v in values):  # exactly k attempts: "all k passed"
        interval, method = wilson(num, den), CI_WILSON_PROTOCOLS
    else:
        interval, method = clustered_interval([(v, 1) for v in values])
    metric = Metric("pass_k", num, den, interval, num_refs, den_refs, label, (), method,
                    tuple(per_protocol.items()))  # fmt: skip
    return metric, short


def scorecard(
    folds: Iterable[tuple[RunMeta, list[Unit]]],
    *,
    ci: str = "auto",
    facts: rk.Facts | None = None,
    facts_note: str = "",
) -> Scorecard:
    """Metrics over one run's units, or several runs' units merged as independent passes.

    ``ci``: ``wilson`` treats every attempt as independent; ``cluster`` resamples
    protocols; ``auto`` clusters when some protocol has more than one attempt (k > 1).
    ``facts``: each protocol's fact per stage, for the retrieval metrics (None: not known,
    ``facts_note`` says why, and those metrics have empty denominators).
    """
    if ci not in CI_CHOICES:
        raise ValueError(f"unknown interval {ci!r}; use {', '.join(CI_CHOICES)}")
    runs = list(folds)
    if not runs:
        raise ValueError("no runs to score")
    metas = tuple(m for m, _ in runs)
    units = tuple(u for _, us in runs for u in us)
    k = sum(m.k for m in metas) if len(metas) > 1 else metas[0].k
    several = any(len(us) > 1 for us in by_protocol(units).values())
    clustered = ci == "cluster" or (ci == "auto" and several)
    metrics = {spec.name: _metric(spec, units, clustered) for spec in METRICS}
    metrics["pass_k"], short = pass_k_metric(units, max(1, k))
    ranked = _ranked(units, facts)
    note = "" if facts is not None else facts_note or "the run's protocols were not found"
    metrics |= rk.metrics(ranked, clustered, note and f"no ranks: {note}")
    metrics = measured.declared(metrics, (m.started.record for m in metas))
    tokens = sum_tokens(u.tokens for u in units)
    failures = sum(1 for u in units if u.counted and u.error)
    incomplete = sum(
        1 for u in units if u.finished is None and not u.abandoned and not u.outcome_withheld
    )
    usages = [m.usage for m in metas if m.usage is not None]
    usage = merge(usages) if len(usages) == len(metas) else None
    return Scorecard(metas[0], metas, units, metrics, max(1, k), failures, incomplete, tokens,
                     short, clustered, usage, None, tuple(ranked), note)  # fmt: skip


def _ranked(units: Sequence[Unit], facts: rk.Facts | None) -> list[rk.Ranked]:
    """Every finished ranked episode of the units whose ranks count (sets ``unit.ranks``)."""
    out = []
    for u in units:
        if facts is None or not u.ranked:
            u.ranks = {}
            continue
        u.ranks = rk.ranks(u.searches, facts.get(u.protocol_id, {}))
        out += [rk.Ranked(u.stream, u.protocol_id, u.attempt, stage, r, u.searches[stage])
                for stage, r in u.ranks.items()]  # fmt: skip
    return out
