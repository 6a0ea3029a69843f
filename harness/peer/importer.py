"""``benchledger import-peer mcp-data-platform``: a peer results file as a sealed run.

One stream per run record; each episode (with its transcript when given) as
session-call events and its final answer; the peer's recorded verdicts as grader
decisions with ``origin = "mcp-data-platform"``; harness failures as infra errors.
Timestamps come from the manifest's start time plus one nanosecond per event, so
importing the same file twice gives the same run root. Each episode and unit records its
trace hash as a live one does, so re-derivation checks the recorded exchanges.

The whole file (every record, every field the import reads, every transcript) is
checked before the first write: a refused import leaves nothing in the ledger.

Shapes: the current one; the same without ``update_captured`` (files written before
that field existed: an update unit's correction landed exactly when ``update_correct``
is not null, and the import records that as a derived ``update_captured`` decision);
and the older v1.102 one (no intervals, cache tokens or capture split). A merged
multi-pass file finds its per-pass transcripts through the ``passes.txt`` beside it;
transcript folders given by hand must match the passes one to one, or a pass would
carry another pass's transcripts.

The protocol set: ``protocols`` when given, else the peer's layout (``bench/protocols``
beside ``bench/results``). Only a set whose peer hash is the manifest's claim is the
one the run was made with; then ``protocol_set_id`` records its content identity (the
benchledger-recipe hash, what a benchledger run of the same files records) and
``config["protocols_path"]`` its folder. A given set that differs is refused; a found
one is left out with a note.
"""

from __future__ import annotations

import itertools
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from msgspec.structs import replace

from benchledger.harness.peer.files import peer_json, peer_root
from benchledger.harness.peer.layout import find_protocols, find_transcripts, match_transcripts
from benchledger.harness.peer.results import Fields, attempt_of, shape_of, start_ns
from benchledger.harness.peer.transcript import session_calls
from benchledger.ledger import Ledger, UnusableInput
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    InfraErrorBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.ledger import StreamWriter, check_run_id
from benchledger.ledger.names import RULE, is_name
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.trace import traced, unit_trace_hash
from benchledger.protocols.errors import InvalidInput
from benchledger.protocols.hashing import content_id, peer_hash
from benchledger.protocols.loader import load

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


@dataclass(frozen=True)
class _Episode:
    started: EpisodeStartedBody
    calls: tuple[SessionCallBody, ...]
    finished: EpisodeFinishedBody


@dataclass(frozen=True)
class _Unit:
    """One run record, checked and turned into event bodies; writing it cannot be refused."""

    stream: str
    protocol_id: str
    attempt: int
    started: UnitStartedBody
    episodes: tuple[_Episode, ...]
    decisions: tuple[tuple[str, GraderDecisionBody], ...]  # (episode it judged, decision)
    infra: InfraErrorBody | None
    finished: UnitFinishedBody


def _is_update_unit(record: dict[str, Any]) -> bool:
    """An update protocol's record: it has an update episode or an update verdict."""
    stages = {ep.get("stage") for ep in record["episodes"]}
    return "update" in stages or any(k in record for k in ("update_correct", "duplicated"))


def _derived_update_captured(f: Fields, record: dict[str, Any], where: str) -> bool | None:
    """``update_captured`` for a file that predates it: landed iff update_correct is recorded."""
    if not _is_update_unit(record):
        return None
    return f.flag(record, "update_correct", where) is not None


