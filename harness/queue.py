"""The work queue of queued runs: procrastinate, in the PostgreSQL ledger's database.

This module is the one place benchledger speaks to procrastinate (an asyncio PostgreSQL
task queue: claiming, retries with back-off, worker heartbeats, cancellation). Its errors
are translated here into ``QueueError`` (the project's error root, exit 2 with one line).

The queue lives in a schema of its own beside the ledger's: ``<ledger schema>_queue``
(``benchledger_queue`` for a ledger in ``public``). One job per planned unit, on the
queue ``QUEUE``, task ``TASK``; a job's arguments name the run and the unit only
(``{"run": RUN, "unit": "PROTOCOL/ATTEMPT"}``), never a key: keys come from each
worker's environment. ``job_lock`` is never set: promotions into one entity are
serialised by ``entity_lock`` (an advisory lock held only around the promotion), so
every other stage of every unit spreads over every worker.

A job a worker may not run (its run needs a command or a server the worker's operator did
not name: ``harness.needs``) is ``Declined``: it goes back to the queue, waiting, for a
worker that may; a job no worker can run (no such run, no such unit) is ``Unrunnable``:
it fails. Either way the worker notes why (``benchledger queue`` shows it) and goes on.
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import socket
import sys
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final

import psycopg
from psycopg.conninfo import make_conninfo

from benchledger.harness.errors import HarnessError
from benchledger.ledger.postgres import postgres_params, redact_url

QUEUE: Final = "benchledger"
TASK: Final = "benchledger.unit"
PENDING: Final = ("todo", "doing")
# Our own small table in the queue schema: which host and process a procrastinate
# worker id is, so `benchledger queue` names the machine working each job.
_WORKERS: Final = "benchledger_workers"
# And why a job waits or failed, as the worker that last met it said.
_NOTES: Final = "benchledger_notes"
# A declined job waits this long times its tries (at most DECLINED_MAX_S) before a worker
# meets it again: the one that declined it must not spin on it.
DECLINED_S: Final = 5
DECLINED_MAX_S: Final = 60
_COUNTED: Final = frozenset({"workers", "todo", "doing", "succeeded"})


class QueueError(HarnessError):
    """The queue cannot be used as asked (no PostgreSQL ledger, unreachable, refused):
    one line, exit 2."""

    exit_code: ClassVar[int] = 2


class InfraRetry(Exception):
    """Raised by a job whose unit ended in an infrastructure error and may be retried:
    procrastinate puts it back with back-off (``RETRY``)."""


class Declined(Exception):
    """Raised by a job this worker may not run (its message says why): it goes back to
    the queue, waiting for a worker that may."""


class Unrunnable(Exception):
    """Raised by a job no worker can run (no such run or unit): it fails, with its reason."""


def _retry(wait: int) -> Any:
    """When a job goes back to the queue: an infra-failed unit after ``wait`` + 2^(try+1)
    s; a declined one after ``DECLINED_S`` × its tries (at most ``DECLINED_MAX_S``)."""
    from procrastinate import BaseRetryStrategy, RetryDecision

    class Retry(BaseRetryStrategy):
        def get_retry_decision(self, *, exception: BaseException, job: Any) -> Any:
            if isinstance(exception, Declined):
                seconds = min(DECLINED_MAX_S, DECLINED_S * (job.attempts + 1))
            elif isinstance(exception, InfraRetry):
                seconds = wait + 2 ** (job.attempts + 1)
            else:
                return None
            return RetryDecision(retry_in={"seconds": seconds})

    return Retry()


@dataclass(frozen=True)
class Job:
    """One row of ``benchledger queue``: a job, its state and the worker on it."""

    id: int
    run: str
    unit: str
    status: str
    attempts: int
    worker: str  # host:pid of the worker holding it ("" when none does)
    scheduled_at: dt.datetime | None
    why: str = ""  # why it waits or failed, as the last worker that met it said


def queue_schema(ledger_url: str) -> str:
    """The schema the queue of the ledger at ``ledger_url`` lives in."""
    schema = postgres_params(ledger_url)["schema"]
    return "benchledger_queue" if schema == "public" else f"{schema}_queue"


def _conninfo(ledger_url: str) -> str:
    params = postgres_params(ledger_url)
    schema = queue_schema(ledger_url)
    params.pop("schema")
    if not params.get("password"):
        params.pop("password", None)
    return make_conninfo(**params, connect_timeout=5, options=f"-c search_path={schema}")


def worker_name() -> str:
    """This process as the queue names it: ``host:pid``."""
    return f"{socket.gethostname()}:{os.getpid()}"


def entity_key(run_id: str, entity: str) -> int:
    """The advisory-lock key of promotions into ``entity`` (one per entity, any run: two
    runs on one shared platform must not race on it either)."""
    return zlib.crc32(f"benchledger:entity:{entity}".encode()) - 2**31


@dataclass(frozen=True)
class RunQueue:
    """A queued run's jobs by state, and the workers (``host:pid``) running its units."""

    queued: int
    running: int
    done: int
    other: int  # failed, cancelled or aborted
    workers: tuple[str, ...]

    def line(self) -> str:
        on = f" on {', '.join(self.workers)}" if self.workers else ""
        tail = f", {self.other} failed or cancelled" if self.other else ""
        return f"{self.queued} queued, {self.running} running{on}, {self.done} done{tail}"


