"""The agent's SQL runs here: in child processes whose memory is capped and that may be killed.

DuckDB's ``memory_limit`` bounds its buffer pool (sorts, hash tables, aggregate states),
not the values a query computes (``repeat``, ``generate_series``, a chain of
concatenations), nor the Python rows the client builds from them; and an interrupt is
only seen between chunks of work. Nothing inside one process bounds those, so every
statement that evaluates the agent's SQL (the query, ``EXPLAIN``, the rewriter's type
probes) runs in a worker process (``python -m benchledger.refplatform.toolkits.sqlworker``) over its
own copy of the pack's tables, with its address space capped (``RLIMIT_AS``, at what it
needed to start plus ``memory_bytes``):

- a query that needs more memory fails there with DuckDB's out-of-memory error (or a
  Python ``MemoryError`` while its rows are built), and the worker goes on;
- a query still running ``grace_s`` after its timeout (the interrupt not seen) is killed
  with its worker, which is replaced on the next call;
- a result is fetched in batches and refused as soon as its estimated rendered size
  passes ``max_result_bytes`` or one value passes ``max_cell_bytes``, so the server's own
  process only ever holds a bounded result.

A pool per pack and memory budget serves every engine of the process (like the loaded
database in ``sql_database.loaded``); its first worker starts in the background when the
pool is made, more (up to ``size``) when all are busy. A worker exits when the server's end of
its pipe closes, which includes the server process dying.
"""

from __future__ import annotations

import contextlib
import math
import os
import resource
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any, Final, NamedTuple

STARTUP_TIMEOUT_S: Final = 120.0  # a loaded machine; the pack's INSERTs take ~0.5 s idle
GRACE_S: Final = 2.0  # after a query's timeout, before its worker is killed
_BATCH: Final = 64  # rows converted to Python objects at a time
# DuckDB types whose values have no fixed rendered width.
_VARIABLE: Final = ("VARCHAR", "BLOB", "BIT", "JSON", "[", "STRUCT", "MAP", "UNION", "VARIANT")
# Makes a worker's database: (connection, the pack's setup SQL, DuckDB's memory_limit).
Prepare = Callable[[Any, str, str], None]
# The folder holding the ``benchledger`` package (this file is benchledger/refplatform/
# toolkits/sqlworker.py), put on the worker's path so ``-m benchledger...`` finds it.
_PACKAGE_ROOT: Final = os.path.abspath(os.path.join(os.path.dirname(__file__), *[".."] * 3))


class Failed(NamedTuple):
    """A statement the worker refused or that failed: why, in the form the caller translates."""

    kind: str  # "error" (a DuckDB error, ``name`` its class), "timeout", "bound", "memory",
    # "unavailable" (no worker could be started), "busy" (none came free in time)
    name: str
    message: str


class Rows(NamedTuple):
    """A query's answer: DuckDB's column names and types, at most ``limit`` rows."""

    names: list[str]
    types: list[str]
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_ms: int


class Bounds(NamedTuple):
    """What one statement may use: its wall-clock seconds and the bytes of its result."""

    timeout_s: float
    max_result_bytes: int
    max_cell_bytes: int


# ---------------------------------------------------------------------------- the server side


class _Lost(Exception):
    """The worker is gone (killed at its deadline, or died); the pool replaces it."""


