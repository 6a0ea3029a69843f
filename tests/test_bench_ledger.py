"""`benchledger bench ledger` is bounded and leaves nothing behind: not on success, not on
Ctrl-C, SIGTERM or a child process killed under it; too many events, a missing workdir or
too little free disk are refused in one line before anything is written."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from benchledger.benchmarks.ledger_bench import (
    BYTES_PER_EVENT,
    DISK_MARGIN,
    DISK_SLACK,
    MAX_EVENTS,
    disk_needed,
    space_problem,
)
from benchledger.cli import main

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EVENTS = "20000"  # some seconds of work: still running when the signal lands


def bench(workdir: str, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "benchledger", "bench", "ledger", "--events", EVENTS,
         "--workdir", workdir, *extra],
        cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip


def started(proc: subprocess.Popen[str]) -> str:
    """The start line, said once the run's databases are being written."""
    assert proc.stderr is not None
    for line in proc.stderr:
        if line.startswith("bench ledger: "):
            return line
    raise AssertionError(f"bench ledger ended before it started: {proc.wait()}")


def children(pid: int) -> list[int]:
    """The process ids whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as fh:
                    fields = fh.read().rsplit(")", 1)[1].split()
            except OSError:
                continue  # it ended while we looked
            if int(fields[1]) == pid:
                out.append(int(entry))
    return out


@pytest.mark.parametrize("sig", [signal.SIGINT, signal.SIGTERM], ids=["sigint", "sigterm"])
def test_a_signal_mid_run_removes_every_byte_the_run_wrote_under_its_workdir(tmp_path, sig):
    proc = bench(str(tmp_path))
    line = started(proc)
    (data,) = os.listdir(tmp_path)
    assert str(tmp_path / data) in line and os.listdir(tmp_path / data)  # written to, now
    proc.send_signal(sig)
    _, err = proc.communicate()
    assert proc.returncode == 128 + sig, err  # 130, 143: as `run` exits on each
    assert err.strip().splitlines()[-1] == "benchledger: interrupted"
    assert os.listdir(tmp_path) == []


@pytest.mark.skipif(not os.path.isdir("/proc/self"), reason="finds the child through /proc")
def test_a_verify_process_killed_under_the_benchmark_is_one_line_exit_1_and_no_data(tmp_path):
    proc = bench(str(tmp_path))
    assert proc.stderr is not None
    started(proc)
    for line in proc.stderr:
        if "verifying" in line:
            break
    kids: list[int] = []
    while not kids and proc.poll() is None:  # the first verify process, once it exists
        kids = children(proc.pid)
    assert kids, "the benchmark ended before its first verify process was seen"
    os.kill(kids[0], signal.SIGKILL)
    _, err = proc.communicate()
    assert proc.returncode == 1, err
    (said,) = err.strip().splitlines()
    assert "verify process was killed by signal 9" in said and "its data was removed" in said
    assert os.listdir(tmp_path) == []


def test_a_finished_run_leaves_its_workdir_empty_and_a_kept_ledger_within_the_estimate(
    tmp_path, capsys
):
    work, kept = tmp_path / "work", tmp_path / "kept.sqlite"
    work.mkdir()
    argv = ["bench", "ledger", "--events", "5000", "--workdir", str(work), "--ledger", str(kept)]
    assert main([*argv, "--json"]) == 0
    assert os.listdir(work) == []
    assert os.path.getsize(kept) / 5000 <= BYTES_PER_EVENT  # the estimate's per-event figure


@pytest.mark.parametrize(
    ("argv", "says"),
    [
        (["--events", str(MAX_EVENTS + 1)], f"--events {MAX_EVENTS + 1}: at most {MAX_EVENTS}"),
        (["--workdir", "{tmp}/absent"], "--workdir {tmp}/absent: no such folder"),
        (["--ledger", "{tmp}/absent/l.sqlite"], "folder {tmp}/absent does not exist"),
    ],
    ids=["events-above-the-cap", "workdir-missing", "ledger-folder-missing"],
)
def test_an_unservable_bench_is_refused_in_one_line_before_anything_is_written(
    tmp_path, capsys, argv, says
):
    argv = [a.format(tmp=tmp_path) for a in argv]
    assert main(["bench", "ledger", "--workdir", str(tmp_path), *argv]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert line.startswith("benchledger: error: ") and says.format(tmp=tmp_path) in line
    assert os.listdir(tmp_path) == []


def test_the_disk_estimate_grows_with_events_and_sides_and_refuses_below_it():
    need = disk_needed(1_000_000, 2)
    assert need == int(1_000_000 * BYTES_PER_EVENT * 2 * DISK_MARGIN) + DISK_SLACK
    assert disk_needed(1_000_000, 1) < need < disk_needed(2_000_000, 2)
    assert disk_needed(1_000_000, 0) == 0  # PostgreSQL: nothing of it on our disk
    assert space_problem("--workdir /w", 1_000_000, 2, need) == ""
    problem = space_problem("--workdir /w", 1_000_000, 2, need - 1)
    assert problem.startswith("--workdir /w has 2.3 GB free, but 1000000 events need about 2.3")
    assert "--events" in problem and "\n" not in problem


def test_a_format_2_baseline_chains_each_row_as_the_ledger_links_it():
    """The baseline of a format-2 run does format 2's hashing (a withholdable kind's body
    digest, then its sealed form): its hash of each row is the ledger's link hash, the
    ``prev`` the writer put in the next event; format 1's recipe is one hash of the row."""
    import itertools
    import random

    import msgspec

    from benchledger.benchmarks.ledger_bench import SEED, _batches, _staged
    from benchledger.benchmarks.raw_baseline import chain, check
    from benchledger.ledger.chain import link_hash

    staged = _staged("run-b", next(_batches(200, random.Random(SEED))), 2)
    rows = chain(staged, 2)  # (stream, seq, kind, prev, hash, data)
    assert [r[4] for r in rows] == [link_hash(r[5]) for r in rows]
    assert [r[2] for r in rows] == [msgspec.json.decode(r[5])["kind"] for r in rows]
    for row, nxt in itertools.pairwise(rows):
        if nxt[1]:  # the same stream: the next event's prev is this row's hash
            assert msgspec.json.decode(nxt[5])["prev"] == row[4]
    assert check(rows, 2) == len(rows)
    single = chain(staged, 1)  # (stream, seq, prev, hash, data)
    assert {r[2] for r, one in zip(rows, single, strict=True) if r[4] != one[3]} == {
        "model_call",
        "session_call",
        "read_back",
    }
    relabelled = [(*r[:2], "episode_started", *r[3:]) if r[2] == "model_call" else r for r in rows]
    with pytest.raises(SystemExit, match="baseline hash broken"):
        check(relabelled, 2)


