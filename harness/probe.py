"""The probe: before a platform is measured, can it keep a memory and find it again?

On a runtime of its own (a fresh-state platform's preflight runtime, thrown away after),
under one identity, the probe speaks the platform's declared vocabulary
(harness/platforms/vocabulary.py) as a unit would: it checks the session lists the
vocabulary's tools, writes one known memory, then, in a fresh session, searches for it
with its own words (then, if that finds nothing, with one of them: a substring search
finds no phrase), itemises the answer into ranked hits (where the vocabulary says they
are) and reads their ids. Each step is one ``Finding``. A platform that declares no
vocabulary, or whose write cannot be found again even by its own words, is ``refused``:
nothing it would be measured on could mean anything (docs/plugins.md, "The probe"). It
costs a list and a write, then a list and a search or two: four or five calls. Then, on a
platform with ``LifecycleCapability``, its lifecycle checks on the probe's memory
(``_lifecycle``): the scripted agent's teach and the capture check, a promotion to a sink
the platform describes, the scripted agent's correction and the update check, each a
``Finding`` that refuses nothing but leaves the metrics needing it not measured.

Its calls are recorded as a unit's are (``harness.episode.Recorder``: each a
``session_call``, and whatever the platform records with them, such as mem0's model
calls), on the writer it is given: a run's probe stream (``events.probe_stream``), ended by
``probe_finished``, the findings citing every call (docs/ledger-format.md, "The probe
stream").
"""

from __future__ import annotations

import functools
import time
from collections.abc import Awaitable, Callable, Collection, Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple, TypeVar

import msgspec

from benchledger import protocols
from benchledger.harness.agents.base import Episode
from benchledger.harness.agents.scripted import ScriptedAgent
from benchledger.harness.episode import COUNTED, Recorder, run_episode
from benchledger.harness.errors import HarnessError, InfraError
from benchledger.harness.platforms.base import (
    CaptureCheck,
    Clock,
    LifecycleCapability,
    PlatformClient,
    PollPolicy,
    Promotion,
    ReadBack,
    Target,
    UpdateCheck,
    target_of,
)
from benchledger.harness.platforms.vocabulary import Vocabulary, vocabulary_of
from benchledger.harness.prompts import SYSTEM
from benchledger.harness.unit import SystemClock, identity_label
from benchledger.ledger.chain import genesis
from benchledger.ledger.events import (
    Body,
    HitRule,
    ProbeFinding,
    ProbeFinishedBody,
    ReadBackBody,
    SessionCallBody,
)
from benchledger.ledger.inert import inert
from benchledger.ledger.ledger import StreamWriter
from benchledger.projections import measured, retrieval
from benchledger.protocols.grading import surfaced
from benchledger.protocols.schema import Protocol

MEMORY: Final = "The probe heron Quillon nests beside the north weir of Lake Ostrava."
CORRECTION: Final = "The probe heron Quillon nests beside the south weir of Lake Ostrava."
CAPTURE_TIMEOUT_S: Final = 10.0  # how long the capture check may poll (as a unit's default)
QUERY: Final = "heron Quillon north weir"  # the memory's own words
WORD: Final = "Quillon"  # one of them, for a search matching a contiguous substring
TITLE: Final = "benchledger-probe"
K: Final = 10
IDENTITY: Final = 1  # a pool index of the probe's own runtime, thrown away after it
EPISODE: Final = "probe"  # the episode its session calls are recorded under

T = TypeVar("T")


class Finding(NamedTuple):
    """One thing the probe checked: what, whether it works, and what it saw."""

    what: str
    ok: bool
    detail: str


