"""``benchledger bench ledger``: ledger append and verify against the raw database, in one run.

Baseline (``benchmarks/raw_baseline.py``): the same canonical bytes, blake3-chained, into
a plain table of the same database (SQLite: executemany; PostgreSQL: binary COPY), 1000
rows per transaction, and a plain read back in key order that recomputes the chain.
Ours: the Ledger API (encode, hash, recorder insert) and ``Ledger.verify``. With one
writer, batches are interleaved so both sides see the same machine noise; with
``--writers N`` (PostgreSQL) N processes append distinct streams at once, first the
baseline's, then ours. Verifies run in child processes so peak RSS is the verifier's own,
in five rounds of one verify per side back to back; ``verify_ratio`` is the median of the
rounds' ratios (``verify_eps`` and ``baseline_verify_eps``: each side's median).
A PostgreSQL benchmark writes into a fresh schema on the server and drops it afterwards.
"""

from __future__ import annotations

import json
import os
import random
import resource
import secrets
import subprocess
import sys
import tempfile
import time
import urllib.parse
from collections.abc import Iterator

from benchmarks.raw_baseline import Streams, open_raw, pg_connect, verify_raw
from ledger import Ledger, StreamWriter, open_store
from ledger.chain import genesis
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
VERIFY_ROUNDS = 5  # rounds of one verify per side; the median of the rounds' ratios counts
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


