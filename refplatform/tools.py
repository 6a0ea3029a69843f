"""The MCP tool surface: the peer's S5 tools, and the chain every tool call goes through.

The chain mirrors the peer's middleware order (pkg/middleware):

1. the ``session_id`` handle is taken off the arguments and resolved (``platform_info``
   is exempt: it mints handles); refusal -> ``session_required``/``session_expired``;
2. a ``search`` call opens the search-first gate for its user; ``trino_query`` before any
   search is refused with ``search_required`` (the gate's query tools are the ones that
   run SQL; browsing and describing are discovery, not queries);
3. admin-only tools refuse a caller without the admin role (``unauthorized``);
4. the arguments are validated against the tool's closed schema (``invalid_arguments``);
5. the handler runs; any failure becomes a structured tool error
   ``{"error": {code, category, message, hint}}`` whose text reads
   ``message (code: X) Hint: ...``;
6. a successful ``trino_``/``datahub_`` result gets its enrichment blocks appended;
7. the call is audited under its handle (refusals of steps 1-3 are not, as in the peer).
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

import mcp_types as types

from benchledger.refplatform import ids, schemas
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import PlatformError, ToolError
from benchledger.refplatform.platform import IMPLEMENTATION, NAME, VERSION, Platform
from benchledger.refplatform.sessions import INIT_TOOL, search_required
from benchledger.refplatform.toolkits import sql_render

QUERY_TOOLS: Final = frozenset({"trino_query"})
ADMIN_TOOLS: Final = frozenset({"apply_knowledge"})
TOOLKIT_NAMES: Final = {"trino": "e2e", "datahub": "primary"}


@dataclass(frozen=True)
class Call:
    """One tool call after the session step: who, under which handle, with which arguments."""

    platform: Platform
    who: Identity
    handle: str
    args: dict[str, Any]


def render(payload: Any, call: Call) -> str:
    """A payload as its text block: indented JSON written as Go writes it, text as is."""
    return payload if isinstance(payload, str) else sql_render.go_json(payload)


@dataclass(frozen=True)
class Tool:
    name: str
    kind: str  # the toolkit kind the audit log records
    description: str
    handler: Callable[[Call], Any]
    text: Callable[[Any, Call], str] = render  # the result's text block


def _platform_info(call: Call) -> dict[str, Any]:
    p, who = call.platform, call.who
    pending = p.knowledge.stats({"status": "pending"})["total_pending"] if who.admin else None
    info: dict[str, Any] = {
        "platform": NAME,
        "implementation": IMPLEMENTATION,
        "version": VERSION,
        "session_id": call.handle,
        "user": {"id": who.user_id, "email": who.email, "roles": who.roles},
        "persona": who.persona,
        "pack": {"name": p.pack.name, "hash": p.pack.pack_hash},
        "embedder": p.embedder.name,
        "agent_instructions": (
            "Pass session_id on every other tool call. Call search first to discover what is "
            "known; query with trino_query using fully qualified names (catalog.schema.table). "
            "Save knowledge with memory_capture."
        ),
    }
    if pending is not None:
        info["pending_review"] = {"total_pending": pending}
    return info


def _query(call: Call) -> Any:
    sql_render.validate_format(call.args.get("format"))
    return call.platform.sql.query(
        call.args["sql"],
        call.args.get("limit"),
        timeout_s=call.args.get("timeout_seconds"),
        unwrap_json=bool(call.args.get("unwrap_json")),
        owner=call.who.name,
    )


def _tools() -> dict[str, Tool]:
    table = [
        Tool(
            "platform_info",
            "platform",
            "Start here: returns the session_id every other tool needs, the platform version "
            "and how to work with it.",
            _platform_info,
        ),
        Tool(
            "search",
            "search",
            "The one way to discover. Call this FIRST: one query across the "
            "catalog, glossary, knowledge pages, your memory and captured insights, grouped by "
            "source with a coverage summary. Pass entity_urns to pull what is known about "
            "specific datasets. Exactly one source and no intent browses that source.",
            lambda c: c.platform.search.search(c.who, c.args),
        ),
        Tool(
            "fetch",
            "search",
            "Read a search reference in full (a knowledge page's body, a "
            "dataset's context, an insight, your memory). Unknown or inaccessible references "
            "answer found=false.",
            lambda c: c.platform.search.fetch(c.who, c.args["reference"]),
        ),
        Tool(
            "memory_capture",
            "memory",
            "Record knowledge. type personal_preference or "
            "episodic_event is live for you at once; business_knowledge, schema_entity and "
            "operational_rule enter review for promotion to shared knowledge. Link the "
            "datasets it concerns with entity_urns.",
            lambda c: c.platform.memory.capture(c.who, c.handle, c.args),
        ),
        Tool(
            "memory_manage",
            "memory",
            "Manage existing memory: update, forget, list, "
            "review_stale, review_duplicates, consolidate (create with memory_capture).",
            lambda c: c.platform.memory.manage(c.who, c.args),
        ),
        Tool(
            "apply_knowledge",
            "knowledge",
            "Admin: review, approve/reject, apply captured "
            "insights to the catalog (sink datahub) or a knowledge page (sink knowledge_page, "
            "found-or-created by slug), list changesets and roll them back.",
            lambda c: c.platform.knowledge.apply_knowledge(c.who, c.args),
        ),
        Tool(
            "datahub_get_entity",
            "datahub",
            "Get a catalog entity's metadata (name, description, platform, deprecation).",
            lambda c: c.platform.catalog.get_entity(c.args["urn"]),
        ),
        Tool(
            "datahub_get_schema",
            "datahub",
            "Get the schema (fields) of a dataset.",
            lambda c: c.platform.catalog.get_schema(c.args["urn"]),
        ),
        Tool(
            "datahub_get_queries",
            "datahub",
            "Get saved SQL queries linked to a dataset.",
            lambda c: c.platform.catalog.get_queries(c.args["urn"]),
        ),
        Tool(
            "datahub_get_glossary_term",
            "datahub",
            "Get a business glossary term's definition.",
            lambda c: c.platform.catalog.glossary_term(c.args["urn"]),
        ),
        Tool(
            "datahub_browse",
            "datahub",
            "Browse the catalog: what=tags, domains or data_products.",
            lambda c: c.platform.catalog.browse(c.args["what"], c.args.get("filter", "")),
        ),
        Tool(
            "trino_query",
            "trino",
            "Execute a read-only SQL query (Trino dialect; name tables "
            "fully qualified, e.g. memory.bench.orders).",
            _query,
            lambda out, c: sql_render.query_text(out, c.args.get("format")),
        ),
        Tool(
            "trino_describe_table",
            "trino",
            "Get a table's columns.",
            lambda c: c.platform.sql.describe_table(
                c.args["catalog"],
                c.args["schema"],
                c.args["table"],
                include_sample=bool(c.args.get("include_sample")),
            ),
            lambda out, c: sql_render.describe_text(out),
        ),
        Tool(
            "trino_browse",
            "trino",
            "Browse catalogs, schemas and tables. Omit all to list "
            "catalogs; catalog lists schemas; catalog and schema list tables.",
            lambda c: c.platform.sql.browse(
                c.args.get("catalog"), c.args.get("schema"), c.args.get("pattern")
            ),
            lambda out, c: sql_render.browse_text(out),
        ),
    ]
    return {t.name: t for t in table}


TOOLS: Final = _tools()


def error_result(error: ToolError) -> types.CallToolResult:
    """A structured tool error (the peer's error contract)."""
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=error.agent_text())],
        structured_content={"error": error.envelope()},
        is_error=True,
    )


