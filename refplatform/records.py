"""Memory records and the insights they carry: vocabulary, validation and wire views.

In the peer, everything an agent saves is a memory record; a record of a *reviewed*
sink class (``business_knowledge``, ``schema_entity``, ``operational_rule``) also
carries the insight overlay (review status, reviewer, application) and is what the
admin knowledge API calls an insight, under the same id. The record's own ``status``
is ``active`` (live), ``superseded`` or ``archived`` (forgotten); the insight status is
``pending``, ``approved``, ``rejected``, ``applied`` or ``superseded``.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Sequence
from typing import Any, Final

from benchledger.refplatform.embedder import Vector
from benchledger.refplatform.errors import Conflict, ToolError
from benchledger.refplatform.times import rfc3339

LIVE_CLASSES: Final = ("personal_preference", "episodic_event")
REVIEWED_CLASSES: Final = ("business_knowledge", "schema_entity", "operational_rule")
SINK_CLASSES: Final = LIVE_CLASSES + REVIEWED_CLASSES
DIMENSIONS: Final = {"personal_preference": "preference", "episodic_event": "event"}
CATEGORIES: Final = (
    "correction",
    "business_context",
    "data_quality",
    "usage_guidance",
    "relationship",
    "enhancement",
    "general",
)
CONFIDENCES: Final = ("high", "medium", "low")
SOURCES: Final = ("user", "agent_discovery", "enrichment_gap")
DEFAULT_CATEGORY: Final = "business_context"
MIN_CONTENT, MAX_CONTENT, MAX_URNS, MAX_COLUMNS = 10, 4000, 10, 20

ACTIVE, SUPERSEDED, ARCHIVED = "active", "superseded", "archived"
PENDING, APPROVED, REJECTED, APPLIED = "pending", "approved", "rejected", "applied"
INSIGHT_STATUSES: Final = (PENDING, APPROVED, REJECTED, APPLIED, SUPERSEDED)
# The review status machine (knowledge/types.go). applied -> pending is rollback.
TRANSITIONS: Final = {
    PENDING: (APPROVED, REJECTED, SUPERSEDED),
    APPROVED: (APPLIED, REJECTED),
    APPLIED: (PENDING,),
}


def dimension(sink_class: str) -> str:
    """The LOCOMO dimension a sink class files under (reviewed classes are ``knowledge``)."""
    return DIMENSIONS.get(sink_class, "knowledge")


def _one_of(field: str, value: str, allowed: Sequence[str]) -> None:
    if value and value not in allowed:
        raise ToolError(f'invalid {field} "{value}": must be one of: ' + ", ".join(allowed))


def validate_sink_class(value: str) -> None:
    """Refuse a type that is not a known sink class."""
    if value not in SINK_CLASSES:
        raise ToolError(f'invalid type "{value}": must be one of: ' + ", ".join(SINK_CLASSES))


def validate_content(text: str) -> None:
    """Refuse content outside 10..4000 characters (after trimming)."""
    if not text:
        raise ToolError(f"content is required (minimum {MIN_CONTENT} characters)")
    if len(text) < MIN_CONTENT:
        raise ToolError(f"content must be at least {MIN_CONTENT} characters (got {len(text)})")
    if len(text) > MAX_CONTENT:
        raise ToolError(f"content must be at most {MAX_CONTENT} characters (got {len(text)})")


def validate_labels(category: str = "", confidence: str = "", source: str = "") -> None:
    """Refuse a category, confidence or source outside its enum (empty means the default)."""
    _one_of("category", category, CATEGORIES)
    _one_of("confidence", confidence, CONFIDENCES)
    _one_of("source", source, SOURCES)


def validate_counts(urns: Sequence[str], columns: Sequence[Any]) -> None:
    """Refuse more than 10 entity URNs or 20 related columns."""
    if len(urns) > MAX_URNS:
        raise ToolError(f"entity_urns exceeds maximum of {MAX_URNS} (got {len(urns)})")
    if len(columns) > MAX_COLUMNS:
        raise ToolError(f"related_columns exceeds maximum of {MAX_COLUMNS} (got {len(columns)})")


def check_transition(current: str, target: str) -> None:
    """Conflict naming both states unless ``current -> target`` is a review transition."""
    if target not in TRANSITIONS.get(current, ()):
        raise Conflict(f'invalid status transition from "{current}" to "{target}"')


def load_vector(text: str | None) -> Vector | None:
    """A stored embedding (a sparse dict or a dense list), or None when none was stored."""
    if not text:
        return None
    value = json.loads(text)
    return value if isinstance(value, dict) else [float(x) for x in value]


def urns(row: sqlite3.Row) -> list[str]:
    """The entity URNs of a record row."""
    value = json.loads(row["entity_urns"])
    return list(value)


def _opt_time(ns: int | None) -> str | None:
    return None if ns is None else rfc3339(ns)


def metadata(row: sqlite3.Row) -> dict[str, Any] | None:
    """The record's ``metadata`` as the peer shows it: free-form extras + the insight overlay."""
    meta: dict[str, Any] = dict(json.loads(row["extra"]))
    if row["insight"]:
        meta["insight_status"] = row["insight_status"]
        suggested = json.loads(row["suggested_actions"])
        if suggested:
            meta["suggested_actions"] = suggested
    overlay = {
        "session_id": row["session_id"],
        "review_notes": row["review_notes"],
        "reviewed_by": row["reviewed_by"],
        "reviewed_at": _opt_time(row["reviewed_at"]),
        "applied_by": row["applied_by"],
        "applied_at": _opt_time(row["applied_at"]),
        "changeset_ref": row["changeset_ref"],
        "superseded_by": row["superseded_by"],
    }
    meta.update({k: v for k, v in overlay.items() if v})
    return meta or None


def record_view(row: sqlite3.Row) -> dict[str, Any]:
    """A memory record as ``memory_manage list`` returns it."""
    columns = json.loads(row["related_columns"])
    return {
        "id": row["id"],
        "created_at": rfc3339(row["created_at"]),
        "updated_at": rfc3339(row["updated_at"]),
        "created_by": row["created_by"],
        "persona": row["persona"],
        "dimension": row["dimension"],
        "sink_class": row["sink_class"],
        "content": row["content"],
        "category": row["category"],
        "confidence": row["confidence"],
        "source": row["source"],
        "entity_urns": urns(row),
        "related_columns": columns or None,
        "metadata": metadata(row),
        "status": row["status"],
    }


def insight_view(row: sqlite3.Row, *, with_actions: bool = True) -> dict[str, Any]:
    """An insight as the admin knowledge API and ``apply_knowledge`` return it."""
    view: dict[str, Any] = {
        "id": row["id"],
        "created_at": rfc3339(row["created_at"]),
        "session_id": row["session_id"],
        "captured_by": row["created_by"],
        "persona": row["persona"],
        "source": row["source"],
        "category": row["category"],
        "insight_text": row["content"],
        "confidence": row["confidence"],
        "entity_urns": urns(row),
        "related_columns": json.loads(row["related_columns"]),
    }
    if with_actions:
        view["suggested_actions"] = json.loads(row["suggested_actions"])
    view["status"] = row["insight_status"]
    view["sink_class"] = row["sink_class"]
    lifecycle = {
        "reviewed_by": row["reviewed_by"],
        "reviewed_at": _opt_time(row["reviewed_at"]),
        "review_notes": row["review_notes"],
        "applied_by": row["applied_by"],
        "applied_at": _opt_time(row["applied_at"]),
        "changeset_ref": row["changeset_ref"],
    }
    view.update({k: v for k, v in lifecycle.items() if v})
    return view
