"""The gate's bar: its options, the baseline and bar ``gate`` applies, and its JSON verdict.

``run --gate-baseline`` and ``prereg new`` take the same bar options (``gate_bar_args``)
as ``gate`` itself; a pre-registered bar is the one ``gate`` applies unless overridden.
"""

from __future__ import annotations

import argparse
import json

from benchledger.cli.common import EXIT_OK, UsageError
from benchledger.ledger.redaction import WithheldEvent
from benchledger.ledger.verified import OWN, Origin, RunEvents
from benchledger.projections.prereg import BadPreregistration, Bar, recorded, resolve, run_started
from benchledger.projections.suites.lifecycle.compare import GateRow
from benchledger.projections.suites.lifecycle.scorecard import OUTCOME_KINDS


def gate_bar_args(p: argparse._ActionsContainer) -> None:
    """Add ``--tolerance T`` and ``--gate-metrics M[,M]`` (a gate's bar)."""
    p.add_argument(
        "--tolerance",
        type=float,
        default=None,
        help="how much worse still counts as not worse (default 0.05: five points)",
    )
    p.add_argument(
        "--gate-metrics",
        metavar="M[,M]",
        help="the metrics that decide (default: every gated metric)",
    )


def metrics_option(value: str | None) -> list[str] | None:
    """``--gate-metrics a, b`` as ``["a", "b"]``; None when not given."""
    return [m.strip() for m in value.split(",") if m.strip()] if value else None


def gate_baseline(args: argparse.Namespace, candidate: RunEvents) -> str:
    """The baseline to gate against: --baseline, else the candidate's pre-registered one."""
    try:
        p = recorded(candidate)  # first: a run that shows no run_started cannot be gated at all
    except BadPreregistration as exc:
        raise UsageError(f"cannot gate: {exc}") from None
    if args.baseline:
        return str(args.baseline)
    if p is None:
        raise UsageError(f"gate needs --baseline: run {candidate.run_id} pre-registered no gate")
    return p.baseline_run


def gate_bar(args: argparse.Namespace, candidate: RunEvents, baseline: RunEvents) -> Bar:
    """The bar ``gate`` applies: pre-registered, or given, or overridden (and reported)."""
    for run in (baseline, candidate):
        try:  # its record (k, agent, model...) and its bar live there: unreadable, no gate
            run_started(run)
        except BadPreregistration as exc:
            raise UsageError(f"cannot gate: {exc}") from None
        hidden = {
            e.stream
            for e, _ in run.events
            if isinstance(e, WithheldEvent) and e.withheld_kind in OUTCOME_KINDS
        }
        if hidden:
            raise UsageError(
                f"cannot gate: run {run.run_id} withholds the decisions of {len(hidden)} units "
                "(a redacted bundle); gate the full run"
            )
    try:
        return resolve(
            recorded(candidate),
            baseline_root=baseline.root,
            tolerance=args.tolerance,
            metrics=metrics_option(args.gate_metrics),
            strict=args.strict,
            override=args.override,
            run_id=candidate.run_id,
        )
    except BadPreregistration as exc:
        raise UsageError(f"cannot gate: {exc}") from None


def gate_json(
    bar: Bar,
    rows: list[GateRow],
    baseline: RunEvents,
    candidate: RunEvents,
    verdict: str,
    status: int,
) -> str:
    """The gate's verdict as JSON: the bar (and any override), every row, the exit code."""
    return json.dumps(
        {
            "candidate": {"run": candidate.run_id, "root": candidate.root, **_stood(candidate)},
            "baseline": {"run": baseline.run_id, "root": baseline.root, **_stood(baseline)},
            "bar": bar.as_json(),
            "rows": [
                {
                    "metric": g.row.name,
                    "verdict": g.verdict,
                    "reason": g.reason,
                    "baseline": {"num": g.row.a_num, "den": g.row.a_den},
                    "candidate": {"num": g.row.b_num, "den": g.row.b_den},
                    "better_low": None if g.better is None else g.better.low,
                    "better_high": None if g.better is None else g.better.high,
                    "resolution": g.row.resolution,
                }
                for g in rows
            ],
            "verdict": verdict,
            "passed": status == EXIT_OK,
            "exit": status,
        },
        indent=2,
    )


def _stood(run: RunEvents) -> dict[str, object]:
    """A gated run's JSON ``authentication`` and ``origin`` (``open_run`` set them)."""
    if run.standing is None:
        return {}
    origin = run.origin or Origin(OWN)
    return {"authentication": run.standing.as_json(), "origin": origin.as_json()}
