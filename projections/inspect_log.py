"""A verified run as an Inspect AI eval log: the documents, and the file they are written to.

Inspect AI (https://inspect.aisi.org.uk) keeps an evaluation as one ``EvalLog``: the eval's
spec, plan, results and stats, and one ``EvalSample`` per sample (messages, scores, usage,
timings). Its ``.eval`` file is a zip of JSON documents (``_journal/start.json``, one
``samples/<id>_epoch_<epoch>.json`` per sample, ``summaries.json``, ``reductions.json``,
``header.json``); its ``.json`` file is the one ``EvalLog`` document. Both are built here
as plain JSON values, from the format's own description (docs/inspect.md), so the package
never imports inspect_ai: a reader with it installed (``inspect view``,
``read_eval_log``) reads them as its own.

One sample per unit (protocol x attempt): id the protocol (made safe as a name: no control
character or path separator), epoch the attempt. Its messages are its episodes' turns, its
scores one for the unit as a whole and the grader decisions its suite scores
(``ReadSuite.scored_checks``), its metadata the other decisions (``diagnostics``) and the
stream head and run root that lead back to the ledger.
"""

from __future__ import annotations

import hashlib
import json
import unicodedata
import zipfile
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.ledger.bundle import atomic_output
from benchledger.ledger.events import (
    JSON,
    Event,
    GraderDecisionEvent,
    RunSealedEvent,
    RunStartedBody,
    RunStartedEvent,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
)
from benchledger.ledger.verified import PEER_CLAIMS, RunEvents
from benchledger.projections import measured
from benchledger.projections.inspect_messages import drop_none, turns_of
from benchledger.projections.platform_label import platform_facts
from benchledger.projections.suites import UnitScore, UnknownSuite, lookup

# The version of Inspect's log schema these documents follow (its LOG_SCHEMA_VERSION).
SCHEMA_VERSION: Final = 2
START: Final = "_journal/start.json"
SAMPLES: Final = "samples"
SUMMARIES: Final = "summaries.json"
REDUCTIONS: Final = "reductions.json"
HEADER: Final = "header.json"
SUFFIXES: Final = (".eval", ".json")
# A verdict as Inspect's pass/fail values: correct, incorrect, not applicable (a null
# verdict: the check did not apply). The viewer shows them as badges and its accuracy
# reads C as 1 and I as 0; the results here count C and I only.
VALUE: Final[dict[bool | None, str]] = {True: "C", False: "I", None: "N"}
# The unit's whole score in a suite that declares none (``ReadSuite.unit_score``).
UNIT_FINISHED: Final = "unit_finished"
# Zip member times: fixed, so exporting the same run twice writes the same bytes.
_ZIP_TIME: Final = (1980, 1, 1, 0, 0, 0)


class InspectLog(NamedTuple):
    """A run's eval log as JSON values: the header, its start record, samples and the rest."""

    header: dict[str, Any]  # an EvalLog without samples or reductions
    samples: list[dict[str, Any]]  # EvalSample documents, sorted as Inspect sorts them
    summaries: list[dict[str, Any]]  # one EvalSampleSummary per sample
    reductions: list[dict[str, Any]]  # EvalSampleReductions: each score's mean over epochs

    def start(self) -> dict[str, Any]:
        """The ``LogStart`` record: the version, the eval spec and the plan."""
        h = self.header
        return {"version": h["version"], "eval": h["eval"], "plan": h["plan"]}

    def document(self) -> dict[str, Any]:
        """The whole ``EvalLog`` as the ``.json`` format holds it (header fields first)."""
        return {**self.header, "samples": self.samples, "reductions": self.reductions}

    def members(self) -> list[tuple[str, Any]]:
        """The ``.eval`` zip's members in the order Inspect's recorder writes them."""
        samples = [(sample_member(s["id"], s["epoch"]), s) for s in self.samples]
        return [(START, self.start()), *samples, (SUMMARIES, self.summaries),
                (REDUCTIONS, self.reductions), (HEADER, self.header)]  # fmt: skip


