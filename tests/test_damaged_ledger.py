"""A damaged ledger row is a failed integrity check naming where it is, never a traceback."""

from __future__ import annotations

import os
import sqlite3
import urllib.parse

import pytest

from benchledger.cli import main
from benchledger.ledger import DamagedEvent, Ledger, LedgerError, open_store
from benchledger.ledger.backend import TABLE, Store
from benchledger.ledger.events import RunStartedBody, UnitFinishedBody
from benchledger.ledger.postgres import PostgresStore
from benchledger.ledger.sqlite import SqliteStore
from tests.sample import PASSING, counter_clock, lifecycle_run

RUN = "r1"
STREAM = f"{RUN}/p1/1"
SEQ = 1  # the unit's episode_finished: a row every reader decodes

# What a damaged state column can hold: not JSON, JSON that is no event, nothing at all.
DAMAGE = {
    "not-json": b"\x00\xffnot json",
    "not-an-event": b'{"garbage":1}',
    "wrong-field-type": b'{"at":"soon","body":{},"kind":"unit_finished","prev":"",'
    b'"refs":[],"seq":1,"stream":"r1/p1/1"}',
    "null": None,
}

COMMANDS = {
    "report": ["report", RUN],
    "gate": ["gate", RUN, "--baseline", RUN],
    "audit": ["audit", RUN, "capture_rate"],
    "log": ["log", RUN],
    "log-one-stream": ["log", RUN, "p1/1"],
}


def _build(store: Store) -> Ledger:
    ledger = Ledger(store, clock=counter_clock())
    lifecycle_run(ledger, RUN, {("p1", 1): dict(PASSING), ("p2", 1): dict(PASSING)})
    return ledger


def _damage(store: Store, stream: str, seq: int, state: bytes | None) -> None:
    """Overwrite one stored row's state behind the ledger's back, as an editor would."""
    sql = "UPDATE {table} SET state = {p} WHERE originator_id = {p} AND originator_version = {p}"
    if isinstance(store, SqliteStore):
        conn = sqlite3.connect(store.url)
        with conn:
            conn.execute(sql.format(table=TABLE, p="?"), (state, stream, seq))
        conn.close()
        return
    assert isinstance(store, PostgresStore)
    import psycopg

    parts = urllib.parse.urlsplit(store.url)
    with psycopg.connect(
        host=parts.hostname,
        port=parts.port or 5432,
        user=parts.username,
        dbname=parts.path.lstrip("/"),
        autocommit=True,
    ) as conn:
        table = f'"{store.schema}".{TABLE}'
        conn.execute(sql.format(table=table, p="%s"), (state, stream, seq))  # type: ignore[arg-type]


@pytest.fixture
def damaged_ledger(tmp_path) -> str:
    path = str(tmp_path / "damaged.sqlite")
    with open_store(path) as store:
        _build(store)
        _damage(store, STREAM, SEQ, DAMAGE["not-an-event"])
    return path


# A damaged ledger fails every reader's integrity check (exit 1); the gate cannot judge
# such a run at all, so for it the input is unusable (exit 2).
EXIT = {name: 2 if name == "gate" else 1 for name in COMMANDS}


@pytest.mark.parametrize(("name", "argv"), COMMANDS.items(), ids=COMMANDS.keys())
def test_every_reader_fails_with_one_line_naming_the_damaged_row(
    damaged_ledger, capsys, name, argv
):
    assert main([*argv, "--ledger", damaged_ledger]) == EXIT[name]
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert f"stream {STREAM!r} seq {SEQ}" in lines[0]
    assert f"benchledger verify {RUN}" in lines[0]
    assert "Traceback" not in out + err
    assert "msgspec" not in out + err


@pytest.mark.parametrize("state", DAMAGE.values(), ids=DAMAGE.keys())
def test_reading_a_damaged_row_raises_damaged_event_carrying_its_evidence(any_store, state):
    ledger = _build(any_store)
    _damage(any_store, STREAM, SEQ, state)
    with pytest.raises(DamagedEvent) as info:
        list(ledger.events(RUN))
    exc = info.value
    assert isinstance(exc, LedgerError)
    assert (exc.stream, exc.seq, exc.run_id) == (STREAM, SEQ, RUN)
    assert exc.reason and "\n" not in str(exc)
    assert "damaged" in str(exc) and f"run `benchledger verify {RUN}`" in str(exc)
    # The decoder's own error is not chained on: it must not leak into a traceback.
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__)


