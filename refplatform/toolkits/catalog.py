"""The catalog toolkit: the ``datahub_*`` tools over the pack's entities, and the catalog writer.

Entities come from the pack's DataHub MCEs and live in the state file, so promotions
(``apply_knowledge`` description, tag and glossary-term changes) and their rollbacks
change what every later read sees. Result shapes follow what the peer's live platform
answered in the k=5 run: an entity is ``{urn, type, name, description?, platform}``
(plus ``deprecation`` when the pack deprecates it), a schema read
is ``{fields}`` (null when the pack has no ``schemaMetadata`` aspect, as DataHub does),
queries ``{queries, total}``, a browse ``{tags|domains|data_products}`` with empty
lists left out, and an unknown glossary term a ``{urn, name}`` shell.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Iterable
from typing import Any, Final

from benchledger.refplatform.errors import NotFound, ToolError
from benchledger.refplatform.store import StateStore, dumps

BROWSABLE: Final = ("tags", "domains", "data_products")
QUERY_CONNECTION: Final = "e2e-trino"
QUERY_CONNECTIONS: Final = ["e2e"]
_DATASET = re.compile(r"^urn:li:dataset:\(urn:li:dataPlatform:([^,]+),([^,]+),([^)]+)\)$")

# (table name) -> [(column, type)] or None; supplied by the SQL engine of the pack.
ColumnsOf = Callable[[str], list[tuple[str, str]] | None]


def query_table(urn: str) -> str:
    """The table a dataset URN names (``memory.bench.orders``), or ``""``."""
    match = _DATASET.match(urn)
    return match.group(2) if match else ""


def tag_name(tag: str) -> str:
    """``urn:li:tag:pii`` -> ``pii``."""
    return tag.removeprefix("urn:li:tag:")


def tag_urn(tag: str) -> str:
    """A tag name or URN as a tag URN."""
    return tag if tag.startswith("urn:li:tag:") else f"urn:li:tag:{tag}"


def term_urn(term: str) -> str:
    """A glossary term name or URN as a glossary term URN."""
    return term if term.startswith("urn:li:glossaryTerm:") else f"urn:li:glossaryTerm:{term}"


def entity_doc(
    *,
    urn: str,
    name: str,
    platform: str = "trino",
    description: str = "",
    custom_properties: dict[str, str] | None = None,
    tags: Iterable[str] = (),
    glossary_terms: Iterable[str] = (),
    owners: Iterable[str] = (),
    deprecation: dict[str, Any] | None = None,
    fields: list[dict[str, Any]] | None = None,
    column_descriptions: dict[str, str] | None = None,
    queries: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The stored form of one catalog entity."""
    return {
        "urn": urn,
        "name": name,
        "platform": platform,
        "description": description,
        "custom_properties": dict(custom_properties or {}),
        "tags": [tag_urn(t) for t in tags],
        "glossary_terms": [term_urn(t) for t in glossary_terms],
        "owners": list(owners),
        "deprecation": deprecation,
        "fields": fields,
        "column_descriptions": dict(column_descriptions or {}),
        "queries": list(queries or []),
    }


