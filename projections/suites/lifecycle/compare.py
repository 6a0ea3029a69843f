"""Comparing two runs of one protocol set: paired differences, McNemar, and the gate.

Two designs, chosen by the data:

- one attempt per protocol on each side (k = 1): the protocols are independent pairs;
  the difference gets Tango's score interval and McNemar's exact test;
- several attempts (k > 1): a protocol's attempts are not independent, so the interval
  comes from a bootstrap that resamples protocols (resamples with an empty denominator
  drawn again) and McNemar is not reported.

Each row also says how small a difference the comparison can resolve at its size
(``stats.resolution``), which the gate needs before it can say ``pass``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

from benchledger.projections.card import INCONCLUSIVE, PASS, REGRESS, SKIPPED, RunMeta
from benchledger.projections.comparability import Incomparable, fixed_field
from benchledger.projections.source import completeness
from benchledger.projections.stats import (
    BOOTSTRAP_REPS,
    BOOTSTRAP_SEED,
    MIN_BOOTSTRAP_GROUPS,
    Interval,
    Size,
    bootstrap,
    design_effect,
    icc_oneway,
    mcnemar_exact,
    mean_gain,
    pairs_needed,
    pooled_gain,
    resolution,
    size_to_resolve,
    tango,
)
from benchledger.projections.suites.lifecycle import ranks
from benchledger.projections.suites.lifecycle.scorecard import (
    GATED,
    METRICS,
    MetricSpec,
    Scorecard,
    Unit,
    pass_k_values,
)

TANGO: Final = "Tango score interval, protocols as pairs"
CLUSTER: Final = f"protocol-cluster bootstrap ({BOOTSTRAP_REPS} resamples, seed {BOOTSTRAP_SEED})"
EPISODES: Final = (
    f"bootstrap over paired episodes ({BOOTSTRAP_REPS} resamples, seed {BOOTSTRAP_SEED})"
)
TANGO_EPISODES: Final = "Tango score interval, episodes as pairs"


class Row(NamedTuple):
    """One metric compared: both rates, the paired difference (B - A) and its interval."""

    name: str
    a_num: float
    a_den: int
    b_num: float
    b_den: int
    diff: float | None  # the estimate the interval is built around
    ci: Interval | None
    mcnemar_p: float | None
    higher_is_better: bool
    method: str = ""
    pairs: int = 0  # paired protocols (k = 1) or attempt pairs (k > 1) behind the interval
    resolution: float | None = None  # smallest difference this size can tell from none
    deff: float = 1.0  # design effect of clustered attempts (1 for independent pairs)
    note: str = ""
    protocols: int = 0  # protocols behind the pairs
    k: int = 1  # attempts per protocol
    icc: float | None = None  # how a protocol's attempts agree (None: k = 1 shows nothing)
    not_measured: str = ""  # why a run could not measure it (projections/measured.py)

    @property
    def skipped(self) -> bool:
        return self.ci is None

    def pairs_for(self, tolerance: float) -> int:
        """Pairs (attempt pairs at this design effect) needed to resolve ``tolerance``."""
        return math.ceil(pairs_needed(tolerance) * self.deff)

    def size_for(self, tolerance: float) -> Size | None:
        """The k, or the protocols, that would resolve ``tolerance`` (None: no pairs)."""
        if not self.protocols:
            return None
        return size_to_resolve(tolerance, self.protocols, self.k, self.icc)


def _spec(name: str) -> MetricSpec | None:
    return next((s for s in METRICS if s.name == name), None)


def _one_each(pa: dict[str, list[Unit]], pb: dict[str, list[Unit]], shared: list[str]) -> bool:
    return all(len(pa[p]) == 1 and len(pb[p]) == 1 for p in shared)


def _icc(groups: dict[str, list[Unit]], spec: MetricSpec) -> float | None:
    return icc_oneway(
        [[float(spec.in_num(u)) for u in us if spec.in_den(u)] for us in groups.values()]
    )


class _Sides(NamedTuple):
    """What a row shows before any statistics: the metric and both runs' num/den."""

    name: str
    a_num: float
    a_den: int
    b_num: float
    b_den: int
    higher_is_better: bool

    def row(self, diff: float | None = None, ci: Interval | None = None, **kw: Any) -> Row:
        p = kw.pop("mcnemar_p", None)
        a, b = (self.a_num, self.a_den), (self.b_num, self.b_den)
        return Row(self.name, *a, *b, diff, ci, p, self.higher_is_better, **kw)


