"""The reliability selftest: what benchledger survives, tried for real.

``benchledger selftest reliability [--quick]`` runs five scenarios and prints a table of
what was tried and what survived (docs/reliability.md):

- **kill sweep** — the lifecycle suite SIGKILLed at N points spread over one run, resumed
  after each kill: every interrupted ledger verifies, the final run is sealed, every
  planned unit finished exactly once, and the metrics equal an uninterrupted run's;
- **platform faults** — the fault proxy (benchmarks/fault_proxy.py) in front of the
  platform injects 5xx answers, dropped connections, timeouts and truncated bodies into
  MCP and REST requests at 10%: the run is sealed, every fault is exactly one recorded
  ``infra_error`` (a retry), and units that exhausted their retries are excluded from
  every rate and listed;
- **disk full** — the ledger on a small tmpfs (or, where nothing can be mounted, an SQLite
  file capped with ``PRAGMA max_page_count``): the run stops with one line, what it
  committed verifies, and a resume with room completes it;
- **PostgreSQL connection killed** — ``pg_terminate_backend`` on the run's connections
  mid-run: the same three promises;
- **bad inputs** — the corpus under tests/data/bad/ (cases.yaml): each case gets its
  documented exit code and one line naming the problem, no traceback, nothing written;
- **resource bounds** — benchmarks/bounds.py's attacks on a ``platform serve`` child (a
  600 MB body, SQL that was super-linear, spinning and ballooning queries, MCP sessions
  past the cap): each refused naming its bound, the server's peak memory under a ceiling;
- **load** — ``--concurrency 32`` over the suite (k=3 in full mode): no errors, the ledger
  verifies; units/s and the p99 episode latency are reported.

The kill sweep, disk-full, PostgreSQL and load scenarios drive the real command line in
child processes (``python -m cli run ...``), as a user would; platform faults run the
driver in this process, with the proxy armed by the run's own start (never a timer).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import hashlib
import io
import math
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec
import yaml

import protocols
from benchmarks.fault_proxy import FaultProxy, http_answer
from harness.driver import Progress, RunDriver, pool_needed
from harness.record import RunConfig
from ledger import Ledger, LedgerError, open_store
from ledger.bundle import import_bundle
from ledger.events import (
    EpisodeFinished,
    EpisodeStarted,
    InfraError,
    RunStarted,
    UnitAbandoned,
    UnitFinished,
    UnitStarted,
)
from projections.fold import fold
from projections.lifecycle import LifecycleFold, scorecard
from projections.source import open_run

ROOT: Final = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS: Final = os.path.join(ROOT, "tests", "data", "bad")
SCENARIOS: Final = ("kill", "faults", "disk", "postgres", "bad", "bounds", "load")
FAULT_RATE: Final = 0.1
FAULT_TIMEOUT_S: Final = 5.0  # the client's timeout while faults are injected
_UNIT_LINE = re.compile(r"^unit (\d+)/(\d+) ")


@dataclass
class Row:
    """One scenario's line of the table."""

    scenario: str
    tried: str
    survived: str
    ok: bool | None  # None: skipped (the reason is in ``survived``)
    seconds: float = 0.0
    problems: list[str] = field(default_factory=list)  # why it failed
    notes: list[str] = field(default_factory=list)  # what to know even when it passed

    @property
    def result(self) -> str:
        return "skipped" if self.ok is None else ("PASS" if self.ok else "FAIL")


@dataclass
class Config:
    """How to run the selftest. ``main`` runs one command in-process (the bad-input corpus)."""

    quick: bool = False
    seed: int = 0
    workdir: str = ""
    postgres: str = ""
    only: frozenset[str] = frozenset()
    main: Callable[[list[str]], int] | None = None
    log: Callable[[str], None] = print
    kill_points: int = 0  # 0: 3 quick, 20 full
    protocols_limit: int = 0  # 0: a 6-protocol subset quick, the whole suite full


# -- helpers -------------------------------------------------------------------------------


