"""``benchledger bench ledger``: ledger append and verify against raw SQLite, in one run.

Baseline append: the same canonical bytes, blake3-chained, into a plain SQLite table by
executemany, 1000 rows per transaction. Baseline verify: read those rows back and
recompute the chain. Ours: the Ledger API (encode, hash, recorder insert) and
``Ledger.verify``. Batches are interleaved so both sides see the same machine noise.
Verifies run in child processes so peak RSS is the verifier's own.
"""

from __future__ import annotations

import json
import os
import random
import resource
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator

import blake3

from ledger import Ledger, open_store
from ledger.chain import EVENT_DOMAIN, genesis
from ledger.events import (
    Body,
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

EVENTS_PER_STREAM = 50
STREAMS_PER_BATCH = 20  # 20 x 50 = 1000 rows per transaction, as the baseline
SEED = 20261129
_WORDS = [
    "revenue",
    "region",
    "customer",
    "tier",
    "order",
    "refund",
    "discount",
    "fiscal",
    "month",
    "cohort",
    "window",
    "gross",
    "net",
    "leader",
    "completed",
    "pending",
    "index",
    "cutoff",
    "legacy",
    "deprecated",
    "segment",
    "total",
]


def _text(rng: random.Random, n: int) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(n))


def _stream_bodies(rng: random.Random, unit: int) -> list[Body]:
    """~50 events of realistic shape, ~500-byte bodies."""
    bodies: list[Body] = [UnitStartedBody(protocol_id=f"p{unit:05d}", attempt=0, teacher="pool:1")]
    stages = ("teach", "recall", "transfer", "abstain")
    i = 0
    while len(bodies) < EVENTS_PER_STREAM - 1:
        ep = stages[i % len(stages)]
        i += 1
        bodies.append(
            EpisodeStartedBody(episode=ep, identity="pool:1", system_prompt=_text(rng, 60))
        )
        bodies.append(
            ModelCallBody(
                episode=ep,
                request_hash=f"{rng.getrandbits(128):032x}",
                request={"messages": [{"role": "user", "content": _text(rng, 40)}]},
                response={"content": _text(rng, 30)},
                usage={"input_tokens": 900, "output_tokens": 40},
                latency_ms=rng.random() * 900,
            )
        )
        bodies.append(
            SessionCallBody(
                episode=ep,
                method="tools/call",
                tool="search",
                arguments={"intent": _text(rng, 12)},
                result={
                    "groups": [
                        {"source": "memory", "hits": [{"text": _text(rng, 45), "ref": "m1"}]}
                    ]
                },
                latency_ms=rng.random() * 20,
            )
        )
        bodies.append(
            ReadBackBody(
                stage=ep,
                method="GET",
                path="/api/v1/admin/knowledge/insights",
                body={"data": [{"id": "i1", "content": _text(rng, 55)}]},
            )
        )
        bodies.append(
            GraderDecisionBody(
                stage=ep,
                check="correct",
                verdict=rng.random() < 0.8,
                reason=_text(rng, 20),
                answer=_text(rng, 8),
                expected="1234.5",
            )
        )
        bodies.append(
            EpisodeFinishedBody(
                episode=ep,
                final_answer=_text(rng, 30),
                tool_calls=3,
                input_tokens=1200,
                output_tokens=90,
            )
        )
    del bodies[EVENTS_PER_STREAM - 1 :]
    bodies.append(UnitFinishedBody(outcome={"captured": True, "recall_correct": True}))
    return bodies


