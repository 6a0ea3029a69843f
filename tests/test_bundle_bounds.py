"""Bundle input is bounded (issue 27, item 8): a gzip bomb, an over-long line, a flood of
blank lines or damaged gzip data is refused with one line and exit 2, holding no more
memory than the line bound and taking time in proportion to the file's size.

Bombs are built as concatenated gzip members (one member compressing 1 MiB of spaces,
written N times), so an 8 GiB line costs the test an 8 MB file and no memory. The CLI runs
in a child of a small parent, whose ``RUSAGE_CHILDREN`` peak is then the CLI's own (a
child forked from this test would inherit its RSS into ``ru_maxrss``), under a 3 GiB
address-space limit, so a reader that regresses fails the test instead of the machine.
"""

from __future__ import annotations

import gzip
import inspect
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import (
    GZIP_FLOOR,
    GZIP_RATIO,
    MAX_LINE,
    EventTooLong,
    export_redacted,
    export_run,
    read_header,
    records,
)
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.events import WITHHOLDABLE
from benchledger.ledger.redaction import Selection
from tests.sample import build_run, counter_clock

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
GOOD = os.path.join(ROOT, "tests", "data", "bad", "bundles", "good.jsonl")
MIB = 1 << 20
SPACES_MIB = gzip.compress(b" " * MIB, mtime=0)  # one gzip member; members concatenate


def good_lines() -> list[bytes]:
    with open(GOOD, "rb") as fh:
        return fh.read().splitlines(keepends=True)


def gz(*parts: bytes) -> bytes:
    return b"".join(gzip.compress(p, mtime=0) for p in parts)


def bomb(path: Path, before: bytes, mib: int, after: bytes = b"\n") -> str:
    """``before``, then ``mib`` MiB of spaces (no newline), then ``after``, as gzip."""
    with open(path, "wb") as fh:
        fh.write(gz(before))
        for _ in range(mib):
            fh.write(SPACES_MIB)
        fh.write(gz(after))
    return str(path)


# -- the CLI on a bomb: one line, exit 2, memory bounded ---------------------------------

_PEAK = """
import json, resource, subprocess, sys
limit = 3 << 30  # address space: a regressed reader stops here, not in the machine's swap
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
res = subprocess.run(sys.argv[2:], capture_output=True, text=True, cwd=sys.argv[1])
kb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
print(json.dumps({"code": res.returncode, "err": res.stderr, "kb": kb}))
"""


def cli_peak(folder: Path, *argv: str) -> tuple[int, str, int]:
    """Run ``benchledger ARGV`` in ``folder``: (exit code, stderr, its peak RSS in kB)."""
    env = {**os.environ, "PYTHONPATH": ROOT, "BENCHLEDGER_LEDGER": str(folder / "d.sqlite")}
    cmd = [sys.executable, "-c", _PEAK, str(folder), sys.executable, "-m", "benchledger", *argv]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300, check=True)
    got = json.loads(out.stdout)
    return got["code"], got["err"], got["kb"]


@pytest.fixture(scope="module")
def the_bomb(tmp_path_factory) -> str:
    """The issue's bomb: an 8 MB .jsonl.gz whose second line is 8 GiB of spaces."""
    header = good_lines()[0]
    return bomb(tmp_path_factory.mktemp("bomb") / "bomb.jsonl.gz", header, 8 << 10)


@pytest.fixture(scope="module")
def baseline_kb(tmp_path_factory) -> int:
    """The peak RSS of ``verify`` on a genuine gzip bundle."""
    folder = tmp_path_factory.mktemp("baseline")
    (folder / "good.jsonl.gz").write_bytes(gz(b"".join(good_lines())))
    code, err, kb = cli_peak(folder, "verify", str(folder / "good.jsonl.gz"))
    assert code == 0, err
    return kb


@pytest.mark.parametrize(
    "command",
    [["verify"], ["report"], ["import", "--ledger", "{tmp}/l.sqlite"]],
    ids=["verify", "report", "import"],
)
def test_a_gzip_bomb_is_refused_in_one_line_holding_at_most_a_few_lines_of_memory(
    the_bomb, baseline_kb, tmp_path, command
):
    assert os.path.getsize(the_bomb) < 10 << 20
    argv = [command[0], the_bomb, *(a.format(tmp=tmp_path) for a in command[1:])]
    started = time.monotonic()
    code, err, kb = cli_peak(tmp_path, *argv)
    seconds = time.monotonic() - started
    assert code == 2, err
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert f"line 2 is longer than the {MAX_LINE}-byte maximum of a bundle line" in err
    # readline(limit) holds the line read so far and its chunks: two lines' worth at most.
    assert kb - baseline_kb < 3 * MAX_LINE // 1024, f"peak {kb} kB, baseline {baseline_kb} kB"
    assert seconds < 60, f"took {seconds:.1f} s"
    assert os.listdir(tmp_path) == [], "wrote something"


