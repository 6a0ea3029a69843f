"""The @modelcontextprotocol/server-memory adapter: a knowledge graph in a JSONL file, over stdio.

The server has no identities, no review workflow and no pages, so the lifecycle maps
onto it like this (docs/server-memory.md):

- an identity is a file: pool identity N is ``bench-agent-NNN.jsonl`` in the runtime's
  folder, served by a fresh server process per session (``initialize`` is once per
  process, so a fresh session is a fresh process); one process per file at a time,
  because two processes on one file lose each other's writes;
- the shared (promoted) graph is ``shared.jsonl``, served by one long-lived process per
  runtime, one call at a time (its writes read-modify-write the file);
- a pool session sees its own file plus the shared graph: read tools (``read_graph``,
  ``search_nodes``, ``open_nodes``) are answered by both servers and merged, writes go
  to the identity's own file; the reviewer (pool index None) works on the shared graph;
- capture = the teacher's graph holds an observation containing the fact on an entity
  matching the protocol's entity; promote = the harness copies that observation onto the
  entity in the shared graph and reads it back (the datahub sink: there are no pages, so
  a knowledge-page promotion is recorded as not applicable, and so are changesets);
  update = the correction is on the entity and the original observation is gone (still
  there: a duplicate).

Observations have no ids; the adapter names one ``bench-agent-NNN#<16 hex>`` (its file,
and a hash of its entity and text), stable across reads and runs.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from typing import Any, Final, TextIO

import blake3

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import (
    STAGES,
    CallResult,
    CaptureCheck,
    Description,
    Observer,
    PollPolicy,
    Promotion,
    ReadBack,
    RefCheck,
    Target,
    UnitRecorder,
    UpdateCheck,
    declare_not_applicable,
)
from benchledger.harness.platforms.servers import (
    SERVER_MEMORY_CMD,
    SERVER_MEMORY_PACKAGE,
    SERVER_MEMORY_VERSION,
)
from benchledger.harness.platforms.session import notify
from benchledger.harness.platforms.stdio import SerialServer, StdioSession, failure, open_session
from benchledger.harness.platforms.vocabulary import SERVER_MEMORY
from benchledger.protocols.grading import normalize, surfaced

PACKAGE: Final = SERVER_MEMORY_PACKAGE  # named once, in harness.platforms.servers
VERSION: Final = SERVER_MEMORY_VERSION
CMD: Final = SERVER_MEMORY_CMD
NAME: Final = "memory-server"  # what the server calls itself in its MCP handshake
SHARED_FILE: Final = "shared.jsonl"
READ_TOOLS: Final = frozenset({"read_graph", "search_nodes", "open_nodes"})
REQUIRED_TOOLS: Final = frozenset(
    {"create_entities", "add_observations", "delete_observations", *READ_TOOLS}
)
# The one sink: the protocol's entity in the shared graph, the analog of the catalog
# entity's description. The server keeps no documents, so a knowledge page cannot land.
SINKS: Final = ("datahub",)
NO_PAGES: Final = (
    "server-memory keeps a graph of entities and observations and has no knowledge "
    "pages; only the datahub sink (the entity in the shared graph) exists, so this "
    "protocol's promotion, and the transfer after it, cannot run"
)
NO_CHANGESETS: Final = (
    "server-memory keeps no changesets; the shared graph read back after the copy is "
    "the whole record of a promotion"
)
_DATASET = re.compile(r"^urn:li:dataset:\(urn:li:dataPlatform:[^,]+,(?P<name>[^,]+),[^)]*\)$")
_OBSERVATION_ID = re.compile(r"^bench-agent-(?P<who>\d{3,})#(?P<hash>[0-9a-f]{16})$")


def dataset_name(urn: str) -> str:
    """The dataset name in a DataHub dataset URN (``memory.bench.orders``), else the URN."""
    m = _DATASET.match(urn)
    return m["name"] if m else urn


def entity_matches(name: str, urn: str) -> bool:
    """Whether a graph entity named ``name`` stands for the protocol's entity ``urn``.

    Agents name entities freely: the URN, the dataset name, its last one or two parts
    (``bench.orders``, ``orders``), or a name containing the whole dataset name all
    count; compared case- and punctuation-insensitively.
    """
    dataset = dataset_name(urn)
    parts = dataset.split(".")
    names = {normalize(n) for n in (urn, dataset, ".".join(parts[-2:]), parts[-1])}
    given = normalize(name)
    return given in names or f" {normalize(dataset)} " in f" {given} "


def observation_id(identity: int, entity: str, text: str) -> str:
    """The adapter's name for one observation in an identity's file (stable, content-based)."""
    digest = blake3.blake3(f"{entity}\x00{text}".encode()).hexdigest()[:16]
    return f"bench-agent-{identity:03d}#{digest}"


def identity_of(observation: str) -> int | None:
    """The pool identity whose file an observation id names (None: not one of ours)."""
    m = _OBSERVATION_ID.match(observation)
    return int(m["who"]) if m else None


def entities(graph: Any) -> list[dict[str, Any]]:
    """The entities of a graph answer (``{"entities": [...], "relations": [...]}``)."""
    rows = graph.get("entities") if isinstance(graph, dict) else None
    return [e for e in rows or [] if isinstance(e, dict) and isinstance(e.get("name"), str)]


def observations(entity: dict[str, Any]) -> list[str]:
    """An entity's observations, as text."""
    return [str(o) for o in entity.get("observations") or []]


