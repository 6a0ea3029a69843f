"""A fake model agent: the scripted agent's decisions, served as if by a slow model.

It is a ``ModelAgent`` over a ``FakeTransport``: each turn builds the canonical
request, waits ``delay_s`` (asyncio sleep, standing in for a model API call) and is
recorded as a model exchange with token usage, so runs with it exercise the same
model-call path as a real model agent.

It also judges (``judge_reply``): a request filled from a judge prompt
(``protocols.judges``) is answered by rule, deterministically, the same rule the loopback
provider fakes of the tests use. A prompt asking to "be generous" (``lenient``) accepts an
answer sharing any content word with the gold (``retrieval.words``); any other prompt
(``strict``, LongMemEval's, one's own) accepts it only when every normalised token of the
gold (LoCoMo's, ``grading.tokens``) is in the answer; LongMemEval's abstention prompt (it
asks whether the model identifies an "unanswerable" question) accepts an answer that
abstains (``longmemeval.grading.abstains``), whatever the explanation. So the two shipped
LoCoMo prompts give different verdicts on the same answers, as real judges do.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from benchledger.harness.agents.base import Episode
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.agents.retrieval import words
from benchledger.harness.agents.scripted import ScriptedAgent
from benchledger.harness.models.errors import ModelError
from benchledger.harness.models.fake import FakeTransport
from benchledger.harness.models.request import CanonicalRequest
from benchledger.harness.models.response import ModelResponse, ModelToolCall
from benchledger.projections.suites.locomo.grading import tokens
from benchledger.projections.suites.longmemeval.grading import abstains

_SCRIPT = ScriptedAgent()
# The three fields of a filled judge prompt, as the shipped prompts label them (LoCoMo's
# "Gold answer", LongMemEval's "Correct Answer", "Rubric" or "Explanation").
_FIELDS: Final = re.compile(
    r"^Question: (?P<q>.*?)\n+(?:Gold answer|Correct Answer|Rubric|Explanation): (?P<gold>.*?)"
    r"\n+(?:Generated answer|Model Response): (?P<answer>.*?)\n\n",
    re.S | re.M,
)


def judge_reply(prompt: str, params: Mapping[str, Any] | None = None) -> str | None:
    """The fake judge's reply to a filled judge prompt (module docstring); None when
    ``prompt`` is not one. Sampled above temperature 0 (``params``), a borderline answer
    (one the lenient rule accepts and the strict one does not) is judged by the lenient
    rule under an even seed and the strict one under an odd seed: a judge whose samples
    disagree, deterministically, as a stand-in for a real judge's variance."""
    m = _FIELDS.search(prompt)
    if m is None:
        return None
    gold, answer = m["gold"].strip(), m["answer"].strip()
    have = set(tokens(answer))
    lenient = bool(words(gold) & words(answer))
    strict = bool(tokens(gold)) and all(t in have for t in tokens(gold))
    ok = lenient if "generous" in prompt else strict
    if "unanswerable" in prompt:
        ok = lenient = strict = abstains(answer)
    p = params or {}
    if lenient != strict and float(p.get("temperature") or 0) > 0:
        ok = lenient if int(p.get("seed") or 0) % 2 == 0 else strict
    if '"label"' in prompt:
        label = "CORRECT" if ok else "WRONG"
        return f'The fake judge ruled by rule. {{"label": "{label}"}}'
    return "yes" if ok else "no"


def scripted_decision(request: CanonicalRequest, hint: Any) -> ModelResponse:
    """The scripted agent's next turn for the episode ``hint``, as a model response; a
    judge prompt (no episode, one user message) is answered by ``judge_reply``."""
    if not isinstance(hint, Episode) and len(request.messages) == 1:
        reply = judge_reply(str(request.messages[0].get("text", "")), request.params)
        if reply is not None:
            return ModelResponse(text=reply)
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
