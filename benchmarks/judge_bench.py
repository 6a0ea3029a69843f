"""``benchledger bench judge``: what a judge adds to a locomo run's wall time.

The shipped LoCoMo-shaped set (36 questions) is run with the retrieval reader on the
embedded refplatform at ``--concurrency N``, twice in the same process, ``repeat`` times
each (medians printed): without a judge, and judged by the fake judge at a fixed delay
``D`` per call (``--judge fake:D``, an asyncio sleep standing in for the API's latency). A
judge runs inside each question's unit, after its answer, so at N units in flight its
calls overlap as the questions do: the judge's own latency per question spread over the
N lanes is ``questions x D / N``. The ratio printed is the added wall time over that: at
most 1.0 means judging adds no more than the judge's latency per question (it can add
less: a judge's call overlaps other units' ingestion and searches).
"""

from __future__ import annotations

import json
import os
import statistics
import tempfile
from typing import Any

from benchledger.benchmarks.run_bench import timed_run
from benchledger.harness.record import RunConfig
from benchledger.harness.suites.locomo import DEFAULT_DATA
from benchledger.protocols import locomo


def _run(folder: str, n: int, concurrency: int, judge: str) -> float:
    """Seconds for one whole locomo run of the shipped set into a fresh ledger."""
    cfg = RunConfig(suite="locomo", agent="retrieval", protocols_path=DEFAULT_DATA,
                    run_id=f"bench-{n}", concurrency=concurrency, judge=judge)  # fmt: skip
    return timed_run(cfg, os.path.join(folder, f"bench-{n}.sqlite"))[0]


def measure(*, repeat: int = 3, concurrency: int = 4, delay_s: float = 1.0) -> dict[str, Any]:
    """Medians of the plain and the judged run, and the added time over its bound."""
    questions = sum(len(s.questions) for s in locomo.load(DEFAULT_DATA).samples)
    plain, judged = [], []
    with tempfile.TemporaryDirectory(prefix="benchledger-judge-bench-") as folder:
        for i in range(repeat):
            plain.append(_run(folder, 2 * i, concurrency, ""))
            judged.append(_run(folder, 2 * i + 1, concurrency, f"fake:{delay_s}"))
    plain_s, judged_s = statistics.median(plain), statistics.median(judged)
    bound = questions * delay_s / concurrency
    return {
        "questions": questions,
        "concurrency": concurrency,
        "judge_delay_s": delay_s,
        "plain_s": round(plain_s, 2),
        "judged_s": round(judged_s, 2),
        "added_s": round(judged_s - plain_s, 2),
        "bound_s": round(bound, 2),
        "ratio": round((judged_s - plain_s) / bound, 2),
    }


def run_bench(*, repeat: int, concurrency: int, delay_s: float, as_json: bool) -> int:
    """Measure and print (JSON with ``as_json``)."""
    r = measure(repeat=repeat, concurrency=concurrency, delay_s=delay_s)
    if as_json:
        print(json.dumps(r, indent=2))
        return 0
    print(
        f"locomo, shipped set ({r['questions']} questions), retrieval reader, embedded "
        f"refplatform, --concurrency {concurrency}; judge fake:{delay_s}; median of {repeat}"
    )
    print(
        f"no judge {r['plain_s']:.2f} s, judged {r['judged_s']:.2f} s: added "
        f"{r['added_s']:.2f} s; the judge's latency over {concurrency} lanes "
        f"(questions x delay / concurrency) {r['bound_s']:.2f} s; ratio {r['ratio']:.2f}"
    )
    return 0
