"""The mem0 adapter: the mem0 library behind benchledger's own MCP server, over stdio.

mem0 (PyPI ``mem0ai``) is a library, so a runtime starts one ``mem0_server.py`` process
(in mem0's own virtual environment, installed on first use) with every write in a fresh
folder, and speaks MCP to it (docs/mem0.md). The lifecycle maps onto it like this:

- an identity is a mem0 ``user_id``: pool identity N is ``bench-agent-NNN``; the shared
  (promoted) knowledge is the user ``shared``; the reviewer (pool index None) is the harness;
- every tool of the server takes ``user_ids`` (the first is the caller's own); the ADAPTER
  fills it in (own, then shared) and hides it from the listing, and refuses, recording the
  refusal, any call that names a user itself (``user_ids``, ``user_id``, ``agent_id``,
  ``run_id``), so a client cannot reach another identity's memories; the server checks
  again that a memory read, changed or deleted by id belongs to those users;
- capture = a memory of the teacher holding the fact and naming the protocol's entity,
  read back with ``list_memories``; promote = the harness reads the capture back by id,
  adds its text (or the knowledge page) as a memory of ``shared`` and reads that back;
  update = a memory with the correction, the original's text gone (``update_memory``
  edits in place; still there: a duplicate).

With ``--mem0-llm SPEC`` every write goes through mem0's own fact extraction
(``infer=True``), its LLM the harness's loopback endpoint (``mem0_llm.py``) answering with
the operator's model; each of those calls is a ``model_call`` of the session call that
made it.

A memory's id here is ``USER:MEM0_ID@HASH``: its user, mem0's id and the first 16 hex
digits of the sha256 of its text, so a memory edited in place is a new version.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.metadata
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from typing import TYPE_CHECKING, Any, Final

import msgspec

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms import mem0_server
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
from benchledger.harness.platforms.mem0_llm import PROVIDERS as LLM_PROVIDERS
from benchledger.harness.platforms.mem0_llm import Mem0Llm
from benchledger.harness.platforms.pinned_venv import PinnedVenv, ensure
from benchledger.harness.platforms.platform import PlatformSpec, Provisioner
from benchledger.harness.platforms.server_memory import dataset_name, entity_matches
from benchledger.harness.platforms.servers import MEM0_CMD as CMD
from benchledger.harness.platforms.servers import MEM0_PACKAGE as PACKAGE
from benchledger.harness.platforms.servers import MEM0_PYPI as PYPI
from benchledger.harness.platforms.session import notify
from benchledger.harness.platforms.stdio import SerialServer, open_session
from benchledger.harness.platforms.vocabulary import MEM0
from benchledger.harness.record import redact_command
from benchledger.harness.scrub import scrubber
from benchledger.harness.settings import Settings
from benchledger.ledger.events import PlatformRecord
from benchledger.protocols.grading import normalize, surfaced

if TYPE_CHECKING:
    from benchledger.harness.agents.model import ModelAgent

NAME: Final = "mem0"  # what the server calls itself in its MCP handshake
SHARED: Final = "shared"
USERS_ARG: Final = "user_ids"
# Arguments naming a mem0 scope: only the adapter sets one.
SCOPE_ARGS: Final = frozenset({"user_ids", "user_id", "agent_id", "run_id"})
WRITE_TOOLS: Final = frozenset({"add_memory", "update_memory", "delete_memory"})
REQUIRED_TOOLS: Final = frozenset({"add_memory", "search_memories", "get_memory",
                                   "update_memory", "delete_memory", "list_memories"})  # fmt: skip
NO_CHANGESETS: Final = (
    "mem0 keeps no changesets; the shared user's memory, read back by id after the copy, "
    "is the whole record of a promotion"
)
# The offline settings (docs/mem0.md says why each is there).
OFFLINE_ENV: Final = {"MEM0_TELEMETRY": "False", "HF_HUB_OFFLINE": "1",
                      "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}  # fmt: skip
WORDLLAMA_PIN: Final = "wordllama==0.4.0.post1"
_MEMORY_ID = re.compile(
    r"^(?P<user>bench-agent-\d{3,}|shared):(?P<id>[^@\s]+)@(?P<v>[0-9a-f]{16})$"
)


def text_hash(text: str) -> str:
    """The first 16 hex digits of the sha256 of a memory's text: its version."""
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def memory_id(user: str, mem0_id: str, text: str) -> str:
    """The adapter's name for one version of one memory."""
    return f"{user}:{mem0_id}@{text_hash(text)}"


