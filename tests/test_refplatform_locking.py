"""Readers of refplatform's one shared connection wait for another thread's transaction.

The MCP server runs tool handlers in worker threads, all on one sqlite3 connection, so
a read that skips the store's lock runs inside whatever transaction another thread has
open and sees its uncommitted writes. Every toolkit reads through ``Store.read``; these
cases check one reader per toolkit.
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

from benchledger.refplatform.auth import Identity, pool_name
from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.platform import Platform
from tests.platform_helpers import ORDERS, peer_pack

WHO = Identity(pool_name(1), True, 1)
HANDLE = "dps_not_yet_committed"
UNCOMMITTED = "written by a transaction that rolls back"
BOUND = 10.0  # seconds; only an upper bound on a wait, never a way to order threads


class _Rollback(Exception):
    """Raised inside the writer's transaction so that it rolls back."""


class _WatchedLock:
    """Wraps the store's lock and announces when a caller has to wait for it."""

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


def _handle_accepted(p: Platform) -> bool:
    try:
        return p.sessions.resolve(WHO, HANDLE) == HANDLE
    except ToolError:
        return False


@dataclass(frozen=True)
class Reader:
    name: str
    write: Callable[[sqlite3.Connection], object]
    read: Callable[[Platform], Any]


def _set_description(db: sqlite3.Connection) -> None:
    row = db.execute("SELECT data FROM entities WHERE urn = ?", (ORDERS,)).fetchone()
    db.execute(
        "UPDATE entities SET data = ? WHERE urn = ?",
        (row[0].replace("Current order", UNCOMMITTED), ORDERS),
    )


READERS = [
    Reader("catalog", _set_description, lambda p: p.catalog.get_entity(ORDERS)["description"]),
    Reader(
        "pages",
        lambda db: db.execute("UPDATE pages SET title = ? WHERE id = 'kp-bench-1'", (UNCOMMITTED,)),
        lambda p: [page["title"] for page in p.pages.live()],
    ),
    Reader(
        "page",
        lambda db: db.execute("UPDATE pages SET body = ? WHERE id = 'kp-bench-2'", (UNCOMMITTED,)),
        lambda p: p.pages.get("kp-bench-2")["body"],
    ),
    Reader(
        "sessions",
        lambda db: db.execute(
            "INSERT INTO sessions VALUES (?, 99, ?, ?, 0)", (HANDLE, WHO.user_id, WHO.email)
        ),
        _handle_accepted,
    ),
    Reader(
        "memory",
        lambda db: db.execute(
            "UPDATE records SET content = ? WHERE created_by = ?", (UNCOMMITTED, WHO.email)
        ),
        lambda p: [r["content"] for r in p.memory.manage(WHO, {"command": "list"})["records"]],
    ),
    Reader(
        "insights",
        lambda db: db.execute("UPDATE records SET insight_status = 'approved'"),
        lambda p: [i["status"] for i in p.knowledge.insights({}, limit=20, offset=0)[0]],
    ),
    Reader(
        "search",
        lambda db: db.execute("UPDATE records SET content = ?", (UNCOMMITTED,)),
        lambda p: p.search.search(WHO, {"intent": "keystone region", "sources": ["insights"]}),
    ),
]


@pytest.fixture
def platform() -> Iterator[Platform]:
    p = Platform(pack=peer_pack())
    p.memory.capture(
        WHO,
        "",
        {
            "type": "business_knowledge",
            "entity_urns": [ORDERS],
            "content": "The 'keystone region' is North, a committed insight.",
        },
    )
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
    platform.store.lock = _WatchedLock(platform.store.lock, progressed)
    written, release = threading.Event(), threading.Event()
    inside: list[Any] = []
    seen: list[Any] = []

    def writer() -> None:
        with contextlib.suppress(_Rollback), platform.store.tx() as db:
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