def sample_member(sample_id: str, epoch: int) -> str:
    """The zip member holding one sample."""
    return f"{SAMPLES}/{sample_id}_epoch_{epoch}.json"


@dataclass
class _Unit:
    """One unit stream as read: its events in order, its start, end and head."""

    stream: str
    events: list[tuple[Event, str]] = field(default_factory=list)
    started: UnitStartedEvent | None = None
    finished: UnitFinishedEvent | None = None
    abandoned: bool = False

    @property
    def head(self) -> str:
        return self.events[-1][1] if self.events else ""


def inspect_log(run: RunEvents) -> InspectLog:
    """The eval log of ``run`` (read through the verified door: ``run.check`` is set)."""
    header, units, sealed_at = _split(run)
    if header is None:
        raise UnusableInput(run.run_id, "the run has no run_started event to export")
    body = header.body
    synthetic = run.origin is not None and run.origin.kind == PEER_CLAIMS
    meta = _run_metadata(run, body, synthetic)
    model = body.model or body.agent or "none"
    kept: dict[tuple[str, int], _Unit] = {}
    superseded: dict[tuple[str, int], list[str]] = {}
    for unit in units:
        if unit.started is None or unit.abandoned:
            continue  # an abandoned stream was resumed as another: that one is the unit
        key = (unit.started.body.protocol_id, unit.started.body.attempt)
        if key in kept:  # the later stream of the same attempt (a retry) stands for it
            superseded.setdefault(key, []).append(kept[key].stream)
        kept[key] = unit
    scored: frozenset[str] | None = None
    values: Mapping[str, Mapping[str, float]] = {}
    try:  # the suite's own whole-unit score, if it declares one (a suite not installed
        # here is exported all the same, its units scored by finishing)
        suite = lookup(body.suite)
        whole, task, scored = suite.unit_score, suite.name, suite.scored_checks
        if suite.unit_values is not None:  # its card's means, each unit's term in them
            card = suite.card([run])
            # A mean the run could not measure has no terms (projections/measured.py).
            values = measured.terms(suite.unit_values(card), getattr(card, "metrics", {}))
    except UnknownSuite:
        whole, task = None, body.suite
    # In a fixed order (the card's), so exporting the same run twice writes the same bytes.
    means = tuple(dict.fromkeys(name for v in values.values() for name in v))
    samples = [
        _sample(u, model, meta, (whole, scored), synthetic, superseded.get(k, []),
                (values.get(u.stream, {}), means))
        for k, u in kept.items()
    ]  # fmt: skip
    samples.sort(key=lambda s: (s["epoch"], s["id"]))
    created = _iso(header.at)
    spec = _spec(run, body, task, model, created, meta, samples)
    usage = _usage_sum(s.get("model_usage", {}) for s in samples)
    done = run.check.sealed if run.check is not None else bool(run.root)
    head: dict[str, Any] = {
        "version": SCHEMA_VERSION,
        # An unsealed run was stopped before its seal: Inspect's word for that is cancelled.
        "status": "success" if done else "cancelled",
        "eval": spec,
        "plan": {
            "name": "plan",
            "steps": [{"solver": body.agent or "agent", "params": _agent_params(body)}],
            "config": {},
        },
        "results": _results(samples),
        "stats": _stats(created, sealed_at if not synthetic else 0, usage),
        "invalidated": False,
        "tags": spec["tags"],
        "metadata": meta,
    }
    return InspectLog(head, samples, [_summary(s) for s in samples], _reductions(samples))


def _stats(created: str, completed: int, usage: dict[str, Any]) -> dict[str, Any]:
    """``EvalStats``: when the run started and was sealed (0: unknown), and its tokens."""
    out: dict[str, Any] = {"started_at": created, "model_usage": usage}
    if completed:
        out["completed_at"] = _iso(completed)
    return out


