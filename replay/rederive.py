"""Re-derivation: the decision function on the recorded evidence, the projections on the
recorded decisions, the trace hashes on the recorded events (docs/ci.md, What is checked).

Like a workflow replayer catching non-determinism, it catches a grader, rule or
projection change that would alter a past result: every recorded decision, metric and
trace hash must come out identical. Nothing here talks to a platform or a model.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

import msgspec

from benchledger.harness.probe import ProbeReport, Said, Seen, findings_of, seen_in
from benchledger.ledger import UnusableInput
from benchledger.ledger.events import (
    Body,
    Event,
    GraderDecisionBody,
    GraderDecisionEvent,
    ProbeFinishedEvent,
    UnitFinishedEvent,
    make_event,
)
from benchledger.projections.card import Metric, Ruling
from benchledger.projections.fold import fold
from benchledger.projections.suites import lookup
from benchledger.projections.trace import check_hashes
from benchledger.protocols.schema import Protocol
from benchledger.replay.findings import Mismatch, Report
from benchledger.replay.target import ReplayUnit, Run

# How a unit's decisions are computed (from its protocol, or a provenance run's case);
# injectable so a test (or a what-if) can change a grader and see which recorded results
# it would alter.
Decider = Callable[[Any, Sequence[tuple[int, Body]]], list[Ruling]]

OURS: Final = "benchledger"
FIELDS: Final = ("stage", "verdict", "reason", "answer", "expected")


NOT_REDERIVABLE: Final = "decisions not re-derivable (imported)"
# A check whose field the imported results shape never recorded (``config["unrecorded"]``,
# harness.peer.importer.unrecorded): its re-derived decisions are counted under this name
# with the fields named, never compared with a verdict that was never recorded.
UNRECORDED: Final = "decisions not re-derivable (not recorded by the results shape: {})"
NOT_RECORDED: Final = "trace hashes not recorded"
ABANDONED: Final = "abandoned units"
PROBE_WITHHELD: Final = "probe (its calls withheld)"

Replaced = list[tuple[int, GraderDecisionBody, tuple[int, ...]]]


def rederive(
    run: Run,
    protocols: Mapping[str, Protocol],
    *,
    decide: Decider | None = None,
    target: str = "",
) -> Report:
    """Re-derive every decision, metric and trace hash of ``run``; the report lists mismatches.

    ``decide`` defaults to the decision function of the run's suite (``ReadSuite.decide``).
    """
    suite = lookup(run.header.suite)
    if decide is None:
        decide = suite.decide
    report = Report("rederive", target or run.run_id, run.run_id)
    report.compared = dict.fromkeys(("decisions", "metrics", "trace hashes"), 0)
    report.skipped = dict.fromkeys((NOT_REDERIVABLE, NOT_RECORDED, ABANDONED), 0)
    imported = _imported(run)
    rederived: list[Event] = []  # every unit's events, its decisions re-derived
    for unit in run.units:
        if unit.abandoned:  # interrupted and re-run under another stream: not a result
            report.skipped[ABANDONED] += 1
            rederived += unit.events
            continue
        protocol = _protocol(unit, protocols)
        replaced = _decisions(report, unit, protocol, decide, suite.answer_checks, imported)
        rederived += _with_decisions(unit, replaced)
        _trace_hashes(report, unit)
    _probe(report, run)
    found, compared = _metrics(run, rederived)
    report.compared["metrics"] = compared
    report.mismatches += found
    return report


def _probe(report: Report, run: Run) -> None:
    """The probe's findings re-derived from its recorded calls by the live probe's own
    findings (harness/probe.py ``findings_of``), against its ``probe_finished`` and the run
    record's ``probe``; the lifecycle checks' findings (read-backs the adapter observed)
    are compared as recorded. A run recorded without a probe stream has nothing here."""
    unit, record = run.probe, run.header.record
    if unit is None or record is None:
        return
    ends = [e for e in unit.events if isinstance(e, ProbeFinishedEvent)]
    if not ends:
        end = unit.events[-1].seq if unit.events else -1
        report.mismatches.append(Mismatch(unit.stream, end, "probe", "probe_finished",
                                          "present", "absent"))  # fmt: skip
        return
    if len(ends) != 1 or any(not hasattr(e, "body") for e in unit.events):
        report.skipped[PROBE_WITHHELD] = 1  # a redacted bundle's: what it saw is not shown
        return
    event = ends[-1]
    recorded = ProbeReport.of(event.body)
    said = Said.recorded(record.vocabulary)
    calls = [b for _, b in unit.pairs]
    derived = findings_of(recorded.platform, said, seen_in(said, calls) if said else Seen())
    report.compared["probe findings"] = len(recorded.findings)
    for i, mine in enumerate(derived):
        theirs = recorded.findings[i] if i < len(recorded.findings) else None
        if theirs != mine:
            what = mine.what if theirs is None else theirs.what
            report.mismatches.append(Mismatch(
                unit.stream, event.seq, "probe", f"findings.{what}",
                theirs._asdict() if theirs else "(not recorded)", mine._asdict()))  # fmt: skip
    if record.probe != recorded.record():
        report.mismatches.append(Mismatch(run.run_id, 0, "probe", "record.probe", record.probe,
                                          recorded.record()))  # fmt: skip


def _imported(run: Run) -> frozenset[str] | None:
    """None for a run of ours; for an import (``config["origin"]`` names the peer), the
    checks its results shape never recorded (``config["unrecorded"]``)."""
    config = run.header.config
    origin = config.get("origin")
    if not isinstance(origin, str) or not origin or origin == OURS:
        return None
    missing = config.get("unrecorded")
    return (
        frozenset(c for c in missing if isinstance(c, str))
        if isinstance(missing, list)
        else frozenset()
    )


def _protocol(unit: ReplayUnit, protocols: Mapping[str, Protocol]) -> Protocol:
    started = unit.started
    if started is None:
        raise UnusableInput(unit.stream, "the unit stream has no unit_started event")
    protocol = protocols.get(started.body.protocol_id)
    if protocol is None:
        raise UnusableInput(
            unit.stream,
            f"protocol {started.body.protocol_id!r} is not in the protocol set; pass the "
            "run's protocols with --protocols PATH",
        )
    return protocol


def _decisions(
    report: Report,
    unit: ReplayUnit,
    protocol: Protocol,
    decide: Decider,
    answers: frozenset[str],
    imported: frozenset[str] | None = None,
) -> Replaced:
    """Compare the unit's recorded decisions with re-derived ones; return the re-derived.

    ``answers``: the suite's checks graded from an answer alone, the only ones an imported
    peer run can re-derive (its other verdicts were recorded without the read-backs that
    decided them). ``imported``: None for a run of ours, else the checks the import's
    results shape never recorded; an imported unit is compared as one whatever it recorded
    (a unit with no peer verdict at all is not therefore ours)."""
    derived = decide(protocol, unit.pairs)
    recorded = [e for e in unit.events if isinstance(e, GraderDecisionEvent)]
    skip = 0
    if imported is not None or any(e.body.origin != OURS for e in recorded):
        missing = imported or frozenset()
        never = [d for d in derived if d.body.check in missing]
        if never:
            named = UNRECORDED.format(", ".join(sorted(missing)))
            report.skipped[named] = report.skipped.get(named, 0) + len(never)
        found, replaced, skip = _compare_imported(unit.stream, recorded, derived, answers)
        report.skipped[NOT_REDERIVABLE] += skip
    else:
        found, replaced = _compare_own(unit, recorded, derived)
    report.compared["decisions"] += len(recorded) - skip
    report.mismatches += found
    report.mismatches += _outcome(unit, recorded)
    return replaced


def _trace_hashes(report: Report, unit: ReplayUnit) -> None:
    """Every recorded trace hash of the unit against the one recomputed from its events."""
    for check in check_hashes(unit.pairs):
        if not check.recorded_at_all:
            report.skipped[NOT_RECORDED] += 1
            continue
        report.compared["trace hashes"] += 1
        if not check.equal:
            what = f"episode {check.label}" if check.scope == "episode" else "unit"
            report.mismatches.append(
                Mismatch(unit.stream, check.seq, what, "trace_hash", check.recorded, check.computed)
            )


def _differences(stream: str, event: GraderDecisionEvent, mine: Ruling) -> list[Mismatch]:
    """Where a recorded decision of ours and its re-derivation differ: each field, the refs."""
    body = event.body
    out = [
        Mismatch(stream, event.seq, body.check, name, getattr(body, name), getattr(mine.body, name))
        for name in FIELDS
        if getattr(body, name) != getattr(mine.body, name)
    ]
    if tuple(event.refs) != tuple(mine.refs):
        out.append(
            Mismatch(stream, event.seq, body.check, "refs", list(event.refs), list(mine.refs))
        )
    return out


def _compare_own(
    unit: ReplayUnit, recorded: list[GraderDecisionEvent], derived: list[Ruling]
) -> tuple[list[Mismatch], Replaced]:
    """Our own decisions: every field, the refs, and the order, matched by check."""
    out: list[Mismatch] = []
    by_check = {d.body.check: d for d in derived}
    seen = set()
    for event in recorded:
        body = event.body
        mine = by_check.get(body.check)
        if mine is None:
            out.append(
                Mismatch(unit.stream, event.seq, body.check, "decision", "present", "not derived")
            )
            continue
        seen.add(body.check)
        out += _differences(unit.stream, event, mine)
    end = unit.events[-1].seq if unit.events else -1
    recorded_checks = {e.body.check for e in recorded}
    for d in derived:
        if d.body.check not in recorded_checks:
            out.append(
                Mismatch(
                    unit.stream,
                    end,
                    d.body.check,
                    "decision",
                    "absent",
                    f"derived: verdict {d.body.verdict}",
                )
            )
    order_rec = [e.body.check for e in recorded if e.body.check in by_check]
    order_der = [d.body.check for d in derived if d.body.check in seen]
    if order_rec != order_der:
        first = recorded[0].seq if recorded else end
        out.append(Mismatch(unit.stream, first, "decisions", "order", order_rec, order_der))
    replaced = [(-1 - i, d.body, d.refs) for i, d in enumerate(derived)]
    return out, replaced


def _compare_imported(
    stream: str, recorded: list[GraderDecisionEvent], derived: list[Ruling], answers: frozenset[str]
) -> tuple[list[Mismatch], Replaced, int]:
    """A peer's decisions: only answer verdicts can be re-derived; the rest are kept as is.

    Ours recorded beside them (an import that also ran our decision function) are
    compared field by field, as in a run of our own.
    """
    out: list[Mismatch] = []
    by_check = {d.body.check: d for d in derived}
    replaced: Replaced = []
    skip = 0
    for event in recorded:
        body = event.body
        if body.origin == OURS:
            mine = by_check.get(body.check)
            if mine is None:
                out.append(Mismatch(stream, event.seq, body.check, "decision", "present",
                                    "not derived"))  # fmt: skip
                replaced.append((event.seq, body, tuple(event.refs)))
            else:
                out += _differences(stream, event, mine)
                replaced.append((event.seq, mine.body, mine.refs))
            continue
        if body.check not in answers:
            skip += 1
            replaced.append((event.seq, body, tuple(event.refs)))
            continue
        mine = by_check.get(body.check)
        if mine is None:
            out.append(
                Mismatch(
                    stream,
                    event.seq,
                    body.check,
                    "decision",
                    body.verdict,
                    "not derived (no answer recorded)",
                )
            )
            replaced.append((event.seq, body, tuple(event.refs)))
            continue
        if mine.body.verdict != body.verdict:
            out.append(
                Mismatch(stream, event.seq, body.check, "verdict", body.verdict, mine.body.verdict)
            )
        # Ours, kept as the peer's (its origin and stage) for the re-derived scorecard.
        redone = msgspec.structs.replace(mine.body, stage=body.stage, origin=body.origin)
        replaced.append((event.seq, redone, tuple(event.refs)))
    return out, replaced, skip


def _outcome(unit: ReplayUnit, recorded: list[GraderDecisionEvent]) -> list[Mismatch]:
    """The unit's recorded outcome is the projection of its recorded decisions."""
    finished = next((e for e in unit.events if isinstance(e, UnitFinishedEvent)), None)
    if finished is None:
        return []
    verdicts = {e.body.check: e.body.verdict for e in recorded}
    outcome = finished.body.outcome
    return [
        Mismatch(
            unit.stream, finished.seq, check, "outcome", outcome.get(check), verdicts.get(check)
        )
        for check in sorted(set(outcome) | set(verdicts))
        if outcome.get(check) != verdicts.get(check)
    ]