def find(graph: Any, identity: int, observation: str) -> dict[str, Any] | None:
    """The entity holding the observation with id ``observation``, and the text itself."""
    for e in entities(graph):
        for text in observations(e):
            if observation_id(identity, e["name"], text) == observation:
                return {"entity": e["name"], "entity_type": str(e.get("entityType") or ""),
                        "observation": text}  # fmt: skip
    return None


def captures(graph: Any, identity: int, urn: str, fact: str) -> list[str]:
    """Ids of observations containing ``fact`` on entities matching ``urn``, newest first.

    The server appends entities and observations in the order they were written, so
    the file's reverse order is newest first. An empty ``fact`` matches any observation.
    """
    found = [
        observation_id(identity, e["name"], text)
        for e in entities(graph)
        if entity_matches(e["name"], urn)
        for text in observations(e)
        if not fact or surfaced(fact, text)
    ]
    return found[::-1]


def merge(own: Any, shared: Any) -> dict[str, Any]:
    """Two graph answers as one: entities by name (own first), observations and relations once."""
    by_name: dict[str, dict[str, Any]] = {}
    for e in entities(own) + entities(shared):
        seen = by_name.setdefault(
            e["name"],
            {"name": e["name"], "entityType": e.get("entityType", ""), "observations": []},
        )
        seen["observations"] += [o for o in observations(e) if o not in seen["observations"]]
    relations: list[Any] = []
    for g in (own, shared):
        for r in (g.get("relations") if isinstance(g, dict) else None) or []:
            if r not in relations:
                relations.append(r)
    return {"entities": list(by_name.values()), "relations": relations}


def _report(observer: Observer | None, tool: str, args: dict[str, Any], got: CallResult) -> None:
    structured = got.data if isinstance(got.data, dict) else None
    notify(observer, "tools/call", tool, args, is_error=got.is_error, latency_ms=got.latency_ms,
           content=got.content, structured=structured)  # fmt: skip


class SharedSession:
    """The reviewer's session: the shared graph itself, every call recorded."""

    def __init__(self, shared: SerialServer, observer: Observer | None) -> None:
        self._shared = shared
        self._observer = observer
        self.email = f"reviewer ({SHARED_FILE})"

    async def list_tools(self) -> list[dict[str, Any]]:
        """The shared server's tools, recorded as ``tools/list``."""
        start = time.perf_counter()
        tools = await self._shared.list_tools()
        if self._observer is not None:
            ms = (time.perf_counter() - start) * 1000
            names = {"tools": [t["name"] for t in tools]}
            notify(self._observer, "tools/list", result=names, latency_ms=ms)
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """Call a tool on the shared graph and record it."""
        got = await self._shared.call(name, arguments)
        _report(self._observer, name, arguments, got)
        return got


