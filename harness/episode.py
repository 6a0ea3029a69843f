"""One episode: a fresh platform session, the agent loop under a budget, every call recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import blake3
import msgspec

from benchledger.harness.agents.base import Agent, Episode
from benchledger.harness.platforms.base import CallResult, PlatformClient
from benchledger.harness.platforms.vocabulary import Vocabulary, vocabulary_of
from benchledger.harness.prompts import BUDGET_MESSAGE
from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    EpisodeStartedBody,
    ModelCallBody,
    SessionCallBody,
)
from benchledger.ledger.ledger import StreamWriter
from benchledger.projections.trace import traced
from benchledger.projections.vocabulary import NO_VOCABULARY

EXTRA_COMPLETIONS = 2  # after the budget is spent, the model gets this many more turns
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


class ToolSets(NamedTuple):
    """Whether a suite's episodes record a search (``search_called``) and a capture
    (``capture_attempted``). Which calls are one is the platform's declared vocabulary's
    (``harness.platforms.vocabulary``), never a list of the harness's own."""

    search: bool = False
    capture: bool = False


NO_TOOLS: Final = ToolSets()
COUNTED: Final = ToolSets(search=True, capture=True)


def not_counted(name: str, listed: frozenset[str], is_error: bool) -> str:
    """Why a call of ``name`` counts as no attempt ("": it counts): only a call of a tool
    the session listed that the server did not answer as an error is one."""
    if name not in listed:
        return f"{name} was called but the session did not list it"
    if is_error:
        return f"{name} was called and the server answered it as an error"
    return ""


def _declared(tools: ToolSets, vocab: Vocabulary | None) -> tuple[frozenset[str], frozenset[str]]:
    """(search tools, capture tools) an episode counts: the vocabulary's, where the suite
    counts them (none without a vocabulary: nothing the harness can name is memory)."""
    if vocab is None:
        return frozenset(), frozenset()
    search = vocab.search_tools if tools.search else frozenset()
    return search, vocab.capture_tools if tools.capture else frozenset()


class Findings(NamedTuple):
    """What a suite reads off a finished episode for its ``episode_finished``: whether the
    fact it looks for surfaced in a tool result, and the sources the answer cites."""

    fact_surfaced: bool = False
    sources: tuple[str, ...] = ()


# A suite's reading of an episode: (final answer, tool results) -> its findings.
Reading = Callable[[str, Sequence[str]], Findings]


def nothing_read(answer: str, results: Sequence[str]) -> Findings:
    """The reading of a suite that records no findings of its own."""
    return Findings()


class EpisodeResult(NamedTuple):
    stage: str
    answer: str  # the full final text (graders extract FINAL ANSWER themselves)
    finished_seq: int
    tool_calls: int
    search_called: bool
    fact_surfaced: bool
    capture_attempted: bool
    budget_exhausted: bool
    tool_results: list[str]
    seqs: list[int]


class Recorder:
    """Observer that appends each session call to the unit's stream as it happens."""

    def __init__(self, writer: StreamWriter, episode: str) -> None:
        self.writer = writer
        self.episode = episode
        self.seqs: list[int] = []
        self.bodies: list[Body] = []  # typed, for the trace hash (the writer keeps bytes)

    def append(self, body: Body, refs: list[int]) -> int:
        """Stage ``body`` on the stream, remember it, and return its seq."""
        self.bodies.append(body)
        seq = self.writer.append(body, refs=refs)
        self.seqs.append(seq)
        return seq

    def session_call(self, body: SessionCallBody) -> None:
        """Stage one session call's event, after the stream's last event."""
        self.append(body, self.seqs[-1:])

    def attempt_failed(self, request: Any, failure: Any) -> None:
        """A model attempt that failed (and may be retried): a ``model_call`` with its error."""
        req = msgspec.to_builtins(request)
        body = ModelCallBody(
            episode=self.episode,
            request_hash=request_hash(req),
            request=req,
            latency_ms=round(float(getattr(failure, "latency_ms", 0.0)), 3),
            retry=int(getattr(failure, "attempt", 0)),
            error=f"{failure.kind}: {failure.message}",
            status=int(getattr(failure, "status", 0)),
        )
        self.append(body, self.seqs[-1:])


def request_hash(request: Any) -> str:
    """blake3 of the canonical JSON of a model request (replay serves responses by it)."""
    return blake3.blake3(canonical_json(request)).hexdigest()


