"""The reference memory platform's state and rules: records, insights, changesets, sinks.

One SQLite database (a file, or in memory) holds everything. Every public method is
one transaction under one lock, so a failing call writes nothing. Ids come from a
per-database counter (hashed to look like the peer's 32-hex ids), so two fresh
platforms given the same calls hand out the same ids.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, Final

from protocols import dataset
from refplatform.embedder import Embedder, LexicalEmbedder, Vector, cosine
from refplatform.errors import Conflict, Forbidden, NotFound, PlatformError
from refplatform.identity import Identity

VERSION: Final = "refplatform-1.0"
INSIGHT_TYPES: Final = ("business_knowledge", "schema_entity", "operational_rule")
MEMORY_TYPES: Final = ("preference", "note")
STATUSES: Final = ("pending", "approved", "rejected", "applied", "superseded")
TRANSITIONS: Final = {
    "pending": ("approved", "rejected", "superseded"),
    "approved": ("applied", "rejected"),
    "applied": ("pending",),
}
SUPERSEDE_AT: Final = 0.90
SIMILAR_AT: Final = 0.75
SOURCES: Final = ("memory", "insights", "knowledge_pages", "catalog")
MIN_CONTENT, MAX_CONTENT, MAX_URNS = 10, 4000, 10

_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS records (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, type TEXT NOT NULL, content TEXT NOT NULL,
    category TEXT NOT NULL, entity_urns TEXT NOT NULL, captured_by TEXT NOT NULL,
    status TEXT NOT NULL, insight INTEGER NOT NULL, created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL, review_notes TEXT NOT NULL DEFAULT '',
    superseded_by TEXT NOT NULL DEFAULT '', forgotten INTEGER NOT NULL DEFAULT 0,
    embedding TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS records_by_owner ON records (captured_by, forgotten);
CREATE TABLE IF NOT EXISTS changesets (
    id TEXT PRIMARY KEY, seq INTEGER NOT NULL, target_urn TEXT NOT NULL, change_type TEXT NOT NULL,
    sink TEXT NOT NULL, source_insight_ids TEXT NOT NULL, previous TEXT NOT NULL,
    applied TEXT NOT NULL, rolled_back INTEGER NOT NULL DEFAULT 0, created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL, rolled_back_at INTEGER
);
CREATE TABLE IF NOT EXISTS entities (
    urn TEXT PRIMARY KEY, name TEXT NOT NULL, description TEXT NOT NULL, columns TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS pages (
    id TEXT PRIMARY KEY, slug TEXT UNIQUE NOT NULL, title TEXT NOT NULL, summary TEXT NOT NULL,
    body TEXT NOT NULL, entity_urn TEXT NOT NULL, created_by TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS handles (handle TEXT PRIMARY KEY, email TEXT NOT NULL);
"""


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def rfc3339(ns: int) -> str:
    """Nanoseconds since the epoch as RFC 3339 UTC with microseconds."""
    stamp = _EPOCH + dt.timedelta(microseconds=ns // 1000)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def parse_time(value: str, field: str) -> int:
    """RFC 3339 text -> nanoseconds; PlatformError naming ``field`` if it is not a time."""
    try:
        stamp = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        raise PlatformError(f"{field}: {value!r} is not an RFC 3339 time") from None
    if stamp.tzinfo is None:
        stamp = stamp.replace(tzinfo=dt.UTC)
    return (stamp - _EPOCH) // dt.timedelta(microseconds=1) * 1000


def _hit(text: str, ref: str, score: float, status: str, urns: list[str]) -> dict[str, Any]:
    return {
        "text": text,
        "ref": ref,
        "score": round(score, 6),
        "status": status,
        "entity_urns": urns,
    }


def _check_paging(page: int, per_page: int) -> None:
    if page < 1 or not 1 <= per_page <= 500:
        raise PlatformError("page must be >= 1 and per_page 1..500")


def _envelope(
    rows: list[sqlite3.Row], page: int, per_page: int, render: Callable[[sqlite3.Row], Any]
) -> dict[str, Any]:
    """One page of ``rows`` in the admin API's ``{data, total, page, per_page}`` envelope."""
    start = (page - 1) * per_page
    data = [render(r) for r in rows[start : start + per_page]]
    return {"data": data, "total": len(rows), "page": page, "per_page": per_page}


def _json(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"))


class Platform:
    """The platform's state and every operation on it (thread-safe)."""

    def __init__(
        self,
        path: str = ":memory:",
        *,
        embedder: Embedder | None = None,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.embedder: Embedder = embedder or LexicalEmbedder()
        self._clock = clock
        # Every use of the one connection holds this lock, reads too: sync MCP tools run in
        # worker threads, and an unlocked read would run inside another thread's open
        # transaction and see its uncommitted writes. Re-entrant, so a transaction may read.
        self._lock = threading.RLock()
        self._text_vectors: dict[str, Vector] = {}
        try:
            self._db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
            self._db.row_factory = sqlite3.Row
            self._db.executescript(_SCHEMA)
        except sqlite3.Error as exc:
            raise PlatformError(f"{path}: cannot open the platform database: {exc}") from None
        with self._tx():
            if self._meta("seeded") is None:
                self._seed()

    # -- plumbing -------------------------------------------------------------------------

    def _now(self) -> int:
        # Whole microseconds, so a rendered timestamp filters back to the same instant.
        return self._clock() // 1000 * 1000

    @contextmanager
    def _tx(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            self._db.execute("BEGIN IMMEDIATE")
            try:
                yield self._db
            except BaseException:
                self._db.execute("ROLLBACK")
                raise
            self._db.execute("COMMIT")

    def _meta(self, key: str) -> str | None:
        row = self._db.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _next_id(self, kind: str) -> tuple[str, int]:
        n = int(self._meta("counter") or "0") + 1
        self._db.execute("INSERT OR REPLACE INTO meta VALUES ('counter', ?)", (str(n),))
        return hashlib.sha256(f"{kind}:{n}".encode()).hexdigest()[:32], n

    def _seed(self) -> None:
        data = dataset.build()
        for e in data.entities:
            columns = _json([c._asdict() for c in e.columns])
            self._db.execute(
                "INSERT INTO entities VALUES (?, ?, ?, ?)", (e.urn, e.name, e.description, columns)
            )
        now = self._now()
        for page in data.pages:
            pid, _ = self._next_id("page")
            self._db.execute(
                "INSERT INTO pages VALUES (?, ?, ?, ?, ?, '', 'seed', ?)",
                (pid, page.slug, page.title, page.summary, page.body, now),
            )
        self._db.execute("INSERT INTO meta VALUES ('seeded', '1')")

    def _vector(self, text: str) -> tuple[Vector, str]:
        """The embedding of ``text`` and its stored JSON form."""
        vector = self.embedder.embed(text)
        return vector, _json(vector if isinstance(vector, dict) else list(vector))

    def _cached_vector(self, text: str) -> Vector:
        # Page and entity texts change only on apply/rollback; a search must not re-embed
        # every one of them (with Ollama each embed is an HTTP call). Callers hold the lock.
        vector = self._text_vectors.get(text)
        if vector is None:
            vector = self._text_vectors[text] = self.embedder.embed(text)
        return vector

    @staticmethod
    def _load_vector(text: str) -> Vector:
        value = json.loads(text)
        return value if isinstance(value, dict) else [float(x) for x in value]

    def _record(self, row: sqlite3.Row) -> dict[str, Any]:
        return {
            "id": row["id"],
            "type": row["type"],
            "content": row["content"],
            "category": row["category"],
            "entity_urns": json.loads(row["entity_urns"]),
            "captured_by": row["captured_by"],
            "status": row["status"],
            "review_notes": row["review_notes"],
            "superseded_by": row["superseded_by"],
            "created_at": rfc3339(row["created_at"]),
            "updated_at": rfc3339(row["updated_at"]),
        }

    def _get_record(self, record_id: str) -> sqlite3.Row:
        row = self._db.execute(
            "SELECT * FROM records WHERE id = ? AND forgotten = 0", (record_id,)
        ).fetchone()
        if row is None:
            raise NotFound(f"no insight or memory record {record_id!r}")
        return row

    def _set_status(self, row: sqlite3.Row, status: str, notes: str | None = None) -> None:
        if status not in TRANSITIONS.get(row["status"], ()):
            raise Conflict(
                f"invalid status transition from {row['status']!r} to {status!r} "
                f"for insight {row['id']}"
            )
        self._db.execute(
            "UPDATE records SET status = ?, review_notes = COALESCE(?, review_notes), "
            "updated_at = ? WHERE id = ?",
            (status, notes, self._now(), row["id"]),
        )

    # -- sessions ---------------------------------------------------------------------------

    def open_session(self, who: Identity) -> dict[str, Any]:
        """Mint a ``dps_`` session handle for ``who``."""
        with self._tx():
            hid, _ = self._next_id("handle")
            handle = f"dps_{hid}"
            self._db.execute("INSERT INTO handles VALUES (?, ?)", (handle, who.email))
        return {
            "session_id": handle,
            "platform": "benchledger-refplatform",
            "version": VERSION,
            "identity": who.email,
            "admin": who.admin,
            "embedder": self.embedder.name,
            "note": "pass session_id to every other tool call",
        }

    def check_session(self, who: Identity, handle: str | None) -> None:
        """Refuse a call without a live handle minted for the same identity."""
        if not handle:
            raise PlatformError("session_id: missing; call platform_info first to get a handle")
        with self._lock:
            row = self._db.execute(
                "SELECT email FROM handles WHERE handle = ?", (handle,)
            ).fetchone()
        if row is None or row[0] != who.email:
            raise PlatformError(
                "session_id: unknown or not yours; call platform_info to get a fresh handle"
            )

    # -- memory ---------------------------------------------------------------------------

    def capture(
        self,
        who: Identity,
        *,
        type: str,
        content: str,
        category: str = "",
        entity_urns: Iterable[str] = (),
    ) -> dict[str, Any]:
        """Save a memory record; insight types become pending insights and may supersede."""
        urns = list(dict.fromkeys(entity_urns))
        if type not in INSIGHT_TYPES + MEMORY_TYPES:
            known = ", ".join(INSIGHT_TYPES + MEMORY_TYPES)
            raise PlatformError(f"type: {type!r} is not a known type; use one of {known}")
        text = content.strip()
        if not MIN_CONTENT <= len(text) <= MAX_CONTENT:
            raise PlatformError(
                f"content: must be {MIN_CONTENT} to {MAX_CONTENT} characters, got {len(text)}"
            )
        if len(urns) > MAX_URNS or any(not isinstance(u, str) or not u.strip() for u in urns):
            raise PlatformError(f"entity_urns: at most {MAX_URNS} non-empty URNs")
        if len(category) > 64:
            raise PlatformError("category: at most 64 characters")
        insight = type in INSIGHT_TYPES
        vector, vector_text = self._vector(text)  # outside the lock: an embedder may be slow
        with self._tx():
            rid, seq = self._next_id("record")
            superseded: list[str] = []
            similar: list[dict[str, Any]] = []
            if insight and urns:
                for row in self._own_live_insights(who.email, urns):
                    score = round(cosine(vector, self._load_vector(row["embedding"])), 6)
                    if score >= SUPERSEDE_AT and row["status"] == "pending":
                        superseded.append(row["id"])
                    elif score >= SIMILAR_AT:
                        similar.append({"id": row["id"], "score": score})
            now = self._now()
            self._db.execute(
                "INSERT INTO records (id, seq, type, content, category, entity_urns, captured_by, "
                "status, insight, created_at, updated_at, embedding) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (rid, seq, type, text, category, _json(urns), who.email,
                 "pending" if insight else "active", int(insight), now, now, vector_text),
            )  # fmt: skip
            for old in superseded:
                self._db.execute(
                    "UPDATE records SET status = 'superseded', superseded_by = ?, updated_at = ? "
                    "WHERE id = ?",
                    (rid, now, old),
                )
        return {
            "id": rid,
            "status": "pending" if insight else "active",
            "type": type,
            "entity_urns": urns,
            "captured_by": who.email,
            "superseded": bool(superseded),
            "superseded_ids": superseded,
            "similar_existing": sorted(similar, key=lambda s: (-s["score"], s["id"])),
        }

    def _own_live_insights(self, email: str, urns: list[str]) -> list[sqlite3.Row]:
        rows = self._db.execute(
            "SELECT * FROM records WHERE captured_by = ? AND forgotten = 0 AND insight = 1 "
            "AND status IN ('pending', 'approved', 'applied') ORDER BY seq",
            (email,),
        ).fetchall()
        wanted = set(urns)
        return [r for r in rows if wanted & set(json.loads(r["entity_urns"]))]

    def manage(
        self, who: Identity, *, action: str, id: str = "", content: str = "", limit: int = 50
    ) -> dict[str, Any]:
        """List, update or forget the caller's own records."""
        if action == "list":
            with self._lock:
                rows = self._db.execute(
                    "SELECT * FROM records WHERE captured_by = ? AND forgotten = 0 "
                    "ORDER BY seq DESC LIMIT ?",
                    (who.email, max(1, min(limit, 200))),
                ).fetchall()
            return {"records": [self._record(r) for r in rows], "total": len(rows)}
        if action not in ("update", "forget"):
            raise PlatformError(f"action: {action!r}; use list, update or forget")
        if not id:
            raise PlatformError(f"id: required for {action}")
        vector = self._vector(content.strip())[1] if action == "update" else ""
        with self._tx():
            row = self._get_record(id)
            if row["captured_by"] != who.email:
                raise NotFound(f"no record {id!r} of yours")
            if row["status"] == "applied":
                raise Conflict("applied knowledge is shared; roll back its changeset first")
            if action == "forget":
                self._db.execute("UPDATE records SET forgotten = 1 WHERE id = ?", (id,))
                return {"id": id, "forgotten": True}
            text = content.strip()
            if not MIN_CONTENT <= len(text) <= MAX_CONTENT:
                raise PlatformError(
                    f"content: must be {MIN_CONTENT} to {MAX_CONTENT} characters, got {len(text)}"
                )
            self._db.execute(
                "UPDATE records SET content = ?, embedding = ?, updated_at = ? WHERE id = ?",
                (text, vector, self._now(), id),
            )
            return self._record(self._get_record(id))

    # -- search ---------------------------------------------------------------------------

    def search(
        self,
        who: Identity,
        *,
        intent: str,
        entity_urns: Iterable[str] = (),
        sources: Iterable[str] = (),
        limit: int = 10,
    ) -> dict[str, Any]:
        """Ranked hits per source; memory is the caller's, applied insights everyone's."""
        if not intent.strip():
            raise PlatformError("intent: must not be empty")
        chosen = list(sources) or list(SOURCES)
        unknown = [s for s in chosen if s not in SOURCES]
        if unknown:
            raise PlatformError(f"sources: unknown {unknown[0]!r}; use {', '.join(SOURCES)}")
        limit = max(1, min(limit, 50))
        urns = set(entity_urns)
        query = self.embedder.embed(intent)
        groups = []
        with self._lock:
            for source in chosen:
                hits = self._hits(source, who, query, urns)
                hits.sort(key=lambda h: (-h["score"], h["ref"]))
                groups.append({"source": source, "hits": hits[:limit]})
        return {"groups": groups}

    def _hits(
        self, source: str, who: Identity, query: Vector, urns: set[str]
    ) -> list[dict[str, Any]]:
        hits = []
        if source in ("memory", "insights"):
            if source == "memory":
                rows = self._db.execute(
                    "SELECT * FROM records WHERE captured_by = ? AND forgotten = 0 "
                    "AND status NOT IN ('superseded', 'rejected')",
                    (who.email,),
                )
            else:
                rows = self._db.execute(
                    "SELECT * FROM records WHERE status = 'applied' AND forgotten = 0"
                )
            for r in rows:
                record_urns = json.loads(r["entity_urns"])
                if urns and not urns & set(record_urns):
                    continue
                score = cosine(query, self._load_vector(r["embedding"]))
                if score > 0:
                    hits.append(_hit(r["content"], r["id"], score, r["status"], record_urns))
        elif source == "knowledge_pages":
            for p in self._db.execute("SELECT * FROM pages"):
                text = f"{p['title']}\n{p['summary']}\n{p['body']}"
                score = cosine(query, self._cached_vector(text))
                if score > 0:
                    page_urns = [p["entity_urn"]] if p["entity_urn"] else []
                    summary = f"{p['title']}: {p['summary']}"
                    hits.append(_hit(summary, p["slug"], score, "published", page_urns))
        else:
            for e in self._db.execute("SELECT * FROM entities"):
                if urns and e["urn"] not in urns:
                    continue
                text = f"{e['name']}: {e['description']}"
                score = cosine(query, self._cached_vector(text))
                if score > 0:
                    hits.append(_hit(text, e["urn"], score, "catalog", [e["urn"]]))
        return hits

    # -- catalog and pages ----------------------------------------------------------------

    def entity(self, urn: str) -> dict[str, Any]:
        """A catalog entity with its current description and columns."""
        with self._lock:
            row = self._db.execute("SELECT * FROM entities WHERE urn = ?", (urn,)).fetchone()
        if row is None:
            raise NotFound(f"urn: no entity {urn!r}")
        return {"urn": row["urn"], "name": row["name"], "description": row["description"],
                "columns": json.loads(row["columns"])}  # fmt: skip

    def pages(self) -> dict[str, Any]:
        with self._lock:
            rows = self._db.execute("SELECT * FROM pages ORDER BY created_at, slug").fetchall()
        pages = [{"id": r["id"], "slug": r["slug"], "title": r["title"], "summary": r["summary"]}
                 for r in rows]  # fmt: skip
        return {"pages": pages, "total": len(pages)}

    def page(self, slug: str) -> dict[str, Any]:
        with self._lock:
            row = self._db.execute("SELECT * FROM pages WHERE slug = ?", (slug,)).fetchone()
        if row is None:
            raise NotFound(f"slug: no knowledge page {slug!r}")
        return {k: row[k] for k in ("id", "slug", "title", "summary", "body", "entity_urn")}

    # -- review and promotion ---------------------------------------------------------------

    def insight(self, insight_id: str) -> dict[str, Any]:
        with self._lock:
            row = self._get_record(insight_id)
        if not row["insight"]:
            raise NotFound(f"{insight_id!r} is a memory record, not an insight")
        return self._record(row)

    def insights(
        self,
        *,
        status: str = "",
        entity_urn: str = "",
        captured_by: str = "",
        since: int | None = None,
        until: int | None = None,
        page: int = 1,
        per_page: int = 50,
    ) -> dict[str, Any]:
        """Insights filtered and paged, oldest first, in the admin API's envelope."""
        if status and status not in STATUSES:
            raise PlatformError(f"status: {status!r} is not one of {', '.join(STATUSES)}")
        _check_paging(page, per_page)
        sql = "SELECT * FROM records WHERE insight = 1 AND forgotten = 0"
        args: list[Any] = []
        for column, value in (("status", status), ("captured_by", captured_by)):
            if value:
                sql += f" AND {column} = ?"
                args.append(value)
        if since is not None:
            sql += " AND created_at >= ?"
            args.append(since)
        if until is not None:
            sql += " AND created_at <= ?"
            args.append(until)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY seq", args).fetchall()
        if entity_urn:
            rows = [r for r in rows if entity_urn in json.loads(r["entity_urns"])]
        return _envelope(rows, page, per_page, self._record)

    def set_status(self, insight_id: str, status: str, review_notes: str = "") -> dict[str, Any]:
        """The review API's status change: approve or reject (409 on an invalid transition)."""
        if status not in STATUSES:
            raise PlatformError(f"status: {status!r} is not one of {', '.join(STATUSES)}")
        if status in ("applied", "superseded"):
            raise PlatformError(
                f"status: {status!r} is set by apply_knowledge or by capture, not by review"
            )
        with self._tx():
            row = self._get_record(insight_id)
            if not row["insight"]:
                raise NotFound(f"{insight_id!r} is a memory record, not an insight")
            self._set_status(row, status, review_notes)
            return self._record(self._get_record(insight_id))

    def apply(
        self,
        who: Identity,
        *,
        entity_urn: str,
        insight_ids: list[str],
        sink: str,
        confirm: bool,
        changes: list[dict[str, Any]] | None = None,
        page: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        """Apply approved insights to a sink as one changeset (all or nothing)."""
        self._admin(who)
        if not confirm:
            raise PlatformError("confirm: must be true to apply knowledge")
        if not insight_ids:
            raise PlatformError("insight_ids: at least one insight is required")
        if sink not in ("datahub", "knowledge_page"):
            raise PlatformError(f"sink: {sink!r}; use datahub or knowledge_page")
        with self._tx():
            entity = self.entity(entity_urn)
            rows = [self._get_record(i) for i in insight_ids]
            for row in rows:
                if not row["insight"] or row["status"] != "approved":
                    raise Conflict(
                        f"insight {row['id']} is {row['status']!r}; only approved insights "
                        "can be applied"
                    )
                if entity_urn not in json.loads(row["entity_urns"]):
                    raise PlatformError(f"insight_ids: {row['id']} is not linked to {entity_urn}")
            now = self._now()
            if sink == "datahub":
                detail = self._description_change(changes)
                previous: dict[str, Any] = {"description": entity["description"]}
                applied: dict[str, Any] = {"description": detail}
                self._db.execute(
                    "UPDATE entities SET description = ? WHERE urn = ?", (detail, entity_urn)
                )
                change_type = "update_description"
            else:
                new = self._page_change(page)
                old = self._db.execute(
                    "SELECT * FROM pages WHERE slug = ?", (new["slug"],)
                ).fetchone()
                previous = {"page": dict(old) if old else None}
                if old is not None:
                    self._db.execute("DELETE FROM pages WHERE slug = ?", (new["slug"],))
                pid, _ = self._next_id("page")
                self._db.execute(
                    "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                    (pid, new["slug"], new["title"], new["summary"], new["body"], entity_urn,
                     who.email, now),
                )  # fmt: skip
                applied = {"page": {**new, "id": pid}}
                change_type = "knowledge_page"
            for row in rows:
                self._set_status(row, "applied")
            cid, seq = self._next_id("changeset")
            self._db.execute(
                "INSERT INTO changesets (id, seq, target_urn, change_type, sink, "
                "source_insight_ids, previous, applied, created_by, created_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (cid, seq, entity_urn, change_type, sink, _json(insight_ids), _json(previous),
                 _json(applied), who.email, now),
            )  # fmt: skip
            return self._changeset(self._db.execute(
                "SELECT * FROM changesets WHERE id = ?", (cid,)).fetchone())  # fmt: skip

    @staticmethod
    def _description_change(changes: list[dict[str, Any]] | None) -> str:
        if not changes:
            raise PlatformError("changes: the datahub sink needs one update_description change")
        for i, change in enumerate(changes):
            if not isinstance(change, dict) or change.get("change_type") != "update_description":
                raise PlatformError(f"changes[{i}].change_type: must be 'update_description'")
            detail = change.get("detail")
            if not isinstance(detail, str) or not detail.strip():
                raise PlatformError(f"changes[{i}].detail: the new description text is required")
        return str(changes[-1]["detail"]).strip()

    @staticmethod
    def _page_change(page: dict[str, Any] | None) -> dict[str, str]:
        if not isinstance(page, dict):
            raise PlatformError("page: the knowledge_page sink needs {slug, title, summary, body}")
        out = {}
        for key in ("slug", "title", "summary", "body"):
            value = page.get(key)
            if not isinstance(value, str) or not value.strip():
                raise PlatformError(f"page.{key}: required, non-empty text")
            out[key] = value
        return out

    def review(
        self, who: Identity, *, action: str, insight_ids: list[str], review_notes: str = ""
    ) -> dict[str, Any]:
        """Approve or reject insights from MCP (admin only), all or nothing."""
        self._admin(who)
        if not insight_ids:
            raise PlatformError("insight_ids: at least one insight is required")
        target = {"approve": "approved", "reject": "rejected"}[action]
        with self._tx():
            for i in insight_ids:
                row = self._get_record(i)
                if not row["insight"]:
                    raise NotFound(f"{i!r} is a memory record, not an insight")
                self._set_status(row, target, review_notes)
            return {"insights": [self._record(self._get_record(i)) for i in insight_ids]}

    def rollback(self, who: Identity, changeset_id: str) -> dict[str, Any]:
        """Undo a changeset: restore the sink, return its insights to pending."""
        self._admin(who)
        with self._tx():
            row = self._db.execute(
                "SELECT * FROM changesets WHERE id = ?", (changeset_id,)
            ).fetchone()
            if row is None:
                raise NotFound(f"changeset_id: no changeset {changeset_id!r}")
            if row["rolled_back"]:
                raise Conflict(f"changeset {changeset_id} is already rolled back")
            previous = json.loads(row["previous"])
            applied = json.loads(row["applied"])
            if row["sink"] == "datahub":
                self._db.execute(
                    "UPDATE entities SET description = ? WHERE urn = ?",
                    (previous["description"], row["target_urn"]),
                )
            else:
                self._db.execute("DELETE FROM pages WHERE id = ?", (applied["page"]["id"],))
                old = previous["page"]
                if old is not None:
                    self._db.execute(
                        "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                        tuple(old[k] for k in ("id", "slug", "title", "summary", "body",
                                               "entity_urn", "created_by", "created_at")),
                    )  # fmt: skip
            for insight_id in json.loads(row["source_insight_ids"]):
                self._set_status(self._get_record(insight_id), "pending")
            self._db.execute(
                "UPDATE changesets SET rolled_back = 1, rolled_back_at = ? WHERE id = ?",
                (self._now(), changeset_id),
            )
            return self._changeset(
                self._db.execute(
                    "SELECT * FROM changesets WHERE id = ?", (changeset_id,)
                ).fetchone()
            )

    def changesets(
        self, *, entity_urn: str = "", page: int = 1, per_page: int = 50
    ) -> dict[str, Any]:
        """Changesets, oldest first, in the admin API's envelope."""
        _check_paging(page, per_page)
        sql, args = "SELECT * FROM changesets", []
        if entity_urn:
            sql += " WHERE target_urn = ?"
            args.append(entity_urn)
        with self._lock:
            rows = self._db.execute(sql + " ORDER BY seq", args).fetchall()
        return _envelope(rows, page, per_page, self._changeset)

    def _changeset(self, row: sqlite3.Row) -> dict[str, Any]:
        return {
            "id": row["id"],
            "target_urn": row["target_urn"],
            "change_type": row["change_type"],
            "sink": row["sink"],
            "source_insight_ids": json.loads(row["source_insight_ids"]),
            "applied": json.loads(row["applied"]),
            "rolled_back": bool(row["rolled_back"]),
            "created_by": row["created_by"],
            "created_at": rfc3339(row["created_at"]),
            "rolled_back_at": rfc3339(row["rolled_back_at"]) if row["rolled_back_at"] else None,
        }

    @staticmethod
    def _admin(who: Identity) -> None:
        if not who.admin:
            raise Forbidden(f"{who.email} is not an admin; apply_knowledge needs the admin key")

    def close(self) -> None:
        with self._lock:
            self._db.close()