class PoolSession:
    """A pool identity's session: its own file, plus the shared graph for every read.

    A read tool is answered by both servers and merged into one answer; the event records
    the merged answer (what the agent saw) and each server's own under ``result.fanout``.
    Writes go to the identity's own file only.
    """

    def __init__(self, own: StdioSession, shared: SerialServer, email: str) -> None:
        self._own = own
        self._shared = shared
        self.email = email

    async def list_tools(self) -> list[dict[str, Any]]:
        """The identity's server's tools (the shared server lists the same), recorded."""
        try:
            return await self._own.list_tools()
        except Exception as exc:
            raise failure(exc, f"tools/list on {self._own.label}") from None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """A write on the own file, or a read of both files merged; recorded either way."""
        if name not in READ_TOOLS:
            return await self._own.call_tool(name, arguments)
        start = time.perf_counter()
        try:
            mine = await self._own.call(name, arguments)
        except Exception as exc:
            raise failure(exc, f"tools/call {name} on {self._own.label}") from None
        theirs = await self._shared.call(name, arguments)
        ms = (time.perf_counter() - start) * 1000
        fanout = {"fanout": [
            {"server": self._own.label, "is_error": mine.is_error, "answer": mine.data},
            {"server": SHARED_FILE, "is_error": theirs.is_error, "answer": theirs.data},
        ]}  # fmt: skip
        if mine.is_error or theirs.is_error:
            # Both servers refuse a bad call alike; the agent sees one refusal.
            bad = mine if mine.is_error else theirs
            got = CallResult(bad.text, True, bad.data, ms, bad.content)
        else:
            merged = merge(mine.data, theirs.data)
            text = json.dumps(merged, indent=2)
            got = CallResult(text, False, merged, ms, ({"type": "text", "text": text},))
        self._own.observe("tools/call", name, arguments, fanout, is_error=got.is_error,
                          latency_ms=ms, content=got.content,
                          structured=got.data if isinstance(got.data, dict) else None)  # fmt: skip
        return got


