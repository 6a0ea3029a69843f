"""Audit: trace one metric to the decision events behind it and the evidence they cite.

What every suite's audit shares: the audit's shape, the evidence read from the run, and
the text it prints as. Each suite's ``audit`` (``projections/suites/<name>/audit.py``,
``ReadSuite.audit``) picks the contributions of its own metrics.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, NamedTuple

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    Event,
    ModelCallEvent,
    ReadBackEvent,
    SessionCallBody,
    SessionCallEvent,
    UnitAbandonedEvent,
)
from benchledger.ledger.redaction import WithheldEvent
from benchledger.ledger.verified import OWN_GRADER, PEER_CLAIMS, Origin
from benchledger.projections.card import (
    CI_LABELS,
    Decision,
    Metric,
    fmt_interval,
    fmt_num,
    fmt_pct,
    fmt_why,
)
from benchledger.projections.errors import Refused


class UnknownMetric(Refused, ValueError):
    """The metric name is not one the run's suite defines (``known``: the ones it does)."""

    def __init__(self, name: str, known: tuple[str, ...] = ()) -> None:
        self.name = name
        super().__init__(f"no metric {name!r}; known metrics: {', '.join(known)}")


class AuditEvidence(NamedTuple):
    """One event of a contributing unit as an audit shows it, by its seq and link hash."""

    seq: int
    kind: str
    link: str
    summary: str  # one line, long values shortened with a marker saying how much is left
    withheld: bool = False  # a redacted bundle withholds it: kind and digest only
    whole: str = ""  # the same with every value whole (``render(full=True)``)


class Contribution(NamedTuple):
    """One unit in a metric's denominator, the decision that counted it, and its evidence."""

    stream: str
    protocol_id: str
    attempt: int
    in_num: bool
    decision: Decision | None
    evidence: tuple[AuditEvidence, ...]


class Audit(NamedTuple):
    run_id: str
    root: str
    metric: Metric
    contributions: tuple[Contribution, ...]
    withheld_units: tuple[str, ...] = ()  # decisions withheld: in no rate
    # A mean of scores that are not shares (an F1, a reciprocal rank): shown as the card
    # shows it, a number (0.411), never a percentage.
    mean: bool = False

    @property
    def on_withheld(self) -> tuple[Contribution, ...]:
        """The contributions whose decision rests on withheld evidence."""
        return tuple(c for c in self.contributions if any(e.withheld for e in c.evidence))

    @property
    def streams(self) -> set[str]:
        return {c.stream for c in self.contributions}


def _short(value: Any, width: int = 110, full: bool = False) -> str:
    """``value`` on one line, cut at ``width`` with ``… (+N chars)``; ``full``: all of it."""
    text = value if isinstance(value, str) else canonical_json(value).decode()
    if full:
        return text
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    return f"{text[: width - 1]}… (+{len(text) - width + 1} chars)"


def recorded_result(body: SessionCallBody) -> Any:
    """What a call returned as recorded: its content blocks, else structured, else result.

    Tool results live in ``content`` (text blocks joined, as the agent saw them) and
    ``structured``; ``result`` holds only non-tool results and old events' text.
    """
    if body.content:
        return body.text() if all("text" in b for b in body.content) else body.content
    return body.structured if body.structured is not None else body.result


def _describe(event: Event, full: bool = False) -> str:
    if isinstance(event, WithheldEvent):
        return f"WITHHELD {event.withheld_kind}: body not disclosed, digest {event.hash}"
    if isinstance(event, SessionCallEvent):
        b = event.body
        err = " (error)" if b.is_error else ""
        args, result = _short(b.arguments, 60, full), _short(recorded_result(b), 70, full)
        return f"{b.method} {b.tool} {args} -> {result}{err}"
    if isinstance(event, ModelCallEvent):
        response = _short(event.body.response, 90, full)
        return f"model turn {event.body.request_hash[:12]}: {response}"
    if isinstance(event, ReadBackEvent):
        rb = event.body
        return f"{rb.method} {rb.path} -> {rb.status} {_short(rb.body, 80, full)}"
    if isinstance(event, EpisodeFinishedEvent):
        answer = _short(event.body.final_answer, 90, full)
        return f"episode {event.body.episode} final answer: {answer}"
    return _short(getattr(event, "body", None), full=full)


def evidence_of(
    by_seq: dict[int, tuple[Event, str]], refs: tuple[int, ...]
) -> tuple[AuditEvidence, ...]:
    """The events a decision refs, and (one level further) what an episode summary refs."""
    seen: list[int] = []
    for r in refs:
        seen.append(r)
        event = by_seq.get(r, (None, ""))[0]
        if isinstance(event, EpisodeFinishedEvent) or (
            isinstance(event, WithheldEvent) and event.withheld_kind == "episode_finished"
        ):
            seen.extend(x for x in event.refs if x not in seen)
    out = []
    for seq in sorted(set(seen)):
        if seq in by_seq:
            event, link = by_seq[seq]
            kind = type(event).__struct_config__.tag
            if isinstance(event, WithheldEvent):
                kind = event.withheld_kind
            withheld = isinstance(event, WithheldEvent)
            summary, whole = _describe(event), _describe(event, full=True)
            out.append(AuditEvidence(seq, str(kind), link, summary, withheld, whole))
    return tuple(out)