def _batches(
    total: int, rng: random.Random, first: int = 0
) -> Iterator[list[tuple[str, list[Body]]]]:
    """Batches of 20 unit streams (``first`` onwards) holding ``total`` events between them."""
    end = first + max(1, total // EVENTS_PER_STREAM)
    unit = first
    while unit < end:
        batch = []
        for _ in range(min(STREAMS_PER_BATCH, end - unit)):
            batch.append((f"p{unit:05d}/0", _stream_bodies(rng, unit)))
            unit += 1
        yield batch


def _staged(run_id: str, batch: list[tuple[str, list[Body]]]) -> Streams:
    """A batch's canonical bytes, as a writer stages them (what the baseline is handed)."""
    out = []
    for name, bodies in batch:
        stream = f"{run_id}/{name}"
        w = StreamWriter(stream, 0, genesis(stream), time.time_ns)
        for body in bodies:
            w.append(body)
        out.append((stream, [r.data for r in w.staged]))
    return out


def _child_verify(kind: str, location: str, run_id: str) -> None:
    """Runs in a child process: verify, print {events, seconds, peak_rss_mb} as JSON."""
    t0 = time.perf_counter()
    if kind == "baseline":
        n = verify_raw(location)
    else:
        ledger = Ledger(open_store(location, create=False))
        failure, summary = ledger.verify(run_id, require_seal=True)
        if failure is not None:
            raise SystemExit(f"verify failed: {failure}")
        n = summary.events
    dt = time.perf_counter() - t0
    print(json.dumps({"events": n, "seconds": dt, "peak_rss_mb": _peak_rss_mb()}))


def _peak_rss_mb() -> float:
    """This process's own peak RSS. Linux's ru_maxrss also counts the parent's RSS at the
    fork before exec (it survives the exec), so VmHWM is read where it exists."""
    try:
        with open("/proc/self/status") as fh:
            for line in fh:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _child_write(side: str, location: str, run_id: str, first: int, events: int) -> None:
    """Runs in a child process: one of N concurrent writers of distinct streams.

    Prepares its batches (bodies for ours, canonical bytes for the baseline), says
    ``ready``, waits for a line on stdin, appends, prints {events, seconds} as JSON.
    """
    rng = random.Random(SEED + first)
    batches = list(_batches(events, rng, first))
    raw = open_raw(location) if side == "baseline" else None
    ledger = Ledger(open_store(location)) if side == "ours" else None
    staged = [_staged(run_id, b) for b in batches] if raw is not None else []
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.perf_counter()
    n = 0
    if raw is not None:
        for streams in staged:
            raw.insert(streams)
            n += sum(len(d) for _, d in streams)
    else:
        assert ledger is not None
        for batch in batches:
            writers = []
            for name, bodies in batch:
                w = ledger.new_stream(f"{run_id}/{name}")
                for body in bodies:
                    w.append(body)
                writers.append(w)
            n += ledger.commit(*writers)
    print(json.dumps({"events": n, "seconds": time.perf_counter() - t0}), flush=True)


def _spawn(*argv: str) -> dict[str, float]:
    out = subprocess.run(
        [sys.executable, "-m", "benchmarks.ledger_bench", *argv],
        check=True,
        capture_output=True,
        text=True,
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def _verify_rounds(raw_location: str, location: str, run_id: str) -> tuple[dict, dict, float]:
    """Both verifies, back to back, VERIFY_ROUNDS times: each side's median time, our
    highest peak RSS, and the median of the rounds' own ratios.

    A round's two verifies run next to each other (which goes first alternates), so load
    that comes and goes hits both alike; its ratio is the round's figure.
    """
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "ours": []}
    ratios = []
    for i in range(VERIFY_ROUNDS):
        for side in ("baseline", "ours") if i % 2 == 0 else ("ours", "baseline"):
            runs[side].append(
                _spawn(side, raw_location if side == "baseline" else location, run_id)
            )
        b, o = runs["baseline"][-1], runs["ours"][-1]
        ratios.append((o["events"] / o["seconds"]) / (b["events"] / b["seconds"]))
    out = []
    for side in ("baseline", "ours"):
        got = sorted(runs[side], key=lambda r: r["seconds"])
        mid = dict(got[len(got) // 2])
        mid["peak_rss_mb"] = max(r["peak_rss_mb"] for r in got)
        out.append(mid)
    return out[0], out[1], sorted(ratios)[len(ratios) // 2]


def _concurrent(side: str, location: str, run_id: str, events: int, writers: int) -> float:
    """Wall seconds for ``writers`` processes to append ``events`` between them."""
    per = max(1, events // EVENTS_PER_STREAM) // writers
    argv = [sys.executable, "-m", "benchmarks.ledger_bench", "write", side, location, run_id]
    procs = [
        subprocess.Popen(
            [*argv, str(i * per), str(per * EVENTS_PER_STREAM)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for i in range(writers)
    ]
    for p in procs:
        assert p.stdout is not None
        if p.stdout.readline().strip() != "ready":
            raise SystemExit(f"bench ledger: a {side} writer failed to start")
    t0 = time.perf_counter()
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    for p in procs:
        assert p.stdout is not None
        json.loads(p.stdout.readline())
        if p.wait() != 0:
            raise SystemExit(f"bench ledger: a {side} writer failed")
    return time.perf_counter() - t0


def _postgres_location(url: str) -> str:
    """``url`` with a fresh schema of this benchmark's own (dropped afterwards)."""
    parts = urllib.parse.urlsplit(url)
    query = dict(urllib.parse.parse_qsl(parts.query))
    query["schema"] = f"benchledger_bench_{os.getpid()}_{secrets.token_hex(3)}"
    return urllib.parse.urlunsplit(parts._replace(query=urllib.parse.urlencode(query)))


def _drop_schema(url: str) -> None:
    schema = dict(urllib.parse.parse_qsl(urllib.parse.urlsplit(url).query))["schema"]
    with pg_connect(url) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


def _interleaved(led: Ledger, raw_location: str, run_id: str, events: int) -> tuple[float, float]:
    """One writer each, batch by batch in turn: (our seconds, baseline seconds)."""
    raw = open_raw(raw_location)
    rng = random.Random(SEED)
    t_ours = t_base = 0.0
    written = 0
    next_report = time.monotonic() + 5
    for batch in _batches(events, rng):
        t0 = time.perf_counter()
        writers = []
        for name, bodies in batch:
            w = led.new_stream(f"{run_id}/{name}")
            for body in bodies:
                w.append(body)
            writers.append(w)
        t_ours += time.perf_counter() - t0
        staged = [(w.stream, [r.data for r in w.staged]) for w in writers]  # untimed
        t0 = time.perf_counter()
        led.commit(*writers)
        t_ours += time.perf_counter() - t0
        t0 = time.perf_counter()
        raw.insert(staged)
        t_base += time.perf_counter() - t0
        written += sum(len(d) for _, d in staged)
        if time.monotonic() > next_report:
            next_report = time.monotonic() + 5
            print(f"  appended {written}/{events}", file=sys.stderr)
    raw.close()
    return t_ours, t_base


def run_bench(
    *, events: int, backend: str, ledger: str | None, as_json: bool, writers: int = 1
) -> int:
    """Build a synthetic sealed run, measure both sides, print the ratios; exit code 0."""
    workdir = tempfile.mkdtemp(prefix="benchledger-bench-")
    if backend == "postgres":
        location = _postgres_location(ledger or "postgresql://postgres@127.0.0.1:5432/test")
        raw_location = location
    else:
        location = ledger or os.path.join(workdir, "ledger.sqlite")
        raw_location = os.path.join(workdir, "baseline.sqlite")
    run_id = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    print(
        f"bench ledger: {events} events, backend {backend}, {writers} writer(s), seed {SEED}, "
        f"run {run_id}",
        file=sys.stderr,
    )
    try:
        led = Ledger(open_store(location))
        body = events - 2  # run_started and run_sealed are the other two
        t0 = time.perf_counter()
        led.start_run(run_id, RunStartedBody(suite="bench", config={"events": events}))
        t_start = time.perf_counter() - t0
        if writers == 1:
            t_ours, t_base = _interleaved(led, raw_location, run_id, body)
        else:
            open_raw(raw_location).close()  # the table exists before the writers race
            t_base = _concurrent("baseline", raw_location, run_id, body, writers)
            t_ours = _concurrent("ours", location, run_id, body, writers)
        t0 = time.perf_counter()
        root = led.seal(run_id)
        t_seal = time.perf_counter() - t0
        info = led.run_info(run_id)
        led.store.close()
        written = info.events
        if writers == 1:  # one writer: the run's whole life, as a run would spend it
            t_ours += t_start + t_seal
        print("  verifying (child processes)...", file=sys.stderr)
        b, o, verify_ratio = _verify_rounds(raw_location, location, run_id)
    finally:
        if backend == "postgres":
            _drop_schema(location)
    appended = written if writers == 1 else written - 2
    base_append_eps = b["events"] / t_base
    result = {
        "run_id": run_id,
        "events": written,
        "baseline_append_eps": round(base_append_eps),
        "baseline_verify_eps": round(b["events"] / b["seconds"]),
        "append_eps": round(appended / t_ours),
        "verify_eps": round(o["events"] / o["seconds"]),
        "append_ratio": round((appended / t_ours) / base_append_eps, 3),
        "verify_ratio": round(verify_ratio, 3),
        "verify_peak_rss_mb": round(o["peak_rss_mb"], 1),
    }
    if as_json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>22}  {v}")
        print(f"{'root':>22}  {root}")
    for f in os.listdir(workdir):
        if ledger is None or os.path.join(workdir, f) != location:
            os.unlink(os.path.join(workdir, f))
    if not os.listdir(workdir):
        os.rmdir(workdir)
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        _child_write(sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5]), int(sys.argv[6]))
    else:
        _child_verify(sys.argv[1], sys.argv[2], sys.argv[3])
