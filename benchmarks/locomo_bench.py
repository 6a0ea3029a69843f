"""``benchledger bench locomo``: the locomo suite's wall time on the embedded refplatform,
with the retrieval reader, beside the same platform calls made with no ledger.

Two cases, each run ``repeat`` times (the median is printed):

- ``shipped``: the shipped LoCoMo-shaped set (3 conversations, 84 turns, 36 questions);
- ``full``: one LoCoMo-sized conversation, 600 turns and 200 questions
  (``protocols.locomo_synthetic.full_size``).

Each case is measured twice in the same process: the whole run (``RunDriver``: plan,
provision, ingest, ask, grade, record, seal into a fresh SQLite ledger) and a baseline
making the same MCP calls (every turn written in one session, every question searched in
a session of its own) on a fresh embedded platform with nothing recorded. The ratio is
what the benchmark itself adds: recording, hashing, commits, grading, the seal.
"""

from __future__ import annotations

import asyncio
import json
import os
import statistics
import tempfile
import time
from typing import Any

from benchledger.benchmarks.run_bench import timed_run
from benchledger.harness.platforms.provision import EmbeddedProvisioner, PlatformSpec
from benchledger.harness.platforms.vocabulary import vocabulary_of
from benchledger.harness.record import RunConfig
from benchledger.harness.suites.locomo import DEFAULT_DATA
from benchledger.projections.suites.locomo.items import memory_text
from benchledger.protocols import locomo
from benchledger.protocols.locomo_synthetic import full_size

SEARCH_K = 10


def _run(data: str, folder: str, n: int) -> float:
    """Seconds for one whole locomo run of ``data`` into a fresh ledger."""
    cfg = RunConfig(suite="locomo", agent="retrieval", protocols_path=data, run_id=f"bench-{n}")
    return timed_run(cfg, os.path.join(folder, f"bench-{n}.sqlite"))[0]


async def _raw(data: str) -> None:
    """The same MCP calls with nothing recorded: each sample's turns written in one
    session, each question searched in a fresh session, on a fresh embedded platform."""
    samples = locomo.load(data).samples
    questions = sum(len(s.questions) for s in samples)
    prov = EmbeddedProvisioner(PlatformSpec("embedded"), pool_size=questions + 4)
    async with prov.runtime() as client:
        for i, sample in enumerate(samples, 1):
            async with client.session(i) as session:
                await session.list_tools()
                vocab = vocabulary_of(client)
                assert vocab is not None
                for s in sample.sessions:
                    for turn in s.turns:
                        call = vocab.write_call("w", memory_text(turn, s), turn.dia_id)
                        await session.call_tool(call.name, call.arguments)
            for q in sample.questions:
                async with client.session(i) as session:
                    await session.list_tools()
                    call = vocab.search_call("s", q.question, SEARCH_K)
                    await session.call_tool(call.name, call.arguments)


def _baseline(data: str) -> float:
    started = time.perf_counter()
    asyncio.run(_raw(data))
    return time.perf_counter() - started


def measure(repeat: int = 3) -> list[dict[str, Any]]:
    """Both cases, ``repeat`` times each: medians of the run and of the baseline."""
    out = []
    with tempfile.TemporaryDirectory(prefix="benchledger-locomo-bench-") as folder:
        full = os.path.join(folder, "full.json")
        with open(full, "w", encoding="utf-8") as fh:
            json.dump(full_size(), fh)
        n = 0
        for name, data in (("shipped", DEFAULT_DATA), ("full", full)):
            loaded = locomo.load(data)
            runs, bases = [], []
            for _ in range(repeat):
                n += 1
                runs.append(_run(data, folder, n))
                bases.append(_baseline(data))
            run_s, base_s = statistics.median(runs), statistics.median(bases)
            out.append({
                "case": name,
                "turns": sum(len(s.turns) for x in loaded.samples for s in x.sessions),
                "questions": sum(len(x.questions) for x in loaded.samples),
                "run_s": round(run_s, 2),
                "baseline_s": round(base_s, 2),
                "ratio": round(run_s / base_s, 2) if base_s else None,
                "runs_s": [round(x, 2) for x in runs],
            })  # fmt: skip
    return out


def run_bench(*, repeat: int, as_json: bool) -> int:
    """Measure and print both cases (JSON with ``as_json``)."""
    rows = measure(repeat)
    if as_json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"locomo suite, retrieval reader, embedded refplatform; median of {repeat}")
    print(f"{'case':<9}{'turns':>7}{'questions':>11}{'run s':>9}{'no ledger s':>13}{'ratio':>8}")
    for r in rows:
        print(f"{r['case']:<9}{r['turns']:>7}{r['questions']:>11}{r['run_s']:>9.2f}"
              f"{r['baseline_s']:>13.2f}{r['ratio']:>8.2f}")  # fmt: skip
    return 0
