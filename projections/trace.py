"""Trace hashes: did the same inputs produce the same behaviour? (docs/trace-hash.md)

A trace is the *stable subset* of a stretch of a unit's stream: model requests and
responses, tool names, arguments and results, read-back bodies and observed readings,
episode outcomes and grader verdicts. Volatile values are removed (timestamps,
latencies, session handles, ``since`` in read-back paths) and platform-generated ids
are replaced by their order of first appearance, so two runs that behaved the same on
two fresh platforms hash the same. Link hashes answer a different question (has any
byte changed?); nothing here depends on them.

Pure functions over event bodies (``ledger.events``): the live runner calls them as it
records, re-derivation and replay call them on recorded streams.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Iterable, Sequence
from typing import Any, Final, NamedTuple

import blake3
import msgspec

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    InfraErrorBody,
    ModelCallBody,
    ReadBackBody,
    SessionCallBody,
    UnitFinishedBody,
)

VERSION: Final = "benchledger:trace:v1"
FLOAT_DIGITS: Final = 9

# Keys whose values are volatile wherever they appear (bodies, tool results, requests).
VOLATILE_KEYS: Final = frozenset(
    {"at", "timestamp", "latency_ms", "duration_ms", "elapsed_ms", "session_id"}
)
VOLATILE_SUFFIX: Final = "_at"  # created_at, updated_at, applied_at, rolled_back_at, ...
# Query parameters of read-back paths computed from the wall clock.
VOLATILE_PARAMS: Final = frozenset({"since", "until"})

# Session handles (the peer's and refplatform's ``dps_`` form): removed, not numbered.
_HANDLE = re.compile(r"\bdps_[0-9A-Za-z]+")
# RFC 3339 date-times (the platform's "now" stamps in free text).
_TIME = re.compile(r"\b\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(?:\.\d+)?(?:Z|[+-]\d{2}:?\d{2})?")
# Platform-generated ids: UUIDs and hex runs of 20-64 characters, optionally with a short
# prefix (``kp_``, ``evt_``). A run of digits alone is a number, never an id.
_ID = re.compile(
    r"(?<![0-9A-Za-z_])(?:[a-z]{1,8}_)?"
    r"(?:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|[0-9a-f]{20,64})"
    r"(?![0-9A-Za-z_])"
)
_ID_MIN: Final = 20  # the shortest text an _ID match fits in (a bare 20-character hex run)
_EMAIL = re.compile(r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+\b")
# Pool identities by name outside an email (``apikey:bench-agent-007``): which pool slot a
# unit was given is planning, not behaviour (a resumed unit gets fresh ones).
_AGENT = re.compile(r"\bbench-agent-\d+\b")
_HEX_LETTER = re.compile(r"[a-f]")


class Ids:
    """Numbers ids and identities by their order of first appearance in one trace."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        self.emails: dict[str, str] = {}
        self.agents: dict[str, str] = {}
        # Text already normalized in this trace: a model request repeats the whole
        # conversation so far, so most text comes back many times. The cache is exact:
        # the first pass numbered every id in the text, so a second pass gives the same.
        self.texts: dict[str, Any] = {}
        self.containers: dict[bytes, Any] = {}

    def id(self, token: str) -> str:
        """``<id:n>`` for the n-th distinct id seen."""
        return self.ids.setdefault(token, f"<id:{len(self.ids) + 1}>")

    def email(self, token: str) -> str:
        """``<email:n>`` for the n-th distinct email seen (pool slots vary between runs)."""
        return self.emails.setdefault(token, f"<email:{len(self.emails) + 1}>")

    def agent(self, token: str) -> str:
        """``<agent:n>`` for the n-th distinct pool identity name seen."""
        return self.agents.setdefault(token, f"<agent:{len(self.agents) + 1}>")


_key = msgspec.json.Encoder().encode  # a container's identity for the cache: its JSON bytes


def _is_volatile(key: str) -> bool:
    return key in VOLATILE_KEYS or key.endswith(VOLATILE_SUFFIX)


# Keys seen so far and whether they are volatile: a trace asks about the same few hundred
# keys hundreds of thousands of times. Bounded, since the keys come from platform data.
_VOLATILE: dict[str, bool] = {}
_VOLATILE_MAX: Final = 4096
_CONTAINERS = (dict, list, tuple)


def normalize(value: Any, ids: Ids) -> Any:
    """``value`` with volatile keys dropped, ids numbered, floats rounded, JSON text parsed."""
    kind = type(value)
    if kind is str:
        return normalize_text(value, ids)
    if kind in _CONTAINERS or isinstance(value, _CONTAINERS):
        return _container(value, ids)
    if kind is float or isinstance(value, float):
        return round(value, FLOAT_DIGITS)
    if isinstance(value, str):
        return normalize_text(value, ids)
    return value


