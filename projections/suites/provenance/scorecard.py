"""The provenance lane's metrics as a fold over a run's events (docs/provenance.md, The metrics).

M1 ``replay_determinism``: each case's replicates gave its scored turn one trace hash
(threshold 1.00). M2 ``input_sensitivity``: pairs of cases with different inputs (primes
and prompt) have different scored-turn hashes (> 0.95, over every such pair and over the
pairs sharing their final prompt). M3 ``source_attribution``: the expected source kinds
are in the scored turn's computed provenance (> 0.95), with ``source_precision`` beside
it (every resolved source of an expected kind; reported, never gated). M4
``source_validity``: every cited source resolves, and there is one (1.00). The overall
verdict passes only if all four pass (and the log-driven replay, when given, is 1.00).

Every number carries the events behind it: M1 and M2 the scored turns'
``episode_finished`` events, M3 and M4 the ``grader_decision`` events of the one
decision function (``projections.suites.provenance.decisions``). A denominator of zero never
passes. Units with an infrastructure error are left out of every rate and counted.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, NamedTuple

from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    EpisodeStartedEvent,
    Event,
    RunStartedEvent,
)
from benchledger.projections.card import CI_WILSON, Metric, Ref, RunMeta
from benchledger.projections.stats import wilson
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.provenance.decisions import (
    ATTRIBUTION,
    PRECISION,
    SCORED,
    VALIDITY,
    is_prime,
)

SUITE: Final = "provenance"
NOUN: Final = "cases"  # what its items are called (a subset's label)
M1: Final = "replay_determinism"
M2: Final = "input_sensitivity"
M3: Final = "source_attribution"
M4: Final = "source_validity"
PRECISION_METRIC: Final = "source_precision"
SAME_PROMPT: Final = "input_sensitivity_same_prompt"
M1_LOG: Final = "replay_determinism_log"
OVERALL: Final = "overall_pass"
METRIC_NAMES: Final = (M1, M2, SAME_PROMPT, M3, PRECISION_METRIC, M4, M1_LOG)
GATED: Final = (M1, M2, M3, M4)
DESCRIPTIONS: Final = {
    M1: "cases whose replicates' scored turns have one trace hash (fresh runtimes)",
    M1_LOG: "scored turns whose log-driven replay reproduced their trace hash",
    M2: "pairs of cases with different inputs whose scored turns hash differently",
    SAME_PROMPT: "of those, the pairs with the same final prompt and different primes",
    M3: "case replicates whose computed provenance holds every expected source kind",
    PRECISION_METRIC: "case replicates whose resolved sources are all of an expected kind",
    M4: "case replicates citing at least one source, every one resolving",
}


class Threshold(NamedTuple):
    """A metric's bar: ``rate > value`` (strict) or ``rate >= value``."""

    value: float
    strict: bool

    def met(self, rate: float | None) -> bool:
        """Whether ``rate`` clears the bar; an empty denominator never does."""
        if rate is None:
            return False
        return rate > self.value if self.strict else rate >= self.value

    def __str__(self) -> str:
        return f"{'>' if self.strict else '>='} {self.value:.2f}"


THRESHOLDS: Final = {
    M1: Threshold(1.0, False),
    M1_LOG: Threshold(1.0, False),
    M2: Threshold(0.95, True),
    SAME_PROMPT: Threshold(0.95, True),
    M3: Threshold(0.95, True),
    M4: Threshold(1.0, False),
}


def _prime_number(stage: str) -> int:
    tail = stage.rpartition("_")[2]
    return int(tail) if tail.isdigit() else 0


@dataclass
class CaseUnit:
    """One replicate of one case: its bookkeeping, decisions and scored turn."""

    unit: lc.Unit
    scored: Ref | None = None  # the scored turn's episode_finished (its last finished try)
    trace_hash: str = ""
    sources: tuple[str, ...] = ()
    prompts: dict[str, str] = field(default_factory=dict)  # episode -> user prompt

    @property
    def stream(self) -> str:
        return self.unit.stream

    @property
    def case_id(self) -> str:
        return self.unit.protocol_id

    @property
    def attempt(self) -> int:
        return self.unit.attempt

    @property
    def graded(self) -> bool:
        """Finished without an infrastructure error, with a scored turn."""
        return self.unit.graded and self.scored is not None

    @property
    def inputs(self) -> tuple[str, ...]:
        """What the case gave the agent: its prime prompts in order, then the scored prompt."""
        primes = sorted((k for k in self.prompts if is_prime(k)), key=_prime_number)
        return (*(self.prompts[k] for k in primes), self.prompts.get(SCORED, ""))

    def verdict(self, check: str) -> bool | None:
        return self.unit.verdict(check)


