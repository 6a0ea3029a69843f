"""The one decision function: a lifecycle unit's grader decisions from its recorded events.

The live runner calls ``decide_stage`` after each stage's evidence is in the unit's
stream and appends what it returns; re-derivation calls ``decide_unit`` on a recorded
stream and compares. So a change to a grader or to a rule shows up as a re-derivation
mismatch, never as a silent drift between live and re-derived results.

Answer checks grade ``episode_finished.final_answer``; mechanical checks read the
``observed`` reading a platform adapter recorded beside each read-back body
(``purpose`` says which read it was): ``capture``/``update`` (``ids`` newest first,
``statuses``), ``approve`` (``approved``), ``apply`` (``ok``, ``message``),
``insight_status`` (``status``), ``changeset`` (``lists``), ``sink`` (``shows``),
``original_status`` (``status``). A platform that cannot do a step records a
``not_applicable`` read (``what``: a stage or a step, ``why``) where the step would be:
a stage not applicable is decided ``None`` with that reason, never passed silently.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any, Final

from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    ReadBackBody,
    SessionCallBody,
)
from benchledger.projections import vocabulary
from benchledger.projections.card import Ruling
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.protocols import grading
from benchledger.protocols.schema import Grading, Protocol

LIVE: Final = ("pending", "approved", "applied")
NOT_APPLICABLE: Final = "not_applicable"  # the purpose of a platform's "cannot do this" read
STAGES: Final = (
    "teach", "capture", "recall", "promote", "transfer", "update", "update_recall", "abstain",
)  # fmt: skip

Events = Sequence[tuple[int, Body]]


def _decision(
    stage: str, check: str, verdict: bool | None, reason: str, refs: list[int], **kw: Any
) -> Ruling:
    return Ruling(
        GraderDecisionBody(stage=stage, check=check, verdict=verdict, reason=reason, **kw),
        tuple(sorted(set(refs))),
    )


def _finished(events: Events, stage: str) -> tuple[int, EpisodeFinishedBody] | None:
    """The stage's episode as it finished (a retried episode's last, complete try)."""
    found = None
    for seq, body in events:
        if isinstance(body, EpisodeFinishedBody) and body.episode == stage:
            found = (seq, body)
    return found


def _reads(events: Events, stage: str, purpose: str) -> list[tuple[int, ReadBackBody]]:
    return [
        (s, b)
        for s, b in events
        if isinstance(b, ReadBackBody) and b.stage == stage and b.purpose == purpose
    ]


def _observed(read: tuple[int, ReadBackBody] | None) -> dict[str, Any]:
    return read[1].observed if read and isinstance(read[1].observed, dict) else {}


def _last(events: Events, stage: str, purpose: str) -> dict[str, Any]:
    """The observed reading of the stage's last read for ``purpose`` ({} if none)."""
    reads = _reads(events, stage, purpose)
    return _observed(reads[-1]) if reads else {}


def _expected(g: Grading, stale: Any = None) -> Any:
    expected: Any = g.value if g.kind == "numeric" else list(g.aliases)
    return {"value": expected, "not": stale} if stale is not None else expected


def _graded(
    stage: str, check: str, ep: tuple[int, EpisodeFinishedBody], verdict: grading.Verdict,
    expected: Any,
) -> Ruling:  # fmt: skip
    return _decision(stage, check, verdict.ok, verdict.reason, [ep[0]], answer=verdict.scored,
                     expected=expected)  # fmt: skip


def captured_id(events: Events) -> str | None:
    """The capture the unit found (the newest pending insight of its last capture read)."""
    reads = _reads(events, "capture", "capture")
    ids = _observed(reads[-1]).get("ids") if reads else None
    return str(ids[0]) if ids else None


def decide_stage(protocol: Protocol, stage: str, events: Events) -> list[Ruling]:
    """The decisions of one stage from the unit's events so far ([] if its evidence is absent)."""
    p = protocol
    if stage in ("teach", "recall", "transfer", "update_recall", "abstain"):
        ep = _finished(events, stage)
        if ep is None:
            return []
        return list(_episode_decisions(p, stage, ep, _tools(events, stage, ep[0])))
    if stage == "capture":
        return _capture(events)
    if stage == "promote":
        return _promote(p, events)
    if stage == "update":
        return _update(events)
    raise ValueError(f"unknown lifecycle stage {stage!r}")


