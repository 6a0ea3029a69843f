"""The mcp-data-platform API client: MCP over streamable HTTP plus the admin REST API.

It serves the embedded refplatform and, unchanged, the real platform. Bearer keys
live only in HTTP headers of this module's clients; observers and results never
see them, not even echoed back by the server: every answer, and every error, is
scrubbed of the admin key and the pool base in any case or encoding (harness/scrub.py)
before anything records, grades or shows it. Transport failures are translated to
``InfraError`` here, at the boundary.
"""

from __future__ import annotations

import datetime as dt
import functools
import ssl
import time
import urllib.parse
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2
from mcp.client.session import ClientSession

from benchledger.harness.errors import InfraError
from benchledger.harness.platforms.base import (
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
)
from benchledger.harness.platforms.http import (
    TRANSPORT,
    ListedToolsSession,
    read_empty,
    streams,
    translate,
)
from benchledger.harness.platforms.session import ObservedSession, observed, parse, scrubbed
from benchledger.harness.platforms.vocabulary import REFPLATFORM
from benchledger.harness.scrub import scrubber
from benchledger.protocols.grading import surfaced

HANDLE_FIELD = "session_id"
INSIGHTS = "/api/v1/admin/knowledge/insights"
CHANGESETS = "/api/v1/admin/knowledge/changesets"
PAGES = "/api/v1/portal/knowledge-pages"
CLOCK_SLACK_S = 5.0  # "since" filters look this far back, for clock skew with the platform
LIVE = ("pending", "approved", "applied")
PAGE_BATCH = 100  # the portal's page size when the harness lists knowledge pages
MEMORY_SCAN_LIMIT = 1000  # records read_ref looks through for a memory id
NAME = "mcp-data-platform"


