"""Knowledge pages: canonical, org-shared markdown pages with versions and entity references.

Shared by the page promotion of ``apply_knowledge``, the portal REST routes, search,
fetch and enrichment. A page is found by id (the portal) or by its unique live slug
(promotion's find-or-create key). Every content change is a new version; delete is a
soft delete. References record which entities a page is about: ``promoted`` ones come
with a promotion (an insight's entity URNs, the payload's ``references``), ``inline``
ones are the URNs written in the body.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Iterable, Sequence
from typing import Any, Final

from benchledger.refplatform import ids
from benchledger.refplatform.errors import Conflict, NotFound
from benchledger.refplatform.store import StateStore, dumps
from benchledger.refplatform.times import rfc3339

REF_PROMOTED: Final = "promoted"
REF_INLINE: Final = "inline"
_MCP_REF = re.compile(r"\bmcp:(?:knowledge_page|asset|prompt|collection|insight|memory):[\w.-]+")


def scan_refs(text: str) -> list[str]:
    """The ``urn:li:...`` and ``mcp:<type>:<id>`` references written in ``text``, in order."""
    found: list[str] = []
    i = 0
    while (start := text.find("urn:li:", i)) >= 0:
        depth, j = 0, start
        # A dataset URN nests parentheses, and a markdown link wraps it in one more pair:
        # stop at whitespace, a backtick, or a ")" that closes nothing the URN opened.
        while j < len(text) and not text[j].isspace() and text[j] not in "`\"'<>]":
            if text[j] == "(":
                depth += 1
            elif text[j] == ")":
                if depth == 0:
                    break
                depth -= 1
            j += 1
        urn = text[start:j].rstrip(".,;:")
        if len(urn) > len("urn:li:x:") and urn not in found:
            found.append(urn)
        i = max(j, start + 1)
    for match in _MCP_REF.finditer(text):
        if match.group(0) not in found:
            found.append(match.group(0))
    return found


def _view(row: sqlite3.Row) -> dict[str, Any]:
    page: dict[str, Any] = {
        "id": row["id"],
        "slug": row["slug"],
        "title": row["title"],
        "summary": row["summary"],
        "body": row["body"],
        "tags": json.loads(row["tags"]),
        "builtin": False,
        "created_by": row["created_by"],
        "created_email": row["created_email"],
        "updated_by": row["updated_by"],
        "current_version": row["current_version"],
        "created_at": rfc3339(row["created_at"]),
        "updated_at": rfc3339(row["updated_at"]),
    }
    if row["deleted_at"] is not None:
        page["deleted_at"] = rfc3339(row["deleted_at"])
    return page


class PageStore:
    """Knowledge pages, their versions and references, over the platform store."""

    def __init__(self, store: StateStore) -> None:
        self.store = store

    # -- reads ------------------------------------------------------------------------------

    def get(self, page_id: str) -> dict[str, Any]:
        """A live page by id; NotFound otherwise."""
        with self.store.read() as db:
            row = db.execute(
                "SELECT * FROM pages WHERE id = ? AND deleted_at IS NULL", (page_id,)
            ).fetchone()
        if row is None:
            raise NotFound("knowledge page not found")
        return _view(row)

    def by_slug(self, slug: str) -> dict[str, Any] | None:
        """The live page with ``slug``, or None."""
        with self.store.read() as db:
            row = db.execute(
                "SELECT * FROM pages WHERE slug = ? AND deleted_at IS NULL", (slug,)
            ).fetchone()
        return None if row is None else _view(row)

    def live(self) -> list[dict[str, Any]]:
        """Every live page, newest first (ties in creation order)."""
        with self.store.read() as db:
            rows = db.execute(
                "SELECT * FROM pages WHERE deleted_at IS NULL ORDER BY created_at DESC, seq"
            ).fetchall()
        return [_view(r) for r in rows]

    def listing(
        self, *, tag: str = "", query: str = "", limit: int = 20, offset: int = 0
    ) -> tuple[list[dict[str, Any]], int]:
        """Live pages filtered by tag and title/summary text, one window, and the total."""
        pages = self.live()
        if tag:
            pages = [p for p in pages if tag in p["tags"]]
        if query:
            q = query.lower()
            pages = [p for p in pages if q in p["title"].lower() or q in p["summary"].lower()]
        return pages[offset : offset + limit], len(pages)

    def versions(self, page_id: str, *, limit: int = 20, offset: int = 0) -> tuple[list, int]:
        """A page's saved versions, newest first, one window, and their total."""
        with self.store.read() as db:
            rows = db.execute(
                "SELECT * FROM page_versions WHERE page_id = ? ORDER BY version DESC", (page_id,)
            ).fetchall()
        out = [
            {
                "id": r["id"],
                "page_id": r["page_id"],
                "version": r["version"],
                "title": r["title"],
                "summary": r["summary"],
                "body": r["body"],
                "tags": json.loads(r["tags"]),
                "change_summary": r["change_summary"],
                "created_by": r["created_by"],
                "created_at": rfc3339(r["created_at"]),
            }
            for r in rows
        ]
        return out[offset : offset + limit], len(out)

    def refs(self, page_id: str) -> list[dict[str, str]]:
        """A page's entity references ``{urn, source}`` in the order they were attached."""
        with self.store.read() as db:
            rows = db.execute(
                "SELECT urn, source FROM page_refs WHERE page_id = ? ORDER BY rowid", (page_id,)
            ).fetchall()
        return [{"urn": r["urn"], "source": r["source"]} for r in rows]

    def promoted_urns(self, page_id: str) -> list[str]:
        """The URNs a promotion attached to the page (for changeset images)."""
        return [r["urn"] for r in self.refs(page_id) if r["source"] == REF_PROMOTED]

    def entity_urns(self, page_id: str) -> list[str]:
        """The DataHub entity URNs a page references (search hits carry them)."""
        return [r["urn"] for r in self.refs(page_id) if r["urn"].startswith("urn:li:")]

    def pages_for(self, urns: Sequence[str], limit: int) -> list[dict[str, str]]:
        """Live pages referencing any of ``urns``: ``{id, slug, title}``, newest first."""
        if not urns:
            return []
        marks = ",".join("?" * len(urns))
        with self.store.read() as db:
            rows = db.execute(
                "SELECT DISTINCT p.id, p.slug, p.title, p.created_at, p.seq FROM pages p "
                f"JOIN page_refs r ON r.page_id = p.id WHERE r.urn IN ({marks}) "
                "AND p.deleted_at IS NULL ORDER BY p.created_at DESC, p.seq LIMIT ?",
                (*urns, limit),
            ).fetchall()
        return [{"id": r["id"], "slug": r["slug"], "title": r["title"]} for r in rows]

    # -- writes ------------------------------------------------------------------------------

    def create(
        self,
        *,
        slug: str,
        title: str,
        summary: str,
        body: str,
        tags: Sequence[str],
        author: str,
        page_id: str | None = None,
        created_at: int | None = None,
    ) -> dict[str, Any]:
        """Insert a page at version 1 (Conflict if the slug names a live page)."""
        with self.store.tx() as db:
            if self.by_slug(slug) is not None:
                raise Conflict(
                    f'a knowledge page with slug "{slug}" already exists; update it instead'
                )
            seq = self.store.next_seq("page")
            pid = page_id or ids.page_id(seq)
            now = created_at if created_at is not None else self.store.now()
            db.execute(
                "INSERT INTO pages VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, NULL)",
                (
                    pid,
                    seq,
                    slug,
                    title,
                    summary,
                    body,
                    dumps(list(tags)),
                    author,
                    author,
                    author,
                    now,
                    now,
                ),
            )
            self._version(pid, 1, title, summary, body, tags, "created", author, now)
            self.set_refs(pid, REF_INLINE, scan_refs(body), author)
        return self.get(pid)

    def update(
        self,
        page_id: str,
        *,
        title: str,
        summary: str,
        body: str,
        tags: Sequence[str],
        author: str,
        change_summary: str = "",
        slug: str | None = None,
    ) -> dict[str, Any]:
        """Replace a live page's content as a new version; NotFound if there is no such page."""
        with self.store.tx() as db:
            current = self.get(page_id)
            if slug and slug != current["slug"]:
                other = self.by_slug(slug)
                if other is not None:
                    raise Conflict(f'a knowledge page with slug "{slug}" already exists')
            version = current["current_version"] + 1
            now = self.store.now()
            db.execute(
                "UPDATE pages SET slug = ?, title = ?, summary = ?, body = ?, tags = ?, "
                "updated_by = ?, current_version = ?, updated_at = ? WHERE id = ?",
                (
                    slug or current["slug"],
                    title,
                    summary,
                    body,
                    dumps(list(tags)),
                    author,
                    version,
                    now,
                    page_id,
                ),
            )
            self._version(page_id, version, title, summary, body, tags, change_summary, author, now)
            self.set_refs(page_id, REF_INLINE, scan_refs(body), author)
        return self.get(page_id)

    def soft_delete(self, page_id: str) -> None:
        """Hide a live page (NotFound if there is none)."""
        with self.store.tx() as db:
            self.get(page_id)
            db.execute("UPDATE pages SET deleted_at = ? WHERE id = ?", (self.store.now(), page_id))

    def add_refs(
        self, page_id: str, source: str, urns: Iterable[str], author: str, *, replace: bool = False
    ) -> None:
        """Attach references; an attached URN keeps its source unless ``replace`` re-files it.

        A promotion attaches with ``replace``: a target it cites that the body also
        mentions is held as a durable promoted reference, as in the peer.
        """
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        with self.store.tx() as db:
            for urn in urns:
                db.execute(
                    f"{verb} INTO page_refs VALUES (?, ?, ?, ?)", (page_id, urn, source, author)
                )

    def set_refs(self, page_id: str, source: str, urns: Iterable[str], author: str) -> None:
        """Make ``urns`` the page's references of ``source`` (others are untouched)."""
        with self.store.tx() as db:
            db.execute("DELETE FROM page_refs WHERE page_id = ? AND source = ?", (page_id, source))
            self.add_refs(page_id, source, urns, author)

    def _version(
        self,
        page_id: str,
        version: int,
        title: str,
        summary: str,
        body: str,
        tags: Sequence[str],
        change_summary: str,
        author: str,
        at: int,
    ) -> None:
        vid = "kpv_" + ids.hex_id("page_version", self.store.next_seq("page_version"))[:24]
        with self.store.tx() as db:
            db.execute(
                "INSERT INTO page_versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    vid,
                    page_id,
                    version,
                    title,
                    summary,
                    body,
                    dumps(list(tags)),
                    change_summary,
                    author,
                    at,
                ),
            )
