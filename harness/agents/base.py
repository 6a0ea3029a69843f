"""The agent interface: given an episode, its messages and tools, produce the next turn.

Messages are provider-neutral JSON dicts, the same for every agent:
``{"role": "user", "text": ...}``,
``{"role": "assistant", "text": ..., "tool_calls": [{"id", "name", "arguments"}]}``,
``{"role": "tool", "call_id": ..., "name": ..., "text": ..., "is_error": bool}``.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Protocol

from benchledger.harness.models.transport import ModelObserver
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem
from benchledger.protocols.cases import Case
from benchledger.protocols.schema import Protocol as LifecycleProtocol
from benchledger.protocols.tasks import Task


class ToolCall(NamedTuple):
    id: str
    name: str
    arguments: dict[str, Any]


class Turn(NamedTuple):
    """An agent's reply: text, tool calls, and (for model agents) the exchange to record."""

    text: str
    tool_calls: tuple[ToolCall, ...] = ()
    usage: dict[str, int] | None = None
    request: Any = None  # model agents: request_json(req), recorded in a model_call
    response: Any = None  # model agents: response_json(resp)
    latency_ms: float = 0.0
    retry: int = 0  # failed attempts before this turn's response (model agents)
    request_hash: str = ""  # model agents: request_hash(request); the episode records it


class Episode(NamedTuple):
    """What an episode is about. Model agents use the prompts; the scripted agent the protocol
    (a provenance case for the provenance lane, a task for the tasks suite, a LoCoMo
    question for the locomo suite)."""

    stage: str
    system_prompt: str
    user_prompt: str
    protocol: LifecycleProtocol | Case | Task | LocomoItem | LongMemEvalItem
    budget: int
    # The platform's declared memory vocabulary (harness.platforms.vocabulary.Vocabulary;
    # None: it declares none), set by the episode runner from the platform's client.
    vocabulary: Any = None
    # LoCoMo's ask episodes (harness/suites/locomo.py, from the run record): the depth the
    # harness searches at (0: the agent's default, or no search) and the full-context
    # control's token budget.
    search_k: int = 0
    context_budget: int = 0


class UnitInfo(NamedTuple):
    """The unit an agent is about to work on (for per-unit agent state)."""

    stream: str
    protocol_id: str
    attempt: int
    teacher: str
    learner: str


class Agent(Protocol):
    """Produces turns. ``records_model_calls`` says whether turns are model exchanges."""

    name: str
    model: str
    records_model_calls: bool

    def for_unit(self, unit: UnitInfo) -> Agent:
        """The agent to use for ``unit``; stateless agents return themselves."""
        ...

    async def next_turn(
        self,
        episode: Episode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        observer: ModelObserver | None = None,
    ) -> Turn:
        """The next turn; model agents report failed attempts to ``observer``."""
        ...
