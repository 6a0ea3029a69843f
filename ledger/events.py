"""Every event kind: frozen, tagged msgspec Structs sharing one envelope.

The envelope is ``stream, seq, prev, at, kind, refs, body`` plus, from event format 2 on,
``v`` (the event format; absent in format 1, so a format-1 event's bytes are unchanged).
Bodies grow by adding fields with defaults at the end; bodies omit default-valued fields
when encoded, so an old event's canonical bytes never change when a body gains a field.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, ClassVar, Union

import msgspec

JSON = Any  # any JSON value: msgspec encodes dict/list/str/int/float/bool/None

# The event format new runs are written in (docs/ledger-format.md). Format 1 hashes an
# event's whole bytes; format 2 hashes them with the body replaced by the body's digest, so
# a withheld event still proves its envelope. A run keeps the format of its run_started.
EVENT_FORMAT = 2
EVENT_FORMATS = (1, 2)


class Body(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=False):
    """Base of every event body."""

    KIND: ClassVar[str] = ""


class PlannedUnit(msgspec.Struct, frozen=True, array_like=True):
    """One unit a run plans: a protocol (or case) id and its attempt."""

    unit_id: str
    attempt: int


class HitRule(msgspec.Struct, frozen=True, omit_defaults=True):
    """Where the hits of a platform's answer are, when its shape does not say
    (``projections.retrieval.items``; a mapping's ``search.hits``, docs/platforms.md)."""

    path: str = ""  # JSON: the dot path of the array of hits
    id_field: str = ""  # JSON: a hit object's id
    text_field: str = ""  # JSON: a hit object's text
    line: str = ""  # text: a pattern matching each hit's first line
    id: str = ""  # text: a pattern whose one group is the hit's id
    separator: str = ""  # text: a pattern between hits


class PlatformRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """How a run reached its platform and what the platform said it is (never a key)."""

    kind: str  # embedded | process | external | stdio | basic-memory
    url: str = ""
    name: str = ""
    version: str = ""
    stages: list[str] = []
    sinks: list[str] = []
    # A mapped MCP server (``--platform mcp:FILE``): the mapping's text and blake3 hash, which
    # full replay serves the run with (it names secret variables, never their values).
    mapping: str = ""
    mapping_hash: str = ""
    # The mapping's own ``name`` (the server may call itself something else), and how its
    # search answers split into hits (``search.hits``), which re-derivation itemises with.
    mapping_name: str = ""
    hits: HitRule | None = None


class RunRecord(msgspec.Struct, frozen=True, omit_defaults=True):
    """Everything a run was started with, written once in ``run_started`` and read back whole.

    Resume and queue workers restore a run from it, seal finds missing units in
    ``units``, compare and gate check comparability with it. Secrets never enter it:
    the reset command is stored as its program name and a salted digest (runs recorded
    before that hold it redacted in ``reset_cmd``) and keys are absent by construction.
    """

    suite: str
    platform: PlatformRecord
    protocols_path: str = ""
    protocol_set_hash: str = ""
    units: list[PlannedUnit] = []
    k: int = 1
    agent: str = ""
    agent_params: dict[str, JSON] = {}
    pack: str = ""
    pack_hash: str = ""
    pool_size: int = 0
    reset_cmd: str = ""
    concurrency: int = 1
    capture_timeout_s: float = 10.0
    runtime_scope: str = "pass"
    shards: int = 1  # runs sharded by `--shard i/n` (retired): how many parts
    # A subset run (``run --protocol ID``, ``--limit N``): the ids asked for, the limit, and
    # how many items the whole set holds. All default (so omitted) for a run of the whole set.
    only: list[str] = []
    limit: int = 0
    set_items: int = 0
    # ``--reset-cmd`` as recorded from this version on (``reset_cmd`` stays empty): the
    # program's name and a salted digest of the whole command, which a resume checks the
    # command given again against; the command itself, with whatever secrets it carries,
    # is never recorded (harness/record.py ``reset_record``).
    reset_program: str = ""
    reset_digest: str = ""
    reset_salt: str = ""
    # A platform's own options that shape its answers (``--embedder``), which a resume
    # restores; those a platform does not mark ``recorded`` (commands) are never kept.
    platform_options: dict[str, str] = {}
    # The platform's declared memory vocabulary (harness/platforms/vocabulary.py ``record``)
    # and what the probe found before any unit (harness/probe.py; empty: not probed).
    vocabulary: dict[str, JSON] = {}
    probe: dict[str, JSON] = {}
    # The locomo suite (docs/locomo.md): how many hits the harness's search asks for (0: no
    # search, a control, or a run recorded before), the blake3 of the shipped prompt a
    # model answers with (harness/agents/answering.py; "": no model answers), and the
    # full-context control's token budget (0: not that control); ``control``: the control
    # the run is (``no-memory``, ``full-context``; "": none), which searches nothing.
    search_k: int = 0
    answer_prompt_hash: str = ""
    context_budget: int = 0
    control: str = ""
    # The judge that graded the answers (``run --judge``; harness/judge.py ``Judge.record``:
    # its spec, model, prompt name, text and sha256, temperature, seed, samples, params);
    # empty: no judge. ``regraded``: a ``benchledger regrade`` run's source (its run id and
    # root), whose recorded answers it judged without calling the platform or the agent.
    judge: dict[str, JSON] = {}
    regraded: dict[str, JSON] = {}


class Preregistration(msgspec.Struct, frozen=True, omit_defaults=True):
    """The bar a run will be judged by, fixed before any unit runs (``run_started.prereg``).

    ``baseline_root`` pins the baseline run by content, ``items`` the protocols by their
    content hashes (sorted), so neither can be swapped by renaming. See docs/trust.md.
    """

    baseline_run: str
    baseline_root: str
    metrics: list[str]
    tolerance: float
    protocol_set_hash: str = ""
    items: list[str] = []
    strict: bool = False


class RunStartedBody(Body, frozen=True):
    KIND: ClassVar[str] = "run_started"
    suite: str
    protocol_set_hash: str = ""
    protocols: int = 0
    k: int = 1
    agent: str = ""
    model: str = ""
    platform: str = ""
    platform_version: str = ""
    coupled: bool = False
    tool_version: str = ""
    config: dict[str, JSON] = {}
    record: RunRecord | None = None
    prereg: Preregistration | None = None
    # The set's content identity, the benchledger-recipe hash, recorded by an import that
    # found the set's files; empty: protocol_set_hash is it.
    protocol_set_id: str = ""


class UnitStartedBody(Body, frozen=True):
    KIND: ClassVar[str] = "unit_started"
    protocol_id: str
    attempt: int
    protocol_hash: str = ""
    teacher: str = ""
    learner: str = ""
    resumes: str = ""


class EpisodeStartedBody(Body, frozen=True):
    KIND: ClassVar[str] = "episode_started"
    episode: str
    identity: str = ""
    system_prompt: str = ""
    user_prompt: str = ""
    attempt: int = 0  # 0 first try; n the n-th retry of this stage after an infra error


class SessionCallBody(Body, frozen=True):
    """One MCP call. Tool results are recorded as their content blocks (``content``),
    never joined, so a block can be parsed on its own, live and re-derived; ``result``
    holds non-tool results (initialize, tools/list) and old events' joined text."""

    KIND: ClassVar[str] = "session_call"
    episode: str
    method: str
    tool: str = ""
    arguments: dict[str, JSON] = {}
    result: JSON = None
    is_error: bool = False
    latency_ms: float = 0.0
    content: list[dict[str, JSON]] = []
    structured: JSON = None

    def text(self) -> str:
        """What the agent saw: the text blocks joined by newlines (old events: ``result``)."""
        if self.content:
            return "\n".join(str(b.get("text", "")) for b in self.content if "text" in b)
        return self.result if isinstance(self.result, str) else ""


class ModelCallBody(Body, frozen=True):
    KIND: ClassVar[str] = "model_call"
    episode: str
    request_hash: str
    request: JSON = None
    response: JSON = None
    usage: dict[str, int] = {}
    latency_ms: float = 0.0
    retry: int = 0
    error: str = ""  # non-empty: a failed attempt (kind: message); the response is absent
    status: int = 0
    stop_reason: str = ""


class ReadBackBody(Body, frozen=True):
    KIND: ClassVar[str] = "read_back"
    stage: str
    method: str
    path: str
    status: int = 200
    body: JSON = None
    latency_ms: float = 0.0
    purpose: str = ""  # what the read was for: capture, approve, insight_status, sink, ...
    observed: JSON = None  # the adapter's normalised reading of ``body`` (decisions use it)


class GraderDecisionBody(Body, frozen=True):
    KIND: ClassVar[str] = "grader_decision"
    stage: str
    check: str
    verdict: bool | None
    reason: str = ""
    answer: str = ""
    expected: JSON = None
    origin: str = "benchledger"


class EpisodeFinishedBody(Body, frozen=True):
    KIND: ClassVar[str] = "episode_finished"
    episode: str
    final_answer: str = ""
    tool_calls: int = 0
    tool_errors: int = 0
    search_called: bool = False
    fact_surfaced: bool = False
    budget_exhausted: bool = False
    input_tokens: int = 0
    output_tokens: int = 0
    trace_hash: str = ""
    cache_read_tokens: int = 0
    cache_creation_tokens: int = 0
    capture_attempted: bool = False
    sources: list[str] = []  # refs the agent cited (the provenance lane's SOURCES: line)
    # The platform's declared vocabulary as the episode counted by it (harness/episode.py),
    # so re-derivation reads which calls were a search or a capture and where a search's
    # hits are from the ledger alone: ``vocabulary`` its name ("(none)": the platform
    # declares none); runs recorded before leave it empty, and are read by the tool names
    # of that version (projections/vocabulary.py). ``not_counted``: each call of a counted
    # tool that was no attempt, and why (the session did not list it, or an error).
    search_tools: list[str] = []
    capture_tools: list[str] = []
    hits: HitRule | None = None
    not_counted: list[str] = []
    vocabulary: str = ""


class InfraErrorBody(Body, frozen=True):
    KIND: ClassVar[str] = "infra_error"
    stage: str
    error: str
    message: str = ""
    retry: int = 0
    retryable: bool = False


class UnitFinishedBody(Body, frozen=True):
    KIND: ClassVar[str] = "unit_finished"
    outcome: dict[str, bool | None] = {}
    error: str = ""
    trace_hash: str = ""  # the unit's: its episodes' exchanges plus read-backs and verdicts


# How the harness's fault barrier starts ``unit_finished.error`` for a bug of its own; any
# other error is an infrastructure failure.
INTERNAL_ERROR = "internal error in "


def infra_failure(error: str) -> bool:
    """Whether a ``unit_finished.error`` is an infrastructure failure (not our own bug,
    which a retry would only repeat): what ``run --retry-infra`` re-runs and what keeps a
    finished run unsealed."""
    return bool(error) and not error.startswith(INTERNAL_ERROR)


def infra_failed_units(ends: Iterable[tuple[str, str]]) -> list[str]:
    """The units whose every counting attempt ended in an infrastructure failure, sorted;
    ``ends`` holds (unit, its ``unit_finished.error``) per finished, not abandoned stream."""
    return failed_units(ends)[0]


def failed_units(ends: Iterable[tuple[str, str]]) -> tuple[list[str], list[str]]:
    """The one split of a run's failed units every display, the JSON and ``--retry-infra``
    share: (infra-failed: every counting attempt an infrastructure failure, harness-failed:
    some counting attempt a bug of ours), each sorted; ``ends`` as ``infra_failed_units``."""
    infra: dict[str, bool] = {}
    ours: set[str] = set()
    for unit, error in ends:
        infra[unit] = infra.get(unit, True) and infra_failure(error)
        if error.startswith(INTERNAL_ERROR):
            ours.add(unit)
    return sorted(u for u, bad in infra.items() if bad), sorted(ours)


def stream_unit(run_id: str, stream: str) -> tuple[str, str]:
    """(unit, attempt) a unit stream's name says: ``RUN/<unit>/<attempt>``, or
    ``.../<attempt>-rN`` for an attempt resumed or retried as a new stream."""
    name, _, attempt = stream.removeprefix(run_id + "/").rpartition("/")
    return name, attempt.split("-r")[0]


class UnitAbandonedBody(Body, frozen=True):
    KIND: ClassVar[str] = "unit_abandoned"
    reason: str
    resumed_as: str = ""


class ProbeFinding(msgspec.Struct, frozen=True):
    """One thing the probe checked: what, whether it works, and what it saw."""

    what: str
    ok: bool
    detail: str = ""


class ProbeFinishedBody(Body, frozen=True):
    """The last event of a run's probe stream (``probe_stream``): what the probe found on
    the platform before any unit (harness/probe.py), citing the calls it made (its
    ``refs``: every earlier event of the stream). docs/ledger-format.md, "The probe stream"."""

    KIND: ClassVar[str] = "probe_finished"
    platform: str
    vocabulary: str = ""  # the declared vocabulary's name ("": none)
    findings: list[ProbeFinding] = []


# The stream of a run the probe's calls and findings are recorded in: one part after the
# run id, where a unit's stream has two (``RUN/<protocol>/<attempt>``), so it is never read
# as a unit's.
PROBE = "probe"


def probe_stream(run_id: str) -> str:
    """The name of ``run_id``'s probe stream."""
    return f"{run_id}/{PROBE}"


def is_probe_stream(stream: str) -> bool:
    """Whether ``stream`` is a run's probe stream (``RUN/probe``)."""
    return stream.partition("/")[2] == PROBE


class RunImportedBody(Body, frozen=True):
    """Appended by ``import --allow-unsealed`` to the header stream of the unsealed run it
    brought in: the run was written by another ledger. It is never resumed, joined or
    sealed here (its units would be sealed as this ledger's own), and it says so wherever
    it is exported to. ``root`` is the heads root of what was imported."""

    KIND: ClassVar[str] = "run_imported"
    bundle: str  # the bundle file's name, without its folder
    root: str
    streams: int
    events: int


class StreamHead(msgspec.Struct, frozen=True, array_like=True):
    """One Merkle leaf's data: a stream, its length and the link hash of its last event."""

    stream: str
    length: int
    head: str


class SealSignature(msgspec.Struct, frozen=True, omit_defaults=True):
    """Who sealed a run: an Ed25519 signature over the seal statement (ledger/signing.py).

    ``key`` is the public key's fingerprint, ``public_key`` its 32 raw bytes in hex; the
    statement signed is the run id, root, counts, ``signed_at`` and ``tool_version``.
    The private key is never recorded.
    """

    key: str
    public_key: str
    signature: str
    signed_at: int
    tool_version: str = ""
    algorithm: str = "ed25519"


class RunSealedBody(Body, frozen=True):
    KIND: ClassVar[str] = "run_sealed"
    root: str
    streams: int
    events: int
    heads: list[StreamHead] = []
    signature: SealSignature | None = None


class Event(msgspec.Struct, frozen=True, tag_field="kind", kw_only=True):
    """The envelope. ``kind`` is the tag; the hash is derived, never stored (see chain.py).

    ``v`` is the event format, encoded only from format 2 on (UNSET: format 1).
    """

    stream: str
    seq: int
    prev: str
    at: int
    refs: tuple[int, ...] = ()
    v: int | msgspec.UnsetType = msgspec.UNSET

    @property
    def format(self) -> int:
        """The event format this event was written in (1 or 2)."""
        return 1 if self.v is msgspec.UNSET else int(self.v)


class RunStartedEvent(Event, frozen=True, tag="run_started"):
    body: RunStartedBody


class UnitStartedEvent(Event, frozen=True, tag="unit_started"):
    body: UnitStartedBody


class EpisodeStartedEvent(Event, frozen=True, tag="episode_started"):
    body: EpisodeStartedBody


class SessionCallEvent(Event, frozen=True, tag="session_call"):
    body: SessionCallBody


class ModelCallEvent(Event, frozen=True, tag="model_call"):
    body: ModelCallBody


class ReadBackEvent(Event, frozen=True, tag="read_back"):
    body: ReadBackBody


class GraderDecisionEvent(Event, frozen=True, tag="grader_decision"):
    body: GraderDecisionBody


class EpisodeFinishedEvent(Event, frozen=True, tag="episode_finished"):
    body: EpisodeFinishedBody


class InfraErrorEvent(Event, frozen=True, tag="infra_error"):
    body: InfraErrorBody


class UnitFinishedEvent(Event, frozen=True, tag="unit_finished"):
    body: UnitFinishedBody


class UnitAbandonedEvent(Event, frozen=True, tag="unit_abandoned"):
    body: UnitAbandonedBody


class RunSealedEvent(Event, frozen=True, tag="run_sealed"):
    body: RunSealedBody


class RunImportedEvent(Event, frozen=True, tag="run_imported"):
    body: RunImportedBody


class ProbeFinishedEvent(Event, frozen=True, tag="probe_finished"):
    body: ProbeFinishedBody


AnyEvent = Union[  # noqa: UP007 - msgspec needs a runtime Union object
    RunStartedEvent,
    UnitStartedEvent,
    EpisodeStartedEvent,
    SessionCallEvent,
    ModelCallEvent,
    ReadBackEvent,
    GraderDecisionEvent,
    EpisodeFinishedEvent,
    InfraErrorEvent,
    UnitFinishedEvent,
    UnitAbandonedEvent,
    RunSealedEvent,
    RunImportedEvent,
    ProbeFinishedEvent,
]

EVENT_TYPES: tuple[type[Event], ...] = AnyEvent.__args__  # type: ignore[attr-defined]
EVENT_FOR_BODY: dict[type[Body], type[Event]] = {
    next(f.type for f in msgspec.structs.fields(t) if f.name == "body"): t for t in EVENT_TYPES
}
KINDS: tuple[str, ...] = tuple(t.__struct_config__.tag for t in EVENT_TYPES)  # type: ignore[misc]

# A stream that ends in one of these is complete; a sealed run's unit streams must (and
# its probe stream in ``probe_finished``: ``terminal``).
TERMINAL_KINDS = frozenset({"unit_finished", "unit_abandoned", "run_sealed", "probe_finished"})


def terminal(stream: str, kind: str) -> bool:
    """Whether a stream ending in ``kind`` is complete: a probe stream in ``probe_finished``,
    any other in a unit's end (or, the header, the seal)."""
    return (
        kind == "probe_finished"
        if is_probe_stream(stream)
        else (kind in TERMINAL_KINDS and kind != "probe_finished")
    )


# The kinds a redacted bundle may withhold: evidence (tool calls, model calls, read-backs),
# which event format 2 hashes over its envelope plus a digest of its body. Every other kind
# is never withheld, and hashed whole: the run's header and seal, and every kind a
# projection decides a metric from (a unit's start, decisions, errors and end; the episode
# summaries the provenance lane's M1/M2 read and its prompts pair cases by), whose
# withholding would let anyone holding a bundle take a failing unit out of a rate. An
# allow-list, so a new kind is never withheld unless it is added here (which changes what
# format 2 hashes for it: add it before any event of it is written).
WITHHOLDABLE: tuple[str, ...] = ("session_call", "model_call", "read_back")
NEVER_WITHHELD = frozenset(KINDS) - frozenset(WITHHOLDABLE)


def make_event(
    stream: str,
    seq: int,
    prev: str,
    at: int,
    body: Body,
    refs: tuple[int, ...] = (),
    v: int = EVENT_FORMAT,
) -> Event:
    """Wrap ``body`` in the envelope of its kind, in event format ``v``."""
    return EVENT_FOR_BODY[type(body)](
        stream=stream,
        seq=seq,
        prev=prev,
        at=at,
        refs=refs,
        body=body,
        v=msgspec.UNSET if v == 1 else v,
    )  # type: ignore[call-arg]
