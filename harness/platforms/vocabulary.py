"""A platform's own memory vocabulary: how to write, search and correct on it, said once.

A platform's MCP server names its memory verbs its own way (refplatform's
``memory_capture``/``search``, server-memory's ``create_entities``/``search_nodes``, a
plugin's ``remember``/``lookup``). Its client declares them as one ``Vocabulary`` (the
attribute ``vocabulary``; a mapped server's comes from its mapping), and everything that
speaks memory without a model speaks through it: the scripted agent, the retrieval reader,
LoCoMo's ingestion, the probe. Nothing finds a vocabulary by the tools a session lists or
by a platform's name: a client that declares none has no memory the harness can write or
search, and says so (docs/plugins.md, "The vocabulary").

The parts the read side needs (which calls count as a capture or a search, where the hits
are in a search answer) are recorded with every episode (``episode_finished``), so a run
is re-derived from its ledger alone.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.harness.agents.base import ToolCall
from benchledger.ledger.events import HitRule

Args = dict[str, Any]


class Vocabulary(NamedTuple):
    """One server's memory verbs.

    ``write(text, title)`` is the arguments of ``write_tool`` storing ``text`` as one memory
    titled ``title`` (a stable, unique name such as a dialogue id); ``search(query, k)`` the
    arguments of ``search_tool`` asking for the ``k`` best memories for ``query``;
    ``correct(old, new, title)``, when the server corrects in place, the arguments of
    ``correct_tool`` replacing the memory holding ``old`` by ``new`` (without one, a
    correction is written as a new memory). ``captures`` and ``searches`` are further tools
    that count as a capture or a search (a graph's ``add_observations``); ``expose`` the
    further tools an agent may see and call (None: every tool the session lists, for
    benchledger's own adapters, which confine each identity). ``hits`` says where the hits
    are in a search answer and what a hit's id is (a ``HitRule``, which
    ``projections.retrieval.hits`` and ``items`` read): without a path or pattern, the
    generic rule; a dot-separated JSON ``path`` (``results``; ``$`` the top-level array)
    names the array holding them; a mapping's text patterns split a text answer.
    ``dialect`` names a built-in scripted-agent dialect ("" for none: the scripted agent
    speaks the vocabulary alone); ``lifecycle`` is a mapped server's mapping."""

    name: str
    write_tool: str
    write: Callable[[str, str], Args]
    search_tool: str
    search: Callable[[str, int], Args]
    correct_tool: str = ""
    correct: Callable[[str, str, str], Args] | None = None
    captures: frozenset[str] = frozenset()
    searches: frozenset[str] = frozenset()
    expose: frozenset[str] | None = frozenset()
    hits: HitRule = HitRule(id_field="id")
    dialect: str = ""
    lifecycle: Any = None

    @property
    def capture_tools(self) -> frozenset[str]:
        """The calls that count as a capture (a write or a correction)."""
        fix = {self.correct_tool} if self.correct_tool else set()
        return frozenset({self.write_tool, *fix}) | self.captures

    @property
    def search_tools(self) -> frozenset[str]:
        """The calls that count as a search."""
        return frozenset({self.search_tool}) | self.searches

    @property
    def tools(self) -> frozenset[str]:
        """Every tool the vocabulary names (an agent sees these, plus ``expose``)."""
        return self.capture_tools | self.search_tools | (self.expose or frozenset())

    def shown(self, listed: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools of ``listed`` an agent sees: the vocabulary's and those it exposes."""
        if self.expose is None:
            return listed
        return [t for t in listed if t.get("name") in self.tools]

    def write_call(self, call_id: str, text: str, title: str) -> ToolCall:
        """The tool call writing ``text`` as the memory ``title``."""
        return ToolCall(call_id, self.write_tool, self.write(text, title))

    def search_call(self, call_id: str, query: str, k: int) -> ToolCall:
        """The tool call searching memory for ``query``, ``k`` results at most."""
        return ToolCall(call_id, self.search_tool, self.search(query, k))

    def record(self) -> dict[str, Any]:
        """What a run records of the vocabulary (JSON): its name, tools and hit location."""
        return {
            "name": self.name,
            "write": self.write_tool,
            "search": self.search_tool,
            "correct": self.correct_tool,
            "capture_tools": sorted(self.capture_tools),
            "search_tools": sorted(self.search_tools),
            "hits": msgspec.to_builtins(self.hits),
        }


def vocabulary_of(client: Any) -> Vocabulary | None:
    """The vocabulary ``client`` declares (None: it declares none)."""
    found = getattr(client, "vocabulary", None)
    return found if isinstance(found, Vocabulary) else None


_SAFE_TITLE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def slug(title: str) -> str:
    """A title usable as a note or entity name on every server (``D3:1`` -> ``D3-1``)."""
    return _SAFE_TITLE.sub("-", title).strip("-") or "memory"


# benchledger's own adapters' vocabularies, each the class attribute ``vocabulary`` of its
# client (mcp_data_platform.py, server_memory.py, basic_memory.py, mem0.py).
REFPLATFORM: Final = Vocabulary(
    name="refplatform",
    # An episodic event is live for its owner at once (no review), as a conversation turn is.
    write_tool="memory_capture",
    write=lambda text, title: {"type": "episodic_event", "content": text, "category": "general"},
    search_tool="search",
    search=lambda q, k: {"intent": q, "sources": ["memory"], "limit": min(k, 50)},
    expose=None,
    hits=HitRule(id_field="ref"),
    dialect="peer",
)

SERVER_MEMORY: Final = Vocabulary(
    name="server-memory",
    write_tool="create_entities",
    write=lambda text, title: {
        "entities": [{"name": slug(title), "entityType": "memory", "observations": [text]}]
    },
    # search_nodes matches a contiguous substring and has no limit: the query as given.
    search_tool="search_nodes",
    search=lambda q, k: {"query": q},
    captures=frozenset({"add_observations"}),
    searches=frozenset({"open_nodes", "read_graph"}),
    expose=None,
    hits=HitRule(id_field="name"),
    dialect="graph",
)

BASIC_MEMORY: Final = Vocabulary(
    name="basic-memory",
    write_tool="write_note",
    write=lambda text, title: {
        "title": slug(title),
        "content": text,
        "directory": "memories",
        "output_format": "json",
    },
    search_tool="search_notes",
    search=lambda q, k: {"query": q, "page_size": k, "output_format": "json"},
    captures=frozenset({"edit_note"}),
    searches=frozenset({"read_note"}),
    expose=None,
    hits=HitRule(id_field="permalink"),
    dialect="notes",
)

# mem0 behind benchledger's MCP server (harness/platforms/mem0_server.py): one memory is
# one text; the user ids are the adapter's, never an agent's.
MEM0: Final = Vocabulary(
    name="mem0",
    write_tool="add_memory",
    write=lambda text, title: {"text": text},
    search_tool="search_memories",
    search=lambda q, k: {"query": q, "limit": k},
    captures=frozenset({"update_memory"}),
    searches=frozenset({"get_memory", "list_memories"}),
    expose=None,
    dialect="mem0",
)
