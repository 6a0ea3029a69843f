"""``benchledger import-peer mcp-data-platform``: a peer results file as a sealed run.

One stream per run record; each episode (with its transcript when given) as
session-call events and its final answer; the peer's recorded verdicts as grader
decisions with ``origin = "mcp-data-platform"``; harness failures as infra errors.
Timestamps come from the manifest's start time plus one nanosecond per event, so
importing the same file twice gives the same run root.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from collections.abc import Callable, Iterator
from typing import Any, Final

from ledger import Ledger, UnusableInput
from ledger.events import (
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    InfraErrorBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from ledger.ledger import StreamWriter, check_run_id
from projections import lifecycle as lc

ORIGIN: Final = "mcp-data-platform"
# Peer boolean -> (our check, stage it belongs to, the episode whose answer it judged).
VERDICTS: Final = (
    ("capture_attempted", lc.CAPTURE_ATTEMPTED, "teach", "teach"),
    ("teach_budget_exhausted", lc.TEACH_BUDGET_EXHAUSTED, "teach", "teach"),
    ("captured", lc.CAPTURED, "capture", "teach"),
    ("recall_correct", lc.RECALL_CORRECT, "recall", "recall"),
    ("recall_surfaced", lc.RECALL_SEARCH_CALLED, "recall", "recall"),
    ("promoted", lc.PROMOTED, "promote", ""),
    ("transfer_correct", lc.TRANSFER_CORRECT, "transfer", "transfer"),
    ("transfer_surfaced", lc.TRANSFER_SURFACED, "transfer", "transfer"),
    ("update_captured", lc.UPDATE_CAPTURED, "update", "update"),
    ("update_correct", lc.UPDATE_CORRECT, "update_recall", "update_recall"),
    ("duplicated", lc.DUPLICATED, "update", "update"),
    ("abstain_correct", lc.ABSTAIN_CORRECT, "abstain", "abstain"),
)
ANSWERED: Final = {lc.RECALL_CORRECT, lc.TRANSFER_CORRECT, lc.UPDATE_CORRECT, lc.ABSTAIN_CORRECT}


def _refuse(path: str, problem: str) -> UnusableInput:
    return UnusableInput(path, f"not a mcp-data-platform lifecycle results file: {problem}")


def shape_of(data: Any, path: str) -> str:
    """``current`` or ``v1.102``; anything else is refused with the field that is wrong."""
    if not isinstance(data, dict):
        raise _refuse(path, "the top level must be an object with manifest and runs")
    manifest, runs = data.get("manifest"), data.get("runs")
    if not isinstance(manifest, dict):
        raise _refuse(path, "field 'manifest' is missing or not an object")
    if not isinstance(runs, list) or not runs:
        raise _refuse(path, "field 'runs' is missing, empty or not a list")
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise _refuse(path, f"runs[{i}] is not an object")
        if not isinstance(run.get("protocol_id"), str) or not isinstance(run.get("attempt"), int):
            raise _refuse(path, f"runs[{i}] needs a protocol_id (text) and an attempt (number)")
        if not isinstance(run.get("episodes"), list):
            raise _refuse(path, f"runs[{i}].episodes is missing or not a list")
        for j, ep in enumerate(run["episodes"]):
            if not isinstance(ep, dict) or not isinstance(ep.get("stage"), str):
                raise _refuse(path, f"runs[{i}].episodes[{j}] needs a stage")
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise _refuse(path, "field 'metrics' is not an object")
    rated = [v for v in metrics.values() if isinstance(v, dict) and "num" in v and "den" in v]
    if any("ci_low" in v for v in rated) or "capture_split" in metrics:
        return "current"
    return "v1.102"


def _start_ns(manifest: dict[str, Any]) -> int:
    text = str(manifest.get("started_at") or "1970-01-01T00:00:00Z")
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        stamp = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (stamp - epoch) // dt.timedelta(microseconds=1) * 1000


def _transcript(dirs: list[str], attempt: int, pid: str, stage: str, email: str) -> list[Any]:
    if not dirs:
        return []
    folder = dirs[attempt - 1] if len(dirs) > 1 and 0 < attempt <= len(dirs) else dirs[0]
    path = os.path.join(folder, f"{pid}-{stage}-{email}.json")
    if not os.path.isfile(path):
        return []
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UnusableInput(path, f"unreadable transcript ({exc})") from None
    turns = data.get("transcript") if isinstance(data, dict) else None
    return turns if isinstance(turns, list) else []


def _calls(turns: list[Any]) -> Iterator[tuple[str, dict[str, Any], str, bool]]:
    """(tool, arguments, result text, is_error) for each tool call of a transcript."""
    results: dict[str, tuple[str, bool]] = {}
    for turn in turns:
        for res in turn.get("tool_results") or []:
            results[str(res.get("call_id", ""))] = (
                str(res.get("text", "")),
                bool(res.get("is_error")),
            )
    for turn in turns:
        for call in turn.get("tool_calls") or []:
            text, err = results.get(str(call.get("id", "")), ("", False))
            yield str(call.get("name", "")), dict(call.get("args") or {}), text, err


def _first_user_text(turns: list[Any]) -> str:
    for turn in turns:
        if turn.get("role") == "user" and isinstance(turn.get("text"), str):
            return str(turn["text"])
    return ""


def _unit(w: StreamWriter, run: dict[str, Any], dirs: list[str]) -> None:
    pid, attempt = run["protocol_id"], run["attempt"]
    emails = {e.get("identity"): e.get("email", "") for e in run["episodes"]}
    teacher, learner = emails.get("teacher", ""), emails.get("learner", "")
    w.append(UnitStartedBody(protocol_id=pid, attempt=attempt, teacher=teacher, learner=learner))
    finished: dict[str, int] = {}
    answers: dict[str, str] = {}
    for ep in run["episodes"]:
        stage, email = ep["stage"], str(ep.get("email", ""))
        turns = _transcript(dirs, attempt, pid, stage, email)
        prompt = _first_user_text(turns)
        refs = [w.append(EpisodeStartedBody(episode=stage, identity=email, user_prompt=prompt))]
        for tool, args, text, err in _calls(turns):
            call = SessionCallBody(
                episode=stage,
                method="tools/call",
                tool=tool,
                arguments=args,
                result=text,
                is_error=err,
            )
            refs.append(w.append(call))
        answers[stage] = str(ep.get("final_answer", ""))
        finished[stage] = w.append(
            EpisodeFinishedBody(
                episode=stage,
                final_answer=answers[stage],
                tool_calls=int(ep.get("tool_calls") or 0),
                tool_errors=int(ep.get("tool_errors") or 0),
                search_called=bool(ep.get("search_called")),
                fact_surfaced=bool(ep.get("fact_surfaced")),
                budget_exhausted=bool(ep.get("budget_exhausted")),
                input_tokens=int(ep.get("input_tokens") or 0),
                output_tokens=int(ep.get("output_tokens") or 0),
                cache_read_tokens=int(ep.get("cache_read_tokens") or 0),
                cache_creation_tokens=int(ep.get("cache_creation_tokens") or 0),
                capture_attempted=bool(ep.get("capture_attempted")),
            ),
            refs=refs,
        )
    outcome: dict[str, bool | None] = {}
    for peer_key, check, stage, episode in VERDICTS:
        verdict = run.get(peer_key)
        if verdict is None:
            continue
        outcome[check] = bool(verdict)
        refs = [finished[episode]] if episode in finished else []
        w.append(
            GraderDecisionBody(
                stage=stage,
                check=check,
                verdict=bool(verdict),
                reason=f"recorded by {ORIGIN} as {peer_key}={str(verdict).lower()}",
                answer=answers.get(episode, "") if check in ANSWERED else "",
                origin=ORIGIN,
            ),
            refs=refs,
        )
    error = str(run.get("error") or "").strip()
    if error:
        stage = error.split(":", 1)[0] if ":" in error else "unit"
        w.append(InfraErrorBody(stage=stage, error="harness", message=error))
    w.append(UnitFinishedBody(outcome=outcome, error=error.split("\n", 1)[0]))


def import_peer(
    ledger: Ledger,
    path: str,
    *,
    transcripts: list[str] | None = None,
    run_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[str, str, str]:
    """Import a peer results file as a sealed run; return (run id, root, shape)."""
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except FileNotFoundError:
        raise UnusableInput(path, "no such file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(path, f"cannot read ({exc})") from None
    except ValueError as exc:
        raise UnusableInput(path, f"not valid JSON ({exc})") from None
    shape = shape_of(data, path)
    dirs = list(transcripts or [])
    for d in dirs:
        if not os.path.isdir(d):
            raise UnusableInput(d, "--transcripts must name a folder of transcript files")
    manifest = data["manifest"]
    name = os.path.splitext(os.path.basename(path))[0]
    run = run_id or f"peer-{name}"
    try:
        check_run_id(run)
    except ValueError as exc:
        raise UnusableInput("--run-id", str(exc)) from None
    runs = data["runs"]
    k = int(manifest.get("k") or max(r["attempt"] for r in runs))
    clock = iter(range(_start_ns(manifest), 1 << 63))
    ledger.clock = lambda: next(clock)
    ledger.start_run(
        run,
        RunStartedBody(
            suite="lifecycle",
            protocol_set_hash=str(manifest.get("protocol_set_hash", "")),
            protocols=len({r["protocol_id"] for r in runs}),
            k=k,
            agent=f"{manifest.get('llm_provider', '')}:{manifest.get('model', '')}".strip(":"),
            model=str(manifest.get("model", "")),
            platform=ORIGIN,
            platform_version=str(manifest.get("platform_version", "")),
            coupled=False,
            tool_version="import-peer",
            config={
                "origin": ORIGIN,
                "shape": shape,
                "source": os.path.basename(path),
                "manifest": manifest,
            },
        ),
    )
    seen: set[str] = set()
    for i, record in enumerate(runs, 1):
        stream = f"{run}/{record['protocol_id']}/{record['attempt']}"
        if stream in seen:
            raise _refuse(
                path, f"two run records for {record['protocol_id']} attempt {record['attempt']}"
            )
        seen.add(stream)
        writer = ledger.new_stream(stream)
        _unit(writer, record, dirs)
        ledger.commit(writer)
        if progress:
            progress(i, len(runs))
    root = ledger.seal(run)
    return run, root, shape
