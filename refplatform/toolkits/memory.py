"""The memory toolkit: ``memory_capture`` and ``memory_manage``.

Capture is recall-first (memory/capture.go): the new content is embedded and compared
with the caller's own active records *before* the insert; at cosine >= 0.90 a record
is superseded by the new one, 0.75..0.90 comes back as ``similar_existing``. When the
capture carries entity URNs a match must share one. Embedding is best effort, as in
the peer: an embedder failure stores the record without a vector (search then ranks it
lexically) and skips the supersede check. A pending insight may be superseded; an
approved or applied one is only ever reported as similar (the review status machine
has no edge from them to ``superseded``); a rejected one is left out.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Final

from benchledger.refplatform import records
from benchledger.refplatform.auth import Identity
from benchledger.refplatform.embedder import Embedder, LexicalEmbedder, Vector, cosine
from benchledger.refplatform.errors import Conflict, EmbedderError, NotFound, ToolError
from benchledger.refplatform.store import StateStore, dumps

SUPERSEDE_AT: Final = 0.90
SIMILAR_AT: Final = 0.75
DEFAULT_LIST, MAX_LIST = 20, 100
PREVIEW_CHARS: Final = 200
COMMANDS: Final = {
    "update": "Update an existing memory (requires id)",
    "forget": "Archive a memory (requires id)",
    "list": "List memories with optional filters",
    "review_stale": "List memories flagged as stale",
    "review_duplicates": "List high-similarity active memory pairs for consolidation",
    "consolidate": "Supersede a duplicate record by the one kept (requires id and duplicate_id)",
}
_LEXICAL = LexicalEmbedder()
# Decoded embeddings kept by their stored text (content-addressed, so never stale): a
# capture compares the new vector with every active record its caller holds, and decoding
# each stored JSON vector again was most of that cost (docs/performance.md, "The
# longmemeval suite"). Past this many the cache starts over.
DECODED_KEPT: Final = 50_000


def clamp_limit(limit: int | None, default: int = DEFAULT_LIST, most: int = MAX_LIST) -> int:
    """The peer's page-size rule: <= 0 means the default, above the cap means the cap."""
    if not limit or limit <= 0:
        return default
    return min(limit, most)


def visible(who: Identity) -> tuple[str, str]:
    """The records ``who`` may list, as ``(column, value)``: a pool identity its own, the
    admin key its persona's (the reviewer's reads). The peer lists by persona, so every
    identity of the arm's ``admin`` persona saw the others' pending records in the listing
    and in enrichment; one identity must not read another's (docs/refplatform.md, "Memory
    and insights"), so a pool identity lists only what it captured."""
    return ("persona", who.persona) if who.pool_index == 0 else ("created_by", who.email)


