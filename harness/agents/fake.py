"""A fake model agent: the scripted agent's decisions, served as if by a slow model.

Each turn takes ``delay_s`` (asyncio sleep, standing in for a model API call), and is
recorded as a model exchange with a canonical request and token usage, so runs with
it exercise the same model-call path as a real model agent.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from harness.agents.base import Episode, Turn
from harness.agents.scripted import ScriptedAgent


class FakeModelAgent:
    records_model_calls = True

    def __init__(self, delay_s: float = 0.3, model: str = "fake-model") -> None:
        self.delay_s = delay_s
        self.model = model
        self.name = f"fake:{model}"
        self._script = ScriptedAgent()

    async def next_turn(
        self, episode: Episode, messages: list[dict[str, Any]], tools: list[dict[str, Any]]
    ) -> Turn:
        start = time.perf_counter()
        await asyncio.sleep(self.delay_s)
        turn = self._script.decide(episode, messages)
        request = {
            "model": self.model,
            "system": episode.system_prompt,
            "messages": messages,
            "tools": [t["name"] for t in tools],
        }
        response = {
            "text": turn.text,
            "tool_calls": [c._asdict() for c in turn.tool_calls],
        }
        prompt_chars = sum(len(str(m.get("text", ""))) for m in messages)
        usage = {"input_tokens": 1 + prompt_chars // 4, "output_tokens": 1 + len(turn.text) // 4}
        ms = (time.perf_counter() - start) * 1000
        return turn._replace(request=request, response=response, usage=usage, latency_ms=ms)
