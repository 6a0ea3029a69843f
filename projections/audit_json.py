"""Audit as JSON: one metric's decisions with their evidence, and what stands behind them.

``benchledger audit RUN METRIC --format json``. The same audit the text prints
(``projections/audit.py``), with every recorded value whole, and the ``authentication``
and ``origin`` fields every display's JSON carries (``Standing.as_json``,
``Origin.as_json``), so a reader never takes a peer's claims or an unauthenticated run's
decisions for authenticated ones of its own.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any

from benchledger.ledger.verified import OWN, PEER_CLAIMS, Origin, RunEvents

if TYPE_CHECKING:
    from benchledger.projections.audit import Audit, Contribution


def audit_json(a: Audit, run: RunEvents) -> str:
    """``a`` (an audit of ``run``, as the door opened it) as an indented JSON document."""
    return json.dumps(audit_doc(a, run), indent=2, default=str)


def audit_doc(a: Audit, run: RunEvents) -> dict[str, Any]:
    """``a`` as JSON-ready data: the metric, each contributing unit's decision and evidence,
    the verification, completeness, ``authentication`` and ``origin``."""
    origin = run.origin or Origin(OWN)
    m = a.metric
    doc: dict[str, Any] = {
        "run": a.run_id,
        "root": a.root,
        "metric": {
            "name": m.name,
            "num": m.num,
            "den": m.den,
            "rate": m.rate,
            "ci": None
            if m.ci is None
            else {"low": m.ci.low, "high": m.ci.high, "method": m.ci_method},
            "label": m.label,
            "mean": a.mean,  # a mean of scores (the card shows it as 0.411), not a share
            # Why the run could not measure it (projections/measured.py): then no number.
            **(
                {"num": None, "den": None, "not_measured": m.not_measured} if m.not_measured else {}
            ),
        },
        # A peer's results file, not re-derived: every decision is the peer's own claim.
        "decisions_are_peer_claims": origin.kind == PEER_CLAIMS and not origin.rederived,
        "contributions": [] if m.not_measured else [_contribution(c) for c in a.contributions],
        "on_withheld_evidence": len(a.on_withheld),
        "withheld_units": list(a.withheld_units),
    }
    if run.check is not None:
        v = run.check
        doc["verification"] = {
            "source": v.source,
            "sealed": v.sealed,
            "partial": v.partial,
            "missing_units": list(v.missing_units),
            "line": v.line(),
        }
    if run.completeness is not None:
        doc["completeness"] = run.completeness.as_json()
    if run.standing is not None:
        doc["authentication"] = run.standing.as_json()
    doc["origin"] = origin.as_json()
    return doc


def _contribution(c: Contribution) -> dict[str, Any]:
    d = c.decision
    return {
        "stream": c.stream,
        "protocol_id": c.protocol_id,
        "attempt": c.attempt,
        "in_numerator": c.in_num,
        "decision": None
        if d is None
        else {
            "seq": d.seq,
            "link": d.link,
            "stage": d.stage,
            "check": d.check,
            "verdict": d.verdict,
            "reason": d.reason,
            "answer": d.answer,
            "expected": d.expected,
            "origin": d.origin,
            "refs": list(d.refs),
        },
        "evidence": [
            {
                "seq": e.seq,
                "kind": e.kind,
                "link": e.link,
                "withheld": e.withheld,
                "value": e.whole or e.summary,  # whole, as `audit --full` prints it
            }
            for e in c.evidence
        ],
    }