def _plan_unit(
    f: Fields,
    run: str,
    i: int,
    record: dict[str, Any],
    folders: dict[int, str],
    derive_update: bool = False,
) -> _Unit:
    where = f"runs[{i}]"
    pid: str = record["protocol_id"]  # shape_of checked it is text
    if not pid or "/" in pid:
        raise f.refuse(f"{where}.protocol_id must be non-empty text without '/', not {pid!r}")
    attempt = attempt_of(f, i, record)
    identities: dict[str, str] = {}
    episodes: list[_Episode] = []
    answers: dict[str, str] = {}
    for j, ep in enumerate(record["episodes"]):
        ew = f"{where}.episodes[{j}]"
        stage: str = ep["stage"]  # shape_of checked it is text
        email = f.text(ep, "email", ew)
        identities[f.text(ep, "identity", ew)] = email
        prompt, calls = session_calls(folders.get(attempt), pid, stage, email)
        answers[stage] = f.text(ep, "final_answer", ew)
        finished = EpisodeFinishedBody(
            episode=stage,
            final_answer=answers[stage],
            tool_calls=f.count(ep, "tool_calls", ew),
            tool_errors=f.count(ep, "tool_errors", ew),
            search_called=bool(f.flag(ep, "search_called", ew)),
            fact_surfaced=bool(f.flag(ep, "fact_surfaced", ew)),
            budget_exhausted=bool(f.flag(ep, "budget_exhausted", ew)),
            input_tokens=f.count(ep, "input_tokens", ew),
            output_tokens=f.count(ep, "output_tokens", ew),
            cache_read_tokens=f.count(ep, "cache_read_tokens", ew),
            cache_creation_tokens=f.count(ep, "cache_creation_tokens", ew),
            capture_attempted=bool(f.flag(ep, "capture_attempted", ew)),
        )
        started = EpisodeStartedBody(episode=stage, identity=email, user_prompt=prompt)
        episodes.append(_Episode(started, calls, finished))
    outcome: dict[str, bool | None] = {}
    decisions: list[tuple[str, GraderDecisionBody]] = []
    for peer_key, check, stage, episode in VERDICTS:
        verdict = f.flag(record, peer_key, where)
        reason = f"recorded by {ORIGIN} as {peer_key}={str(verdict).lower()}"
        if check == lc.UPDATE_CAPTURED and derive_update:
            verdict = _derived_update_captured(f, record, where)
            landed = "recorded: the correction landed" if verdict else "null: it did not land"
            reason = f"derived (the file predates update_captured): update_correct is {landed}"
        if verdict is None:
            continue
        outcome[check] = verdict
        decision = GraderDecisionBody(
            stage=stage,
            check=check,
            verdict=verdict,
            reason=reason,
            answer=answers.get(episode, "") if check in ANSWERED else "",
            origin=ORIGIN,
        )
        decisions.append((episode, decision))
    error = f.text(record, "error", where).strip()
    infra = None
    if error:
        stage = error.split(":", 1)[0] if ":" in error else "unit"
        infra = InfraErrorBody(stage=stage, error="harness", message=error)
    if not is_name(pid):  # it names a stream, and files of the run's exports
        raise f.refuse(f"{where}: protocol id {pid!r} {RULE}")
    return _Unit(
        stream=f"{run}/{pid}/{attempt}",
        protocol_id=pid,
        attempt=attempt,
        started=UnitStartedBody(
            protocol_id=pid,
            attempt=attempt,
            teacher=identities.get("teacher", ""),
            learner=identities.get("learner", ""),
        ),
        episodes=tuple(episodes),
        decisions=tuple(decisions),
        infra=infra,
        finished=UnitFinishedBody(outcome=outcome, error=error.split("\n", 1)[0]),
    )


def derives_update_captured(records: list[dict[str, Any]]) -> bool:
    """Whether the file predates ``update_captured`` (no record has it, an update unit exists)."""
    return not any("update_captured" in r for r in records) and any(map(_is_update_unit, records))


def unrecorded(records: list[dict[str, Any]]) -> list[str]:
    """The checks whose peer field no record of the file holds (an older shape, e.g. v1.102,
    never wrote ``capture_attempted``): recorded as absent (``config["unrecorded"]``), so
    re-derivation skips and names them instead of comparing them with nothing. A derived
    ``update_captured`` is recorded, so it is not among them."""
    derived = derives_update_captured(records)
    return [
        check
        for key, check, _, _ in VERDICTS
        if not any(key in r for r in records) and not (key == "update_captured" and derived)
    ]


def _plan(f: Fields, run: str, records: list[dict[str, Any]], dirs: list[str]) -> list[_Unit]:
    """Every record checked and built, transcripts read: all refusals happen here."""
    units: list[_Unit] = []
    seen: dict[str, int] = {}
    derive = derives_update_captured(records)
    folders = match_transcripts(f, records, dirs)
    for i, record in enumerate(records):
        unit = _plan_unit(f, run, i, record, folders, derive)
        if unit.stream in seen:
            raise f.refuse(
                f"two run records for {unit.protocol_id} attempt {unit.attempt} "
                f"(runs[{seen[unit.stream]}] and runs[{i}])"
            )
        seen[unit.stream] = i
        units.append(unit)
    return units


def _write_unit(w: StreamWriter, unit: _Unit) -> None:
    """The record's events, with the trace hashes a live unit records (``w`` keeps its log):
    each episode's over its bodies, the unit's over every body before its unit_finished."""
    w.append(unit.started)
    finished: dict[str, int] = {}
    for ep in unit.episodes:
        refs = [w.append(ep.started)]
        refs.extend(w.append(call) for call in ep.calls)
        bodies = [body for seq, body in w.log if seq >= refs[0]]
        finished[ep.finished.episode] = w.append(traced(ep.finished, bodies), refs=refs)
    for episode, decision in unit.decisions:
        w.append(decision, refs=[finished[episode]] if episode in finished else [])
    if unit.infra is not None:
        w.append(unit.infra)
    w.append(replace(unit.finished, trace_hash=unit_trace_hash(body for _, body in w.log)))