class Memory:
    """Memory records: capture with recall-first supersede, and their lifecycle commands."""

    def __init__(self, store: StateStore, embedder: Embedder) -> None:
        self.store = store
        self.embedder = embedder
        self._decoded: dict[str, Vector | None] = {}

    def _vector(self, stored: str | None) -> Vector | None:
        """A stored embedding decoded (``records.load_vector``), kept by its text."""
        if not stored:
            return None
        found = self._decoded.get(stored)
        if found is None:
            found = records.load_vector(stored)
            if len(self._decoded) >= DECODED_KEPT:
                self._decoded.clear()
            self._decoded[stored] = found
        return found

    # -- shared reads -----------------------------------------------------------------------

    def row(self, record_id: str) -> sqlite3.Row:
        """A record that exists and is not archived; NotFound otherwise."""
        with self.store.read() as db:
            row = db.execute(
                "SELECT * FROM records WHERE id = ? AND status != ?", (record_id, records.ARCHIVED)
            ).fetchone()
        if row is None:
            raise NotFound("memory not found")
        return row

    def try_embed(self, text: str) -> Vector | None:
        """The embedding of ``text``, or None when the embedder fails (best effort, as the peer)."""
        try:
            return self.embedder.embed(text)
        except EmbedderError:
            return None

    def score(self, query: str, query_vector: Vector | None, row: sqlite3.Row) -> float:
        """How well a record matches a query: its stored vector, else a lexical fallback."""
        stored = records.load_vector(row["embedding"])
        if query_vector is not None and stored is not None:
            return cosine(query_vector, stored)
        return cosine(_LEXICAL.embed(query), _LEXICAL.embed(row["content"]))

    def for_entities(self, urns: list[str], who: Identity, limit: int) -> list[sqlite3.Row]:
        """The active records ``who`` may list (``visible``) linked to any of ``urns``,
        newest first (enrichment)."""
        wanted = set(urns)
        column, value = visible(who)
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT * FROM records WHERE {column} = ? AND status = ? AND insight_status != ? "
                "ORDER BY created_at DESC, seq DESC",
                (value, records.ACTIVE, records.REJECTED),
            ).fetchall()
        return [r for r in rows if wanted & set(records.urns(r))][:limit]

    # -- memory_capture ---------------------------------------------------------------------

    def capture(self, who: Identity, session_id: str, args: dict[str, Any]) -> dict[str, Any]:
        """Save a record; reviewed classes carry a pending insight; may supersede (see module)."""
        sink_class = str(args.get("type", ""))
        content = str(args.get("content", "")).strip()
        category = str(args.get("category") or "")
        confidence = str(args.get("confidence") or "")
        source = str(args.get("source") or "")
        urns = list(dict.fromkeys(args.get("entity_urns") or []))
        # The peer's store keeps a related column as {urn, column, relevance} only.
        columns = [
            {k: str(c.get(k) or "") for k in ("urn", "column", "relevance")}
            for c in args.get("related_columns") or []
        ]
        actions = list(args.get("suggested_actions") or [])
        records.validate_sink_class(sink_class)
        records.validate_content(content)
        records.validate_counts(urns, columns)
        records.validate_labels(category, confidence, source)
        if len(actions) > 5:
            raise ToolError(f"suggested_actions exceeds maximum of 5 (got {len(actions)})")
        extra = dict(args.get("metadata") or {})
        if args.get("sources"):
            extra["sources"] = [f"mcp:call:{s.removeprefix('mcp:call:')}" for s in args["sources"]]
        insight = sink_class in records.REVIEWED_CLASSES
        vector = self.try_embed(content)  # outside the lock: an embedder may be slow
        with self.store.tx() as db:
            restated, similar = self._prior_matches(who.email, urns, vector)
            rid, seq = self.store.next_id("record")
            now = self.store.now()
            db.execute(
                "INSERT INTO records (id, seq, created_by, persona, dimension, sink_class, "
                "content, category, confidence, source, entity_urns, related_columns, "
                "suggested_actions, "
                "extra, status, insight, insight_status, session_id, created_at, updated_at, "
                "embedding) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    rid,
                    seq,
                    who.email,
                    who.persona,
                    records.dimension(sink_class),
                    sink_class,
                    content,
                    category or records.DEFAULT_CATEGORY,
                    confidence or "medium",
                    source or "user",
                    dumps(urns),
                    dumps(columns),
                    dumps(actions),
                    dumps(extra),
                    records.ACTIVE,
                    int(insight),
                    records.PENDING if insight else "",
                    session_id if insight else "",
                    now,
                    now,
                    None if vector is None else dumps(vector),
                ),
            )
            for old in restated:
                self.supersede(old["id"], rid)
        return self._capture_result(rid, sink_class, restated, similar)

    def _prior_matches(
        self, email: str, urns: list[str], vector: Vector | None
    ) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        """The caller's records this capture restates, and the merely similar ones (best first)."""
        if vector is None:
            return [], []
        with self.store.read() as db:
            rows = db.execute(
                "SELECT id, insight_status, entity_urns, embedding FROM records "
                "WHERE created_by = ? AND status = ? AND insight_status != ? "
                "AND embedding IS NOT NULL ORDER BY seq",
                (email, records.ACTIVE, records.REJECTED),
            ).fetchall()
        wanted = set(urns)
        matches = []
        for row in rows:
            if wanted and not wanted & set(records.urns(row)):
                continue
            stored = self._vector(row["embedding"])
            score = cosine(vector, stored) if stored is not None else 0.0
            if score >= SIMILAR_AT:
                supersedable = row["insight_status"] in ("", records.PENDING)
                matches.append({"id": row["id"], "score": score, "supersedable": supersedable})
        matches.sort(key=lambda m: (-m["score"], m["id"]))
        restated = [m for m in matches if m["score"] >= SUPERSEDE_AT and m["supersedable"]]
        similar = [{"id": m["id"], "score": m["score"]} for m in matches if m not in restated]
        return restated, similar

    @staticmethod
    def _capture_result(
        rid: str, sink_class: str, restated: list[dict[str, Any]], similar: list[dict[str, Any]]
    ) -> dict[str, Any]:
        live = sink_class in records.LIVE_CLASSES
        message = "Captured. " + (
            "Available to you immediately."
            if live
            else "It will be reviewed before promotion to a shared catalog."
        )
        if restated:
            message += f" {len(restated)} prior record(s) superseded."
        if similar:
            message += (
                " Similar existing records found (similar_existing): if this restates one,"
                " consolidate with memory_manage (update the existing record, or consolidate"
                " the duplicate)."
            )
        out: dict[str, Any] = {"id": rid, "sink_class": sink_class, "status": records.ACTIVE}
        if restated:
            # The singular field keeps the peer's original meaning: the best match.
            out["superseded"] = restated[0]["id"]
            out["superseded_ids"] = [m["id"] for m in restated]
        if similar:
            out["similar_existing"] = similar
        out["message"] = message
        return out

    def supersede(self, old_id: str, new_id: str) -> None:
        """Mark ``old_id`` superseded by ``new_id`` (its pending insight too)."""
        with self.store.tx() as db:
            row = self.row(old_id)
            if row["insight"]:
                records.check_transition(row["insight_status"], records.SUPERSEDED)
            db.execute(
                "UPDATE records SET status = ?, superseded_by = ?, updated_at = ?, "
                "insight_status = CASE WHEN insight = 1 THEN ? ELSE '' END WHERE id = ?",
                (records.SUPERSEDED, new_id, self.store.now(), records.SUPERSEDED, old_id),
            )

    # -- memory_manage ----------------------------------------------------------------------

    def manage(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """Dispatch a ``memory_manage`` command (an empty command returns the help)."""
        command = str(args.get("command") or "")
        if not command:
            return {"commands": dict(COMMANDS)}
        handlers = {
            "update": self._update,
            "forget": self._forget,
            "list": self._list,
            "review_stale": self._review_stale,
            "review_duplicates": self._review_duplicates,
            "consolidate": self._consolidate,
        }
        if command not in handlers:
            raise ToolError(
                f'unknown command "{command}": use update, forget, list, review_stale, '
                "review_duplicates, or consolidate (create with memory_capture)"
            )
        return handlers[command](who, args)

    def _own(self, who: Identity, record_id: str, action: str) -> sqlite3.Row:
        try:
            row = self.row(record_id)
        except NotFound:
            raise ToolError("memory not found") from None
        if row["created_by"] != who.email:
            raise ToolError(f"you can only {action} your own memories")
        return row

    def _update(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        record_id = str(args.get("id") or "")
        if not record_id:
            raise ToolError("id is required for update")
        self._own(who, record_id, "update")
        content = str(args.get("content") or "")
        if content:
            records.validate_content(content)
        category = str(args.get("category") or "")
        confidence = str(args.get("confidence") or "")
        records.validate_labels(category, confidence)
        vector = self.try_embed(content) if content else None
        with self.store.tx() as db:
            row = self._own(who, record_id, "update")
            extra = dict(json.loads(row["extra"]))
            extra.update(args.get("metadata") or {})
            db.execute(
                "UPDATE records SET content = ?, category = ?, confidence = ?, dimension = ?, "
                "extra = ?, embedding = ?, updated_at = ? WHERE id = ?",
                (
                    content or row["content"],
                    category or row["category"],
                    confidence or row["confidence"],
                    args.get("dimension") or row["dimension"],
                    dumps(extra),
                    dumps(vector) if vector is not None else row["embedding"],
                    self.store.now(),
                    record_id,
                ),
            )
        return {"id": record_id, "message": "Memory updated successfully."}

    def _forget(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        record_id = str(args.get("id") or "")
        if not record_id:
            raise ToolError("id is required for forget")
        with self.store.tx() as db:
            self._own(who, record_id, "archive")
            db.execute(
                "UPDATE records SET status = ?, updated_at = ? WHERE id = ?",
                (records.ARCHIVED, self.store.now(), record_id),
            )
        return {"id": record_id, "message": "Memory archived successfully."}

    def _list(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        limit = clamp_limit(args.get("limit"))
        offset = max(0, int(args.get("offset") or 0))
        status = str(args.get("filter_status") or records.ACTIVE)
        owner, whose = visible(who)
        with self.store.read() as db:
            rows = db.execute(
                f"SELECT * FROM records WHERE {owner} = ? AND status = ? "
                "ORDER BY created_at DESC, seq DESC",
                (whose, status),
            ).fetchall()
        filters = {
            "dimension": args.get("filter_dimension"),
            "category": args.get("filter_category"),
        }
        for column, value in filters.items():
            if value:
                rows = [r for r in rows if r[column] == value]
        if args.get("filter_entity_urn"):
            rows = [r for r in rows if args["filter_entity_urn"] in records.urns(r)]
        page = [records.record_view(r) for r in rows[offset : offset + limit]]
        return {"records": page, "total": len(rows), "limit": limit, "offset": offset}

    def _review_stale(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        # refplatform never marks a record stale (the peer's staleness sweeps are not run).
        limit = clamp_limit(args.get("limit"))
        offset = max(0, int(args.get("offset") or 0))
        return {
            "records": [],
            "total": 0,
            "limit": limit,
            "offset": offset,
            "message": "0 stale memories found. Use 'update' to revise or 'forget' to archive.",
        }

    def _review_duplicates(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        want = clamp_limit(args.get("limit"), most=MAX_LIST - 1)
        with self.store.read() as db:
            rows = db.execute(
                "SELECT * FROM records WHERE created_by = ? AND status = ? "
                "AND embedding IS NOT NULL ORDER BY seq",
                (who.email, records.ACTIVE),
            ).fetchall()
        pairs: list[tuple[float, dict[str, Any]]] = []
        for i, older in enumerate(rows):
            a = records.load_vector(older["embedding"])
            for newer in rows[i + 1 :]:
                b = records.load_vector(newer["embedding"])
                score = cosine(a, b) if a is not None and b is not None else 0.0
                if score >= SIMILAR_AT:
                    pair = {"older": _preview(older), "newer": _preview(newer), "score": score}
                    pairs.append((score, pair))
        pairs.sort(key=lambda sp: -sp[0])
        more = len(pairs) > want
        shown = [pair for _, pair in pairs[:want]]
        base = (
            " Each side is a bounded preview; read the full record with fetch mcp:memory:<id>"
            " or memory_manage list before consolidating. To consolidate a pair, use"
            " command=consolidate with id (the record to keep) and duplicate_id (the record it"
            " supersedes)."
        )
        message = (
            f"Showing the {len(shown)} highest-similarity active pair(s); more remain.{base}"
            " Consolidate these and re-run review_duplicates to surface the rest."
            if more
            else f"{len(shown)} high-similarity active pair(s) found.{base}"
        )
        out: dict[str, Any] = {"pairs": shown, "total": len(shown), "message": message}
        if more:
            out["more_pairs"] = True
        return out

    def _consolidate(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        keep_id, dup_id = str(args.get("id") or ""), str(args.get("duplicate_id") or "")
        if not keep_id or not dup_id:
            raise ToolError(
                "consolidate requires id (the record to keep) and duplicate_id (the record it "
                "supersedes)"
            )
        if keep_id == dup_id:
            raise ToolError("id and duplicate_id must differ")
        with self.store.tx():
            keep = self._own(who, keep_id, "consolidate")
            self._own(who, dup_id, "consolidate")
            if keep["status"] != records.ACTIVE:
                raise ToolError(f"the record to keep must be active (status: {keep['status']})")
            try:
                self.supersede(dup_id, keep_id)
            except Conflict as exc:
                raise ToolError(f"failed to consolidate: {exc.message}") from None
        return {
            "id": keep_id,
            "superseded": dup_id,
            "message": "Duplicate consolidated: the kept record now supersedes it.",
        }


def _preview(row: sqlite3.Row) -> dict[str, Any]:
    view = records.record_view(row)
    content = row["content"]
    return {
        "id": view["id"],
        "created_at": view["created_at"],
        "updated_at": view["updated_at"],
        "created_by": view["created_by"],
        "status": view["status"],
        "content_preview": content if len(content) <= PREVIEW_CHARS else content[:PREVIEW_CHARS],
    }
