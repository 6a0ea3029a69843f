"""One contract every storage backend passes."""

from __future__ import annotations

import contextlib
import sqlite3
import threading

import pytest

from benchledger.ledger import AppendConflict, Ledger, UnusableInput
from benchledger.ledger.backend import TABLE
from benchledger.ledger.chain import Record
from benchledger.ledger.events import SessionCallBody, UnitFinishedBody
from benchledger.ledger.sqlite import SqliteStore
from tests.conftest import drop_schema
from tests.sample import build_run, counter_clock


def _ledger(store) -> Ledger:
    return Ledger(store, clock=counter_clock())


class TestStoreContract:
    def test_appended_events_read_back_byte_identical(self, any_store):
        led = _ledger(any_store)
        w = led.new_stream("r/a/0")
        w.append(SessionCallBody(episode="teach", method="tools/call", arguments={"é": "ü"}))
        w.append(UnitFinishedBody())
        staged = list(w.staged)
        led.commit(w)
        back = any_store.read_stream("r/a/0")
        assert [(r.stream, r.seq, r.kind, bytes(r.data)) for r in back] == [
            tuple(r) for r in staged
        ]
        assert any_store.head("r/a/0").seq == 1
        assert any_store.head("r/none") is None

    def test_second_writer_of_a_seq_gets_conflict_naming_stream_and_seq(self, any_store):
        led = _ledger(any_store)
        a = led.writer("r/s/0")
        b = led.writer("r/s/0")
        a.append(UnitFinishedBody())
        b.append(UnitFinishedBody(error="other"))
        led.commit(a)
        with pytest.raises(AppendConflict) as info:
            led.commit(b)
        assert (info.value.stream, info.value.seq) == ("r/s/0", 0)
        assert "r/s/0" in str(info.value) and "seq 0" in str(info.value)
        assert len(any_store.read_stream("r/s/0")) == 1

    def test_concurrent_threads_never_fork_a_stream(self, any_store):
        led = _ledger(any_store)
        wins: list[int] = []
        losses: list[int] = []
        barrier = threading.Barrier(4)

        errors: list[BaseException] = []

        def worker(i: int) -> None:
            try:
                w = led.writer("r/race/0")
                w.append(SessionCallBody(episode=str(i), method="tools/call"))
                barrier.wait(timeout=30)
                try:
                    led.commit(w)
                    wins.append(i)
                except AppendConflict:
                    losses.append(i)
            except BaseException as exc:  # surfaced below, never swallowed
                errors.append(exc)
                barrier.abort()

        threads = [threading.Thread(target=worker, args=(i,)) for i in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert not errors, errors
        assert len(wins) == 1 and len(losses) == 3
        assert len(any_store.read_stream("r/race/0")) == 1

    def test_batch_with_a_taken_seq_writes_nothing(self, any_store):
        led = _ledger(any_store)
        w = led.new_stream("r/x/0")
        w.append(UnitFinishedBody())
        led.commit(w)
        fresh = led.new_stream("r/y/0")
        fresh.append(UnitFinishedBody())
        clash = led.new_stream("r/x/0")
        clash.append(UnitFinishedBody(error="dup"))
        with pytest.raises(AppendConflict):
            led.commit(fresh, clash)
        assert any_store.head("r/y/0") is None

    def test_notifications_follow_insertion_order(self, any_store):
        led = _ledger(any_store)
        order = []
        for name in ("r/b/0", "r/a/0", "r/c/0"):
            w = led.new_stream(name)
            w.append(UnitFinishedBody())
            led.commit(w)
            order.append(name)
        notes = any_store.notifications(1, 10)
        assert [n.record.stream for n in notes] == order
        assert [n.id for n in notes] == sorted(n.id for n in notes)
        later = any_store.notifications(notes[1].id + 1, 10)
        assert [n.record.stream for n in later] == ["r/c/0"]

    def test_scan_returns_only_the_runs_streams_in_name_then_seq_order(self, any_store):
        led = _ledger(any_store)
        build_run(led, "run-a", units=3)
        build_run(led, "run-a-2", units=2)
        build_run(led, "run-a0", units=1)  # "0" follows "/": the edge of the run's range
        build_run(led, "run-b", units=1)
        streams = [r[0] for r in any_store.scan("run-a")]
        assert streams == sorted(streams)
        assert set(streams) == {"run-a", "run-a/p00/0", "run-a/p01/1", "run-a/p02/0"}
        seqs = [r[1] for r in any_store.scan("run-a") if r[0] == "run-a/p01/1"]
        assert seqs == list(range(len(seqs)))
        assert any_store.run_ids() == ["run-a", "run-a-2", "run-a0", "run-b"]
        assert [h.stream for h in any_store.heads("run-a-2")] == [
            "run-a-2",
            "run-a-2/p00/0",
            "run-a-2/p01/1",
        ]

    @pytest.mark.parametrize("run_id", ["run-a", "run-a-2", "run-a0"])
    def test_heads_are_the_last_row_of_every_stream_of_the_run(self, any_store, run_id):
        led = _ledger(any_store)
        build_run(led, "run-a", units=3)
        build_run(led, "run-a-2", units=2)
        build_run(led, "run-a0", units=1)
        last: dict[str, tuple] = {}
        for row in any_store.scan(run_id):
            last[row[0]] = tuple(row)
        assert [tuple(h) for h in any_store.heads(run_id)] == [last[s] for s in sorted(last)]

    @pytest.mark.parametrize(
        "call",
        [
            pytest.param(lambda s: s.head("r/a/0"), id="head"),
            pytest.param(lambda s: s.read_stream("r/a/0"), id="read_stream"),
            pytest.param(lambda s: s.notifications(1, 10), id="notifications"),
            pytest.param(lambda s: s.append([Record("r/b/0", 0, "x", b"{}")]), id="append"),
            pytest.param(lambda s: s.append_all([[Record("r/b/0", 0, "x", b"{}")]]), id="all"),
        ],
    )
    def test_a_ledger_whose_table_vanished_is_named_not_a_driver_error(self, any_store, call):
        led = _ledger(any_store)
        w = led.new_stream("r/a/0")
        w.append(UnitFinishedBody())
        led.commit(w)
        if isinstance(any_store, SqliteStore):
            with contextlib.closing(sqlite3.connect(any_store.url)) as conn:
                conn.execute(f"DROP TABLE {TABLE}")
        else:
            drop_schema(any_store.url)
        with pytest.raises(UnusableInput) as err:
            call(any_store)
        assert err.value.where == any_store.url
        assert "no events table" in err.value.problem

    def test_a_built_run_verifies_and_lists_its_root(self, any_store):
        led = _ledger(any_store)
        root = build_run(led, "run-v", units=5)
        failure, summary = led.verify("run-v", require_seal=True)
        assert failure is None
        assert summary.sealed_root == root == summary.computed_root
        info = led.run_info("run-v")
        assert (info.streams, info.root) == (6, root)
        assert info.events == summary.events

    def test_append_all_is_all_or_nothing(self, any_store):
        led = _ledger(any_store)
        w = led.new_stream("r/z/0")
        w.append(UnitFinishedBody())
        good = list(w.staged)
        led.commit(w)
        other = led.new_stream("r/q/0")
        other.append(UnitFinishedBody())
        with pytest.raises(UnusableInput):
            any_store.append_all([list(other.staged), good])
        assert any_store.head("r/q/0") is None


def test_missing_sqlite_ledger_is_unusable_input(tmp_path):
    from benchledger.ledger import open_store

    with pytest.raises(UnusableInput, match="no ledger here"):
        open_store(str(tmp_path / "nope.sqlite"), create=False)


def test_a_file_that_is_not_sqlite_is_unusable_input(tmp_path):
    from benchledger.ledger import open_store

    p = tmp_path / "notes.sqlite"
    p.write_text("hello, this is not a database at all" * 50)
    with pytest.raises(UnusableInput, match="not a benchledger ledger"):
        open_store(str(p), create=False)


def test_unreachable_postgres_is_unusable_input_without_the_password():
    from benchledger.ledger import open_store

    with pytest.raises(UnusableInput) as info:
        open_store("postgresql://bob:hunter2@127.0.0.1:1/nowhere", create=False)
    assert "hunter2" not in str(info.value)
    assert "cannot reach PostgreSQL" in str(info.value) or "PostgreSQL" in str(info.value)


def test_record_rows_match_the_recorder_column_order():
    r = Record("s", 0, "k", b"{}")
    assert tuple(r) == ("s", 0, "k", b"{}")


# -- PostgreSQL: many writers, one ledger ------------------------------------------------------


@pytest.fixture
def pg_url():
    from tests.conftest import drop_schema, postgres_url

    url = postgres_url()
    yield url
    drop_schema(url)


@pytest.mark.postgres
def test_writers_creating_one_new_postgres_ledger_at_once_all_open_it(pg_url):
    from benchledger.ledger import open_store

    barrier = threading.Barrier(6)
    opened: list[object] = []

    def open_it() -> None:
        barrier.wait(timeout=30)
        try:
            open_store(pg_url).close()
            opened.append(True)
        except UnusableInput as exc:  # concurrent CREATE ... IF NOT EXISTS collided
            opened.append(exc)

    threads = [threading.Thread(target=open_it) for _ in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert opened == [True] * 6


@pytest.mark.postgres
def test_a_notification_reader_never_passes_a_writer_still_in_flight(pg_url):
    """A writer that drew lower notification ids commits after one that drew higher ones:
    the reader waits for it rather than skip its ids for good."""
    from benchledger.ledger import open_store
    from benchledger.ledger.postgres import copy_payload

    store = open_store(pg_url)
    led = _ledger(store)
    slow, fast = led.new_stream("r/slow/0"), led.new_stream("r/fast/0")
    slow.append(UnitFinishedBody())
    fast.append(UnitFinishedBody())
    rec = store._rec  # type: ignore[attr-defined]
    read: list[list[str]] = []
    with rec.datastore.transaction(commit=True) as curs:
        rec._insert_payload(curs, copy_payload(slow.staged))  # draws id 1, not committed
        led.commit(fast)  # draws id 2 and commits
        reader = threading.Thread(
            target=lambda: read.append([n.record.stream for n in store.notifications(1, 10)])
        )
        reader.start()
        _until_a_lock_wait(pg_url)  # the reader waits for the writer in flight
        assert read == []
    reader.join(timeout=30)  # the slow writer committed on leaving the block
    assert read == [["r/slow/0", "r/fast/0"]]
    store.close()


def _until_a_lock_wait(url: str) -> None:
    """Return once some session of the database waits on an advisory lock."""
    import time

    from benchledger.benchmarks.raw_baseline import pg_connect

    with pg_connect(url) as conn:
        for _ in range(3000):
            waiting = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()
            if waiting and waiting[0]:
                return
            time.sleep(0.01)  # polling a condition, not timing a race
    raise AssertionError("the reader never waited for the writer in flight")


@pytest.mark.postgres
def test_a_postgres_ledger_made_before_byte_ordered_keys_still_reads_in_order(pg_url):
    """Older ledgers keep the library's default collation; reads then sort, and agree."""
    import urllib.parse

    from eventsourcing.postgres import PostgresApplicationRecorder, PostgresDatastore

    from benchledger.ledger import open_store
    from benchledger.ledger.backend import TABLE

    parts = urllib.parse.urlsplit(pg_url)
    schema = dict(urllib.parse.parse_qsl(parts.query))["schema"]
    ds = PostgresDatastore(parts.path.lstrip("/"), parts.hostname or "", parts.port or 5432,
                           parts.username or "", "", schema=schema,
                           originator_id_type="text")  # fmt: skip
    with ds.transaction(commit=True) as curs:
        curs.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    PostgresApplicationRecorder(ds, events_table_name=TABLE).create_table()
    ds.close()
    store = open_store(pg_url, create=False)
    assert not store._byte_keys  # type: ignore[attr-defined]
    led = _ledger(store)
    root = build_run(led, "run-a", units=3)
    build_run(led, "run-a-2", units=1)
    assert led.verify("run-a", require_seal=True)[0] is None
    assert led.run_info("run-a").root == root
    heads = [h.stream for h in store.heads("run-a")]
    assert heads == sorted(heads) and len(heads) == 4
    store.close()