def listing(who: Identity) -> list[types.Tool]:
    """The tools ``who`` may see, each schema offering the injected ``session_id``."""
    return list(_listing(who.admin))


@functools.cache
def _listing(admin: bool) -> tuple[types.Tool, ...]:
    # Built once per role: every session lists its tools, and the listing never changes.
    return tuple(
        types.Tool(
            name=t.name, description=t.description, input_schema=schemas.listed_schema(t.name)
        )
        for t in TOOLS.values()
        if admin or t.name not in ADMIN_TOOLS
    )


def call_tool(
    platform: Platform, who: Identity, name: str, raw: dict[str, Any] | None
) -> types.CallToolResult:
    """Run one tool call through the chain (see the module docstring)."""
    tool = TOOLS.get(name)
    if tool is None:
        return error_result(
            ToolError(
                f'unknown tool "{name}"',
                code="not_found",
                category="not_found",
                hint="List the tools and call one of them.",
            )
        )
    args = dict(raw or {})
    presented = args.pop("session_id") if ids.is_handle(args.get("session_id")) else None
    try:
        if name == INIT_TOOL:
            handle = platform.sessions.mint(who)
        else:
            handle = platform.sessions.resolve(who, presented)
        if name == "search":
            platform.sessions.record_discovery(who)
        if name in QUERY_TOOLS and not platform.sessions.discovered(who):
            raise search_required(name)
        if name in ADMIN_TOOLS and not who.admin:
            raise ToolError(
                f'the caller is not permitted to call "{name}"',
                code="unauthorized",
                category="authorization_denied",
                hint=f'Persona "{who.persona}" is not permitted to call "{name}". Request access '
                "from an administrator or use a tool your persona allows. This is an "
                "access-policy decision, not a platform outage.",
            )
    except ToolError as refusal:
        return error_result(refusal)  # refused before the audit layer: no audit row
    started = time.perf_counter()
    result, payload, failure = _run(tool, Call(platform, who, handle, args))
    enrichment = 0
    if failure is None:
        blocks = platform.enricher.blocks(who, handle, name, args, payload)
        extra = [json.dumps(b, ensure_ascii=False, separators=(",", ":")) for b in blocks]
        result.content.extend(types.TextContent(type="text", text=t) for t in extra)
        enrichment = sum(len(t) for t in extra)
        if blocks and isinstance(result.structured_content, dict):
            for block in blocks:
                result.structured_content.update(block)
    platform.audit.record(
        who=who,
        session_id=handle,
        tool=name,
        toolkit_kind=tool.kind,
        toolkit_name=TOOLKIT_NAMES.get(tool.kind, tool.kind),
        parameters=args,
        success=failure is None,
        error_message=failure.message if failure else "",
        duration_ms=int((time.perf_counter() - started) * 1000),
        enrichment_chars=enrichment,
        request_chars=len(json.dumps(args)),
        response_chars=sum(len(getattr(c, "text", "")) for c in result.content),
        content_blocks=len(result.content),
    )
    return result


def _run(tool: Tool, call: Call) -> tuple[types.CallToolResult, Any, ToolError | None]:
    """The handler's result (or its structured error), its payload, and the failure if any."""
    try:
        schemas.validate(tool.name, call.args)
        payload = tool.handler(call)
        text = tool.text(payload, call)
    except ToolError as exc:
        return error_result(exc), None, exc
    except PlatformError as exc:
        failure = ToolError(exc.message)
        return error_result(failure), None, failure
    structured = dict(payload) if isinstance(payload, dict) else None
    result = types.CallToolResult(
        content=[types.TextContent(type="text", text=text)],
        structured_content=structured,
    )
    return result, payload, None
