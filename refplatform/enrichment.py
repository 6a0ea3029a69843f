"""Cross-enrichment: the JSON blocks the peer appends to successful trino_/datahub_ results.

Read from the peer's middlewares (mcp_enrichment.go, memory_enrichment.go,
knowledge_enrichment.go) and from what its live platform appended in the k=5 run, in
this order, each a separate text block after the tool's own:

1. semantic context: a ``trino_query``/``trino_describe_table`` result gets
   ``{"semantic_context": {...}, "additional_tables": [...]}`` for the tables it names,
   or ``{"metadata_reference": {...}}`` when this session was already given them; a
   ``datahub_get_entity``/``_schema``/``_queries`` result gets ``{"query_context": ...}``;
2. ``{"memory_context": [...]}``: up to 5 of the caller's records (the admin key: its
   persona's, as the peer's; toolkits/memory.py ``visible``) linked to any URN in
   the result so far, summary-first (280 bytes) under a byte budget, the rest as
   ``memory_context_omitted`` stubs;
3. ``{"knowledge_pages": [...]}``: pages referencing the URNs of the tool's OWN block;
4. ``{"discovery_note": ...}`` when enrichment was applied before the user ever searched.

So a client must read a result's entity from its first block, never the joined text.
"""

from __future__ import annotations

import re
from typing import Any, Final

from benchledger.refplatform.auth import Identity
from benchledger.refplatform.pages import PageStore
from benchledger.refplatform.sessions import Sessions
from benchledger.refplatform.times import rfc3339
from benchledger.refplatform.toolkits.catalog import Catalog, query_table
from benchledger.refplatform.toolkits.memory import Memory

MEMORY_LIMIT: Final = 5
SUMMARY_BYTES: Final = 280
MEMORY_BUDGET_BYTES: Final = 1200
KEY_OVERHEAD: Final = 120
PAGE_LIMIT, PAGE_URN_LIMIT = 5, 10
DEDUP_NOTE: Final = (
    "Full semantic metadata was provided earlier in this session. Refer to previous responses "
    "for column descriptions, tags, owners, and glossary terms."
)
DISCOVERY_NOTE: Final = (
    "Note: No discovery has been performed in this session yet. Call search to understand the "
    "business context, ownership, and data quality of the tables you are querying."
)
# Starts only at a word's start, possessive where runs meet: linear in the SQL's length
# (trying every position inside one long identifier was quadratic: 8,000 characters, 4.7 s).
_QUALIFIED = re.compile(r'(?<!\w)"?(\w++)"?\s*+\.\s*+"?(\w++)"?\s*+\.\s*+"?(\w++)"?')


def urns_in(value: Any, found: list[str] | None = None) -> list[str]:
    """Every DataHub URN string inside a JSON value, in order, once each."""
    out = [] if found is None else found
    if isinstance(value, str):
        if value.startswith("urn:li:") and 10 < len(value) < 500 and value not in out:
            out.append(value)
    elif isinstance(value, dict):
        for item in value.values():
            urns_in(item, out)
    elif isinstance(value, list):
        for item in value:
            urns_in(item, out)
    return out


def _summary(content: str) -> tuple[str, bool]:
    text = content.strip()
    para, sep, _ = text.partition("\n\n")
    if sep and para.strip() and len(para.strip().encode()) <= SUMMARY_BYTES:
        return para.strip(), True
    raw = text.encode()
    if len(raw) <= SUMMARY_BYTES:
        return text, False
    return raw[:SUMMARY_BYTES].decode("utf-8", "ignore").strip(), True