def _with_decisions(unit: ReplayUnit, decisions: Replaced) -> list[Event]:
    """The unit's events with its grader decisions replaced (for the projections)."""
    kept = [e for e in unit.events if not isinstance(e, GraderDecisionEvent)]
    added = [make_event(unit.stream, seq, "", 0, body, refs) for seq, body, refs in decisions]
    return kept + added


def _card(run: Run, events: Iterable[Event]) -> dict[str, Metric]:
    """The metrics of the run's suite's card over ``events``."""
    suite = lookup(run.header.suite)
    return suite.scorecard([fold(suite.fold(), ((e, "") for e in events))]).metrics


def _metrics(run: Run, rederived: list[Event]) -> tuple[list[Mismatch], int]:
    """The scorecard from the recorded decisions against the one from re-derived decisions."""
    header = [e for e, _ in run.events.events if e.stream == run.run_id]
    recorded = _card(run, (e for e, _ in run.events.events))
    again = _card(run, [*header, *rederived])
    return _differ(run, recorded, again), len(recorded)


def _differ(run: Run, recorded: dict[str, Metric], again: dict[str, Metric]) -> list[Mismatch]:
    """Each recorded metric's num/den against the re-derived one's."""
    out = []
    for name, metric in recorded.items():
        other = again.get(name)
        a = _fraction(metric.num, metric.den)
        b = _fraction(other.num, other.den) if other is not None else None
        if a != b:
            out.append(Mismatch(run.run_id, -1, f"metric {name}", "num/den", a, b))
    return out


def _fraction(num: Any, den: int) -> str:
    value = round(num, 9) if isinstance(num, float) and not float(num).is_integer() else int(num)
    return f"{value}/{den}"