def _env(**extra: str) -> dict[str, str]:
    """The environment of a child ``python -m cli``: this checkout first on the path."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (ROOT, env.get("PYTHONPATH", "")) if p)
    env.pop("BENCHLEDGER_DEBUG", None)
    env.update(extra)
    return env


def _cli(args: Sequence[str], cwd: str, **env: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "cli", *args],
        cwd=cwd,
        env=_env(**env),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
    )


def _finish(proc: subprocess.Popen[str], timeout: float = 1800) -> tuple[int, str, str]:
    out, err = proc.communicate(timeout=timeout)
    return proc.returncode, out, err


def _subset(workdir: str, n: int) -> str:
    """A protocol folder holding the first ``n`` protocols of the committed set."""
    folder = os.path.join(workdir, f"protocols-{n}")
    if not os.path.isdir(folder):
        os.makedirs(folder)
        names = sorted(f for f in os.listdir(protocols.LIFECYCLE_DIR) if f.endswith(".yaml"))
        for name in names[:n]:
            shutil.copy(os.path.join(protocols.LIFECYCLE_DIR, name), folder)
    return folder


def _suite(cfg: Config, workdir: str, quick_n: int) -> tuple[list[str], str]:
    """``--protocols`` arguments and a label: a subset in quick mode, the suite in full."""
    n = cfg.protocols_limit or (quick_n if cfg.quick else 0)
    if not n:
        return [], "the lifecycle suite"
    return ["--protocols", _subset(workdir, n)], f"{n} lifecycle protocols"


@contextlib.contextmanager
def _reader(location: str) -> Iterator[Ledger]:
    ledger = Ledger(open_store(location, create=False, read_only="://" not in location))
    try:
        yield ledger
    finally:
        ledger.store.close()


@dataclass
class Units:
    """A run's units as its events tell them."""

    planned: list[tuple[str, int]]
    finished: collections.Counter[tuple[str, int]]
    abandoned: int
    errors: dict[str, str]  # stream -> error of units that finished with one

    def exactly_once(self) -> list[str]:
        """What breaks "every planned unit finished exactly once" (empty when nothing)."""
        out = [
            f"{p}/{a} finished {self.finished[(p, a)]} times"
            for p, a in self.planned
            if self.finished[(p, a)] != 1
        ]
        extra = set(self.finished) - set(self.planned)
        out += [f"{p}/{a} finished but was never planned" for p, a in sorted(extra)]
        return out


def _units(events: Sequence[tuple[Any, str]]) -> Units:
    planned: list[tuple[str, int]] = []
    keys: dict[str, tuple[str, int]] = {}
    finished: collections.Counter[tuple[str, int]] = collections.Counter()
    abandoned = 0
    errors: dict[str, str] = {}
    for event, _ in events:
        if isinstance(event, RunStarted) and event.body.record is not None:
            planned = [(u.unit_id, u.attempt) for u in event.body.record.units]
        elif isinstance(event, UnitStarted):
            keys[event.stream] = (event.body.protocol_id, event.body.attempt)
        elif isinstance(event, UnitFinished) and event.stream in keys:
            finished[keys[event.stream]] += 1
            if event.body.error:
                errors[event.stream] = event.body.error
        elif isinstance(event, UnitAbandoned):
            abandoned += 1
    return Units(planned, finished, abandoned, errors)


def _metrics(events: Sequence[tuple[Any, str]]) -> dict[str, tuple[float, int]]:
    card = scorecard([fold(LifecycleFold(), events)])
    return {name: (round(m.num, 9), m.den) for name, m in card.metrics.items()}


def _verified(location: str, run_id: str, *, sealed: bool) -> tuple[Any, str]:
    """(the verified run, "") or (None, why it does not verify)."""
    try:
        with _reader(location) as ledger:
            return open_run(run_id, ledger, require_seal=sealed, allow_partial=False), ""
    except LedgerError as exc:
        return None, str(exc)


def _one_line(err: str) -> list[str]:
    """Problems with a child's stderr: more than one line, or a traceback."""
    lines = [ln for ln in err.splitlines() if ln.strip()]
    out = []
    if len(lines) != 1:
        shown = err.strip() if len(err) < 1500 else err.strip()[:1200] + " ... " + err[-300:]
        out.append(f"stderr has {len(lines)} lines, not one: {shown!r}")
    if "Traceback" in err:
        out.append("a traceback on stderr")
    return out


def _mount(folder: str, size: str, *, remount: bool = False) -> bool:
    """Mount (or resize) a tmpfs at ``folder``; False when this machine does not allow it."""
    opts = f"remount,size={size}" if remount else f"size={size}"
    argv = (
        ["mount", "-o", opts, folder]
        if remount
        else ["mount", "-t", "tmpfs", "-o", opts, "tmpfs", folder]
    )
    if shutil.which("mount") is None or (hasattr(os, "geteuid") and os.geteuid() != 0):
        return False
    done = subprocess.run(argv, capture_output=True, text=True)
    return done.returncode == 0


def _umount(folder: str) -> None:
    subprocess.run(["umount", "-l", folder], capture_output=True)  # lazy: never left behind


# -- kill sweep ----------------------------------------------------------------------------


