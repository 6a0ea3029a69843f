"""PostgreSQL connection killed: ``pg_terminate_backend`` on the run's connections mid-run."""

from __future__ import annotations

import contextlib
import os
import uuid

from benchledger.benchmarks.reliability.scenario import (
    Config,
    Row,
    cli,
    stop_and_resume,
    suite_options,
)


def postgres_killed(cfg: Config) -> Row:
    """``pg_terminate_backend`` on the run's connections mid-run."""
    if not cfg.postgres:
        why = "no PostgreSQL named (set BENCHLEDGER_TEST_POSTGRES or --postgres)"
        return Row("postgres killed", "pg_terminate_backend mid-run", why, None)
    import psycopg

    work = os.path.join(cfg.workdir, "postgres")
    os.makedirs(work, exist_ok=True)
    suite_args, label = suite_options(cfg, work, 6)
    token = uuid.uuid4().hex[:10]
    schema, app = f"selftest_{token}", f"benchledger-selftest-{token}"
    sep = "&" if "?" in cfg.postgres else "?"
    location = f"{cfg.postgres}{sep}schema={schema}"
    base = cfg.postgres.split("?")[0]
    killed = 0
    try:
        proc = cli(
            cfg, ["run", "--run-id", "pg", "--ledger", location, *suite_args], work, PGAPPNAME=app
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
        problems, how = stop_and_resume(
            cfg, "postgres killed", work, location, "pg", proc, "PostgreSQL", lambda: None
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
