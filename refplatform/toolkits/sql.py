"""The peer's SQL tools (``trino_query``, ``trino_describe_table``, ``trino_browse``) on DuckDB.

``SqlEngine`` loads a seed pack's ``trino/setup.sql`` into an embedded, in-memory DuckDB
whose default catalog is named ``memory`` (so ``memory.bench.orders`` resolves as on the
peer's Trino), then locks it down (DESIGN §8): no external access, a locked
configuration, only reads, each query bounded in time, rows, memory and result size
(the agent's SQL is evaluated in worker processes, ``sqlworker.py``; docs/refplatform.md,
"Bounds"). Answers have the peer's shapes (mcp-trino's ``QueryOutput``,
``DescribeTableOutput``, ``BrowseOutput``) and its rendering: timestamps in RFC 3339 at
the America/Los_Angeles offset (without fractions), DATE values as midnight timestamps,
decimals as text at their Trino scale, Trino's ``_colN`` names for unnamed columns,
Trino's type names. Failures raise ``ToolError`` with
the peer's messages; SQL errors take Trino's form
(``Query failed: query failed: trino: query failed (200 OK): "USER_ERROR: line L:C: ..."``).

Where DuckDB accepts what Trino refuses, the engine refuses as Trino does: a table named
without its catalog (the peer's Trino client sets no session catalog), ``label.*`` inside
a function call, a table function, a trailing semicolon. Where the two compute
differently, the query is rewritten to Trino's semantics: integer division truncates,
decimal division and ``avg``/``round`` of decimals keep Trino's decimal scale (rounded
half up), ``typeof`` names Trino's types. docs/refplatform.md lists what still differs.

``query_text``, ``describe_text`` and ``browse_text`` render a result as the tool's text
content, byte for byte as the peer's Go code does (``json.MarshalIndent``, sorted row keys,
Go's float and HTML escaping rules).
"""

from __future__ import annotations

import contextlib
import copy
import datetime as dt
import decimal
import fractions
import json
import math
import re
import threading
import time
import unicodedata
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Final, NamedTuple
from zoneinfo import ZoneInfo

import duckdb

from refplatform.errors import PackError, ToolError
from refplatform.toolkits import sqlworker

if TYPE_CHECKING:
    # Not at run time: each SQL worker process imports this module (its ``_prepare_worker``)
    # and needs none of what the pack loader imports (the protocols and the ledger).
    from refplatform.packs import Pack

CATALOG: Final = "memory"
CATALOGS: Final = ("memory", "system")
DEFAULT_LIMIT: Final = 1000  # the S5 arm's default_limit
MAX_LIMIT: Final = 10000  # the S5 arm's max_limit
DEFAULT_TIMEOUT_S: Final = 30.0
MAX_TIMEOUT_S: Final = 300.0  # mcp-trino's cap on timeout_seconds
# What one statement may use, wherever it runs (sqlworker.py): its worker process may map
# this much beyond what it needed to start; DuckDB's own pool is kept below it, so a big
# sort or hash table fails with DuckDB's error first.
QUERY_MEMORY_BYTES: Final = 512 << 20
MEMORY_LIMIT: Final = "512MB"  # as Trino's INSUFFICIENT_RESOURCES message names it
_DUCKDB_MEMORY_LIMIT: Final = "384MB"
MAX_RESULT_BYTES: Final = 4 << 20  # a result's rendered text
MAX_CELL_BYTES: Final = 1 << 20  # one value of a result
SQL_WORKERS: Final = 2  # worker processes per pack (one per core here)
# The statement itself: Trino's query.max-length check, lower (DuckDB's syntax tree of a
# statement is ~70 times its text, all of it held here while it is checked), and a depth.
MAX_SQL_CHARS: Final = 50_000
MAX_NESTING: Final = 256
ZONE: Final = ZoneInfo("America/Los_Angeles")  # the live platform's local zone
FORMATS: Final = ("json", "csv", "markdown")

READ_ONLY: Final = (
    "trino_query is read-only — write operations (INSERT, UPDATE, DELETE, CREATE, DROP, "
    "etc.) are not allowed. Use trino_execute for write operations."
)
_WRITE_KEYWORDS: Final = (
    "INSERT", "UPDATE", "DELETE", "DROP", "CREATE", "ALTER",
    "TRUNCATE", "GRANT", "REVOKE", "MERGE", "CALL", "EXECUTE",
)  # fmt: skip
# Every pattern that sees the agent's SQL is matched at one position and has no two
# quantifiers that can split the same run of characters (possessive where they meet), so
# its work is linear in the SQL's length: a leading run of spaces once cost O(n^3) here.
_SPACES = re.compile(r"\s*+")
_WRITE = re.compile("(?:" + "|".join(_WRITE_KEYWORDS) + r")(?:\s|\Z|;|\()", re.I)
_FIRST_WORD = re.compile(r"[(\s]*+([A-Za-z]+)")
_EXPLAIN = re.compile(r"explain(\s++analyze)?(\s++verbose)?(\s*+\([^)]*+\))?\s+", re.I)
_READS: Final = frozenset({"select", "with", "values", "table"})

# Trino's memory catalog always has these schemas; the peer's system catalog has these.
_MEMORY_SCHEMAS: Final = ("default", "information_schema")
_SYSTEM_SCHEMAS: Final = ("information_schema", "jdbc", "metadata", "runtime")
_HIDDEN_SCHEMAS: Final = frozenset({"main", "pg_catalog"})


class Column(NamedTuple):
    """A table column: its name and its Trino type name (``integer``, ``timestamp(3)``, ...)."""

    name: str
    type: str


class _Result(NamedTuple):
    names: list[str]
    types: list[str]  # Trino type names
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_ms: int


# ---------------------------------------------------------------------------- the engine


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


def _loaded(pack: Pack) -> _Loaded:
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
            _loaded(pack)

    threading.Thread(target=load, name="sql-preload", daemon=True).start()