class ProbeReport(NamedTuple):
    """What the probe found on one platform."""

    platform: str
    vocabulary: str  # the declared vocabulary's name ("": none)
    findings: tuple[Finding, ...]

    @property
    def refused(self) -> str:
        """Why the platform cannot be measured ("": it can): no vocabulary, or its memory
        was not found again by its own words."""
        failed = {f.what: f.detail for f in self.findings if not f.ok}
        for what in ("vocabulary", "tools", "write", "search"):
            if what in failed:
                return failed[what]
        return ""

    def body(self) -> ProbeFinishedBody:
        """The findings as the probe stream's last event."""
        return ProbeFinishedBody(platform=self.platform, vocabulary=self.vocabulary,
                                 findings=[ProbeFinding(*f) for f in self.findings])  # fmt: skip

    @classmethod
    def of(cls, body: ProbeFinishedBody) -> ProbeReport:
        """The report a ``probe_finished`` recorded."""
        found = tuple(Finding(f.what, f.ok, f.detail) for f in body.findings)
        return cls(body.platform, body.vocabulary, found)

    def record(self) -> dict[str, Any]:
        """The findings as JSON (the run record's ``probe``)."""
        return {"vocabulary": self.vocabulary,
                "findings": [f._asdict() for f in self.findings]}  # fmt: skip

    def lines(self) -> list[str]:
        """One line per finding, for ``platform check`` (every outside string inert); a
        failed one that refuses nothing says what a run on it would not measure."""
        out = []
        for f in self.findings:
            out.append(f"{'ok  ' if f.ok else 'FAIL'} {f.what}: {inert(f.detail)}")
            if not f.ok and (names := measured.affected(f.what)):
                out.append(f"     so a run on it does not measure {names}")
        return out


def not_probed(platform: str, client: PlatformClient) -> ProbeReport:
    """The report of a platform shared by every pass: not probed, since its memory would
    keep what the probe wrote (its vocabulary recorded all the same)."""
    vocab = vocabulary_of(client)
    why = "not probed: a platform shared by every pass would keep the probe's memory"
    return ProbeReport(platform, vocab.name if vocab else "", (Finding("probe", False, why),))


class Probed(NamedTuple):
    """A probed platform's vocabulary and findings, as a new run records them."""

    vocabulary: Vocabulary | None
    report: ProbeReport

    def recorded(self) -> dict[str, Any]:
        """The run record's ``vocabulary`` and ``probe`` fields."""
        said = self.vocabulary.record() if self.vocabulary is not None else {}
        return {"vocabulary": said, "probe": self.report.record()}


def scratch() -> StreamWriter:
    """A writer nothing is committed from: ``platform check``'s, which records no run."""
    return StreamWriter("check/probe", 0, genesis("check/probe"), time.time_ns)


async def probe(
    client: PlatformClient,
    platform: str,
    writer: StreamWriter | None = None,
    *,
    sinks: Collection[str] = (),
    clock: Clock | None = None,
) -> ProbeReport:
    """Probe ``client`` (module docstring), its calls and then its findings staged on
    ``writer`` (a run's probe stream; none: a scratch one); ``sinks``: the sinks the
    platform describes (``Description.sinks``), where a promotion is asked to land;
    ``clock``: the lifecycle checks' (a replay's virtual one). InfraError in the probe's
    own calls propagates (the platform broke)."""
    w = writer or scratch()
    found = await _probe(client, platform, Recorder(w, EPISODE), sinks, clock or SystemClock())
    w.append(found.body(), refs=range(w.next_seq))  # the findings cite every call
    return found


class Said(NamedTuple):
    """The parts of a vocabulary the findings are judged by: live, the client's; re-derived,
    the run record's (``Vocabulary.record``)."""

    name: str
    write: str
    search: str
    hits: HitRule

    @classmethod
    def of(cls, vocab: Vocabulary) -> Said:
        return cls(vocab.name, vocab.write_tool, vocab.search_tool, vocab.hits)

    @classmethod
    def recorded(cls, said: Mapping[str, Any]) -> Said | None:
        """The vocabulary a run record keeps (None: it keeps none)."""
        if not said:
            return None
        hits = msgspec.convert(said.get("hits") or {}, HitRule)
        return cls(str(said.get("name", "")), str(said.get("write", "")),
                   str(said.get("search", "")), hits)  # fmt: skip


class Answer(NamedTuple):
    """A tool's answer as the findings read it (``CallResult``, or a recorded call)."""

    is_error: bool
    text: str


class Seen(NamedTuple):
    """What the probe's calls answered, in order: the tools the first session listed
    (None: not listed), the write's answer, and each search's query and answer."""

    listed: frozenset[str] | None = None
    wrote: Answer | None = None
    searches: tuple[tuple[str, Answer], ...] = ()


def _rank(said: Said, answer: Answer) -> tuple[list[tuple[str, str]], int | None]:
    """The answer itemised into hits (where ``said.hits`` says), and the probe memory's rank."""
    hits = [] if answer.is_error else retrieval.items(answer.text, said.hits)
    return hits, retrieval.rank([text for _, text in hits], lambda hit: surfaced(MEMORY, hit))