class ProvenanceFold:
    """Folds a run's events into case replicates (a ``Fold`` of ``(RunMeta, [CaseUnit])``)."""

    def __init__(self) -> None:
        self.base = lc.LifecycleFold(NOUN)  # run metadata, decisions, errors, abandonment
        self.extra: dict[str, CaseUnit] = {}

    def _extra(self, stream: str) -> CaseUnit:
        found = self.extra.get(stream)
        if found is None:
            found = self.extra[stream] = CaseUnit(lc.Unit(stream))
        return found

    def apply(self, event: Event, link: str) -> None:
        self.base.apply(event, link)
        if isinstance(event, EpisodeStartedEvent):
            self._extra(event.stream).prompts[event.body.episode] = event.body.user_prompt
        elif isinstance(event, EpisodeFinishedEvent) and event.body.episode == SCORED:
            unit = self._extra(event.stream)
            unit.scored = (event.stream, event.seq)
            unit.trace_hash = event.body.trace_hash
            unit.sources = tuple(event.body.sources)

    def result(self) -> tuple[RunMeta, list[CaseUnit]]:
        meta, units = self.base.result()
        out = []
        for u in units:
            extra = self.extra.get(u.stream) or CaseUnit(u)
            extra.unit = u
            out.append(extra)
        return meta, out


class CaseFailure(NamedTuple):
    """Why one case (or pair of cases) failed a metric, and the streams to look at."""

    metric: str
    case: str
    streams: tuple[str, ...]
    detail: str


class Card(NamedTuple):
    """The provenance lane's verdicts for one run."""

    meta: RunMeta
    units: tuple[CaseUnit, ...]
    metrics: dict[str, Metric]
    passed: dict[str, bool]  # per gated metric (and M1_LOG when given)
    failures: tuple[CaseFailure, ...]
    harness_failures: int
    incomplete: int
    notes: tuple[str, ...] = ()

    @property
    def overall_pass(self) -> bool:
        """All four metrics (and the log-driven replay, when given) pass."""
        return all(self.passed.values())

    def per_case(self) -> dict[str, list[CaseUnit]]:
        """Finished replicates by case id (sorted), each in attempt order."""
        out: dict[str, list[CaseUnit]] = {}
        for u in self.units:
            if u.unit.counted:
                out.setdefault(u.case_id, []).append(u)
        for group in out.values():
            group.sort(key=lambda u: (u.attempt, u.stream))
        return dict(sorted(out.items()))


def _metric(
    name: str,
    num: int,
    den: int,
    num_refs: Iterable[Ref],
    den_refs: Iterable[Ref],
    units: Iterable[str] = (),
    label: str = "",
) -> Metric:
    interval = wilson(num, den)
    return Metric(
        name, num, den, interval, tuple(num_refs), tuple(den_refs), label, tuple(units), CI_WILSON
    )


def _scored_refs(units: Iterable[CaseUnit]) -> list[Ref]:
    return [u.scored for u in units if u.scored is not None]


def _graded_by_case(units: Iterable[CaseUnit]) -> dict[str, list[CaseUnit]]:
    out: dict[str, list[CaseUnit]] = {}
    for u in units:
        if u.graded:
            out.setdefault(u.case_id, []).append(u)
    return dict(sorted(out.items()))


def replay_determinism(units: Iterable[CaseUnit]) -> tuple[Metric, list[CaseFailure], int]:
    """M1: per case with two or more graded replicates, one scored-turn trace hash.

    Returns the metric, the failing cases, and how many cases had fewer than two.
    """
    by_case = _graded_by_case(units)
    judged = {c: us for c, us in by_case.items() if len(us) >= 2}
    short = len(by_case) - len(judged)
    same = [c for c, us in judged.items() if len({u.trace_hash for u in us} - {""}) == 1]
    failures = []
    for c, us in judged.items():
        if c not in same:
            seen = ", ".join(f"attempt {u.attempt} {u.trace_hash[:12] or '(none)'}" for u in us)
            detail = f"scored-turn trace hashes differ: {seen}"
            failures.append(CaseFailure(M1, c, tuple(u.stream for u in us), detail))
    label = f"{short} case(s) with fewer than two graded replicates left out" if short else ""
    every = [u for us in judged.values() for u in us]
    metric = _metric(
        M1,
        len(same),
        len(judged),
        _scored_refs(u for c in same for u in judged[c]),
        _scored_refs(every),
        (u.stream for u in every),
        label,
    )
    return metric, failures, short


def input_sensitivity(units: Iterable[CaseUnit]) -> tuple[Metric, Metric, list[CaseFailure]]:
    """M2: pairs of cases with different inputs whose scored turns never share a hash.

    Returns the metric over every such pair, the same over the pairs with the same final
    prompt (and different primes), and the colliding pairs.
    """
    by_case = _graded_by_case(units)
    hashes = {c: {u.trace_hash for u in us} for c, us in by_case.items()}
    inputs = {c: us[0].inputs for c, us in by_case.items()}
    pairs = [(a, b) for a, b in itertools.combinations(by_case, 2) if inputs[a] != inputs[b]]
    same_prompt = [(a, b) for a, b in pairs if inputs[a][-1] == inputs[b][-1]]
    collide = {(a, b) for a, b in pairs if hashes[a] & hashes[b]}
    failures = []
    for a, b in sorted(collide):
        same = inputs[a][-1] == inputs[b][-1]
        kind = "same final prompt, different primes" if same else "different inputs"
        shared = ", ".join(sorted(h[:12] for h in hashes[a] & hashes[b]))
        streams = tuple(u.stream for u in [*by_case[a], *by_case[b]])
        detail = f"{kind}, yet the scored turns share trace hash {shared}"
        failures.append(CaseFailure(M2, f"{a} / {b}", streams, detail))

    def metric(name: str, chosen: list[tuple[str, str]]) -> Metric:
        cases = sorted({c for pair in chosen for c in pair})
        bad = {c for pair in chosen if pair in collide for c in pair}
        every = [u for c in cases for u in by_case[c]]
        return _metric(
            name,
            sum(pair not in collide for pair in chosen),
            len(chosen),
            _scored_refs(u for u in every if u.case_id not in bad),
            _scored_refs(every),
            (u.stream for u in every),
            "pairs of cases",
        )

    return metric(M2, pairs), metric(SAME_PROMPT, same_prompt), failures


