"""``benchledger bench ledger``: ledger append and verify against the raw database, in one run.

Baseline (``benchmarks/raw_baseline.py``): the same canonical bytes, blake3-chained by the
run's event format's recipe (``baseline_format``: format 2 digests a withholdable kind's
body before hashing its sealed form), into a plain table of the same database (SQLite:
executemany; PostgreSQL: binary COPY), 1000 rows per transaction, and a plain read back
in key order that recomputes the chain.
Ours: the Ledger API (encode, hash, recorder insert) and ``Ledger.verify``. With one
writer, batches are interleaved so both sides see the same machine noise, and which side
writes a batch first alternates (the first write after building a batch is the dearer
one); with
``--writers N`` (PostgreSQL) N processes append distinct streams at once, first the
baseline's, then ours. Verifies run in child processes so peak RSS is the verifier's own,
in five rounds of one verify per side back to back; ``verify_ratio`` is the median of the
rounds' ratios (``verify_eps`` and ``baseline_verify_eps``: each side's median), and
``verify_cpu_ratio`` the same by each verify's CPU time.
A PostgreSQL benchmark writes into a fresh schema on the server and drops it afterwards.

Its data lives in one folder of its own under ``--workdir`` (default the system temp
folder), removed on every exit: success, an error, a child process that died, Ctrl-C
and SIGTERM (both raise KeyboardInterrupt here). ``--events`` is capped at
``MAX_EVENTS``, and a run is refused before it starts when the free space under the
workdir is below ``disk_needed``.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import resource
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
from collections.abc import Iterator
from typing import Any, Final

from benchledger.benchmarks.raw_baseline import RawTable, Streams, open_raw, pg_connect, verify_raw
from benchledger.harness import interrupt
from benchledger.ledger import Ledger, StreamWriter, open_store
from benchledger.ledger.chain import genesis
from benchledger.ledger.events import (
    EVENT_FORMAT,
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
MAX_EVENTS: Final = 5_000_000  # ~9 GB of SQLite on disk, ~25 min on the 2-core machine
# Bytes on disk per event, per SQLite database: 800-820 measured for the ledger and 880-900
# for the baseline (5,000 to 100,000 events, after the seal), WAL files checkpointed away.
BYTES_PER_EVENT: Final = 950
DISK_MARGIN: Final = 1.25  # SQLite's WAL, free pages and temp files on top of that
DISK_SLACK: Final = 64 * 2**20  # a small run's fixed part (schema, WAL pages, -shm)
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


class BenchFailed(Exception):
    """A part of the benchmark failed (a child process died, a verify failed): one line."""


def disk_needed(events: int, sides: int) -> int:
    """Bytes ``sides`` SQLite databases of ``events`` events each take, with a margin."""
    if sides < 1:
        return 0
    return int(events * BYTES_PER_EVENT * sides * DISK_MARGIN) + DISK_SLACK


def _size(n: float) -> str:
    return f"{n / 2**30:.1f} GB" if n >= 2**30 else f"{n / 2**20:.0f} MB"


def space_problem(where: str, events: int, sides: int, free: int) -> str:
    """Why ``free`` bytes under ``where`` cannot hold the run ("" when they can)."""
    need = disk_needed(events, sides)
    if free >= need:
        return ""
    return (
        f"{where} has {_size(free)} free, but {events} events need about {_size(need)} "
        f"there ({sides} SQLite database(s) at ~{BYTES_PER_EVENT} bytes an event, plus "
        "a margin): free some space, give fewer --events, or another --workdir"
    )


def check_room(*, events: int, backend: str, workdir: str, ledger: str | None) -> None:
    """ValueError (one line) unless ``events`` is at most ``MAX_EVENTS`` and the workdir (and a
    kept SQLite ledger's folder) exist with room for what the run writes there."""
    if events > MAX_EVENTS:
        raise ValueError(
            f"--events {events}: at most {MAX_EVENTS} (about "
            f"{_size(disk_needed(MAX_EVENTS, 2))} of disk for SQLite); give fewer"
        )
    if not os.path.isdir(workdir):
        raise ValueError(f"--workdir {workdir}: no such folder; give an existing one")
    if backend != "sqlite":
        return  # PostgreSQL: both sides live on the server, whose disk is not ours to see
    # The baseline goes to the workdir, ours too unless --ledger keeps it elsewhere.
    places = [("--workdir " + workdir, workdir)]
    if ledger is None:
        places.append(places[0])
    else:
        folder = os.path.dirname(os.path.abspath(ledger))
        if not os.path.isdir(folder):
            raise ValueError(f"--ledger {ledger}: folder {folder} does not exist")
        places.append((f"--ledger's folder {folder}", folder))
    by_disk: dict[int, list[tuple[str, str]]] = {}
    for label, folder in places:
        by_disk.setdefault(os.stat(folder).st_dev, []).append((label, folder))
    for on_disk in by_disk.values():
        label, folder = on_disk[0]
        problem = space_problem(label, events, len(on_disk), shutil.disk_usage(folder).free)
        if problem:
            raise ValueError(problem)


@contextlib.contextmanager
def _interruptible() -> Iterator[None]:
    """SIGINT and SIGTERM raise KeyboardInterrupt while the benchmark runs, so its cleanup runs
    on both (also when SIGINT came in ignored, as a background job's may)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def interrupted(signum: int, frame: Any) -> None:
        interrupt.request(signum)  # the command exits 128 + signum (harness.interrupt)
        raise KeyboardInterrupt

    old = {s: signal.signal(s, interrupted) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


@contextlib.contextmanager
def _shielded() -> Iterator[None]:
    """A second Ctrl-C (or SIGTERM) must not cut the cleanup short: both are ignored in it."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    old = {s: signal.signal(s, signal.SIG_IGN) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)


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


def _staged(run_id: str, batch: list[tuple[str, list[Body]]], fmt: int) -> Streams:
    """A batch's canonical bytes in event format ``fmt``, as a writer stages them (what the
    baseline is handed)."""
    out = []
    for name, bodies in batch:
        stream = f"{run_id}/{name}"
        w = StreamWriter(stream, 0, genesis(stream), time.time_ns, fmt=fmt)
        for body in bodies:
            w.append(body)
        out.append((stream, [r.data for r in w.staged], [r.kind for r in w.staged]))
    return out


def _child_verify(kind: str, location: str, run_id: str, fmt: int) -> None:
    """Runs in a child process: verify (the baseline by format ``fmt``'s recipe), print
    {events, seconds, cpu_seconds, peak_rss_mb} as JSON."""
    t0, c0 = time.perf_counter(), time.process_time()
    if kind == "baseline":
        n = verify_raw(location, fmt)
    else:
        ledger = Ledger(open_store(location, create=False))
        failure, summary = ledger.verify(run_id, require_seal=True)
        if failure is not None:
            raise SystemExit(f"verify failed: {failure}")
        n = summary.events
    dt, cpu = time.perf_counter() - t0, time.process_time() - c0
    print(
        json.dumps({"events": n, "seconds": dt, "cpu_seconds": cpu, "peak_rss_mb": _peak_rss_mb()})
    )


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


def _child_write(
    side: str, location: str, run_id: str, first: int, events: int, fmts: tuple[int, int]
) -> None:
    """Runs in a child process: one of N concurrent writers of distinct streams, in event
    format ``fmts[0]`` (the baseline chains by format ``fmts[1]``'s recipe).

    Prepares its batches (bodies for ours, canonical bytes for the baseline), says
    ``ready``, waits for a line on stdin, appends, prints {events, seconds} as JSON.
    """
    rng = random.Random(SEED + first)
    batches = list(_batches(events, rng, first))
    fmt, recipe = fmts
    raw = open_raw(location, recipe) if side == "baseline" else None
    ledger = Ledger(open_store(location), event_format=fmt) if side == "ours" else None
    staged = [_staged(run_id, b, fmt) for b in batches] if raw is not None else []
    print("ready", flush=True)
    sys.stdin.readline()
    t0 = time.perf_counter()
    n = 0
    if raw is not None:
        for streams in staged:
            raw.insert(streams)
            n += sum(len(d) for _, d, _ in streams)
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


def _died(what: str, code: int, stderr: str) -> BenchFailed:
    how = f"was killed by signal {-code}" if code < 0 else f"exited with status {code}"
    said = (stderr or "").strip().splitlines()
    return BenchFailed(f"{what} {how}" + (f": {said[-1]}" if said else ""))


def _spawn(*argv: str) -> dict[str, float]:
    # On an exception here (Ctrl-C included) subprocess.run kills the child and waits for it.
    out = subprocess.run(
        [sys.executable, "-m", "benchledger.benchmarks.ledger_bench", *argv],
        capture_output=True,
        text=True,
    )
    if out.returncode != 0:
        raise _died(f"the {argv[0]} verify process", out.returncode, out.stderr)
    return json.loads(out.stdout.strip().splitlines()[-1])


def _verify_rounds(
    raw_location: str, location: str, run_id: str, baseline_format: int
) -> tuple[dict, dict, float, float]:
    """Both verifies, back to back, VERIFY_ROUNDS times: each side's median time, our
    highest peak RSS, and the median of the rounds' own ratios, by wall time and by CPU
    time (which waiting for a core on a shared machine does not inflate).

    A round's two verifies run next to each other (which goes first alternates), so load
    that comes and goes hits both alike; its ratio is the round's figure.
    """
    runs: dict[str, list[dict[str, float]]] = {"baseline": [], "ours": []}
    ratios, cpu_ratios = [], []
    for i in range(VERIFY_ROUNDS):
        for side in ("baseline", "ours") if i % 2 == 0 else ("ours", "baseline"):
            runs[side].append(
                _spawn(
                    side,
                    raw_location if side == "baseline" else location,
                    run_id,
                    str(baseline_format),
                )
            )
        b, o = runs["baseline"][-1], runs["ours"][-1]
        ratios.append((o["events"] / o["seconds"]) / (b["events"] / b["seconds"]))
        cpu_ratios.append((o["events"] / o["cpu_seconds"]) / (b["events"] / b["cpu_seconds"]))
    out = []
    for side in ("baseline", "ours"):
        got = sorted(runs[side], key=lambda r: r["seconds"])
        mid = dict(got[len(got) // 2])
        mid["peak_rss_mb"] = max(r["peak_rss_mb"] for r in got)
        out.append(mid)
    half = len(ratios) // 2
    return out[0], out[1], sorted(ratios)[half], sorted(cpu_ratios)[half]


def _concurrent(
    side: str, location: str, run_id: str, events: int, writers: int, fmts: tuple[int, int]
) -> float:
    """Wall seconds for ``writers`` processes to append ``events`` between them, in event
    format ``fmts[0]`` (the baseline chains by format ``fmts[1]``'s recipe)."""
    per = max(1, events // EVENTS_PER_STREAM) // writers
    argv = [
        sys.executable,
        "-m",
        "benchledger.benchmarks.ledger_bench",
        "write",
        side,
        location,
        run_id,
    ]
    procs: list[subprocess.Popen[str]] = []
    try:
        for i in range(writers):
            procs.append(subprocess.Popen(
                [*argv, str(i * per), str(per * EVENTS_PER_STREAM), *map(str, fmts)],
                stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                text=True,
            ))  # fmt: skip
        for p in procs:
            assert p.stdout is not None and p.stderr is not None
            if p.stdout.readline().strip() != "ready":
                raise _died(f"a {side} writer process", p.wait(), p.stderr.read())
        t0 = time.perf_counter()
        for p in procs:
            assert p.stdin is not None and p.stderr is not None
            try:
                p.stdin.write("go\n")
                p.stdin.flush()
            except OSError:  # it died after saying ready
                raise _died(f"a {side} writer process", p.wait(), p.stderr.read()) from None
        for p in procs:
            assert p.stdout is not None and p.stderr is not None
            line = p.stdout.readline()
            if p.wait() != 0 or not line:
                raise _died(f"a {side} writer process", p.returncode, p.stderr.read())
        return time.perf_counter() - t0
    finally:
        for p in procs:  # on any failure or interrupt: no writer outlives the benchmark
            if p.poll() is None:
                p.kill()
                p.wait()


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


def _interleaved(
    led: Ledger, raw_location: str, run_id: str, events: int, baseline_format: int
) -> tuple[float, float]:
    """One writer each, batch by batch in turn: (our seconds, baseline seconds)."""
    raw = open_raw(raw_location, baseline_format)
    try:
        return _alternate(led, raw, run_id, events)
    finally:
        raw.close()


def _alternate(led: Ledger, raw: RawTable, run_id: str, events: int) -> tuple[float, float]:
    """Batch by batch, our writers build the batch, then both sides write it, the side that
    writes first alternating: whichever writes right after the build pays for it (measured
    0.73-0.76 with ours always first, 0.87-0.91 with the baseline first, same code;
    docs/performance.md), so neither always does."""
    rng = random.Random(SEED)
    t_ours = t_base = 0.0
    written = 0
    next_report = time.monotonic() + 5
    for i, batch in enumerate(_batches(events, rng)):
        t0 = time.perf_counter()
        writers = []
        for name, bodies in batch:
            w = led.new_stream(f"{run_id}/{name}")
            for body in bodies:
                w.append(body)
            writers.append(w)
        t_ours += time.perf_counter() - t0
        staged: Streams = [
            (w.stream, [r.data for r in w.staged], [r.kind for r in w.staged]) for w in writers
        ]  # untimed
        for side in ("ours", "baseline") if i % 2 == 0 else ("baseline", "ours"):
            t0 = time.perf_counter()
            if side == "ours":
                led.commit(*writers)
                t_ours += time.perf_counter() - t0
            else:
                raw.insert(staged)
                t_base += time.perf_counter() - t0
        written += sum(len(d) for _, d, _ in staged)
        if time.monotonic() > next_report:
            next_report = time.monotonic() + 5
            print(f"  appended {written}/{events}", file=sys.stderr)
    return t_ours, t_base


def run_bench(
    *,
    events: int,
    backend: str,
    ledger: str | None,
    as_json: bool,
    writers: int = 1,
    workdir: str | None = None,
    event_format: int = EVENT_FORMAT,
    baseline_format: int | None = None,
) -> int:
    """Build a synthetic sealed run, measure both sides, print the ratios; exit code 0.

    The run is written in ``event_format``; the baseline chains by ``baseline_format``'s
    recipe (None: the run's format; 1 on a format-2 run: the single-hash baseline the
    figures before format 2 were measured against).

    Everything it writes goes into a folder of its own under ``workdir`` (the system temp
    folder if None), removed on every exit; so is a fresh SQLite ``ledger`` file it made
    when the run did not finish. BenchFailed when a child process fails or dies.
    """
    with _interruptible():
        work = tempfile.mkdtemp(prefix="benchledger-bench-", dir=workdir)
        state: dict[str, Any] = {"led": None, "done": False}
        keep = ledger if backend == "sqlite" and ledger and not os.path.exists(ledger) else None
        try:
            fmts = (event_format, event_format if baseline_format is None else baseline_format)
            return _measure(events, backend, ledger, as_json, writers, work, state, fmts)
        finally:
            with _shielded():
                _clean(work, state, drop=backend == "postgres",
                       fresh=None if state["done"] else keep)  # fmt: skip


def _clean(work: str, state: dict[str, Any], *, drop: bool, fresh: str | None) -> None:
    """Close what is open and remove what the run wrote: its folder, its PostgreSQL schema,
    and ``fresh`` (a --ledger file it made for a run that did not finish)."""
    led = state["led"]
    if led is not None:
        with contextlib.suppress(Exception):
            led.store.close()
    if drop and state.get("location"):
        with contextlib.suppress(Exception):  # the server may be what failed
            _drop_schema(state["location"])
    shutil.rmtree(work, ignore_errors=True)
    if fresh is not None:
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(OSError):
                os.unlink(fresh + suffix)


def _measure(
    events: int,
    backend: str,
    ledger: str | None,
    as_json: bool,
    writers: int,
    work: str,
    state: dict[str, Any],
    fmts: tuple[int, int],
) -> int:
    """The benchmark proper, writing under ``work``; ``state`` tells the cleanup what is open;
    ``fmts``: the run's event format and the baseline's recipe."""
    fmt, base_fmt = fmts
    if backend == "postgres":
        location = _postgres_location(ledger or "postgresql://postgres@127.0.0.1:5432/test")
        raw_location = location
    else:
        location = ledger or os.path.join(work, "ledger.sqlite")
        raw_location = os.path.join(work, "baseline.sqlite")
    state["location"] = location
    run_id = f"bench-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"
    led = state["led"] = Ledger(open_store(location), event_format=fmt)
    body = events - 2  # run_started and run_sealed are the other two
    t0 = time.perf_counter()
    led.start_run(run_id, RunStartedBody(suite="bench", config={"events": events}))
    t_start = time.perf_counter() - t0
    # Said once the data is being written: a caller waiting for this line knows it started.
    print(
        f"bench ledger: {events} events, backend {backend}, {writers} writer(s), seed {SEED}, "
        f"event format {fmt}, baseline recipe {base_fmt}, run {run_id}, data in {work}",
        file=sys.stderr,
        flush=True,
    )
    if writers == 1:
        t_ours, t_base = _interleaved(led, raw_location, run_id, body, base_fmt)
    else:
        open_raw(raw_location, base_fmt).close()  # the table exists before the writers race
        t_base = _concurrent("baseline", raw_location, run_id, body, writers, fmts)
        t_ours = _concurrent("ours", location, run_id, body, writers, fmts)
    t0 = time.perf_counter()
    root = led.seal(run_id)
    t_seal = time.perf_counter() - t0
    info = led.run_info(run_id)
    led.store.close()
    state["led"] = None
    written = info.events
    if writers == 1:  # one writer: the run's whole life, as a run would spend it
        t_ours += t_start + t_seal
    print("  verifying (child processes)...", file=sys.stderr, flush=True)
    b, o, verify_ratio, cpu_ratio = _verify_rounds(raw_location, location, run_id, base_fmt)
    state["done"] = True
    appended = written if writers == 1 else written - 2
    base_append_eps = b["events"] / t_base
    result = {
        "run_id": run_id,
        "events": written,
        "event_format": fmt,
        "baseline_format": base_fmt,
        "baseline_append_eps": round(base_append_eps),
        "baseline_verify_eps": round(b["events"] / b["seconds"]),
        "append_eps": round(appended / t_ours),
        "verify_eps": round(o["events"] / o["seconds"]),
        "append_ratio": round((appended / t_ours) / base_append_eps, 3),
        "verify_ratio": round(verify_ratio, 3),
        "verify_cpu_ratio": round(cpu_ratio, 3),
        "verify_peak_rss_mb": round(o["peak_rss_mb"], 1),
    }
    if as_json:
        print(json.dumps(result))
    else:
        for k, v in result.items():
            print(f"{k:>22}  {v}")
        print(f"{'root':>22}  {root}")
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        a = sys.argv
        _child_write(a[2], a[3], a[4], int(a[5]), int(a[6]), (int(a[7]), int(a[8])))
    else:
        _child_verify(sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]))
