"""Audit: trace one metric to the decision events behind it and the evidence they cite."""

from __future__ import annotations

from typing import Any, NamedTuple

from ledger.codec import canonical_json
from ledger.events import (
    EpisodeFinished,
    Event,
    ModelCall,
    ReadBack,
    SessionCall,
    SessionCallBody,
)
from ledger.redaction import WithheldEvent
from ledger.verified import PEER_CLAIMS, Origin
from projections.fold import fold
from projections.lifecycle import (
    CI_LABELS,
    METRIC_NAMES,
    METRICS,
    Decision,
    LifecycleFold,
    Metric,
    scorecard,
)
from projections.report import fmt_interval, fmt_num, fmt_pct
from projections.source import RunEvents


class UnknownMetric(ValueError):
    """The metric name is not one the lifecycle suite defines."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"no metric {name!r}; known metrics: {', '.join(METRIC_NAMES)}")


class Evidence(NamedTuple):
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
    evidence: tuple[Evidence, ...]


class Audit(NamedTuple):
    run_id: str
    root: str
    metric: Metric
    contributions: tuple[Contribution, ...]
    withheld_units: tuple[str, ...] = ()  # decisions withheld: in no rate

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
    if isinstance(event, SessionCall):
        b = event.body
        err = " (error)" if b.is_error else ""
        args, result = _short(b.arguments, 60, full), _short(recorded_result(b), 70, full)
        return f"{b.method} {b.tool} {args} -> {result}{err}"
    if isinstance(event, ModelCall):
        response = _short(event.body.response, 90, full)
        return f"model turn {event.body.request_hash[:12]}: {response}"
    if isinstance(event, ReadBack):
        rb = event.body
        return f"{rb.method} {rb.path} -> {rb.status} {_short(rb.body, 80, full)}"
    if isinstance(event, EpisodeFinished):
        answer = _short(event.body.final_answer, 90, full)
        return f"episode {event.body.episode} final answer: {answer}"
    return _short(getattr(event, "body", None), full=full)


def _evidence(by_seq: dict[int, tuple[Event, str]], refs: tuple[int, ...]) -> tuple[Evidence, ...]:
    """The events a decision refs, and (one level further) what an episode summary refs."""
    seen: list[int] = []
    for r in refs:
        seen.append(r)
        event = by_seq.get(r, (None, ""))[0]
        if isinstance(event, EpisodeFinished) or (
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
            out.append(Evidence(seq, str(kind), link, summary, withheld, whole))
    return tuple(out)


def audit(run: RunEvents, metric_name: str) -> Audit:
    """A lifecycle run's metric value and every contributing unit with its decision and evidence.

    A provenance run is audited by ``projections.provenance_audit.audit`` (the caller picks).
    """
    if metric_name not in METRIC_NAMES:
        raise UnknownMetric(metric_name)
    lf = fold(LifecycleFold(), run.events)
    card = scorecard([lf])
    metric = card.metrics[metric_name]
    streams: dict[str, dict[int, tuple[Event, str]]] = {}
    for event, link in run.events:
        streams.setdefault(event.stream, {})[event.seq] = (event, link)
    num_refs = set(metric.num_refs)
    spec = next((s for s in METRICS if s.name == metric_name), None)
    short = {pid for pid, _ in card.pass_k_short}
    out = []
    for unit in card.units:
        if spec is not None:
            if not spec.in_den(unit):
                continue
            decision = unit.decisions.get(spec.num_check) or unit.decisions.get(spec.den_check)
            in_num = spec.in_num(unit)
        else:  # pass_k: every counted unit of a protocol with k attempts, by all its decisions
            if not unit.counted or unit.protocol_id in short:
                continue
            failing = [d for d in unit.decisions.values() if d.verdict is False]
            decision = failing[0] if failing else None
            in_num = unit.passed()
        refs = decision.refs if decision else ()
        evidence = _evidence(streams.get(unit.stream, {}), refs)
        out.append(
            Contribution(unit.stream, unit.protocol_id, unit.attempt, in_num, decision, evidence)
        )
    assert spec is None or len(num_refs) <= metric.num
    withheld = tuple(u.stream for u in card.units if u.outcome_withheld)
    return Audit(run.run_id, run.root or card.meta.root, metric, tuple(out), withheld)


def render(a: Audit, full: bool = False, origin: Origin | None = None) -> str:
    """The audit as text: value, then one block per contributing unit.

    Long values (tool results, arguments, answers) are shortened with ``… (+N chars)``;
    ``full`` prints each whole, its further lines indented under its evidence line. A run
    whose ``origin`` is a peer's results file labels each decision as the peer's claim.
    """
    peer = ""
    if origin is not None and origin.kind == PEER_CLAIMS and not origin.rederived:
        peer = origin.source or "the peer"
    decided = f"{peer}'s recorded claim" if peer else "decision"
    m = a.metric
    rate = fmt_pct(m.rate)
    ci = "n/a"
    if m.ci is not None:
        ci = f"{fmt_interval(m.ci.low, m.ci.high)} ({CI_LABELS[m.ci_method]})"
    lines = [
        f"run {a.run_id}  root {a.root or '(unsealed)'}",
        f"{m.name} = {rate}  ({fmt_num(m.num, 3)}/{m.den})  95% CI {ci}"
        + (f"  [{m.label}]" if m.label else ""),
        f"{len(a.contributions)} contributing units "
        f"({sum(c.in_num for c in a.contributions)} in the numerator)",
    ]
    if peer:
        lines.append(
            f"every decision below is {peer}'s recorded claim, imported from its "
            "results file; benchledger's graders did not re-derive it"
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
                f"    {decided} seq {d.seq} {d.link[:12]}  {d.check}={_verdict(d.verdict)}  "
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


def _indent(text: str) -> str:
    """A whole value's further lines, indented so they read as part of its block."""
    return text.replace("\n", "\n        ")


def _verdict(v: bool | None) -> str:
    return "n/a" if v is None else str(v).lower()
