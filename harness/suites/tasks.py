"""The tasks suite, live: the peer's tasks bench answered on the embedded platform.

One unit is one attempt at one task (``protocols.tasks``), as one fresh pool identity:
a single episode named ``task`` (the read side's ``decisions.EPISODE``) with the task's
prompt and its tool-call budget, ending with a ``FINAL ANSWER:`` line. The one decision
function (``projections.suites.tasks.decisions.decide_unit``) then rules on it, exactly
as ``replay --level rederive`` will.

The run records what the read side needs to find its items again without a file
(``projections.suites.tasks.items``): every task of the set as loaded
(``config["tasks"]``), the reference readings of the study's tasks when the seed pack's
``trino/setup.sql`` holds the study's tables (``config["references"]``; without them
only ``correct`` is ruled) and ``config["planted"]`` (None: a live run plants nothing).
"""

from __future__ import annotations

import os
from typing import Any, Final

import msgspec

from benchledger import protocols
from benchledger.harness.agents.base import Episode
from benchledger.harness.episode import COUNTED
from benchledger.harness.record import RunConfig, RunRefused
from benchledger.harness.suites.base import Loaded, Outcome
from benchledger.harness.unit import UnitContext
from benchledger.ledger.events import RunRecord
from benchledger.projections.suites.tasks.decisions import EPISODE, TaskItem, decide_unit
from benchledger.projections.suites.tasks.items import references_config
from benchledger.protocols.errors import InvalidInput
from benchledger.protocols.task_grading import (
    CORRECT,
    References,
    Warehouse,
    read_warehouse,
    references,
)
from benchledger.protocols.tasks import Task, load, task_set_hash

SETUP_SQL: Final = os.path.join("trino", "setup.sql")  # a pack's warehouse (refplatform.packs)
DEFAULT_PACK: Final = os.path.join(protocols.DATA_DIR, "pack")
SYSTEM_PROMPT: Final = (
    "You are a data analyst answering a question about the company's data through the "
    "platform's tools: its warehouse (SQL), catalog, knowledge pages and memory. You have a "
    "limited number of tool calls in this session. End your reply with a line "
    "'FINAL ANSWER: <value>' holding only the answer (a number, or a name)."
)


def warehouse_of(pack: str) -> Warehouse | None:
    """The seeded warehouse of ``pack`` ("" = benchledger's own), or None when its
    ``trino/setup.sql`` does not hold the study's tables (then no readings are known)."""
    try:
        return read_warehouse(os.path.join(pack or DEFAULT_PACK, SETUP_SQL))
    except InvalidInput:
        return None


def readings(warehouse: Warehouse | None, task: Task) -> References | None:
    """The task's reference readings (correct and the traps; nothing is planted live), or
    None for a task outside the study or a warehouse without its tables."""
    if warehouse is None:
        return None
    try:
        return references(warehouse, task, None)
    except ValueError:  # an expected_sql the warehouse model does not evaluate: `correct` only
        return None


class TasksSuite:
    name = "tasks"
    identities_per_unit = 1  # one fresh identity per attempt: nothing carries over
    run_prefix = "tk"
    item_noun = "task"
    # As the other suites count them: the diagnostics read the calls, not these flags.
    tools = COUNTED  # the calls the platform's vocabulary names

    def __init__(self) -> None:
        self.tasks: tuple[Task, ...] = ()
        self.warehouse: Warehouse | None = None

    def default_path(self) -> str:
        return ""  # no committed task set: settle asks for --tasks

    def load(self, path: str) -> Loaded:
        self.tasks = load(path).tasks
        return Loaded(list(self.tasks), task_set_hash(self.tasks), path)

    def entity(self, item: Any) -> str:
        return f"task:{item.id}"

    def item_hash(self, item: Any) -> str:
        return ""  # a task is bound by the task set's hash in run_started

    def passed(self, outcome: Outcome) -> bool:
        return outcome.get(CORRECT) is True

    def unit_status(self, outcome: Outcome) -> str:
        if CORRECT not in outcome:  # exec_sql, state, refusal: the answer alone cannot be graded
            return "not graded"
        return "correct" if self.passed(outcome) else "not correct"

    def settle(self, config: RunConfig, external: bool) -> None:
        """``--tasks`` names the task file or folder (the peer's bench/tasks): it has no
        default."""
        if not config.resume and not config.protocols_path:
            raise RunRefused(
                "--suite tasks needs --tasks PATH: a task file or folder (e.g. "
                "../shared/peers/mcp-data-platform/bench/tasks)"
            )

    def configure(self, record: RunRecord) -> None:
        self.warehouse = warehouse_of(record.pack)

    def run_config(self) -> dict[str, Any]:
        """``run_started.config``: every task of the set, the study's readings, no plant."""
        refs = {t.id: r for t in self.tasks if (r := readings(self.warehouse, t)) is not None}
        return {
            "tasks": {t.id: msgspec.to_builtins(t) for t in sorted(self.tasks, key=lambda t: t.id)},
            "references": references_config(refs),
            "planted": None,
        }

    async def run_unit(self, ctx: UnitContext) -> None:
        item = ctx.plan.item
        # A full replay gives the read side's item (the task with its recorded readings).
        if not isinstance(item, TaskItem):
            item = TaskItem(item, readings(self.warehouse, item))
        task = item.task
        ep = Episode(EPISODE, SYSTEM_PROMPT, task.prompt, task, task.budget_tool_calls)
        await ctx.episode(ep, ctx.plan.identities[0])
        ctx.decisions(decide_unit(item, ctx.log))
        await ctx.commit()
