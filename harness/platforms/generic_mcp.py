"""Any MCP memory server, driven by its mapping (``--platform mcp:FILE``; mcp_mapping.py).

The lifecycle maps onto a mapped server like this (docs/platforms.md, "Any MCP memory
server"):

- servers are long-lived stdio processes, one per data folder, started on first use and
  stopped with the runtime (or one server at ``server.url``, reached over streamable
  HTTP); calls to one server go one at a time (a store may read-modify-write its files).
  Pool identity N is ``bench-agent-NNN``: with ``separate = "process"`` a server (and
  data folder) of its own; with ``separate = "argument"`` one pool server, the identity
  put into the mapping's argument of the mapping's tools (and hidden from the tools'
  schemas, as a handle is);
- shared knowledge (``[shared]``) is one more server with its own data folder, or an
  identity of the pool server (``separate = "argument"``); a pool session's reads (the
  search and read-back tools) are answered by its own server and the shared one, the
  answer being ``[own, shared]`` (each parsed JSON or text), and the reviewer's session
  is the shared knowledge's. Without ``[shared]`` promotion (and the transfer after it)
  is not applicable, said with the reason;
- capture = the identity's read-back holds a memory with the fact; promote = the harness
  reads the capture back, writes its text to the shared server with the mapping's write
  call and reads the shared server back (the datahub sink; a knowledge page cannot land:
  not applicable); update = a memory with the correction, the original gone or not
  (a duplicate); a capture's id is ``bench-agent-NNN#<the memory's id>``.

Every call the adapter makes on the runner's behalf is recorded through the unit's
observer (``tools/call``), with the arguments as the mapping made them (before the
identity is put in), so replay serves them from the log (replay/log_generic_mcp.py).
"""

from __future__ import annotations

import asyncio
import difflib
import json
import os
import re
import shutil
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from typing import Any, Final, TextIO

import blake3
import httpx2
import msgspec

from benchledger.harness.errors import InfraError, PlatformStartFailed
from benchledger.harness.platforms.base import (
    STAGES,
    CallResult,
    CaptureCheck,
    Description,
    Observer,
    PlatformClient,
    PollPolicy,
    Promotion,
    ReadBack,
    RefCheck,
    Target,
    UnitRecorder,
    UpdateCheck,
    declare_not_applicable,
)
from benchledger.harness.platforms.generic_install import command
from benchledger.harness.platforms.http import TRANSPORT as HTTP_TRANSPORT
from benchledger.harness.platforms.http import ListedToolsSession, streams, translate
from benchledger.harness.platforms.mcp_mapping import McpMapping, fill
from benchledger.harness.platforms.platform import PlatformSpec, Provisioner
from benchledger.harness.platforms.session import ObservedSession, notify, observed
from benchledger.harness.platforms.stdio import SerialServer, open_session
from benchledger.harness.scrub import scrubber
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.events import PlatformRecord
from benchledger.projections.retrieval import NoSuchPath
from benchledger.protocols.grading import surfaced

SHARED: Final = "shared"
POOL: Final = "pool"
SINKS: Final = ("datahub",)
NO_PAGES: Final = (
    "a mapped MCP server keeps memories, not knowledge pages; only the datahub sink (the "
    "shared server) exists, so this protocol's promotion, and the transfer after it, "
    "cannot run"
)
NO_SHARED: Final = (
    "the mapping names no shared knowledge ([shared]), so nothing can be promoted nor "
    "transferred to another identity"
)
NO_CORRECTION: Final = "the mapping names no correction ([correction])"
NO_CHANGESETS: Final = (
    "a mapped MCP server keeps no changesets; the shared server read back after the copy "
    "is the whole record of a promotion"
)
_CAPTURE_ID = re.compile(r"^(?P<who>bench-agent-\d{3,})#(?P<id>.+)$")


def identity_name(pool_index: int) -> str:
    """Pool index N's identity: ``bench-agent-NNN``."""
    return f"bench-agent-{pool_index:03d}"


def merged(own: CallResult, shared: CallResult) -> tuple[str, Any]:
    """Two servers' answers to one read as one: ``[own, shared]``, each its text parsed as
    JSON, else the text (what an agent reads, not a structured wrapper of it)."""
    both = [_parsed(own.text), _parsed(shared.text)]
    return json.dumps(both, indent=1, ensure_ascii=False), both


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return text


