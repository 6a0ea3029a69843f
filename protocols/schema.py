"""The lifecycle protocol schema: frozen msgspec Structs in the peer platform's field order.

Field order matters: the ``peer`` protocol-set hash encodes fields in this order,
as Go's ``encoding/json`` encodes the peer's structs. ``query`` fields are
benchledger's own extension (the SQL whose result is the answer) and are left out
of the peer recipe, because the peer's structs do not have them.
"""

from __future__ import annotations

from typing import Final

import msgspec

SINKS: Final = ("datahub", "knowledge_page")
GRADING_KINDS: Final = ("numeric", "entity")


class _Frozen(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    pass


class Grading(_Frozen, frozen=True):
    """How an answer is graded: a number within a tolerance, or an entity by alias."""

    kind: str
    value: float | None = None
    abs_tolerance: float = 0.0
    aliases: tuple[str, ...] = ()
    wrong_aliases: tuple[str, ...] = ()


class Page(_Frozen, frozen=True):
    """The knowledge page written when a protocol's sink is ``knowledge_page``.

    ``summary`` is optional: the peer's v1.102 sets had no such field. A page without
    one is promoted with an empty summary, which both platforms accept (the peer's
    apply input tags it ``omitempty``). Surfacing is unchanged here: benchledger looks
    for the protocol's fact in tool results. The peer's own harness (instrument.go,
    ``surfacedTarget``) looks for a knowledge page's summary instead, and an empty
    needle never matches, so a set without summaries would read "not surfaced" there.
    ``body`` has a default only because a field after a default must have one; the
    loader requires it for the knowledge_page sink.
    """

    slug: str
    title: str
    summary: str = ""
    body: str = ""


class Prompt(_Frozen, frozen=True):
    prompt: str


class Question(_Frozen, frozen=True):
    """A graded question; ``query`` is the SQL that computes the expected answer."""

    prompt: str
    grading: Grading
    query: str = ""


class Update(_Frozen, frozen=True):
    """A correction: the new fact, the question it must flip, and the stale answer."""

    prompt: str
    fact: str
    recall: Question
    superseded_value: float | str | None = None


class Protocol(_Frozen, frozen=True):
    """One lifecycle protocol: teach a fact, recall it, promote/transfer or update, abstain."""

    id: str
    title: str
    fact: str
    entity_urn: str
    sink: str
    page: Page | None = None
    budget_tool_calls: int = 0
    teach: Prompt = Prompt("")
    recall: Question = Question("", Grading("numeric"))
    transfer: Question | None = None
    update: Update | None = None
    abstain: Prompt | None = None

    @property
    def promotes(self) -> bool:
        """Whether this protocol promotes its insight (and then tests transfer)."""
        return self.transfer is not None


class ProtocolSet(msgspec.Struct, frozen=True):
    """A loaded, validated protocol set, in load order, with the files it came from."""

    protocols: tuple[Protocol, ...]
    files: tuple[str, ...]
    skipped: tuple[str, ...] = ()
    origins: tuple[str, ...] = ()  # the file each protocol came from, in load order

    def by_id(self) -> dict[str, Protocol]:
        return {p.id: p for p in self.protocols}