def next_query(said: Said, searches: Sequence[tuple[str, Answer]]) -> str | None:
    """The next search's query (None: searched enough): the memory's own words, then, if
    that found nothing, one of them (pure: the live probe asks it, re-derivation reads the
    queries it asked)."""
    if any(a.is_error or _rank(said, a)[1] is not None for _, a in searches):
        return None
    left = (QUERY, WORD)[len(searches) :]
    return left[0] if left else None


def findings_of(platform: str, said: Said | None, seen: Seen) -> tuple[Finding, ...]:
    """The findings of what the probe's calls answered (pure: the live probe and
    re-derivation, which reads ``seen`` from the recorded calls, both decide by it)."""
    if said is None:
        why = (f"{platform} declares no memory vocabulary (its client's `vocabulary`, "
               "docs/plugins.md), so nothing can be written to it or searched on it")  # fmt: skip
        return (Finding("vocabulary", False, why),)
    found = [Finding("vocabulary", True, said.name)]
    listed = seen.listed or frozenset()
    missing = sorted({said.write, said.search} - listed)
    if missing:
        why = (f"the session does not list the vocabulary's {', '.join(missing)} "
               f"(it lists {', '.join(sorted(listed)) or 'no tool'})")  # fmt: skip
        return (*found, Finding("tools", False, why))
    found.append(Finding("tools", True, f"{said.write}, {said.search} listed"))
    wrote = seen.wrote or Answer(True, "(no answer recorded)")
    if wrote.is_error:
        why = f"{said.write} answered an error: {wrote.text[:200]}"
        return (*found, Finding("write", False, why))
    found.append(Finding("write", True, f"{said.write} stored the probe memory"))
    rule = said.hits
    where = (
        f"at {rule.path!r}"
        if rule.path
        else ("by its patterns" if rule.line or rule.separator else "by the generic rule")
    )
    query, answer = seen.searches[-1] if seen.searches else (QUERY, Answer(True, "(none made)"))
    hits, rank = _rank(said, answer)
    asked = f"{said.search} {query!r}"
    if answer.is_error:
        why = f"{asked} answered an error: {answer.text[:200]}"
    elif rank is None:
        why = (f"{said.search} for the memory's own words ({QUERY!r}, then {WORD!r}) returned "
               f"{len(hits)} hits ({where}) and none holds the memory just written")  # fmt: skip
    else:
        only = f" (nothing for {QUERY!r})" if query == WORD else ""
        why = f"{asked} found it at rank {rank} of {len(hits)} hits ({where}){only}"
    found.append(Finding("search", rank is not None, why))
    if rank is not None:
        ident = hits[rank - 1][0]
        named = f"{rule.id_field!r} field" if rule.id_field else "id (its id pattern)"
        found.append(Finding(measured.HIT_IDS, bool(ident), f"its hit's id is {ident}" if ident
                             else f"its hit has no {named}"))  # fmt: skip
    return tuple(found)


def seen_in(said: Said, calls: Iterable[Body]) -> Seen:
    """What the recorded probe calls answered (``findings_of``'s input, from a probe stream's
    ``session_call`` bodies of the probe's own episode)."""
    listed: frozenset[str] | None = None
    wrote: Answer | None = None
    searches: list[tuple[str, Answer]] = []
    for body in calls:
        if not isinstance(body, SessionCallBody) or body.episode != EPISODE:
            continue
        if body.method == "tools/list" and listed is None:
            tools = body.result.get("tools") if isinstance(body.result, dict) else body.result
            listed = frozenset(str(t) for t in tools) if isinstance(tools, list) else frozenset()
        elif body.method == "tools/call" and body.tool == said.write and wrote is None:
            wrote = Answer(body.is_error, body.text())
        elif body.method == "tools/call" and body.tool == said.search and wrote is not None:
            query = next_query(said, searches)
            if query is not None:
                searches.append((query, Answer(body.is_error, body.text())))
    return Seen(listed, wrote, tuple(searches))


async def _probe(
    client: PlatformClient, platform: str, rec: Recorder, sinks: Collection[str], clock: Clock
) -> ProbeReport:
    vocab = vocabulary_of(client)
    if vocab is None:
        return ProbeReport(platform, "", findings_of(platform, None, Seen()))
    said = Said.of(vocab)
    seen = await _calls(client, vocab, said, rec)
    found = findings_of(platform, said, seen)
    if any(not f.ok for f in found if f.what != measured.HIT_IDS):
        return ProbeReport(platform, vocab.name, found)  # refused: nothing more to check
    more = await _lifecycle(client, rec.writer, sinks, clock)
    return ProbeReport(platform, vocab.name, (*found, *more))