class ServerMemory:
    """The lifecycle on @modelcontextprotocol/server-memory, one folder of graph files.

    Build it with ``ServerMemory.running(...)``, which starts the shared graph's server
    for the runtime's lifetime.
    """

    vocabulary = SERVER_MEMORY  # its memory verbs (docs/plugins.md, "The vocabulary")

    def __init__(
        self, argv: Sequence[str], folder: str, shared: SerialServer, errlog: TextIO, *,
        pool_size: int,
    ) -> None:  # fmt: skip
        self.argv = tuple(argv)
        self.folder = folder
        self.pool_size = pool_size
        self._shared = shared
        self._errlog = errlog
        self._files: dict[int, asyncio.Lock] = {}

    @classmethod
    @asynccontextmanager
    async def running(
        cls, argv: Sequence[str], folder: str, *, pool_size: int
    ) -> AsyncIterator[ServerMemory]:
        """Start the shared graph's server in ``folder`` (absolute); stop it on exit."""
        folder = os.path.abspath(folder)
        with open(os.path.join(folder, "server-memory.stderr"), "a", encoding="utf-8") as errlog:
            env = {"MEMORY_FILE_PATH": os.path.join(folder, SHARED_FILE)}
            async with open_session(argv, env=env, errlog=errlog, label=SHARED_FILE) as session:
                yield cls(
                    argv, folder, SerialServer(session, SHARED_FILE), errlog, pool_size=pool_size
                )

    def email(self, pool_index: int) -> str:
        """An identity is a file: pool index N is ``bench-agent-NNN.jsonl``."""
        return f"bench-agent-{pool_index:03d}.jsonl"

    @asynccontextmanager
    async def _own(self, pool_index: int, observer: Observer | None) -> AsyncIterator[StdioSession]:
        """A fresh server process on the identity's file, the only one on it meanwhile."""
        lock = self._files.setdefault(pool_index, asyncio.Lock())
        name = self.email(pool_index)
        env = {"MEMORY_FILE_PATH": os.path.join(self.folder, name)}
        async with (
            lock,
            open_session(
                self.argv, env=env, errlog=self._errlog, label=name, observer=observer
            ) as session,
        ):
            session.email = name
            yield session

    @asynccontextmanager
    async def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[PoolSession | SharedSession]:
        """A pool identity's session (own file + shared graph), or the reviewer's (None)."""
        if pool_index is None:
            yield SharedSession(self._shared, observer)
            return
        async with self._own(pool_index, observer) as own:
            yield PoolSession(own, self._shared, own.email)

    async def describe(self) -> Description:
        """The shared server's self-reported name and version; a pool session's tools checked."""
        async with self.session(1) as pool:
            listed = {t["name"] for t in await pool.list_tools()}
        missing = sorted(REQUIRED_TOOLS - listed)
        if missing:
            raise InfraError(
                "refused",
                f"the server started by {' '.join(self.argv)[:120]} lacks the tools "
                f"{', '.join(missing)}: is it {PACKAGE}?",
                retryable=False,
            )
        server = self._shared.session.server
        return Description(
            name=server.get("name") or NAME,
            version=server.get("version", ""),
            stages=STAGES,
            sinks=SINKS,
        )

    # -- reads, recorded as read-backs -------------------------------------------------------

    @asynccontextmanager
    async def _graph(
        self, who: int | None, rec: Observer
    ) -> AsyncIterator[StdioSession | SharedSession]:
        """A recorded session on one graph file: an identity's own (a fresh process on
        it), or the shared graph (None). Unlike a pool session, reads are not merged."""
        if who is None:
            yield SharedSession(self._shared, rec)
            return
        async with self._own(who, rec) as own:
            yield own

    async def _read(
        self, who: int | None, rec: Observer, tool: str, args: dict[str, Any]
    ) -> ReadBack:
        """One read of an identity's own file (or the shared graph, None) over MCP."""
        start = time.perf_counter()
        async with self._graph(who, rec) as graph:
            got = await graph.call_tool(tool, args)
        where = SHARED_FILE if who is None else self.email(who)
        body = got.data if isinstance(got.data, dict) else {"text": got.text[:2000]}
        ms = (time.perf_counter() - start) * 1000
        return ReadBack("MCP", f"tools/call {tool} @ {where}", 422 if got.is_error else 200,
                        body, ms)  # fmt: skip

    # -- the lifecycle steps (PlatformClient) ------------------------------------------------

    async def _observations(
        self, ev: UnitRecorder, stage: str, rec: Observer, identity: int, target: Target, fact: str
    ) -> tuple[list[str], int | None]:
        """One recorded read of ``identity``'s graph: the ids of its observations of ``fact``
        on the target's entity (all read as pending: the file has no review states)."""

        def observe(rb: ReadBack) -> dict[str, Any]:
            ids = captures(rb.body, identity, target.entity_urn, fact)
            return {"ids": ids, "statuses": dict.fromkeys(ids, "pending")}

        seen, seq = await ev.read(
            stage, lambda: self._read(identity, rec, "read_graph", {}), observe
        )
        return seen["ids"], seq

    async def check_capture(
        self, ev: UnitRecorder, *, identity: int, target: Target, since: float, poll: PollPolicy
    ) -> CaptureCheck:
        """One read of the teacher's graph: the server writes synchronously, so a capture
        is in the file when the teach session closed or never (no polling)."""
        rec = ev.observer("capture")
        ids, seq = await self._observations(ev, "capture", rec, identity, target, target.fact)
        refs = [*rec.seqs, *([seq] if seq is not None else [])]
        if ids:
            return CaptureCheck(ids[0], f"observation {ids[0]} found", refs)
        return CaptureCheck(None, "no observation with the fact on the protocol's entity", refs)

    async def promote(self, ev: UnitRecorder, *, capture: str, target: Target) -> Promotion:
        """The harness as reviewer: read the capture back from the teacher's file, copy it
        onto the entity in the shared graph, and read the shared graph back."""
        refs: list[int] = []

        def note(seq: int | None) -> None:
            refs.extend([seq] if seq is not None else [])

        if target.sink not in SINKS:
            note(await declare_not_applicable(ev, NAME, "promote", NO_PAGES))
            return Promotion(False, f"not applicable: {NO_PAGES}", refs)
        teacher = identity_of(capture)
        if teacher is None:
            raise ValueError(f"{capture!r} is not an observation id of this adapter")
        rec = ev.observer("promote")

        def done(ok: bool, reason: str) -> Promotion:
            return Promotion(ok, reason, sorted([*rec.seqs, *refs]))

        def reviewed(rb: ReadBack) -> dict[str, Any]:
            held = find(rb.body, teacher, capture)
            return {"approved": held is not None, **(held or {})}

        approved, seq = await ev.read(
            "approve", lambda: self._read(teacher, rec, "read_graph", {}), reviewed
        )
        note(seq)
        if not approved["approved"]:
            return done(False, f"{capture} is no longer in the teacher's graph")
        entity, text = approved["entity"], approved["observation"]
        applied, seq = await ev.read(
            "apply",
            lambda: self._copy(entity, approved["entity_type"], text, rec),
            lambda rb: {"ok": rb.status == 200, "message": str(rb.body.get("text", ""))[:200]},
        )
        note(seq)
        if not applied["ok"]:
            return done(False, f"apply failed: {applied['message']}")

        def status(rb: ReadBack) -> dict[str, Any]:
            held = any(text in observations(e) for e in entities(rb.body) if e["name"] == entity)
            return {"status": "applied" if held else None}

        def shows(rb: ReadBack) -> dict[str, Any]:
            said = " ".join(o for e in entities(rb.body) if e["name"] == entity
                            for o in observations(e))  # fmt: skip
            return {"shows": surfaced(target.fact, said), "sink": "shared graph"}

        opened = {"names": [entity]}
        held, seq = await ev.read(
            "insight_status", lambda: self._read(None, rec, "open_nodes", opened), status
        )
        note(seq)
        note(await declare_not_applicable(ev, NAME, "changeset", NO_CHANGESETS))
        sink, seq = await ev.read(
            "sink", lambda: self._read(None, rec, "open_nodes", opened), shows
        )
        note(seq)
        ok = held["status"] == "applied" and sink["shows"]
        reason = (
            f"the observation {'is' if held['status'] == 'applied' else 'is not'} in the shared "
            f"graph; the shared graph {'shows' if sink['shows'] else 'does not show'} the fact"
        )
        return done(ok, reason)

    async def _copy(self, entity: str, entity_type: str, text: str, rec: Observer) -> ReadBack:
        """Write the observation onto the same-named entity of the shared graph (made if new)."""
        start = time.perf_counter()
        new = {"name": entity, "entityType": entity_type or "entity", "observations": []}
        async with self._graph(None, rec) as shared:
            made = await shared.call_tool("create_entities", {"entities": [new]})
            got = made
            if not made.is_error:
                adds = [{"entityName": entity, "contents": [text]}]
                got = await shared.call_tool("add_observations", {"observations": adds})
        ms = (time.perf_counter() - start) * 1000
        return ReadBack("MCP", f"tools/call add_observations @ {SHARED_FILE}",
                        422 if got.is_error else 200, {"text": got.text[:2000]}, ms)  # fmt: skip

    async def check_update(
        self, ev: UnitRecorder, *, identity: int, original: str, target: Target, since: float
    ) -> UpdateCheck:
        """The correction is an observation on the entity; the original must be gone."""
        rec = ev.observer("update")
        ids, seq = await self._observations(ev, "update", rec, identity, target, target.correction)
        refs = [seq] if seq is not None else []
        new = [i for i in ids if i != original]
        if not new:
            return UpdateCheck(None, "no observation with the correction on the entity", refs)

        def original_status(rb: ReadBack) -> dict[str, Any]:
            # Still in the file: live beside its correction (a duplicate); else deleted.
            return {"status": "pending" if find(rb.body, identity, original) else "deleted"}

        status, seq = await ev.read(
            "original_status", lambda: self._read(identity, rec, "read_graph", {}),
            original_status,
        )  # fmt: skip
        return UpdateCheck(new[0], f"correction captured as {new[0]}", refs, status["status"],
                           (seq,) if seq is not None else ())  # fmt: skip

    async def read_ref(self, ev: UnitRecorder, ref: str) -> RefCheck:
        """An observation id resolves in its identity's file; nothing else exists here."""
        who = identity_of(ref)
        if who is None:
            return RefCheck(ref, "unknown", False, "server-memory has no catalog or pages", [])
        rec = ev.observer("ref")
        seen, seq = await ev.read(
            "ref",
            lambda: self._read(who, rec, "read_graph", {}),
            lambda rb: {"exists": find(rb.body, who, ref) is not None},
        )
        refs = [*rec.seqs, *([seq] if seq is not None else [])]
        return RefCheck(ref, "vault" if seen["exists"] else "unknown", seen["exists"], "", refs)

    async def aclose(self) -> None:
        """Nothing to close: the servers stop with the contexts that started them."""