def _tools(events: Events, stage: str, finished: int) -> tuple[list[str], list[str]]:
    """(tools listed, tools called) in the stage's last episode try, in order."""
    listed: list[str] = []
    called: list[str] = []
    for seq, b in events:
        if seq >= finished:
            break
        if isinstance(b, EpisodeStartedBody) and b.episode == stage:
            listed, called = [], []  # a retried episode: only its last try counts
        elif isinstance(b, SessionCallBody) and b.episode == stage:
            if b.method == "tools/list" and isinstance(b.result, dict):
                listed = [str(t) for t in b.result.get("tools") or []]
            elif b.method == "tools/call":
                called.append(b.tool)
    return listed, called


def _capture_said(
    attempted: bool, tools: tuple[list[str], list[str]], e: EpisodeFinishedBody | None = None
) -> str:
    """Which capture tool was (not) called, in the platform's own vocabulary; a call that
    was no attempt (unlisted, or answered as an error) is named with why."""
    listed, called = tools
    capture = vocabulary.capture_tools(e) if e is not None else vocabulary.BEFORE_CAPTURE
    if e is not None and vocabulary.recorded(e):
        if attempted:
            tool = next((t for t in called if t in capture and t in listed), "")
            return f"{tool} was called"
        if e.not_counted:
            return f"no capture: {'; '.join(e.not_counted)}"
        if not capture:
            return "no capture tool: the platform declares no memory vocabulary"
        if len(capture) == 1:
            return f"{next(iter(capture))} was not called"
        return f"no capture tool ({', '.join(sorted(capture))}) was called"
    if attempted:
        # A mapped server's write tool is its own (--platform mcp:FILE): the first called.
        tool = next((t for t in called if t in capture), called[0] if called else "")
        tool = tool or "memory_capture"
        return f"{tool} was called"
    offered = [t for t in listed if t in capture]
    if not offered or offered == ["memory_capture"]:
        return "memory_capture was not called"
    return f"no capture tool ({', '.join(offered)}) was called"


def _search_said(e: EpisodeFinishedBody) -> str:
    """Whether a search was called; a call that was no search is named with why."""
    if e.search_called:
        return "search was called"
    if vocabulary.recorded(e) and e.not_counted:
        return f"search was not called: {'; '.join(e.not_counted)}"
    return "search was not called"


def _episode_decisions(
    p: Protocol, stage: str, ep: tuple[int, EpisodeFinishedBody],
    tools: tuple[list[str], list[str]] = ([], []),
) -> Iterator[Ruling]:  # fmt: skip
    seq, e = ep
    if stage == "teach":
        yield _decision(stage, lc.CAPTURE_ATTEMPTED, e.capture_attempted,
                        _capture_said(e.capture_attempted, tools, e), [seq])  # fmt: skip
        used = f"{e.tool_calls} of {p.budget_tool_calls} tool calls used"
        yield _decision(stage, lc.TEACH_BUDGET_EXHAUSTED, e.budget_exhausted, used, [seq])
    elif stage == "recall":
        g = p.recall.grading
        yield _graded(stage, lc.RECALL_CORRECT, ep, grading.grade(e.final_answer, g), _expected(g))
        yield _decision(stage, lc.RECALL_SEARCH_CALLED, e.search_called, _search_said(e),
                        [seq])  # fmt: skip
        yield _decision(stage, lc.RECALL_FACT_SURFACED, e.fact_surfaced,
                        "the taught fact appeared in a tool result" if e.fact_surfaced
                        else "the taught fact appeared in no tool result", [seq])  # fmt: skip
    elif stage == "transfer" and p.transfer is not None:
        g = p.transfer.grading
        yield _graded(stage, lc.TRANSFER_CORRECT, ep, grading.grade(e.final_answer, g),
                      _expected(g))  # fmt: skip
        yield _decision(stage, lc.TRANSFER_SURFACED, e.fact_surfaced,
                        "the promoted fact appeared in a tool result" if e.fact_surfaced
                        else "the promoted fact appeared in no tool result", [seq])  # fmt: skip
    elif stage == "update_recall" and p.update is not None:
        u = p.update
        verdict = grading.update(e.final_answer, u.recall.grading, u.superseded_value)
        yield _graded(stage, lc.UPDATE_CORRECT, ep, verdict,
                      _expected(u.recall.grading, u.superseded_value))  # fmt: skip
    elif stage == "abstain":
        verdict = grading.abstention(e.final_answer)
        yield _graded(stage, lc.ABSTAIN_CORRECT, ep, verdict, grading.ABSTAIN_ANSWER)