class Catalog:
    """Catalog entities and glossary terms: the DataHub read tools and the apply writer."""

    def __init__(self, store: StateStore, columns_of: ColumnsOf) -> None:
        self.store = store
        self.columns_of = columns_of

    # -- seeding and raw access -------------------------------------------------------------

    def seed(self, docs: Iterable[dict[str, Any]], terms: Iterable[dict[str, Any]]) -> None:
        """StateStore the pack's entities and glossary terms (inside the seeding transaction)."""
        with self.store.tx() as db:
            for seq, doc in enumerate(docs, 1):
                db.execute("INSERT INTO entities VALUES (?, ?, ?)", (doc["urn"], seq, dumps(doc)))
            for seq, term in enumerate(terms, 1):
                db.execute("INSERT INTO glossary VALUES (?, ?, ?)", (term["urn"], seq, dumps(term)))

    def doc(self, urn: str) -> dict[str, Any]:
        """An entity's stored document; NotFound if the catalog has no such entity."""
        with self.store.read() as db:
            row = db.execute("SELECT data FROM entities WHERE urn = ?", (urn,)).fetchone()
        if row is None:
            raise NotFound(f"entity not found: {urn}")
        doc: dict[str, Any] = json.loads(row[0])
        return doc

    def docs(self) -> list[dict[str, Any]]:
        """Every entity document, in pack order."""
        with self.store.read() as db:
            rows = db.execute("SELECT data FROM entities ORDER BY seq").fetchall()
        return [json.loads(r[0]) for r in rows]

    def terms(self) -> list[dict[str, Any]]:
        """Every glossary term of the pack, in pack order."""
        with self.store.read() as db:
            rows = db.execute("SELECT data FROM glossary ORDER BY seq").fetchall()
        return [json.loads(r[0]) for r in rows]

    def _save(self, doc: dict[str, Any]) -> None:
        with self.store.tx() as db:
            db.execute("UPDATE entities SET data = ? WHERE urn = ?", (dumps(doc), doc["urn"]))

    def urn_for_table(self, table: str) -> str:
        """The dataset URN whose query table is ``table`` (case-insensitive), or ``""``."""
        wanted = table.lower()
        for doc in self.docs():
            if query_table(doc["urn"]).lower() == wanted:
                return str(doc["urn"])
        return ""

    # -- the datahub_* tools ----------------------------------------------------------------

    def get_entity(self, urn: str) -> dict[str, Any]:
        """``datahub_get_entity``: the entity's own block (enrichment appends the rest)."""
        try:
            doc = self.doc(urn)
        except NotFound:
            raise ToolError(f"GetEntity failed for {urn}: entity not found") from None
        out: dict[str, Any] = {"urn": urn, "type": "DATASET", "name": doc["name"]}
        if doc["description"]:
            out["description"] = doc["description"]
        out["platform"] = doc["platform"]
        # The live platform's entity block carries no tags or custom properties (they
        # reach agents through semantic_context and datahub_browse); deprecation it does.
        if doc["deprecation"]:
            out["deprecation"] = doc["deprecation"]
        return out

    def get_schema(self, urn: str) -> dict[str, Any]:
        """``datahub_get_schema``: ``{fields}``, null without a ``schemaMetadata`` aspect."""
        try:
            doc = self.doc(urn)
        except NotFound:
            raise ToolError(f"schema not found for {urn}") from None
        fields = doc["fields"]
        if fields is None:
            return {"fields": None}
        described = doc["column_descriptions"]
        out = []
        for field in fields:
            item = dict(field)
            if field["name"] in described:
                item["description"] = described[field["name"]]
            out.append(item)
        return {"fields": out}

    def get_queries(self, urn: str) -> dict[str, Any]:
        """``datahub_get_queries``: the pack's saved queries about a dataset (null if none)."""
        try:
            queries = self.doc(urn)["queries"]
        except NotFound:
            raise ToolError(f"queries not found for {urn}") from None
        return {"queries": queries or None, "total": len(queries)}

    def browse(self, what: str, text_filter: str = "") -> dict[str, Any]:
        """``datahub_browse``: tags (optionally filtered), domains or data products."""
        if what not in BROWSABLE:
            raise ToolError(f'invalid what "{what}": must be one of: ' + ", ".join(BROWSABLE))
        if what != "tags":
            return {}  # the pack declares no domains or data products
        seen: dict[str, dict[str, str]] = {}
        for doc in self.docs():
            for tag in doc["tags"]:
                name = tag_name(tag)
                if text_filter.lower() in name.lower():
                    seen.setdefault(tag, {"urn": tag, "name": name})
        return {"tags": list(seen.values())} if seen else {}

    def glossary_term(self, urn: str) -> dict[str, Any]:
        """``datahub_get_glossary_term``: a pack term, or DataHub's ``{urn, name}`` shell."""
        for term in self.terms():
            if term["urn"] == urn:
                return {k: v for k, v in term.items() if v not in (None, "", [], {})}
        return {"urn": urn, "name": urn.rsplit(":", 1)[-1]}

    # -- enrichment views -------------------------------------------------------------------

    def semantic_context(self, urn: str) -> dict[str, Any]:
        """The ``semantic_context`` enrichment of a table's entity."""
        doc = self.doc(urn)
        return {
            "deprecation": doc["deprecation"],
            "description": doc["description"],
            "domain": None,
            "owners": doc["owners"] or None,
            "quality_score": None,
            "tags": [tag_name(t) for t in doc["tags"]] or None,
            "urn": urn,
        }

    def query_context(self, urn: str) -> dict[str, Any] | None:
        """The ``query_context`` entry of a dataset: whether and how it can be queried."""
        table = query_table(urn)
        columns = self.columns_of(table) if table else None
        if columns is None:
            return None
        return {
            "available": True,
            "query_table": table,
            "connection": QUERY_CONNECTION,
            "available_connections": list(QUERY_CONNECTIONS),
            "schema_preview": [{"name": n, "type": t} for n, t in columns],
            "total_columns": len(columns),
        }

    # -- the apply writer -------------------------------------------------------------------

    def metadata(self, urn: str) -> dict[str, Any]:
        """The entity's current ``{description, tags, glossary_terms, owners}`` (apply's image)."""
        doc = self.doc(urn)
        return {
            "description": doc["description"],
            "tags": list(doc["tags"]),
            "glossary_terms": list(doc["glossary_terms"]),
            "owners": list(doc["owners"]),
        }

    def set_description(self, urn: str, text: str) -> None:
        """Replace the entity-level description."""
        with self.store.tx():
            doc = self.doc(urn)
            doc["description"] = text
            self._save(doc)

    def set_column_description(self, urn: str, field: str, text: str) -> None:
        """Set one column's description."""
        with self.store.tx():
            doc = self.doc(urn)
            doc["column_descriptions"][field] = text
            self._save(doc)

    def change_tags(self, urn: str, add: Iterable[str], remove: Iterable[str]) -> None:
        """Add and remove tags in one write."""
        with self.store.tx():
            doc = self.doc(urn)
            gone = {tag_urn(t) for t in remove}
            tags = [t for t in doc["tags"] if t not in gone]
            tags += [t for t in (tag_urn(a) for a in add) if t not in tags]
            doc["tags"] = tags
            self._save(doc)

    def change_terms(self, urn: str, add: Iterable[str], remove: Iterable[str]) -> None:
        """Add and remove glossary terms in one write."""
        with self.store.tx():
            doc = self.doc(urn)
            gone = {term_urn(t) for t in remove}
            terms = [t for t in doc["glossary_terms"] if t not in gone]
            terms += [t for t in (term_urn(a) for a in add) if t not in terms]
            doc["glossary_terms"] = terms
            self._save(doc)
