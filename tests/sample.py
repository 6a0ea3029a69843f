"""Deterministic sample runs for tests and the golden bundle."""

from __future__ import annotations

import random

from benchledger.ledger import Ledger
from benchledger.ledger.events import (
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

# The ledger contract's clock, which tests also import from here.
from benchledger.testing.ledger import counter_clock as counter_clock


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


PASSING = {
    "capture_attempted": True,
    "captured": True,
    "recall_correct": True,
    "recall_search_called": True,
    "recall_fact_surfaced": True,
    "abstain_correct": True,
}
PROMOTE = {"promoted": True, "transfer_correct": True, "transfer_surfaced": True}
UPDATE = {"update_captured": True, "update_correct": True, "duplicated": False}


def lifecycle_run(
    ledger: Ledger,
    run_id: str,
    outcomes: dict[tuple[str, int], dict[str, bool | None]],
    *,
    protocol_set_hash: str = "set-1",
    agent: str = "scripted",
    k: int = 1,
    errors: dict[tuple[str, int], str] | None = None,
    model: str = "none",
    platform: str = "refplatform",
) -> str:
    """A sealed lifecycle run whose units carry exactly ``outcomes`` as grader decisions."""
    ledger.start_run(
        run_id,
        RunStartedBody(
            suite="lifecycle",
            protocol_set_hash=protocol_set_hash,
            k=k,
            agent=agent,
            model=model,
            platform=platform,
            platform_version="test",
        ),
    )
    for (pid, attempt), checks in sorted(outcomes.items()):
        w = ledger.new_stream(f"{run_id}/{pid}/{attempt}")
        w.append(UnitStartedBody(protocol_id=pid, attempt=attempt))
        fin = w.append(
            EpisodeFinishedBody(
                episode="recall", final_answer="FINAL ANSWER: 1", input_tokens=3, output_tokens=2
            )
        )
        for check, verdict in checks.items():
            w.append(
                GraderDecisionBody(
                    stage=check.split("_")[0],
                    check=check,
                    verdict=verdict,
                    reason="sample",
                    answer="FINAL ANSWER: 1",
                ),
                refs=[fin],
            )
        error = (errors or {}).get((pid, attempt), "")
        w.append(UnitFinishedBody(outcome=dict(checks), error=error))
        ledger.commit(w)
    return ledger.seal(run_id)