class MappedSession:
    """A session as one identity (or the reviewer: ``shared`` is None, ``who`` the shared
    server): calls recorded, the identity put in, reads of a pool identity fanned out."""

    def __init__(
        self, mapping: McpMapping, own: SerialServer, shared: SerialServer | None,
        observer: Observer | None, email: str, inject: str = "", shared_inject: str = "",
    ) -> None:  # fmt: skip
        self.mapping = mapping
        self._own = own
        self._shared = shared
        self._observer = observer
        self._inject = inject
        self._shared_inject = shared_inject
        self.email = email

    def wire(
        self, name: str, arguments: dict[str, Any], inject: str | None = None
    ) -> dict[str, Any]:
        """The arguments as sent: the identity (``inject``, else the session's) put in where
        the mapping says."""
        who = self._inject if inject is None else inject
        if who and name in self.mapping.argument_tools:
            return {**arguments, self.mapping.argument: who}
        return arguments

    async def list_tools(self) -> list[dict[str, Any]]:
        """The server's tools the mapping exposes (the identity's argument hidden), recorded."""
        start = time.perf_counter()
        tools = [t for t in await self._own.list_tools() if t["name"] in self.mapping.exposed]
        arg = self.mapping.argument
        for t in tools:
            if self._inject and t["name"] in self.mapping.argument_tools:
                schema = dict(t["input_schema"])
                props = {k: v for k, v in (schema.get("properties") or {}).items() if k != arg}
                schema["properties"] = props
                if isinstance(schema.get("required"), list):
                    schema["required"] = [r for r in schema["required"] if r != arg]
                t["input_schema"] = schema
        ms = (time.perf_counter() - start) * 1000
        notify(self._observer, "tools/list", result={"tools": [t["name"] for t in tools]},
               latency_ms=ms)  # fmt: skip
        return tools

    async def _refusal(self, name: str, arguments: dict[str, Any]) -> str:
        """Why this identity may not make this call ("" when it may): a tool the mapping
        does not expose, or a checked tool naming a memory that is not the caller's."""
        if name not in self.mapping.exposed:
            return f"unknown tool {name}: this platform's mapping does not expose it"
        if name not in self.mapping.checked_tools or not self._inject:
            return ""
        key = self.mapping.id_argument
        allowed = set(self.mapping.correction.arguments) if self.mapping.correction else set()
        extra = sorted(set(arguments) - allowed)
        if extra:
            return f"{name} takes only {', '.join(sorted(allowed))} here, not {', '.join(extra)}"
        named = arguments.get(key)
        if not isinstance(named, str) or not named:
            return f"{name} must name one memory by {key}"
        # The caller's own memories, as its read-back lists them (unrecorded: a guard).
        args = self.mapping.fill_readback(fact="", entity="")
        got = await self._own.call(self.mapping.readback.tool, self.wire(
            self.mapping.readback.tool, args))  # fmt: skip
        own = {i for i, _ in self.mapping.memories(got.text)} if not got.is_error else set()
        return "" if named in own else f"no memory {named[:80]} among this identity's"

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """One call on the own server, or a read of both merged; recorded either way. A call
        the identity may not make (``_refusal``) is answered as an error, never forwarded."""
        start = time.perf_counter()
        refused = await self._refusal(name, arguments)
        if refused:
            ms = (time.perf_counter() - start) * 1000
            content = ({"type": "text", "text": refused},)
            notify(self._observer, "tools/call", name, arguments, is_error=True,
                   latency_ms=ms, content=content)  # fmt: skip
            return CallResult(refused, True, None, ms, content)
        mine = await self._own.call(name, self.wire(name, arguments))
        got = mine
        if self._shared is not None and name in self.mapping.read_tools:
            theirs = await self._shared.call(name, self.wire(name, arguments, self._shared_inject))
            if mine.is_error or theirs.is_error:
                got = mine if mine.is_error else theirs
            else:
                text, data = merged(mine, theirs)
                got = CallResult(text, False, data, 0.0, ({"type": "text", "text": text},))
        ms = (time.perf_counter() - start) * 1000
        got = CallResult(got.text, got.is_error, got.data, ms, got.content)
        notify(self._observer, "tools/call", name, arguments, is_error=got.is_error,
               latency_ms=ms, content=got.content,
               structured=got.data if isinstance(got.data, dict) else None)  # fmt: skip
        return got