def _paired_row(sides: _Sides, pairs: list[tuple[bool, bool]], note: str) -> Row:
    """Independent pairs: Tango's interval on B - A and McNemar's exact test."""
    n = len(pairs)
    a_only = sum(x and not y for x, y in pairs)
    b_only = sum(y and not x for x, y in pairs)
    if n == 0:
        return sides.row(note=note or "no protocol is in both denominators")
    return sides.row(
        (b_only - a_only) / n,
        tango(b_only, a_only, n),
        mcnemar_p=mcnemar_exact(a_only, b_only),
        method=TANGO,
        pairs=n,
        resolution=resolution(n),
        note=note,
        protocols=n,
    )


def _rate_row(spec: MetricSpec, a: Scorecard, b: Scorecard, shared: list[str]) -> Row:
    pa, pb = a.per_protocol(), b.per_protocol()
    ma, mb = a.metrics[spec.name], b.metrics[spec.name]
    sides = _Sides(spec.name, ma.num, ma.den, mb.num, mb.den, spec.higher_is_better)
    if _one_each(pa, pb, shared):
        both = [p for p in shared if spec.in_den(pa[p][0]) and spec.in_den(pb[p][0])]
        one_side = sum(spec.in_den(pa[p][0]) != spec.in_den(pb[p][0]) for p in shared)
        note = (
            f"{one_side} protocol(s) in one run's denominator only, not paired" if one_side else ""
        )
        outcomes = [(spec.in_num(pa[p][0]), spec.in_num(pb[p][0])) for p in both]
        return _paired_row(sides, outcomes, note)
    cells = []
    for p in shared:
        ua = [u for u in pa[p] if spec.in_den(u)]
        ub = [u for u in pb[p] if spec.in_den(u)]
        cells.append((sum(map(spec.in_num, ua)), len(ua), sum(map(spec.in_num, ub)), len(ub)))
    diff = pooled_gain(cells)
    if diff is None:
        return sides.row(note="a run has no units in this denominator")
    pairs = sum(min(c[1], c[3]) for c in cells)
    clusters = sum(1 for c in cells if min(c[1], c[3]) > 0)
    iccs = [v for v in (_icc(pa, spec), _icc(pb, spec)) if v is not None]
    # No variation within any protocol in either run: nothing shows that attempts
    # vary independently, so count a protocol's attempts as one observation.
    icc = max(iccs) if iccs else 1.0
    deff = design_effect(pairs / clusters, icc) if clusters else 1.0
    return sides.row(
        diff,
        bootstrap(cells, pooled_gain),
        method=CLUSTER,
        pairs=pairs,
        resolution=resolution(pairs / deff),
        deff=deff,
        note=f"ICC {icc:.2f}, design effect {deff:.2f}; no McNemar: a protocol's attempts "
        "are not independent pairs",
        protocols=clusters,
        k=a.k,
        icc=icc,
    )


def _pass_k_row(a: Scorecard, b: Scorecard, shared: list[str]) -> Row:
    ma, mb = a.metrics["pass_k"], b.metrics["pass_k"]
    sides = _Sides("pass_k", ma.num, ma.den, mb.num, mb.den, True)
    if a.k != b.k:
        why = f"k differs (A k={a.k}, B k={b.k}): pass^k is never compared across k"
        return sides.row(note=why)
    k = a.k
    va, vb = pass_k_values(a.per_protocol(), k), pass_k_values(b.per_protocol(), k)
    common = [p for p in shared if p in va and p in vb]
    left_out = len(set(shared) - set(common))
    note = f"{left_out} protocol(s) with fewer than {k} attempts left out" if left_out else ""
    values = [(va[p], vb[p]) for p in common]
    n = len(values)
    # One value per protocol whatever k: more attempts add no pairs (an ICC of 1).
    if all(x in (0.0, 1.0) and y in (0.0, 1.0) for x, y in values):  # exactly k attempts
        paired = _paired_row(sides, [(x == 1.0, y == 1.0) for x, y in values], note)
        return paired._replace(k=k, icc=1.0)
    return sides.row(
        mean_gain(values),
        bootstrap(values, mean_gain),
        method=CLUSTER,
        pairs=n,
        resolution=resolution(n),
        note=note,
        protocols=n,
        k=k,
        icc=1.0,
    )


