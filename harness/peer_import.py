"""``benchledger import-peer mcp-data-platform``: a peer results file as a sealed run.

One stream per run record; each episode (with its transcript when given) as
session-call events and its final answer; the peer's recorded verdicts as grader
decisions with ``origin = "mcp-data-platform"``; harness failures as infra errors.
Timestamps come from the manifest's start time plus one nanosecond per event, so
importing the same file twice gives the same run root.

The whole file (every record, every field the import reads, every transcript) is
checked before the first write: a refused import leaves nothing in the ledger.

Shapes: the current one; the same without ``update_captured`` (files written before
that field existed: an update unit's correction landed exactly when ``update_correct``
is not null, and the import records that as a derived ``update_captured`` decision);
and the older v1.102 one (no intervals, cache tokens or capture split). A merged
multi-pass file finds its per-pass transcripts through the ``passes.txt`` beside it;
transcript folders given by hand must match the passes one to one, or a pass would
carry another pass's transcripts.
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import os
import re
from collections.abc import Callable
from dataclasses import dataclass
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
    return _Fields(path, "lifecycle results file").refuse(problem)


def _field(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


@dataclass(frozen=True)
class _Fields:
    """Typed reads of one peer JSON file; a wrong value is refused by its JSON path.

    Python's truthiness would read ``"no"`` as true and ``int("x")`` would crash, so
    every field the import uses goes through one of these.
    """

    path: str
    what: str  # "lifecycle results file" or "transcript"

    def refuse(self, problem: str) -> UnusableInput:
        return UnusableInput(self.path, f"not a mcp-data-platform {self.what}: {problem}")

    def _wrong(self, where: str, key: str, want: str, value: Any) -> UnusableInput:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:39] + "…"
        return self.refuse(f"{_field(where, key)} must be {want}, not {shown}")

    def flag(self, obj: dict[str, Any], key: str, where: str) -> bool | None:
        value = obj.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self._wrong(where, key, "true, false or null", value)

    def count(self, obj: dict[str, Any], key: str, where: str) -> int:
        value = obj.get(key)
        if value is None:
            return 0
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise self._wrong(where, key, "a whole number, 0 or more", value)

    def positive(self, obj: dict[str, Any], key: str, where: str) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        raise self._wrong(where, key, "a positive whole number", value)

    def text(self, obj: dict[str, Any], key: str, where: str) -> str:
        value = obj.get(key)
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        raise self._wrong(where, key, "text or null", value)

    def items(self, obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
        """A list of objects; null or absent is empty."""
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(where, key, "a list", value)
        for n, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.refuse(f"{_field(where, key)}[{n}] is not an object")
        return value


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


def _start_ns(f: _Fields, manifest: dict[str, Any]) -> int:
    text = f.text(manifest, "started_at", "manifest")
    if not text:
        return 0
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise f.refuse(f"manifest.started_at is not an ISO 8601 time: {text!r}") from None
    if stamp.tzinfo is None:  # the peer writes UTC; a naive stamp cannot be subtracted
        stamp = stamp.replace(tzinfo=dt.UTC)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (stamp - epoch) // dt.timedelta(microseconds=1) * 1000


def _transcript(
    folder: str | None, pid: str, stage: str, email: str
) -> tuple[str, tuple[SessionCallBody, ...]]:
    """The episode's first user prompt and its tool calls; nothing when there is no file."""
    if folder is None:
        return "", ()
    path = os.path.join(folder, f"{pid}-{stage}-{email}.json")
    if not os.path.isfile(path):
        return "", ()
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError) as exc:
        raise UnusableInput(path, f"unreadable transcript ({exc})") from None
    f = _Fields(path, "transcript")
    if not isinstance(data, dict):
        raise f.refuse("the top level must be an object with a transcript list")
    turns = f.items(data, "transcript", "")
    results: dict[str, tuple[str, bool]] = {}
    for t, turn in enumerate(turns):
        for n, res in enumerate(f.items(turn, "tool_results", f"transcript[{t}]")):
            where = f"transcript[{t}].tool_results[{n}]"
            results[f.text(res, "call_id", where)] = (
                f.text(res, "text", where),
                bool(f.flag(res, "is_error", where)),
            )
    calls = []
    for t, turn in enumerate(turns):
        for n, call in enumerate(f.items(turn, "tool_calls", f"transcript[{t}]")):
            where = f"transcript[{t}].tool_calls[{n}]"
            args = call.get("args")
            if args is not None and not isinstance(args, dict):
                raise f.refuse(f"{where}.args must be an object or null")
            text, err = results.get(f.text(call, "id", where), ("", False))
            calls.append(
                SessionCallBody(
                    episode=stage,
                    method="tools/call",
                    tool=f.text(call, "name", where),
                    arguments=dict(args or {}),
                    result=text,
                    is_error=err,
                )
            )
    return _first_user_text(turns), tuple(calls)


def _first_user_text(turns: list[dict[str, Any]]) -> str:
    for turn in turns:
        if turn.get("role") == "user" and isinstance(turn.get("text"), str):
            return str(turn["text"])
    return ""


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


