"""Which runs may be merged, compared or gated together: what a pass holds fixed.

Every suite's card carries a ``RunMeta``; runs of different protocol sets, agents or
platforms are not passes of one run, nor a fair pair. Merging passes
(``projections/passes.py``), the gate (``projections/gate.py``) and a suite's own compare
refuse them here, in one place, with one error.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from benchledger.projections.card import RunMeta, options_text
from benchledger.projections.errors import Refused


class Incomparable(Refused, ValueError):
    """Two runs (or passes) that must not be compared, merged or gated; the message says why."""


def fixed_field(meta: RunMeta, name: str) -> str:
    """A field merging holds fixed; the protocol set by its content identity."""
    if name == "protocol_set":
        return meta.protocol_set_id or meta.protocol_set_hash
    return str(getattr(meta, name))


def comparable(metas: Sequence[RunMeta], *, what: str = "runs", across: Sequence[str] = ()) -> None:
    """Refuse runs that differ in protocol set, agent or platform (but the fields ``across``)."""
    first = metas[0]
    for other in metas[1:]:
        for field, label in (
            ("protocol_set", "protocol set"),
            ("agent", "agent"),
            ("platform", "platform"),
        ):
            if field in across:
                continue
            a, b = fixed_field(first, field), fixed_field(other, field)
            if a != b:
                raise Incomparable(
                    f"{what} {first.run_id} and {other.run_id} differ in {label}: {a!r} vs {b!r}"
                )


def configuration(meta: RunMeta) -> dict[str, str]:
    """What a run was asked to do, by label: two runs equal on all of it should behave
    identically (docs/metrics.md, "Determinism across runs"). The protocol set by its
    content identity (a LoCoMo run's: its data's sha256), the agent and its recorded
    parameters, the platform and its recorded options, how a question is answered (the
    search depth, control, context budget and answer prompt a LoCoMo run records) and the
    judge (``RunRecord.judge``, when the run has one)."""
    record = meta.started.record
    judge = record.judge if record is not None else {}
    answering = {} if record is None else {k: v for k, v in (
        ("search_k", record.search_k), ("control", record.control),
        ("context_budget", record.context_budget),
        ("answer_prompt", record.answer_prompt_hash)) if v}  # fmt: skip
    return {
        "protocol set": fixed_field(meta, "protocol_set"),
        "agent": meta.agent,
        "agent parameters": json.dumps(meta.sampling, sort_keys=True) if meta.sampling else "-",
        "platform": meta.platform,
        "platform options": options_text(meta.platform_options),
        "answering": json.dumps(answering, sort_keys=True) if answering else "-",
        "judge": json.dumps(judge, sort_keys=True) if judge else "-",
    }


def configuration_differs(a: RunMeta, b: RunMeta) -> list[tuple[str, str, str]]:
    """Each part of ``configuration`` on which the runs differ: (label, a's, b's)."""
    ca, cb = configuration(a), configuration(b)
    return [(label, ca[label], cb[label]) for label in ca if ca[label] != cb[label]]