def kill_sweep(cfg: Config) -> Row:
    """SIGKILL one run at N points spread over it, resuming after each kill."""
    work = os.path.join(cfg.workdir, "kill")
    os.makedirs(work, exist_ok=True)
    suite_args, label = _suite(cfg, work, 6)
    points = cfg.kill_points or (3 if cfg.quick else 20)
    problems: list[str] = []
    ref = os.path.join(work, "reference.sqlite")
    code, _, err = _finish(_cli(["run", "--run-id", "ref", "--ledger", ref, *suite_args], work))
    if code != 0:
        return Row(
            "kill sweep",
            f"an uninterrupted run of {label}",
            "the reference run failed",
            False,
            problems=[err.strip()[-500:]],
        )
    with _reader(ref) as led:
        ref_events = list(led.events("ref"))
    want = _metrics(ref_events)
    total = len(_units(ref_events).planned)
    targets = [i * total // points for i in range(points)]
    ledger, run_id = os.path.join(work, "swept.sqlite"), "swept"
    kills = verified = 0
    sealed = False
    for target in targets:
        done_before = 0
        if os.path.exists(ledger):
            with _reader(ledger) as led:
                done_before = sum(_units(list(led.events(run_id))).finished.values())
            args = ["run", "--resume", run_id, "--ledger", ledger]
        else:
            args = ["run", "--run-id", run_id, "--ledger", ledger, *suite_args]
        proc = _cli(args, work)
        killed = False
        assert proc.stdout is not None
        for line in proc.stdout:
            m = _UNIT_LINE.match(line)
            here = done_before + (int(m.group(1)) if m else 0)
            if (line.startswith("running ") and target <= done_before) or (m and here >= target):
                proc.send_signal(signal.SIGKILL)
                killed = True
                break
        code, _, err = _finish(proc)
        if not killed:  # it finished before this point: nothing left to interrupt
            sealed = code == 0
            if code != 0:
                problems.append(f"segment before kill point {target} exited {code}: {err[-300:]}")
            break
        kills += 1
        _, why = _verified(ledger, run_id, sealed=False)
        if why:
            problems.append(f"after kill {kills}: {why}")
        else:
            verified += 1
    if not sealed:
        code, _, err = _finish(_cli(["run", "--resume", run_id, "--ledger", ledger], work))
        if code != 0:
            problems.append(f"the final resume exited {code}: {err.strip()[-300:]}")
    run, why = _verified(ledger, run_id, sealed=True)
    units = _units(run.events) if run else Units([], collections.Counter(), 0, {})
    if why:
        problems.append(f"the final run does not verify: {why}")
    problems += units.exactly_once()
    got = _metrics(run.events) if run else {}
    differ = sorted(k for k in want if got.get(k) != want[k])
    if differ:
        problems.append(f"metrics differ from the uninterrupted run's: {', '.join(differ)}")
    return Row(
        "kill sweep",
        f"SIGKILL at {kills} points spread over a {total}-unit run of {label} (units finished "
        f"at each kill: {', '.join(map(str, targets[:kills]))}), resumed after each",
        f"{verified}/{kills} interrupted ledgers verified; sealed; "
        f"{sum(units.finished.values())}/{total} units finished exactly once "
        f"({units.abandoned} interrupted units re-run); metrics "
        + ("equal the uninterrupted run's" if not differ else "DIFFER"),
        not problems,
        problems=problems,
    )


# -- platform faults -----------------------------------------------------------------------

# How injected faults read in the infra_errors they must become: (faults, recorded kinds).
_SURFACES: Final = (
    (("http_5xx",), ("http_5xx",)),
    (("timeout",), ("timeout",)),
    (("drop", "truncate"), ("transport", "bad_answer")),
)


@contextlib.contextmanager
def _environ(**values: str) -> Iterator[None]:
    old = {k: os.environ.get(k) for k in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def platform_faults(cfg: Config) -> Row:
    """A run through the fault proxy at 10%: sealed, every fault one recorded infra error."""
    from refplatform.server import RunningPlatform

    work = os.path.join(cfg.workdir, "faults")
    os.makedirs(work, exist_ok=True)
    suite_args, label = _suite(cfg, work, 8)
    path = suite_args[1] if suite_args else protocols.LIFECYCLE_DIR
    n_units = len(protocols.load(path).protocols)
    pool = sum(pool_needed(n_units))
    platform = RunningPlatform(pool_size=pool)
    location = os.path.join(work, "faults.sqlite")
    problems: list[str] = []
    try:
        with (
            _environ(BENCHLEDGER_PLATFORM_TIMEOUT_S=str(FAULT_TIMEOUT_S)),
            FaultProxy(
                platform.url,
                rate=FAULT_RATE,
                seed=cfg.seed,
                armed=False,
                hold_s=10 * FAULT_TIMEOUT_S,
                log=cfg.log,
            ) as proxy,
        ):
            ledger = Ledger(open_store(location))
            run = RunConfig(
                protocols_path=path,
                platform=proxy.url,
                admin_key=platform.admin_key,
                pool_base=platform.pool_base,
                pool_size=pool,
                run_id="faults",
                concurrency=4,
                # Units that exhaust their retries are the point here: seal with them.
                seal_despite_infra=True,
            )
            # The run's own start arms the proxy: the preflight sees a healthy platform.
            driver = RunDriver(ledger, run, Progress(started=lambda total: proxy.arm()))
            result = asyncio.run(driver.execute())
            ledger.store.close()
            tally = proxy.tally
    finally:
        platform.stop()
    verified, why = _verified(location, "faults", sealed=True)
    if why:
        problems.append(f"the run does not verify: {why}")
        return Row(
            "platform faults", f"faults at {FAULT_RATE:.0%}", "not sealed", False, problems=problems
        )
    events = verified.events
    errors = [e.body for e, _ in events if isinstance(e, InfraError)]
    units = _units(events)
    problems += units.exactly_once()
    faults = tally.by_kind()
    seen = collections.Counter(b.error for b in errors)
    notes: list[str] = []
    if len(errors) < len(tally.faults):
        problems.append(
            f"{len(tally.faults)} faults injected, only {len(errors)} infra_error events "
            f"(by kind injected {faults}, recorded {dict(seen)})"
        )
    elif len(errors) > len(tally.faults):  # a slow machine: real timeouts besides ours
        notes.append(
            f"{len(errors) - len(tally.faults)} infra errors besides the injected "
            f"faults (recorded {dict(seen)})"
        )
    for injected, recorded_as in _SURFACES:
        n, recorded = sum(faults[k] for k in injected), sum(seen[k] for k in recorded_as)
        if recorded < n:
            problems.append(f"{n} {'/'.join(injected)} faults, only {recorded} recorded as such")
    card = scorecard([fold(LifecycleFold(), events)])
    failed = set(units.errors)
    if card.harness_failures != len(failed):
        problems.append(f"{len(failed)} units failed, the scorecard counts {card.harness_failures}")
    leaked = [m.name for m in card.metrics.values() if set(m.units) & failed]
    if leaked:
        problems.append(f"infra-failed units counted in the rates of {', '.join(leaked)}")
    listed = {o.stream for o in result.failed}
    if listed != failed:
        problems.append("the failed units listed at the end differ from the ledger's")
    notes += [
        f"infra-failed (excluded, listed): {s}: {e[:120]}" for s, e in sorted(units.errors.items())
    ]
    kinds = ", ".join(f"{n} {k}" for k, n in faults.items())
    return Row(
        "platform faults",
        f"{len(tally.faults)} faults ({kinds}) at {FAULT_RATE:.0%} of the {tally.eligible} MCP "
        f"and REST requests of a {n_units}-unit run of {label} (seed {cfg.seed})",
        f"sealed and verifies; {len(errors)} infra_error events for {len(tally.faults)} faults, "
        f"each a recorded retry; {len(failed)} unit(s) exhausted their retries: excluded from "
        "every rate and listed",
        not problems,
        problems=problems,
        notes=notes,
    )


# -- storage faults ------------------------------------------------------------------------


def _stop_and_resume(
    name: str,
    work: str,
    location: str,
    run_id: str,
    first: subprocess.Popen[str],
    expect: str,
    after: Callable[[], object],
    resume_env: dict[str, str] | None = None,
) -> tuple[list[str], str]:
    """The common part of a storage fault: one line and exit 1, committed events verify,
    ``after()`` makes room, a resume seals the run with every unit once."""
    problems: list[str] = []
    code, _, err = _finish(first)
    stopped = code == 1
    if code == 0:
        how = "the run survived the fault (the store recovered on its own)"
    elif code != 1:
        problems.append(f"{name}: exit {code}, not 1: {err.strip()[-300:]}")
        how = f"exit {code}"
    else:
        problems += _one_line(err)
        if expect not in err or "resume with" not in err:
            problems.append(f"{name}: the line does not say {expect!r} and how to resume: {err!r}")
        how = "stopped with one line (exit 1)"
    _, why = _verified(location, run_id, sealed=False)
    if why:
        problems.append(f"what was committed does not verify: {why}")
    after()
    if stopped:
        code, _, err = _finish(
            _cli(["run", "--resume", run_id, "--ledger", location], work, **(resume_env or {}))
        )
        if code != 0:
            problems.append(f"the resume exited {code}: {err.strip()[-300:]}")
    run, why = _verified(location, run_id, sealed=True)
    if why:
        problems.append(f"the resumed run does not verify: {why}")
    elif run is not None:
        problems += _units(run.events).exactly_once()
    return problems, how


def disk_full(cfg: Config) -> Row:
    """The ledger's disk fills mid-run: one line, committed events verify, resume completes."""
    work = os.path.join(cfg.workdir, "disk")
    disk = os.path.join(work, "disk")
    os.makedirs(disk, exist_ok=True)
    suite_args, label = _suite(cfg, work, 6)
    cap = "512k" if cfg.quick or suite_args else "1m"
    if not _mount(disk, cap):
        return _disk_full_capped(cfg, work, suite_args, label)
    try:
        location = os.path.join(disk, "ledger.sqlite")
        proc = _cli(["run", "--run-id", "df", "--ledger", location, *suite_args], work)
        problems, how = _stop_and_resume(
            "disk full",
            work,
            location,
            "df",
            proc,
            "disk is full",
            lambda: _mount(disk, "512m", remount=True),
        )
    finally:
        _umount(disk)
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


def _disk_full_capped(cfg: Config, work: str, suite_args: list[str], label: str) -> Row:
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
    _, why = _verified(location, "df", sealed=False)
    if why:
        problems.append(f"what was committed does not verify: {why}")
    if not problems:
        with contextlib.closing(open_store(location)) as free:
            asyncio.run(RunDriver(Ledger(free), RunConfig(resume="df")).execute())
    run, why = _verified(location, "df", sealed=True)
    problems += [why] if why else _units(run.events).exactly_once()
    return Row(
        "disk full",
        f"the ledger capped at {pages} SQLite pages (no tmpfs here), a run of {label} filling it",
        "stopped with the ledger's error; what it committed verifies; uncapped, resume sealed "
        "it, every unit once",
        not problems,
        problems=problems,
    )


def postgres_killed(cfg: Config) -> Row:
    """``pg_terminate_backend`` on the run's connections mid-run."""
    if not cfg.postgres:
        why = "no PostgreSQL named (set BENCHLEDGER_TEST_POSTGRES or --postgres)"
        return Row("postgres killed", "pg_terminate_backend mid-run", why, None)
    import psycopg

    work = os.path.join(cfg.workdir, "postgres")
    os.makedirs(work, exist_ok=True)
    suite_args, label = _suite(cfg, work, 6)
    token = uuid.uuid4().hex[:10]
    schema, app = f"selftest_{token}", f"benchledger-selftest-{token}"
    sep = "&" if "?" in cfg.postgres else "?"
    location = f"{cfg.postgres}{sep}schema={schema}"
    base = cfg.postgres.split("?")[0]
    killed = 0
    try:
        proc = _cli(
            ["run", "--run-id", "pg", "--ledger", location, *suite_args], work, PGAPPNAME=app
        )
        assert proc.stdout is not None
        for line in proc.stdout:
            if line.startswith("unit 2/"):  # two units are in; the others are mid-episode
                with psycopg.connect(base, autocommit=True) as conn:
                    row = conn.execute(
                        "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity "
                        "WHERE application_name = %s",
                        (app,),
                    ).fetchone()
                    killed = int(row[0]) if row else 0
                break
        problems, how = _stop_and_resume(
            "postgres killed", work, location, "pg", proc, "PostgreSQL", lambda: None
        )
    finally:
        with contextlib.suppress(Exception), psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    if not killed:
        problems.append("no connection of the run was found to terminate")
    return Row(
        "postgres killed",
        f"pg_terminate_backend on the run's {killed} PostgreSQL connections after 2 units of "
        f"a run of {label}",
        f"{how}; what it committed verifies; resume sealed it, every unit once",
        not problems,
        problems=problems,
    )


# -- bad inputs ----------------------------------------------------------------------------


class Case(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """One bad input: the command, the exit code it must get, what its line must say."""

    id: str
    argv: list[str]
    exit: int
    says: str
    kind: str = ""  # the input kind (protocols, cases, bundles, ledger, cli, peer, platform)
    env: dict[str, str] = {}
    lines: int = 1  # at most this many stderr lines (argparse usage errors print more)
    platform: str = ""  # a broken platform to put behind {platform}


def load_cases(path: str = os.path.join(CORPUS, "cases.yaml")) -> list[Case]:
    with open(path, encoding="utf-8") as fh:
        data = yaml.safe_load(fh)
    return msgspec.convert(data, list[Case])


def _digest(folder: str) -> dict[str, str]:
    """Every file under ``folder`` with its hash; SQLite's shared-memory files and empty
    write-ahead logs (a reader of a WAL database opens them) hold no data and are left out."""
    out = {}
    for dirpath, _, files in os.walk(folder):
        for name in files:
            p = os.path.join(dirpath, name)
            if name.endswith("-shm") or (name.endswith("-wal") and not os.path.getsize(p)):
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, folder)] = hashlib.blake2b(fh.read()).hexdigest()
    return out


def _jsonrpc_id(body: bytes) -> Any:
    try:
        return msgspec.json.decode(body).get("id")
    except (msgspec.DecodeError, AttributeError):
        return None


def _broken(kind: str) -> Callable[[str, str, bytes], bytes | None]:
    """A canned answer for the proxy: a platform that breaks the API in one way."""

    def answer(method: str, path: str, body: bytes) -> bytes | None:
        rest = path.startswith("/api/")
        if kind == "html":
            return http_answer(200, b"<html><body>welcome</body></html>", "text/html")
        if kind == "http500":
            return http_answer(500, b"internal error", "text/plain")
        if kind == "unauthorized":
            return http_answer(401, b'{"title":"Unauthorized","status":401}')
        if kind == "not-jsonrpc" and not rest and method == "POST":
            return http_answer(200, b'{"hello":"world"}')
        if kind == "no-handle" and b'"platform_info"' in body:
            result = {"content": [{"type": "text", "text": "{}"}], "isError": False}
            msg = {"jsonrpc": "2.0", "id": _jsonrpc_id(body), "result": result}
            return http_answer(200, msgspec.json.encode(msg))
        if kind == "rest-html" and rest:
            return http_answer(200, b"<html>login</html>", "text/html")
        if kind == "rest-forbidden" and rest:
            return http_answer(403, b'{"title":"Forbidden","status":403}')
        if kind == "rest-no-list" and rest:
            return http_answer(200, b'{"items":[]}')
        return None

    return answer


class Corpus:
    """The corpus's fixtures (a ledger, a reference platform, broken platforms) and its judge.

    A context manager: ``check(case)`` runs one case in-process through ``main`` and returns
    what is wrong with its answer (empty when it is right).
    """

    def __init__(self, workdir: str, main: Callable[[list[str]], int]) -> None:
        self.workdir = workdir
        self.main = main
        self._stack = contextlib.ExitStack()
        self._proxies: dict[str, str] = {}

    def __enter__(self) -> Corpus:
        from refplatform.server import RunningPlatform

        self.fixtures = os.path.join(self.workdir, "fixtures")
        os.makedirs(self.fixtures, exist_ok=True)
        self.ledger = os.path.join(self.fixtures, "ledger.sqlite")
        with contextlib.closing(open_store(self.ledger)) as store:
            for bundle in ("good.jsonl", "open.jsonl"):
                path = os.path.join(CORPUS, "bundles", bundle)
                import_bundle(Ledger(store), path, allow_unsealed=True)  # open.jsonl is unsealed
        self.platform = RunningPlatform(pool_size=8)
        self._stack.callback(self.platform.stop)
        self._before = _digest(self.fixtures)
        self._corpus = _digest(CORPUS)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def _broken_platform(self, kind: str) -> str:
        if kind not in self._proxies:
            proxy = FaultProxy(
                self.platform.url, rate=0, canned=_broken(kind), log=lambda line: None
            )
            self._proxies[kind] = self._stack.enter_context(proxy).url
        return self._proxies[kind]

    def check(self, case: Case) -> list[str]:
        scratch = os.path.join(self.workdir, "cases", case.id)
        os.makedirs(scratch)
        broken = self._broken_platform(case.platform) if case.platform else ""
        values = {
            "bad": CORPUS,
            "tmp": scratch,
            "ledger": self.ledger,
            "refplatform": self.platform.url,
            "refplatform_port": str(self.platform.port),  # a port in use
            "admin_key": self.platform.admin_key,
            "pool_base": self.platform.pool_base,
            "platform": broken,
        }
        argv = [a.format(**values) for a in case.argv]
        env = {k: v.format(**values) for k, v in case.env.items()}
        code, out, err = _invoke(self.main, argv, scratch, env)
        wrong = _judge(case, code, out, err)
        if os.listdir(scratch):
            wrong.append(f"wrote {', '.join(sorted(os.listdir(scratch)))}")
        now = _digest(self.fixtures)
        if now != self._before:
            wrong.append("changed the ledger")
            self._before = now
        now = _digest(CORPUS)
        if now != self._corpus:
            wrong.append("changed the corpus files")
            self._corpus = now
        return wrong


def bad_inputs(cfg: Config) -> Row:
    """Every case of the corpus, in-process: exit code, one line naming it, nothing written."""
    if cfg.main is None or not os.path.isfile(os.path.join(CORPUS, "cases.yaml")):
        return Row(
            "bad inputs",
            "the corpus in tests/data/bad/",
            "no corpus here (it lives in the source checkout)",
            None,
        )
    cases = load_cases()
    failures: list[str] = []
    kinds: collections.Counter[str] = collections.Counter()
    with Corpus(os.path.join(cfg.workdir, "bad"), cfg.main) as corpus:
        for case in cases:
            kinds[case.kind] += 1
            failures += [f"{case.id}: {w}" for w in corpus.check(case)]
    by_kind = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items()))
    return Row(
        "bad inputs",
        f"{len(cases)} bad inputs from tests/data/bad/cases.yaml ({by_kind})",
        f"{len(cases) - len({f.split(':')[0] for f in failures})}/{len(cases)} answered with "
        "their documented exit code and one line naming the problem; no traceback; nothing "
        "written",
        not failures,
        problems=failures,
    )