class _Worker:
    """One child process and its two pipe ends."""

    def __init__(
        self, prepare: Prepare, setup_sql: str, memory_bytes: int, memory_limit: str
    ) -> None:
        down_r, down_w = os.pipe()
        up_r, up_w = os.pipe()
        env = dict(os.environ)
        # One malloc arena: a thread's first allocation would otherwise reserve 64 MiB of
        # address space against the cap without using it.
        env["MALLOC_ARENA_MAX"] = "1"
        env["PYTHONPATH"] = os.pathsep.join(p for p in (_PACKAGE_ROOT, env.get("PYTHONPATH")) if p)
        self._out = Connection(down_w, readable=False)
        self._in = Connection(up_r, writable=False)
        try:
            self.proc = subprocess.Popen(
                # -P: the caller's folder is not put first on the path, so a file there named
                # like a module (a refplatform folder, a duckdb.py) cannot replace ours.
                [
                    sys.executable,
                    "-P",
                    "-m",
                    "benchledger.refplatform.toolkits.sqlworker",
                    str(down_r),
                    str(up_w),
                ],
                pass_fds=(down_r, up_w),
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            self._out.close()
            self._in.close()
            raise _Lost(f"the SQL worker did not start: {exc.strerror or exc}") from None
        finally:
            os.close(down_r)
            os.close(up_w)
        try:
            ready = self.ask((prepare, setup_sql, memory_bytes, memory_limit), STARTUP_TIMEOUT_S)
        except _Lost as lost:
            raise _Lost(f"the SQL worker did not start: {lost}") from None
        if ready != "ready":
            self.kill()
            raise _Lost(f"the SQL worker did not start: {ready}")

    def ask(self, request: tuple[Any, ...], seconds: float) -> Any:
        """Send one request and wait ``seconds`` for its answer (``_Lost`` and killed if not)."""
        deadline = time.monotonic() + seconds
        try:
            self._out.send(request)
        except OSError:
            self.kill()
            raise _Lost("the SQL worker is gone") from None
        return self._reply(deadline)

    def _reply(self, deadline: float) -> Any:
        try:
            if self._in.poll(max(0.0, deadline - time.monotonic())):
                return self._in.recv()
        except (EOFError, OSError):
            self.kill()
            raise _Lost("the SQL worker died") from None
        self.kill()
        raise _Lost("timeout")

    def kill(self) -> None:
        """Stop the process (it is ours) and release its pipes."""
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(timeout=10)
        self._out.close()
        self._in.close()


class Budget:
    """The seconds a request may run on a worker: waiting for one does not spend them."""

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds

    def left(self) -> float:
        """Seconds left (0 once spent)."""
        return max(0.0, self.deadline - time.monotonic())


class Pool:
    """Up to ``size`` workers over one pack; each call takes an idle one (or starts one).

    Shared fairly between owners (the platform's identities; docs/refplatform.md, "Bounds"):
    one owner holds at most ``size - 1`` workers (1 when ``size`` is 1), so another's query
    finds one free; when a worker frees, the waiting query of the owner holding the fewest,
    then served longest ago, then waiting longest, takes it. A query without an owner (a
    direct in-process caller) is not capped.
    """

    def __init__(
        self, prepare: Prepare, setup_sql: str, *, size: int, memory_bytes: int, memory_limit: str
    ) -> None:
        self._args = (prepare, setup_sql, memory_bytes, memory_limit)
        self._size = size
        self._cap = max(1, size - 1)  # workers one owner may hold
        self._idle: list[_Worker] = []
        self._live = 0  # started or starting
        self._starting = 0
        self._cond = threading.Condition()
        self._holding: dict[str | None, int] = {}  # owner -> workers it holds now
        self._waiting: list[tuple[int, str | None]] = []  # (ticket, owner), in arrival order
        self._served: dict[str | None, int] = {}  # owner -> ticket of its last grant
        self._tickets = 0
        self._fault = ""  # why the last worker start failed ("" once one started)
        self._warm = threading.Thread(target=self._prestart, name="sql-worker-start", daemon=True)
        self._warm.start()

    def _prestart(self) -> None:
        with self._cond:
            if self._live >= self._size:
                return
            self._live += 1
        try:
            worker = self._start()
        except _Lost as lost:  # the first call starts one again, saying why not
            self._fault = str(lost)
            return
        self._fault = ""
        self._give(worker)

    def ready(self, timeout: float = STARTUP_TIMEOUT_S) -> str:
        """Wait for the first worker; "" when it started, else why it did not.

        A server checks this before it answers anything: a worker that cannot start (a
        missing dependency, a broken pack) would otherwise fail every query one by one.
        """
        self._warm.join(timeout)
        if self._warm.is_alive():
            return f"the SQL worker did not start within {timeout:g} s"
        return self._fault

    def _replace(self) -> None:
        """Start a worker for the one just lost, in the background (it takes ~1 s)."""
        threading.Thread(target=self._prestart, name="sql-worker-start", daemon=True).start()

    def _start(self) -> _Worker:
        """A new worker for a slot already counted in ``_live`` (released if it fails)."""
        with self._cond:
            self._starting += 1
        try:
            worker = _Worker(*self._args)
        except BaseException:
            with self._cond:
                self._starting -= 1
                self._live -= 1
                self._cond.notify_all()
            raise
        with self._cond:
            self._starting -= 1
            self._cond.notify_all()  # a caller waiting for this start may now start its own
        return worker

    def load(self) -> tuple[dict[str | None, int], dict[str | None, int]]:
        """(workers each owner holds, requests each owner has waiting); owners at 0 left out."""
        with self._cond:
            return self._load()

    def _load(self) -> tuple[dict[str | None, int], dict[str | None, int]]:
        waiting: dict[str | None, int] = {}
        for _, owner in self._waiting:
            waiting[owner] = waiting.get(owner, 0) + 1
        return {o: n for o, n in self._holding.items() if n}, waiting

    def wait_for(
        self,
        ready: Callable[[dict[str | None, int], dict[str | None, int]], bool],
        timeout: float,
    ) -> bool:
        """Wait until ``ready(*load())`` holds (True), or ``timeout`` passes (False)."""
        with self._cond:
            return self._cond.wait_for(lambda: ready(*self._load()), timeout)

    def _next(self) -> int | None:
        """The ticket of the waiting request whose turn it is (None: all are at their cap)."""
        best: tuple[int, int, int] | None = None
        chosen = None
        for ticket, owner in self._waiting:
            held = self._holding.get(owner, 0)
            if owner is not None and held >= self._cap:
                continue
            key = (held, self._served.get(owner, -1), ticket)
            if best is None or key < best:
                best, chosen = key, ticket
        return chosen

    def _take(self, owner: str | None, wait_s: float) -> _Worker | None:
        end = time.monotonic() + wait_s
        with self._cond:
            self._tickets += 1
            me = (self._tickets, owner)
            self._waiting.append(me)
            self._cond.notify_all()  # the load changed (wait_for)
            try:
                while True:
                    if self._next() == me[0]:
                        if self._idle:
                            self._hold(me)
                            return self._idle.pop()
                        if self._live < self._size and not self._starting:  # else: wait
                            self._live += 1
                            self._hold(me)
                            break
                    left = end - time.monotonic()
                    if left <= 0:
                        return None
                    # Condition.wait(inf) overflows time_t: no deadline is None.
                    self._cond.wait(None if math.isinf(left) else left)
            finally:
                self._waiting.remove(me)
                self._cond.notify_all()  # the next in line may be another request now
        try:
            return self._start()
        except BaseException:
            self._release(owner)
            raise

    def _hold(self, me: tuple[int, str | None]) -> None:
        ticket, owner = me
        self._holding[owner] = self._holding.get(owner, 0) + 1
        self._served[owner] = ticket

    def _release(self, owner: str | None) -> None:
        with self._cond:
            self._holding[owner] -= 1
            if not self._holding[owner]:
                del self._holding[owner]
            self._cond.notify_all()

    def _give(self, worker: _Worker) -> None:
        with self._cond:
            self._idle.append(worker)
            self._cond.notify_all()

    def _drop(self) -> None:
        with self._cond:
            self._live -= 1
            self._cond.notify_all()

    def call(
        self,
        request: tuple[Any, ...],
        budget: Budget,
        *,
        owner: str | None = None,
        wait_s: float = math.inf,
    ) -> Rows | list[str] | Failed:
        """One request's answer: ``Failed("busy", ...)`` when no worker came within ``wait_s``,
        ``Failed("timeout", ...)`` when ``budget`` ran out on the worker. The wait for a
        worker (and its start) is not taken from ``budget``."""
        asked = time.monotonic()
        try:
            worker = self._take(owner, wait_s)
        except _Lost as lost:
            return Failed("unavailable", "", str(lost))
        if worker is None:
            return Failed("busy", "", f"every SQL worker is busy (waited {wait_s:g} s)")
        budget.deadline += time.monotonic() - asked
        try:
            answer = self._ask(worker, request, budget)
        finally:
            self._release(owner)
        return answer

    def _ask(self, worker: _Worker, request: tuple[Any, ...], budget: Budget) -> Any:
        try:
            answer = worker.ask(request, budget.deadline + GRACE_S - time.monotonic())
        except _Lost as lost:
            self._drop()
            self._replace()
            if str(lost) == "timeout":
                return Failed("timeout", "", "killed at its deadline")
            return Failed("memory", "", str(lost))
        if isinstance(answer, Failed) and answer.kind == "memory":
            # Its allocator keeps what it mapped, close to the cap: it exits, a fresh one starts.
            worker.kill()
            self._drop()
            self._replace()
        else:
            self._give(worker)
        return answer


_POOLS: dict[tuple[str, int, int], Pool] = {}
_POOLS_LOCK = threading.Lock()


def pool(
    prepare: Prepare, setup_sql: str, *, size: int, memory_bytes: int, memory_limit: str
) -> Pool:
    """The process's pool for this pack and budget, made (and its first worker started) once.

    ``prepare(db, setup_sql, memory_limit)`` makes a worker's database; it is sent to the
    worker by reference (a module-level function), so this module imports none of its own.
    """
    key = (setup_sql, size, memory_bytes)
    with _POOLS_LOCK:
        got = _POOLS.get(key)
        if got is None:
            got = _POOLS[key] = Pool(
                prepare, setup_sql, size=size, memory_bytes=memory_bytes, memory_limit=memory_limit
            )
        return got


# ---------------------------------------------------------------------------- the worker side


class _Watchdog(threading.Thread):
    """Interrupts the running statement at its deadline (one thread, made before the cap)."""

    def __init__(self) -> None:
        super().__init__(name="sql-watchdog", daemon=True)
        self._cond = threading.Condition()
        self._cursor: Any = None
        self._deadline = 0.0
        self.fired = False

    def arm(self, cursor: Any, timeout_s: float) -> None:
        with self._cond:
            self._cursor, self._deadline, self.fired = cursor, time.monotonic() + timeout_s, False
            self._cond.notify()

    def disarm(self) -> None:
        with self._cond:
            self._cursor = None
            self._cond.notify()

    def run(self) -> None:
        with self._cond:
            while True:
                if self._cursor is None:
                    self._cond.wait()
                    continue
                left = self._deadline - time.monotonic()
                if left > 0:
                    self._cond.wait(left)
                    continue
                self.fired = True
                self._cursor.interrupt()
                self._cursor = None


def _size(value: Any) -> int:
    """About how many characters ``value`` takes rendered as JSON (escapes not counted)."""
    if value is None:
        return 4
    if isinstance(value, str | bytes | bytearray):
        return len(value) + 2
    if isinstance(value, list | tuple):
        return sum(_size(v) + 2 for v in value) + 2
    if isinstance(value, dict):
        return sum(len(str(k)) + _size(v) + 6 for k, v in value.items()) + 2
    return 24


def _variable(duck_type: str) -> bool:
    upper = duck_type.upper()
    return any(v in upper for v in _VARIABLE)


class _TooLarge(Exception):
    pass


def _fetch(
    result: Any, names: list[str], types: list[str], limit: int, bounds: Bounds
) -> tuple[list[tuple[Any, ...]], bool]:
    """At most ``limit`` rows (and whether there were more), refusing an oversize result."""
    variable = [i for i, t in enumerate(types) if _variable(t)]
    per_row = sum(len(n) + 32 for n in names) + 8  # names, fixed-width values, punctuation
    rows: list[tuple[Any, ...]] = []
    total = 0
    while len(rows) <= limit:
        batch = result.fetchmany(min(_BATCH, limit + 1 - len(rows)))
        if not batch:
            break
        for row in batch[: max(0, limit - len(rows))]:
            total += per_row
            for i in variable:
                size = _size(row[i])
                if size > bounds.max_cell_bytes:
                    raise _TooLarge(
                        f"a value of column {names[i]!r} exceeds {bounds.max_cell_bytes} bytes"
                    )
                total += size
            if total > bounds.max_result_bytes:
                raise _TooLarge(f"the result exceeds {bounds.max_result_bytes} bytes")
        rows += batch
    return rows[:limit], len(rows) > limit


def _execute(db: Any, watchdog: _Watchdog, request: tuple[Any, ...]) -> Rows | list[str] | Failed:
    import duckdb

    kind, sql, limit, bounds = request
    cursor = db.cursor()
    watchdog.arm(cursor, bounds.timeout_s)
    start = time.monotonic()
    try:
        if kind == "describe":
            return [str(r[1]) for r in cursor.execute(f"DESCRIBE {sql}").fetchall()]
        result = cursor.execute(sql)
        description = result.description or []
        names = [d[0] for d in description]
        types = [str(d[1]) for d in description]
        rows, truncated = _fetch(result, names, types, limit, bounds)
        return Rows(names, types, rows, truncated, int((time.monotonic() - start) * 1000))
    except _TooLarge as exc:
        return Failed("bound", "", str(exc))
    except duckdb.OutOfMemoryException as exc:
        return Failed("memory", type(exc).__name__, str(exc))
    except duckdb.Error as exc:
        if watchdog.fired or isinstance(exc, duckdb.InterruptException):
            return Failed("timeout", "", "interrupted at its deadline")
        return Failed("error", type(exc).__name__, str(exc))
    except MemoryError:
        return Failed("memory", "", "out of memory while building the rows")
    finally:
        watchdog.disarm()
        cursor.close()


def _serve(inbox: Connection, outbox: Connection) -> None:
    import duckdb

    prepare, setup_sql, memory_bytes, memory_limit = inbox.recv()
    db = duckdb.connect(":memory:")
    prepare(db, setup_sql, memory_limit)
    watchdog = _Watchdog()
    watchdog.start()
    with open("/proc/self/statm", encoding="ascii") as fh:
        mapped = int(fh.read().split()[0]) * resource.getpagesize()
    _, hard = resource.getrlimit(resource.RLIMIT_AS)
    cap = mapped + memory_bytes
    resource.setrlimit(
        resource.RLIMIT_AS, (cap if hard == resource.RLIM_INFINITY else min(cap, hard), hard)
    )
    outbox.send("ready")
    while True:
        try:
            request = inbox.recv()
        except (EOFError, OSError):
            return  # the server closed its end, or is gone
        try:
            answer = _execute(db, watchdog, request)
        except MemoryError:
            answer = Failed("memory", "", "out of memory")
        try:
            outbox.send(answer)
        except MemoryError:
            answer = Failed("memory", "", "out of memory while sending the rows")
            outbox.send(answer)
        if isinstance(answer, Failed) and answer.kind == "memory":
            return  # the server replaces this worker: what its allocator kept stays near the cap


def main(argv: list[str]) -> int:
    """``python -m benchledger.refplatform.toolkits.sqlworker READ_FD WRITE_FD``: serve to EOF."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C stops the server; EOF stops us
    inbox = Connection(int(argv[0]), writable=False)
    outbox = Connection(int(argv[1]), readable=False)
    try:
        _serve(inbox, outbox)
    except Exception as exc:  # reported to the server, which says why the worker failed
        with contextlib.suppress(OSError):
            outbox.send(f"{type(exc).__name__}: {exc}")
        return 1
    return 0


if __name__ == "__main__":
    # Through the package name, so what is pickled names refplatform.toolkits.sqlworker.
    from benchledger.refplatform.toolkits import sqlworker

    sys.exit(sqlworker.main(sys.argv[1:]))
