"""Real processes against one ledger file: racing writers, and a writer killed mid-append."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from benchledger.ledger import Ledger, open_store

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

RACER = textwrap.dedent("""
    import sys
    from benchledger.ledger import AppendConflict, Ledger, open_store
    from benchledger.ledger.events import SessionCallBody
    path, name, target = sys.argv[1], sys.argv[2], int(sys.argv[3])
    led = Ledger(open_store(path))
    print("ready", flush=True)
    sys.stdin.readline()  # the parent releases both racers at once
    wins = conflicts = 0
    while True:
        w = led.writer("race/s/0")
        if w.next_seq >= target:
            break
        w.append(SessionCallBody(episode=name, method="tools/call", tool=str(w.next_seq)))
        try:
            led.commit(w)
            wins += 1
        except AppendConflict:
            conflicts += 1
    print(wins, conflicts, flush=True)
""")

KILLED = textwrap.dedent("""
    import sys
    from benchledger.ledger import Ledger, open_store
    from benchledger.ledger.events import RunStartedBody, SessionCallBody, UnitFinishedBody
    led = Ledger(open_store(sys.argv[1]))
    led.start_run("run-k", RunStartedBody(suite="lifecycle"))
    i = 0
    while True:
        w = led.new_stream(f"run-k/p{i:05d}/0")
        for j in range(49):
            w.append(SessionCallBody(episode="teach", method="tools/call", tool=str(j),
                                     arguments={"pad": "x" * 400}))
        w.append(UnitFinishedBody())
        led.commit(w)
        print(i, flush=True)
        i += 1
""")


def _env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT}


def test_two_processes_racing_on_one_stream_never_fork_it(tmp_path):
    path = str(tmp_path / "l.sqlite")
    open_store(path).close()
    target = 200
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", RACER, path, name, str(target)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=_env(),
        )
        for name in ("a", "b")
    ]
    for p in procs:
        assert p.stdout is not None and p.stdout.readline().strip() == "ready"
    for p in procs:
        assert p.stdin is not None
        p.stdin.write("go\n")
        p.stdin.flush()
    results = []
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        results.append(tuple(int(x) for x in out.split()))
    wins = sum(r[0] for r in results)
    rows = Ledger(open_store(path)).store.read_stream("race/s/0")
    assert wins == len(rows) == target  # exactly one winner per seq, nothing lost
    assert [r.seq for r in rows] == list(range(target))
    from benchledger.ledger.chain import genesis, link_hash
    from benchledger.ledger.codec import decode_link

    prev = genesis("race/s/0")
    for r in rows:
        assert decode_link(r.data).prev == prev
        prev = link_hash(r.data)
    print(f"racers: {results}")


@pytest.mark.skipif(not hasattr(signal, "SIGKILL"), reason="needs SIGKILL")
def test_a_writer_killed_mid_append_leaves_only_whole_committed_batches(tmp_path):
    path = str(tmp_path / "l.sqlite")
    proc = subprocess.Popen(
        [sys.executable, "-c", KILLED, path], stdout=subprocess.PIPE, text=True, env=_env()
    )
    assert proc.stdout is not None
    committed = -1
    for line in proc.stdout:
        committed = int(line)
        if committed >= 20:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    led = Ledger(open_store(path, create=False))
    failure, _ = led.verify("run-k")
    assert failure is None, str(failure)
    streams = [h for h in led.store.heads("run-k") if h.stream != "run-k"]
    assert len(streams) >= committed + 1  # every acknowledged batch survived
    assert all(h.seq == 49 and h.kind == "unit_finished" for h in streams)  # none half-written
