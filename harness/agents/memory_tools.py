"""How a model-free agent writes a memory and searches memory on a platform: its vocabulary.

A platform's MCP server names its memory verbs its own way (refplatform's
``memory_capture``/``search``, server-memory's ``create_entities``/``search_nodes``,
basic-memory's ``write_note``/``search_notes``). A ``Vocabulary`` says, for one such
server, how to write one text as one memory and how to search; the agents that write or
search without a model (the retrieval reader, LoCoMo's ingestion) find the vocabulary of
a session by the tools it lists (``for_tools``), never by a platform's name. A new server
is one ``register`` call (or, for a generic MCP server, its mapping file).

What a search returned is read on the ledger's side, by one rule for every platform
(``projections.retrieval.hits``), so re-derivation ranks the same hits the agent saw.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection
from typing import Any, Final, NamedTuple

from benchledger.harness.agents.base import ToolCall


class Vocabulary(NamedTuple):
    """One server's memory verbs: ``marker`` (tools a session lists when it speaks them),
    ``write(text, title)`` the call storing ``text`` as one memory titled ``title`` (a
    stable, unique name such as a dialogue id), ``search(query, k)`` the call asking for
    the ``k`` best memories for ``query``."""

    name: str
    marker: frozenset[str]
    write: Callable[[str, str], dict[str, Any]]
    search: Callable[[str, int], dict[str, Any]]
    write_tool: str
    search_tool: str
    # A mapped server's mapping (harness.platforms.mcp_mapping.McpMapping): the scripted
    # agent speaks its lifecycle (correction, read-back) through it; None for the built-ins.
    lifecycle: Any = None

    def write_call(self, call_id: str, text: str, title: str) -> ToolCall:
        """The tool call writing ``text`` as the memory ``title``."""
        return ToolCall(call_id, self.write_tool, self.write(text, title))

    def search_call(self, call_id: str, query: str, k: int) -> ToolCall:
        """The tool call searching memory for ``query``, ``k`` results at most."""
        return ToolCall(call_id, self.search_tool, self.search(query, k))


_SAFE_TITLE = re.compile(r"[^A-Za-z0-9._-]+")


def _slug(title: str) -> str:
    """A title usable as a note or entity name on every server (``D3:1`` -> ``D3-1``)."""
    return _SAFE_TITLE.sub("-", title).strip("-") or "memory"


REFPLATFORM: Final = Vocabulary(
    name="refplatform",
    marker=frozenset({"memory_capture", "search"}),
    # An episodic event is live for its owner at once (no review), as a conversation turn is.
    write=lambda text, title: {"type": "episodic_event", "content": text, "category": "general"},
    search=lambda q, k: {"intent": q, "sources": ["memory"], "limit": min(k, 50)},
    write_tool="memory_capture",
    search_tool="search",
)

SERVER_MEMORY: Final = Vocabulary(
    name="server-memory",
    marker=frozenset({"create_entities", "search_nodes"}),
    write=lambda text, title: {
        "entities": [{"name": _slug(title), "entityType": "memory", "observations": [text]}]
    },
    # search_nodes matches a contiguous substring and has no limit: the query as given.
    search=lambda q, k: {"query": q},
    write_tool="create_entities",
    search_tool="search_nodes",
)

BASIC_MEMORY: Final = Vocabulary(
    name="basic-memory",
    marker=frozenset({"write_note", "search_notes"}),
    write=lambda text, title: {
        "title": _slug(title),
        "content": text,
        "directory": "memories",
        "output_format": "json",
    },
    search=lambda q, k: {"query": q, "page_size": k, "output_format": "json"},
    write_tool="write_note",
    search_tool="search_notes",
)

# mem0 behind benchledger's MCP server (harness/platforms/mem0_server.py): one memory is
# one text; the user ids are the adapter's, never an agent's.
MEM0: Final = Vocabulary(
    name="mem0",
    marker=frozenset({"add_memory", "search_memories"}),
    write=lambda text, title: {"text": text},
    search=lambda q, k: {"query": q, "limit": k},
    write_tool="add_memory",
    search_tool="search_memories",
)

_KNOWN: list[Vocabulary] = [REFPLATFORM, SERVER_MEMORY, BASIC_MEMORY, MEM0]


def register(vocabulary: Vocabulary) -> Vocabulary:
    """Know ``vocabulary`` (replacing one of its name; checked before the built-in ones)."""
    _KNOWN[:] = [vocabulary] + [v for v in _KNOWN if v.name != vocabulary.name]
    return vocabulary


def for_tools(tools: Collection[str]) -> Vocabulary | None:
    """The vocabulary of a session listing ``tools`` (None: no known memory verbs)."""
    names = set(tools)
    return next((v for v in _KNOWN if v.marker <= names), None)


__all__ = ["BASIC_MEMORY", "MEM0", "REFPLATFORM", "SERVER_MEMORY", "Vocabulary", "for_tools",
           "register"]  # fmt: skip
