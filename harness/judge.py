"""The judge: a model that grades an answer against the gold, recorded as an instrument.

``--judge SPEC`` names a model as ``--agent`` does (``harness.agents.from_spec``: ``fake``,
``openai:MODEL@URL``, ``anthropic:MODEL``); the judge sends it one user message, a judge
prompt (``protocols.judges``) filled with the question, the gold answer and the answer,
at temperature 0 unless told otherwise, ``samples`` times. A suite names its default prompt
(``default_judge_prompt``; ``lenient`` otherwise); LongMemEval's per-type set picks each
question's own prompt (``protocols.judges.for_question``). Each call is recorded as a
``model_call`` of the episode ``judge`` in the unit's stream, through the transport's
retries as any model call (failed attempts recorded too), citing the answer it grades; the
verdict is read from the recorded reply by the decision function
(``projections.suites.locomo.decisions.judge_rulings``), never here, so re-derivation
reads it again from the log. Everything that decides its verdicts is in the run record
(``RunRecord.judge``: ``record``), and ``recorded_judge`` rebuilds it over another transport
(full replay's tape). docs/locomo.md, "The judge".
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from benchledger.harness import agents
from benchledger.harness.episode import Recorder
from benchledger.harness.models.request import build_request, request_hash, request_json
from benchledger.harness.models.response import response_json
from benchledger.harness.models.transport import ModelTransport
from benchledger.harness.settings import Settings
from benchledger.ledger.events import ModelCallBody
from benchledger.ledger.ledger import StreamWriter
from benchledger.protocols.judges import (
    JudgePrompt,
    fill,
    for_question,
    judge_prompt,
    prompt_file,
)

__all__ = ["JUDGE", "Judge", "JudgeRefused", "make_judge", "recorded_judge"]

JUDGE: Final = "judge"  # the episode its model calls are recorded under
DEFAULT_PROMPT: Final = "lenient"


class JudgeRefused(ValueError):
    """A judge that cannot be made (one line): an unknown spec, a model-free agent."""


@dataclass(frozen=True)
class Judge:
    """A judge: its model over ``transport`` and everything its verdicts depend on."""

    spec: str
    model: str
    transport: ModelTransport
    prompt: JudgePrompt
    params: Mapping[str, Any]  # the request's sampling params (temperature, seed, ...)
    samples: int = 1

    def record(self) -> dict[str, Any]:
        """What ``RunRecord.judge`` keeps: enough to name, check and rebuild the judge."""
        return {
            "spec": self.spec,
            "model": self.model,
            "prompt": self.prompt.name,
            "prompt_sha256": self.prompt.sha256,
            "prompt_text": self.prompt.text,
            "temperature": self.params.get("temperature"),
            "seed": self.params.get("seed"),
            "samples": self.samples,
            "params": dict(self.params),
        }

    def sample_params(self, i: int) -> dict[str, Any]:
        """Sample ``i``'s params: a seeded judge's sample i is seeded ``seed + i``, so
        samples are independent draws, and each is reproducible."""
        params = dict(self.params)
        if i and params.get("seed") is not None:
            params["seed"] = int(params["seed"]) + i
        return params

    async def grade(
        self,
        writer: StreamWriter,
        question: str,
        gold: str,
        answer: str,
        refs: Sequence[int],
        question_type: str = "",
    ) -> list[int]:
        """Ask the judge ``samples`` times, with the prompt for ``question_type`` (a per-type
        set's own, else the one prompt); each call is staged on ``writer`` as a
        ``model_call`` citing ``refs`` (the answer graded). The seqs of the calls."""
        rec = Recorder(writer, JUDGE)
        text = fill(for_question(self.prompt, question_type), question, gold, answer)
        seqs = []
        for i in range(self.samples):
            req = build_request(self.model, "", [{"role": "user", "text": text}], [],
                                params=self.sample_params(i))  # fmt: skip
            start = time.perf_counter()
            resp = await self.transport.complete(req, observer=rec, hint=JUDGE)
            ms = (time.perf_counter() - start) * 1000
            seqs.append(rec.append(ModelCallBody(
                episode=JUDGE, request_hash=request_hash(req), request=request_json(req),
                response=response_json(resp), usage=dict(resp.usage), latency_ms=round(ms, 3),
                stop_reason=resp.stop_reason), list(refs)))  # fmt: skip
        return seqs


def _prompt(name: str, path: str, default: str) -> JudgePrompt:
    if path:
        return prompt_file(path)  # InvalidInput (exit 2) naming the file
    try:
        return judge_prompt(name or default or DEFAULT_PROMPT)
    except ValueError as exc:
        raise JudgeRefused(str(exc)) from None


def _model(
    spec: str,
    *,
    settings: Settings | None,
    params: Mapping[str, Any],
    transport: ModelTransport | None,
) -> tuple[ModelTransport, str, dict[str, Any]]:
    """(transport, model, params) of a model spec, built as ``--agent`` builds it."""
    try:
        agent = agents.from_spec(spec, params=dict(params), settings=settings,
                                 transport=transport)  # fmt: skip
    except ValueError as exc:
        raise JudgeRefused(str(exc).replace("--agent", "--judge")) from None
    inner = getattr(agent, "transport", None)
    if inner is None:
        raise JudgeRefused(f"--judge {spec}: a judge is a model; {spec} calls none "
                           "(use fake, openai:MODEL@URL or anthropic:MODEL)")  # fmt: skip
    return inner, str(agent.model), dict(getattr(agent, "params", None) or {})


def make_judge(
    spec: str,
    *,
    prompt: str = "",
    prompt_path: str = "",
    samples: int = 1,
    temperature: float = 0.0,
    seed: int | None = None,
    settings: Settings | None = None,
    default_prompt: str = "",
) -> Judge:
    """The judge ``--judge SPEC`` asks for (``default_prompt``: the suite's, when neither
    ``prompt`` nor ``prompt_path`` is given); JudgeRefused (or the prompt file's
    InvalidInput) with one line when it cannot be made."""
    if samples < 1:
        raise JudgeRefused(f"--judge-samples {samples}: ask the judge at least once")
    chosen = _prompt(prompt, prompt_path, default_prompt)
    given: dict[str, Any] = {"temperature": temperature}
    if seed is not None:
        given["seed"] = seed
    transport, model, params = _model(spec, settings=settings, params=given, transport=None)
    return Judge(spec, model, transport, chosen, params, samples)


def recorded_judge(
    judged: Mapping[str, Any],
    transport: ModelTransport | None = None,
    *,
    settings: Settings | None = None,
    samples: int = 0,
) -> Judge:
    """The judge a run recorded (``Judge.record``), its model served by ``transport``
    (replay's log) or, without one, by its provider again (a resume, a regrade asking the
    same judge); ``samples`` replaces the recorded count when given."""
    spec = str(judged.get("spec", ""))
    text = str(judged.get("prompt_text", ""))
    prompt = JudgePrompt(str(judged.get("prompt", "")), text, str(judged.get("prompt_sha256")))
    params = dict(judged.get("params") or {})
    inner, model, params = _model(spec, settings=settings, params=params, transport=transport)
    return Judge(spec, model, inner, prompt, params, samples or int(judged.get("samples") or 1))