def test_which_side_writes_a_batch_first_alternates(tmp_path):
    """Writing first after a batch is built is the dearer turn (docs/performance.md): with
    one writer the sides take it in turn, batch by batch, so neither pays it always."""
    from benchledger.benchmarks.ledger_bench import EVENTS_PER_STREAM, STREAMS_PER_BATCH, _alternate
    from benchledger.benchmarks.raw_baseline import SqliteRaw, Streams
    from benchledger.ledger import Ledger, open_store
    from benchledger.ledger.events import RunStartedBody

    led = Ledger(open_store(str(tmp_path / "ledger.sqlite")))
    led.start_run("run-o", RunStartedBody(suite="bench", config={}))
    ours_first: list[bool] = []

    class Watched(SqliteRaw):
        def insert(self, streams: Streams) -> None:
            # Our side has written this batch already when its first stream is stored.
            ours_first.append(led.store.head(streams[0][0]) is not None)
            super().insert(streams)

    raw = Watched(str(tmp_path / "baseline.sqlite"), 2)
    try:
        t_ours, t_base = _alternate(led, raw, "run-o", 4 * STREAMS_PER_BATCH * EVENTS_PER_STREAM)
    finally:
        raw.close()
        led.store.close()
    assert ours_first == [True, False, True, False]
    assert t_ours > 0 and t_base > 0