def _invoke(
    main: Callable[[list[str]], int], argv: list[str], cwd: str, env: dict[str, str]
) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    defaults = {"BENCHLEDGER_LEDGER": os.path.join(cwd, "default-ledger.sqlite")}
    try:
        os.chdir(cwd)
        with (
            _environ(**{**defaults, **{k: v for k, v in env.items() if v}}),
            _unset([k for k, v in env.items() if not v]),
            contextlib.redirect_stdout(out),
            contextlib.redirect_stderr(err),
        ):
            try:
                code = main(argv)
            except SystemExit as exc:  # argparse
                code = exc.code if isinstance(exc.code, int) else 2
            except BaseException as exc:  # a crash is the finding, not the end of the corpus
                err.write(f"Traceback (uncaught): {type(exc).__name__}: {exc}\n")
                code = -1
    finally:
        os.chdir(here)
    return code, out.getvalue(), err.getvalue()


@contextlib.contextmanager
def _unset(names: list[str]) -> Iterator[None]:
    old = {k: os.environ.pop(k) for k in names if k in os.environ}
    try:
        yield
    finally:
        os.environ.update(old)


def _judge(case: Case, code: int, out: str, err: str) -> list[str]:
    wrong = []
    if code != case.exit:
        wrong.append(f"exit {code}, documented {case.exit}")
    text = err if case.exit == 2 else err + out
    if case.says.lower() not in text.lower():
        wrong.append(f"does not say {case.says!r}: {(err or out).strip()[-240:]!r}")
    lines = [ln for ln in err.splitlines() if ln.strip()]
    if len(lines) > case.lines:
        wrong.append(f"{len(lines)} lines on stderr: {err.strip()[-240:]!r}")
    if "Traceback" in out + err:
        wrong.append("a traceback")
    return wrong