async def _calls(client: PlatformClient, vocab: Vocabulary, said: Said, rec: Recorder) -> Seen:
    """The probe's calls (module docstring), stopping where ``findings_of`` would refuse."""
    async with client.session(IDENTITY, rec) as session:
        listed = frozenset(str(t.get("name", "")) for t in await session.list_tools())
        if {said.write, said.search} - listed:
            return Seen(listed)
        call = vocab.write_call("probe-1", MEMORY, TITLE)
        got = await session.call_tool(call.name, call.arguments)
        wrote = Answer(got.is_error, got.text)
        if wrote.is_error:
            return Seen(listed, wrote)
    searches: list[tuple[str, Answer]] = []
    async with client.session(IDENTITY, rec) as session:
        await session.list_tools()
        while (query := next_query(said, searches)) is not None:
            call = vocab.search_call(f"probe-{len(searches) + 2}", query, K)
            got = await session.call_tool(call.name, call.arguments)
            searches.append((query, Answer(got.is_error, got.text)))
    return Seen(listed, wrote, tuple(searches))


class ProbeRecorder:
    """The ``UnitRecorder`` the lifecycle checks record their reads through: each a
    ``read_back`` on the probe stream, made once (a failure is the probe's finding, never
    retried), on ``clock``."""

    def __init__(self, writer: StreamWriter, clock: Clock) -> None:
        self.writer = writer
        self.clock = clock

    async def read(
        self,
        purpose: str,
        action: Callable[[], Awaitable[ReadBack]],
        observe: Callable[[ReadBack], Any],
    ) -> tuple[Any, int | None]:
        got = await action()
        seen = observe(got)
        body = ReadBackBody(stage=purpose, method=got.method, path=got.path, status=got.status,
                            body=got.body, latency_ms=round(got.latency_ms, 3), purpose=purpose,
                            observed=seen)  # fmt: skip
        return seen, self.writer.append(body, refs=range(self.writer.next_seq)[-1:])

    def observer(self, purpose: str) -> Recorder:
        return Recorder(self.writer, purpose)

    async def retrying(self, purpose: str, action: Callable[[], Awaitable[T]]) -> T:
        return await action()


@functools.cache
def _committed() -> tuple[Protocol, ...]:
    return protocols.load(protocols.LIFECYCLE_DIR).protocols


def lifecycle_protocol(sinks: Collection[str]) -> Protocol:
    """The protocol the probe's lifecycle checks run: the probe memory, and its correction,
    on a committed protocol's entity, promoting to a sink the platform describes where one
    fits (pure but for reading the committed set once)."""
    found = _committed()
    fixes = next(p for p in found if p.update is not None)
    lands = next((p for p in found if p.promotes and p.sink in sinks), fixes)
    assert fixes.update is not None
    update = msgspec.structs.replace(fixes.update, fact=CORRECTION)
    return msgspec.structs.replace(lands, id=TITLE, fact=MEMORY, update=update)


