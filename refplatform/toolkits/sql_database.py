"""The pack's tables in an embedded DuckDB: loaded, configured and locked once per process.

``loaded`` loads a seed pack's ``trino/setup.sql`` into an in-memory DuckDB whose default
catalog is named ``memory`` (so ``memory.bench.orders`` resolves as on the peer's Trino),
then locks it down (docs/refplatform.md): no external access, a locked configuration (with Trino's
integer division and time zone). That database only parses, renders and samples;
``prepare_worker`` makes each SQL worker's own copy (``sqlworker.py``), the only place the
agent's SQL is evaluated and the only one with the rewriter's Python functions registered
(registering one imports numpy).
"""

from __future__ import annotations

import contextlib
import threading
from typing import TYPE_CHECKING, Final, NamedTuple

import duckdb

from benchledger.refplatform.errors import PackError
from benchledger.refplatform.toolkits.sql_rewrite import decimal_divide, decimal_round
from benchledger.refplatform.toolkits.sql_trino import (
    CATALOG,
    MEMORY_LIMIT,
    ZONE,
    Column,
    first_line,
    trino_type,
)

if TYPE_CHECKING:
    # Not at run time: each SQL worker process imports this module (its ``prepare_worker``)
    # and needs none of what the pack loader imports (the protocols and the ledger).
    from benchledger.refplatform.packs import Pack


_HIDDEN_SCHEMAS: Final = frozenset({"main", "pg_catalog"})


class _Loaded(NamedTuple):
    """A pack's tables, loaded and locked once per process, and what the engine reads of them."""

    db: duckdb.DuckDBPyConnection
    tables: dict[tuple[str, str], tuple[Column, ...]]
    has_decimals: bool


# Setup SQL -> its loaded database. Loading the default pack's INSERTs costs ~0.3 s of CPU,
# and a run starts a platform for its preflight, then one per pass (or per unit). Sharing
# is exact: once loaded the database cannot change (the configuration is locked; the
# engine runs only reads, refuses temporary objects, and each engine has its own cursor).
_LOADED: dict[str, _Loaded] = {}
_LOADING = threading.Lock()


def loaded(pack: Pack) -> _Loaded:
    """The pack's locked, read-only database, loaded on first use; ``PackError`` if unusable."""
    with _LOADING:
        got = _LOADED.get(pack.setup_sql)
        if got is None:
            db = duckdb.connect(":memory:")  # an in-memory database's catalog is "memory"
            try:
                _configure(db)
                _load(db, pack)
                # No UDFs here: this database only parses, renders and samples; the queries
                # that call them run in the workers (registering one imports numpy, ~0.3 s).
                db.execute("SET lock_configuration = true")
                tables = _inventory(db)
            except BaseException:
                db.close()
                raise
            decimals = any(c.type.startswith("decimal") for cols in tables.values() for c in cols)
            got = _LOADED[pack.setup_sql] = _Loaded(db, tables, decimals)
        return got


def preload(pack: Pack) -> None:
    """Start loading ``pack``'s tables in a background thread, for an engine made soon after
    (DuckDB runs the load without the GIL, so the caller's own start-up goes on meanwhile).
    A failure is left to that engine, which loads again and raises it."""

    def load() -> None:
        with contextlib.suppress(Exception):
            loaded(pack)

    threading.Thread(target=load, name="sql-preload", daemon=True).start()


def _configure(db: duckdb.DuckDBPyConnection) -> None:
    # External access goes off before the pack's SQL runs, so it cannot read or write files.
    for statement in (
        # No spilling: past memory_limit a query fails, and nothing is written to disk (an
        # in-memory database would spill into ./.tmp of whatever folder the user is in).
        # First: once external access is off, the folder can no longer be changed.
        "SET temp_directory = ''",
        "SET enable_external_access = false",
        "SET autoinstall_known_extensions = false",
        "SET autoload_known_extensions = false",
        f"SET memory_limit = '{MEMORY_LIMIT}'",
        "SET GLOBAL integer_division = true",  # Trino's integer / integer truncates
        f"SET GLOBAL TimeZone = '{ZONE.key}'",
    ):
        db.execute(statement)


def _load(db: duckdb.DuckDBPyConnection, pack: Pack) -> None:
    try:
        db.execute(pack.setup_sql)  # one call: the fast path
    except duckdb.Error as exc:
        raise _setup_error(pack, exc) from None
    db.execute(f'CREATE SCHEMA IF NOT EXISTS {CATALOG}."default"')


def _register_functions(db: duckdb.DuckDBPyConnection) -> None:
    varchar, integer = duckdb.sqltype("VARCHAR"), duckdb.sqltype("INTEGER")
    db.create_function("__bl_decimal_divide", decimal_divide, [varchar, varchar, integer], varchar)
    db.create_function("__bl_decimal_round", decimal_round, [varchar, integer], varchar)
    db.create_function("__bl_trino_type", trino_type, [varchar], varchar)


def prepare_worker(db: duckdb.DuckDBPyConnection, setup_sql: str, memory_limit: str) -> None:
    """A SQL worker's database: the pack's tables configured and locked as here, smaller."""
    _configure(db)
    db.execute(setup_sql)  # it loaded here first, so it loads
    db.execute(f'CREATE SCHEMA IF NOT EXISTS {CATALOG}."default"')
    _register_functions(db)
    db.execute(f"SET memory_limit = '{memory_limit}'")
    db.execute("SET lock_configuration = true")


def _inventory(db: duckdb.DuckDBPyConnection) -> dict[tuple[str, str], tuple[Column, ...]]:
    rows = db.execute(
        "SELECT schema_name, table_name, column_name, data_type FROM duckdb_columns() "
        "WHERE database_name = ? ORDER BY schema_name, table_name, column_index",
        [CATALOG],
    ).fetchall()
    tables: dict[tuple[str, str], list[Column]] = {}
    for schema, table, column, duck_type in rows:
        if schema not in _HIDDEN_SCHEMAS:
            tables.setdefault((schema.lower(), table.lower()), []).append(
                Column(column, trino_type(duck_type))
            )
    return {k: tuple(v) for k, v in tables.items()}


def _setup_error(pack: Pack, exc: duckdb.Error) -> PackError:
    """Which statement of the pack's setup SQL fails, replayed one by one on a scratch database."""
    from benchledger.refplatform.packs import SETUP_SQL

    scratch = duckdb.connect(":memory:")
    scratch.execute("SET enable_external_access = false")
    try:
        for statement in pack.setup_statements:
            try:
                scratch.execute(statement.sql)
            except duckdb.Error as err:
                return PackError(SETUP_SQL, statement.line, first_line(err))
    finally:
        scratch.close()
    return PackError(SETUP_SQL, None, first_line(exc))
