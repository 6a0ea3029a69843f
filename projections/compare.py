"""Comparing two runs of one protocol set: paired differences, McNemar, and the gate."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Final, NamedTuple

from projections.lifecycle import GATED, METRICS, MetricSpec, RunMeta, Scorecard, Unit
from projections.stats import Interval, bootstrap, mcnemar_exact, pass_hat


class Incomparable(ValueError):
    """Two runs (or passes) that must not be compared or merged; the message says why."""


def comparable(metas: Sequence[RunMeta], *, what: str = "runs") -> None:
    """Refuse runs that differ in protocol set, agent or platform."""
    first = metas[0]
    for other in metas[1:]:
        for field, label in (
            ("protocol_set_hash", "protocol set"),
            ("agent", "agent"),
            ("platform", "platform"),
        ):
            a, b = getattr(first, field), getattr(other, field)
            if a != b:
                raise Incomparable(
                    f"{what} {first.run_id} and {other.run_id} differ in {label}: {a!r} vs {b!r}"
                )


class Row(NamedTuple):
    """One metric compared: both rates, the paired difference (B - A) and its interval."""

    name: str
    a_num: float
    a_den: int
    b_num: float
    b_den: int
    diff: float | None
    ci: Interval | None
    mcnemar_p: float | None
    higher_is_better: bool

    @property
    def skipped(self) -> bool:
        return self.diff is None


def _spec(name: str) -> MetricSpec | None:
    return next((s for s in METRICS if s.name == name), None)


def _pass_value(units: Sequence[Unit], k: int) -> float:
    return pass_hat(sum(u.passed() for u in units), len(units), k)


def _mean_gain(sample: Sequence[tuple[float, float]]) -> float:
    return sum(y - x for x, y in sample) / len(sample)


def _rate_gain(sample: Sequence[tuple[int, int, int, int]]) -> float:
    """B's pooled rate minus A's over a resample of (a_num, a_den, b_num, b_den) per protocol."""
    an, ad, bn, bd = (sum(s[i] for s in sample) for i in range(4))
    return (bn / bd if bd else 0.0) - (an / ad if ad else 0.0)


def compare(a: Scorecard, b: Scorecard, names: Sequence[str] | None = None) -> list[Row]:
    """Per metric: B - A with a protocol-paired bootstrap interval and McNemar's exact test."""
    comparable([a.meta, b.meta])
    pa, pb = a.per_protocol(), b.per_protocol()
    shared = sorted(set(pa) & set(pb))
    rows = []
    for name in names or [s.name for s in METRICS] + ["pass_k"]:
        ma, mb = a.metrics[name], b.metrics[name]
        spec = _spec(name)
        higher = spec.higher_is_better if spec else True
        if not ma.den or not mb.den or not shared:
            rows.append(Row(name, ma.num, ma.den, mb.num, mb.den, None, None, None, higher))
            continue
        if spec is None:  # pass_k: mean of per-protocol unbiased values
            k = min(a.k_used, b.k_used) or 1
            pairs = [(_pass_value(pa[p], k), _pass_value(pb[p], k)) for p in shared]
            diff = sum(y - x for x, y in pairs) / len(pairs)
            ci = bootstrap(pairs, _mean_gain)
            rows.append(Row(name, ma.num, ma.den, mb.num, mb.den, diff, ci, None, higher))
            continue
        per = []
        disc_b = disc_c = 0
        for p in shared:
            ua = [u for u in pa[p] if spec.in_den(u)]
            ub = [u for u in pb[p] if spec.in_den(u)]
            per.append((sum(map(spec.in_num, ua)), len(ua), sum(map(spec.in_num, ub)), len(ub)))
            for x, y in zip(ua, ub, strict=False):  # pair attempts in order
                xa, yb = spec.in_num(x), spec.in_num(y)
                disc_b += xa and not yb
                disc_c += yb and not xa
        diff = mb.num / mb.den - ma.num / ma.den

        ci = bootstrap(per, _rate_gain)
        p_value = mcnemar_exact(disc_b, disc_c)
        rows.append(Row(name, ma.num, ma.den, mb.num, mb.den, diff, ci, p_value, higher))
    return rows


PASS: Final = "pass"
REGRESS: Final = "regress"
INCONCLUSIVE: Final = "inconclusive"
SKIPPED: Final = "skipped"


class GateRow(NamedTuple):
    row: Row
    verdict: str
    better: Interval | None  # the interval on "how much better the candidate is"


def gate(baseline: Scorecard, candidate: Scorecard, tolerance: float = 0.05) -> list[GateRow]:
    """A verdict per gated metric from the interval on the difference (candidate - baseline)."""
    for card, role in ((baseline, "baseline"), (candidate, "candidate")):
        if not any(u.counted for u in card.units):
            raise Incomparable(f"the {role} run {card.meta.run_id} has zero units")
    comparable([baseline.meta, candidate.meta])
    if baseline.meta.model != candidate.meta.model:
        raise Incomparable(
            f"runs differ in model: {baseline.meta.model!r} vs {candidate.meta.model!r}"
        )
    out = []
    for row in compare(baseline, candidate, GATED):
        if row.ci is None:
            out.append(GateRow(row, SKIPPED, None))
            continue
        better = row.ci if row.higher_is_better else Interval(-row.ci.high, -row.ci.low)
        if better.high < -tolerance:
            verdict = REGRESS
        elif better.low >= -tolerance:
            verdict = PASS
        else:
            verdict = INCONCLUSIVE
        out.append(GateRow(row, verdict, better))
    return out