class GenericMcp:
    """The lifecycle on a mapped MCP server (see the module docstring), in one folder.

    Build it with ``GenericMcp.running(...)``, which stops the servers it started on exit.
    """

    def __init__(
        self, mapping: McpMapping, argv: Sequence[str], env: dict[str, str], folder: str, *,
        pool_size: int, stack: AsyncExitStack | None = None, errlog: TextIO | None = None,
    ) -> None:  # fmt: skip
        self.mapping = mapping
        self.argv = tuple(argv)
        self.env = env
        self.folder = folder
        self.pool_size = pool_size
        self._stack = stack
        self._errlog = errlog
        self._servers: dict[str, SerialServer] = {}
        self._scrub = scrubber(*(env[k] for k in mapping.secrets if env.get(k)))
        self._starting: dict[str, asyncio.Lock] = {}
        self._identities: dict[int, asyncio.Lock] = {}
        # Its memory verbs are its mapping's (docs/plugins.md, "The vocabulary").
        self.vocabulary = mapping.vocabulary()

    @classmethod
    @asynccontextmanager
    async def running(
        cls, mapping: McpMapping, argv: Sequence[str], env: dict[str, str], folder: str, *,
        pool_size: int,
    ) -> AsyncIterator[GenericMcp]:  # fmt: skip
        """The adapter on ``folder`` (absolute); every server it started stops on exit."""
        folder = os.path.abspath(folder)
        errpath = os.path.join(folder, "server.stderr")
        with open(errpath, "a", encoding="utf-8") as errlog:
            async with AsyncExitStack() as stack:
                yield cls(mapping, argv, env, folder, pool_size=pool_size, stack=stack,
                          errlog=errlog)  # fmt: skip

    def email(self, pool_index: int) -> str:
        """Pool index N is the identity ``bench-agent-NNN``."""
        return identity_name(pool_index)

    def _key(self, who: int | None) -> str:
        """Which server serves identity ``who`` (None: the shared knowledge)."""
        if who is None:
            return SHARED if self.mapping.shared_separate == "process" else POOL
        return POOL if self.mapping.separate == "argument" else identity_name(who)

    def _inject(self, who: int | None) -> str:
        """The identity put into the calls of ``who`` (None: the shared knowledge's)."""
        if who is None:
            return self.mapping.shared_identity
        return identity_name(who) if self.mapping.separate == "argument" else ""

    async def _server(self, key: str) -> SerialServer:
        """The server of data folder ``key``, started on first use."""
        lock = self._starting.setdefault(key, asyncio.Lock())
        async with lock:
            if key not in self._servers:
                self._servers[key] = await self._start(key)
            return self._servers[key]

    async def _start(self, key: str) -> SerialServer:
        """Start a server in a task of its own: the SDK's session must close in the task
        that opened it, and a server outlives the unit that first needed it."""
        assert self._stack is not None and self._errlog is not None
        data = os.path.join(self.folder, key)
        os.makedirs(data, exist_ok=True)
        argv = [fill(a, data=data) for a in self.argv]
        env = {k: fill(v, data=data) for k, v in self.env.items()}
        label = f"{self.mapping.name} ({key})"
        ready: asyncio.Future[SerialServer] = asyncio.get_running_loop().create_future()
        stop = asyncio.Event()
        errlog = self._errlog

        async def serve() -> None:
            try:
                async with self._open(argv, env, errlog, label) as session:
                    ready.set_result(SerialServer(session, label))
                    await stop.wait()
            except BaseException as exc:
                if not ready.done():
                    ready.set_exception(exc)
                elif not isinstance(exc, asyncio.CancelledError):
                    raise

        task = asyncio.get_running_loop().create_task(serve())

        async def halt() -> None:
            stop.set()
            await asyncio.gather(task, return_exceptions=True)

        self._stack.push_async_callback(halt)
        return await ready

    def _open(
        self, argv: list[str], env: dict[str, str], errlog: TextIO, label: str
    ) -> AbstractAsyncContextManager[ObservedSession]:
        """An unrecorded session with one server: started over stdio, or reached at the URL."""
        if not self.mapping.url:
            return open_session(argv, env=env, errlog=errlog, label=label, scrub=self._scrub)
        http = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0))
        return observed(
            streams(self.mapping.url, http),
            ListedToolsSession,
            lambda client: ObservedSession(client, None, fail=translate),
            transport=HTTP_TRANSPORT,
            fail=translate,
            opening=f"opening an MCP session with {label} at {self.mapping.url}",
            during=f"the MCP session with {label}",
            scrub=self._scrub,
        )

    @asynccontextmanager
    async def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[MappedSession]:
        """A pool identity's session (own server, plus the shared one for reads), or the
        reviewer's (None: the shared server, or the pool's first identity without one)."""
        if pool_index is None:
            who = None if self.mapping.shared else 0
            own = await self._server(self._key(who))
            yield MappedSession(self.mapping, own, None, observer, f"reviewer ({own.label})",
                                self._inject(who))  # fmt: skip
            return
        lock = self._identities.setdefault(pool_index, asyncio.Lock())
        async with lock:
            own = await self._server(self._key(pool_index))
            shared = await self._server(self._key(None)) if self.mapping.shared else None
            yield MappedSession(self.mapping, own, shared, observer, self.email(pool_index),
                                self._inject(pool_index), self._inject(None))  # fmt: skip

    async def describe(self) -> Description:
        """What the server says it is. The mapping must fit it (UnusableInput naming the key,
        exit 2): every tool it names listed, and its read-back answered where ``readback.path``
        says (read on a fresh identity, whose store is empty)."""
        server = await self._server(self._key(1))
        listed = {t["name"] for t in await server.list_tools()}
        m = self.mapping
        named = [("write.tool", m.write.tool), ("search.tool", m.search.tool),
                 ("readback.tool", m.readback.tool),
                 *([("correction.tool", m.correction.tool)] if m.correction else []),
                 *(("expose", t) for t in sorted(m.expose))]  # fmt: skip
        for key, tool in named:
            if tool not in listed:
                near = difflib.get_close_matches(tool, sorted(listed), n=1)
                hint = f" (did you mean {near[0]}?)" if near else ""
                raise UnusableInput(m.path, f"{key}: the server lists no tool {tool[:60]!r}"
                                            f"{hint}; it lists {len(listed)} tools")  # fmt: skip
        if m.items_at:
            args = m.fill_readback(fact="", entity="")
            got = await server.call(m.readback.tool, self.wire_as(1, m.readback.tool, args))
            try:
                m.memories(got.text if not got.is_error else "", strict=True)
            except NoSuchPath as exc:
                raise UnusableInput(m.path, f"readback.path: {exc}") from None
        said = server.session.server
        return Description(
            name=said.get("name") or self.mapping.name,
            version=said.get("version", "") or self.mapping.version,
            stages=STAGES,
            sinks=SINKS if self.mapping.shared else (),
        )

    # -- reads, recorded ---------------------------------------------------------------------

    async def _call(
        self, who: int | None, rec: Observer, tool: str, args: dict[str, Any]
    ) -> CallResult:
        """One recorded call on identity ``who``'s own server (None: the shared one)."""
        own = await self._server(self._key(who))
        inject = self._inject(who)
        session = MappedSession(self.mapping, own, None, rec, self._where(who), inject)
        return await session.call_tool(tool, args)

    def _where(self, who: int | None) -> str:
        return SHARED if who is None else self.email(who)

    async def _read(
        self, who: int | None, rec: Observer, tool: str, args: dict[str, Any]
    ) -> ReadBack:
        start = time.perf_counter()
        got = await self._call(who, rec, tool, args)
        ms = (time.perf_counter() - start) * 1000
        return ReadBack("MCP", f"tools/call {tool} @ {self._where(who)}",
                        422 if got.is_error else 200, {"text": got.text}, ms)  # fmt: skip

    def _readback(self, who: int | None, rec: Observer, fact: str, entity: str) -> Any:
        args = self.mapping.fill_readback(fact=fact, entity=entity)
        return lambda: self._read(who, rec, self.mapping.readback.tool, args)

    def wire_as(self, who: int | None, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """``args`` as identity ``who``'s call of ``tool`` sends them (its identity put in)."""
        inject = self._inject(who)
        if inject and tool in self.mapping.argument_tools:
            return {**args, self.mapping.argument: inject}
        return args

    def _held(self, rb: ReadBack, fact: str) -> list[tuple[str, str]]:
        """The memories of a read-back holding ``fact`` (any, for ""), in the answer's
        order; a read-back without ``readback.path`` fails the step, never reads as empty."""
        text = str(rb.body.get("text", "")) if rb.status == 200 else ""
        try:
            found = self.mapping.memories(text, strict=True)
        except NoSuchPath as exc:
            raise InfraError("refused", f"{self.mapping.path}: readback.path: {exc}",
                             retryable=False) from None  # fmt: skip
        if self.mapping.keyed:
            # A correction replaces by key, keeping the id: a memory is its key and its
            # text, so the correction is a memory of its own and the original can be gone.
            found = [(f"{i}~{blake3.blake3(s.encode()).hexdigest()[:12]}", s) for i, s in found]
        return [(i, s) for i, s in found if not fact or surfaced(fact, s)]

    async def _captures(
        self, ev: UnitRecorder, stage: str, rec: Observer, identity: int, target: Target, fact: str
    ) -> tuple[list[str], int | None]:
        who = self.email(identity)

        def observe(rb: ReadBack) -> dict[str, Any]:
            ids = [f"{who}#{i}" for i, _ in self._held(rb, fact)]
            return {"ids": ids, "statuses": dict.fromkeys(ids, "pending")}

        entity = _entity(target.entity_urn)
        seen, seq = await ev.read(stage, self._readback(identity, rec, fact, entity), observe)
        return seen["ids"], seq

    # -- the lifecycle steps (LifecycleCapability) -------------------------------------------

    async def check_capture(
        self, ev: UnitRecorder, *, identity: int, target: Target, since: float, poll: PollPolicy
    ) -> CaptureCheck:
        """One read-back of the teacher's memories: a memory holding the fact (no polling:
        a write is answered when it is stored)."""
        rec = ev.observer("capture")
        ids, seq = await self._captures(ev, "capture", rec, identity, target, target.fact)
        refs = [*rec.seqs, *([seq] if seq is not None else [])]
        if ids:
            return CaptureCheck(ids[0], f"memory {ids[0]} found", refs)
        return CaptureCheck(None, "no memory with the fact in the teacher's read-back", refs)

    async def promote(self, ev: UnitRecorder, *, capture: str, target: Target) -> Promotion:
        """The harness as reviewer: read the capture back, write its text to the shared
        server, and read the shared server back."""
        refs: list[int] = []

        def note(seq: int | None) -> None:
            refs.extend([seq] if seq is not None else [])

        if not self.mapping.shared or target.sink not in SINKS:
            why = NO_SHARED if not self.mapping.shared else NO_PAGES
            note(await declare_not_applicable(ev, self.mapping.name, "promote", why))
            return Promotion(False, f"not applicable: {why}", refs)
        m = _CAPTURE_ID.match(capture)
        if m is None:
            raise ValueError(f"{capture!r} is not a capture id of this adapter")
        teacher = int(m["who"].rpartition("-")[2])
        rec = ev.observer("promote")
        entity = _entity(target.entity_urn)

        def done(ok: bool, reason: str) -> Promotion:
            return Promotion(ok, reason, sorted([*rec.seqs, *refs]))

        def reviewed(rb: ReadBack) -> dict[str, Any]:
            held = [s for i, s in self._held(rb, "") if i == m["id"]]
            return {"approved": bool(held), "text": held[0] if held else ""}

        approved, seq = await ev.read(
            "approve", self._readback(teacher, rec, target.fact, entity), reviewed
        )
        note(seq)
        if not approved["approved"]:
            return done(False, f"{capture} is no longer in the teacher's memories")
        text = approved["text"]
        args = fill(self.mapping.write.arguments, fact=text, title=entity, entity=entity)

        async def copy() -> ReadBack:
            return await self._read(None, rec, self.mapping.write.tool, args)

        applied, seq = await ev.read(
            "apply", copy,
            lambda rb: {"ok": rb.status == 200, "message": str(rb.body.get("text", ""))[:200]},
        )  # fmt: skip
        note(seq)
        if not applied["ok"]:
            return done(False, f"apply failed: {applied['message']}")
        held, seq = await ev.read(
            "insight_status", self._readback(None, rec, text, entity),
            lambda rb: {"status": "applied" if self._held(rb, text) else None},
        )  # fmt: skip
        note(seq)
        note(await declare_not_applicable(ev, self.mapping.name, "changeset", NO_CHANGESETS))
        sink, seq = await ev.read(
            "sink", self._readback(None, rec, target.fact, entity),
            lambda rb: {"shows": bool(self._held(rb, target.fact)), "sink": "shared server"},
        )  # fmt: skip
        note(seq)
        ok = held["status"] == "applied" and sink["shows"]
        reason = (
            f"the memory {'is' if held['status'] == 'applied' else 'is not'} on the shared "
            f"server; the shared server {'shows' if sink['shows'] else 'does not show'} the fact"
        )
        return done(ok, reason)

    async def check_update(
        self, ev: UnitRecorder, *, identity: int, original: str, target: Target, since: float
    ) -> UpdateCheck:
        """A memory with the correction; the original must be gone (still there: a duplicate)."""
        if self.mapping.correction is None:
            seq = await declare_not_applicable(ev, self.mapping.name, "update", NO_CORRECTION)
            return UpdateCheck(None, f"not applicable: {NO_CORRECTION}",
                               [seq] if seq is not None else [])  # fmt: skip
        rec = ev.observer("update")
        ids, seq = await self._captures(ev, "update", rec, identity, target, target.correction)
        refs = [*rec.seqs, *([seq] if seq is not None else [])]
        new = [i for i in ids if i != original]
        entity = _entity(target.entity_urn)
        if not new:
            return UpdateCheck(None, "no memory with the correction in the read-back", refs)
        wanted = original.partition("#")[2]

        def original_status(rb: ReadBack) -> dict[str, Any]:
            held = any(i == wanted for i, _ in self._held(rb, ""))
            return {"status": "pending" if held else "deleted"}

        status, seq = await ev.read(
            "original_status", self._readback(identity, rec, target.fact, entity),
            original_status,
        )  # fmt: skip
        return UpdateCheck(new[0], f"correction captured as {new[0]}", refs, status["status"],
                           (seq,) if seq is not None else ())  # fmt: skip

    async def read_ref(self, ev: UnitRecorder, ref: str) -> RefCheck:
        """A capture id resolves in its identity's read-back; nothing else exists here."""
        m = _CAPTURE_ID.match(ref)
        if m is None:
            return RefCheck(ref, "unknown", False, "a mapped server has no catalog or pages", [])
        who = int(m["who"].rpartition("-")[2])
        rec = ev.observer("ref")
        seen, seq = await ev.read(
            "ref", self._readback(who, rec, "", ""),
            lambda rb: {"exists": any(i == m["id"] for i, _ in self._held(rb, ""))},
        )  # fmt: skip
        refs = [*rec.seqs, *([seq] if seq is not None else [])]
        return RefCheck(ref, "vault" if seen["exists"] else "unknown", seen["exists"], "", refs)

    async def aclose(self) -> None:
        """Nothing to close: the servers stop with the context that started them."""


def _entity(urn: str) -> str:
    """The protocol entity's name as a title (a dataset URN's dataset name)."""
    from benchledger.harness.platforms.server_memory import dataset_name

    return dataset_name(urn)


class GenericMcpProvisioner(Provisioner):
    """A mapped server (``--platform mcp:FILE``): each runtime gets a fresh folder, and its
    servers start on first use in it."""

    fresh_state = True

    def __init__(self, spec: PlatformSpec, mapping: McpMapping, *, pool_size: int,
                 root: str, python: str = "") -> None:  # fmt: skip
        super().__init__(spec, pool_size=pool_size)
        self.mapping = mapping
        self.root = root
        self.python = python
        self._argv: tuple[str, ...] = ()
        self._installing = asyncio.Lock()

    async def argv(self) -> tuple[str, ...]:
        """The server's command line (installing it on first use)."""
        async with self._installing:
            if not self._argv and not self.mapping.url:  # a server at a URL runs already
                exe = await asyncio.to_thread(command, self.mapping, self.root, self.python)
                self._argv = (exe, *self.mapping.args)
        return self._argv

    def env(self) -> dict[str, str]:
        """The mapping's environment, with each secret's value from this one (never recorded)."""
        missing = [s for s in self.mapping.secrets if not os.environ.get(s)]
        if missing:
            raise PlatformStartFailed(f"{self.mapping.path}: server.secrets names "
                                      f"{', '.join(missing)}, unset here")  # fmt: skip
        return {**self.mapping.env, **{s: os.environ[s] for s in self.mapping.secrets}}

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[PlatformClient]:
        argv = await self.argv()
        folder = tempfile.mkdtemp(prefix="benchledger-mcp-")
        try:
            async with GenericMcp.running(self.mapping, argv, self.env(), folder,
                                          pool_size=self.pool_size) as client:  # fmt: skip
                yield client
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def record(self, described: Description) -> PlatformRecord:
        """The mapping file, its text and hash, and what the server said it is."""
        rec = super().record(described)
        return msgspec.structs.replace(rec, mapping=self.mapping.text,
                                       mapping_hash=self.mapping.sha,
                                       mapping_name=self.mapping.name,
                                       hits=self.mapping.hits)  # fmt: skip