def _capture(events: Events) -> list[Ruling]:
    na = _not_applicable(events, "capture")
    if "capture" in na:
        refs = [s for s, b in events if isinstance(b, ReadBackBody) and b.stage == "capture"]
        return [_decision("capture", lc.CAPTURED, None, f"not applicable: {na['capture']}", refs)]
    teach = _finished(events, "teach")
    reads = _reads(events, "capture", "capture")
    if teach is None or not reads:
        return []
    refs = [teach[0], *(s for s, _ in reads)]
    found = captured_id(events)
    if found is not None:
        reason = f"pending insight {found} found"
    elif not teach[1].capture_attempted:
        reason = "no capture was attempted"
    else:
        reason = f"no pending insight in {len(reads)} read-backs"
    return [_decision("capture", lc.CAPTURED, found is not None, reason, refs)]


def _not_applicable(events: Events, stage: str) -> dict[str, str]:
    """What the platform said it cannot do in ``stage``: ``{stage or step: why}``."""
    return {
        str(obs.get("what")): str(obs.get("why", ""))
        for obs in (_observed(r) for r in _reads(events, stage, NOT_APPLICABLE))
    }


def _promote(p: Protocol, events: Events) -> list[Ruling]:
    refs = [s for s, b in events if isinstance(b, ReadBackBody) and b.stage == "promote"]
    na = _not_applicable(events, "promote")
    if "promote" in na:
        return [_decision("promote", lc.PROMOTED, None, f"not applicable: {na['promote']}", refs)]
    approve = _reads(events, "promote", "approve")
    if not approve:
        return []
    if not _observed(approve[-1]).get("approved"):
        reason = "the platform refused the approval"
        return [_decision("promote", lc.PROMOTED, False, reason, refs)]
    apply = _last(events, "promote", "apply")
    if not apply.get("ok"):
        reason = f"apply failed: {str(apply.get('message', ''))[:200]}"
        return [_decision("promote", lc.PROMOTED, False, reason, refs)]
    status = _last(events, "promote", "insight_status")
    applied = status.get("status") == "applied"
    listed = "changeset" in na or bool(_last(events, "promote", "changeset").get("lists"))
    sink = _reads(events, "promote", "sink")
    shown = bool(sink) and bool(_observed(sink[-1]).get("shows"))
    changeset = (
        "no changeset to check (not applicable)"
        if "changeset" in na
        else f"a live changeset {'lists' if listed else 'does not list'} it"
    )
    where = _observed(sink[-1]).get("sink") if sink else None
    reason = (
        f"insight {'is' if applied else 'is not'} applied; {changeset}; "
        f"the {where or p.sink + ' sink'} {'shows' if shown else 'does not show'} the fact"
    )
    return [_decision("promote", lc.PROMOTED, applied and listed and shown, reason, refs)]


def landed_id(events: Events) -> str | None:
    """The correction's capture: a new live insight other than the original capture."""
    reads = _reads(events, "update", "update")
    if not reads:
        return None
    seen = _observed(reads[-1])
    original = captured_id(events)
    statuses = seen.get("statuses") or {}
    new = [i for i in seen.get("ids") or [] if i != original and statuses.get(i) in LIVE]
    return str(new[0]) if new else None


def _update(events: Events) -> list[Ruling]:
    na = _not_applicable(events, "update")
    if "update" in na:
        refs = [s for s, b in events if isinstance(b, ReadBackBody) and b.stage == "update"]
        reason = f"not applicable: {na['update']}"
        return [_decision("update", lc.UPDATE_CAPTURED, None, reason, refs)]
    ep = _finished(events, "update")
    reads = _reads(events, "update", "update")
    if ep is None or not reads:
        return []
    refs = [ep[0], *(s for s, _ in reads)]
    landed = landed_id(events)
    if landed is None:
        reason = "no new live insight after the correction"
        return [_decision("update", lc.UPDATE_CAPTURED, False, reason, refs)]
    out = [_decision("update", lc.UPDATE_CAPTURED, True, f"correction captured as {landed}", refs)]
    original = _reads(events, "update", "original_status")
    if original:
        status = _observed(original[-1]).get("status")
        dup = status in LIVE
        reason = f"the original insight is {status!r}" + (" (still live)" if dup else "")
        out.append(_decision("update", lc.DUPLICATED, dup, reason, [*refs, original[-1][0]]))
    return out


def decide_unit(protocol: Protocol, events: Events) -> list[Ruling]:
    """Every decision of a unit, in the order the live runner appends them."""
    out: list[Ruling] = []
    for stage in STAGES:
        out += decide_stage(protocol, stage, events)
    return out
