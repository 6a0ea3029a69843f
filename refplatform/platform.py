"""The platform: one state store over one seed pack, and the toolkits that work on it.

``Platform`` is the composition root. It opens (or creates) the state, seeds it from
the pack exactly once (catalog entities and glossary terms from the DataHub MCEs,
knowledge pages from ``knowledge_pages.sql``; SQL runs on the pack's own engine), and
hands the same store to every toolkit, so the one lock of ``StateStore`` covers them all.
A state file remembers the pack it was seeded from and refuses another.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Final

from benchledger.refplatform import times
from benchledger.refplatform.audit import Audit
from benchledger.refplatform.embedder import Embedder, LexicalEmbedder
from benchledger.refplatform.enrichment import Enricher
from benchledger.refplatform.errors import PlatformError, Unavailable
from benchledger.refplatform.packs import Pack, default_pack
from benchledger.refplatform.pages import PageStore
from benchledger.refplatform.sessions import Sessions
from benchledger.refplatform.store import StateStore
from benchledger.refplatform.toolkits.catalog import Catalog, entity_doc
from benchledger.refplatform.toolkits.knowledge import Knowledge
from benchledger.refplatform.toolkits.memory import SIMILAR_AT, SUPERSEDE_AT, Memory
from benchledger.refplatform.toolkits.search import Search
from benchledger.refplatform.toolkits.sql import SqlEngine
from benchledger.refplatform.toolkits.sql_trino import CATALOG

VERSION: Final = "refplatform-2.0"
NAME: Final = "mcp-data-platform"
IMPLEMENTATION: Final = "benchledger-refplatform"

__all__ = ["IMPLEMENTATION", "NAME", "SIMILAR_AT", "SUPERSEDE_AT", "VERSION", "Platform"]


def _seed_entity(entity: Any) -> dict[str, Any]:
    deprecation = entity.deprecation
    fields = None
    if entity.has_schema_metadata:
        fields = [
            {"name": f.path, "type": f.type, "native_type": f.type, "description": f.description}
            for f in entity.fields
            if f.type
        ]
    return entity_doc(
        urn=entity.urn,
        name=entity.name,
        platform=entity.platform or "trino",
        description=entity.description,
        custom_properties=dict(entity.custom_properties),
        tags=entity.tags,
        glossary_terms=entity.glossary_terms,
        owners=[o.urn for o in entity.owners],
        deprecation=None
        if deprecation is None
        else {
            "deprecated": deprecation.deprecated,
            "note": deprecation.note,
            "actor": deprecation.actor,
        },
        fields=fields,
        column_descriptions={f.path: f.description for f in entity.fields if f.description},
        queries=[
            {
                "urn": q.urn,
                "name": q.name,
                "query": q.statement,
                "language": q.language,
                "description": q.description,
            }
            for q in entity.queries
        ],
    )


class Platform:
    """The reference platform's state and toolkits over one pack (thread-safe)."""

    def __init__(
        self,
        path: str = ":memory:",
        *,
        pack: Pack | None = None,
        embedder: Embedder | None = None,
        clock: Callable[[], int] = time.time_ns,
        sql: SqlEngine | None = None,
    ) -> None:
        self.pack = pack or (sql.pack if sql is not None else default_pack())
        self.embedder: Embedder = embedder or LexicalEmbedder()
        self.store = StateStore(path, clock=clock)
        # Another engine than the default (the tests' shorter time bounds) runs this pack.
        self.sql = sql if sql is not None else SqlEngine(self.pack)
        self.pages = PageStore(self.store)
        self.catalog = Catalog(self.store, self.columns_of)
        self.memory = Memory(self.store, self.embedder)
        self.knowledge = Knowledge(self.store, self.memory, self.catalog, self.pages)
        self.search = Search(self.store, self.embedder, self.memory, self.catalog, self.pages)
        self.sessions = Sessions(self.store)
        self.audit = Audit(self.store)
        self.enricher = Enricher(self.catalog, self.memory, self.pages, self.sessions)
        try:
            self._seed_once()
        except BaseException:
            self.close()
            raise

    def columns_of(self, table: str) -> list[tuple[str, str]] | None:
        """A ``catalog.schema.table``'s ``(column, Trino type)`` list, or None if unknown."""
        catalog, _, rest = table.partition(".")
        schema, _, name = rest.partition(".")
        if catalog != CATALOG or not name:
            return None
        columns = self.sql.columns(schema, name)
        return None if columns is None else [(c.name, c.type) for c in columns]

    def _seed_once(self) -> None:
        seeded = self.store.meta("pack_hash")
        if seeded is not None:
            if seeded != self.pack.pack_hash:
                raise PlatformError(
                    f"the state was seeded from another pack (hash {seeded[:12]}); pass the pack "
                    f"it was seeded from, or a fresh state file instead of {self.pack.path}"
                )
            return
        with self.store.tx():
            self.catalog.seed(
                [_seed_entity(e) for e in self.pack.entities],
                [
                    {
                        "urn": t.urn,
                        "name": t.name,
                        "description": t.definition,
                        "parent": t.parent or None,
                    }
                    for t in self.pack.glossary_terms
                ],
            )
            for page in self.pack.pages:
                at = times.parse(page.created_at) if page.created_at else None
                self.pages.create(
                    page_id=page.id,
                    slug=page.slug,
                    title=page.title,
                    summary=page.summary,
                    body=page.body,
                    tags=page.tags,
                    author=page.created_email or page.created_by or "seed",
                    created_at=at,
                )
            self.store.set_meta("pack_hash", self.pack.pack_hash)

    def reset(self) -> int:
        """Back to the state a fresh server starts in: every table emptied (memories,
        changesets, pages, sessions, audit, id counters) and seeded again from the pack, in
        one transaction; the number of memory records it held."""
        with self.store.tx() as db:
            held = int(db.execute("SELECT COUNT(*) FROM records").fetchone()[0])
            tables = db.execute(
                "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
            ).fetchall()
            for (name,) in tables:
                db.execute(f'DELETE FROM "{name}"')  # names from the schema itself
            self._seed_once()  # joins this transaction
        return held

    def ready(self) -> None:
        """Block until every part can answer; Unavailable (one line) when one cannot start."""
        fault = self.sql.ready()
        if fault:
            raise Unavailable(f"the SQL engine cannot run queries: {fault}")

    def close(self) -> None:
        """Release the state and the SQL engine."""
        closer = getattr(getattr(self, "sql", None), "close", None)
        if closer is not None:
            closer()
        self.store.close()
