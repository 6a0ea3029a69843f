"""The scripted agent on a task of the peer's tasks bench: run its expected SQL, answer the number.

Deterministic and model-free, like the lifecycle script. The one episode (``task``)
searches for the task's prompt first (the platform's search-first gate refuses a query
before any search), then calls ``trino_query`` with the task's ``expected_sql`` and
answers ``FINAL ANSWER: <number>`` with the first value of the result (its JSON, which
enrichment may follow with text). It reads nothing from the search: the query is fixed.
So a live tasks run checks the platform from outside: the peer computed each task's
graded value from its own seed, and our SQL engine answering the peer's query on that
seed must reproduce it.

A task without ``expected_sql``, or graded by anything but a number (an entity, an
executed query, a state or a refusal), is answered ``UNAVAILABLE``: with no model to
reason and no oracle to copy (the script never reads the grading's value), there is
nothing it can compute, and an answer that is never right keeps the measurement honest.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from benchledger.harness.agents.base import Episode, ToolCall, Turn
from benchledger.protocols.tasks import Task

UNAVAILABLE: Final = "UNAVAILABLE"
SQL_TOOL: Final = "trino_query"
SEARCH_TOOL: Final = "search"
SEARCH_LIMIT: Final = 5


def answerable(task: Task) -> bool:
    """Whether the script can answer ``task``: it has a query and a numeric grading."""
    return task.computable()


def number_text(value: str | None) -> str | None:
    """A result's value as the number the graders read, or None when it is no number."""
    try:
        number = float(value) if value is not None else math.nan
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    # Plain digits: the graders read the first number of the line, so never "1e+21".
    return str(int(number)) if number.is_integer() else f"{number:.10f}".rstrip("0").rstrip(".")


def task_turn(
    episode: Episode, messages: list[dict[str, Any]], first_value: Callable[[str], str | None]
) -> Turn:
    """The next turn of a task's episode: a search, its query, then the answer (pure).

    ``first_value`` reads a query result's first value (``scripted.first_value``, given by
    the scripted agent, which imports this module)."""
    task = episode.protocol
    assert isinstance(task, Task)  # ScriptedAgent.decide sends only tasks here
    if not answerable(task):
        return Turn(f"FINAL ANSWER: {UNAVAILABLE}")
    results = [m for m in messages if m["role"] == "tool"]
    if not results:
        args = {"intent": episode.user_prompt, "limit": SEARCH_LIMIT}
        return Turn("", (ToolCall("call-1", SEARCH_TOOL, args),))
    if len(results) == 1:
        return Turn("", (ToolCall("call-2", SQL_TOOL, {"sql": task.expected_sql}),))
    query = results[1]
    value = None if query.get("is_error") else number_text(first_value(str(query["text"])))
    return Turn(f"FINAL ANSWER: {value if value is not None else UNAVAILABLE}")
