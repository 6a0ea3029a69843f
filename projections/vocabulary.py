"""Which recorded calls were a search or a capture, and where a search's hits are.

A platform declares its own vocabulary (harness/platforms/vocabulary.py) and every episode
records, in ``episode_finished``, the tools it counted as a search and as a capture and
where the hits are in a search answer. A reader takes them from there. Episodes recorded
before they were (``vocabulary`` empty) are read by the tool names benchledger counted
then, ``BEFORE_CAPTURE`` and ``BEFORE_SEARCH``, so old runs re-derive as they were decided;
no new run is read by them.
"""

from __future__ import annotations

from typing import Final

from benchledger.ledger.events import EpisodeFinishedBody

NO_VOCABULARY: Final = "(none)"  # the platform declared no vocabulary

# The tool names counted, on every platform, by versions that recorded no vocabulary.
BEFORE_CAPTURE: Final = frozenset(
    {"memory_capture", "create_entities", "add_observations", "write_note", "edit_note",
     "add_memory", "update_memory"}
)  # fmt: skip
BEFORE_SEARCH: Final = frozenset(
    {"search", "search_nodes", "open_nodes", "read_graph", "search_notes", "read_note",
     "search_memories", "get_memory", "list_memories"}
)  # fmt: skip


def recorded(e: EpisodeFinishedBody) -> bool:
    """Whether the episode recorded the vocabulary it counted by."""
    return bool(e.vocabulary)


def capture_tools(e: EpisodeFinishedBody) -> frozenset[str]:
    """The tools ``e`` counted as a capture."""
    return frozenset(e.capture_tools) if recorded(e) else BEFORE_CAPTURE


def search_tools(e: EpisodeFinishedBody) -> frozenset[str]:
    """The tools ``e`` counted as a search."""
    return frozenset(e.search_tools) if recorded(e) else BEFORE_SEARCH
