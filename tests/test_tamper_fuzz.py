"""Seeded tamper fuzz: every mutation of a sealed run is detected and located.

Mutations: a flipped byte anywhere in an event, deleted, duplicated, reordered and
inserted events, truncated tails. The expected location is the first position whose
content differs from the original (for a forged duplicate, the position after it).
"""

from __future__ import annotations

import os
import random
import sqlite3

import pytest

from benchledger.ledger import Ledger
from benchledger.ledger.bundle import export_run, records
from benchledger.ledger.chain import Record
from benchledger.ledger.checker import RunChecker
from benchledger.ledger.codec import decode_link
from benchledger.ledger.verified import RunUnverified, open_run
from tests.sample import build_run, counter_clock

SEED = int(os.environ.get("BENCHLEDGER_FUZZ_SEED", "1129"))
BUNDLE_MUTATIONS = 3000
LEDGER_MUTATIONS = 400
RUN = "run-fuzz"


@pytest.fixture(scope="module")
def sealed_lines(tmp_path_factory) -> list[bytes]:
    d = tmp_path_factory.mktemp("fuzz")
    from benchledger.ledger import open_store

    led = Ledger(open_store(str(d / "l.sqlite")), clock=counter_clock())
    build_run(led, RUN, units=6, episodes=3, seed=3)
    path = str(d / "run.jsonl")
    export_run(led, RUN, path)
    led.store.close()
    return [r.data for r in records(path)]


def _pos(lines: list[bytes], i: int) -> tuple[str, int]:
    link = decode_link(lines[i])
    return link.stream, link.seq


def _flip(rng: random.Random, line: bytes) -> bytes:
    i = rng.randrange(len(line))
    choices = b'0123456789abcdef"{}[],:xyz/'
    new = line[i]
    while new == line[i]:
        new = rng.choice(choices)
    return line[:i] + bytes([new]) + line[i + 1 :]


def _mutate(rng: random.Random, lines: list[bytes]) -> tuple[str, list[bytes], tuple[str, int]]:
    """One random mutation: (name, mutated lines, expected (stream, seq))."""
    n = len(lines)
    kind = rng.choice(["flip", "delete", "duplicate", "reorder", "insert", "truncate"])
    i = rng.randrange(n)
    stream, seq = _pos(lines, i)
    out = list(lines)
    if kind == "flip":
        out[i] = _flip(rng, lines[i])
        return kind, out, (stream, seq)
    if kind == "delete":
        del out[i]
        return kind, out, (stream, seq)
    if kind == "duplicate":
        out.insert(i + 1, lines[i])
        return kind, out, (stream, seq + 1)
    if kind == "reorder":
        if i + 1 >= n or _pos(lines, i + 1)[0] != stream:
            i -= 1
            stream, seq = _pos(lines, i)
        out[i], out[i + 1] = out[i + 1], out[i]
        if _pos(lines, i + 1)[0] != stream:  # swapped across streams: first line moved away
            return kind, out, (stream, seq)
        return kind, out, (stream, seq)
    if kind == "insert":
        forged = lines[i].replace(b'"prev":"', b'"prev":"0', 1)[:-1] + b"}"
        forged = forged.replace(b'"prev":"0', b'"prev":"f', 1)
        out.insert(i, _flip(rng, forged))
        return kind, out, (stream, seq)
    # truncate: drop the tail of one stream (at least its last event)
    j = i
    while j + 1 < n and _pos(lines, j + 1)[0] == stream:
        j += 1
    del out[i : j + 1]
    return kind, out, (stream, seq)


def _check(lines: list[bytes]):
    return RunChecker(RUN, require_seal=True).check(Record(None, None, None, d) for d in lines)


def test_the_unmutated_bundle_verifies(sealed_lines):
    assert _check(sealed_lines) is None