async def run_episode(
    agent: Agent,
    platform: PlatformClient,
    writer: StreamWriter,
    episode: Episode,
    pool_index: int | None,
    identity: str,
    reads: Reading = nothing_read,
    *,
    attempt: int = 0,
    tools: ToolSets = NO_TOOLS,
) -> EpisodeResult:
    """Run one episode to its final answer; events are staged on ``writer`` (not committed).

    ``reads``: the suite's findings from the answer and tool results (whether its fact
    surfaced, the sources cited), recorded in ``episode_finished``; ``tools``: the calls
    counted as searches and captures.
    """
    rec = Recorder(writer, episode.stage)
    rec.append(
        EpisodeStartedBody(
            episode=episode.stage,
            identity=identity,
            system_prompt=episode.system_prompt,
            user_prompt=episode.user_prompt,
            attempt=attempt,
        ),
        [],
    )
    messages: list[dict[str, Any]] = [{"role": "user", "text": episode.user_prompt}]
    calls = errors = extra = 0
    search = capture = exhausted = False
    results: list[str] = []
    tokens = dict.fromkeys(USAGE_KEYS, 0)
    answer = ""
    vocab = episode.vocabulary or vocabulary_of(platform)
    episode = episode._replace(vocabulary=vocab)
    searching, capturing = _declared(tools, vocab)
    refused: list[str] = []
    async with platform.session(pool_index, rec) as session:
        listed = await session.list_tools()
        names = frozenset(str(t.get("name", "")) for t in listed)
        # An agent sees only what the platform declares for it (docs/plugins.md).
        shown = vocab.shown(listed) if vocab is not None else listed
        offered = frozenset(str(t.get("name", "")) for t in shown)
        for _ in range(episode.budget + EXTRA_COMPLETIONS + 2):
            turn = await agent.next_turn(episode, messages, shown, observer=rec)
            # A model agent's turn that called no model (the harness's own search on a
            # LoCoMo question, harness/agents/answering.py) has no exchange to record.
            if agent.records_model_calls and turn.request is not None:
                usage = dict(turn.usage or {})
                for key in tokens:
                    tokens[key] += int(usage.get(key, 0))
                response = turn.response if isinstance(turn.response, dict) else {}
                rec.append(
                    ModelCallBody(
                        episode=episode.stage,
                        request_hash=turn.request_hash or request_hash(turn.request),
                        request=turn.request,
                        response=turn.response,
                        usage=usage,
                        latency_ms=round(turn.latency_ms, 3),
                        retry=turn.retry,
                        stop_reason=str(response.get("stop_reason", "end_turn")),
                    ),
                    rec.seqs[-1:],
                )
            if not turn.tool_calls:
                answer = turn.text
                break
            messages.append(
                {
                    "role": "assistant",
                    "text": turn.text,
                    "tool_calls": [c._asdict() for c in turn.tool_calls],
                }
            )
            for call in turn.tool_calls:
                if calls >= episode.budget:
                    exhausted = True
                    messages.append(
                        {
                            "role": "tool",
                            "call_id": call.id,
                            "name": call.name,
                            "text": BUDGET_MESSAGE,
                            "is_error": True,
                        }
                    )
                    continue
                calls += 1
                if call.name in names and call.name not in offered:
                    # Listed, but not the platform's to give an agent (another identity's
                    # delete): never sent, and no attempt of anything.
                    res = CallResult(f"{call.name} is not offered to agents on this platform",
                                     True, None, 0.0)  # fmt: skip
                    refused.append(f"{call.name} was called but the platform does not offer it")
                else:
                    res = await session.call_tool(call.name, call.arguments)
                errors += res.is_error
                counts = call.name in searching or call.name in capturing
                why = not_counted(call.name, names, res.is_error) if counts else ""
                if why:  # only a real call counts (docs/plugins.md, "The vocabulary")
                    refused.append(why)
                else:
                    search |= call.name in searching
                    capture |= call.name in capturing
                results.append(res.text)
                messages.append(
                    {
                        "role": "tool",
                        "call_id": call.id,
                        "name": call.name,
                        "text": res.text,
                        "is_error": res.is_error,
                    }
                )
            if exhausted:
                extra += 1
                if extra > EXTRA_COMPLETIONS:
                    break
    found = reads(answer, results)
    outcome = EpisodeFinishedBody(
        episode=episode.stage,
        final_answer=answer,
        tool_calls=calls,
        tool_errors=errors,
        search_called=search,
        fact_surfaced=found.fact_surfaced,
        budget_exhausted=exhausted,
        input_tokens=tokens["input_tokens"],
        output_tokens=tokens["output_tokens"],
        cache_read_tokens=tokens["cache_read_tokens"],
        cache_creation_tokens=tokens["cache_creation_tokens"],
        capture_attempted=capture,
        sources=list(found.sources),
        search_tools=sorted(searching),
        capture_tools=sorted(capturing),
        hits=vocab.hits if vocab is not None else None,
        not_counted=refused,
        vocabulary=vocab.name if vocab is not None else NO_VOCABULARY,
    )
    # The episode's trace hash covers every body it appended, this outcome included.
    finished = writer.append(traced(outcome, rec.bodies), refs=rec.seqs)
    return EpisodeResult(
        episode.stage,
        answer,
        finished,
        calls,
        search,
        found.fact_surfaced,
        capture,
        exhausted,
        results,
        rec.seqs,
    )
