"""One episode: a fresh platform session, the agent loop under a budget, every call recorded."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import blake3
import msgspec

from benchledger.harness.agents.base import Agent, Episode
from benchledger.harness.agents.memory_tools import for_tools
from benchledger.harness.platforms.base import PlatformClient
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

EXTRA_COMPLETIONS = 2  # after the budget is spent, the model gets this many more turns
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")


class ToolSets(NamedTuple):
    """The tool names an episode records as a search (``search_called``) and a capture
    (``capture_attempted``): the suite's, since its decisions read them."""

    search: frozenset[str] = frozenset()
    capture: frozenset[str] = frozenset()


NO_TOOLS: Final = ToolSets()


def with_mapped(tools: ToolSets, listed: list[str]) -> ToolSets:
    """``tools`` plus a mapped server's own write and search verbs (``--platform mcp:FILE``,
    found by the tools its session lists), when the suite counts captures at all."""
    vocab = for_tools(listed)
    m = vocab.lifecycle if vocab is not None else None
    if m is None or not tools.capture:
        return tools
    return ToolSets(tools.search | m.read_tools, tools.capture | m.write_tools)


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
    async with platform.session(pool_index, rec) as session:
        listed = await session.list_tools()
        tools = with_mapped(tools, [t["name"] for t in listed])
        for _ in range(episode.budget + EXTRA_COMPLETIONS + 2):
            turn = await agent.next_turn(episode, messages, listed, observer=rec)
            if agent.records_model_calls:
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
                search |= call.name in tools.search
                capture |= call.name in tools.capture
                res = await session.call_tool(call.name, call.arguments)
                errors += res.is_error
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