def _episode_scores(card: Scorecard, name: str, shared: set[str]) -> dict[tuple[str, str], float]:
    """A retrieval metric's mean score per (protocol, stage) over the card's attempts."""
    stage = name.partition(".")[2]
    wanted = (stage,) if stage else ranks.RANKED
    head = name.partition(".")[0]
    k = None if head == "mrr" else int(head.rsplit("_", 1)[1])
    cells: dict[tuple[str, str], list[float]] = {}
    for r in card.ranked:
        if r.stage in wanted and r.protocol_id in shared:
            if k is None:
                score = 0.0 if r.rank is None else 1.0 / r.rank
            else:
                score = float(r.rank is not None and r.rank <= k)
            cells.setdefault((r.protocol_id, r.stage), []).append(score)
    return {key: sum(v) / len(v) for key, v in cells.items()}


def _retrieval_row(name: str, a: Scorecard, b: Scorecard, shared: list[str]) -> Row:
    """recall@k or MRR, paired by (protocol, stage) episode: Tango and McNemar when every
    pair is one 0/1 outcome a side (recall@k at k = 1), else a bootstrap of the mean gain."""
    ma, mb = a.metrics[name], b.metrics[name]
    sides = _Sides(name, ma.num, ma.den, mb.num, mb.den, True)
    va, vb = (_episode_scores(c, name, set(shared)) for c in (a, b))
    common = sorted(set(va) & set(vb))
    values = [(va[key], vb[key]) for key in common]
    one_side = len(set(va) ^ set(vb))
    note = f"{one_side} episode(s) ranked in one run only, not paired" if one_side else ""
    if not values:
        return sides.row(note=note or "no episode is ranked in both runs")
    if all(x in (0.0, 1.0) and y in (0.0, 1.0) for x, y in values):
        paired = _paired_row(sides, [(x == 1.0, y == 1.0) for x, y in values], note)
        return paired._replace(method=TANGO_EPISODES) if paired.method else paired
    interval = bootstrap(values, mean_gain, min_groups=MIN_BOOTSTRAP_GROUPS)
    if interval is None and len(values) < MIN_BOOTSTRAP_GROUPS:
        few = f"{len(values)} paired episodes: too few for a bootstrap interval"
        note = f"{note}; {few}" if note else few
    return sides.row(mean_gain(values), interval, method=EPISODES,
                     pairs=len(values), resolution=resolution(len(values)), note=note,
                     protocols=len({p for p, _ in common}), k=a.k)  # fmt: skip


def compare(a: Scorecard, b: Scorecard, names: Sequence[str] | None = None) -> list[Row]:
    """Per metric: B - A with an interval paired by protocol (and McNemar when k = 1).

    Checks nothing about what the runs are: the matrix (``matrix.same_set``) holds the
    protocol set fixed and names what differs; the gate (``check_gateable``) holds more.
    """
    shared = sorted(set(a.per_protocol()) & set(b.per_protocol()))
    rows = []
    for name in names or [s.name for s in METRICS] + ["pass_k"]:
        spec = _spec(name)
        if why := _not_measured(name, a, b):
            better = spec.higher_is_better if spec is not None else True
            rows.append(Row(name, 0, 0, 0, 0, None, None, None, better, note=why,
                            not_measured=why))  # fmt: skip
        elif ranks.is_retrieval(name):
            rows.append(_retrieval_row(name, a, b, shared))
        elif spec is None:
            rows.append(_pass_k_row(a, b, shared))
        else:
            rows.append(_rate_row(spec, a, b, shared))
    return rows


def _not_measured(name: str, a: Scorecard, b: Scorecard) -> str:
    """``not measured: <why>`` when either run could not measure ``name`` (no difference
    is computed from what one of them did not measure), else ""."""
    for role, card in (("baseline", a), ("candidate", b)):
        m = card.metrics.get(name)
        if m is not None and m.not_measured:
            return f"not measured in the {role}: {m.not_measured}"
    return ""


# -- the gate ------------------------------------------------------------------------------


class GateRow(NamedTuple):
    row: Row
    verdict: str
    better: Interval | None  # the interval on "how much better the candidate is"
    reason: str = ""
    needs: Size | None = None  # too small to decide: the size that would