# -- resource bounds -----------------------------------------------------------------------


def resource_bounds(cfg: Config) -> Row:
    """The attacks of benchmarks/bounds.py on a ``platform serve`` child: each bound holds."""
    from benchmarks import bounds

    sessions = bounds.MAX_SESSIONS + 20
    served = bounds.Served()
    try:
        outcomes = bounds.attacks(served, sessions=sessions)
    finally:
        served.stop()
    server_kb = max(o.server_kb for o in outcomes)
    worker_kb = max(o.workers_kb for o in outcomes)
    problems = [f"{o.attack}: {o.answer}" for o in outcomes if not o.ok]
    for who, kb in (("the server", server_kb), ("a SQL worker", worker_kb)):
        if kb >= bounds.CEILING_KB:
            problems.append(f"{who} reached {kb // 1024} MB (ceiling {bounds.CEILING_KB >> 10} MB)")
    slowest = max(o.seconds for o in outcomes if o.attack != "sessions")
    return Row(
        "resource bounds",
        "a 600 MB REST body (declared, chunked); SQL of 20k and 200k spaces and 20k open "
        "parentheses; 2 spinning and 3 ballooning queries; "
        f"{sessions} MCP sessions left open (platform serve)",
        f"{sum(o.ok for o in outcomes)}/{len(outcomes)} held: each refused at its bound (413, "
        "read-only, length, depth, deadline, memory, result size; 503 past "
        f"{bounds.MAX_SESSIONS} sessions) within {slowest:.1f} s, a plain query answered "
        f"after them; peak RSS {server_kb >> 10} MB server, {worker_kb >> 10} MB SQL worker",
        not problems,
        problems=problems,
    )