def _container(
    value: dict[Any, Any] | list[Any] | tuple[Any, ...], ids: Ids, cached: bool = True
) -> Any:
    # A model request repeats the conversation so far, so most containers come back many
    # times: their form is looked up by their JSON bytes (a C encoder, far cheaper than
    # walking them). Exact for the reason the text cache is.
    key: bytes | None = None
    if cached:
        try:
            key = _key(value)
        except (TypeError, ValueError, OverflowError, msgspec.EncodeError):  # not JSON: walk
            key = None
    if key is not None:
        seen = ids.containers.get(key)
        if seen is not None:
            return seen
    texts = ids.texts
    out: Any
    # The leaves inline (strings already seen, ints, bools, None): most of a trace's calls.
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            name = k if type(k) is str else str(k)
            volatile = _VOLATILE.get(name)
            if volatile is None:
                volatile = _is_volatile(name)
                if len(_VOLATILE) < _VOLATILE_MAX:
                    _VOLATILE[name] = volatile
            if volatile:
                continue
            kind = type(v)
            if kind is str:
                got = texts.get(v)
                out[name] = normalize_text(v, ids) if got is None else got
            elif kind is int or kind is bool or v is None:
                out[name] = v
            elif cached:
                out[name] = normalize(v, ids)
            else:
                out[name] = _plain(v, ids)
    else:
        out = []
        for v in value:
            kind = type(v)
            if kind is str:
                got = texts.get(v)
                out.append(normalize_text(v, ids) if got is None else got)
            elif kind is int or kind is bool or v is None:
                out.append(v)
            elif cached:
                out.append(normalize(v, ids))
            else:
                out.append(_plain(v, ids))
    if key is not None:
        ids.containers[key] = out
    return out


def _plain(value: Any, ids: Ids) -> Any:
    """``normalize`` without the container cache: for a document parsed from text, whose
    text the text cache already caught if it came before (re-encoding it would cost more
    than the walk saves)."""
    if isinstance(value, _CONTAINERS):
        return _container(value, ids, cached=False)
    return normalize(value, ids)


def normalize_text(text: str, ids: Ids) -> Any:
    """Text as its stable form: a JSON object or array is normalized as a structure (tool
    results are JSON documents in text blocks); other text has handles removed, times
    masked, ids, emails and pool identity names numbered."""
    done = ids.texts.get(text)
    if done is not None:
        return done
    ids.texts[text] = out = _normalize_text(text, ids)
    return out


def _normalize_text(text: str, ids: Ids) -> Any:
    head = text.lstrip()[:1]
    if head in ("{", "["):
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        if isinstance(parsed, dict | list):
            return _container(parsed, ids, cached=False)
    # Each pattern runs only on text holding what every match of it holds (most text is
    # short JSON leaves that match none): the same result, without most of the scans.
    if "dps_" in text:
        text = _HANDLE.sub("<handle>", text)
    if ":" in text:
        text = _TIME.sub("<time>", text)
    if len(text) >= _ID_MIN:
        text = _ID.sub(lambda m: _id(m.group(), ids), text)
    if "@" in text:
        text = _EMAIL.sub(lambda m: ids.email(m.group()), text)
    if "bench-agent-" in text:
        text = _AGENT.sub(lambda m: ids.agent(m.group()), text)
    return text


def _id(token: str, ids: Ids) -> str:
    hexpart = token.rpartition("_")[2]
    return ids.id(token) if _HEX_LETTER.search(hexpart) else token


def normalize_path(path: str, ids: Ids) -> list[Any]:
    """A read-back path as ``[route, [[param, value], ...]]`` without clock-derived params."""
    route, _, query = path.partition("?")
    params = [
        [k, normalize_text(v, ids)]
        for k, v in urllib.parse.parse_qsl(query, keep_blank_values=True)
        if k not in VOLATILE_PARAMS
    ]
    return [normalize_text(urllib.parse.unquote(route), ids), params]


def stable(body: Body, ids: Ids) -> list[Any] | None:
    """One event's stable form, ``[kind, {...}]``; None for kinds outside every trace.

    Kept: an episode's prompts, session calls, successful model exchanges, read-backs,
    episode outcomes and verdicts. Dropped: unit bookkeeping, infrastructure errors and
    failed model attempts (a transient failure that was retried is not behaviour).
    """
    if isinstance(body, EpisodeStartedBody):
        form: dict[str, Any] = {"episode": body.episode, "system_prompt": body.system_prompt,
                                "user_prompt": body.user_prompt}  # fmt: skip
    elif isinstance(body, SessionCallBody):
        form = {"episode": body.episode, "method": body.method, "tool": body.tool,
                "arguments": body.arguments, "result": body.result, "content": body.content,
                "structured": body.structured, "is_error": body.is_error}  # fmt: skip
    elif isinstance(body, ModelCallBody):
        if body.error:
            return None
        response = body.response
        if isinstance(response, dict):  # usage is provider accounting (cache hits vary)
            response = {k: v for k, v in response.items() if k != "usage"}
        form = {"episode": body.episode, "request": body.request, "response": response}
    elif isinstance(body, ReadBackBody):
        return ["read_back", {
            "stage": body.stage, "method": body.method, "path": normalize_path(body.path, ids),
            "status": body.status, "body": normalize(body.body, ids), "purpose": body.purpose,
            "observed": normalize(body.observed, ids),
        }]  # fmt: skip
    elif isinstance(body, EpisodeFinishedBody):
        form = {"episode": body.episode, "final_answer": body.final_answer,
                "tool_calls": body.tool_calls, "tool_errors": body.tool_errors,
                "search_called": body.search_called, "fact_surfaced": body.fact_surfaced,
                "budget_exhausted": body.budget_exhausted,
                "capture_attempted": body.capture_attempted, "sources": body.sources}  # fmt: skip
    elif isinstance(body, GraderDecisionBody):
        form = {"stage": body.stage, "check": body.check, "verdict": body.verdict}
    else:
        return None
    return [body.KIND, normalize(form, ids)]