async def _lifecycle(
    client: PlatformClient, w: StreamWriter, sinks: Collection[str], clock: Clock
) -> tuple[Finding, ...]:
    """The lifecycle checks on the probe's memory (docs/plugins.md, "The probe"): the
    scripted agent teaches it as a capture (as a lifecycle unit's teach does, entity-linked,
    in the platform's vocabulary), the capture check must return its id, a promotion to a
    sink the platform describes must land, and after the scripted agent's correction the
    update check must find it landed, in the documented shape. Without
    ``LifecycleCapability`` the platform has no such check: each is a failed finding, so
    the metrics needing one are not measured (projections/measured.py)."""
    if not isinstance(client, LifecycleCapability):
        why = "the platform offers no {} check: its adapter does not implement LifecycleCapability"
        return tuple(Finding(what, False, why.format(what))
                     for what in (measured.CAPTURE, measured.UPDATE, measured.PROMOTE))  # fmt: skip
    p = lifecycle_protocol(sinks)
    tgt = target_of(p)
    ev = ProbeRecorder(w, clock)
    who = identity_label(client, IDENTITY)

    async def episode(stage: str, prompt: str) -> None:
        ep = Episode(stage, SYSTEM[stage], prompt, p, p.budget_tool_calls)
        await run_episode(ScriptedAgent(), client, w, ep, IDENTITY, who, tools=COUNTED)

    try:
        since = clock.time()
        await episode("teach", p.teach.prompt)
        got = await client.check_capture(ev, identity=IDENTITY, target=tgt, since=since,
                                         poll=PollPolicy(CAPTURE_TIMEOUT_S))  # fmt: skip
    except Exception as exc:
        return _unchecked(f"the capture check failed: {_failure(exc)}")
    if not isinstance(got, CaptureCheck) or not isinstance(got.found, str) or not got.found:
        found = got.found if isinstance(got, CaptureCheck) else got
        why = (f"after the scripted agent's teach, the capture check returned {found!r}, not "
               f"the capture's id ({getattr(got, 'reason', '')})")  # fmt: skip
        return (Finding(measured.CAPTURE, False, why),
                *_unchecked("its capture check found no capture", measured.CAPTURE))  # fmt: skip
    out = [Finding(measured.CAPTURE, True, f"the capture check returned its id {got.found}")]
    out.append(await _promoted(client, ev, got.found, tgt, sinks))
    try:
        since = clock.time()
        await episode("update", p.update.prompt if p.update else "")
        upd = await client.check_update(ev, identity=IDENTITY, original=got.found, target=tgt,
                                        since=since)  # fmt: skip
    except Exception as exc:
        why = f"the update check failed: {_failure(exc)}"
        return (*out, Finding(measured.UPDATE, False, why))
    out.append(Finding(measured.UPDATE, *_update_shape(upd)))
    return tuple(out)


async def _promoted(
    client: LifecycleCapability, ev: ProbeRecorder, capture: str, tgt: Target,
    sinks: Collection[str],
) -> Finding:  # fmt: skip
    """The promotion finding: the capture promoted to the target's sink lands there."""
    if tgt.sink not in sinks:
        why = f"not asked: the platform describes no sink a promotion could land in ({tgt.sink})"
        return Finding(measured.PROMOTE, True, why)
    try:
        done = await client.promote(ev, capture=capture, target=tgt)
    except Exception as exc:
        return Finding(measured.PROMOTE, False, f"the promotion failed: {_failure(exc)}")
    if not isinstance(done, Promotion) or done.ok is not True:
        why = getattr(done, "reason", repr(done))
        return Finding(measured.PROMOTE, False, f"a promotion to {tgt.sink} did not land: {why}")
    return Finding(measured.PROMOTE, True, f"a promotion to {tgt.sink} landed: {done.reason}")


def _failure(exc: Exception) -> str:
    """What a lifecycle check that raised says in its finding: an infrastructure failure as
    it is, an adapter's bug by its type (a finding, never a traceback that ends the run).
    Anything else of the harness's (a replay's divergence) is raised on."""
    if isinstance(exc, HarnessError) and not isinstance(exc, InfraError):
        raise exc
    return str(exc) if isinstance(exc, InfraError) else f"{type(exc).__name__}: {exc}"


def _update_shape(upd: Any) -> tuple[bool, str]:
    """(ok, what it saw) of an update check of a real correction: an ``UpdateCheck`` whose
    ``landed`` is the correction's id and ``original_status`` a status or None."""
    if not isinstance(upd, UpdateCheck):
        return False, f"the update check returned a {type(upd).__name__}, not an UpdateCheck"
    if upd.original_status is not None and not isinstance(upd.original_status, str):
        return False, f"its original_status is {upd.original_status!r}, not a status or None"
    if not isinstance(upd.landed, str) or not upd.landed:
        return False, (f"after the scripted agent's correction, landed is {upd.landed!r}, not "
                       f"the correction's id ({upd.landed_reason})")  # fmt: skip
    status = upd.original_status or "no status"
    return True, f"the correction landed as {upd.landed} (the original: {status})"


def _unchecked(why: str, *skip: str) -> tuple[Finding, ...]:
    """The lifecycle findings not checked, and why (those in ``skip`` excepted)."""
    return tuple(Finding(what, False, f"not checked: {why}")
                 for what in (measured.CAPTURE, measured.UPDATE, measured.PROMOTE)
                 if what not in skip)  # fmt: skip
