"""What a run could not measure: the one place that decides it (docs/metrics.md, "Not measured").

Before any unit the probe (harness/probe.py) records what works on the platform as
findings in the run record (``RunRecord.probe``). A metric that depends on a finding that
failed is not measured, and says why, on every display and in the JSON: never a 0, never
a pass (a gate skips it). A run recorded before platforms were probed, or on a platform
shared by every pass (not probed), has no failed finding here, so its metrics stand as
they were.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any, Final

from benchledger.ledger.events import RunRecord
from benchledger.ledger.inert import inert
from benchledger.projections.card import Metric

# The probe's findings a metric can depend on (harness/probe.py records them by these).
HIT_IDS: Final = "hit ids"  # a search's answer itemised into ranked hits, each with its id
CAPTURE: Final = "capture"  # the platform's capture check (LifecycleCapability)
UPDATE: Final = "update"  # its update check
PROMOTE: Final = "promote"  # its promotion

# Each finding's metrics, by name, on every suite that has them. Retrieval metrics rank a
# search's hits by id (recall@k, MRR per stage, the abstain leak, LoCoMo's evidence recall).
_RETRIEVAL_PREFIXES: Final = ("recall_at_", "mrr", "abstain_leak_at_", "recall_any_at_",
                               "recall_all_at_", "ndcg_any_at_")  # fmt: skip
_DEPENDS: Final[dict[str, frozenset[str]]] = {
    HIT_IDS: frozenset({"evidence_recall"}),
    # Counted over captured units (or needing every stage to pass), so capture-dependent.
    CAPTURE: frozenset({"capture_rate", "capture_given_attempted", "capture_budget_starved",
                        "unprompted_surface", "recall_surfaced", "full_lifecycle", "pass_k"}),
    UPDATE: frozenset({"update_capture_rate", "update_correctness", "duplicate_rate"}),
    PROMOTE: frozenset({"transfer_rate", "transfer_surfaced", "transfer_used_given_surfaced"}),
}  # fmt: skip


# A judge's metrics (LoCoMo's J, LongMemEval's judge_accuracy, the samples' agreement and
# flip rate, on every suite) need a judge on
# record (``RunRecord.judge``: ``run --judge``, ``regrade``); agreement and flips need more
# than one sample per answer (``--judge-samples N``).
_JUDGE_PREFIXES: Final = ("j_", "judge_")
_SAMPLED: Final = frozenset({"judge_agreement", "judge_flip_rate"})
NO_JUDGE: Final = "no judge (run --judge SPEC, or benchledger regrade RUN --judge SPEC)"


def why_unjudged(record: RunRecord | None, metric: str) -> str:
    """Why a judge's ``metric`` is not measured on a run with ``record`` ("": it is, or
    the metric needs no judge)."""
    if not metric.startswith(_JUDGE_PREFIXES):
        return ""
    judge = record.judge if record is not None else {}
    if not judge:
        return NO_JUDGE
    if metric in _SAMPLED and int(str(judge.get("samples") or 1)) < 2:
        return "one judge sample per answer (--judge-samples 2+)"
    return ""


def depends_on(metric: str) -> tuple[str, ...]:
    """The probe findings ``metric`` needs working (pure; none: it needs none of them)."""
    out = [what for what, names in _DEPENDS.items() if metric in names]
    if metric.startswith(_RETRIEVAL_PREFIXES):
        out.append(HIT_IDS)
    return tuple(out)


def affected(what: str) -> str:
    """The metrics a failed finding ``what`` leaves not measured, as one phrase ("": none)."""
    names = sorted(_DEPENDS.get(what, ()))
    if what == HIT_IDS:
        names = ["recall_at_k", "mrr", "abstain_leak_at_5", *names]
    return ", ".join(names)


def failed(probe: Mapping[str, Any]) -> dict[str, str]:
    """A recorded probe's failed findings: what -> what it saw (``record()``'s shape)."""
    found = probe.get("findings") or []
    return {str(f.get("what", "")): str(f.get("detail", "")) for f in found
            if isinstance(f, Mapping) and f.get("ok") is False}  # fmt: skip


def declared_lines(records: Iterable[RunRecord | None]) -> list[str]:
    """What the runs' probes declared unmeasurable, one line per failed finding that
    leaves any metric so: ``hit ids (its hit has no id): recall_at_k, mrr, ...``."""
    out: list[str] = []
    for record in records:
        for what, detail in failed(record.probe if record is not None else {}).items():
            names = affected(what)
            line = f"{what} ({detail}): {names}"
            if names and line not in out:
                out.append(line)
    return out


def why_not(probe: Mapping[str, Any], metric: str) -> str:
    """Why ``metric`` is not measured on a run whose probe recorded ``probe`` ("": it is)."""
    bad = failed(probe)
    for what in depends_on(metric):
        if what in bad:
            return f"the probe's {what} check failed: {bad[what]}"
    return ""


def unsearched(record: RunRecord, metric: str) -> str:
    """Why ``metric`` is not measured on a LoCoMo control's run ("": it is): a control
    (``RunRecord.control``: no-memory, full-context; docs/locomo.md) never searches, so it
    ranks no hit."""
    if record.control and HIT_IDS in depends_on(metric):
        return f"a {inert(record.control, value=True)} control does not search the platform"
    return ""


def not_measured(records: Iterable[RunRecord | None], metric: str) -> str:
    """Why ``metric`` is not measured over these runs' records (merged runs: any one's)."""
    for record in records:
        why = why_not(record.probe, metric) or unsearched(record, metric) if record else ""
        why = why or why_unjudged(record, metric)
        if why:
            return why
    return ""


def unmeasured(metric: Metric, why: str) -> Metric:
    """``metric`` not measured, saying ``why``: its counts, interval and references emptied
    (never a 0)."""
    return metric._replace(num=0, den=0, ci=None, num_refs=(), den_refs=(), units=(),
                           values=(), not_measured=why)  # fmt: skip


def declared(
    metrics: Mapping[str, Metric], records: Iterable[RunRecord | None]
) -> dict[str, Metric]:
    """``metrics`` with each one not measured carrying why, and no number (its counts,
    interval and references emptied: nothing the probe declared unmeasurable is shown)."""
    records = tuple(records)
    out = {}
    for name, m in metrics.items():
        why = not_measured(records, name)
        out[name] = unmeasured(m, why) if why else m
    return out


_CUT_OFF: Final = re.compile(r"recall_at_(\d+)(?:_|$)")


def cut_off(metric: str) -> int | None:
    """The k of a recall@k metric (``recall_at_K``, ``recall_at_K_<category>``; None: not one)."""
    m = _CUT_OFF.match(metric)
    return int(m.group(1)) if m else None


def beyond_depth(k: int | None, depth: int | None) -> str:
    """Why a metric at cut-off ``k`` is not measured on a run whose searches reached
    ``depth`` ("": it is): the first k ranks of a search that asked for (or returned) fewer
    were never seen, so a share among them is unknown, never 0 or the share among fewer.
    None (no cut-off, or no search): nothing is cut."""
    if k is None or depth is None or k <= depth:
        return ""
    return f"search depth {depth}"


def depth_limited(metrics: Mapping[str, Metric], depth: int | None) -> dict[str, Metric]:
    """``metrics`` with each recall@k beyond the search ``depth`` not measured (its why)."""
    return {n: unmeasured(m, why) if (why := beyond_depth(cut_off(n), depth)) else m
            for n, m in metrics.items()}  # fmt: skip


def terms(
    values: Mapping[str, Mapping[str, float]], metrics: Mapping[str, Metric]
) -> dict[str, dict[str, float]]:
    """Each unit's terms in a card's means (``ReadSuite.unit_values``) without those of a
    metric not measured: an export scores nothing the card shows no number for."""
    gone = {n for n, m in metrics.items() if m.not_measured}
    return {s: {n: v for n, v in d.items() if n not in gone} for s, d in values.items()}
