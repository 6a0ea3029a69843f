"""Disk full: the ledger's disk fills mid-run (a small tmpfs, else an SQLite page cap)."""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Iterator
from typing import Any

from benchledger.benchmarks.reliability.scenario import (
    Config,
    Row,
    cli,
    mount,
    stop_and_resume,
    suite_options,
    umount,
    units_of,
    verify_run,
)
from benchledger.harness.driver import RunDriver
from benchledger.harness.record import RunConfig
from benchledger.ledger import Ledger, LedgerError, open_store


def disk_full(cfg: Config) -> Row:
    """The ledger's disk fills mid-run: one line, committed events verify, resume completes."""
    work = os.path.join(cfg.workdir, "disk")
    disk = os.path.join(work, "disk")
    os.makedirs(disk, exist_ok=True)
    suite_args, label = suite_options(cfg, work, 6)
    cap = "512k" if cfg.quick or suite_args else "1m"
    if not mount(disk, cap):
        return disk_full_capped(cfg, work, suite_args, label)
    try:
        location = os.path.join(disk, "ledger.sqlite")
        proc = cli(cfg, ["run", "--run-id", "df", "--ledger", location, *suite_args], work)
        problems, how = stop_and_resume(
            cfg,
            "disk full",
            work,
            location,
            "df",
            proc,
            "disk is full",
            lambda: mount(disk, "512m", remount=True),
        )
    finally:
        umount(disk)
    return Row(
        "disk full",
        f"the ledger on a {cap} tmpfs, a run of {label} filling it",
        f"{how}; what it committed verifies; with room, resume sealed it, every unit once",
        not problems,
        problems=problems,
    )


@contextlib.contextmanager
def _page_cap(pages: int) -> Iterator[None]:
    """Every SQLite ledger connection opened meanwhile holds at most ``pages`` pages."""
    from eventsourcing.sqlite import SQLiteConnectionPool

    original = SQLiteConnectionPool._create_connection

    def capped(self: Any) -> Any:
        conn = original(self)
        conn._sqlite_conn.execute(f"PRAGMA max_page_count = {pages}")
        return conn

    SQLiteConnectionPool._create_connection = capped  # type: ignore[method-assign]
    try:
        yield
    finally:
        SQLiteConnectionPool._create_connection = original  # type: ignore[method-assign]


def disk_full_capped(cfg: Config, work: str, suite_args: list[str], label: str) -> Row:
    """Without a mountable tmpfs: the same promises on an SQLite file of at most N pages,
    with the driver in this process (a page cap holds per connection)."""
    location = os.path.join(work, "capped.sqlite")
    path = suite_args[1] if suite_args else ""
    problems: list[str] = []
    pages = 40  # 160 KiB: a unit writes about 100 KiB, so the cap is hit in the second unit
    with _page_cap(pages):
        store = open_store(location)
        try:
            asyncio.run(
                RunDriver(Ledger(store), RunConfig(protocols_path=path, run_id="df")).execute()
            )
            problems.append("the capped ledger never filled")
        except LedgerError as exc:
            if "full" not in str(exc):
                problems.append(f"stopped, but not for a full disk: {exc}")
        finally:
            store.close()
    _, why = verify_run(location, "df", sealed=False)
    if why:
        problems.append(f"what was committed does not verify: {why}")
    if not problems:
        with contextlib.closing(open_store(location)) as free:
            asyncio.run(RunDriver(Ledger(free), RunConfig(resume="df")).execute())
    run, why = verify_run(location, "df", sealed=True)
    problems += [why] if why else units_of(run.events).exactly_once()
    return Row(
        "disk full",
        f"the ledger capped at {pages} SQLite pages (no tmpfs here), a run of {label} filling it",
        "stopped with the ledger's error; what it committed verifies; uncapped, resume sealed "
        "it, every unit once",
        not problems,
        problems=problems,
    )