# -- load ----------------------------------------------------------------------------------


def load(cfg: Config) -> Row:
    """The whole suite at --concurrency 32 (k=3 in full mode): no errors, verifies; speed."""
    work = os.path.join(cfg.workdir, "load")
    os.makedirs(work, exist_ok=True)
    k = 1 if cfg.quick else 3
    suite_args, label = _suite(cfg, work, 0)
    location = os.path.join(work, "load.sqlite")
    args = [
        "run",
        "--run-id",
        "load",
        "--k",
        str(k),
        "--concurrency",
        "32",
        "--ledger",
        location,
        *suite_args,
    ]
    started = time.perf_counter()
    code, _, err = _finish(_cli(args, work))
    wall = time.perf_counter() - started
    problems = [] if code == 0 else [f"exit {code}: {err.strip()[-300:]}"]
    run, why = _verified(location, "load", sealed=True)
    if why:
        problems.append(why)
        return Row("load", f"k={k}, --concurrency 32", "did not verify", False, problems=problems)
    units = _units(run.events)
    problems += units.exactly_once()
    problems += [f"{s}: {e[:160]}" for s, e in units.errors.items()]
    starts = [e.at for e, _ in run.events if isinstance(e, UnitStarted)]
    ends = [e.at for e, _ in run.events if isinstance(e, UnitFinished)]
    span = (max(ends) - min(starts)) / 1e9 if starts and ends else wall
    latencies = sorted(_episode_latencies(run.events))
    p99 = latencies[max(0, math.ceil(0.99 * len(latencies)) - 1)] if latencies else 0.0
    n = sum(units.finished.values())
    return Row(
        "load",
        f"{label}, k={k}, --concurrency 32: {n} units, {len(latencies)} episodes",
        f"no errors; the ledger verifies; {n / span:.2f} units/s over {span:.1f} s of units "
        f"({wall:.1f} s with start-up); p99 episode latency {p99:.2f} s",
        not problems,
        problems=problems,
    )


