"""The knowledge toolkit: one object over review, apply, rollback and changesets.

Shared by the ``apply_knowledge`` tool and the admin REST routes, as in the peer
(knowledge/toolkit.go, rollback.go, page_sink.go). Each concept lives in its own module:
``knowledge_review`` (insights and their transitions), ``knowledge_apply`` (promotion to
the catalog or a knowledge page), ``knowledge_rollback`` and ``knowledge_changesets``.
This module dispatches ``apply_knowledge`` actions and gives the REST routes one door.

Everything one call writes is one transaction: a failing apply or rollback writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from benchledger.refplatform.auth import Identity
from benchledger.refplatform.errors import NotFound, ToolError
from benchledger.refplatform.pages import PageStore
from benchledger.refplatform.store import StateStore
from benchledger.refplatform.toolkits.catalog import Catalog
from benchledger.refplatform.toolkits.knowledge_apply import Apply
from benchledger.refplatform.toolkits.knowledge_changesets import Changesets
from benchledger.refplatform.toolkits.knowledge_review import Insights
from benchledger.refplatform.toolkits.knowledge_rollback import Rollback
from benchledger.refplatform.toolkits.memory import Memory

ACTIONS: Final = (
    "bulk_review",
    "review",
    "synthesize",
    "apply",
    "approve",
    "reject",
    "rollback",
    "list_changesets",
    "bulk_untag",
)

Handler = Callable[[Identity, dict[str, Any]], dict[str, Any]]


class Knowledge:
    """Insights under review, their promotion to a sink, and changesets with rollback."""

    def __init__(
        self, store: StateStore, memory: Memory, catalog: Catalog, pages: PageStore
    ) -> None:
        self.store = store
        self.memory = memory
        self.catalog = catalog
        self.pages = pages
        self._insights = Insights(store, memory, catalog)
        self._changesets = Changesets(store)
        self._apply = Apply(store, catalog, pages, self._insights, self._changesets)
        self._rollback = Rollback(store, catalog, pages, self._insights, self._changesets)
        self._handlers: dict[str, Handler] = {
            "bulk_review": self._insights.bulk_review,
            "review": self._insights.review,
            "synthesize": self._insights.synthesize,
            "apply": self._apply.apply,
            "approve": self._insights.approve_reject,
            "reject": self._insights.approve_reject,
            "rollback": self._rollback.tool,
            "list_changesets": self._changesets.list_tool,
        }

    # -- the admin REST routes' door ----------------------------------------------------------

    def insight(self, insight_id: str) -> dict[str, Any]:
        """One insight by id; NotFound otherwise."""
        return self._insights.insight(insight_id)

    def insights(
        self, f: dict[str, Any], *, limit: int, offset: int, oldest: bool = False
    ) -> tuple[list[dict[str, Any]], int]:
        """Insights matching the filters, newest first (``oldest`` flips), one window."""
        return self._insights.insights(f, limit=limit, offset=offset, oldest=oldest)

    def stats(self, f: dict[str, Any]) -> dict[str, Any]:
        """Aggregates over the matching insights (``GET /insights/stats``)."""
        return self._insights.stats(f)

    def set_status(self, insight_id: str, status: str, reviewer: str, notes: str) -> None:
        """Approve or reject one insight (NotFound; Conflict on an invalid transition)."""
        self._insights.set_status(insight_id, status, reviewer, notes)

    def edit(self, insight_id: str, text: str, category: str, confidence: str) -> None:
        """Edit a non-applied insight's text, category or confidence (Conflict if applied)."""
        self._insights.edit(insight_id, text, category, confidence)

    def changeset(self, changeset_id: str) -> dict[str, Any]:
        """One changeset by id; NotFound otherwise."""
        return self._changesets.changeset(changeset_id)

    def changesets(
        self, f: dict[str, Any], *, limit: int, offset: int
    ) -> tuple[list[dict[str, Any]], int]:
        """Changesets matching the filters, newest first, one window."""
        return self._changesets.changesets(f, limit=limit, offset=offset)

    def rollback(self, changeset_id: str, by: str) -> dict[str, Any]:
        """Revert a changeset (knowledge_rollback's docstring says when it is refused)."""
        return self._rollback.rollback(changeset_id, by)

    # -- apply_knowledge ----------------------------------------------------------------------

    def apply_knowledge(self, who: Identity, args: dict[str, Any]) -> dict[str, Any]:
        """Dispatch one ``apply_knowledge`` action."""
        action = str(args.get("action") or "")
        if not action:
            raise ToolError(f"action is required and must be one of: {', '.join(ACTIONS)}")
        if action not in ACTIONS:
            raise ToolError(f'invalid action "{action}": must be one of: {", ".join(ACTIONS)}')
        if action == "bulk_untag":
            raise ToolError(
                "bulk_untag is not available on refplatform: its catalog has no tag search; "
                "remove the tag per entity with apply (change_type remove_tag)"
            )
        if who.pool_index:
            self._held_to_own(who, action, args)
        return self._handlers[action](who, args)

    def _held_to_own(self, who: Identity, action: str, args: dict[str, Any]) -> None:
        """A pool identity reviews and promotes only what it captured itself.

        Every identity of the arm holds the admin role, so in the peer one could approve,
        reject, apply or roll back another's pending knowledge and read it in a review;
        one identity must not read or change another's memory (docs/refplatform.md,
        "Memory and insights"). Another's insight or changeset is reported as absent, as
        ``fetch`` does; the reviews list the caller's own (``knowledge_review.mine``). The
        admin key (the harness's reviewer) is not held."""
        for insight_id in [str(i) for i in args.get("insight_ids") or []]:
            try:
                mine = self._insights.row(insight_id)["created_by"] == who.email
            except NotFound:
                mine = True  # the action itself says it is not found
            if not mine:
                raise ToolError(f"insight {insight_id} not found")
        if action == "rollback" and args.get("changeset_id"):
            try:
                row = self._changesets.row(str(args["changeset_id"]))
            except NotFound:
                return
            if row["applied_by"] != who.email:
                raise ToolError(f"changeset not found: {args['changeset_id']}")