def _complete(card: Scorecard, role: str) -> None:
    """Refuse a run that cannot carry a verdict: unsealed, incomplete, all errors, coupled."""
    meta = card.meta
    run = meta.run_id
    done = completeness(meta, card.units)  # the count every report's banner shows
    if not done.sealed and done.infra_failed and not done.short:
        raise Incomparable(
            f"the {role} run {run} is not sealed: {done.counts()}{done.infra_text()}; retry "
            f"them with `benchledger run --resume {run} --retry-infra` or seal it as it is "
            f"with `benchledger seal {run}`, then gate it"
        )
    if not done.sealed:
        raise Incomparable(
            f"the {role} run {run} is not sealed (interrupted or still running): "
            f"{done.finished} of {done.planned or '?'} planned units finished; finish it with "
            f"`benchledger run --resume {run}` or gate a sealed run"
        )
    if done.short:
        shown = ", ".join(done.missing[:3]) + (", ..." if len(done.missing) > 3 else "")
        raise Incomparable(
            f"the {role} run {run} is incomplete: {done.finished} of {done.planned} planned "
            f"units (protocols × k = {meta.protocols} × {meta.k}) finished"
            + (f"; missing {shown}" if shown else "")
        )
    finished = card.finished_keys
    if not finished:
        raise Incomparable(f"the {role} run {run} has zero finished units")
    if card.graded == 0:
        raise Incomparable(
            f"the {role} run {run} has no graded units: all {len(finished)} finished units "
            f"ended in an infrastructure error (see `benchledger report {run}`)"
        )
    if meta.coupled:
        raise Incomparable(
            f"the {role} run {run} is coupled: its attempts shared platform state, so they are "
            "not independent; re-run it with a fresh platform per pass"
        )


def check_gateable(baseline: Scorecard, candidate: Scorecard) -> None:
    """Raise Incomparable (one line, naming the run and the field) unless both can be gated."""
    _complete(candidate, "candidate")
    _complete(baseline, "baseline")
    a, b = baseline.meta, candidate.meta
    for label, x, y in (
        ("protocol set", fixed_field(a, "protocol_set"), fixed_field(b, "protocol_set")),
        ("k", baseline.k, candidate.k),
        ("agent", a.agent, b.agent),
        ("platform", a.platform, b.platform),
        ("model", a.model, b.model),
    ):
        if x != y:
            raise Incomparable(
                f"baseline {a.run_id} and candidate {b.run_id} differ in {label}: {x!r} vs {y!r}"
            )
    if a.subset != b.subset:  # same set hash, other units: rates over different protocols
        raise Incomparable(
            f"baseline {a.run_id} and candidate {b.run_id} differ in subset: "
            f"{_selection('baseline', a)} but {_selection('candidate', b)}; gate runs of the "
            "same selection"
        )


def _selection(role: str, meta: RunMeta) -> str:
    """``the candidate X is a subset run (...)`` or ``the baseline Y ran the whole set``."""
    if meta.subset:
        return f"the {role} {meta.run_id} is a subset run, {meta.subset}"
    return f"the {role} {meta.run_id} ran the whole set"


def judge(row: Row, tolerance: float) -> GateRow:
    """The verdict on one compared metric; see docs/metrics.md, "The gate"."""
    if row.not_measured:  # never a pass, whatever else passed
        return GateRow(row, INCONCLUSIVE, None, row.note)
    if row.ci is None:
        if not row.a_den and not row.b_den:
            return GateRow(row, SKIPPED, None, "no units in either run's denominator")
        if not row.b_den:
            why = f"the candidate has no units in this denominator (the baseline has {row.a_den})"
        elif not row.a_den:
            why = "the baseline has no units in this denominator"
        else:
            why = row.note or "no paired units"
        return GateRow(row, INCONCLUSIVE, None, why)
    better = row.ci if row.higher_is_better else Interval(0.0 - row.ci.high, 0.0 - row.ci.low)
    too_small = row.resolution is None or row.resolution > tolerance
    needs = row.size_for(tolerance) if too_small else None
    if better.width <= 0:
        why = "zero-width interval: no protocol changed, which shows nothing"
        return GateRow(row, INCONCLUSIVE, better, why, needs)
    if better.high < -tolerance:
        return GateRow(row, REGRESS, better, f"the whole interval is below -{tolerance:g}")
    if too_small:
        shown = "?" if row.resolution is None else f"{row.resolution:.3f}"
        return GateRow(
            row,
            INCONCLUSIVE,
            better,
            f"too small to decide: {row.pairs} pairs resolve {shown} > {tolerance:g}; "
            f"needs about {row.pairs_for(tolerance)} pairs"
            + ("" if needs is None else f": {needs.text()}"),
            needs,
        )
    if better.low >= -tolerance:
        return GateRow(row, PASS, better, f"the whole interval is at or above -{tolerance:g}")
    return GateRow(row, INCONCLUSIVE, better, f"the interval reaches below -{tolerance:g}")


def gate(baseline: Scorecard, candidate: Scorecard, tolerance: float = 0.05) -> list[GateRow]:
    """A verdict per gated metric from the interval on candidate - baseline.

    Raises Incomparable when the runs cannot be gated at all (``check_gateable``).
    """
    check_gateable(baseline, candidate)
    return [judge(row, tolerance) for row in compare(baseline, candidate, GATED)]