def parse_memory_id(ref: str) -> tuple[str, str, str] | None:
    """``(user, mem0 id, version)`` of a memory id, None when it is not one."""
    m = _MEMORY_ID.match(ref)
    return (m["user"], m["id"], m["v"]) if m else None


def rows(answer: Any) -> list[dict[str, Any]]:
    """The memories of a tool's answer (``{"results": [...]}``, or one memory)."""
    if isinstance(answer, dict) and isinstance(answer.get("results"), list):
        return [r for r in answer["results"] if isinstance(r, dict) and "id" in r]
    return [answer] if isinstance(answer, dict) and "id" in answer else []


def about(text: str, urn: str) -> bool:
    """Whether a memory names the protocol's entity: its URN, its dataset name, or the name's
    last one or two parts, as ``server_memory.entity_matches`` reads names, found among its
    words."""
    if urn in text or entity_matches(text, urn):
        return True
    parts = dataset_name(urn).split(".")
    said = f" {normalize(text)} "
    return any(f" {normalize(n)} " in said for n in (".".join(parts[-2:]), parts[-1]) if n)


def captures(answer: Any, user: str, urn: str, fact: str) -> list[str]:
    """Ids of ``user``'s memories naming ``urn`` and holding ``fact`` (any, when empty),
    newest first (``list_memories`` answers oldest first)."""
    found = [memory_id(user, str(r["id"]), str(r.get("memory") or "")) for r in rows(answer)
             if r.get("user_id", user) == user and about(str(r.get("memory") or ""), urn)
             and (not fact or surfaced(fact, str(r.get("memory") or "")))]  # fmt: skip
    return found[::-1]


