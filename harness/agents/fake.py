"""A fake model agent: the scripted agent's decisions, served as if by a slow model.

It is a ``ModelAgent`` over a ``FakeTransport``: each turn builds the canonical
request, waits ``delay_s`` (asyncio sleep, standing in for a model API call) and is
recorded as a model exchange with token usage, so runs with it exercise the same
model-call path as a real model agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from benchledger.harness.agents.base import Episode
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.agents.scripted import ScriptedAgent
from benchledger.harness.models.errors import ModelError
from benchledger.harness.models.fake import FakeTransport
from benchledger.harness.models.request import CanonicalRequest
from benchledger.harness.models.response import ModelResponse, ModelToolCall

_SCRIPT = ScriptedAgent()


def scripted_decision(request: CanonicalRequest, hint: Any) -> ModelResponse:
    """The scripted agent's next turn for the episode ``hint``, as a model response."""
    if not isinstance(hint, Episode):
        raise ModelError(
            f"the fake model decides from the episode, got hint {type(hint).__name__}: "
            "call it through ModelAgent, which passes the episode as hint"
        )
    turn = _SCRIPT.decide(hint, request.messages, {t.name for t in request.tools})
    calls = [ModelToolCall(c.id, c.name, c.arguments) for c in turn.tool_calls]
    return ModelResponse(text=turn.text, tool_calls=calls)


class FakeModelAgent(ModelAgent):
    """``ModelAgent`` over a ``FakeTransport`` running the scripted agent's decisions."""

    def __init__(
        self,
        delay_s: float = 0.3,
        model: str = "fake-model",
        *,
        params: Mapping[str, Any] | None = None,
    ) -> None:
        transport = FakeTransport(scripted_decision, delay_s=delay_s, model=model)
        super().__init__(transport, model=model, params=params, name=f"fake:{model}",
                         answers=False)  # fmt: skip
        self.delay_s = delay_s