def render(a: Audit, full: bool = False, origin: Origin | None = None) -> str:
    """The audit as text: value, then one block per contributing unit.

    Long values (tool results, arguments, answers) are shortened with ``… (+N chars)``;
    ``full`` prints each whole, its further lines indented under its evidence line. A run
    whose ``origin`` is a peer's results file labels each decision as the peer's claim.
    """
    peer = ""
    if origin is not None and origin.kind == PEER_CLAIMS:
        peer = origin.source or "the peer"
    origins = {c.decision.origin for c in a.contributions if c.decision}

    def decided(d: Decision) -> str:  # each decision by who made it
        return f"{peer}'s recorded claim" if peer and d.origin != OWN_GRADER else "decision"

    m = a.metric
    if m.not_measured:  # no number and no decisions counted toward one (measured.py)
        return f"run {a.run_id}  root {a.root or '(unsealed)'}\n{m.name}: {fmt_why(m)}"
    ci = "n/a"
    if m.ci is not None:
        low, high = m.ci.low, m.ci.high
        shown = f"[{low:.3f}, {high:.3f}]" if a.mean else fmt_interval(low, high)
        ci = f"{shown} ({CI_LABELS[m.ci_method]})"
    if a.mean:
        value = "n/a" if m.rate is None else f"{m.rate:.3f}"
        value += f"  (mean of {m.den} scores, summing to {fmt_num(m.num, 3)})"
    else:
        value = f"{fmt_pct(m.rate)}  ({fmt_num(m.num, 3)}/{m.den})"
    lines = [
        f"run {a.run_id}  root {a.root or '(unsealed)'}",
        f"{m.name} = {value}  95% CI {ci}" + (f"  [{m.label}]" if m.label else ""),
        f"{len(a.contributions)} contributing units "
        f"({sum(c.in_num for c in a.contributions)} in the numerator)",
    ]
    if peer and OWN_GRADER not in origins:
        lines.append(
            f"every decision below is {peer}'s recorded claim, imported from its "
            "results file; benchledger's graders did not re-derive it"
        )
    elif peer:
        lines.append(
            f"decisions marked [{OWN_GRADER}] are benchledger's, ruled on the answers imported "
            f"from {peer}'s results file; any other is {peer}'s recorded claim"
        )
    if a.on_withheld:
        lines.append(
            f"{len(a.on_withheld)} of {len(a.contributions)} decisions rest on withheld evidence "
            "(marked WITHHELD; `benchledger verify --reveal FULL` checks it)"
        )
    if a.withheld_units:
        lines.append(
            f"{len(a.withheld_units)} units' decisions are withheld and in no rate: "
            + ", ".join(a.withheld_units)
        )
    lines.append("")
    for c in a.contributions:
        mark = "num+den" if c.in_num else "den    "
        lines.append(f"{mark}  {c.protocol_id} attempt {c.attempt}  ({c.stream})")
        d = c.decision
        if d is not None:
            lines.append(
                f"    {decided(d)} seq {d.seq} {d.link[:12]}  {d.check}={_verdict(d.verdict)}  "
                f"[{d.origin}] {d.reason}"
            )
            if d.answer:
                lines.append(f"    answer:   {_indent(_short(d.answer, full=full))}")
            if d.expected is not None:
                lines.append(f"    expected: {_indent(_short(d.expected, full=full))}")
        if any(e.withheld for e in c.evidence):
            lines.append("    rests on withheld evidence")
        for e in c.evidence:
            summary = _indent(e.whole or e.summary) if full else e.summary
            lines.append(f"    evidence seq {e.seq} {e.kind} {e.link[:12]}  {summary}")
    return "\n".join(lines)


def abandoned_lines(events: Iterable[tuple[Event, str]]) -> list[str]:
    """The run's abandoned attempts (kept in the log, counted nowhere): one line each with
    why and the attempt that replaced it; [] for a run without any."""
    found = [(e.stream, e.body.reason, e.body.resumed_as)
             for e, _ in events if isinstance(e, UnitAbandonedEvent)]  # fmt: skip
    if not found:
        return []
    lines = [f"{len(found)} abandoned attempts (kept in the log, in no rate):"]
    for stream, reason, resumed_as in found:
        lines.append(f"  {stream}: {reason}" + (f"; resumed as {resumed_as}" if resumed_as else ""))
    return lines


def _indent(text: str) -> str:
    """A whole value's further lines, indented so they read as part of its block."""
    return text.replace("\n", "\n        ")


def _verdict(v: bool | None) -> str:
    return "n/a" if v is None else str(v).lower()
