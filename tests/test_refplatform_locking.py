"""Readers of the refplatform's one shared connection wait for another thread's transaction.

The MCP server runs sync tools in worker threads, all on one sqlite3 connection, so a
read that skips the lock runs inside whatever transaction another thread has open and
sees its uncommitted writes.
"""

from __future__ import annotations

import contextlib
import sqlite3
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any

import pytest

from protocols import dataset
from refplatform.errors import PlatformError
from refplatform.identity import Identity, pool_email
from refplatform.platform import Platform

ORDERS = dataset.urn("orders")
SLUG = "order-status-guide"
WHO = Identity(pool_email(1), False, 1)
HANDLE = "dps_not_yet_committed"
UNCOMMITTED = "written by a transaction that rolls back"
BOUND = 10.0  # seconds; only an upper bound on a wait, never a way to order threads


class _Rollback(Exception):
    """Raised inside the writer's transaction so that it rolls back."""


class _WatchedLock:
    """Wraps the platform's lock and announces when a caller has to wait for it."""

    def __init__(self, inner: Any, waiting: threading.Event) -> None:
        self._inner = inner
        self._waiting = waiting

    def __enter__(self) -> _WatchedLock:
        if not self._inner.acquire(blocking=False):
            self._waiting.set()
            self._inner.acquire()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._inner.release()


def _session_accepted(p: Platform) -> bool:
    try:
        p.check_session(WHO, HANDLE)
    except PlatformError:
        return False
    return True


@dataclass(frozen=True)
class Reader:
    name: str
    write: Callable[[sqlite3.Connection], object]
    read: Callable[[Platform], Any]


READERS = [
    Reader(
        "entity",
        lambda db: db.execute(
            "UPDATE entities SET description = ? WHERE urn = ?", (UNCOMMITTED, ORDERS)
        ),
        lambda p: p.entity(ORDERS)["description"],
    ),
    Reader(
        "pages",
        lambda db: db.execute("UPDATE pages SET title = ? WHERE slug = ?", (UNCOMMITTED, SLUG)),
        lambda p: p.pages(),
    ),
    Reader(
        "page",
        lambda db: db.execute("UPDATE pages SET body = ? WHERE slug = ?", (UNCOMMITTED, SLUG)),
        lambda p: p.page(SLUG),
    ),
    Reader(
        "check_session",
        lambda db: db.execute("INSERT INTO handles VALUES (?, ?)", (HANDLE, WHO.email)),
        _session_accepted,
    ),
    Reader(
        "manage_list",
        lambda db: db.execute(
            "UPDATE records SET content = ? WHERE captured_by = ?", (UNCOMMITTED, WHO.email)
        ),
        lambda p: [r["content"] for r in p.manage(WHO, action="list")["records"]],
    ),
]


@pytest.fixture
def platform() -> Iterator[Platform]:
    p = Platform()
    p.capture(WHO, type="note", content="A committed note that manage(list) shows.")
    try:
        yield p
    finally:
        p.close()


@pytest.mark.parametrize("reader", READERS, ids=lambda r: r.name)
def test_a_reader_waits_for_another_threads_open_transaction_and_never_sees_its_rolled_back_write(
    platform: Platform, reader: Reader
) -> None:
    committed = reader.read(platform)
    # Set when the reader queues on the lock (fixed) or when it has already read (unfixed),
    # so the test learns which happened without sleeping.
    progressed = threading.Event()
    platform._lock = _WatchedLock(platform._lock, progressed)  # type: ignore[assignment]
    written, release = threading.Event(), threading.Event()
    inside: list[Any] = []
    seen: list[Any] = []

    def writer() -> None:
        with contextlib.suppress(_Rollback), platform._tx() as db:
            reader.write(db)
            inside.append(reader.read(platform))  # the writer's own thread re-enters the lock
            written.set()
            release.wait(BOUND)
            raise _Rollback

    def read() -> None:
        seen.append(reader.read(platform))
        progressed.set()

    writing = threading.Thread(target=writer, daemon=True)
    reading = threading.Thread(target=read, daemon=True)
    try:
        writing.start()
        assert written.wait(BOUND), "the writer never opened its transaction"
        reading.start()
        assert progressed.wait(BOUND), "the reader neither read nor waited for the lock"
        assert not seen, f"read {seen[0]!r} inside another thread's open transaction"
    finally:
        release.set()
        writing.join(BOUND)
        reading.join(BOUND)
    assert not writing.is_alive() and not reading.is_alive()
    assert inside and inside[0] != committed, "the uncommitted write was not visible to its writer"
    assert seen == [committed]