def _derived_update_captured(f: _Fields, record: dict[str, Any], where: str) -> bool | None:
    """``update_captured`` for a file that predates it: landed iff update_correct is recorded."""
    if not _is_update_unit(record):
        return None
    return f.flag(record, "update_correct", where) is not None


def _plan_unit(
    f: _Fields,
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
    attempt = _attempt(f, i, record)
    identities: dict[str, str] = {}
    episodes: list[_Episode] = []
    answers: dict[str, str] = {}
    for j, ep in enumerate(record["episodes"]):
        ew = f"{where}.episodes[{j}]"
        stage: str = ep["stage"]  # shape_of checked it is text
        email = f.text(ep, "email", ew)
        identities[f.text(ep, "identity", ew)] = email
        prompt, calls = _transcript(folders.get(attempt), pid, stage, email)
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


def _attempt(f: _Fields, i: int, record: dict[str, Any]) -> int:
    attempt = f.positive(record, "attempt", f"runs[{i}]")
    if attempt is None:
        raise f.refuse(f"runs[{i}].attempt must be a positive whole number")
    return attempt


_PASS_NAME: Final = re.compile(r"(?<![a-z0-9])pass[-_ ]?0*([1-9][0-9]*)(?![0-9])", re.IGNORECASE)


def _listed_passes(results: str) -> dict[str, int]:
    """Each pass's transcript folder (real path) -> its pass, from the ``passes.txt`` beside."""
    listing = os.path.join(os.path.dirname(os.path.abspath(results)), "passes.txt")
    try:
        with open(listing, encoding="utf-8") as fh:
            lines = [raw.strip() for raw in fh if raw.strip()]
    except (OSError, UnicodeDecodeError):
        return {}  # no listing: folders can still be named pass-N
    out: dict[str, int] = {}
    for n, line in enumerate(lines, 1):
        found = find_pass_file(listing, line)
        if found is not None:
            out.setdefault(os.path.realpath(found + ".transcripts"), n)
    return out


def _named_pass(f: _Fields, folder: str, listed: dict[str, int]) -> int | None:
    """The pass a transcript folder is named for, or None when its name says none.

    Named: the ``.transcripts`` folder of ``passes.txt`` line N (the peer's layout), or
    one ``pass-N``/``passN`` in its name (or, for ``*.transcripts``, its parent's name).
    """
    given = os.path.abspath(folder)
    name = os.path.basename(given.rstrip(os.sep))
    claims = {int(n) for n in _PASS_NAME.findall(name)}
    if not claims and name.endswith(".transcripts"):
        claims = {int(n) for n in _PASS_NAME.findall(os.path.basename(os.path.dirname(given)))}
    by_name = claims.pop() if len(claims) == 1 else None
    by_listing = listed.get(os.path.realpath(folder))
    if by_name is not None and by_listing is not None and by_name != by_listing:
        raise UnusableInput(
            f.path,
            f"transcript folder {folder} is named for pass {by_name} but passes.txt lists "
            f"it as pass {by_listing}",
        )
    return by_listing if by_listing is not None else by_name


def _match_transcripts(
    f: _Fields, records: list[dict[str, Any]], dirs: list[str]
) -> dict[int, str]:
    """Each pass's transcript folder by attempt; refused unless they match one to one.

    A folder copied onto a pass it is not would seal wrong evidence into the run, so
    the count must equal the passes; folders each named for their pass may come in any
    order, others are taken in attempt order.
    """
    if not dirs:
        return {}
    passes = max(_attempt(f, i, r) for i, r in enumerate(records))
    if len(dirs) != passes:
        plural = "pass" if passes == 1 else "passes"
        given = "folder was" if len(dirs) == 1 else "folders were"
        raise UnusableInput(
            f.path,
            f"the results have {passes} {plural} but {len(dirs)} transcript {given} given: "
            "give one --transcripts folder per pass, in attempt order or each named for "
            "its pass",
        )
    if passes == 1:
        return {1: dirs[0]}  # a pass's own file records attempt 1 whatever its pass was
    listed = _listed_passes(f.path)
    named = [_named_pass(f, d, listed) for d in dirs]
    picked = [n for n in named if n is not None]
    if len(picked) == len(dirs):
        by_pass: dict[int, str] = {}
        for folder, n in zip(dirs, picked, strict=True):
            if n > passes:
                raise UnusableInput(
                    f.path,
                    f"transcript folder {folder} is named for pass {n} but the results "
                    f"have {passes} passes",
                )
            if n in by_pass:
                raise UnusableInput(
                    f.path,
                    f"transcript folders {by_pass[n]} and {folder} are both named for pass {n}",
                )
            by_pass[n] = folder
        return by_pass
    for j, (folder, claim) in enumerate(zip(dirs, named, strict=True), 1):
        if claim is not None and claim != j:
            raise UnusableInput(
                f.path,
                f"transcript folder {j} of {passes} ({folder}) is named for pass {claim}: give "
                "the folders in attempt order, or each named for its pass",
            )
    return dict(enumerate(dirs, 1))


def _plan(f: _Fields, run: str, records: list[dict[str, Any]], dirs: list[str]) -> list[_Unit]:
    """Every record checked and built, transcripts read: all refusals happen here."""
    units: list[_Unit] = []
    seen: dict[str, int] = {}
    derive = derives_update_captured(records)
    folders = _match_transcripts(f, records, dirs)
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
    w.append(unit.started)
    finished: dict[str, int] = {}
    for ep in unit.episodes:
        refs = [w.append(ep.started)]
        refs.extend(w.append(call) for call in ep.calls)
        finished[ep.finished.episode] = w.append(ep.finished, refs=refs)
    for episode, decision in unit.decisions:
        w.append(decision, refs=[finished[episode]] if episode in finished else [])
    if unit.infra is not None:
        w.append(unit.infra)
    w.append(unit.finished)


def _header(
    f: _Fields,
    manifest: dict[str, Any],
    metrics: dict[str, Any],
    units: list[_Unit],
    config: dict[str, Any],
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
    )


def find_pass_file(listing: str, line: str) -> str | None:
    """Where a ``passes.txt`` line points (a pass's results file), or None if nowhere.

    The peer writes these paths relative to its repository root; they are looked up
    beside ``passes.txt``, under each folder above it, and as ``FOLDER/FILE`` beside it.
    """
    here = os.path.dirname(os.path.abspath(listing))
    candidates = [line] if os.path.isabs(line) else []
    folder = here
    while True:
        candidates.append(os.path.join(folder, line))
        parent = os.path.dirname(folder)
        if parent == folder:
            break
        folder = parent
    parts = line.replace("\\", "/").rstrip("/").split("/")
    candidates.append(os.path.join(here, *parts[-2:]))
    found = next((c for c in candidates if os.path.isfile(c)), None)
    return None if found is None else os.path.normpath(found)


def _pass_results(listing: str, n: int, line: str) -> str:
    """Where line ``n`` of a ``passes.txt`` points; UnusableInput naming the line if nowhere."""
    found = find_pass_file(listing, line)
    if found is None:
        raise UnusableInput(
            listing, f"{line!r} names no pass results file here or in a folder above", line=n
        )
    return found


def find_transcripts(results: str) -> list[str]:
    """The transcript folders of a results file, in attempt order ([] when there are none).

    ``RESULTS.json.transcripts`` beside the file; for a merged multi-pass file without
    one, each pass's ``lifecycle-*.json.transcripts`` from the ``passes.txt`` beside it
    (line j is pass j, which the merged file records as attempt j).
    """
    own = results + ".transcripts"
    if os.path.isdir(own):
        return [own]
    listing = os.path.join(os.path.dirname(os.path.abspath(results)), "passes.txt")
    if not os.path.isfile(listing) or not _is_merged(results):
        return []
    try:
        with open(listing, encoding="utf-8") as fh:
            lines = [(n, raw.strip()) for n, raw in enumerate(fh, 1) if raw.strip()]
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(listing, f"cannot read ({exc})") from None
    folders = []
    for n, line in lines:
        folder = _pass_results(listing, n, line) + ".transcripts"
        if not os.path.isdir(folder):
            raise UnusableInput(
                listing,
                f"pass {n} has no transcript folder {folder}; give --transcripts DIR once "
                "per pass instead",
                line=n,
            )
        folders.append(folder)
    return folders


def _is_merged(results: str) -> bool:
    """Whether a results file holds several passes (a run record with attempt > 1)."""
    try:
        with open(results, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return False  # import_peer reports the file itself
    runs = data.get("runs") if isinstance(data, dict) else None
    return isinstance(runs, list) and any(
        isinstance(r, dict) and isinstance(r.get("attempt"), int) and r["attempt"] > 1 for r in runs
    )


def import_peer(
    ledger: Ledger,
    path: str,
    *,
    transcripts: list[str] | None = None,
    run_id: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> tuple[str, str, str]:
    """Import a peer results file as a sealed run; return (run id, root, shape).

    ``transcripts``: one folder per pass, in attempt order or each named for its pass
    (``_match_transcripts``); None finds them (``find_transcripts``), ``[]`` imports
    without. Refused input (UnusableInput) and an
    existing run id (LedgerError) write nothing.
    """
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
    f = _Fields(path, "lifecycle results file")
    manifest = data["manifest"]
    units = _plan(f, run, data["runs"], dirs)
    config = {
        "origin": ORIGIN,
        "shape": shape,
        "source": os.path.basename(path),
        "manifest": manifest,
    }
    header = _header(f, manifest, data.get("metrics") or {}, units, config)
    ticks = itertools.count(_start_ns(f, manifest))
    # Deterministic timestamps (same file, same root) need our clock while writing; the
    # caller's ledger gets its own clock back however the import ends.
    callers_clock = ledger.clock
    ledger.clock = lambda: next(ticks)
    try:
        ledger.start_run(run, header)
        for i, unit in enumerate(units, 1):
            writer = ledger.new_stream(unit.stream)
            _write_unit(writer, unit)
            ledger.commit(writer)
            if progress:
                progress(i, len(units))
        root = ledger.seal(run)
    finally:
        ledger.clock = callers_clock
    return run, root, shape