class Scope:
    """Whose memories one session touches: ``own`` (writes and reads) and ``readable``
    (None: any, named by the caller: the harness's own sessions)."""

    def __init__(self, own: str, readable: Sequence[str] | None) -> None:
        self.own = own
        self.readable = None if readable is None else tuple(readable)

    def refusal(self, tool: str, args: dict[str, Any]) -> str:
        """Why this call may not be sent ("" when it may)."""
        named = sorted(k for k in args if k in SCOPE_ARGS)
        if self.readable is None or not named:
            return ""
        return (f"{', '.join(named)} is set by benchledger: this session is {self.own} and may "
                f"read only {', '.join(self.readable)}")  # fmt: skip

    def wired(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as sent: the session's users added (own first)."""
        if self.readable is None:
            return args
        return {**args, USERS_ARG: list(self.readable)}


def listed_schema(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool's input schema as an agent sees it: without ``user_ids``, which the adapter sets."""
    out = dict(schema)
    props = out.get("properties")
    if isinstance(props, dict):
        out["properties"] = {k: v for k, v in props.items() if k != USERS_ARG}
    if isinstance(out.get("required"), list):
        out["required"] = [r for r in out["required"] if r != USERS_ARG]
    return out


class Mem0Session:
    """A session as one identity (or the harness) on the runtime's server, held to its
    ``Scope``; every call recorded as the agent made it."""

    def __init__(
        self,
        server: SerialServer,
        observer: Observer | None,
        scope: Scope,
        email: str,
        llm: Mem0Llm | None = None,
    ) -> None:
        self._server = server
        self._observer = observer
        self.scope = scope
        self.email = email
        self._llm = llm

    async def list_tools(self) -> list[dict[str, Any]]:
        """The tools, ``user_ids`` hidden, recorded as ``tools/list``."""
        start = time.perf_counter()
        tools = [{**t, "input_schema": listed_schema(t.get("input_schema") or {})}
                 for t in await self._server.list_tools()]  # fmt: skip
        ms = (time.perf_counter() - start) * 1000
        notify(self._observer, "tools/list", result={"tools": [t["name"] for t in tools]},
               latency_ms=ms)  # fmt: skip
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """A call within the scope, sent and recorded; any other refused and recorded."""
        why = self.scope.refusal(name, arguments)
        if why:
            text = f"refused by benchledger: {why}"
            content = ({"type": "text", "text": text},)
            notify(self._observer, "tools/call", name, arguments, {"refused": why},
                   is_error=True, content=content)  # fmt: skip
            return CallResult(text, True, None, 0.0, content)
        if self._llm is None:
            got = await self._server.call(name, self.scope.wired(name, arguments))
        else:  # mem0's LLM requests during the call are recorded as this session's
            async with self._llm.serving(self._observer):
                got = await self._server.call(name, self.scope.wired(name, arguments))
        notify(self._observer, "tools/call", name, arguments, is_error=got.is_error,
               latency_ms=got.latency_ms, content=got.content,
               structured=got.data if isinstance(got.data, dict) else None)  # fmt: skip
        return got


class Mem0:
    """The lifecycle on one mem0 server process (see the module docstring)."""

    vocabulary = MEM0  # its memory verbs (docs/plugins.md, "The vocabulary")

    def __init__(
        self,
        server: SerialServer | None,
        *,
        pool_size: int,
        version: str = "",
        llm: Mem0Llm | None = None,
    ) -> None:
        self._server = server
        self.pool_size = pool_size
        self.version = version
        self._llm = llm

    @classmethod
    @asynccontextmanager
    async def running(
        cls,
        argv: Sequence[str],
        folder: str,
        *,
        pool_size: int,
        env: dict[str, str] | None = None,
        llm: Mem0Llm | None = None,
    ) -> AsyncIterator[Mem0]:
        """Start ``argv --folder FOLDER`` (every write of mem0 in ``folder``); stop it on exit.
        With ``llm`` (running), mem0 extracts facts through it: its URL and token are given
        to the server, and the token is scrubbed from everything the server sends."""
        folder = os.path.abspath(folder)
        extra, env = [], dict(env or {})
        if llm is not None:
            extra = ["--llm-url", llm.url]
            env[mem0_server.TOKEN_VAR] = llm.token
        scrub = scrubber(llm.token) if llm is not None else None
        with open(os.path.join(folder, "mem0-server.stderr"), "a", encoding="utf-8") as errlog:
            async with open_session([*argv, "--folder", folder, *extra],
                                    env=server_env(folder, env), errlog=errlog, label=NAME,
                                    scrub=scrub) as session:  # fmt: skip
                server = SerialServer(session, NAME)  # mem0 and its local Qdrant take one writer
                yield cls(server, pool_size=pool_size, version=session.server.get("version", ""),
                          llm=llm)  # fmt: skip

    def email(self, pool_index: int) -> str:
        """An identity is a mem0 user id: pool index N is ``bench-agent-NNN``."""
        return f"bench-agent-{pool_index:03d}"

    @asynccontextmanager
    async def _open(
        self, observer: Observer | None, scope: Scope, email: str
    ) -> AsyncIterator[Mem0Session]:
        assert self._server is not None
        yield Mem0Session(self._server, observer, scope, email, self._llm)

    @asynccontextmanager
    async def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[Mem0Session]:
        """A pool identity's session (its own memories, and reads of the shared ones), or
        the reviewer's (None: the shared user's)."""
        if pool_index is None:
            async with self._open(observer, Scope(SHARED, [SHARED]), f"reviewer ({SHARED})") as s:
                yield s
            return
        user = self.email(pool_index)
        async with self._open(observer, Scope(user, [user, SHARED]), user) as s:
            yield s

    async def describe(self) -> Description:
        """The mem0 release the server runs; a pool session's tools checked; the model of
        its fact extraction (``--mem0-llm``) reached once."""
        if self._llm is not None:
            await self._llm.preflight()
        async with self.session(1) as pool:
            listed = {t["name"] for t in await pool.list_tools()}
        missing = sorted(REQUIRED_TOOLS - listed)
        if missing:
            raise InfraError("refused", f"the mem0 server lacks the tools {', '.join(missing)}",
                             retryable=False)  # fmt: skip
        return Description(name=NAME, version=self.version, stages=STAGES)

    # -- reads, recorded as read-backs -------------------------------------------------------

    async def _read(self, rec: Observer, tool: str, args: dict[str, Any]) -> ReadBack:
        """One call as the harness (naming the users itself), as a read-back."""
        start = time.perf_counter()
        async with self._open(rec, Scope(SHARED, None), "harness") as harness:
            got = await harness.call_tool(tool, args)
        body = got.data if isinstance(got.data, dict) else {"text": got.text[:2000]}
        ms = (time.perf_counter() - start) * 1000
        where = ",".join(args.get(USERS_ARG) or [])
        return ReadBack("MCP", f"tools/call {tool} @ {where}", 422 if got.is_error else 200,
                        body, ms)  # fmt: skip

    def _list(self, rec: Observer, user: str) -> Any:
        return lambda: self._read(rec, "list_memories", {USERS_ARG: [user]})

    async def _captures(
        self, ev: UnitRecorder, stage: str, rec: Observer, user: str, target: Target, fact: str
    ) -> tuple[list[str], int | None]:
        def observe(rb: ReadBack) -> dict[str, Any]:
            ids = captures(rb.body, user, target.entity_urn, fact)
            return {"ids": ids, "statuses": dict.fromkeys(ids, "pending")}

        seen, seq = await ev.read(stage, self._list(rec, user), observe)
        return seen["ids"], seq

    # -- the lifecycle steps (PlatformClient) ------------------------------------------------

    async def check_capture(
        self, ev: UnitRecorder, *, identity: int, target: Target, since: float, poll: PollPolicy
    ) -> CaptureCheck:
        """One read of the teacher's memories: mem0 writes before it answers (no polling)."""
        rec = ev.observer("capture")
        user = self.email(identity)
        ids, seq = await self._captures(ev, "capture", rec, user, target, target.fact)
        refs = sorted([*rec.seqs, *([seq] if seq is not None else [])])
        if ids:
            return CaptureCheck(ids[0], f"memory {ids[0]} found", refs)
        return CaptureCheck(None, "no memory with the fact naming the protocol's entity", refs)

    async def promote(self, ev: UnitRecorder, *, capture: str, target: Target) -> Promotion:
        """The harness as reviewer: the capture read back by id, its text (or the protocol's
        knowledge page) added as a memory of the shared user, and that read back by id."""
        parsed = parse_memory_id(capture)
        if parsed is None:
            raise ValueError(f"{capture!r} is not a memory id of this adapter")
        user, mem0_id, version = parsed
        rec = ev.observer("promote")
        refs: list[int] = []

        def note(seq: int | None) -> None:
            refs.extend([seq] if seq is not None else [])

        def done(ok: bool, reason: str) -> Promotion:
            return Promotion(ok, reason, sorted([*rec.seqs, *refs]))

        def reviewed(rb: ReadBack) -> dict[str, Any]:
            held = [r for r in rows(rb.body) if text_hash(str(r.get("memory") or "")) == version]
            return {"approved": bool(held), "memory": str(held[0]["memory"]) if held else ""}

        approved, seq = await ev.read(
            "approve",
            lambda: self._read(rec, "get_memory", {"memory_id": mem0_id, USERS_ARG: [user]}),
            reviewed,
        )
        note(seq)
        if not approved["approved"]:
            return done(False, f"{capture} is no longer among the teacher's memories")
        if target.sink == "knowledge_page" and target.page is not None:
            p = target.page
            text = f"{p.title}: {p.summary}\n\n{p.body}"
        else:
            text = approved["memory"]

        def wrote(rb: ReadBack) -> dict[str, Any]:
            made = rows(rb.body)
            return {"ok": rb.status == 200 and bool(made),
                    "id": str(made[0]["id"]) if made else "",
                    "message": json.dumps(rb.body)[:200]}  # fmt: skip

        applied, seq = await ev.read(
            "apply",
            lambda: self._read(rec, "add_memory", {"text": text, USERS_ARG: [SHARED]}),
            wrote,
        )
        note(seq)
        if not applied["ok"]:
            return done(False, f"apply failed: {applied['message']}")
        shared_read = {"memory_id": applied["id"], USERS_ARG: [SHARED]}

        def status(rb: ReadBack) -> dict[str, Any]:
            held = [r for r in rows(rb.body) if surfaced(target.fact, str(r.get("memory") or ""))]
            ids = [memory_id(SHARED, str(r["id"]), str(r["memory"])) for r in held]
            return {"status": "applied" if held else None, "ids": ids}

        held, seq = await ev.read(
            "insight_status", lambda: self._read(rec, "get_memory", shared_read), status
        )
        note(seq)
        note(await declare_not_applicable(ev, NAME, "changeset", NO_CHANGESETS))

        def shows(rb: ReadBack) -> dict[str, Any]:
            said = " ".join(str(r.get("memory") or "") for r in rows(rb.body))
            return {"shows": surfaced(target.fact, said), "sink": "shared user"}

        sink, seq = await ev.read("sink", self._list(rec, SHARED), shows)
        note(seq)
        ok = held["status"] == "applied" and sink["shows"]
        reason = (
            f"the memory {'is' if held['status'] == 'applied' else 'is not'} the shared user's; "
            f"the shared user's memories {'show' if sink['shows'] else 'do not show'} the fact"
        )
        return done(ok, reason)

    async def check_update(
        self, ev: UnitRecorder, *, identity: int, original: str, target: Target, since: float
    ) -> UpdateCheck:
        """A memory with the correction on the entity; the original version must be gone."""
        rec = ev.observer("update")
        user = self.email(identity)
        ids, seq = await self._captures(ev, "update", rec, user, target, target.correction)
        refs = [seq] if seq is not None else []
        new = [i for i in ids if i != original]
        if not new:
            return UpdateCheck(None, "no memory with the correction naming the entity", refs)
        parsed = parse_memory_id(original)
        mem0_id = parsed[1] if parsed else ""

        def original_status(rb: ReadBack) -> dict[str, Any]:
            held = [r for r in rows(rb.body) if str(r["id"]) == mem0_id]
            if not held:
                return {"status": "deleted"}
            text = str(held[0].get("memory") or "")
            same = memory_id(user, mem0_id, text) == original
            return {"status": "pending" if same or surfaced(target.fact, text) else "superseded"}

        status, seq = await ev.read("original_status", self._list(rec, user), original_status)
        return UpdateCheck(new[0], f"correction captured as {new[0]}", refs, status["status"],
                           (seq,) if seq is not None else ())  # fmt: skip

    async def read_ref(self, ev: UnitRecorder, ref: str) -> RefCheck:
        """A memory id resolves to that version among its user's memories."""
        parsed = parse_memory_id(ref)
        if parsed is None:
            return RefCheck(ref, "unknown", False, "mem0 has no catalog or pages", [])
        user, mem0_id, version = parsed
        rec = ev.observer("ref")

        def observe(rb: ReadBack) -> dict[str, Any]:
            return {"exists": any(str(r["id"]) == mem0_id
                                  and text_hash(str(r.get("memory") or "")) == version
                                  for r in rows(rb.body))}  # fmt: skip

        seen, seq = await ev.read("ref", self._list(rec, user), observe)
        refs = [*rec.seqs, *([seq] if seq is not None else [])]
        return RefCheck(ref, "vault" if seen["exists"] else "unknown", seen["exists"], "", refs)

    async def aclose(self) -> None:
        """Nothing to close: the server stops with the runtime that started it."""


# -- the server's environment and install ---------------------------------------------------


def server_env(folder: str, extra: dict[str, str] | None = None) -> dict[str, str]:
    """The server's environment (over the MCP SDK's safe few): every write in ``folder``,
    telemetry off, the model hubs offline."""
    return {
        "HOME": os.path.join(folder, "home"),
        "XDG_CACHE_HOME": os.path.join(folder, "home", ".cache"),
        "MEM0_DIR": os.path.join(folder, "mem0"),
        **OFFLINE_ENV,
        **(extra or {}),
    }


def server_argv(python: str) -> list[str]:
    """The command serving mem0 with ``python`` (``-I``: the script's folder, which holds a
    ``platform.py``, must not shadow the standard library)."""
    return [python, "-I", os.path.abspath(mem0_server.__file__)]


def pins(version: str) -> list[str]:
    """What the venv gets: mem0, the embedder, and the MCP SDK this benchledger speaks."""
    return [f"{PACKAGE}=={version}", WORDLLAMA_PIN, f"mcp=={importlib.metadata.version('mcp')}"]


def install(version: str, root: str, python: str = "") -> str:
    """The python of ``root/mem0-VERSION``, a venv holding mem0 (installed on first use,
    ``harness.platforms.pinned_venv``)."""
    home = os.path.join(os.path.abspath(root), f"mem0-{version}")
    venv = PinnedVenv(home, version, pins(version), os.path.join("bin", "python"),
                      f"{PACKAGE}=={version}", "first use: about 1-2 minutes",
                      ", or give --mem0-python")  # fmt: skip
    return ensure(venv, lambda: python or sys.executable)


def llm_agent(spec: str, settings: Settings | None) -> ModelAgent:
    """The model ``--mem0-llm SPEC`` names, made as ``--agent SPEC`` would be (its key from
    ``settings``); ValueError, one line, for a spec that is not an Anthropic or
    OpenAI-compatible model or cannot be served."""
    from benchledger.harness.agents import from_spec
    from benchledger.harness.agents.model import ModelAgent

    if spec.partition(":")[0] not in LLM_PROVIDERS or not spec.partition(":")[2]:
        raise ValueError(f"--mem0-llm {spec!r}: name a model, anthropic:MODEL or "
                         "openai:MODEL@BASE_URL")  # fmt: skip
    try:
        agent = from_spec(spec, settings=settings)
    except ValueError as exc:
        raise ValueError(str(exc).replace("--agent", "--mem0-llm", 1)) from None
    if not isinstance(agent, ModelAgent):
        raise ValueError(f"--mem0-llm {spec!r}: not a model")
    return agent


class Mem0Provisioner(Provisioner):
    """mem0 behind benchledger's MCP server over stdio: each runtime gets a fresh folder
    and its own server process."""

    fresh_state = True

    def __init__(
        self,
        spec: PlatformSpec,
        *,
        pool_size: int,
        root: str,
        python: str = "",
        llm: str = "",
        settings: Settings | None = None,
    ) -> None:
        super().__init__(spec, pool_size=pool_size)
        self.root = root
        self.python = python
        self._argv: list[str] = []
        self._installing = asyncio.Lock()
        self.llm = llm
        self._model = llm_agent(llm, settings) if llm else None

    def _resolve(self) -> list[str]:
        if self.spec.url.startswith(CMD):
            import shlex

            return shlex.split(self.spec.url.removeprefix(CMD))
        return server_argv(install(self.spec.url.removeprefix(PYPI), self.root, self.python))

    async def argv(self) -> list[str]:
        """The command that serves mem0 (installing it on first use)."""
        async with self._installing:
            if not self._argv:
                self._argv = await asyncio.to_thread(self._resolve)
        return self._argv

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[Mem0]:
        argv = await self.argv()
        folder = tempfile.mkdtemp(prefix="benchledger-mem0-")
        try:
            async with AsyncExitStack() as stack:
                llm = None
                if self._model is not None:  # each runtime its own endpoint and token
                    m = self._model
                    llm = await stack.enter_async_context(
                        Mem0Llm(m.transport, model=m.model, params=m.params).running()
                    )
                async with Mem0.running(argv, folder, pool_size=self.pool_size,
                                        llm=llm) as client:  # fmt: skip
                    yield client
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def record(self, described: Description) -> PlatformRecord:
        """The PyPI package and version (or the given command, redacted) and what it said."""
        rec = super().record(described)
        if self.spec.url.startswith(CMD):
            given = redact_command(self.spec.url.removeprefix(CMD))
            rec = PlatformRecord(**{**msgspec.structs.asdict(rec), "url": CMD + given})
        return rec