def _episode_latencies(events: Sequence[tuple[Any, str]]) -> Iterator[float]:
    opened: dict[str, int] = {}
    for event, _ in events:
        if isinstance(event, EpisodeStarted):
            opened[event.stream] = event.at
        elif isinstance(event, EpisodeFinished) and event.stream in opened:
            yield (event.at - opened.pop(event.stream)) / 1e9


# -- the whole selftest --------------------------------------------------------------------

_RUNNERS: Final[dict[str, Callable[[Config], Row]]] = {
    "kill": kill_sweep,
    "faults": platform_faults,
    "disk": disk_full,
    "postgres": postgres_killed,
    "bad": bad_inputs,
    "bounds": resource_bounds,
    "load": load,
}


def run(cfg: Config) -> list[Row]:
    """Every scenario (or those in ``cfg.only``), each timed; a crash is that row's FAIL."""
    rows = []
    own = not cfg.workdir
    if own:
        cfg.workdir = tempfile.mkdtemp(prefix="benchledger-selftest-")
    try:
        for name in SCENARIOS:
            if cfg.only and name not in cfg.only:
                continue
            cfg.log(f"selftest: {name} ...")
            started = time.perf_counter()
            try:
                row = _RUNNERS[name](cfg)
            except Exception as exc:  # one scenario's crash is its failure, not the table's
                row = Row(name, "(crashed)", f"{type(exc).__name__}: {exc}", False)
            row.seconds = time.perf_counter() - started
            cfg.log(f"selftest: {name}: {row.result} in {row.seconds:.0f} s")
            rows.append(row)
    finally:
        if own:
            shutil.rmtree(cfg.workdir, ignore_errors=True)
    return rows


def table(rows: Sequence[Row]) -> str:
    """The rows as a Markdown table (it reads in a terminal and pastes into docs)."""
    out = ["| scenario | tried | survived | result | time |", "| --- | --- | --- | --- | ---: |"]
    for r in rows:
        out.append(f"| {r.scenario} | {r.tried} | {r.survived} | {r.result} | {r.seconds:.0f} s |")
    for r in rows:
        out += [f"{r.scenario}: {n}" for n in r.notes]
        for p in r.problems[:20]:
            out.append(f"{r.scenario}: {p}")
        if len(r.problems) > 20:
            out.append(f"{r.scenario}: ... and {len(r.problems) - 20} more")
    return "\n".join(out) + "\n"