def _protocol_set(
    f: Fields, manifest: dict[str, Any], given: str | None, note: Callable[[str], None]
) -> tuple[str, str]:
    """(folder, content id) of the set the run was made with; ("", "") when not found.

    A given folder that does not load, or whose peer hash is not the manifest's, is
    refused (UnusableInput or InvalidInput); one found by layout is then only noted.
    """
    claimed = f.text(manifest, "protocol_set_hash", "manifest")
    folder = given if given is not None else find_protocols(f.path)
    if folder is None:
        return "", ""
    try:
        loaded = load(folder).protocols
    except InvalidInput as exc:
        if given is not None:
            raise
        note(f"the protocol set at {folder} does not load ({exc}); protocol_set_id left empty")
        return "", ""
    theirs = peer_hash(loaded)
    if theirs == claimed:
        return folder, content_id(loaded)
    said = claimed or "(none)"
    if given is not None:
        raise UnusableInput(
            f.path,
            f"manifest.protocol_set_hash is {said} but --protocols {folder} has peer hash "
            f"{theirs}: give the set this run was made with",
        )
    note(
        f"the protocol set at {folder} has peer hash {theirs}, not the manifest's "
        f"protocol_set_hash {said}: protocol_set_id left empty (give --protocols DIR)"
    )
    return "", ""


def _header(
    f: Fields,
    manifest: dict[str, Any],
    metrics: dict[str, Any],
    units: list[_Unit],
    config: dict[str, Any],
    set_id: str,
) -> RunStartedBody:
    most = max(u.attempt for u in units)
    k = f.positive(manifest, "k", "manifest") or most
    if k < most:
        raise f.refuse(f"manifest.k is {k} but a run record has attempt {most}")
    # The published protocol count, so a truncated file reads as incomplete (the gate
    # refuses it), never as a smaller complete run.
    seen = len({u.protocol_id for u in units})
    published = f.positive(metrics, "protocols", "metrics") or 0
    provider = f.text(manifest, "llm_provider", "manifest")
    model = f.text(manifest, "model", "manifest")
    return RunStartedBody(
        suite="lifecycle",
        protocol_set_hash=f.text(manifest, "protocol_set_hash", "manifest"),
        protocols=max(seen, published),
        k=k,
        agent=f"{provider}:{model}".strip(":"),
        model=model,
        platform=ORIGIN,
        platform_version=f.text(manifest, "platform_version", "manifest"),
        coupled=False,
        tool_version="import-peer",
        config=config,
        protocol_set_id=set_id,
    )


def import_peer(
    ledger: Ledger,
    path: str,
    *,
    transcripts: list[str] | None = None,
    run_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
    protocols: str | None = None,
    note: Callable[[str], None] = lambda _: None,
) -> tuple[str, str, str]:
    """Import a peer results file as a sealed run; return (run id, root, shape).

    ``transcripts``: one folder per pass, in attempt order or each named for its pass
    (``layout.match_transcripts``); None finds them (``find_transcripts``), ``[]`` imports
    without. ``protocols``: the run's protocol folder; None finds it (``find_protocols``).
    ``note`` hears why a found set was left out. Refused input (UnusableInput,
    InvalidInput) and an existing run id (LedgerError) write nothing.
    """
    with peer_root(path, *(transcripts or ())):  # every file it reads, from there down (files.py)
        try:
            data = peer_json(path)
        except FileNotFoundError:
            raise UnusableInput(path, "no such file") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise UnusableInput(path, f"cannot read ({exc})") from None
        except ValueError as exc:
            raise UnusableInput(path, f"not valid JSON ({exc})") from None
        shape = shape_of(data, path)
        f = Fields(path, "lifecycle results file")
        manifest = data["manifest"]
        set_path, set_id = _protocol_set(f, manifest, protocols, note)
        if derives_update_captured(data["runs"]):
            shape += ", update_captured derived from update_correct"
        dirs = list(find_transcripts(path) if transcripts is None else transcripts)
        for d in dirs:
            if not os.path.isdir(d):
                raise UnusableInput(d, "--transcripts must name a folder of transcript files")
        name = os.path.splitext(os.path.basename(path))[0]
        run = run_id or f"peer-{name}"
        try:
            check_run_id(run)
        except ValueError as exc:
            raise UnusableInput("--run-id", str(exc)) from None
        units = _plan(f, run, data["runs"], dirs)
        config = {
            "origin": ORIGIN,
            "shape": shape,
            "source": os.path.basename(path),
            "manifest": manifest,
        }
        missing = unrecorded(data["runs"])
        if missing:  # absent from the shape, not false: rederive skips them (docs/ci.md)
            config["unrecorded"] = missing
        if set_path:
            config["protocols_path"] = set_path  # where items() finds the set again
        header = _header(f, manifest, data.get("metrics") or {}, units, config, set_id)
        ticks = itertools.count(start_ns(f, manifest))
        # Deterministic timestamps (same file, same root) need our clock while writing; the
        # caller's ledger gets its own clock back however the import ends.
        callers_clock = ledger.clock
        ledger.clock = lambda: next(ticks)
        try:
            ledger.start_run(run, header)
            for i, unit in enumerate(units, 1):
                writer = ledger.new_stream(unit.stream, keep_log=True)
                _write_unit(writer, unit)
                ledger.commit(writer)
                if progress:
                    progress(i, len(units))
            root = ledger.seal(run)
        finally:
            ledger.clock = callers_clock
        return run, root, shape
