"""The search toolkit: ``search`` (relevance across sources, or browse one) and ``fetch``.

As in the peer (search/toolkit.go): ``search`` needs ``intent`` or ``entity_urns``
(neither, with exactly one browsable source, enumerates it instead); ``limit`` is a
TOTAL display budget across sources (default 10, max 50) shared out round-robin so no
source crowds out the rest; ``coverage`` says per source how many matched and how many
are shown; requested source names it does not know come back in ``unknown_sources``
instead of failing. ``entity_urns`` adds everything linked to those entities.

Sources served here: ``catalog`` (the pack's entities), ``governance`` (its glossary
terms), ``knowledge_pages``, ``memory`` (the caller's own live records) and
``insights`` (the caller's own insights under review plus every applied insight of
anyone: applied knowledge is the organisation's). The peer's other sources (prompts,
API endpoints, connections, assets, ...) are known names with nothing in them here.
Scores are normalised per source so its best hit scores 1, as the peer reports them.
"""

from __future__ import annotations

import sqlite3
from typing import Any, Final

from benchledger.refplatform import records
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.embedder import Embedder, LexicalEmbedder, Vector, cosine
from benchledger.refplatform.errors import EmbedderError, NotFound, ToolError
from benchledger.refplatform.pages import PageStore
from benchledger.refplatform.store import StateStore
from benchledger.refplatform.toolkits.catalog import Catalog, query_table
from benchledger.refplatform.toolkits.memory import Memory

KNOWN_SOURCES: Final = (
    "catalog",
    "governance",
    "context_documents",
    "knowledge_pages",
    "memory",
    "insights",
    "feedback",
    "assets",
    "resources",
    "prompts",
    "scripts",
    "calls",
    "sessions",
    "endpoints",
    "connections",
)
SERVED: Final = ("catalog", "governance", "knowledge_pages", "memory", "insights")
BROWSABLE: Final = ("knowledge_pages", "context_documents")
DEFAULT_LIMIT, MAX_LIMIT = 10, 50
BROWSE_DEFAULT, BROWSE_MAX = 50, 100
NOT_FOUND_MESSAGE: Final = (
    "no content found for this reference; it may be stale, not a recognized reference form, "
    "or outside what you can access"
)
_LEXICAL = LexicalEmbedder()


