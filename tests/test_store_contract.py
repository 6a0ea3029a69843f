"""One contract every storage backend passes (``benchledger.testing.LedgerBackendContract``,
here for SQLite and PostgreSQL), and what is particular to each."""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from pathlib import Path

import pytest

from benchledger.ledger import Ledger, Store, UnusableInput, open_store
from benchledger.ledger.backend import TABLE
from benchledger.ledger.chain import Record
from benchledger.ledger.events import UnitFinishedBody
from benchledger.testing import LedgerBackendContract
from tests.conftest import drop_schema, postgres_url
from tests.sample import build_run, counter_clock


def _ledger(store) -> Ledger:
    return Ledger(store, clock=counter_clock())


class TestSqliteLedger(LedgerBackendContract):
    def create_store(self, tmp_path: Path) -> Store:
        return open_store(str(tmp_path / "ledger.sqlite"))

    def drop_table(self, store: Store) -> None:
        with contextlib.closing(sqlite3.connect(store.url)) as conn:
            conn.execute(f"DROP TABLE {TABLE}")


@pytest.mark.postgres
class TestPostgresLedger(LedgerBackendContract):
    def create_store(self, tmp_path: Path) -> Store:
        return open_store(postgres_url())  # skips, with the reason, when no server is named

    def drop_table(self, store: Store) -> None:
        drop_schema(store.url)

    def dispose(self, store: Store) -> None:
        drop_schema(store.url)


def test_missing_sqlite_ledger_is_unusable_input(tmp_path):
    with pytest.raises(UnusableInput, match="no ledger here"):
        open_store(str(tmp_path / "nope.sqlite"), create=False)


def test_a_file_that_is_not_sqlite_is_unusable_input(tmp_path):
    p = tmp_path / "notes.sqlite"
    p.write_text("hello, this is not a database at all" * 50)
    with pytest.raises(UnusableInput, match="not a benchledger ledger"):
        open_store(str(p), create=False)


def test_unreachable_postgres_is_unusable_input_without_the_password():
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
    url = postgres_url()
    yield url
    drop_schema(url)


@pytest.mark.postgres
def test_writers_creating_one_new_postgres_ledger_at_once_all_open_it(pg_url):
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


@pytest.mark.parametrize(
    "backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)]
)
def test_recent_run_ids_name_the_last_recorded_run_first(backend, tmp_path, request):
    url = str(tmp_path / "l.sqlite") if backend == "sqlite" else request.getfixturevalue("pg_url")
    with contextlib.closing(open_store(url)) as store:
        led = _ledger(store)
        for run_id in ("b-first", "c-second", "a-third"):  # neither sorted nor reversed
            build_run(led, run_id, units=1)
        assert store.recent_run_ids() == ["a-third", "c-second", "b-first"]
        assert store.run_ids() == ["a-third", "b-first", "c-second"]