def queue_states(ledger_url: str, run_id: str | None = None) -> dict[str, RunQueue]:
    """Per queued run (or only ``run_id``), its jobs' states and workers; {} when the
    ledger's database has no queue. Plain SQL, no procrastinate: for ``runs`` and
    ``report --watch``."""
    try:
        with psycopg.connect(_conninfo(ledger_url), autocommit=True) as conn:
            row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
            if not (row and row[0]):
                return {}
            rows = conn.execute(
                f"SELECT j.args->>'run', j.status::text, count(*), "
                f"string_agg(DISTINCT w.name, ', ') FROM procrastinate_jobs j "
                f"LEFT JOIN {_WORKERS} w ON w.worker_id = j.worker_id AND j.status = 'doing' "
                "WHERE j.task_name = %s AND (%s::text IS NULL OR j.args->>'run' = %s) "
                "GROUP BY 1, 2",
                (TASK, run_id, run_id),
            ).fetchall()
    except psycopg.Error as exc:
        raise QueueError(f"{redact_url(ledger_url)}: the run queue: {exc}") from None
    by_run: dict[str, dict[str, Any]] = {}
    for run, status, n, names in rows:
        entry = by_run.setdefault(str(run), {"workers": set()})
        entry[str(status)] = int(n)
        if names:
            entry["workers"].update(str(names).split(", "))
    return {
        run: RunQueue(
            queued=e.get("todo", 0),
            running=e.get("doing", 0),
            done=e.get("succeeded", 0),
            other=sum(v for k, v in e.items() if k not in _COUNTED),
            workers=tuple(sorted(e["workers"])),
        )
        for run, e in by_run.items()
    }