class Enricher:
    """Builds the appended blocks for one successful tool result."""

    def __init__(
        self, catalog: Catalog, memory: Memory, pages: PageStore, sessions: Sessions
    ) -> None:
        self.catalog = catalog
        self.memory = memory
        self.pages = pages
        self.sessions = sessions

    def blocks(
        self, who: Identity, handle: str, tool: str, args: dict[str, Any], payload: Any
    ) -> list[dict[str, Any]]:
        """The blocks to append after ``payload`` (empty for tools that are not enriched)."""
        if not tool.startswith(("trino_", "datahub_")):
            return []
        own_urns = urns_in(payload) if isinstance(payload, (dict, list)) else []
        blocks: list[dict[str, Any]] = []
        semantic = self._semantic(handle, tool, args)
        if semantic:
            blocks.append(semantic)
        memory = self._memory_block(who, urns_in([payload, blocks]))
        if memory:
            blocks.append(memory)
        pages = self.pages.pages_for(own_urns[:PAGE_URN_LIMIT], PAGE_LIMIT)
        if pages:
            blocks.append({"knowledge_pages": pages})
        if blocks and not self.sessions.discovered(who):
            blocks.append({"discovery_note": DISCOVERY_NOTE})
        return blocks

    def _semantic(self, handle: str, tool: str, args: dict[str, Any]) -> dict[str, Any] | None:
        if tool in ("datahub_get_entity", "datahub_get_schema", "datahub_get_queries"):
            urn = str(args.get("urn", ""))
            context = self.catalog.query_context(urn) if query_table(urn) else None
            return {"query_context": {urn: context}} if context else None
        if tool == "trino_query":
            tables = self._tables_in(str(args.get("sql", "")))
        elif tool == "trino_describe_table":
            name = ".".join(str(args.get(k, "")) for k in ("catalog", "schema", "table"))
            tables = self._tables_in(name)
        else:
            return None
        if not tables:
            return None
        if not self.sessions.first_time(handle, [t for t, _ in tables]):
            return {"metadata_reference": {"note": DEDUP_NOTE, "tables": [t for t, _ in tables]}}
        block: dict[str, Any] = {"semantic_context": self.catalog.semantic_context(tables[0][1])}
        if len(tables) > 1:
            block["additional_tables"] = [
                {"description": self.catalog.doc(urn)["description"], "table": table, "urn": urn}
                for table, urn in tables[1:]
            ]
        return block

    def _tables_in(self, sql: str) -> list[tuple[str, str]]:
        """The catalog tables a statement names fully qualified, with their URNs, in order."""
        found: list[tuple[str, str]] = []
        for match in _QUALIFIED.finditer(sql):
            name = ".".join(match.groups()).lower()
            urn = self.catalog.urn_for_table(name)
            if urn and all(name != t for t, _ in found):
                found.append((query_table(urn), urn))
        return found

    def _memory_block(self, who: Identity, urns: list[str]) -> dict[str, Any] | None:
        if not urns:
            return None
        rendered: list[dict[str, Any]] = []
        omitted: list[dict[str, str]] = []
        seen: set[str] = set()
        used = 0
        for row in self.memory.for_entities(urns, who, MEMORY_LIMIT):
            key = " ".join(row["content"].lower().split())
            if key in seen:
                continue
            seen.add(key)
            summary, truncated = _summary(row["content"])
            item: dict[str, Any] = {
                "id": row["id"],
                "reference": f"mcp:memory:{row['id']}",
                "summary": summary,
            }
            if truncated:
                item["truncated"] = True
            item.update(
                dimension=row["dimension"],
                category=row["category"],
                confidence=row["confidence"],
                created_at=rfc3339(row["created_at"]),
            )
            # Estimated serialized size: id, reference, summary, labels and key overhead.
            size = len(item["id"]) + len(item["reference"]) + len(summary) + 30 + KEY_OVERHEAD
            if rendered and used + size > MEMORY_BUDGET_BYTES:
                omitted.append({"id": row["id"], "reference": item["reference"]})
                continue
            used += size
            rendered.append(item)
        if not rendered:
            return None
        block: dict[str, Any] = {"memory_context": rendered}
        if omitted:
            block["memory_context_note"] = (
                f"{len(omitted)} additional related memory record(s) omitted to stay within the "
                "enrichment budget; fetch any by its reference in memory_context_omitted for full "
                "detail."
            )
            block["memory_context_omitted"] = omitted
        return block
