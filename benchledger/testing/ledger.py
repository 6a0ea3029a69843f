"""The ledger backend contract: what every ``Store`` (ledger/backend.py) must do.

A backend author subclasses ``LedgerBackendContract`` in a test module, naming the class
``Test...`` so pytest collects it, and gives it the store to test::

    class TestMyStore(LedgerBackendContract):
        def create_store(self, tmp_path):
            return MyStore(str(tmp_path / "ledger.my"))

        def drop_table(self, store):
            ...  # remove the events table behind the store's back

Every test gets a fresh, empty store; it is closed (then ``dispose``d) after the test.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from benchledger.ledger import AppendConflict, Ledger, Store, UnusableInput
from benchledger.ledger.chain import Record
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    GraderDecisionBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)


def counter_clock(start: int = 1_780_000_000_000_000_000, step: int = 1_000) -> Callable[[], int]:
    """A clock that ticks ``step`` ns per reading: deterministic timestamps."""
    it = itertools.count(start, step)
    return lambda: next(it)


def sample_run(ledger: Ledger, run_id: str, units: int) -> str:
    """A sealed run of ``units`` unit streams (``RUN/pNN/0|1``) of a few events; its root."""
    ledger.start_run(run_id, RunStartedBody(suite="lifecycle", protocols=units, agent="scripted"))
    for u in range(units):
        w = ledger.new_stream(f"{run_id}/p{u:02d}/{u % 2}")
        w.append(UnitStartedBody(protocol_id=f"p{u:02d}", attempt=u % 2))
        call = w.append(SessionCallBody(episode="recall", method="tools/call", tool="search"))
        done = w.append(EpisodeFinishedBody(episode="recall", final_answer=str(u)), refs=[call])
        w.append(
            GraderDecisionBody(stage="recall", check="correct", verdict=u % 3 != 0, reason="r"),
            refs=[done],
        )
        w.append(UnitFinishedBody(outcome={"correct": u % 3 != 0}))
        ledger.commit(w)
    return ledger.seal(run_id)


class LedgerBackendContract:
    """The contract every ledger backend passes; subclass it with ``create_store``."""

    def create_store(self, tmp_path: Path) -> Store:
        """A new, empty store (``tmp_path`` is the test's own folder, for a file backend);
        call ``pytest.skip`` with the reason when the backend cannot be reached here."""
        raise NotImplementedError(f"{type(self).__name__} must define create_store(tmp_path)")

    def drop_table(self, store: Store) -> None:
        """Remove the store's events table behind its back (another process dropping it)."""
        raise NotImplementedError(f"{type(self).__name__} must define drop_table(store)")

    def dispose(self, store: Store) -> None:
        """Remove what ``create_store`` made, once the store is closed (a schema, say)."""

    @pytest.fixture
    def store(self, tmp_path: Path) -> Iterator[Store]:
        made = self.create_store(tmp_path)
        try:
            yield made
        finally:
            made.close()
            self.dispose(made)

    def ledger(self, store: Store) -> Ledger:
        """A ledger over ``store`` with deterministic timestamps."""
        return Ledger(store, clock=counter_clock())

    def test_appended_events_read_back_byte_identical(self, store: Store) -> None:
        led = self.ledger(store)
        w = led.new_stream("r/a/0")
        w.append(SessionCallBody(episode="teach", method="tools/call", arguments={"é": "ü"}))
        w.append(UnitFinishedBody())
        staged = list(w.staged)
        led.commit(w)
        back = store.read_stream("r/a/0")
        assert [(r.stream, r.seq, r.kind, bytes(r.data)) for r in back] == [
            tuple(r) for r in staged
        ]
        head = store.head("r/a/0")
        assert head is not None and head.seq == 1
        assert store.head("r/none") is None

    def test_second_writer_of_a_seq_gets_conflict_naming_stream_and_seq(self, store: Store) -> None:
        led = self.ledger(store)
        a = led.writer("r/s/0")
        b = led.writer("r/s/0")
        a.append(UnitFinishedBody())
        b.append(UnitFinishedBody(error="other"))
        led.commit(a)
        with pytest.raises(AppendConflict) as info:
            led.commit(b)
        assert (info.value.stream, info.value.seq) == ("r/s/0", 0)
        assert "r/s/0" in str(info.value) and "seq 0" in str(info.value)
        assert len(store.read_stream("r/s/0")) == 1

    def test_concurrent_threads_never_fork_a_stream(self, store: Store) -> None:
        led = self.ledger(store)
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
        assert len(store.read_stream("r/race/0")) == 1

    def test_batch_with_a_taken_seq_writes_nothing(self, store: Store) -> None:
        led = self.ledger(store)
        w = led.new_stream("r/x/0")
        w.append(UnitFinishedBody())
        led.commit(w)
        fresh = led.new_stream("r/y/0")
        fresh.append(UnitFinishedBody())
        clash = led.new_stream("r/x/0")
        clash.append(UnitFinishedBody(error="dup"))
        with pytest.raises(AppendConflict):
            led.commit(fresh, clash)
        assert store.head("r/y/0") is None

    def test_notifications_follow_insertion_order(self, store: Store) -> None:
        led = self.ledger(store)
        order = []
        for name in ("r/b/0", "r/a/0", "r/c/0"):
            w = led.new_stream(name)
            w.append(UnitFinishedBody())
            led.commit(w)
            order.append(name)
        notes = store.notifications(1, 10)
        assert [n.record.stream for n in notes] == order
        assert [n.id for n in notes] == sorted(n.id for n in notes)
        later = store.notifications(notes[1].id + 1, 10)
        assert [n.record.stream for n in later] == ["r/c/0"]

    def test_scan_returns_only_the_runs_streams_in_name_then_seq_order(self, store: Store) -> None:
        led = self.ledger(store)
        sample_run(led, "run-a", units=3)
        sample_run(led, "run-a-2", units=2)
        sample_run(led, "run-a0", units=1)  # "0" follows "/": the edge of the run's range
        sample_run(led, "run-b", units=1)
        streams = [r[0] for r in store.scan("run-a")]
        assert streams == sorted(streams)
        assert set(streams) == {"run-a", "run-a/p00/0", "run-a/p01/1", "run-a/p02/0"}
        seqs = [r[1] for r in store.scan("run-a") if r[0] == "run-a/p01/1"]
        assert seqs == list(range(len(seqs)))
        assert store.run_ids() == ["run-a", "run-a-2", "run-a0", "run-b"]
        assert [h.stream for h in store.heads("run-a-2")] == [
            "run-a-2",
            "run-a-2/p00/0",
            "run-a-2/p01/1",
        ]

    @pytest.mark.parametrize("run_id", ["run-a", "run-a-2", "run-a0"])
    def test_heads_are_the_last_row_of_every_stream_of_the_run(
        self, store: Store, run_id: str
    ) -> None:
        led = self.ledger(store)
        sample_run(led, "run-a", units=3)
        sample_run(led, "run-a-2", units=2)
        sample_run(led, "run-a0", units=1)
        last: dict[str, tuple[object, ...]] = {}
        for row in store.scan(run_id):
            last[row[0]] = tuple(row)
        assert [tuple(h) for h in store.heads(run_id)] == [last[s] for s in sorted(last)]

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
    def test_a_ledger_whose_table_vanished_is_named_not_a_driver_error(
        self, store: Store, call: Callable[[Store], object]
    ) -> None:
        led = self.ledger(store)
        w = led.new_stream("r/a/0")
        w.append(UnitFinishedBody())
        led.commit(w)
        self.drop_table(store)
        with pytest.raises(UnusableInput) as err:
            call(store)
        assert err.value.where == store.url
        assert "no events table" in err.value.problem

    def test_a_built_run_verifies_and_lists_its_root(self, store: Store) -> None:
        led = self.ledger(store)
        root = sample_run(led, "run-v", units=5)
        failure, summary = led.verify("run-v", require_seal=True)
        assert failure is None
        assert summary.sealed_root == root == summary.computed_root
        info = led.run_info("run-v")
        assert (info.streams, info.root) == (6, root)
        assert info.events == summary.events

    def test_append_all_is_all_or_nothing(self, store: Store) -> None:
        led = self.ledger(store)
        w = led.new_stream("r/z/0")
        w.append(UnitFinishedBody())
        good = list(w.staged)
        led.commit(w)
        other = led.new_stream("r/q/0")
        other.append(UnitFinishedBody())
        with pytest.raises(UnusableInput):
            store.append_all([list(other.staged), good])
        assert store.head("r/q/0") is None