class Queue:
    """A queued-run work queue in the database of the ledger at ``ledger_url``.

    ``async with Queue(url) as q`` opens it (creating its schema on first use, or, with
    ``create=False``, refusing when there is none).
    """

    def __init__(self, ledger_url: str, *, create: bool = True) -> None:
        self.url = ledger_url
        self.shown = redact_url(ledger_url)
        self.schema = queue_schema(ledger_url)
        self.create = create
        self._conninfo = _conninfo(ledger_url)
        self.app: Any = None
        self._worker: Any = None

    # -- opening -------------------------------------------------------------------------

    def _problem(self, exc: BaseException) -> QueueError:
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return QueueError(f"{self.shown}: the run queue: {text}")

    def exists(self) -> bool:
        """Whether the queue's tables exist (QueueError if the database cannot be reached)."""
        try:
            with psycopg.connect(self._conninfo, autocommit=True) as conn:
                row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
        except psycopg.Error as exc:
            raise self._problem(exc) from None
        return bool(row and row[0])

    def _ensure(self) -> None:
        """Create the queue's schema and procrastinate's tables, once (processes starting
        together take turns under an advisory lock)."""
        from procrastinate.schema import SchemaManager

        try:
            with psycopg.connect(self._conninfo, autocommit=True) as conn:
                conn.execute("SELECT pg_advisory_lock(hashtext(%s))", (f"bl:{self.schema}",))
                conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{self.schema}"')
                row = conn.execute("SELECT to_regclass('procrastinate_jobs')").fetchone()
                if not (row and row[0]):
                    with conn.transaction():
                        conn.execute(SchemaManager.get_schema().encode())
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {_WORKERS} "
                    "(worker_id bigint PRIMARY KEY, name text NOT NULL)"
                )
                conn.execute(
                    f"CREATE TABLE IF NOT EXISTS {_NOTES} "
                    "(job_id bigint PRIMARY KEY, name text NOT NULL, why text NOT NULL)"
                )
        except psycopg.Error as exc:
            raise self._problem(exc) from None

    async def __aenter__(self) -> Queue:
        import procrastinate

        if self.create:
            await asyncio.to_thread(self._ensure)
        elif not await asyncio.to_thread(self.exists):
            raise QueueError(f"{self.shown}: no run was ever queued in this ledger")
        connector = procrastinate.PsycopgConnector(conninfo=self._conninfo, min_size=1, max_size=8)
        self.app = procrastinate.App(connector=connector)
        try:
            await self.app.open_async()
        except Exception as exc:  # psycopg's pool errors of every flavour
            raise self._problem(exc) from None
        return self

    async def __aexit__(self, *exc: object) -> None:
        with contextlib.suppress(Exception):
            await self.app.close_async()

    # -- queueing and reading --------------------------------------------------------------

    async def enqueue(self, run_id: str, units: list[str]) -> int:
        """One job per unit (``PROTOCOL/ATTEMPT``) of ``run_id``; how many were queued. A
        unit already waiting is not queued twice (procrastinate's queueing lock)."""
        import procrastinate.exceptions as pex

        jobs = []
        for unit in units:
            jobs.append({"run": run_id, "unit": unit})
        try:
            for args in jobs:
                deferrer = self.app.configure_task(
                    TASK, queue=QUEUE, queueing_lock=f"{run_id}/{args['unit']}"
                )
                with contextlib.suppress(pex.AlreadyEnqueued):
                    await deferrer.defer_async(**args)
        except psycopg.Error as exc:
            raise self._problem(exc) from None
        return len(jobs)

    async def _rows(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        try:
            async with self.app.connector.pool.connection() as conn, conn.cursor() as cur:
                await cur.execute(sql, params)
                return list(await cur.fetchall()) if cur.description else []
        except psycopg.Error as exc:
            raise self._problem(exc) from None

    async def jobs(self, run_id: str | None = None) -> list[Job]:
        """Every job (of ``run_id``), oldest first, with the worker holding it and why it
        waits or failed (a queue made by an older benchledger has no notes)."""
        noted = await self._rows(f"SELECT to_regclass('{_NOTES}') IS NOT NULL")
        why = f"coalesce((SELECT n.why FROM {_NOTES} n WHERE n.job_id = j.id), '')"
        rows = await self._rows(
            f"SELECT j.id, coalesce(j.args->>'run', ''), coalesce(j.args->>'unit', ''), "
            f"j.status::text, j.attempts, "
            f"coalesce(w.name, ''), j.scheduled_at, {why if noted[0][0] else repr('')} "
            f"FROM procrastinate_jobs j LEFT JOIN {_WORKERS} w ON w.worker_id = j.worker_id "
            "WHERE j.task_name = %s AND (%s::text IS NULL OR j.args->>'run' = %s) "
            "ORDER BY j.id",
            (TASK, run_id, run_id),
        )
        return [Job(*row) for row in rows]

    async def note(self, job_id: int, why: str) -> None:
        """Record why job ``job_id`` waits or failed (``benchledger queue`` shows it)."""
        await self._rows(
            f"INSERT INTO {_NOTES} (job_id, name, why) VALUES (%s, %s, %s) "
            "ON CONFLICT (job_id) DO UPDATE SET name = excluded.name, why = excluded.why",
            (job_id, worker_name(), why),
        )

    async def counts(self, run_id: str) -> dict[str, int]:
        """How many of ``run_id``'s jobs are in each state."""
        rows = await self._rows(
            "SELECT status::text, count(*) FROM procrastinate_jobs "
            "WHERE task_name = %s AND args->>'run' = %s GROUP BY status",
            (TASK, run_id),
        )
        return {str(s): int(n) for s, n in rows}

    async def pending_runs(self) -> list[str]:
        """Runs with jobs waiting or being worked, oldest first."""
        rows = await self._rows(
            "SELECT args->>'run' FROM procrastinate_jobs WHERE task_name = %s AND "
            "status IN ('todo', 'doing') GROUP BY args->>'run' ORDER BY min(id)",
            (TASK,),
        )
        return [str(r[0]) for r in rows]

    async def waiting(self, run_id: str) -> bool:
        """Whether any job of ``run_id`` is still waiting to be claimed."""
        rows = await self._rows(
            "SELECT 1 FROM procrastinate_jobs WHERE task_name = %s AND args->>'run' = %s "
            "AND status = 'todo' LIMIT 1",
            (TASK, run_id),
        )
        return bool(rows)

    async def cancel(self, run_id: str) -> tuple[int, int]:
        """Cancel ``run_id``'s waiting jobs and ask the workers on its running ones to stop
        them; (cancelled, aborting)."""
        cancelled = aborting = 0
        try:
            for job in await self.jobs(run_id):
                if job.status == "todo":
                    ok = await self.app.job_manager.cancel_job_by_id_async(job.id)
                    cancelled += bool(ok)
                elif job.status == "doing":
                    ok = await self.app.job_manager.cancel_job_by_id_async(job.id, abort=True)
                    aborting += bool(ok)
        except psycopg.Error as exc:
            raise self._problem(exc) from None
        return cancelled, aborting

    # -- working -------------------------------------------------------------------------

    async def recover_stalled(self, stalled_after: float) -> list[int]:
        """Put back the running jobs of workers silent for ``stalled_after`` seconds (killed,
        or their machine gone): another worker runs their units again; their ids."""
        try:
            stalled = await self.app.job_manager.get_stalled_jobs(
                queue=QUEUE, task_name=TASK, seconds_since_heartbeat=stalled_after
            )
            for job in stalled:
                await self.app.job_manager.retry_job(job)
        except psycopg.Error as exc:
            raise self._problem(exc) from None
        return [int(job.id) for job in stalled]

    async def name_worker(self, worker_id: int | None) -> None:
        """Record which host and process a worker id is (for ``benchledger queue``)."""
        if worker_id is None:
            return
        await self._rows(
            f"INSERT INTO {_WORKERS} (worker_id, name) VALUES (%s, %s) "
            "ON CONFLICT (worker_id) DO UPDATE SET name = excluded.name",
            (worker_id, worker_name()),
        )

    async def work(
        self,
        handler: Callable[[str, str, Any], Awaitable[None]],
        *,
        concurrency: int,
        wait: bool,
        heartbeat: float,
        stalled_after: float,
        retry_wait: int,
    ) -> None:
        """Run a procrastinate worker on the queue: ``handler(run, unit, job)`` per job,
        ``concurrency`` at once; without ``wait``, return once no job can be claimed.
        ``InfraRetry`` from a handler puts its job back after ``retry_wait`` + 2^n s,
        ``Declined`` after a few seconds (``_retry``); ``Unrunnable`` fails it. Each of
        these, and any other failure of a job, is noted as the job's reason; procrastinate's
        own log (its tracebacks) is silenced: what matters is said in one line by the
        handler, the note, or ``QueueError``."""
        import procrastinate.exceptions as pex

        logging.getLogger("procrastinate").setLevel(logging.CRITICAL + 1)
        asyncio.get_running_loop().set_exception_handler(_loose_failure)
        named: set[int | None] = set()

        @self.app.task(name=TASK, queue=QUEUE, pass_context=True, retry=_retry(retry_wait))
        async def unit_job(context: Any, run: Any = None, unit: Any = None, **_: Any) -> None:
            job = context.job
            if job.worker_id not in named:
                named.add(job.worker_id)
                await self.name_worker(job.worker_id)
            try:
                if not isinstance(run, str) or not isinstance(unit, str):
                    raise Unrunnable('a job names {"run": RUN, "unit": "PROTOCOL/ATTEMPT"}')
                await handler(run, unit, job)
            except (Declined, Unrunnable, InfraRetry) as exc:
                await self.note(int(job.id), str(exc))
                raise
            except Exception as exc:  # one line for the job, never a traceback
                text = str(exc).strip().splitlines()
                await self.note(int(job.id), f"{type(exc).__name__}: {text[0] if text else ''}")
                raise

        from procrastinate.worker import Worker

        # Always procrastinate's waiting worker: one told not to wait stops its heartbeat as
        # soon as it finds no job to claim, while its units still run, and other workers
        # would take it for dead. Without ``wait`` this stops it once it runs nothing and
        # no job can be claimed.
        self._worker = Worker(
            app=self.app,
            queues=[QUEUE],
            concurrency=concurrency,
            wait=True,
            name=worker_name(),
            install_signal_handlers=False,
            update_heartbeat_interval=heartbeat,
            stalled_worker_timeout=stalled_after,
            fetch_job_polling_interval=min(1.0, heartbeat),
            abort_job_polling_interval=min(1.0, heartbeat),
        )

        async def stop_when_idle() -> None:
            while True:
                await asyncio.sleep(min(0.25, heartbeat))
                worker = self._worker
                if worker is not None and not await self._busy(worker.worker_id):
                    self.stop()
                    return

        idle = None if wait else asyncio.ensure_future(stop_when_idle())
        try:
            await self._worker.run()
        except (psycopg.Error, pex.ProcrastinateException) as exc:
            raise self._problem(exc) from None
        finally:
            if idle is not None:
                idle.cancel()
                await asyncio.gather(idle, return_exceptions=True)
            self._worker = None
            self.app.tasks.pop(TASK, None)

    async def _busy(self, worker_id: int | None) -> bool:
        """Whether procrastinate worker ``worker_id`` runs a job, or one waits that it could
        claim now (not one scheduled for later)."""
        rows = await self._rows(
            "SELECT 1 FROM procrastinate_jobs WHERE queue_name = %s AND ((status = 'todo' "
            "AND (scheduled_at IS NULL OR scheduled_at <= now())) OR (status = 'doing' AND "
            "(worker_id = %s OR %s::bigint IS NULL))) LIMIT 1",
            (QUEUE, worker_id, worker_id),
        )
        return bool(rows)

    def stop(self) -> None:
        """Stop taking jobs; the running ones finish (``work`` then returns)."""
        if self._worker is not None:
            self._worker.stop()


def _loose_failure(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
    """A failure no task awaited (procrastinate's job task, when the job's end cannot be
    recorded: a worker that went silent, whose job another worker took and finished), in
    one line instead of asyncio's traceback."""
    exc = context.get("exception")
    cause = exc.__cause__ if exc is not None and exc.__cause__ is not None else exc
    text = str(cause).strip().splitlines() if cause is not None else []
    said = text[0] if text else context.get("message", "")
    print(f"benchledger worker: {type(cause).__name__ if cause else 'error'}: {said}",
          file=sys.stderr, flush=True)  # fmt: skip


@contextlib.asynccontextmanager
async def entity_lock(ledger_url: str, key: int) -> AsyncIterator[None]:
    """Hold PostgreSQL advisory lock ``key`` (``entity_key``) on a connection of its own
    for the body's duration: promotions into one entity, one at a time across workers."""
    params = postgres_params(ledger_url)
    params.pop("schema")
    if not params.get("password"):
        params.pop("password", None)
    conn = await psycopg.AsyncConnection.connect(make_conninfo(**params, connect_timeout=5),
                                                 autocommit=True)  # fmt: skip
    try:
        await conn.execute("SELECT pg_advisory_lock(%s)", (key,))
        yield
    finally:
        with contextlib.suppress(Exception):
            await conn.execute("SELECT pg_advisory_unlock(%s)", (key,))
        await conn.close()