def test_every_bundle_mutation_is_detected_at_the_right_stream_and_seq(sealed_lines):
    print(f"tamper fuzz seed {SEED} (set BENCHLEDGER_FUZZ_SEED to replay)")
    rng = random.Random(SEED)
    misses, misplaced = [], []
    kinds: dict[str, int] = {}
    for k in range(BUNDLE_MUTATIONS):
        kind, mutated, where = _mutate(rng, sealed_lines)
        kinds[kind] = kinds.get(kind, 0) + 1
        failure = _check(mutated)
        if failure is None:
            misses.append((k, kind, where))
        elif (failure.stream, failure.seq) != where:
            misplaced.append((k, kind, where, str(failure)))
    print(f"mutations by kind: {kinds}")
    assert not misses, f"undetected (seed {SEED}): {misses[:5]}"
    assert not misplaced, f"wrong location (seed {SEED}): {misplaced[:5]}"
    assert len(kinds) == 6


def test_mutated_bundle_files_fail_verify_naming_the_place(sealed_lines, tmp_path):
    rng = random.Random(SEED + 1)
    header = b'{"format":"benchledger-bundle/1","run":"' + RUN.encode() + b'"}\n'
    for k in range(60):
        kind, mutated, where = _mutate(rng, sealed_lines)
        path = tmp_path / f"m{k}.jsonl"
        path.write_bytes(header + b"\n".join(mutated) + b"\n")
        with pytest.raises(RunUnverified) as err:
            open_run(str(path), require_seal=False, allow_partial=False, keep_events=False)
        failure = err.value.failure
        assert (failure.stream, failure.seq) == where, (kind, str(failure))


def test_every_ledger_mutation_is_detected_at_the_right_stream_and_seq(tmp_path):
    from benchledger.ledger import open_store

    path = str(tmp_path / "l.sqlite")
    led = Ledger(open_store(path), clock=counter_clock())
    build_run(led, RUN, units=5, episodes=2, seed=9)
    rows = list(led.store.scan(RUN))
    raw = sqlite3.connect(path, isolation_level=None)
    table = "benchledger_events"
    rng = random.Random(SEED)
    print(f"ledger tamper fuzz seed {SEED}")
    for k in range(LEDGER_MUTATIONS):
        i = rng.randrange(len(rows))
        stream, seq, kind_, data = rows[i]
        same = [r for r in rows if r[0] == stream]
        last = same[-1][1]
        op = rng.choice(["flip", "delete", "duplicate", "reorder", "insert", "truncate"])
        raw.execute("BEGIN")
        if op == "flip":
            raw.execute(
                f"UPDATE {table} SET state=? WHERE originator_id=? AND originator_version=?",
                (_flip(rng, data), stream, seq),
            )
            where = (stream, seq)
        elif op == "delete":
            raw.execute(
                f"DELETE FROM {table} WHERE originator_id=? AND originator_version=?", (stream, seq)
            )
            where = (stream, seq)
        elif op in ("duplicate", "reorder") and seq < last:
            nxt = same[seq + 1]
            if op == "duplicate":  # event seq stored again in place of seq + 1
                raw.execute(
                    f"UPDATE {table} SET state=?, topic=? WHERE originator_id=? AND "
                    "originator_version=?",
                    (data, kind_, stream, seq + 1),
                )
                where = (stream, seq + 1)
            else:
                raw.execute(
                    f"UPDATE {table} SET state=?, topic=? WHERE originator_id=? AND "
                    "originator_version=?",
                    (nxt[3], nxt[2], stream, seq),
                )
                raw.execute(
                    f"UPDATE {table} SET state=?, topic=? WHERE originator_id=? AND "
                    "originator_version=?",
                    (data, kind_, stream, seq + 1),
                )
                where = (stream, seq)
        elif op == "insert" or op in ("duplicate", "reorder"):
            raw.execute(f"INSERT INTO {table} VALUES (?,?,?,?)", (stream, last + 1, kind_, data))
            where = (stream, last + 1)
        else:
            raw.execute(
                f"DELETE FROM {table} WHERE originator_id=? AND originator_version>=?",
                (stream, seq),
            )
            where = (stream, seq)
        raw.execute("COMMIT")
        failure, _ = led.verify(RUN, require_seal=True)
        assert failure is not None, (k, op, where)
        assert (failure.stream, failure.seq) == where, (k, op, str(failure))
        raw.execute("BEGIN")
        raw.execute(f"DELETE FROM {table} WHERE originator_id=?", (stream,))
        raw.executemany(f"INSERT INTO {table} VALUES (?,?,?,?)", same)
        raw.execute("COMMIT")
    assert led.verify(RUN, require_seal=True)[0] is None