def _batches(total: int, rng: random.Random) -> Iterator[list[tuple[str, list[Body]]]]:
    streams = max(1, total // EVENTS_PER_STREAM)
    unit = 0
    while unit < streams:
        batch = []
        for _ in range(min(STREAMS_PER_BATCH, streams - unit)):
            batch.append((f"p{unit:05d}/0", _stream_bodies(rng, unit)))
            unit += 1
        yield batch


def _baseline_open(path: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute(
        "CREATE TABLE IF NOT EXISTS raw (stream TEXT, seq INTEGER, prev TEXT, hash TEXT, "
        "data BLOB, PRIMARY KEY (stream, seq))"
    )
    return conn


def _baseline_insert(conn: sqlite3.Connection, streams: list[tuple[str, list[bytes]]]) -> None:
    rows = []
    for stream, datas in streams:
        prev = genesis(stream)
        for seq, data in enumerate(datas):
            h = blake3.blake3(EVENT_DOMAIN + data).hexdigest()
            rows.append((stream, seq, prev, h, data))
            prev = h
    conn.execute("BEGIN")
    conn.executemany("INSERT INTO raw VALUES (?,?,?,?,?)", rows)
    conn.execute("COMMIT")


def _baseline_verify(path: str) -> int:
    conn = sqlite3.connect(path)
    cur = conn.execute("SELECT stream, seq, prev, hash, data FROM raw ORDER BY stream, seq")
    n = 0
    last_stream, last_hash, want_seq = None, "", 0
    while rows := cur.fetchmany(2000):
        for stream, seq, prev, h, data in rows:
            if stream != last_stream:
                last_stream, last_hash, want_seq = stream, genesis(stream), 0
            if seq != want_seq or prev != last_hash:
                raise SystemExit(f"baseline chain broken at {stream} {seq}")
            if blake3.blake3(EVENT_DOMAIN + data).hexdigest() != h:
                raise SystemExit(f"baseline hash broken at {stream} {seq}")
            last_hash, want_seq = h, seq + 1
            n += 1
    return n


def _child_verify(kind: str, location: str, run_id: str) -> None:
    """Runs in a child process: verify, print {events, seconds, peak_rss_mb} as JSON."""
    t0 = time.perf_counter()
    if kind == "baseline":
        n = _baseline_verify(location)
    else:
        ledger = Ledger(open_store(location, create=False))
        failure, summary = ledger.verify(run_id, require_seal=True)
        if failure is not None:
            raise SystemExit(f"verify failed: {failure}")
        n = summary.events
    dt = time.perf_counter() - t0
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(json.dumps({"events": n, "seconds": dt, "peak_rss_mb": rss}))


def _spawn_verify(kind: str, location: str, run_id: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.ledger_bench", kind, location, run_id],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def run_bench(*, events: int, backend: str, ledger: str | None, as_json: bool) -> int:
    """Build a synthetic sealed run, measure both sides, print the ratios; exit code 0."""
    workdir = tempfile.mkdtemp(prefix="benchledger-bench-")
    if backend == "postgres":
        location = ledger or "postgresql://postgres@127.0.0.1:5432/test?schema=bench"
    else:
        location = ledger or os.path.join(workdir, "ledger.sqlite")
    base_path = os.path.join(workdir, "baseline.sqlite")
    run_id = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    rng = random.Random(SEED)
    log = sys.stderr
    print(f"bench ledger: {events} events, backend {backend}, seed {SEED}, run {run_id}", file=log)

    led = Ledger(open_store(location))
    base = _baseline_open(base_path)
    t_ours = t_base = 0.0
    t0 = time.perf_counter()
    header = led.start_run(run_id, RunStartedBody(suite="bench", config={"events": events}))
    t_ours += time.perf_counter() - t0
    written = 1
    next_report = time.monotonic() + 5
    for batch in _batches(events - 2, rng):
        t0 = time.perf_counter()
        writers = []
        for name, bodies in batch:
            w = led.new_stream(f"{run_id}/{name}")
            for body in bodies:
                w.append(body)
            writers.append(w)
        staged = [(w.stream, [r.data for r in w.staged]) for w in writers]
        led.commit(*writers)
        t_ours += time.perf_counter() - t0
        t0 = time.perf_counter()
        _baseline_insert(base, staged)
        t_base += time.perf_counter() - t0
        written += sum(len(d) for _, d in staged)
        if time.monotonic() > next_report:
            next_report = time.monotonic() + 5
            print(f"  appended {written}/{events}", file=log)
    t0 = time.perf_counter()
    root = led.seal(run_id)
    t_ours += time.perf_counter() - t0
    written += 1
    base.close()
    led.store.close()
    del header

    print("  verifying (child processes)...", file=log)
    b = _spawn_verify("baseline", base_path, run_id)
    o = _spawn_verify("ours", location, run_id)
    base_append_eps = (written - 2) / t_base
    result = {
        "run_id": run_id,
        "events": written,
        "baseline_append_eps": round(base_append_eps),
        "baseline_verify_eps": round(b["events"] / b["seconds"]),
        "append_eps": round(written / t_ours),
        "verify_eps": round(o["events"] / o["seconds"]),
        "append_ratio": round((written / t_ours) / base_append_eps, 3),
        "verify_ratio": round((o["events"] / o["seconds"]) / (b["events"] / b["seconds"]), 3),
        "verify_peak_rss_mb": round(o["peak_rss_mb"], 1),
    }
    if as_json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>22}  {v}")
        print(f"{'root':>22}  {root}")
    if ledger is None and backend == "sqlite":
        for f in os.listdir(workdir):
            os.unlink(os.path.join(workdir, f))
        os.rmdir(workdir)
    else:
        os.unlink(base_path)
    return 0


if __name__ == "__main__":
    _child_verify(sys.argv[1], sys.argv[2], sys.argv[3])
