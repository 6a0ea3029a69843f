"""The reliability selftest: what benchledger survives, tried for real.

``benchledger selftest reliability [--quick]`` runs its scenarios and prints a table of
what was tried and what survived (docs/reliability.md):

- **kill sweep** — the lifecycle suite SIGKILLed at N points spread over one run, resumed
  after each kill: every interrupted ledger verifies, the final run is sealed, every
  planned unit finished exactly once, and the metrics equal an uninterrupted run's;
- **interrupt sweep** — fake-model runs sent SIGINT and SIGTERM, alternately, at random
  points (a count of ledger events), resumed after each: every interrupted child exits
  130/143 with the resume line and records no unit error, every run ends sealed with
  every unit passing and no harness failure;
- **platform faults** — the fault proxy (benchmarks/fault_proxy.py) in front of the
  platform injects 5xx answers, dropped connections, timeouts and truncated bodies into
  MCP and REST requests at 10%: the run is sealed, every fault is exactly one recorded
  ``infra_error`` (a retry), and units that exhausted their retries are excluded from
  every rate and listed;
- **disk full** — the ledger on a small tmpfs (or, where nothing can be mounted, an SQLite
  file capped with ``PRAGMA max_page_count``): the run stops with one line, what it
  committed verifies, and a resume with room completes it;
- **PostgreSQL connection killed** — ``pg_terminate_backend`` on the run's connections
  mid-run: the same three promises;
- **bad inputs** — the corpus under tests/data/bad/ (cases.yaml): each case gets its
  documented exit code and one line naming the problem, no traceback, nothing written;
- **resource bounds** — benchmarks/bounds.py's attacks on a ``platform serve`` child (a
  600 MB body, SQL that was super-linear, spinning and ballooning queries, MCP sessions
  past the cap): each refused naming its bound, the server's peak memory under a ceiling;
- **load** — ``--concurrency 32`` over the suite (k=3 in full mode): no errors, the ledger
  verifies; units/s and the p99 episode latency are reported.

The kill and interrupt sweeps, disk-full, PostgreSQL and load scenarios drive the real
command line in child processes (``python -m benchledger run ...``), as a user would;
platform faults run the driver in this process, with the proxy armed by the run's own start
(never a timer).

One module per scenario (``kill_sweep``, ``platform_faults``, ``disk_full``,
``postgres_killed``, ``bad_inputs``, ``resource_bounds``, ``under_load``); what they share
is in ``scenario``. Settings are passed, never set in ``os.environ``: ``Config.settings``
(the command line's) and ``Config.environ`` (what child processes start with).
"""

from __future__ import annotations

import shutil
import tempfile
import time
from collections.abc import Callable, Sequence
from typing import Final

from benchledger.benchmarks.reliability.bad_inputs import Case, Corpus, bad_inputs, load_cases
from benchledger.benchmarks.reliability.disk_full import disk_full, disk_full_capped
from benchledger.benchmarks.reliability.interrupt_sweep import interrupt_sweep
from benchledger.benchmarks.reliability.kill_sweep import kill_sweep
from benchledger.benchmarks.reliability.platform_faults import (
    FAULT_RATE,
    FAULT_TIMEOUT_S,
    platform_faults,
)
from benchledger.benchmarks.reliability.postgres_killed import postgres_killed
from benchledger.benchmarks.reliability.resource_bounds import resource_bounds
from benchledger.benchmarks.reliability.scenario import CORPUS, ROOT, Config, Row, mount
from benchledger.benchmarks.reliability.under_load import load

__all__ = [
    "CORPUS",
    "FAULT_RATE",
    "FAULT_TIMEOUT_S",
    "ROOT",
    "SCENARIOS",
    "Case",
    "Config",
    "Corpus",
    "Row",
    "bad_inputs",
    "disk_full",
    "disk_full_capped",
    "interrupt_sweep",
    "kill_sweep",
    "load",
    "load_cases",
    "mount",
    "platform_faults",
    "postgres_killed",
    "resource_bounds",
    "run",
    "table",
]

SCENARIOS: Final = ("kill", "interrupt", "faults", "disk", "postgres", "bad", "bounds", "load")

_RUNNERS: Final[dict[str, Callable[[Config], Row]]] = {
    "kill": kill_sweep,
    "interrupt": interrupt_sweep,
    "faults": platform_faults,
    "disk": disk_full,
    "postgres": postgres_killed,
    "bad": bad_inputs,
    "bounds": resource_bounds,
    "load": load,
}


def run(cfg: Config) -> list[Row]:
    """Every scenario (or those in ``cfg.only``), each timed; a crash is that row's FAIL."""
    rows = []
    own = not cfg.workdir
    if own:
        cfg.workdir = tempfile.mkdtemp(prefix="benchledger-selftest-")
    try:
        for name in SCENARIOS:
            if cfg.only and name not in cfg.only:
                continue
            cfg.log(f"selftest: {name} ...")
            started = time.perf_counter()
            try:
                row = _RUNNERS[name](cfg)
            except Exception as exc:  # one scenario's crash is its failure, not the table's
                row = Row(name, "(crashed)", f"{type(exc).__name__}: {exc}", False)
            row.seconds = time.perf_counter() - started
            cfg.log(f"selftest: {name}: {row.result} in {row.seconds:.0f} s")
            rows.append(row)
    finally:
        if own:
            shutil.rmtree(cfg.workdir, ignore_errors=True)
    return rows


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table (it reads in a terminal and pastes into docs)."""
    out = ["| scenario | tried | survived | result | time |", "| --- | --- | --- | --- | ---: |"]
    for r in rows:
        out.append(f"| {r.scenario} | {r.tried} | {r.survived} | {r.result} | {r.seconds:.0f} s |")
    for r in rows:
        out += [f"{r.scenario}: {n}" for n in r.notes]
        for p in r.problems[:20]:
            out.append(f"{r.scenario}: {p}")
        if len(r.problems) > 20:
            out.append(f"{r.scenario}: ... and {len(r.problems) - 20} more")
    return "\n".join(out) + "\n"
