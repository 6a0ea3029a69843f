"""Deterministic sample runs for tests and the golden bundle."""

from __future__ import annotations

import itertools
import random
from collections.abc import Callable

from ledger import Ledger
from ledger.events import (
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    ModelCallBody,
    ReadBackBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)


def counter_clock(start: int = 1_780_000_000_000_000_000, step: int = 1_000) -> Callable[[], int]:
    """A clock that ticks ``step`` ns per reading: deterministic timestamps."""
    it = itertools.count(start, step)
    return lambda: next(it)


def write_unit(ledger: Ledger, stream: str, rng: random.Random, episodes: int = 2) -> None:
    """One finished unit stream with realistic events and refs."""
    w = ledger.new_stream(stream)
    w.append(
        UnitStartedBody(
            protocol_id=stream.split("/")[1],
            attempt=int(stream.split("/")[2]),
            teacher="pool:001 bench-agent-001@apikey.local",
        )
    )
    for e in range(episodes):
        ep = ("teach", "recall", "transfer", "abstain")[e % 4]
        s = w.append(EpisodeStartedBody(episode=ep, identity="pool:001", system_prompt="Answer."))
        m = w.append(
            ModelCallBody(
                episode=ep,
                request_hash=f"{rng.getrandbits(64):016x}",
                request={"messages": [{"role": "user", "content": "q"}]},
                response={"text": f"FINAL ANSWER: {rng.randint(1, 999)}"},
                usage={"input_tokens": 10, "output_tokens": 5},
            ),
            refs=[s],
        )
        c = w.append(
            SessionCallBody(
                episode=ep,
                method="tools/call",
                tool="search",
                arguments={"intent": "gross revenue"},
                result={"groups": [{"hits": [{"text": "fact", "ref": "m1"}]}]},
            ),
            refs=[m],
        )
        r = w.append(
            ReadBackBody(
                stage=ep,
                method="GET",
                path="/api/v1/admin/knowledge/insights",
                body={"data": [], "total": 0},
            )
        )
        g = w.append(
            GraderDecisionBody(
                stage=ep,
                check="correct",
                verdict=rng.random() < 0.7,
                reason="matched",
                answer="42",
                expected=42,
            ),
            refs=[m, c, r],
        )
        w.append(EpisodeFinishedBody(episode=ep, final_answer="42", tool_calls=1), refs=[g])
    w.append(UnitFinishedBody(outcome={"captured": True}))
    ledger.commit(w)


def build_run(
    ledger: Ledger,
    run_id: str = "run-test",
    *,
    units: int = 4,
    seed: int = 7,
    episodes: int = 2,
    seal: bool = True,
) -> str:
    """A multi-stream run; returns its root ('' when unsealed)."""
    rng = random.Random(seed)
    ledger.start_run(run_id, RunStartedBody(suite="lifecycle", protocols=units, agent="scripted"))
    for u in range(units):
        write_unit(ledger, f"{run_id}/p{u:02d}/{u % 2}", rng, episodes)
    return ledger.seal(run_id) if seal else ""
