"""``benchledger bench longmemeval``: the longmemeval suite's wall time and peak memory on the
embedded refplatform with the retrieval reader, at LongMemEval_S's shape scaled down.

LongMemEval_S is 500 questions, each with its own haystack of about 40 sessions (~500
turns). ``--questions N --sessions M`` builds that shape at N questions of M sessions
(``protocols.longmemeval_synthetic.full_size``: seeded, ``--turns`` turns per filler
session) and runs it whole (``RunDriver``: plan, provision, ingest every haystack, ask,
grade, record, seal into a fresh SQLite ledger) at M/4, M/2 and M sessions, the same N,
so the seconds per ingested turn at the three sizes say whether cost grows linearly with
a haystack (docs/performance.md, "LongMemEval"). The peak resident memory is the
process's (``ru_maxrss``), read after each size: sizes run smallest first, so each is
that size's peak or an earlier one's. CPU seconds are printed beside wall seconds: on a
shared machine the wall time also counts other processes' turns on the cores.
"""

from __future__ import annotations

import json
import os
import resource
import tempfile
from typing import Any

from benchledger.benchmarks.run_bench import timed_run
from benchledger.harness.record import RunConfig
from benchledger.protocols.longmemeval_synthetic import full_size


def _run(data: str, folder: str, n: int, concurrency: int) -> tuple[float, float]:
    """Wall and CPU seconds (this process's, every thread) for one whole longmemeval run
    of ``data`` into a fresh ledger."""
    cfg = RunConfig(suite="longmemeval", agent="retrieval", protocols_path=data,
                    run_id=f"bench-{n}", concurrency=concurrency)  # fmt: skip
    return timed_run(cfg, os.path.join(folder, f"bench-{n}.sqlite"))


def measure(questions: int, sessions: int, turns: int, concurrency: int) -> list[dict[str, Any]]:
    """The run at M/4, M/2 and M sessions per question (each size once)."""
    out = []
    sizes = sorted({max(1, sessions // 4), max(1, sessions // 2), sessions})
    with tempfile.TemporaryDirectory(prefix="benchledger-longmemeval-bench-") as folder:
        for n, m in enumerate(sizes, 1):
            doc = full_size(questions, m, turns)
            data = os.path.join(folder, f"s{m}.json")
            with open(data, "w", encoding="utf-8") as fh:
                json.dump(doc, fh)
            ingested = sum(len(s) for q in doc for s in q["haystack_sessions"])
            took, cpu = _run(data, folder, n, concurrency)
            rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB -> MiB
            out.append({
                "questions": questions,
                "sessions": m,
                "turns": ingested,
                "run_s": round(took, 2),
                "ms_per_turn": round(1000 * took / ingested, 3),
                "cpu_s": round(cpu, 2),
                "cpu_ms_per_turn": round(1000 * cpu / ingested, 3),
                "peak_rss_mib": round(rss, 1),
            })  # fmt: skip
    return out


def run_bench(*, questions: int, sessions: int, turns: int, concurrency: int,
              as_json: bool) -> int:  # fmt: skip
    """Measure and print the three sizes (JSON with ``as_json``)."""
    rows = measure(questions, sessions, turns, concurrency)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"longmemeval suite, retrieval reader, embedded refplatform, concurrency "
          f"{concurrency}; {questions} questions, {turns} turns per filler session")  # fmt: skip
    print(f"{'sessions':>8}{'turns':>9}{'run s':>9}{'ms/turn':>9}{'cpu s':>9}{'cpu ms/turn':>13}"
          f"{'peak MiB':>10}")  # fmt: skip
    for r in rows:
        wall = f"{r['sessions']:>8}{r['turns']:>9}{r['run_s']:>9.2f}{r['ms_per_turn']:>9.3f}"
        print(f"{wall}{r['cpu_s']:>9.2f}{r['cpu_ms_per_turn']:>13.3f}{r['peak_rss_mib']:>10.1f}")
    if rows:
        last = rows[-1]
        per_question = last["turns"] / questions * 40 / last["sessions"]  # turns at 40 sessions
        full = 500 * per_question / 1000 / 60
        print(f"at LongMemEval_S's shape (500 questions x 40 sessions, {per_question:.0f} turns "
              f"each) and the largest size's rates: about {full * last['ms_per_turn']:.1f} min "
              f"wall, {full * last['cpu_ms_per_turn']:.1f} min CPU")  # fmt: skip
    return 0