def _den_ref(u: CaseUnit, check: str) -> list[Ref]:
    """The decision that put a replicate in a denominator (its unit_finished if none)."""
    return u.unit.ref(check) or ([u.unit.finished] if u.unit.finished else [])


def _decided(
    name: str, check: str, units: Iterable[CaseUnit], *, gated: bool
) -> tuple[Metric, list[CaseFailure]]:
    """A rate of one check's verdicts over graded replicates.

    Gated: every graded replicate counts, one the decisions never judged as a failure.
    Not gated (precision): only replicates with a verdict count.
    """
    den = [u for u in units if u.graded and (gated or u.verdict(check) is not None)]
    num = [u for u in den if u.verdict(check) is True]
    failures = []
    for u in den:
        if gated and u.verdict(check) is not True:
            decided = u.unit.decisions.get(check)
            why = decided.reason if decided is not None else "not decided"
            failures.append(
                CaseFailure(name, u.case_id, (u.stream,), f"attempt {u.attempt}: {why}")
            )
    metric = _metric(
        name,
        len(num),
        len(den),
        (r for u in num for r in u.unit.ref(check)),
        (r for u in den for r in _den_ref(u, check)),
        (u.stream for u in den),
    )
    return metric, failures


def _log_replay(
    units: list[CaseUnit], reproduced: Mapping[str, bool]
) -> tuple[Metric, list[CaseFailure]]:
    """M1 for the log-driven replay: graded scored turns it reproduced."""
    scored = [u for u in units if u.graded]
    ok = [u for u in scored if reproduced.get(u.stream) is True]
    why = "the log-driven replay did not reproduce the scored turn"
    failures = [
        CaseFailure(M1_LOG, u.case_id, (u.stream,), f"attempt {u.attempt}: {why}")
        for u in scored
        if u not in ok
    ]
    streams = (u.stream for u in scored)
    metric = _metric(M1_LOG, len(ok), len(scored), _scored_refs(ok), _scored_refs(scored), streams)
    return metric, failures


def scorecard(
    folded: tuple[RunMeta, list[CaseUnit]], *, log_replay: Mapping[str, bool] | None = None
) -> Card:
    """Every metric of one provenance run, with per-case failures.

    ``log_replay`` (scored-turn stream -> reproduced) adds M1 for the log-driven replay,
    which must be 1.00 too; the run's own events cannot say it, so a caller who replayed
    the run passes it in.
    """
    meta, units = folded
    m1, f1, short = replay_determinism(units)
    m2, same, f2 = input_sensitivity(units)
    m3, f3 = _decided(M3, ATTRIBUTION, units, gated=True)
    precision, _ = _decided(PRECISION_METRIC, PRECISION, units, gated=False)
    m4, f4 = _decided(M4, VALIDITY, units, gated=True)
    metrics = {m.name: m for m in (m1, m2, same, m3, precision, m4)}
    passed = {
        M1: THRESHOLDS[M1].met(m1.rate),
        # The same-prompt pairs are where an agent that ignores its primes collides: gated too.
        M2: THRESHOLDS[M2].met(m2.rate) and (not same.den or THRESHOLDS[M2].met(same.rate)),
        M3: THRESHOLDS[M3].met(m3.rate),
        M4: THRESHOLDS[M4].met(m4.rate),
    }
    failures = [*f1, *f2, *f3, *f4]
    if log_replay is not None:
        metrics[M1_LOG], f_log = _log_replay(units, log_replay)
        passed[M1_LOG] = THRESHOLDS[M1_LOG].met(metrics[M1_LOG].rate)
        failures += f_log
    errored = [u for u in units if u.unit.finished is not None and u.unit.error]
    incomplete = [u for u in units if u.unit.finished is None]
    return Card(
        meta,
        tuple(units),
        metrics,
        passed,
        tuple(failures),
        sum(not u.unit.abandoned for u in errored),
        sum(not u.unit.abandoned for u in incomplete),
        (m1.label,) if short else (),
    )


def is_provenance(events: Iterable[tuple[Event, str]]) -> bool:
    """Whether a run's events are a provenance run (its ``run_started.suite``)."""
    return any(isinstance(e, RunStartedEvent) and e.body.suite == SUITE for e, _ in events)