class Step(NamedTuple):
    """One item of a trace and the seq of the event it came from."""

    seq: int
    item: list[Any]


def trace(events: Iterable[tuple[int, Body]], *, keep_unfinished: bool = False) -> list[Step]:
    """The stable items of ``events`` (one stream, in order), numbered by one ``Ids``.

    An episode attempt that never finished (an infrastructure error restarted it) leaves
    no items, unless ``keep_unfinished`` and it is the last (a replay that stopped in it);
    consecutive identical read-backs count once (how often a wait polled depends on
    timing, not behaviour).
    """
    ids = Ids()
    steps: list[Step] = []
    pending: list[tuple[int, Body]] | None = None  # the open episode attempt

    def add(seq: int, body: Body) -> None:
        item = stable(body, ids)
        if item is None:
            return
        if item[0] == "read_back" and steps and steps[-1].item == item:
            return
        steps.append(Step(seq, item))

    for seq, body in events:
        if isinstance(body, EpisodeStartedBody):
            pending = [(seq, body)]
        elif isinstance(body, InfraErrorBody):
            pending = None  # the attempt in flight failed; the retry starts over
        elif pending is not None:
            pending.append((seq, body))
            if isinstance(body, EpisodeFinishedBody):
                for s, b in pending:
                    add(s, b)
                pending = None
        else:
            add(seq, body)
    for seq, body in pending if keep_unfinished and pending else ():
        add(seq, body)
    return steps


def _digest(scope: str, steps: Sequence[Step]) -> str:
    return blake3.blake3(canonical_json([VERSION, scope, [s.item for s in steps]])).hexdigest()


def episode_trace_hash(bodies: Iterable[Body]) -> str:
    """The trace hash of one episode: its bodies from episode_started to episode_finished."""
    return _digest("episode", trace(enumerate(bodies)))


def traced(finished: EpisodeFinishedBody, bodies: Sequence[Body]) -> EpisodeFinishedBody:
    """``finished`` carrying its episode's trace hash: over the episode's ``bodies`` from its
    episode_started on, then ``finished`` itself (live episodes and imports alike)."""
    return msgspec.structs.replace(finished, trace_hash=episode_trace_hash([*bodies, finished]))


def unit_trace_hash(bodies: Iterable[Body]) -> str:
    """The trace hash of one unit: its episodes' exchanges, read-backs and verdicts."""
    return _digest("unit", trace(enumerate(bodies)))


class EpisodeSpan(NamedTuple):
    """One finished episode of a stream: where it starts and ends, and its events."""

    stage: str
    started: int  # seq of its episode_started (== finished when the stream lacks one)
    finished: int  # seq of its episode_finished
    events: list[tuple[int, Body]]
    recorded: str  # the trace hash its episode_finished carries ("" for old events)


def episodes(events: Sequence[tuple[int, Body]]) -> list[EpisodeSpan]:
    """Every finished episode of a stream: the events from its episode_started on."""
    out: list[EpisodeSpan] = []
    start = None
    for i, (seq, body) in enumerate(events):
        if isinstance(body, EpisodeStartedBody):
            start = i
        elif isinstance(body, EpisodeFinishedBody):
            first = start if start is not None else i
            part = list(events[first : i + 1])
            out.append(EpisodeSpan(body.episode, part[0][0], seq, part, body.trace_hash))
            start = None
    return out


class HashCheck(NamedTuple):
    """A trace hash as recorded beside the one recomputed from the recorded events."""

    seq: int
    scope: str  # episode | unit
    label: str  # the episode's stage, or "unit"
    recorded: str
    computed: str

    @property
    def recorded_at_all(self) -> bool:
        return bool(self.recorded)

    @property
    def equal(self) -> bool:
        return self.recorded == self.computed


def check_hashes(events: Sequence[tuple[int, Body]]) -> list[HashCheck]:
    """Every episode's and the unit's trace hash, recorded and recomputed, in stream order."""
    out = [
        HashCheck(ep.finished, "episode", ep.stage, ep.recorded,
                  episode_trace_hash(b for _, b in ep.events))
        for ep in episodes(events)
    ]  # fmt: skip
    for i, (seq, body) in enumerate(events):
        if isinstance(body, UnitFinishedBody):
            computed = unit_trace_hash(b for _, b in events[:i])
            out.append(HashCheck(seq, "unit", "unit", body.trace_hash, computed))
    return out