def test_reading_one_stream_raises_the_same_error(any_store):
    ledger = _build(any_store)
    _damage(any_store, STREAM, SEQ, DAMAGE["not-json"])
    with pytest.raises(DamagedEvent) as info:
        list(ledger.events(RUN, STREAM))
    assert (info.value.stream, info.value.seq) == (STREAM, SEQ)


def test_the_reason_says_what_is_wrong_with_the_row(any_store):
    ledger = _build(any_store)
    _damage(any_store, STREAM, SEQ, DAMAGE["null"])
    with pytest.raises(DamagedEvent, match="the state column is empty"):
        list(ledger.events(RUN))
    _damage(any_store, STREAM, SEQ, DAMAGE["not-an-event"])
    with pytest.raises(DamagedEvent) as info:
        list(ledger.events(RUN))
    assert "garbage" in info.value.reason or "kind" in info.value.reason


def test_a_damaged_run_header_is_reported_by_run_info_and_report(damaged_ledger, capsys):
    with open_store(damaged_ledger) as store:
        seal_seq = store.head(RUN).seq
        _damage(store, RUN, seal_seq, b"{")
        with pytest.raises(DamagedEvent) as info:
            Ledger(store).run_info(RUN)
    assert (info.value.stream, info.value.seq) == (RUN, seal_seq)
    assert main(["report", RUN, "--ledger", damaged_ledger]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and f"stream {RUN!r} seq {seal_seq}" in err[0]


def test_sealing_over_a_damaged_stream_head_is_refused_with_damaged_event(sqlite_store):
    ledger = Ledger(sqlite_store, clock=counter_clock())
    ledger.start_run("open", RunStartedBody(suite="lifecycle", agent="scripted"))
    w = ledger.new_stream("open/p1/1")
    w.append(UnitFinishedBody())
    ledger.commit(w)
    _damage(sqlite_store, "open/p1/1", 0, b"[]")
    with pytest.raises(DamagedEvent) as info:
        ledger.seal("open")
    assert (info.value.stream, info.value.seq) == ("open/p1/1", 0)


def test_verify_still_reports_the_damaged_row_the_hint_points_to(damaged_ledger, capsys):
    assert main(["verify", RUN, "--ledger", damaged_ledger]) == 1
    out = capsys.readouterr().out
    assert f"stream {STREAM!r} seq {SEQ}: undecodable event" in out


def _forge_one_byte(path: str) -> tuple[str, int]:
    """Flip one verdict in a decision's body, as a hand edit would: the row still decodes."""
    conn = sqlite3.connect(path)
    with conn:
        stream, seq, state = conn.execute(
            f"SELECT originator_id, originator_version, state FROM {TABLE} "
            "WHERE CAST(state AS TEXT) LIKE '%\"verdict\":true%' ORDER BY rowid LIMIT 1"
        ).fetchone()
        forged = bytes(state).replace(b'"verdict":true', b'"verdict":fals', 1)
        forged = forged.replace(b'"verdict":fals', b'"verdict":false', 1)
        conn.execute(
            f"UPDATE {TABLE} SET state = ? WHERE originator_id = ? AND originator_version = ?",
            (forged, stream, seq),
        )
    conn.close()
    return stream, seq


EXPORTS = {
    "bundle": ["-o", "out.jsonl"],
    "redacted": ["-o", "out.jsonl", "--withhold", "read_back"],
    "inspect": ["--format", "inspect", "-o", "out.eval"],
}


@pytest.mark.parametrize("extra", EXPORTS.values(), ids=EXPORTS.keys())
def test_export_of_a_hand_edited_ledger_refuses_naming_the_row_and_writes_nothing(
    tmp_path, capsys, monkeypatch, extra
):
    path = str(tmp_path / "edited.sqlite")
    with open_store(path) as store:
        _build(store)
    stream, seq = _forge_one_byte(path)
    monkeypatch.chdir(tmp_path)
    assert main(["export", RUN, "--ledger", path, *extra]) == 1
    out, err = capsys.readouterr()
    lines = err.strip().splitlines()
    assert len(lines) == 1 and f"stream {stream!r} seq {seq}" in lines[0], err
    assert "Traceback" not in out + err
    assert not [name for name in os.listdir(tmp_path) if name.startswith("out.")]