class Search:
    """Ranked discovery over the platform's sources, and dereferencing of their references."""

    def __init__(
        self,
        store: StateStore,
        embedder: Embedder,
        memory: Memory,
        catalog: Catalog,
        pages: PageStore,
    ) -> None:
        self.store = store
        self.embedder = embedder
        self.memory = memory
        self.catalog = catalog
        self.pages = pages
        # Page and entity texts change only on apply/rollback; a search must not re-embed
        # every one of them (with Ollama each embed is an HTTP call).
        self._vectors: dict[str, Vector] = {}

    def _vector(self, text: str) -> Vector | None:
        cached = self._vectors.get(text)
        if cached is None:
            try:
                cached = self._vectors[text] = self.embedder.embed(text)
            except EmbedderError:
                return None
        return cached

    def _score(self, query: str, qv: Vector | None, text: str) -> float:
        if qv is not None:
            tv = self._vector(text)
            if tv is not None:
                return cosine(qv, tv)
        return cosine(_LEXICAL.embed(query), _LEXICAL.embed(text))

    def rank_pages(self, query: str) -> list[dict[str, Any]]:
        """Live knowledge pages scored against ``query``, best first (the portal's search)."""
        qv = self._vector(query)
        scored = []
        for page in self.pages.live():
            score = self._score(query, qv, f"{page['title']}\n{page['summary']}\n{page['body']}")
            if score > 0:
                scored.append((score, page))
        scored.sort(key=lambda sp: -sp[0])
        return [{"page": page, "score": score} for score, page in scored]

    # -- search -----------------------------------------------------------------------------

    def search(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """``search``: balanced, grouped relevance across sources (or a browse; see module)."""
        text = str(args.get("intent") or "").strip()
        context = str(args.get("context") or "").strip()
        if context:
            text = f"{text}\n{context}".strip()
        urns = [u for u in args.get("entity_urns") or [] if u]
        if not text and not urns:
            return self._browse(args)
        requested = [s.strip() for s in args.get("sources") or [] if s.strip()]
        unknown = [s for s in requested if s not in KNOWN_SOURCES]
        chosen = [s for s in SERVED if not requested or s in requested]
        limit = _clamp(args.get("limit"), DEFAULT_LIMIT, MAX_LIMIT)
        status = str(args.get("status") or "").strip()
        qv: Vector | None = None
        ranking = "lexical"
        if text:
            qv = self._vector(text)
            if qv is not None and not isinstance(self.embedder, LexicalEmbedder):
                ranking = "hybrid"
        found: dict[str, list[tuple[float, dict[str, Any]]]] = {}
        for source in chosen:
            hits = getattr(self, f"_{source}")(who, text, qv, set(urns), status)
            hits = [(s, h) for s, h in hits if s > 0]
            if hits:
                hits.sort(key=lambda sh: (-sh[0], sh[1]["ref"]))
                found[source] = hits
        groups, coverage = _allocate(found, limit)
        out: dict[str, Any] = {
            "groups": groups,
            "coverage": coverage,
            "count": sum(len(g["hits"]) for g in groups),
            "ranking": ranking,
        }
        if unknown:
            out["unknown_sources"] = unknown
        return out

    def _catalog(
        self, who: Identity, text: str, qv: Vector | None, urns: set[str], status: str
    ) -> list[tuple[float, dict[str, Any]]]:
        hits = []
        for doc in self.catalog.docs():
            table = query_table(doc["urn"]) or doc["name"]
            shown = f"{table}\n{doc['description']}" if doc["description"] else doc["name"]
            score = self._score(text, qv, f"{shown}\n{doc['name']}") if text else 0.0
            if doc["urn"] in urns:
                score = max(score, 1.0)
            hit = {
                "text": shown,
                "source": "catalog",
                "ref": doc["urn"],
                "score": score,
                "entity_urns": [doc["urn"]],
                "reference": doc["urn"],
            }
            hits.append((score, hit))
        return hits

    def _governance(
        self, who: Identity, text: str, qv: Vector | None, urns: set[str], status: str
    ) -> list[tuple[float, dict[str, Any]]]:
        hits = []
        for term in self.catalog.terms():
            shown = f"{term.get('name', '')}\n{term.get('description', '')}".strip()
            score = self._score(text, qv, shown) if text else 0.0
            hit = {
                "text": shown,
                "source": "governance",
                "ref": term["urn"],
                "score": score,
                "reference": term["urn"],
            }
            hits.append((score, hit))
        return hits

    def _knowledge_pages(
        self, who: Identity, text: str, qv: Vector | None, urns: set[str], status: str
    ) -> list[tuple[float, dict[str, Any]]]:
        hits = []
        for page in self.pages.live():
            linked = self.pages.entity_urns(page["id"])
            shown = f"{page['title']}\n{page['summary']}"
            score = self._score(text, qv, f"{shown}\n{page['body']}") if text else 0.0
            if urns & set(linked):
                score = max(score, 1.0)
            hit: dict[str, Any] = {
                "text": shown,
                "source": "knowledge_pages",
                "ref": page["id"],
                "score": score,
            }
            if linked:
                hit["entity_urns"] = linked
            hit["reference"] = f"mcp:knowledge_page:{page['id']}"
            hits.append((score, hit))
        return hits

    def _rows(self, sql: str, args: tuple[Any, ...]) -> list[sqlite3.Row]:
        with self.store.read() as db:
            return db.execute(sql, args).fetchall()

    def _memory(
        self, who: Identity, text: str, qv: Vector | None, urns: set[str], status: str
    ) -> list[tuple[float, dict[str, Any]]]:
        rows = self._rows(
            "SELECT * FROM records WHERE created_by = ? AND status = ? AND insight = 0",
            (who.email, records.ACTIVE),
        )
        hits = []
        for row in rows:
            linked = records.urns(row)
            score = self.memory.score(text, qv, row) if text else 0.0
            if urns & set(linked):
                score = max(score, 1.0)
            hit: dict[str, Any] = {
                "text": row["content"],
                "source": "memory",
                "ref": row["id"],
                "score": score,
            }
            if linked:
                hit["entity_urns"] = linked
            hit["dimension"] = row["dimension"]
            hit["reference"] = f"mcp:memory:{row['id']}"
            hits.append((score, hit))
        return hits

    def _insights(
        self, who: Identity, text: str, qv: Vector | None, urns: set[str], status: str
    ) -> list[tuple[float, dict[str, Any]]]:
        # Own insights still in play, plus everyone's applied ones (organisation knowledge).
        rows = self._rows(
            "SELECT * FROM records WHERE insight = 1 AND status = ? AND "
            "(insight_status = ? OR (created_by = ? AND insight_status IN (?, ?)))",
            (records.ACTIVE, records.APPLIED, who.email, records.PENDING, records.APPROVED),
        )
        if status:
            rows = [r for r in rows if r["insight_status"] == status]
        hits = []
        for row in rows:
            linked = records.urns(row)
            score = self.memory.score(text, qv, row) if text else 0.0
            if urns & set(linked):
                score = max(score, 1.0)
            hit = {
                "text": row["content"],
                "source": "insights",
                "ref": row["id"],
                "score": score,
                "status": row["insight_status"],
                "entity_urns": linked,
                "captured_by": row["created_by"],
                "reference": f"mcp:insight:{row['id']}",
            }
            hits.append((score, hit))
        return hits

    def _browse(self, args: dict[str, Any]) -> dict[str, Any]:
        sources = [s.strip() for s in args.get("sources") or [] if s.strip()]
        if len(sources) != 1:
            raise ToolError(
                "provide intent or entity_urns to search, or exactly one `sources` entry (with no "
                f"intent/entity_urns) to browse it; browsable sources: {', '.join(BROWSABLE)}"
            )
        source = sources[0]
        if source not in KNOWN_SOURCES:
            raise ToolError(f'unknown source "{source}"; known sources: {", ".join(KNOWN_SOURCES)}')
        if source not in BROWSABLE:
            raise ToolError(
                f'source "{source}" cannot be enumerated here; browsable sources: '
                + ", ".join(BROWSABLE)
            )
        offset = max(0, int(args.get("offset") or 0))
        limit = _clamp(args.get("limit"), BROWSE_DEFAULT, BROWSE_MAX)
        items: list[dict[str, Any]] = []
        if source == "knowledge_pages":
            for page in self.pages.live():
                items.append(
                    {
                        "text": f"{page['title']}\n{page['summary']}",
                        "source": source,
                        "ref": page["id"],
                        "score": 0,
                        "reference": f"mcp:knowledge_page:{page['id']}",
                    }
                )
        window = items[offset : offset + limit]
        return {
            "source": source,
            "total": len(items),
            "offset": offset,
            "limit": limit,
            "count": len(window),
            "items": window,
        }

    # -- fetch ------------------------------------------------------------------------------

    def fetch(self, who: Identity, reference: str) -> dict[str, Any]:
        """``fetch``: a reference's full content, or ``found: false`` (never an error)."""
        ref = reference.strip()
        if not ref:
            raise ToolError("fetch requires a reference")
        try:
            document = self._document(who, ref)
        except NotFound:
            document = None
        if document is None:
            return {"found": False, "reference": ref, "message": NOT_FOUND_MESSAGE}
        return {"found": True, "reference": ref, "document": document}

    def _document(self, who: Identity, ref: str) -> dict[str, Any] | None:
        if ref.startswith("mcp:knowledge_page:"):
            page = self.pages.get(ref.removeprefix("mcp:knowledge_page:"))
            return {
                "reference": ref,
                "kind": "knowledge_page",
                "id": page["id"],
                "title": page["title"],
                "summary": page["summary"],
                "content": page["body"],
                "tags": page["tags"],
                "entity_urns": self.pages.entity_urns(page["id"]),
                "updated_at": page["updated_at"],
            }
        if ref.startswith("urn:li:glossaryTerm:"):
            term = self.catalog.glossary_term(ref)
            return {
                "reference": ref,
                "kind": "glossary_term",
                "id": ref,
                "title": term.get("name", ""),
                "content": term.get("description", ""),
            }
        if ref.startswith("urn:li:dataset:"):
            doc = self.catalog.doc(ref)
            return {
                "reference": ref,
                "kind": "dataset",
                "id": ref,
                "title": doc["name"],
                "content": doc["description"],
                "query_table": query_table(ref),
                "knowledge_pages": self.pages.pages_for([ref], 5),
            }
        for prefix, kind in (("mcp:insight:", "insight"), ("mcp:memory:", "memory")):
            if ref.startswith(prefix):
                row = self.memory.row(ref.removeprefix(prefix))
                mine = row["created_by"] == who.email
                shared = row["insight"] and row["insight_status"] == records.APPLIED
                if not (mine or shared) or (kind == "insight") != bool(row["insight"]):
                    return None
                doc = {
                    "reference": ref,
                    "kind": kind,
                    "id": row["id"],
                    "content": row["content"],
                    "entity_urns": records.urns(row),
                    "created_at": records.record_view(row)["created_at"],
                }
                if kind == "insight":
                    doc.update(status=row["insight_status"], captured_by=row["created_by"])
                return doc
        return None


def _clamp(value: Any, default: int, most: int) -> int:
    try:
        n = int(value or 0)
    except (TypeError, ValueError):
        n = 0
    return default if n <= 0 else min(n, most)


def _allocate(
    found: dict[str, list[tuple[float, dict[str, Any]]]], budget: int
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Share ``budget`` round-robin across sources (best source first); normalise scores."""
    order = sorted(found, key=lambda s: (-found[s][0][0], s))
    shown = dict.fromkeys(order, 0)
    left = budget
    while left > 0:
        progressed = False
        for source in order:
            if left and shown[source] < len(found[source]):
                shown[source] += 1
                left -= 1
                progressed = True
        if not progressed:
            break
    groups, coverage = [], []
    for source in order:
        top = found[source][0][0]
        hits = []
        for score, hit in found[source][: shown[source]]:
            normalised = score / top if top else 0.0
            hit["score"] = 1 if normalised >= 1 else round(normalised, 12)
            hits.append(hit)
        groups.append({"source": source, "hits": hits})
        coverage.append({"source": source, "matched": len(found[source]), "shown": shown[source]})
    return groups, coverage
