"""The basic-memory adapter: Markdown notes in one project per identity, over streamable HTTP.

basic-memory (PyPI ``basic-memory``) keeps notes as Markdown files with a SQLite index
and has no identities and no review workflow, so the lifecycle maps onto it like this
(docs/basic-memory.md):

- an identity is a project: pool identity N is the project ``bench-agent-NNN`` (made by
  the harness with ``create_memory_project`` on its first session), the shared (promoted)
  knowledge is the project ``shared``, and the reviewer (pool index None) is the harness;
- the server has no auth, and one started with ``--project X`` silently writes whatever
  is aimed elsewhere into X, so the ADAPTER decides which project a call may touch: an
  identity writes only its own project and reads its own and the shared one; a call
  naming any other (``project``, ``projects``, a project-prefixed identifier, ``project_id``,
  ``workspace``, ``search_all_projects``) is refused before it is sent, and recorded as
  refused. A call naming no project gets the identity's own (``search_notes``: own and
  shared), so the server's default project is never used;
- capture = a note in the teacher's project about the protocol's entity holds the fact,
  read back twice: the Markdown files on disk (path, text, sha256) and ``read_note`` JSON,
  whose checksum must equal the file's digest; promote = the harness writes the note (or
  the knowledge page) into the shared project and reads it back the same way; update =
  the correction is in the note (``edit_note`` edits in place: the note's version changes,
  the original text must be gone).

A note's id is ``bench-agent-NNN:PATH@VERSION`` (its project, its file and the first 16
hex digits of its checksum): an in-place edit makes a new version, so a correction is a
new id while the note keeps its path.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import hashlib
import os
import re
import time
from collections.abc import AsyncIterator, Collection
from contextlib import asynccontextmanager
from typing import Any, Final

import httpx2
from mcp.client.session import ClientSession

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
from benchledger.harness.platforms.http import TRANSPORT, ListedToolsSession, streams, translate
from benchledger.harness.platforms.server_memory import dataset_name, entity_matches
from benchledger.harness.platforms.session import ObservedSession, observed
from benchledger.harness.platforms.vocabulary import BASIC_MEMORY
from benchledger.protocols.grading import normalize, surfaced

PACKAGE: Final = "basic-memory"
NAME: Final = "basic-memory"  # the handshake says "Basic Memory" 4.1.3: FastMCP's version
SHARED: Final = "shared"
DISK: Final = "DISK"  # the method of a read-back made from the project's files on disk
WRITE_TOOLS: Final = frozenset({"write_note", "edit_note", "delete_note", "move_note"})
# Project management is the harness's; these act on the server's default project, which
# no identity owns.
ADMIN_TOOLS: Final = frozenset({"create_memory_project", "delete_project"})
UNSCOPED_TOOLS: Final = frozenset({"search", "fetch"})
# Tools that touch no project's notes: sent as they are.
GLOBAL_TOOLS: Final = frozenset({"list_memory_projects", "list_workspaces",
                                 "basic_memory_diagnostics"})  # fmt: skip
MANUAL: Final = "manual"  # ``man``'s own bundled project
REQUIRED_TOOLS: Final = frozenset({"write_note", "search_notes", "read_note", "edit_note",
                                   "create_memory_project"})  # fmt: skip
# Arguments that may name a note by a project-prefixed path (``memory://P/x``, ``P/x``).
_PATH_ARGS: Final = ("identifier", "url", "path", "id", "dir_name", "destination_path",
                     "destination_folder")  # fmt: skip
_MEMORY_URL = re.compile(r"^\s*memory://", re.I)
_HEAD = re.compile(r"^/*(?P<head>.*?)(?:/|::|$)")  # a path's first part, before "/" or "::"
_PROJECT_NAME = re.compile(r"^(?:bench-agent-\d+|shared|main)$")
_NOTE_ID = re.compile(
    r"^(?P<project>bench-agent-(?P<who>\d{3,})|shared):(?P<path>.+)@(?P<v>[0-9a-f]{16})$"
)
NO_CHANGESETS: Final = (
    "basic-memory keeps no changesets; the shared project's note, read back over MCP and "
    "from its file on disk after the copy, is the whole record of a promotion"
)
MAX_NOTES: Final = 3  # candidate notes read back per check (newest first)


def project_key(name: str) -> str:
    """A project name as the server matches it (lower case, ``_`` and spaces as ``-``, no
    ``memory://``): the adapter's scope check compares these, never trusting the server to."""
    text = _MEMORY_URL.sub("", name).strip().strip("/").lower()
    return re.sub(r"[\s_-]+", "-", text)


def path_project(path: str) -> str:
    """The project a project-prefixed path names (``memory://P/x``, ``P/x``, ``P::x``), as a
    ``project_key``; "" when its first part names no project."""
    url = _MEMORY_URL.match(path)
    rest = path[url.end() :] if url else path
    m = _HEAD.match(rest)
    if m is None or (m.end() == len(rest) and not url and "::" not in rest):
        return ""  # a bare name, no project before it
    head = project_key(m["head"])
    return head if _PROJECT_NAME.match(head) else ""


class Scope:
    """Which projects one session may touch: ``own`` (writes and reads) and ``readable``
    (reads; None: any, the harness's own sessions)."""

    def __init__(self, own: str, readable: Collection[str] | None) -> None:
        self.own = own
        self.readable = None if readable is None else frozenset(readable)

    def refusal(self, tool: str, args: dict[str, Any]) -> str:
        """Why this call may not be sent ("" when it may)."""
        if self.readable is None:
            return ""
        if tool in ADMIN_TOOLS:
            return f"{tool} manages projects, which only the harness does"
        if tool in UNSCOPED_TOOLS:
            return f"{tool} reads the server's default project, which no identity owns: use " \
                   "search_notes or read_note"  # fmt: skip
        for key in ("project_id", "workspace"):
            if args.get(key) not in (None, ""):
                return f"{key} is not accepted here: name the project with project"
        if args.get("search_all_projects"):
            return "search_all_projects would read every identity's project"
        allowed = {self.own} if tool in WRITE_TOOLS else set(self.readable)
        if tool == "man":
            allowed.add(MANUAL)
        named = [str(args["project"])] if args.get("project") not in (None, "") else []
        projects = args.get("projects")
        named += [str(p) for p in projects] if isinstance(projects, list) else []
        for key in _PATH_ARGS:
            head = path_project(args[key]) if isinstance(args.get(key), str) else ""
            if head:
                named.append(head)
        keys = {project_key(a) for a in allowed}
        for project in named:
            if project_key(project) not in keys:
                verb = "write" if tool in WRITE_TOOLS else "read"
                return (f"{tool} on project {project!r}: this identity may {verb} only "
                        f"{', '.join(sorted(allowed))}")  # fmt: skip
        return ""

    def wired(self, tool: str, args: dict[str, Any]) -> dict[str, Any]:
        """The arguments as sent: the own project (search_notes: every readable one) where
        the call names none, so the server's default project is never used."""
        if tool in GLOBAL_TOOLS | ADMIN_TOOLS | UNSCOPED_TOOLS or tool == "man":
            return args
        if args.get("project") not in (None, "") or args.get("projects"):
            return args
        if tool == "search_notes" and self.readable is not None:
            return {**args, "projects": sorted(self.readable)}
        return {**args, "project": self.own}


class BasicMemorySession(ObservedSession):
    """An MCP session on the basic-memory server, held to its ``Scope``."""

    def __init__(self, client: ClientSession, observer: Observer | None, scope: Scope,
                 email: str) -> None:  # fmt: skip
        super().__init__(client, observer, fail=translate)
        self.scope = scope
        self.email = email

    async def _call(self, name: str, arguments: dict[str, Any]) -> tuple[CallResult, Any]:
        return await super()._call(name, self.scope.wired(name, arguments))

    def recorded_structured(self, got: CallResult, structured: Any) -> Any:
        return got.data if isinstance(got.data, dict) else None

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        """A call within the scope, sent and recorded; any other refused and recorded."""
        why = self.scope.refusal(name, arguments)
        if not why:
            return await super().call_tool(name, arguments)
        text = f"refused by benchledger: {why}"
        content = ({"type": "text", "text": text},)
        self.observe("tools/call", name, arguments, {"refused": why}, is_error=True,
                     content=content)  # fmt: skip
        return CallResult(text, True, None, 0.0, content)


# -- notes on disk -------------------------------------------------------------------------


# What a platform wrote to disk is read bounded (it is input we did not make): at most
# MAX_FILES notes, each hashed whole up to MAX_FILE bytes, its text kept up to MAX_TEXT.
MAX_FILES: Final = 256
MAX_FILE: Final = 16 << 20
MAX_TEXT: Final = 64 << 10


def _file(full: str) -> tuple[str, str, int, bool] | None:
    """(sha256, text, size, text cut short) of one file, or None when gone or too large."""
    digest = hashlib.sha256()
    head = b""
    size = 0
    try:
        with open(full, "rb") as f:
            while chunk := f.read(1 << 16):
                size += len(chunk)
                if size > MAX_FILE:
                    return None
                digest.update(chunk)
                if len(head) <= MAX_TEXT:
                    head += chunk
    except OSError:
        return None  # removed while listing
    cut = len(head) > MAX_TEXT
    return digest.hexdigest(), head[:MAX_TEXT].decode("utf-8", errors="replace"), size, cut


def read_files(folder: str, project: str) -> ReadBack:
    """The Markdown files of a project folder: path, text, sha256, modification time
    (bounded: ``MAX_FILES`` files, ``MAX_FILE`` bytes each, ``MAX_TEXT`` of text kept)."""
    # Reads files the server wrote for itself: a read-back path the platform did not
    # answer for us.
    start = time.perf_counter()
    files: list[dict[str, Any]] = []
    skipped = 0
    for root, dirs, names in os.walk(folder):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(n for n in names if n.endswith(".md")):
            full = os.path.join(root, name)
            read = _file(full) if len(files) < MAX_FILES else None
            try:
                mtime = os.stat(full).st_mtime_ns
            except OSError:
                continue  # removed while listing
            if read is None:
                skipped += 1
                continue
            digest, text, size, cut = read
            files.append({
                "path": os.path.relpath(full, folder),
                "sha256": digest,
                "text": text,
                **({"size": size, "text_cut": True} if cut else {}),
                # A volatile key (``_at``): the trace ignores it, "newest" reads it.
                "modified_at": dt.datetime.fromtimestamp(mtime / 1e9, dt.UTC).isoformat(
                    timespec="microseconds"
                ),
            })  # fmt: skip
    ms = (time.perf_counter() - start) * 1000
    body: dict[str, Any] = {"project": project, "files": files}
    if skipped:
        body["skipped"] = skipped  # over MAX_FILES, or larger than MAX_FILE
    return ReadBack(DISK, f"file:{project}/", 200, body, ms)


def frontmatter(text: str) -> dict[str, str]:
    """A note's YAML front matter as flat ``key: value`` pairs (what basic-memory writes)."""
    if not text.startswith("---"):
        return {}
    head, _, _ = text[3:].partition("\n---")
    pairs = (line.partition(":") for line in head.splitlines())
    return {k.strip(): v.strip() for k, sep, v in pairs if sep and k.strip()}


def note_matches(file: dict[str, Any], urn: str) -> bool:
    """Whether a note is about the protocol's entity: its title or file name names it
    (as ``server_memory.entity_matches`` reads names), or its text holds the URN or the
    dataset name."""
    text = str(file.get("text") or "")
    title = frontmatter(text).get("title", "")
    stem = os.path.basename(str(file.get("path") or "")).removesuffix(".md")
    if any(entity_matches(n, urn) for n in (title, stem) if n):
        return True
    return urn in text or f" {normalize(dataset_name(urn))} " in f" {normalize(text)} "


def candidates(files: Any, urn: str, fact: str) -> list[dict[str, Any]]:
    """The files about ``urn`` holding ``fact`` (any, when empty), newest first."""
    rows = files.get("files") if isinstance(files, dict) else None
    found = [f for f in rows or [] if isinstance(f, dict) and note_matches(f, urn)
             and (not fact or surfaced(fact, str(f.get("text") or "")))]  # fmt: skip
    found.sort(key=lambda f: str(f["path"]))
    return sorted(found, key=lambda f: str(f.get("modified_at") or ""), reverse=True)


def identifier(file: dict[str, Any]) -> str:
    """How ``read_note`` names a file: its permalink, else its path without ``.md``."""
    return frontmatter(str(file.get("text") or "")).get("permalink") or str(
        file["path"]
    ).removesuffix(".md")


def note_id(project: str, path: str, checksum: str) -> str:
    """The adapter's name for one version of one note."""
    return f"{project}:{path}@{checksum[:16]}"


def parse_note_id(ref: str) -> tuple[str, str, str] | None:
    """``(project, path, version)`` of a note id, None when it is not one."""
    m = _NOTE_ID.match(ref)
    return (m["project"], m["path"], m["v"]) if m else None


def verified(body: Any, fact: str) -> list[dict[str, Any]]:
    """The notes of a read-back whose ``read_note`` checksum is the file's sha256 on disk
    and whose content shows ``fact`` (any, when empty)."""
    out = []
    for n in (body.get("notes") if isinstance(body, dict) else None) or []:
        note = n.get("note") if isinstance(n, dict) else None
        if not isinstance(note, dict) or note.get("checksum") != n.get("sha256"):
            continue
        if not fact or surfaced(fact, str(note.get("content") or "")):
            out.append(n)
    return out


def _result(data: Any) -> Any:
    """A tool's JSON answer: basic-memory wraps structured output as ``{"result": ...}``."""
    if isinstance(data, dict) and set(data) == {"result"}:
        return data["result"]
    return data


class BasicMemory:
    """The lifecycle on one basic-memory server at ``url`` whose projects live in ``folder``."""

    vocabulary = BASIC_MEMORY  # its memory verbs (docs/plugins.md, "The vocabulary")

    def __init__(self, url: str, folder: str, *, pool_size: int, version: str = "") -> None:
        self.url = url
        self.folder = os.path.abspath(folder) if folder else ""
        self.pool_size = pool_size
        self.version = version
        self._made: set[str] = set()
        self._making = asyncio.Lock()  # the server rewrites one config file per project

    def email(self, pool_index: int) -> str:
        """An identity is a project: pool index N is ``bench-agent-NNN``."""
        return f"bench-agent-{pool_index:03d}"

    def project_dir(self, project: str) -> str:
        return os.path.join(self.folder, "projects", project)

    @asynccontextmanager
    async def _open(self, observer: Observer | None, scope: Scope,
                    email: str) -> AsyncIterator[BasicMemorySession]:  # fmt: skip
        http = httpx2.AsyncClient(timeout=httpx2.Timeout(30.0, read=120.0))
        async with observed(
            streams(self.url, http),
            ListedToolsSession,
            lambda client: BasicMemorySession(client, observer, scope, email),
            transport=TRANSPORT,
            fail=translate,
            opening=f"opening an MCP session as {email}",
            during=f"the MCP session as {email}",
        ) as session:
            yield session

    async def ensure_project(self, project: str) -> None:
        """Make ``project`` (in its own folder) unless this runtime already has; unrecorded:
        it is the harness's setup, the same for every identity."""
        async with self._making:
            if project in self._made:
                return
            args = {"project_name": project, "project_path": self.project_dir(project),
                    "output_format": "json"}  # fmt: skip
            async with self._open(None, Scope(project, None), "harness") as admin:
                got = await admin.call_tool("create_memory_project", args)
            if got.is_error and "already" not in got.text.lower():
                raise InfraError("refused", f"create_memory_project {project}: {got.text[:200]}",
                                 retryable=False)  # fmt: skip
            self._made.add(project)

    @asynccontextmanager
    async def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[BasicMemorySession]:
        """A pool identity's session (its project, and reads of the shared one), or the
        reviewer's (None: the harness, on the shared project)."""
        if pool_index is None:
            async with self._open(observer, Scope(SHARED, None), f"reviewer ({SHARED})") as s:
                yield s
            return
        name = self.email(pool_index)
        await self.ensure_project(name)
        async with self._open(observer, Scope(name, {name, SHARED}), name) as s:
            yield s

    async def describe(self) -> Description:
        """The installed version (the handshake's is FastMCP's); a pool session's tools checked."""
        await self.ensure_project(SHARED)
        async with self.session(1) as pool:
            listed = {t["name"] for t in await pool.list_tools()}
        missing = sorted(REQUIRED_TOOLS - listed)
        if missing:
            lacks = ", ".join(missing)
            raise InfraError("refused", f"the server at {self.url} lacks the tools {lacks}: "
                             f"is it {PACKAGE}?", retryable=False)  # fmt: skip
        return Description(name=NAME, version=self.version, stages=STAGES)

    # -- reads, recorded as read-backs -------------------------------------------------------

    async def _disk(self, project: str) -> ReadBack:
        """The project's Markdown files as they are on disk."""
        return await asyncio.to_thread(read_files, self.project_dir(project), project)

    async def _files(
        self, ev: UnitRecorder, project: str, urn: str, fact: str, path: str = ""
    ) -> list[dict[str, Any]]:
        """One recorded read of a project's files on disk: those about ``urn`` with ``fact``
        (or the one at ``path``), newest first."""
        found: list[dict[str, Any]] = []

        def observe(rb: ReadBack) -> dict[str, Any]:
            if path:
                rows = rb.body.get("files") if isinstance(rb.body, dict) else None
                found[:] = [f for f in rows or [] if isinstance(f, dict) and f.get("path") == path]
            else:
                found[:] = candidates(rb.body, urn, fact)[:MAX_NOTES]
            return {"notes": [f["path"] for f in found]}

        await ev.read("files", lambda: self._disk(project), observe)
        return found

    async def _notes(self, rec: Observer, project: str, files: list[dict[str, Any]]) -> ReadBack:
        """``read_note`` JSON of each file (as the harness, over MCP) beside its disk digest."""
        start = time.perf_counter()
        notes = []
        async with self._open(rec, Scope(project, None), "harness") as harness:
            for f in files:
                args = {"identifier": identifier(f), "project": project, "output_format": "json"}
                got = await harness.call_tool("read_note", args)
                note = None if got.is_error else _result(got.data)
                notes.append({"path": f["path"], "sha256": f["sha256"], "note": note})
        ms = (time.perf_counter() - start) * 1000
        return ReadBack("MCP", f"tools/call read_note @ {project}", 200, {"notes": notes}, ms)

    async def _read_back(
        self, ev: UnitRecorder, purpose: str, rec: Observer, project: str, target: Target,
        fact: str, poll: PollPolicy, unless: str = "",
    ) -> tuple[list[str], int | None]:  # fmt: skip
        """Files on disk, then ``read_note`` of those about the target with ``fact``: the
        ids of the notes whose checksum is their file's digest (newest first), looked for
        until one other than ``unless`` shows or ``poll`` runs out: the server answers a
        write before its file is on disk when it is busy."""
        deadline = ev.clock.monotonic() + poll.timeout_s

        def observe(rb: ReadBack) -> dict[str, Any]:
            ids = [note_id(project, n["path"], n["sha256"]) for n in verified(rb.body, fact)]
            return {"ids": ids, "statuses": dict.fromkeys(ids, "pending")}

        while True:
            files = await self._files(ev, project, target.entity_urn, fact)
            read = functools.partial(self._notes, rec, project, files)
            seen, seq = await ev.read(purpose, read, observe)
            if any(i != unless for i in seen["ids"]) or ev.clock.monotonic() >= deadline:
                return seen["ids"], seq
            await ev.clock.sleep(poll.interval_s)

    # -- the lifecycle steps (PlatformClient) ------------------------------------------------

    async def check_capture(
        self, ev: UnitRecorder, *, identity: int, target: Target, since: float, poll: PollPolicy
    ) -> CaptureCheck:
        """The teacher's project holds a note on the entity with the fact, on disk and as
        ``read_note`` says (polled: a busy server writes the file after it answers)."""
        rec = ev.observer("capture")
        ids, seq = await self._read_back(
            ev, "capture", rec, self.email(identity), target, target.fact, poll
        )
        refs = sorted([*rec.seqs, *([seq] if seq is not None else [])])
        if ids:
            return CaptureCheck(ids[0], f"note {ids[0]} found", refs)
        return CaptureCheck(None, "no note with the fact on the protocol's entity", refs)

    async def promote(self, ev: UnitRecorder, *, capture: str, target: Target) -> Promotion:
        """The harness as reviewer: the capture read back from the teacher's project, its
        note (or the protocol's knowledge page) written into the shared project, and that
        read back over MCP and from disk."""
        parsed = parse_note_id(capture)
        if parsed is None:
            raise ValueError(f"{capture!r} is not a note id of this adapter")
        project, path, _ = parsed
        rec = ev.observer("promote")
        refs: list[int] = []

        def note(seq: int | None) -> None:
            refs.extend([seq] if seq is not None else [])

        def done(ok: bool, reason: str) -> Promotion:
            return Promotion(ok, reason, sorted([*rec.seqs, *refs]))

        files = await self._files(ev, project, "", "", path)

        def reviewed(rb: ReadBack) -> dict[str, Any]:
            held = [n for n in verified(rb.body, "")
                    if note_id(project, n["path"], n["sha256"]) == capture]  # fmt: skip
            body = held[0]["note"] if held else {}
            return {"approved": bool(held), "title": str(body.get("title") or ""),
                    "content": str(body.get("content") or "")}  # fmt: skip

        approved, seq = await ev.read("approve", lambda: self._notes(rec, project, files),
                                      reviewed)  # fmt: skip
        note(seq)
        if not approved["approved"]:
            return done(False, f"{capture} is no longer in the teacher's project")
        if target.sink == "knowledge_page" and target.page is not None:
            p = target.page
            title, folder = p.title, "pages"
            content = f"# {p.title}\n\n{p.summary}\n\n{p.body}\n"
        else:
            title, folder = approved["title"] or dataset_name(target.entity_urn), "datasets"
            content = approved["content"]

        def wrote(rb: ReadBack) -> dict[str, Any]:
            said = _result(rb.body.get("answer"))
            where = str(said.get("file_path") or "") if isinstance(said, dict) else ""
            return {"ok": rb.status == 200 and bool(where), "file_path": where,
                    "message": str(rb.body.get("text", ""))[:200]}  # fmt: skip

        applied, seq = await ev.read(
            "apply", lambda: self._copy(rec, title, folder, content), wrote
        )
        note(seq)
        if not applied["ok"]:
            return done(False, f"apply failed: {applied['message']}")

        def status(rb: ReadBack) -> dict[str, Any]:
            held = verified(rb.body, target.fact)
            return {"status": "applied" if held else None,
                    "ids": [note_id(SHARED, n["path"], n["sha256"]) for n in held]}  # fmt: skip

        poll = PollPolicy()
        deadline = ev.clock.monotonic() + poll.timeout_s
        while True:  # the file may reach the disk after the server answered
            shared = await self._files(ev, SHARED, "", "", applied["file_path"])
            read = functools.partial(self._notes, rec, SHARED, shared)
            held, seq = await ev.read("insight_status", read, status)
            if held["status"] == "applied" or ev.clock.monotonic() >= deadline:
                break
            await ev.clock.sleep(poll.interval_s)
        note(seq)
        note(await declare_not_applicable(ev, NAME, "changeset", NO_CHANGESETS))

        def shows(rb: ReadBack) -> dict[str, Any]:
            said = " ".join(str((n.get("note") or {}).get("content") or "")
                            for n in (rb.body.get("notes") or []))  # fmt: skip
            return {"shows": surfaced(target.fact, said), "sink": "shared project"}

        sink, seq = await ev.read("sink", lambda: self._notes(rec, SHARED, shared), shows)
        note(seq)
        ok = held["status"] == "applied" and sink["shows"]
        reason = (
            f"the note {'is' if held['status'] == 'applied' else 'is not'} in the shared "
            f"project; the shared project {'shows' if sink['shows'] else 'does not show'} the fact"
        )
        return done(ok, reason)

    async def _copy(self, rec: Observer, title: str, folder: str, content: str) -> ReadBack:
        """Write the note into the shared project; a note already there gets it appended."""
        start = time.perf_counter()
        async with self._open(rec, Scope(SHARED, None), "harness") as harness:
            args = {"title": title, "content": content, "directory": folder,
                    "project": SHARED, "output_format": "json"}  # fmt: skip
            got = await harness.call_tool("write_note", args)
            there = _result(got.data) if got.is_error else None
            if isinstance(there, dict) and there.get("error") == "NOTE_ALREADY_EXISTS":
                edit = {
                    "identifier": str(there.get("permalink") or ""),
                    "operation": "append",
                    "content": f"\n{content}",
                    "project": SHARED,
                    "output_format": "json",
                }
                got = await harness.call_tool("edit_note", edit)
        ms = (time.perf_counter() - start) * 1000
        return ReadBack("MCP", f"tools/call write_note @ {SHARED}", 422 if got.is_error else 200,
                        {"text": got.text[:2000], "answer": got.data}, ms)  # fmt: skip

    async def check_update(
        self, ev: UnitRecorder, *, identity: int, original: str, target: Target, since: float
    ) -> UpdateCheck:
        """The correction is in a note on the entity (a new version); the original text must
        be gone from the note it was in (still there: a duplicate)."""
        rec = ev.observer("update")
        project = self.email(identity)
        ids, seq = await self._read_back(ev, "update", rec, project, target, target.correction,
                                         PollPolicy(), unless=original)  # fmt: skip
        refs = [seq] if seq is not None else []
        new = [i for i in ids if i != original]
        if not new:
            return UpdateCheck(None, "no note with the correction on the entity", refs)
        parsed = parse_note_id(original)
        path = parsed[1] if parsed else ""
        files = await self._files(ev, project, "", "", path)

        def original_status(rb: ReadBack) -> dict[str, Any]:
            rows = verified(rb.body, "")
            if not rows:
                return {"status": "deleted"}
            same = note_id(project, rows[0]["path"], rows[0]["sha256"]) == original
            still = surfaced(target.fact, str(rows[0]["note"].get("content") or ""))
            return {"status": "pending" if same or still else "superseded"}

        status, seq = await ev.read("original_status", lambda: self._notes(rec, project, files),
                                    original_status)  # fmt: skip
        return UpdateCheck(new[0], f"correction captured as {new[0]}", refs, status["status"],
                           (seq,) if seq is not None else ())  # fmt: skip

    async def read_ref(self, ev: UnitRecorder, ref: str) -> RefCheck:
        """A note id resolves to its version in its project's files; nothing else exists."""
        parsed = parse_note_id(ref)
        if parsed is None:
            return RefCheck(ref, "unknown", False, "basic-memory has no catalog", [])
        project, path, version = parsed

        def observe(rb: ReadBack) -> dict[str, Any]:
            rows = rb.body.get("files") if isinstance(rb.body, dict) else None
            held = any(f.get("path") == path and str(f.get("sha256", "")).startswith(version)
                       for f in rows or [])  # fmt: skip
            return {"exists": held}

        seen, seq = await ev.read("ref", lambda: self._disk(project), observe)
        refs = [seq] if seq is not None else []
        return RefCheck(ref, "vault" if seen["exists"] else "unknown", seen["exists"], "", refs)

    async def aclose(self) -> None:
        """Nothing to close: the server stops with the runtime that started it."""