def write_inspect_log(log: InspectLog, path: str) -> int:
    """Write ``log`` to ``path`` (``.eval``: the zip; ``.json``: one document) atomically:
    nothing partial is left if it fails. Returns the number of samples written."""
    if not path.endswith(SUFFIXES):
        raise UnusableInput(path, "an Inspect log file ends in .eval or .json")
    with atomic_output(path) as fh:
        if path.endswith(".json"):
            fh.write(_encode(log.document(), indent=2))
        else:
            with zipfile.ZipFile(fh, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for name, value in log.members():
                    info = zipfile.ZipInfo(name, date_time=_ZIP_TIME)
                    info.compress_type = zipfile.ZIP_DEFLATED
                    zf.writestr(info, _encode(value))
    return len(log.samples)


# -- reading the run ---------------------------------------------------------------------


def _split(run: RunEvents) -> tuple[RunStartedEvent | None, list[_Unit], int]:
    """The run's header event, its unit streams in order, and when it was sealed (0: not)."""
    header: RunStartedEvent | None = None
    sealed_at = 0
    units: dict[str, _Unit] = {}
    for event, link in run.events:
        if event.stream == run.run_id:
            if isinstance(event, RunStartedEvent):
                header = event
            elif isinstance(event, RunSealedEvent):
                sealed_at = event.at
            continue
        unit = units.setdefault(event.stream, _Unit(event.stream))
        unit.events.append((event, link))
        if isinstance(event, UnitStartedEvent):
            unit.started = event
        elif isinstance(event, UnitFinishedEvent):
            unit.finished = event
        elif isinstance(event, UnitAbandonedEvent):
            unit.abandoned = True
    return header, list(units.values()), sealed_at


def _run_metadata(run: RunEvents, body: RunStartedBody, synthetic: bool) -> dict[str, Any]:
    """What leads from the log back to the ledger, and what the run was."""
    check = run.check
    origin = run.origin
    facts = platform_facts(body)
    return drop_none({
        "benchledger_run_id": run.run_id,
        "root": run.root or "",
        "sealed": bool(check.sealed) if check is not None else bool(run.root),
        "heads_root": check.heads_root if check is not None else None,
        "verified": check.line() if check is not None else None,
        "source": check.source if check is not None else None,
        "suite": body.suite,
        "agent": body.agent,
        "model": body.model,
        "platform": body.platform,
        "platform_version": body.platform_version,
        "platform_label": facts["label"],
        "platform_facts": facts,
        "protocol_set_hash": body.protocol_set_hash,
        "k": body.k,
        "tool_version": body.tool_version,
        "origin": origin.kind if origin is not None else None,
        "origin_source": origin.source if origin is not None and origin.source else None,
        # A peer's results file carries no event times: the import numbers them 1 ns apart.
        "timestamps": "synthetic" if synthetic else "recorded",
    })  # fmt: skip


def _agent_params(body: RunStartedBody) -> dict[str, Any]:
    return dict(body.record.agent_params) if body.record is not None else {}


def _spec(
    run: RunEvents,
    body: RunStartedBody,
    task: str,
    model: str,
    created: str,
    meta: dict[str, Any],
    samples: list[dict[str, Any]],
) -> dict[str, Any]:
    """The ``EvalSpec``: the run as an eval of the suite's task by the agent's model."""
    ids = sorted({s["id"] for s in samples})
    ident = run.root or (run.check.heads_root if run.check is not None else "") or run.run_id
    tags = ["benchledger", task]
    if run.origin is not None and run.origin.kind != "own":
        tags.append(run.origin.kind.replace(" ", "-"))
    return {
        "eval_id": ident[:22],
        "run_id": run.run_id,
        "created": created,
        "task": f"benchledger/{task}",
        "task_id": body.protocol_set_hash[:22] or body.suite,
        "task_version": 0,
        "task_attribs": {},
        "task_args": {},
        "task_args_passed": {},
        "solver": body.agent or "agent",
        "solver_args": _agent_params(body),
        "tags": tags,
        "dataset": {"name": task, "samples": len(ids), "sample_ids": ids},
        "model": model,
        "model_generate_config": {},
        "model_args": {},
        "config": {"epochs": max(body.k, 1)},
        "packages": {"benchledger": body.tool_version} if body.tool_version else {},
        "metadata": meta,
    }


# -- one sample per unit -----------------------------------------------------------------


def _sample(
    unit: _Unit,
    model: str,
    run_meta: dict[str, Any],
    scoring: tuple[UnitScore | None, frozenset[str] | None],
    synthetic: bool,
    superseded: list[str],
    valued: tuple[Mapping[str, float], tuple[str, ...]] = ({}, ()),
) -> dict[str, Any]:
    """One unit as an ``EvalSample``; ``valued``: its terms in the card's means, and every
    mean's name (a score of that name is the unit's term, or N when it is in no such mean)."""
    assert unit.started is not None
    start = unit.started.body
    messages, tokens, prompt, final, withheld = turns_of(unit.events, model)
    decisions = {e.body.check: (e, link) for e, link in unit.events  # a later one replaces
                 if isinstance(e, GraderDecisionEvent)}  # fmt: skip
    scores, diagnostics = _scores(unit, decisions, scoring, valued)
    end = unit.finished
    name = safe_name(start.protocol_id)
    meta = drop_none({
        "stream": unit.stream,
        "stream_head": unit.head,
        "stream_events": len(unit.events),
        "benchledger_run_id": run_meta["benchledger_run_id"],
        "root": run_meta["root"],
        "protocol_hash": start.protocol_hash or None,
        "teacher": start.teacher or None,
        "learner": start.learner or None,
        "resumes": start.resumes or None,
        "unit_error": end.body.error if end is not None and end.body.error else None,
        "trace_hash": end.body.trace_hash if end is not None and end.body.trace_hash else None,
        "withheld_events": withheld or None,
        "superseded_streams": superseded or None,
        "diagnostics": diagnostics or None,
        "protocol_id": start.protocol_id if name != start.protocol_id else None,
    })  # fmt: skip
    usage = {model: tokens} if tokens else {}
    sample: dict[str, Any] = {
        "id": name,
        "epoch": start.attempt,
        "input": prompt or name,
        "target": _target(e.body.expected for e, _ in decisions.values()),
        "messages": messages,
        "output": _output(model, final, tokens),
        "scores": scores,
        "metadata": meta,
        "model_usage": usage,
        "uuid": unit.head[:32] or unit.stream,
    }
    if not synthetic and end is not None:
        seconds = (end.at - unit.started.at) / 1e9
        sample.update(started_at=_iso(unit.started.at), completed_at=_iso(end.at),
                      total_time=round(seconds, 3), working_time=round(seconds, 3))  # fmt: skip
    error = _unit_error(unit)
    if error:
        sample["error"] = {"message": error, "traceback": "", "traceback_ansi": ""}
    return sample


def _scores(
    unit: _Unit,
    decisions: dict[str, tuple[GraderDecisionEvent, str]],
    scoring: tuple[UnitScore | None, frozenset[str] | None],
    valued: tuple[Mapping[str, float], tuple[str, ...]],
) -> tuple[dict[str, dict[str, Any]], dict[str, dict[str, Any]]]:
    """A sample's scores (the unit's whole score, each scored decision, each card mean's
    term) and its diagnostics (the decisions its suite does not score)."""
    score, scored = scoring
    whole = _whole_score(unit, score)
    # The viewer's answer column shows the first score's answer: the unit's graded answers.
    answers = dict.fromkeys(e.body.answer for e, _ in decisions.values() if e.body.answer)
    if answers:
        whole["answer"] = " | ".join(answers)
    scores = {score.name if score is not None else UNIT_FINISHED: whole}
    diagnostics = {}
    for check, (e, link) in decisions.items():
        if scored is None or check in scored:
            scores[check] = _score(e, link)
        else:  # no accuracy: a diagnostic decides nothing, a true adopted is no success
            diagnostics[check] = _score(e, link, value=False)
    terms, means = valued
    for name in means:  # the card's own number under its own name (the verdict in metadata)
        if name in terms:
            term = float(terms[name])
            scores[name] = {**scores.get(name, {"explanation": f"this unit's term in {name}"}),
                            "value": term}  # fmt: skip
        elif name in scores:
            scores[name] = {**scores[name], "value": VALUE[None]}
    return scores, diagnostics


def _unit_error(unit: _Unit) -> str:
    if unit.finished is None:
        return "the unit did not finish (no unit_finished event: the run is partial)"
    return unit.finished.body.error


def _whole_score(unit: _Unit, score: UnitScore | None) -> dict[str, Any]:
    """The unit as a whole: by the suite's own score (the lifecycle's: every applicable
    stage passed), else whether it finished cleanly."""
    end = unit.finished
    if end is None:
        return {"value": VALUE[None], "explanation": "the unit did not finish"}
    if end.body.error:
        why = f"the unit ended in an error: {end.body.error}"
        return {"value": VALUE[False], "explanation": why}
    outcome = end.body.outcome
    if score is not None:
        ok = score.passed(outcome)
        why = score.yes if ok else score.no
    else:
        ok, why = True, "the unit finished without an error"
    return {"value": VALUE[ok], "explanation": why, "metadata": {"outcome": dict(outcome)}}


def _score(event: GraderDecisionEvent, link: str, *, value: bool = True) -> dict[str, Any]:
    """One grader decision as an Inspect ``Score`` (``value`` False: as a diagnostic, its
    verdict in its metadata only)."""
    d = event.body
    meta: dict[str, Any] = {"verdict": d.verdict, "stage": d.stage, "origin": d.origin,
                            "stream": event.stream, "seq": event.seq, "link": link}  # fmt: skip
    if d.expected is not None:
        meta["expected"] = d.expected
    return drop_none({"value": VALUE[d.verdict] if value else None, "answer": d.answer or None,
                       "explanation": d.reason or None, "metadata": meta})  # fmt: skip


def safe_name(text: str) -> str:
    """``text`` as a sample name and zip member: control characters and path separators
    become ``_`` (with a digest of the original, so two names never collide)."""
    safe = "".join(
        "_" if ch in "/\\" or unicodedata.category(ch).startswith("C") else ch for ch in text
    )
    if safe.strip(".") == "":
        safe = "_" + safe  # "." or "..": never a path step
    if safe == text:
        return text
    return f"{safe}-{hashlib.sha256(text.encode('utf-8', 'surrogatepass')).hexdigest()[:8]}"


def _target(expected: Iterable[JSON]) -> str | list[str]:
    """What the graders expected, as readable text (``76 (not 58)``, never raw JSON)."""
    out: list[str] = []
    for value in expected:
        items = value if isinstance(value, list) else [value]
        for item in items:
            if item is None:
                continue
            text = _readable(item)
            if text not in out:
                out.append(text)
    return out if out else ""


def _readable(value: JSON) -> str:
    """One expected value as a person reads it: a number without a needless ``.0``, a
    ``{"value": V, "not": W}`` as ``V (not W)``, other objects as ``key: value`` pairs."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float | str):
        return str(value)
    if isinstance(value, list):
        return ", ".join(_readable(v) for v in value)
    rest = {k: v for k, v in value.items() if k != "value"}
    text = ", ".join(f"not {_readable(v)}" if k == "not" else f"{k}: {_readable(v)}"
                     for k, v in sorted(rest.items()))  # fmt: skip
    if "value" not in value:
        return text
    return _readable(value["value"]) + (f" ({text})" if text else "")


def _usage_sum(usages: Iterable[dict[str, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    out: dict[str, dict[str, Any]] = {}
    for usage in usages:
        for model, counts in usage.items():
            into = out.setdefault(model, {})
            for key, value in counts.items():
                into[key] = into.get(key, 0) + value
    return out


def _output(model: str, final: str, tokens: dict[str, Any]) -> dict[str, Any]:
    """The sample's ``ModelOutput``: the last episode's final answer."""
    message = {"content": final, "role": "assistant", "source": "generate", "model": model}
    out: dict[str, Any] = {
        "model": model,
        "choices": [{"message": message, "stop_reason": "stop"}],
        "completion": final,
    }
    if tokens:
        out["usage"] = tokens
    return out


# -- summaries, results and reductions --------------------------------------------------


def _summary(sample: dict[str, Any]) -> dict[str, Any]:
    """A sample's ``EvalSampleSummary`` (what the viewer lists before opening a sample)."""
    keep = ("id", "epoch", "input", "target", "metadata", "scores", "model_usage",
            "started_at", "completed_at", "total_time", "working_time", "uuid")  # fmt: skip
    out = {k: sample[k] for k in keep if k in sample}
    if "error" in sample:
        out["error"] = sample["error"]["message"]
    out.update(completed=True, message_count=len(sample["messages"]))
    return out


def _score_names(samples: list[dict[str, Any]]) -> list[str]:
    names: dict[str, None] = {}
    for s in samples:
        names.update(dict.fromkeys(s["scores"]))
    return list(names)


def _term(value: Any) -> bool:
    """Whether a score's value is a number (a term of a mean), not a verdict letter."""
    return isinstance(value, int | float) and not isinstance(value, bool)


def _results(samples: list[dict[str, Any]]) -> dict[str, Any]:
    """``EvalResults``: per score, the share correct of the samples it graded (C or I), or,
    for a score of numbers (a card's mean), their mean."""
    scores = []
    for name in _score_names(samples):
        values = [s["scores"][name]["value"] for s in samples if name in s["scores"]]
        graded = [v for v in values if v != VALUE[None]]
        metrics = {}
        if graded and all(_term(v) for v in graded):
            mean = sum(graded) / len(graded)
            metrics["mean"] = {"name": "mean", "value": mean, "params": {}}
        elif graded:
            share = graded.count(VALUE[True]) / len(graded)
            metrics["accuracy"] = {"name": "accuracy", "value": share, "params": {}}
        scores.append({"name": name, "scorer": name, "scored_samples": len(graded),
                       "unscored_samples": len(values) - len(graded), "params": {},
                       "metrics": metrics})  # fmt: skip
    completed = sum(1 for s in samples if "error" not in s)
    return {"total_samples": len(samples), "completed_samples": completed, "scores": scores}


def _reductions(samples: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``EvalSampleReductions``: per score and sample id, the mean over epochs of C=1, I=0
    (or of the numbers of a card's mean)."""
    out = []
    for name in _score_names(samples):
        by_id: dict[str, list[float]] = {}
        for s in samples:
            value = s["scores"].get(name, {}).get("value")
            if _term(value):
                by_id.setdefault(s["id"], []).append(float(value))
            elif value in (VALUE[True], VALUE[False]):
                by_id.setdefault(s["id"], []).append(1.0 if value == VALUE[True] else 0.0)
        reduced = [{"value": sum(v) / len(v), "sample_id": sid} for sid, v in by_id.items()]
        out.append({"scorer": name, "reducer": "mean", "samples": reduced})
    return out


# -- encoding ----------------------------------------------------------------------------


def _iso(ns: int) -> str:
    return datetime.fromtimestamp(ns / 1e9, tz=UTC).isoformat()


def _encode(value: Any, indent: int | None = None) -> bytes:
    return json.dumps(value, ensure_ascii=False, allow_nan=False, indent=indent).encode()