def rfc3339(epoch_s: float) -> str:
    stamp = dt.datetime.fromtimestamp(epoch_s, dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _rows(got: ReadBack) -> list[dict[str, Any]]:
    """The rows of an admin list envelope (``{"data": [...]}``); none on any other answer."""
    data = got.body.get("data") if isinstance(got.body, dict) and got.status == 200 else None
    return [r for r in data or [] if isinstance(r, dict) and "id" in r]


def _created(row: dict[str, Any]) -> float:
    try:
        stamp = str(row.get("created_at", "")).replace("Z", "+00:00")
        return dt.datetime.fromisoformat(stamp).timestamp()
    except ValueError:
        return float("-inf")


def newest_first(rows: list[dict[str, Any]]) -> list[str]:
    """Insight ids, newest first: by ``created_at``, ties in the platform's own order.

    The peer lists newest first and refplatform oldest first; sorting by the recorded
    time makes "the newest" mean the same on both.
    """
    order = sorted(enumerate(rows), key=lambda ir: (-_created(ir[1]), ir[0]))
    return [str(r["id"]) for _, r in order]


def entity_block(content: tuple[dict[str, Any], ...], data: Any) -> dict[str, Any] | None:
    """The entity from its own content block; enrichment may append other text blocks."""
    if isinstance(data, dict) and "urn" in data:
        return data
    for block in content:
        parsed = parse(str(block.get("text", ""))) if block.get("type") == "text" else None
        if isinstance(parsed, dict) and "urn" in parsed:
            return parsed
    return None


def _mcp_read(tool: str, status: int, body: Any, start: float) -> ReadBack:
    """An MCP tool call made for a lifecycle check, recorded like an admin read."""
    return ReadBack("MCP", f"tools/call {tool}", status, body, (time.perf_counter() - start) * 1000)


def _object(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def hide_handle(schema: dict[str, Any]) -> dict[str, Any]:
    """A tool input schema without the session handle, which the harness injects."""
    out = dict(schema)
    props = dict(out.get("properties") or {})
    props.pop(HANDLE_FIELD, None)
    out["properties"] = props
    if "required" in out:
        out["required"] = [r for r in out["required"] if r != HANDLE_FIELD]
    return out


class McpSession(ObservedSession):
    """One MCP session as one identity, with the platform handle injected into calls."""

    hidden = frozenset({"platform_info"})  # the session's own opening call

    def __init__(
        self, client: ClientSession, observer: Observer | None, statuses: list[int]
    ) -> None:
        # ``statuses``: the session's failed POST statuses, which ``translate`` puts back.
        super().__init__(client, observer, fail=functools.partial(translate, statuses=statuses))
        self.handle = ""
        self.info: dict[str, Any] = {}

    async def open(self) -> None:
        """The MCP handshake, then ``platform_info``: the handle and who this identity is."""
        await super().open()
        info = await self.recorded("platform_info", {})
        if info.is_error or not isinstance(info.data, dict) or HANDLE_FIELD not in info.data:
            raise InfraError("refused", f"platform_info gave no handle: {info.text[:200]}",
                             retryable=False)  # fmt: skip
        self.handle = str(info.data[HANDLE_FIELD])
        user = _object(info.data.get("user"))
        self.email = str(user.get("email") or info.data.get("identity") or "")
        self.info = info.data

    def schema(self, schema: dict[str, Any]) -> dict[str, Any]:
        return hide_handle(schema)

    def wire(self, arguments: dict[str, Any]) -> dict[str, Any]:
        if not self.handle:
            return arguments
        return {**arguments, HANDLE_FIELD: self.handle}


@functools.cache
def _tls_context() -> ssl.SSLContext:
    """The default verifying TLS context, made once: a client per session would otherwise
    load the CA bundle every time (about 30 ms of CPU each, on the event loop)."""
    return ssl.create_default_context()


def _total(got: ReadBack | None) -> int:
    """The ``total`` of an admin list answer (0 when there is none)."""
    body = got.body if got is not None and got.status == 200 else None
    total = body.get("total") if isinstance(body, dict) else None
    return total if isinstance(total, int) and not isinstance(total, bool) else 0


class McpDataPlatform:
    """A platform speaking txn2/mcp-data-platform's API at ``base_url``."""

    vocabulary = REFPLATFORM  # its memory verbs (docs/plugins.md, "The vocabulary")

    def __init__(
        self,
        base_url: str,
        *,
        admin_key: str,
        pool_base: str,
        pool_size: int,
        timeout_s: float = 30.0,
        transport: httpx2.AsyncBaseTransport | None = None,
        read_timeout_s: float | None = None,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.pool_size = pool_size
        self._admin_key = admin_key
        self._pool_base = pool_base
        self._scrub = scrubber(admin_key, pool_base)  # pool keys are the base + "-NNN"
        read = read_timeout_s if read_timeout_s is not None else max(timeout_s, 60.0)
        self._timeout = httpx2.Timeout(timeout_s, read=read)
        self._transport = transport
        self._admin_http = self._client(admin_key)

    def _client(self, key: str, statuses: list[int] | None = None) -> httpx2.AsyncClient:
        hooks: dict[str, list[Any]] = {}
        if statuses is not None:

            async def failed(response: httpx2.Response) -> None:
                if response.request.method == "POST" and response.status_code >= 400:
                    statuses.append(response.status_code)

            hooks["response"] = [failed, read_empty]
        return httpx2.AsyncClient(
            headers={"Authorization": f"Bearer {key}"},
            timeout=self._timeout,
            transport=self._transport,
            event_hooks=hooks,
            verify=_tls_context(),
        )

    def email(self, pool_index: int) -> str:
        """mcp-data-platform maps pool key ``<base>-NNN`` to ``bench-agent-NNN@apikey.local``."""
        return f"bench-agent-{pool_index:03d}@apikey.local"

    def key(self, pool_index: int | None) -> str:
        """The bearer key of a pool identity (None = the admin)."""
        if pool_index is None:
            return self._admin_key
        return f"{self._pool_base}-{pool_index:03d}"

    @asynccontextmanager
    async def session(
        self, pool_index: int | None, observer: Observer | None = None
    ) -> AsyncIterator[McpSession]:
        """A fresh MCP session as pool identity ``pool_index`` (None = admin)."""
        statuses: list[int] = []  # failed POSTs' HTTP statuses, which the MCP client drops
        async with observed(
            streams(f"{self.base_url}/mcp", self._client(self.key(pool_index), statuses)),
            ListedToolsSession,
            lambda client: McpSession(client, observer, statuses),
            transport=TRANSPORT,
            fail=functools.partial(translate, statuses=statuses),
            opening="opening an MCP session",
            during="MCP session",
            scrub=self._scrub,
        ) as session:
            yield session

    async def rest(
        self, method: str, path: str, *, params: dict[str, Any] | None = None, body: Any = None
    ) -> ReadBack:
        """One admin REST call; 5xx and transport failures raise InfraError."""
        start = time.perf_counter()
        try:
            response = await self._admin_http.request(
                method, f"{self.base_url}{path}", params=params, json=body
            )
        except Exception as exc:
            raise scrubbed(translate(exc, f"{method} {path}"), self._scrub) from None
        ms = (time.perf_counter() - start) * 1000
        if params:
            path = f"{path}?{urllib.parse.urlencode(params)}"
        if response.status_code >= 500:
            raise InfraError("http_5xx", f"{method} {path}: HTTP {response.status_code}",
                             retryable=True)  # fmt: skip
        if response.status_code in (401, 403):
            raise InfraError("refused", f"{method} {path}: HTTP {response.status_code} "
                             "(check the admin key)", retryable=False)  # fmt: skip
        parsed = self._scrub.value(parse(response.text))
        if response.status_code == 200 and parsed is None and response.text.strip():
            # Not an answer of this API (an HTML page, a cut-off body): never graded as one.
            raise InfraError("bad_answer", f"{method} {path}: HTTP 200 with a body that is not "
                             "JSON", retryable=True)  # fmt: skip
        return ReadBack(method, path, response.status_code, parsed, ms)

    # -- the lifecycle steps (PlatformClient) ----------------------------------------------

    async def describe(self) -> Description:
        """The preflight: the platform is reachable and speaks MCP, the admin key opens an
        admin session and reads the admin REST API, and the first pool identity exists.
        Returns the server's self-reported name and version."""
        hint = " (give the platform's base URL, without /mcp)" if self.base_url.endswith(
            "/mcp") else ""  # fmt: skip
        try:
            async with self.session(None) as admin:
                server, info = admin.server, admin.info
        except InfraError as exc:
            raise InfraError(exc.kind, f"the admin session: {exc.message}{hint}",
                             retryable=exc.retryable) from None  # fmt: skip
        user = _object(info.get("user"))
        if "roles" in user and "admin" not in (user.get("roles") or []):
            raise InfraError("refused", "the admin key opens a session without admin rights",
                             retryable=False)  # fmt: skip
        # The admin REST API answers this key with a list: a refused key, a page that is not
        # this API or no list is the wrong platform. A 5xx or a timeout is not refused here:
        # it may pass, and the run records each one as an infra error.
        got = None
        try:
            got = await self.rest("GET", CHANGESETS, params={"per_page": 1})
        except InfraError as exc:
            if not exc.retryable or exc.kind == "bad_answer":
                raise InfraError(exc.kind, f"the admin REST API: {exc.message}",
                                 retryable=False) from None  # fmt: skip
        if got is not None and (got.status != 200 or not isinstance(got.body, dict)
                                or "data" not in got.body):  # fmt: skip
            raise InfraError("refused", f"the admin REST API: GET {CHANGESETS} answered HTTP "
                             f"{got.status} without a list", retryable=False)  # fmt: skip
        held = _total(got) + _total(await self._held(INSIGHTS))
        if self.pool_size:
            try:
                async with self.session(1):
                    pass
            except InfraError as exc:
                raise InfraError(exc.kind, f"pool identity 001 ({self.email(1)}, key "
                                 f"<pool-base>-001): {exc.message} (check --pool-base)",
                                 retryable=exc.retryable) from None  # fmt: skip
        version = str(server.get("version") or info.get("version") or "")
        pack = _object(info.get("pack"))
        return Description(
            name=str(server.get("name") or NAME),
            version=version,
            pack=str(pack.get("name") or ""),
            pack_hash=str(pack.get("hash") or ""),
            held=held,
        )

    async def _held(self, path: str) -> ReadBack | None:
        """One admin list's first page (its ``total``), None when it cannot be read now."""
        try:
            return await self.rest("GET", path, params={"per_page": 1})
        except InfraError:
            return None

    async def _insights(self, ev: UnitRecorder, purpose: str, params: dict[str, Any]) -> Any:
        got, seq = await ev.read(
            purpose,
            lambda: self.rest("GET", INSIGHTS, params=params),
            lambda rb: {"ids": newest_first(_rows(rb)),
                        "statuses": {str(r["id"]): r.get("status") for r in _rows(rb)}},
        )  # fmt: skip
        return got, seq

    async def check_capture(
        self, ev: UnitRecorder, *, identity: int, target: Target, since: float, poll: PollPolicy
    ) -> CaptureCheck:
        params = {
            "captured_by": self.email(identity),
            "entity_urn": target.entity_urn,
            "since": rfc3339(since - CLOCK_SLACK_S),
            "status": "pending",
            "per_page": 100,
        }
        deadline = ev.clock.monotonic() + poll.timeout_s
        refs: list[int] = []
        while True:
            seen, seq = await self._insights(ev, "capture", params)
            refs += [seq] if seq is not None else []
            if seen["ids"]:
                found = seen["ids"][0]
                return CaptureCheck(found, f"pending insight {found} found", refs)
            if ev.clock.monotonic() >= deadline:
                return CaptureCheck(None, f"no pending insight within {poll.timeout_s:g}s", refs)
            await ev.clock.sleep(poll.interval_s)

    async def _status(
        self, ev: UnitRecorder, purpose: str, insight_id: str
    ) -> tuple[Any, int | None]:
        def observe(rb: ReadBack) -> dict[str, Any]:
            row = rb.body if isinstance(rb.body, dict) and rb.status == 200 else {}
            return {"status": row.get("status"), "changeset_ref": row.get("changeset_ref", "")}

        return await ev.read(purpose, lambda: self.rest("GET", f"{INSIGHTS}/{insight_id}"), observe)

    async def promote(self, ev: UnitRecorder, *, capture: str, target: Target) -> Promotion:
        """Approve over REST, apply over MCP as admin, then verify as the peer's harness does:
        the insight is applied, a live changeset lists it, and the sink shows the fact."""
        refs: list[int] = []

        def note(seq: int | None) -> None:
            refs.extend([seq] if seq is not None else [])

        body = {"status": "approved", "review_notes": "benchledger reviewer"}
        approved, seq = await ev.read(
            "approve",
            lambda: self.rest("PUT", f"{INSIGHTS}/{capture}/status", body=body),
            lambda rb: {"approved": rb.status == 200},
        )
        note(seq)
        if not approved["approved"]:
            return Promotion(False, "the platform refused the approval", refs)
        rec = ev.observer("promote")
        applied_rb, seq = await ev.read(
            "apply",
            lambda: self._apply(capture, target, rec),
            lambda rb: {"ok": rb.status == 200, "message": str(rb.body.get("text", ""))[:200]},
        )
        refs.extend(rec.seqs)
        note(seq)
        if not applied_rb["ok"]:
            return Promotion(False, f"apply failed: {applied_rb['message']}", refs)
        status, seq = await self._status(ev, "insight_status", capture)
        note(seq)
        listed = await self._changeset_lists(ev, capture, status["changeset_ref"], target, refs)
        shown = await self._sink_shows(ev, target, refs)
        applied = status["status"] == "applied"
        reason = (
            f"insight {'is' if applied else 'is not'} applied; a live changeset "
            f"{'lists' if listed else 'does not list'} it; the {target.sink} sink "
            f"{'shows' if shown else 'does not show'} the fact"
        )
        return Promotion(applied and listed and shown, reason, refs)

    async def _changeset_lists(
        self, ev: UnitRecorder, capture: str, ref: str, target: Target, refs: list[int]
    ) -> bool:
        """Whether a live changeset lists the insight: the one its ``changeset_ref`` names,
        as the peer's own harness checks, or (no ref) any of the entity's changesets."""

        def lists(rows: list[dict[str, Any]]) -> dict[str, Any]:
            return {"lists": any(capture in (c.get("source_insight_ids") or [])
                                 and not c.get("rolled_back") for c in rows)}  # fmt: skip

        if ref:
            seen, seq = await ev.read(
                "changeset",
                lambda: self.rest("GET", f"{CHANGESETS}/{urllib.parse.quote(ref)}"),
                lambda rb: lists([rb.body] if isinstance(rb.body, dict) and rb.status == 200
                                 else []),
            )  # fmt: skip
        else:
            params = {"entity_urn": target.entity_urn, "per_page": 100}
            seen, seq = await ev.read(
                "changeset",
                lambda: self.rest("GET", CHANGESETS, params=params),
                lambda rb: lists(_rows(rb)),
            )
        refs.extend([seq] if seq is not None else [])
        return bool(seen["lists"])

    async def _apply(self, capture: str, target: Target, rec: Observer) -> ReadBack:
        """apply_knowledge as the admin, answered as a read-back (``MCP``; 200 or 422)."""
        args: dict[str, Any] = {
            "action": "apply",
            "entity_urn": target.entity_urn,
            "insight_ids": [capture],
            "confirm": True,
            "sink": target.sink,
        }
        start = time.perf_counter()
        async with self.session(None, rec) as admin:
            if target.sink == "datahub":
                got = await admin.call_tool("datahub_get_entity", {"urn": target.entity_urn})
                entity = entity_block(got.content, got.data)
                if got.is_error or entity is None:
                    text = f"cannot read the entity's description: {got.text[:200]}"
                    return _mcp_read("apply_knowledge", 422, {"text": text}, start)
                # Keep what the description says and add the fact (the peer replaces it);
                # the peer's change items need target; "" means the entity itself.
                detail = f"{entity.get('description') or ''}\n\n{target.fact}".strip()
                args["changes"] = [{"change_type": "update_description", "target": "",
                                    "detail": detail}]  # fmt: skip
            else:
                args["page"] = dict(target.page._asdict()) if target.page else {}
            applied = await admin.call_tool("apply_knowledge", args)
        status = 422 if applied.is_error else 200
        return _mcp_read("apply_knowledge", status, {"text": applied.text[:2000]}, start)

    async def _sink_shows(self, ev: UnitRecorder, target: Target, refs: list[int]) -> bool:
        """Whether the protocol's own sink (its entity, or its page by slug) shows the fact."""
        if target.sink == "datahub":
            rec = ev.observer("sink")

            async def read() -> ReadBack:
                start = time.perf_counter()
                async with self.session(None, rec) as admin:
                    got = await admin.call_tool("datahub_get_entity", {"urn": target.entity_urn})
                entity = entity_block(got.content, got.data)
                status = 200 if entity is not None and not got.is_error else 422
                return _mcp_read("datahub_get_entity", status, entity or {"text": got.text}, start)

            def shows(rb: ReadBack) -> dict[str, Any]:
                entity = rb.body if rb.status == 200 and isinstance(rb.body, dict) else {}
                text = str(entity.get("description") or "")
                return {"shows": bool(entity) and surfaced(target.fact, text)}

            seen, seq = await ev.read("sink", read, shows)
            refs.extend([*rec.seqs, *([seq] if seq is not None else [])])
            return bool(seen["shows"])
        slug = target.page.slug if target.page else ""

        def observe(rb: ReadBack) -> dict[str, Any]:
            body = rb.body if isinstance(rb.body, dict) and rb.status == 200 else {}
            page = next((p for p in body.get("pages") or [] if isinstance(p, dict)
                         and p.get("slug") == slug), None)  # fmt: skip
            if page is None:
                return {"slug": None, "shows": False, "total": body.get("total", 0)}
            text = " ".join(str(page.get(k) or "") for k in ("title", "summary", "body"))
            return {"slug": slug, "shows": surfaced(target.fact, text)}

        # The protocol's own page, found by slug in the portal listing as the peer's
        # harness does; any other page showing the fact does not count.
        for offset in range(0, 10_000, PAGE_BATCH):
            params = {"limit": PAGE_BATCH, "offset": offset}
            seen, seq = await ev.read(
                "sink", functools.partial(self.rest, "GET", PAGES, params=params), observe
            )
            refs.extend([seq] if seq is not None else [])
            if seen["slug"] is not None or offset + PAGE_BATCH >= int(seen.get("total") or 0):
                return bool(seen["shows"])
        return False

    async def check_update(
        self, ev: UnitRecorder, *, identity: int, original: str, target: Target, since: float
    ) -> UpdateCheck:
        params = {
            "captured_by": self.email(identity),
            "entity_urn": target.entity_urn,
            "since": rfc3339(since - CLOCK_SLACK_S),
            "per_page": 100,
        }
        seen, seq = await self._insights(ev, "update", params)
        refs = [seq] if seq is not None else []
        new = [i for i in seen["ids"] if i != original and seen["statuses"].get(i) in LIVE]
        if not new:
            return UpdateCheck(None, "no new live insight after the correction", refs)
        status, seq = await self._status(ev, "original_status", original)
        return UpdateCheck(
            new[0], f"correction captured as {new[0]}", refs, status["status"],
            (seq,) if seq is not None else (),
        )  # fmt: skip

    async def read_ref(self, ev: UnitRecorder, ref: str) -> RefCheck:
        """Resolve a cited ref, one read-back (purpose ``ref``) per lookup, each observed as
        ``{ref, kind, record, exists}``: a ``urn:li:`` ref is fetched (pack: the catalog),
        a knowledge page read over the portal (pack), a memory or insight id read back over
        the admin API (vault: an insight) or found in the admin's memory listing (vault: a
        memory, which the admin API does not serve). A bare id tries insight, page, memory."""
        refs: list[int] = []
        rec = ev.observer("ref")

        async def look(kind: str, record: str, read: Any, exists: Any) -> bool:
            seen, seq = await ev.read(
                "ref", read,
                lambda rb: {"ref": ref, "kind": kind, "record": record, "exists": exists(rb)},
            )  # fmt: skip
            refs.extend([*rec.seqs, *([seq] if seq is not None else [])])
            rec.seqs.clear()
            return bool(seen["exists"])

        def found(rb: ReadBack) -> bool:
            body = _object(rb.body)
            doc = _object(body.get("document"))
            # DataHub answers any glossary-term URN with a {urn, name} shell: only a
            # definition shows the term is really in the catalog.
            shell = doc.get("kind") == "glossary_term" and not doc.get("content")
            return rb.status == 200 and body.get("found") is True and not shell

        def ok(rb: ReadBack) -> bool:
            return rb.status == 200

        if ref.startswith("urn:li:"):
            hit = await look("pack", "catalog", lambda: self._fetch(ref, rec), found)
            return RefCheck(ref, "pack" if hit else "unknown", hit, "catalog", refs)
        bare = ref
        for prefix in ("mcp:knowledge_page:", "mcp:insight:", "mcp:memory:"):
            bare = bare.removeprefix(prefix)
        if not bare.strip():
            return RefCheck(ref, "unknown", False, "not a ref", refs)
        quoted = urllib.parse.quote(bare, safe="")
        page = functools.partial(self.rest, "GET", f"{PAGES}/{quoted}")
        if ref.startswith("mcp:knowledge_page:"):
            hit = await look("pack", "page", page, ok)
            return RefCheck(ref, "pack" if hit else "unknown", hit, "page", refs)
        insight = functools.partial(self.rest, "GET", f"{INSIGHTS}/{quoted}")
        if not ref.startswith("mcp:memory:") and await look("vault", "insight", insight, ok):
            return RefCheck(ref, "vault", True, "insight", refs)
        if ref == bare and await look("pack", "page", page, ok):
            return RefCheck(ref, "pack", True, "page", refs)
        if not ref.startswith("mcp:insight:") and await look(
            "vault", "memory", lambda: self._memory(bare, rec), ok
        ):
            return RefCheck(ref, "vault", True, "memory", refs)
        return RefCheck(ref, "unknown", False, "", refs)

    async def _fetch(self, reference: str, rec: Observer) -> ReadBack:
        """``fetch`` as the admin, answered as a read-back (``MCP``; 200, or 422 on an error)."""
        start = time.perf_counter()
        async with self.session(None, rec) as admin:
            got = await admin.call_tool("fetch", {"reference": reference})
        body = _object(got.data) if not got.is_error else {"text": got.text[:200]}
        return _mcp_read("fetch", 422 if got.is_error else 200, body, start)

    async def _memory(self, record_id: str, rec: Observer) -> ReadBack:
        """A memory record by id from the admin's ``memory_manage list`` (the admin REST
        serves insights only; the listing is by persona, which the pool shares)."""
        start = time.perf_counter()
        scanned = 0
        async with self.session(None, rec) as admin:
            for offset in range(0, MEMORY_SCAN_LIMIT, PAGE_BATCH):
                args = {"command": "list", "limit": PAGE_BATCH, "offset": offset}
                got = await admin.call_tool("memory_manage", args)
                if got.is_error:
                    return _mcp_read("memory_manage", 422, {"text": got.text[:200]}, start)
                data = _object(got.data)
                rows = [r for r in data.get("records") or [] if isinstance(r, dict)]
                scanned += len(rows)
                hit = next((r for r in rows if r.get("id") == record_id), None)
                if hit is not None:
                    record = {k: hit.get(k) for k in ("id", "dimension", "category", "status")}
                    return _mcp_read("memory_manage", 200, {"record": record}, start)
                if not rows or offset + PAGE_BATCH >= int(data.get("total") or 0):
                    break
        return _mcp_read("memory_manage", 404, {"scanned": scanned}, start)

    async def aclose(self) -> None:
        await self._admin_http.aclose()