def _configure(db: duckdb.DuckDBPyConnection) -> None:
    # External access goes first, so even the pack's own SQL cannot read or write files.
    for statement in (
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
    db.create_function("__bl_decimal_divide", _decimal_divide, [varchar, varchar, integer], varchar)
    db.create_function("__bl_decimal_round", _decimal_round, [varchar, integer], varchar)
    db.create_function("__bl_trino_type", trino_type, [varchar], varchar)


def _prepare_worker(db: duckdb.DuckDBPyConnection, setup_sql: str, memory_limit: str) -> None:
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


class SqlEngine:
    """The pack's tables in a locked, read-only DuckDB, answering as the peer's Trino tools.

    Thread-safe: each call runs on its own cursor, so MCP worker threads may call at once.
    Engines over the same setup SQL share one loaded database (see ``_loaded``).
    """

    def __init__(
        self,
        pack: Pack,
        *,
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_rows: int = MAX_LIMIT,
        default_rows: int = DEFAULT_LIMIT,
        max_result_bytes: int = MAX_RESULT_BYTES,
        max_cell_bytes: int = MAX_CELL_BYTES,
        query_memory_bytes: int = QUERY_MEMORY_BYTES,
        workers: int = SQL_WORKERS,
    ) -> None:
        self.pack = pack
        self.timeout_s = timeout_s
        self.max_rows = max_rows
        self.default_rows = min(default_rows, max_rows)
        self.max_result_bytes = max_result_bytes
        self.max_cell_bytes = max_cell_bytes
        self._lock = threading.Lock()
        loaded = _loaded(pack)
        self._db = loaded.db.cursor()  # this engine's own connection to the shared database
        self._tables = loaded.tables
        self._has_decimals = loaded.has_decimals
        # The agent's SQL is evaluated only there: this process parses and renders.
        self._workers = sqlworker.pool(
            _prepare_worker,
            pack.setup_sql,
            size=workers,
            memory_bytes=query_memory_bytes,
            memory_limit=_DUCKDB_MEMORY_LIMIT,
        )

    def close(self) -> None:
        """Release this engine's connection (the loaded tables stay for the next engine)."""
        self._db.close()

    def _cursor(self) -> duckdb.DuckDBPyConnection:
        with self._lock:
            return self._db.cursor()

    # -- what the catalog holds

    def schemas(self, catalog: str = CATALOG) -> list[str]:
        """The schemas of ``catalog`` as Trino lists them (sorted)."""
        if catalog.lower() == "system":
            return list(_SYSTEM_SCHEMAS)
        names = {s for s, _ in self._tables} | set(_MEMORY_SCHEMAS)
        return sorted(names)

    def tables(self, schema: str) -> list[str]:
        """The tables of ``memory.<schema>``, sorted."""
        return sorted(t for s, t in self._tables if s == schema.lower())

    def columns(self, schema: str, table: str) -> tuple[Column, ...] | None:
        """The columns of ``memory.<schema>.<table>``, or None if there is no such table."""
        return self._tables.get((schema.lower(), table.lower()))

    # -- trino_query

    def query(
        self,
        sql: str,
        limit: int | None = None,
        *,
        timeout_s: float | None = None,
        unwrap_json: bool = False,
    ) -> dict[str, Any]:
        """Run one read-only statement; the peer's ``QueryOutput`` dict, or ``ToolError``."""
        if sql == "":
            raise ToolError("sql parameter is required")
        if len(sql) > MAX_SQL_CHARS:
            raise _query_failed(
                f"USER_ERROR: Query text length ({len(sql)}) exceeds the maximum length "
                f"({MAX_SQL_CHARS})"
            )
        if _WRITE.match(sql, _statement_start(sql)):
            raise ToolError(READ_ONLY)
        rows_limit = self._limit(limit)
        timeout = self._timeout(timeout_s)
        word = _first_word(sql)
        try:
            if word in ("show", "describe", "desc"):
                result = self._show(sql, rows_limit)
            elif word == "explain":
                result = self._explain(sql, rows_limit, timeout)
            elif word in _READS:
                result = self._select(sql, rows_limit, timeout)
            else:
                raise ToolError(READ_ONLY)
        except RecursionError:  # a syntax tree deeper than Python walks: refused, not a crash
            raise _user_error(sql, None, "the statement is nested too deeply") from None
        out = _query_output(result, rows_limit)
        return unwrap_json_column(out) if unwrap_json else out

    def _limit(self, limit: int | None) -> int:
        if limit is None or limit <= 0:
            return self.default_rows
        return min(limit, self.max_rows)

    def _timeout(self, timeout_s: float | None) -> float:
        if timeout_s is None or timeout_s <= 0:
            return self.timeout_s
        return min(timeout_s, max(self.timeout_s, MAX_TIMEOUT_S))

    def _show(self, sql: str, limit: int) -> _Result:
        start = time.monotonic()
        names, types, rows = _synthetic(self, sql)
        elapsed = int((time.monotonic() - start) * 1000)
        return _Result(names, types, rows[:limit], len(rows) > limit, elapsed)

    def _select(self, sql: str, limit: int, timeout: float) -> _Result:
        deadline = time.monotonic() + timeout
        cur = self._cursor()
        try:
            tree = _parse(cur, sql)
            _check_relations(sql, tree, self)
            _check_trino_syntax(sql, tree)
            rewriter = _Rewriter(
                cur, tree, self._has_decimals, lambda q: self._describe(q, deadline)
            )
            run_sql = rewriter.rewrite(sql) or sql
            result = self._run(run_sql, limit, deadline, sql, tree)
            names = _column_names(tree["node"], result.names)
            return result._replace(names=names)
        finally:
            cur.close()

    def _explain(self, sql: str, limit: int, timeout: float) -> _Result:
        deadline = time.monotonic() + timeout
        m = _EXPLAIN.match(sql, _statement_start(sql))
        inner = sql[m.end() :] if m else ""
        if _first_word(inner) not in _READS:
            raise ToolError(READ_ONLY)
        cur = self._cursor()
        try:
            tree = _parse(cur, inner)
            _check_relations(inner, tree, self)
            _check_trino_syntax(inner, tree)
            prefix = "EXPLAIN ANALYZE " if m and m.group(1) else "EXPLAIN "
            result = self._run(prefix + inner, limit, deadline, inner, tree)
        finally:
            cur.close()
        plan = "\n".join(str(r[-1]) for r in result.rows)
        return result._replace(names=["Query Plan"], types=["varchar"], rows=[(plan,)])

    def _run(
        self, run_sql: str, limit: int, deadline: float, sql: str, tree: dict[str, Any]
    ) -> _Result:
        """Execute in a SQL worker under the bounds; at most ``limit`` rows (+ truncated)."""
        answer = self._ask(("run", run_sql, limit), deadline)
        if isinstance(answer, sqlworker.Failed):
            raise self._failure(answer, sql, tree)
        assert isinstance(answer, sqlworker.Rows)
        types = [trino_type(t) for t in answer.types]
        return _Result(answer.names, types, answer.rows, answer.truncated, answer.elapsed_ms)

    def _describe(self, sql: str, deadline: float) -> list[str]:
        """DuckDB's column types of ``sql`` (binding folds constants, so a worker does it)."""
        answer = self._ask(("describe", sql, 0), deadline)
        if isinstance(answer, sqlworker.Failed):
            raise self._failure(answer, sql, {})
        assert isinstance(answer, list)
        return answer

    def _ask(self, request: tuple[str, str, int], deadline: float) -> Any:
        bounds = sqlworker.Bounds(
            max(0.0, deadline - time.monotonic()), self.max_result_bytes, self.max_cell_bytes
        )
        return self._workers.call((*request, bounds), deadline)

    def _failure(self, failed: sqlworker.Failed, sql: str, tree: dict[str, Any]) -> ToolError:
        """The peer's error for a statement the worker could not answer."""
        if failed.kind == "timeout":
            return _query_failed("context deadline exceeded", trino=False)
        if failed.kind == "bound":
            return _too_large(failed.message)
        if failed.kind == "memory":
            return _out_of_memory()
        if failed.kind == "unavailable":
            return _query_failed(failed.message, trino=False)
        error = getattr(duckdb, failed.name, None)
        if not (isinstance(error, type) and issubclass(error, duckdb.Error)):
            error = duckdb.Error
        return _translate(sql, tree, error(failed.message))

    # -- trino_describe_table

    def describe_table(
        self, catalog: str, schema: str, table: str, *, include_sample: bool = False
    ) -> dict[str, Any]:
        """The peer's ``DescribeTableOutput`` for one table (with up to 5 sample rows)."""
        for name, value in (("catalog", catalog), ("schema", schema), ("table", table)):
            if not value:
                raise ToolError(f"{name} parameter is required")
        columns = self._resolve(catalog, schema, table, at=len("DESCRIBE "))
        out: dict[str, Any] = {
            "catalog": catalog,
            "schema": schema,
            "table": table,
            "columns": [{"name": c.name, "type": c.type} for c in columns],
            "column_count": len(columns),
        }
        if include_sample:
            cur = self._cursor()
            try:
                sample = cur.execute(
                    f'SELECT * FROM {CATALOG}."{schema.lower()}"."{table.lower()}" LIMIT 5'
                )
                names = [d[0] for d in sample.description or []]
                rows = sample.fetchall()
            finally:
                cur.close()
            if rows:
                out["sample"] = [_row_map(names, r) for r in rows]
        return out

    def _resolve(self, catalog: str, schema: str, table: str, *, at: int) -> tuple[Column, ...]:
        """The table's columns, or the Trino error DESCRIBE gives for a name that is not there."""
        where = f"line 1:{at + 1}: "

        def failed(what: str) -> ToolError:
            return _query_failed(
                f"USER_ERROR: {where}{what}",
                "failed to describe table: ",
                prefix="Failed to describe table: ",
            )

        if catalog.lower() not in CATALOGS:
            raise failed(f"Catalog '{catalog.lower()}' not found")
        if catalog.lower() != CATALOG or schema.lower() not in self.schemas():
            raise failed(f"Schema '{schema.lower()}' does not exist")
        columns = self.columns(schema, table)
        if columns is None:
            name = f"{catalog}.{schema}.{table}".lower()
            raise failed(f"Table '{name}' does not exist")
        return columns

    # -- trino_browse

    def browse(
        self, catalog: str | None = None, schema: str | None = None, pattern: str | None = None
    ) -> dict[str, Any]:
        """The peer's ``BrowseOutput``: catalogs, a catalog's schemas, or a schema's tables."""
        if schema and not catalog:
            raise ToolError("schema requires catalog")
        if pattern and (not catalog or not schema):
            raise ToolError("pattern requires both catalog and schema")
        if not catalog:
            return {"level": "catalogs", "items": list(CATALOGS), "count": len(CATALOGS)}
        if not schema:
            if catalog.lower() not in CATALOGS:
                raise _browse_failed("schemas", catalog, len("SHOW SCHEMAS FROM "))
            items = self.schemas(catalog)
            return {"level": "schemas", "catalog": catalog, "items": items, "count": len(items)}
        tables = self._browse_tables(catalog, schema)
        names: list[str] | None
        if pattern:
            needle = pattern.lower().replace("%", "")
            matched = [t for t in tables if needle in t.lower()]
            names = matched or None  # Go: a nil slice, JSON null
        else:
            names = tables
        out: dict[str, Any] = {"level": "tables", "catalog": catalog, "schema": schema}
        out |= {"items": names, "count": len(names or [])}
        if pattern:
            out["pattern"] = pattern
        return out

    def _browse_tables(self, catalog: str, schema: str) -> list[str]:
        if catalog.lower() not in CATALOGS:
            raise _browse_failed("tables", catalog, len("SHOW TABLES FROM "))
        if schema.lower() not in self.schemas(catalog):
            raise _query_failed(
                f"USER_ERROR: line 1:17: Schema '{schema.lower()}' does not exist",
                "failed to list tables: ",
                prefix="Failed to list tables: ",
            )
        if catalog.lower() == "system":
            return []
        if schema.lower() == "information_schema":
            return list(_INFORMATION_SCHEMA_TABLES)
        return self.tables(schema)


_INFORMATION_SCHEMA_VIEWS: Final = frozenset({"columns", "schemata", "tables", "views"})
_INFORMATION_SCHEMA_TABLES: Final = (
    "applicable_roles", "columns", "enabled_roles", "roles", "schemata",
    "table_privileges", "tables", "views",
)  # fmt: skip


def _browse_failed(level: str, catalog: str, at: int) -> ToolError:
    """The failure of ``SHOW SCHEMAS|TABLES FROM <catalog>...`` for a catalog that is not there."""
    reason = f"USER_ERROR: line 1:{at + 1}: Catalog '{catalog.lower()}' not found"
    return _query_failed(reason, f"failed to list {level}: ", prefix=f"Failed to list {level}: ")


# ---------------------------------------------------------------------------- errors


def _setup_error(pack: Pack, exc: duckdb.Error) -> PackError:
    """Which statement of the pack's setup SQL fails, replayed one by one on a scratch database."""
    from refplatform.packs import SETUP_SQL

    scratch = duckdb.connect(":memory:")
    scratch.execute("SET enable_external_access = false")
    try:
        for statement in pack.setup_statements:
            try:
                scratch.execute(statement.sql)
            except duckdb.Error as err:
                return PackError(SETUP_SQL, statement.line, _first_line(err))
    finally:
        scratch.close()
    return PackError(SETUP_SQL, None, _first_line(exc))


def _first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n", 1)[0]


def _query_failed(
    reason: str,
    wrap: str = "query failed: ",
    *,
    prefix: str = "Query failed: ",
    trino: bool = True,
) -> ToolError:
    """The peer's failure text: its handler's prefix, the client's wrap, trino-go-client's form."""
    body = f"trino: query failed (200 OK): {_go_quote(reason)}" if trino else reason
    return ToolError(f"{prefix}{wrap}{body}")


def _out_of_memory() -> ToolError:
    return _query_failed(
        f"INSUFFICIENT_RESOURCES: Query exceeded per-node memory limit of {MEMORY_LIMIT}"
    )


def _too_large(what: str) -> ToolError:
    """A result over the size bound: Trino's resource-error form, naming the bound."""
    return _query_failed(
        f"INSUFFICIENT_RESOURCES: Query result too large: {what}; select fewer rows or "
        "columns, or aggregate"
    )


def _user_error(sql: str, location: int | None, message: str) -> ToolError:
    where = ""
    if location is not None and location >= 0:
        line, col = _line_col(sql, location)
        where = f"line {line}:{col}: "
    return _query_failed(f"USER_ERROR: {where}{message}")


def _line_col(sql: str, byte_offset: int) -> tuple[int, int]:
    """Trino's 1-based line and column of a DuckDB byte offset into ``sql``."""
    before = sql.encode()[:byte_offset].decode(errors="ignore")
    line = before.count("\n") + 1
    return line, len(before) - (before.rfind("\n") + 1) + 1


def _go_quote(s: str) -> str:
    """Go's ``%q`` of ``s`` (strconv.Quote): escapes quotes, backslashes, non-printables."""
    out = ['"']
    named = {"\a": "\\a", "\b": "\\b", "\f": "\\f", "\n": "\\n", "\r": "\\r", "\t": "\\t"}
    named |= {"\v": "\\v", '"': '\\"', "\\": "\\\\"}
    for ch in s:
        if ch in named:
            out.append(named[ch])
        elif ord(ch) < 0x20 or ord(ch) == 0x7F:
            out.append(f"\\x{ord(ch):02x}")
        elif unicodedata.category(ch).startswith("C") and ord(ch) > 0x7F:
            out.append(f"\\u{ord(ch):04x}" if ord(ch) <= 0xFFFF else f"\\U{ord(ch):08x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


_MISSING_COLUMN = (
    re.compile(r'Referenced column "([^"]+)" not found'),
    re.compile(r'Table "([^"]+)" does not have a column named "([^"]+)"'),
    re.compile(r'Values list "([^"]+)" does not have a column named "([^"]+)"'),
)
_MISSING_TABLE_ALIAS = re.compile(r'Referenced table "([^"]+)" not found')
_MISSING_FUNCTION = re.compile(
    r'(?:Scalar|Aggregate|Table|Pragma) Function with name "?([^ "!]+)"? does'
)
_DUCK_PREFIX = re.compile(r"^[A-Za-z ]+ Error: ")


def _translate(sql: str, tree: dict[str, Any], exc: duckdb.Error) -> ToolError:
    """The Trino-form error for a DuckDB failure of ``sql``."""
    text = str(exc)
    first = _first_line(exc)
    if isinstance(exc, duckdb.OutOfMemoryException):
        return _out_of_memory()
    if "Division by zero" in text or "ZeroDivisionError" in text:
        return _user_error(sql, None, "Division by zero")
    for pattern in _MISSING_COLUMN:
        if m := pattern.search(first):
            parts = list(m.groups())
            loc = _find_column(tree, parts)
            return _user_error(sql, loc, f"Column '{'.'.join(parts).lower()}' cannot be resolved")
    if m := _MISSING_TABLE_ALIAS.search(first):
        loc = _find_column(tree, [m.group(1), None])
        name = _column_text(tree, loc) or m.group(1)
        return _user_error(sql, loc, f"Column '{name.lower()}' cannot be resolved")
    if m := _MISSING_FUNCTION.search(first):
        name = m.group(1).lower()
        return _user_error(sql, _find_function(tree, name), f"Function '{name}' not registered")
    if isinstance(exc, duckdb.PermissionException | duckdb.InvalidInputException) and (
        "disabled" in first or "locked" in first
    ):
        return _query_failed(f"USER_ERROR: Access Denied: {_DUCK_PREFIX.sub('', first)}")
    return _user_error(sql, None, _DUCK_PREFIX.sub("", first))


# ---------------------------------------------------------------------------- the syntax tree


def _parse(cur: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    """The one SELECT statement of ``sql`` as DuckDB's JSON syntax tree, or a Trino error."""
    _check_nesting(sql)
    raw = cur.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(raw[0] if raw else "{}")
    if tree.get("error"):
        if tree.get("error_type") == "parser":
            position = tree.get("position")
            loc = int(position) if isinstance(position, str) and position.isdigit() else None
            return _raise(_user_error(sql, loc, str(tree.get("error_message", "syntax error"))))
        return _raise(ToolError(READ_ONLY))
    statements = tree.get("statements") or []
    semicolon = _first_semicolon(sql)
    if semicolon is not None:
        return _raise(_user_error(sql, semicolon, "mismatched input ';'. Expecting: <EOF>"))
    if len(statements) != 1:
        return _raise(_user_error(sql, len(sql.encode()), "mismatched input '<EOF>'"))
    return dict(statements[0])


def _raise(error: ToolError) -> dict[str, Any]:
    raise error


def _check_nesting(sql: str) -> None:
    """Refuse parentheses nested deeper than ``MAX_NESTING`` before DuckDB's parser sees
    them: it takes time quadratic in the depth of parentheses left open (4,000: 25 s)."""
    raw = sql.encode()
    depth = 0
    for position, kind in duckdb.tokenize(sql):
        if kind == duckdb.token_type.operator:
            char = raw[position : position + 1]
            depth += (char == b"(") - (char == b")")
            if depth > MAX_NESTING:
                raise _user_error(
                    sql, int(position), f"parentheses nested more than {MAX_NESTING} deep"
                )


def _first_semicolon(sql: str) -> int | None:
    raw = sql.encode()
    for position, kind in duckdb.tokenize(sql):
        if kind == duckdb.token_type.operator and raw[position : position + 1] == b";":
            return int(position)
    return None


def _statement_start(sql: str) -> int:
    """Where the statement begins: past whitespace and whole ``--`` and ``/* */`` comments.

    One forward scan (each comment's end is found once), so linear in ``len(sql)``; a
    comment that never ends is not skipped, nor a ``--`` comment without its newline.
    """
    at = _past_spaces(sql, 0)
    while True:
        if sql.startswith("--", at):
            end = sql.find("\n", at + 2)
        elif sql.startswith("/*", at):
            end = sql.find("*/", at + 2)
            end = end + 1 if end >= 0 else end
        else:
            return at
        if end < 0:
            return at
        at = _past_spaces(sql, end + 1)


def _past_spaces(sql: str, at: int) -> int:
    m = _SPACES.match(sql, at)
    return m.end() if m else at


def _first_word(sql: str) -> str:
    m = _FIRST_WORD.match(sql, _statement_start(sql))
    return m.group(1).lower() if m else ""


def _nodes(obj: Any) -> Iterator[dict[str, Any]]:
    """Every dict in the tree, parents before children, in document order."""
    if isinstance(obj, dict):
        yield obj
        for value in obj.values():
            yield from _nodes(value)
    elif isinstance(obj, list):
        for value in obj:
            yield from _nodes(value)


def _cte_names(tree: dict[str, Any]) -> set[str]:
    names: set[str] = set()
    for node in _nodes(tree):
        cte_map = node.get("cte_map")
        if isinstance(cte_map, dict):
            names |= {str(e["key"]).lower() for e in cte_map.get("map", []) if "key" in e}
    return names


def _check_relations(sql: str, tree: dict[str, Any], engine: SqlEngine) -> None:
    """Refuse, as Trino would, a table that is unqualified, missing, or a table function."""
    ctes = _cte_names(tree)
    for node in _nodes(tree):
        kind = node.get("type")
        loc = node.get("query_location")
        if kind == "TABLE_FUNCTION":
            name = _function_name(node.get("function", {})) or "?"
            raise _user_error(sql, loc, f"Table function '{name}' not registered")
        if kind != "BASE_TABLE":
            continue
        catalog = str(node.get("catalog_name") or "").lower()
        schema = str(node.get("schema_name") or "").lower()
        table = str(node.get("table_name") or "").lower()
        if not catalog and not schema:
            if table in ctes:
                continue
            raise _user_error(sql, loc, "Schema must be specified when session schema is not set")
        if not catalog:
            raise _user_error(sql, loc, "Catalog must be specified when session catalog is not set")
        if catalog not in CATALOGS:
            raise _user_error(sql, loc, f"Catalog '{catalog}' not found")
        if catalog != CATALOG or schema not in engine.schemas():
            raise _user_error(sql, loc, f"Schema '{schema}' does not exist")
        if schema == "information_schema" and table in _INFORMATION_SCHEMA_VIEWS:
            continue  # DuckDB's own views: the columns agents filter on have Trino's names
        if engine.columns(schema, table) is None:
            raise _user_error(sql, loc, f"Table '{catalog}.{schema}.{table}' does not exist")


def _check_trino_syntax(sql: str, tree: dict[str, Any]) -> None:
    """Refuse DuckDB-only syntax the agent's queries have been seen to use."""
    for node in _nodes(tree):
        if node.get("class") != "FUNCTION":
            continue
        for arg in node.get("arguments", []):
            expr = arg.get("expression", {}) if isinstance(arg, dict) else {}
            if expr.get("class") == "STAR" and expr.get("relation_name"):
                raise _user_error(
                    sql,
                    expr.get("query_location"),
                    "label.* syntax is only supported as the only argument of row pattern "
                    "count function",
                )


def _function_name(node: dict[str, Any]) -> str:
    return str(node.get("function_name") or "").lower()


def _find_function(tree: dict[str, Any], name: str) -> int | None:
    for node in _nodes(tree):
        if node.get("class") == "FUNCTION" and _function_name(node) == name:
            return int(node["query_location"])
    return None


def _find_column(tree: dict[str, Any], parts: list[str | None]) -> int | None:
    """Where a column reference named ``parts`` (qualifier, name) sits; WHERE clauses first."""
    want = [p.lower() for p in parts if p is not None]
    prefix_only = parts[-1] is None
    in_where: set[int] = set()
    for node in _nodes(tree):
        where = node.get("where_clause")
        if isinstance(where, dict):
            in_where |= {id(n) for n in _nodes(where)}
    best: tuple[int, int] | None = None
    for node in _nodes(tree):
        if node.get("class") != "COLUMN_REF":
            continue
        names = [str(n).lower() for n in node.get("column_names", [])]
        hit = names[: len(want)] == want if prefix_only else names[-len(want) :] == want
        if hit:
            key = (0 if id(node) in in_where else 1, int(node["query_location"]))
            best = key if best is None or key < best else best
    return None if best is None else best[1]


def _column_text(tree: dict[str, Any], location: int | None) -> str | None:
    for node in _nodes(tree):
        if node.get("class") == "COLUMN_REF" and node.get("query_location") == location:
            return ".".join(str(n) for n in node.get("column_names", []))
    return None


_PLAIN_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def _column_names(node: dict[str, Any], duck_names: list[str]) -> list[str]:
    """Trino's output column names: the alias, a column's own name, else ``_col<position>``."""
    while node.get("type") == "SET_OPERATION_NODE":
        children = node.get("children") or [node.get("left")]
        node = children[0] or {}
    select = node.get("select_list") or []
    stars = [e for e in select if e.get("class") == "STAR"]
    width = len(duck_names) - (len(select) - len(stars))
    if len(stars) > 1 or width < 0:
        return [n.lower() for n in duck_names]
    values = (node.get("from_table") or {}).get("type") == "EXPRESSION_LIST"
    names: list[str] = []
    for expr in select:
        if expr.get("class") == "STAR":
            for name in duck_names[len(names) : len(names) + width]:
                plain = _PLAIN_NAME.fullmatch(name) and not values
                names.append(name.lower() if plain else f"_col{len(names)}")
        elif expr.get("alias"):
            names.append(str(expr["alias"]).lower())
        elif expr.get("class") == "COLUMN_REF":
            names.append(str(expr["column_names"][-1]).lower())
        else:
            names.append(f"_col{len(names)}")
    return names


# ---------------------------------------------------------------------------- Trino semantics


class _Rewriter:
    """Rewrites the tree where DuckDB and Trino compute differently; typed by DuckDB probes."""

    _DECIMAL_TEXT = re.compile(
        r"(?<![\w.])\d*+\.\d|\b\d++\.(?![\w.])|\b(?:decimal|numeric)\b", re.I
    )
    _TYPEOF = re.compile(r"\btypeof\s*+\(", re.I)

    def __init__(
        self,
        cur: duckdb.DuckDBPyConnection,
        tree: dict[str, Any],
        has_decimals: bool,
        describe: Callable[[str], list[str]],
    ) -> None:
        self.cur = cur
        self.tree = tree
        self.has_decimals = has_decimals
        self.describe = describe  # column types of a query, evaluated where SQL may run
        self.changed = False
        self.decimals = False
        self.typeof = False
        self.information_schema = False

    def rewrite(self, sql: str) -> str | None:
        """The rewritten SQL, or None when ``sql`` needs no rewrite (the common case)."""
        self.decimals = self.has_decimals or bool(self._DECIMAL_TEXT.search(sql))
        self.typeof = bool(self._TYPEOF.search(sql))
        self.information_schema = "information_schema" in sql.lower()
        if not (self.decimals or self.typeof or self.information_schema):
            return None
        work = copy.deepcopy(self.tree)
        self._walk(work, [])
        return _deserialize(self.cur, work["node"]) if self.changed else None

    def _walk(self, obj: Any, scopes: list[dict[str, Any]]) -> None:
        if isinstance(obj, list):
            for item in obj:
                self._walk(item, scopes)
            return
        if not isinstance(obj, dict):
            return
        if obj.get("type") == "SELECT_NODE":
            scopes = [*scopes, obj]
        if obj.get("type") == "BASE_TABLE" and obj.get("schema_name") == "information_schema":
            # DuckDB keeps these views in its "system" catalog; Trino has them in every catalog.
            obj["catalog_name"] = "system"
            obj["qualified_name"] = {"path": ["system", "information_schema", obj["table_name"]]}
            self.changed = True
        # CTEs and FROM first: an outer expression is typed after the relations it reads.
        first = [k for k in ("cte_map", "from_table") if k in obj]
        for key in [*first, *(k for k in obj if k not in first)]:
            self._walk(obj[key], scopes)
        if obj.get("class") == "FUNCTION":
            self._function(obj, scopes)

    def _function(self, node: dict[str, Any], scopes: list[dict[str, Any]]) -> None:
        name = _function_name(node)
        args = [a.get("expression") for a in node.get("arguments", [])]
        if name == "typeof" and self.typeof and len(args) == 1:
            self._replace(node, "__bl_trino_type(typeof(__a))", {"__a": args[0]})
        elif not self.decimals:
            return
        elif name in ("/", "//") and node.get("is_operator") and len(args) == 2:
            types = self._types(args, scopes)
            if types is not None:
                self._divide(node, args, types)
        elif name == "avg" and len(args) == 1:
            types = self._types(args, scopes)
            if types is not None and (d := _decimal(types[0])):
                template = (
                    "CAST(__bl_decimal_divide(CAST(SUM(__a) AS VARCHAR), "
                    f"CAST(COUNT(__a) AS VARCHAR), {d[1]}) AS DECIMAL({d[0]},{d[1]}))"
                )
                new = self._template(template, {"__a": args[0]})
                for agg in _nodes(new):
                    if agg.get("class") == "FUNCTION" and _function_name(agg) in ("sum", "count"):
                        agg["distinct"], agg["filter"] = node.get("distinct"), node.get("filter")
                self._install(node, new)
        elif name == "round" and len(args) in (1, 2):
            digits = 0 if len(args) == 1 else _integer_literal(args[1])
            types = self._types(args[:1], scopes) if digits is not None else None
            if types is not None and digits is not None and (d := _decimal(types[0])):
                p, s = d
                rp, rs = (min(38, p + 1), s) if len(args) == 2 else (max(1, p - s + min(s, 1)), 0)
                template = (
                    f"CAST(__bl_decimal_round(CAST(__a AS VARCHAR), {digits}) "
                    f"AS DECIMAL({rp},{rs}))"
                )
                self._replace(node, template, {"__a": args[0]})

    def _divide(self, node: dict[str, Any], args: list[Any], types: list[str]) -> None:
        left, right = (_decimal(t) or _INTEGER_DECIMALS.get(t.lower()) for t in types)
        if not (left and right) or not any(_decimal(t) for t in types):
            return
        (p1, s1), (_, s2) = left, right
        p, s = min(38, p1 + s2 + max(s2 - s1, 0)), max(s1, s2)
        template = (
            "CAST(__bl_decimal_divide(CAST(__a AS VARCHAR), CAST(__b AS VARCHAR), "
            f"{s}) AS DECIMAL({p},{s}))"
        )
        self._replace(node, template, {"__a": args[0], "__b": args[1]})

    def _replace(self, node: dict[str, Any], template: str, slots: dict[str, Any]) -> None:
        self._install(node, self._template(template, slots))

    def _install(self, node: dict[str, Any], new: dict[str, Any]) -> None:
        new["alias"] = node.get("alias", "")
        new["query_location"] = node.get("query_location")
        node.clear()
        node.update(new)
        self.changed = True

    def _template(self, template: str, slots: dict[str, Any]) -> dict[str, Any]:
        tree = _parse(self.cur, f"SELECT {template}")
        expr: dict[str, Any] = tree["node"]["select_list"][0]
        for node in list(_nodes(expr)):
            if node.get("class") == "COLUMN_REF" and len(node.get("column_names", [])) == 1:
                slot = node["column_names"][0]
                if slot in slots:
                    node.clear()
                    node.update(copy.deepcopy(slots[slot]))
        return expr

    def _types(self, exprs: list[Any], scopes: list[dict[str, Any]]) -> list[str] | None:
        """DuckDB's types of ``exprs`` in their SELECT's context; None if they do not bind."""
        if not scopes:
            return None
        context = scopes[-1]
        ctes: dict[str, Any] = {}
        for scope in scopes:
            for entry in (scope.get("cte_map") or {}).get("map", []):
                ctes[entry["key"]] = entry
        base = dict(context)
        base["select_list"] = [dict(e, alias="") for e in exprs]
        base["modifiers"] = []
        base["cte_map"] = {"map": list(ctes.values())}
        base["qualify"] = None
        ungrouped = dict(base, group_expressions=[], group_sets=[], having=None)
        for probe in (base, ungrouped):
            try:
                return self.describe(_deserialize(self.cur, probe))
            except (duckdb.Error, ToolError):
                continue
        return None


_INTEGER_DECIMALS: Final = {
    "tinyint": (3, 0), "smallint": (5, 0), "integer": (10, 0), "bigint": (19, 0),
    "hugeint": (19, 0),  # DuckDB's sum of integers; Trino's is a bigint
}  # fmt: skip


def _decimal(duck_type: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", duck_type.strip(), re.I)
    return (int(m.group(1)), int(m.group(2))) if m else None


def _integer_literal(expr: Any) -> int | None:
    if isinstance(expr, dict) and expr.get("class") == "CONSTANT":
        text = str((expr.get("literal") or {}).get("text", ""))
        if re.fullmatch(r"-?\d+", text):
            return int(text)
    return None


def _deserialize(cur: duckdb.DuckDBPyConnection, node: dict[str, Any]) -> str:
    doc = {"error": False, "statements": [{"node": node, "named_param_map": []}]}
    row = cur.execute("SELECT json_deserialize_sql(?)", [json.dumps(doc)]).fetchone()
    return str(row[0]) if row else ""


def _decimal_divide(a: str, b: str, scale: int) -> str:
    """Trino's decimal quotient: ``a / b`` rounded half up to ``scale`` digits, exactly."""
    divisor = fractions.Fraction(decimal.Decimal(b))
    if divisor == 0:
        raise ZeroDivisionError("Division by zero")
    value = fractions.Fraction(decimal.Decimal(a)) / divisor * 10**scale
    return _scaled(value, scale)


def _decimal_round(x: str, digits: int) -> str:
    """Trino's ``round`` of a decimal: half up at ``digits`` (the type keeps its scale)."""
    value = fractions.Fraction(decimal.Decimal(x)) * fractions.Fraction(10) ** digits
    return _scaled(value, digits) if digits >= 0 else str(_half_up(value) * 10 ** (-digits))


def _half_up(value: fractions.Fraction) -> int:
    q, r = divmod(abs(value.numerator), value.denominator)
    q += 2 * r >= value.denominator
    return -q if value < 0 else q


def _scaled(value: fractions.Fraction, scale: int) -> str:
    unscaled = _half_up(value)
    text = str(abs(unscaled)).rjust(scale + 1, "0")
    sign = "-" if unscaled < 0 else ""
    return f"{sign}{text[:-scale]}.{text[-scale:]}" if scale > 0 else f"{sign}{text}"


# ---------------------------------------------------------------------------- types and values

_SIMPLE_TYPES: Final = {
    "BOOLEAN": "boolean", "TINYINT": "tinyint", "SMALLINT": "smallint", "INTEGER": "integer",
    "BIGINT": "bigint", "HUGEINT": "bigint", "UTINYINT": "smallint", "USMALLINT": "integer",
    "UINTEGER": "bigint", "UBIGINT": "decimal(20,0)", "UHUGEINT": "decimal(38,0)",
    "FLOAT": "real", "DOUBLE": "double", "VARCHAR": "varchar", "BLOB": "varbinary",
    "DATE": "date", "TIME": "time(3)", "TIMESTAMP": "timestamp(3)", "TIMESTAMP_S": "timestamp(0)",
    "TIMESTAMP_MS": "timestamp(3)", "TIMESTAMP_NS": "timestamp(9)",
    "TIMESTAMP WITH TIME ZONE": "timestamp(3) with time zone",
    "TIME WITH TIME ZONE": "time(3) with time zone", "INTERVAL": "interval day to second",
    "UUID": "uuid", "JSON": "json", '"NULL"': "unknown", "NULL": "unknown",
}  # fmt: skip


def trino_type(duck_type: str) -> str:
    """The Trino type name (as ``DESCRIBE`` and ``typeof`` show it) for a DuckDB type."""
    t = duck_type.strip()
    upper = t.upper()
    if upper in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[upper]
    if d := _decimal(t):
        return f"decimal({d[0]},{d[1]})"
    if upper.endswith("[]"):
        return f"array({trino_type(t[:-2])})"
    if upper.startswith("STRUCT(") and t.endswith(")"):
        fields = _split_top(t[7:-1])
        return "row(" + ", ".join(_struct_field(f) for f in fields) + ")"
    if upper.startswith("MAP(") and t.endswith(")"):
        return "map(" + ", ".join(trino_type(x) for x in _split_top(t[4:-1])) + ")"
    if upper.startswith("VARCHAR"):
        return "varchar"
    return t.lower()


def _struct_field(field: str) -> str:
    name, _, kind = field.strip().partition(" ")
    return f"{name.strip(chr(34))} {trino_type(kind)}"


def _split_top(text: str) -> list[str]:
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        depth += ch == "("
        depth -= ch == ")"
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return parts


def client_type(trino: str) -> str:
    """The column type trino-go-client reports (``DatabaseTypeName``): base name, upper case."""
    out, depth = [], 0
    for ch in trino:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")"
    return re.sub(r"\s+", " ", "".join(out)).strip().upper()


def go_local(naive: dt.datetime) -> dt.datetime:
    """``naive`` as a Los Angeles wall time, resolved the way Go's ``time.Date`` resolves it."""
    as_utc = naive.replace(tzinfo=dt.UTC)
    offset = _offset_at(as_utc)
    corrected = _offset_at(as_utc - offset)
    if corrected != offset:  # a wall time in a transition: Go takes the offset after it
        offset = corrected
    return (as_utc - offset).astimezone(ZONE)


def _offset_at(instant: dt.datetime) -> dt.timedelta:
    return instant.astimezone(ZONE).utcoffset() or dt.timedelta(0)


def rfc3339(moment: dt.datetime) -> str:
    """Go's ``time.RFC3339`` layout (whole seconds, ``Z`` or ``±hh:mm``)."""
    offset = moment.utcoffset() or dt.timedelta(0)
    if offset == dt.timedelta(0):
        zone = "Z"
    else:
        minutes = int(offset.total_seconds() / 60)  # Go truncates a seconds offset (LMT)
        sign = "-" if minutes < 0 else "+"
        zone = f"{sign}{abs(minutes) // 60:02d}:{abs(minutes) % 60:02d}"
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}{zone}"
    )


def render_value(value: Any) -> Any:
    """A DuckDB value as the peer's client hands it to JSON (its ``convertValue``)."""
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if isinstance(value, decimal.Decimal):
        return format(value, "f")
    if isinstance(value, dt.datetime):
        moment = go_local(value) if value.tzinfo is None else value
        return rfc3339(moment)
    if isinstance(value, dt.date):
        return rfc3339(go_local(dt.datetime(value.year, value.month, value.day)))
    if isinstance(value, dt.time | dt.timedelta | uuid.UUID):
        return str(value)
    if isinstance(value, bytes | bytearray | memoryview):
        data = bytes(value)
        try:
            return json.loads(data)
        except (ValueError, RecursionError):  # RecursionError: nested deeper than Python goes
            return data.decode("utf-8", "replace")
    if isinstance(value, dict):
        return {str(k): render_value(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [render_value(v) for v in value]
    return str(value)


def _row_map(names: list[str], row: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in zip(names, row, strict=True):
        out[name] = render_value(value)  # a repeated name keeps the last value, as a Go map
    return dict(sorted(out.items()))


def _query_output(result: _Result, limit: int) -> dict[str, Any]:
    rows = [_row_map(result.names, r) for r in result.rows]
    return {
        "columns": [
            {"name": n, "type": client_type(t)}
            for n, t in zip(result.names, result.types, strict=True)
        ],
        "rows": rows,
        "row_count": len(rows),
        "stats": {
            "row_count": len(rows),
            "truncated": result.truncated,
            "limit_applied": limit,
            "duration_ms": result.elapsed_ms,
        },
    }


def unwrap_json_column(out: dict[str, Any]) -> dict[str, Any]:
    """The peer's ``unwrap_json``: one row, one string column holding a JSON object or array."""
    columns, rows = out["columns"], out["rows"]
    if len(columns) != 1 or len(rows) != 1:
        return out
    if columns[0]["type"].lower() not in ("varchar", "char", "json") and not re.match(
        r"(?i)(var)?char\(", columns[0]["type"]
    ):
        return out
    name = columns[0]["name"]
    value = rows[0].get(name)
    if not isinstance(value, str):
        return out
    try:
        parsed = json.loads(value)
    except (ValueError, RecursionError):
        return out
    if not isinstance(parsed, dict | list):
        return out
    return out | {
        "columns": [dict(columns[0], type="JSON")],
        "rows": [dict(rows[0], **{name: parsed})],
    }


# ---------------------------------------------------------------------------- SHOW and DESCRIBE


_NAME = r'(?:"[^"]++"|[A-Za-z_][A-Za-z0-9_]*+)'
_LIKE = r"(?:\s++like\s++'([^']*+)')?"
_FROM = r"\s++(?:from|in)\s++"
_SHOW = (
    ("catalogs", re.compile(r"show\s++catalogs" + _LIKE, re.I)),
    ("schemas", re.compile(rf"show\s++schemas(?:{_FROM}({_NAME}))?" + _LIKE, re.I)),
    ("tables", re.compile(rf"show\s++tables(?:{_FROM}({_NAME}(?:\.{_NAME})?))?" + _LIKE, re.I)),
    (
        "columns",
        re.compile(
            rf"(?:show\s++columns{_FROM}|describe\s++|desc\s++)({_NAME}(?:\.{_NAME}){{0,2}})", re.I
        ),
    ),
)


def _synthetic(engine: SqlEngine, sql: str) -> tuple[list[str], list[str], list[tuple[Any, ...]]]:
    """Trino's answer to the SHOW and DESCRIBE statements an agent explores with."""
    text = sql[_statement_start(sql) :].strip()
    for kind, pattern in _SHOW:
        m = pattern.fullmatch(text)
        if not m:
            continue
        at = m.start(1) if m.lastindex and m.group(1) else len(text)
        offset = len(sql) - len(sql.lstrip()) + at
        if kind == "catalogs":
            return ["Catalog"], ["varchar"], [(c,) for c in _like(CATALOGS, m.group(1))]
        if kind == "schemas":
            catalog = _unquote(m.group(1) or "")
            if not catalog:
                raise _user_error(
                    sql, None, "Catalog must be specified when session catalog is not set"
                )
            if catalog not in CATALOGS:
                raise _user_error(sql, offset, f"Catalog '{catalog}' not found")
            return (
                ["Schema"],
                ["varchar"],
                [(s,) for s in _like(engine.schemas(catalog), m.group(2))],
            )
        parts = [_unquote(p) for p in re.findall(_NAME, m.group(1) or "")]
        if kind == "tables":
            if len(parts) < 2:
                what = "schema" if not parts else "catalog"
                raise _user_error(
                    sql,
                    None,
                    f"{what.capitalize()} must be specified when session {what} is not set",
                )
            catalog, schema = parts
            if catalog not in CATALOGS:
                raise _user_error(sql, offset, f"Catalog '{catalog}' not found")
            if schema not in engine.schemas(catalog):
                raise _user_error(sql, offset, f"Schema '{schema}' does not exist")
            names = engine.tables(schema) if catalog == CATALOG else []
            return ["Table"], ["varchar"], [(t,) for t in _like(names, m.group(2))]
        if len(parts) < 3:
            what = "schema" if len(parts) < 2 else "catalog"
            raise _user_error(
                sql, offset, f"{what.capitalize()} must be specified when session {what} is not set"
            )
        catalog, schema, table = parts
        columns = engine.columns(schema, table) if catalog == CATALOG else None
        if columns is None:
            raise _user_error(sql, offset, f"Table '{catalog}.{schema}.{table}' does not exist")
        names = ["Column", "Type", "Extra", "Comment"]
        return names, ["varchar"] * 4, [(c.name, c.type, "", "") for c in columns]
    raise _user_error(sql, 0, "this SHOW statement is not supported by refplatform's SQL engine")


def _unquote(name: str) -> str:
    return name[1:-1] if name.startswith('"') else name.lower()


def _like(items: Any, pattern: str | None) -> list[str]:
    if pattern is None:
        return list(items)
    return [i for i in items if _like_match(i, pattern)]


def _like_match(text: str, pattern: str) -> bool:
    """SQL ``LIKE`` (``%`` any run, ``_`` one character) in O(len(text) * len(pattern)).

    A regex of ``.*`` per ``%`` backtracks exponentially on ``'%%%...%x'``; this keeps one
    fallback point (the last ``%``), the classic wildcard match.
    """
    t = p = 0
    star, mark = -1, 0
    while t < len(text):
        if p < len(pattern) and pattern[p] != "%" and pattern[p] in ("_", text[t]):
            t, p = t + 1, p + 1
        elif p < len(pattern) and pattern[p] == "%":
            star, mark, p = p, t, p + 1
        elif star >= 0:
            mark += 1
            t, p = mark, star + 1
        else:
            return False
    return pattern[p:].strip("%") == ""


# ---------------------------------------------------------------------------- text rendering


def validate_format(fmt: str | None) -> None:
    """Refuse an output format the peer's tool does not know, with its message."""
    if fmt and fmt not in FORMATS:
        raise ToolError(f'invalid format "{fmt}": must be one of {", ".join(FORMATS)}')


def query_text(out: dict[str, Any], fmt: str | None = None) -> str:
    """The ``trino_query`` tool's text content for a ``query`` result, as the peer renders it."""
    validate_format(fmt)
    if fmt == "csv":
        text = _csv(out)
    elif fmt == "markdown":
        text = _markdown(out)
    else:
        try:
            text = go_json(out)
        except ValueError as exc:
            raise ToolError(f"failed to marshal result: {exc}") from None
    # The fetch estimated the size without escapes; this is the bound on what is sent.
    if len(text) > MAX_RESULT_BYTES // 4 and len(text.encode()) > MAX_RESULT_BYTES:
        raise _too_large(f"the result exceeds {MAX_RESULT_BYTES} bytes")
    return text


def describe_text(out: dict[str, Any]) -> str:
    """The ``trino_describe_table`` tool's text content (the peer's basic column table)."""
    lines = [
        f"## Table: `{out['catalog']}.{out['schema']}.{out['table']}`\n\n### Columns\n\n",
        "| Name | Type | Nullable | Comment |\n|------|------|----------|----------|\n",
    ]
    for col in out["columns"]:
        nullable = col.get("nullable") or "-"
        comment = col.get("comment") or "-"
        lines.append(f"| `{col['name']}` | {col['type']} | {nullable} | {comment} |\n")
    lines.append(f"\n*{len(out['columns'])} columns*")
    if out.get("sample"):
        lines.append("\n\n### Sample Data\n\n```json\n" + go_json(out["sample"]) + "\n```")
    return "".join(lines)


def browse_text(out: dict[str, Any]) -> str:
    """The ``trino_browse`` tool's text content."""
    items = out.get("items") or []
    if out["level"] == "catalogs":
        head, noun = "## Available Catalogs\n\n", "catalogs"
    elif out["level"] == "schemas":
        head, noun = f"## Schemas in `{out['catalog']}`\n\n", "schemas"
    else:
        where = f"{out['catalog']}.{out['schema']}"
        matching = f" matching '{out['pattern']}'" if out.get("pattern") else ""
        head, noun = f"## Tables in `{where}`{matching}\n\n", "tables"
    listed = "".join(f"- `{i}`\n" for i in items)
    return f"{head}{listed}\n*{len(items)} {noun} found*"


def go_json(value: Any, indent: str = "  ") -> str:
    """``json.MarshalIndent(value, "", indent)`` as Go writes it; dict order is kept."""
    out: list[str] = []
    _go_encode(value, indent, 0, out)
    return "".join(out)


def _go_encode(value: Any, indent: str, depth: int, out: list[str]) -> None:
    if value is None:
        out.append("null")
    elif value is True:
        out.append("true")
    elif value is False:
        out.append("false")
    elif isinstance(value, int):
        out.append(str(value))
    elif isinstance(value, float):
        out.append(go_float(value))
    elif isinstance(value, str):
        out.append(_go_string(value))
    elif isinstance(value, dict):
        if not value:
            out.append("{}")
            return
        out.append("{")
        for i, (key, item) in enumerate(value.items()):
            out.append(("," if i else "") + "\n" + indent * (depth + 1))
            out.append(_go_string(str(key)) + ": ")
            _go_encode(item, indent, depth + 1, out)
        out.append("\n" + indent * depth + "}")
    elif isinstance(value, list | tuple):
        if not value:
            out.append("[]")
            return
        out.append("[")
        for i, item in enumerate(value):
            out.append(("," if i else "") + "\n" + indent * (depth + 1))
            _go_encode(item, indent, depth + 1, out)
        out.append("\n" + indent * depth + "]")
    else:
        out.append(_go_string(str(value)))


_GO_ESCAPES: Final = {
    '"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b",
    "\f": "\\f", "<": "\\u003c", ">": "\\u003e", "&": "\\u0026",
    "\u2028": "\\u2028", "\u2029": "\\u2029",
}  # fmt: skip


def _go_string(s: str) -> str:
    out = ['"']
    for ch in s:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ord(ch) < 0x20:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def go_float(f: float) -> str:
    """A float64 as Go's encoding/json writes it (shortest digits; exponent outside 1e-6..1e21)."""
    if math.isnan(f) or math.isinf(f):
        raise ValueError(
            f"json: unsupported value: {'NaN' if math.isnan(f) else '+Inf' if f > 0 else '-Inf'}"
        )
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    if abs(f) < 1e-6 or abs(f) >= 1e21:
        mantissa, _, exponent = repr(f).partition("e")
        sign, digits = exponent[0], exponent[1:]
        if sign == "-" and len(digits) == 2 and digits[0] == "0":
            digits = digits[1]
        return f"{mantissa}e{sign}{digits}"
    text = format(decimal.Decimal(repr(f)), "f")
    return text.rstrip("0").rstrip(".") if "." in text else text


def _go_value_text(value: Any) -> str:
    """Go's ``fmt.Sprintf("%v", v)`` for the values a result row holds."""
    if value is None:
        return "<nil>"
    if value is True or value is False:
        return "true" if value else "false"
    if isinstance(value, float):
        return _go_float_g(value)
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)


def _go_float_g(f: float) -> str:
    """Go's ``%v`` of a float64: shortest digits, an exponent below 1e-4 and from 1e6 up."""
    if math.isnan(f):
        return "NaN"
    if math.isinf(f):
        return "+Inf" if f > 0 else "-Inf"
    if f == 0:
        return "-0" if math.copysign(1.0, f) < 0 else "0"
    sign, digits, exponent = decimal.Decimal(repr(f)).normalize().as_tuple()
    text = "".join(map(str, digits))
    x = len(text) + int(exponent) - 1
    if x < -4 or x >= 6:
        mantissa = text[0] + ("." + text[1:] if len(text) > 1 else "")
        return f"{'-' if sign else ''}{mantissa}e{'-' if x < 0 else '+'}{abs(x):02d}"
    return go_float(f)


def _csv(out: dict[str, Any]) -> str:
    columns = [c["name"] for c in out["columns"]]
    if not columns:
        return ""
    lines = [",".join(_csv_cell(c) for c in columns) + "\n"]
    for row in out["rows"]:
        cells = [_csv_cell(_go_value_text(row[c])) if c in row else "" for c in columns]
        lines.append(",".join(cells) + "\n")
    return "".join(lines) + _footer(out, "\n# ", "")


def _csv_cell(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _markdown(out: dict[str, Any]) -> str:
    columns = [c["name"] for c in out["columns"]]
    if not columns:
        return "No results"
    lines = ["|" + "".join(f" {c} |" for c in columns) + "\n|" + " --- |" * len(columns) + "\n"]
    for row in out["rows"]:
        cells = ["" if row.get(c) is None else _go_value_text(row[c]) for c in columns]
        lines.append("|" + "".join(f" {v} |" for v in cells) + "\n")
    return "".join(lines) + _footer(out, "\n*", "*")


def _footer(out: dict[str, Any], start: str, end: str) -> str:
    stats = out["stats"]
    text = f"{start}{stats['row_count']} rows returned"
    if stats["truncated"]:
        text += f" (truncated at limit {stats['limit_applied']})"
    return text + f", executed in {stats['duration_ms']}ms{end}"


__all__ = [
    "CATALOG",
    "DEFAULT_LIMIT",
    "DEFAULT_TIMEOUT_S",
    "MAX_LIMIT",
    "READ_ONLY",
    "Column",
    "SqlEngine",
    "browse_text",
    "client_type",
    "describe_text",
    "go_float",
    "go_json",
    "query_text",
    "render_value",
    "trino_type",
    "unwrap_json_column",
    "validate_format",
]