# -- the line bound -----------------------------------------------------------------------


def test_a_header_line_over_the_maximum_is_refused_as_line_1(tmp_path):
    path = bomb(tmp_path / "b.jsonl.gz", b'{"format":"', MAX_LINE // MIB + 1)
    with pytest.raises(UnusableInput) as err:
        read_header(path)
    assert err.value.line == 1
    assert f"line 1 is longer than the {MAX_LINE}-byte maximum" in str(err.value)


@pytest.mark.parametrize("gzipped", [True, False], ids=["gzip", "plain"])
def test_an_event_line_over_the_maximum_is_refused_naming_its_line(tmp_path, gzipped):
    lines = good_lines()
    long = b'{"kind":"' + b"x" * MAX_LINE + b'"}\n'
    data = b"".join([*lines[:3], long, *lines[3:]])
    path = tmp_path / ("b.jsonl.gz" if gzipped else "b.jsonl")
    path.write_bytes(gz(data) if gzipped else data)
    del data, long
    got = []
    with pytest.raises(UnusableInput) as err:
        for rec in records(str(path)):
            got.append(rec.data)
    assert err.value.line == 4
    assert "line 4 is longer than the 67108864-byte maximum of a bundle line" in str(err.value)
    assert got == [ln.rstrip(b"\n") for ln in lines[1:3]]


@pytest.mark.parametrize("newline", [b"\n", b""], ids=["ending-in-a-newline", "last-unended"])
def test_a_line_of_exactly_the_maximum_is_read_whole(tmp_path, newline):
    path = bomb(tmp_path / "b.jsonl.gz", good_lines()[0], MAX_LINE // MIB, after=newline)
    sizes = [len(rec.data) for rec in records(path)]
    assert sizes == [MAX_LINE]


# -- the gzip expansion bound ---------------------------------------------------------------


def padding(n: int) -> bytes:
    """An empty gzip member carrying ``n`` (< 64 Ki) bytes in its FEXTRA field: file size
    that decompresses to nothing."""
    empty = gzip.compress(b"", mtime=0)
    return (
        empty[:3]
        + bytes([empty[3] | 4])
        + empty[4:10]
        + n.to_bytes(2, "little")
        + (b"\0" * n)
        + empty[10:]
    )


@pytest.mark.parametrize("padded", [0, 24], ids=["small-file-the-floor", "larger-file-the-ratio"])
def test_gzip_data_expanding_past_the_bound_is_refused_naming_it(tmp_path, padded):
    header = gz(good_lines()[0])
    line = b" " * (4 * MIB) + b"\n"  # well in the line bound
    member = gz(line)
    pad = padding(60_000) * padded  # 1.4 MB more file: a bound of 200x its size, past the floor
    n = 1
    while len(good_lines()[0]) + n * len(line) <= max(
        GZIP_FLOOR, GZIP_RATIO * (len(header) + len(pad) + n * len(member))
    ):
        n += 1  # the fewest lines that cross the bound
    path = tmp_path / "b.jsonl.gz"
    path.write_bytes(header + pad + member * n)
    limit = max(GZIP_FLOOR, GZIP_RATIO * os.path.getsize(path))
    assert (limit > GZIP_FLOOR) == bool(padded)
    seen = 0
    with pytest.raises(UnusableInput) as err:
        for _ in records(str(path)):
            seen += 1
    assert seen == n - 1  # every line in the bound was read; the one crossing it was not
    assert err.value.line == n + 1
    assert f"the gzip data expands past {limit} bytes" in str(err.value)
    assert f"the file's {os.path.getsize(path)} bytes" in str(err.value)


# -- blank lines ----------------------------------------------------------------------------


def _verify(capsys, path: str) -> tuple[int, str]:
    code = main(["verify", path])
    out = capsys.readouterr()
    return code, out.err


def test_one_blank_last_line_is_allowed(tmp_path, capsys):
    path = tmp_path / "b.jsonl"
    path.write_bytes(b"".join(good_lines()) + b"\n")
    assert _verify(capsys, str(path))[0] == 0


@pytest.mark.parametrize(
    "where", ["after-the-header", "two-at-the-end", "a-flood"], ids=lambda w: w
)
def test_a_blank_line_before_the_last_is_refused_naming_it(tmp_path, capsys, where):
    lines = good_lines()
    path = tmp_path / "b.jsonl.gz"
    if where == "after-the-header":
        path.write_bytes(gz(b"".join([lines[0], b"\n", *lines[1:]])))
    elif where == "two-at-the-end":
        path.write_bytes(gz(b"".join([*lines, b"\n\n"])))
    else:  # 64 Mi newlines (64 KB of gzip) that a reader used to skip one by one
        flood = gzip.compress(b"\n" * MIB, mtime=0) * 64
        path.write_bytes(gz(lines[0]) + flood + gz(b"".join(lines[1:])))
    blank = 2 if where != "two-at-the-end" else len(lines) + 1
    started = time.monotonic()
    code, err = _verify(capsys, str(path))
    assert time.monotonic() - started < 10
    assert code == 2, err
    assert err.count("\n") == 1
    assert f"b.jsonl.gz:{blank}: a blank line; only the last line may be blank" in err


# -- damaged gzip ---------------------------------------------------------------------------


def _damaged() -> Iterator[tuple[str, bytes, str]]:
    good = gz(b"".join(good_lines()))
    crc = bytearray(good)
    crc[-8] ^= 0xFF  # the trailer's CRC-32
    length = bytearray(good)
    length[-2] ^= 0x01  # the trailer's length
    block = bytearray(good)
    block[10] ^= 0xFF  # the first deflate block's header: zlib's own error
    yield "bad-crc", bytes(crc), "CRC check failed"
    yield "bad-length", bytes(length), "Incorrect length"
    yield "truncated", good[: len(good) - 4], "ended before the end-of-stream marker"
    yield "corrupt-deflate", bytes(block), "not readable gzip data"


@pytest.mark.parametrize("name, data, says", list(_damaged()), ids=[d[0] for d in _damaged()])
def test_damaged_gzip_is_one_line_and_exit_2(tmp_path, capsys, name, data, says):
    path = tmp_path / f"{name}.jsonl.gz"
    path.write_bytes(data)
    for argv in (["verify", str(path)], ["report", str(path)]):
        code = main(argv)
        err = capsys.readouterr().err
        assert code == 2, err
        assert err.count("\n") == 1 and says in err, err


# -- export writes only what a reader can read back -------------------------------------------


def _largest_event(tmp_path: Path) -> tuple[Ledger, str, int, int, str]:
    """A sealed run r1 and its largest event: (ledger, its stream, seq, size and kind)."""
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")), clock=counter_clock())
    build_run(ledger, "r1", units=2, seed=3)
    stream, seq, kind, data = max(ledger.store.scan("r1"), key=lambda r: len(r[3]))
    return ledger, str(stream), int(seq), len(data), str(kind)


@pytest.mark.parametrize("redacted", [False, True], ids=["full", "redacted"])
def test_an_event_longer_than_a_bundle_line_refuses_the_export_naming_it(tmp_path, redacted):
    """The bound lowered through the export's own parameter, so no 64 MiB event is built."""
    ledger, stream, seq, size, kind = _largest_event(tmp_path)
    out = tmp_path / "r1.jsonl"
    with pytest.raises(EventTooLong) as err:
        if redacted:  # another kind withheld: this event is still shown whole
            other = next(k for k in sorted(WITHHOLDABLE) if k != kind)
            selection = Selection(frozenset({other}))
            export_redacted(ledger, "r1", str(out), selection, max_line=size - 1)
        else:
            export_run(ledger, "r1", str(out), max_line=size - 1)
    message = str(err.value)
    assert (err.value.stream, err.value.seq) == (stream, seq)
    assert f"stream {stream!r} seq {seq}: the event is {size} bytes" in message, message
    assert f"longer than the {size - 1}-byte maximum" in message and "\n" not in message
    written = [f for f in os.listdir(tmp_path) if not f.startswith("l.sqlite")]
    assert not out.exists() and written == [], "wrote something"


def test_an_event_exactly_a_bundle_line_long_is_exported_and_read_back(tmp_path):
    ledger, _stream, _seq, size, _kind = _largest_event(tmp_path)
    out = str(tmp_path / "r1.jsonl")
    n = export_run(ledger, "r1", out, max_line=size)
    assert n == sum(1 for _ in records(out))


def test_the_export_bound_is_the_readers_bound():
    assert inspect.signature(export_run).parameters["max_line"].default == MAX_LINE
    assert inspect.signature(export_redacted).parameters["max_line"].default == MAX_LINE
