"""The peer's SQL tools (``trino_query``, ``trino_describe_table``, ``trino_browse``) on DuckDB.

``SqlEngine`` answers them over the pack's tables (``sql_database.py``: loaded once per
process into a locked, read-only DuckDB): only reads, each query bounded in time, rows,
memory and result size (the agent's SQL is evaluated in worker processes,
``sqlworker.py``; docs/refplatform.md, "Bounds"). A query is parsed, checked and rewritten
to Trino's semantics first (``sql_rewrite.py``); SHOW and DESCRIBE are answered from the
catalog here. Answers have the peer's shapes (mcp-trino's ``QueryOutput``,
``DescribeTableOutput``, ``BrowseOutput``), values rendered as its client renders them
(``sql_render.py``, which also writes the tools' text), Trino's ``_colN`` names for unnamed
columns and Trino's type names. Failures raise ``ToolError`` with the peer's messages; SQL
errors take Trino's form (``sql_trino.py``).
"""

from __future__ import annotations

import re
import threading
import time
from typing import TYPE_CHECKING, Any, Final, NamedTuple

import duckdb

from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.toolkits import sql_database, sqlworker
from benchledger.refplatform.toolkits.sql_render import (
    MAX_RESULT_BYTES,
    row_map,
    unwrap_json_column,
)
from benchledger.refplatform.toolkits.sql_rewrite import (
    Rewriter,
    check_relations,
    check_trino_syntax,
    column_names,
    parse,
    translate,
)
from benchledger.refplatform.toolkits.sql_trino import (
    CATALOG,
    CATALOGS,
    READ_ONLY,
    Column,
    client_type,
    out_of_memory,
    query_failed,
    too_large,
    trino_type,
    user_error,
)
from benchledger.refplatform.toolkits.sql_types import check_types

if TYPE_CHECKING:  # annotations only, as in sql_database.py
    from benchledger.refplatform.packs import Pack


DEFAULT_LIMIT: Final = 1000  # the S5 arm's default_limit
MAX_LIMIT: Final = 10000  # the S5 arm's max_limit
DEFAULT_TIMEOUT_S: Final = 30.0
# A larger timeout_seconds is refused, naming this (mcp-trino clamps at 300): a statement
# holds one of only SQL_WORKERS workers while it runs, and this, the wait below and the
# worker's grace stay under the harness's 60 s read timeout (docs/refplatform.md, "Bounds").
MAX_TIMEOUT_S: Final = 30.0
QUEUE_WAIT_S: Final = 25.0  # how long a statement waits for a worker before "busy"
# What one statement may use, wherever it runs (sqlworker.py): its worker process may map
# this much beyond what it needed to start; DuckDB's own pool is kept below it, so a big
# sort or hash table fails with DuckDB's error first.
QUERY_MEMORY_BYTES: Final = 512 << 20
_DUCKDB_MEMORY_LIMIT: Final = "384MB"
MAX_CELL_BYTES: Final = 1 << 20  # one value of a result
SQL_WORKERS: Final = 2  # worker processes per pack (one per core here)
# The statement itself: Trino's query.max-length check, lower (DuckDB's syntax tree of a
# statement is ~70 times its text, all of it held here while it is checked), and a depth
# (``sql_rewrite.MAX_NESTING``).
MAX_SQL_CHARS: Final = 50_000

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


def _pool(
    pack: Pack, workers: int = SQL_WORKERS, memory_bytes: int = QUERY_MEMORY_BYTES
) -> sqlworker.Pool:
    """The process's SQL worker pool for ``pack`` at this size and budget (made once)."""
    return sqlworker.pool(
        sql_database.prepare_worker,
        pack.setup_sql,
        size=workers,
        memory_bytes=memory_bytes,
        memory_limit=_DUCKDB_MEMORY_LIMIT,
    )


def warm(pack: Pack) -> None:
    """Start what a default engine over ``pack`` waits for, in the background: its first SQL
    worker (a process that imports DuckDB and loads the tables, ~0.7 s) and this process's
    copy of the tables. A run calls it first thing, so both overlap its own start-up."""
    _pool(pack)
    sql_database.preload(pack)


class _Result(NamedTuple):
    names: list[str]
    types: list[str]  # Trino type names
    rows: list[tuple[Any, ...]]
    truncated: bool
    elapsed_ms: int


class SqlEngine:
    """The pack's tables in a locked, read-only DuckDB, answering as the peer's Trino tools.

    Thread-safe: each call runs on its own cursor, so MCP worker threads may call at once.
    Engines over the same setup SQL share one loaded database (see ``sql_database.loaded``).
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
        max_timeout_s: float = MAX_TIMEOUT_S,
        queue_wait_s: float = QUEUE_WAIT_S,
    ) -> None:
        self.pack = pack
        self.timeout_s = min(timeout_s, max_timeout_s)
        self.max_timeout_s = max_timeout_s
        self.queue_wait_s = queue_wait_s
        self.max_rows = max_rows
        self.default_rows = min(default_rows, max_rows)
        self.max_result_bytes = max_result_bytes
        self.max_cell_bytes = max_cell_bytes
        self._lock = threading.Lock()
        loaded = sql_database.loaded(pack)
        self._db = loaded.db.cursor()  # this engine's own connection to the shared database
        self._tables = loaded.tables
        self._has_decimals = loaded.has_decimals
        # The agent's SQL is evaluated only there: this process parses and renders.
        self._workers = _pool(pack, workers, query_memory_bytes)

    def ready(self) -> str:
        """Wait until the engine can run the agent's SQL; "" when it can, else why not."""
        return self._workers.ready()

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
        owner: str | None = None,
    ) -> dict[str, Any]:
        """Run one read-only statement; the peer's ``QueryOutput`` dict, or ``ToolError``.

        ``owner`` (the caller's identity) shares the SQL workers fairly with other owners.
        """
        if sql == "":
            raise ToolError("sql parameter is required")
        if len(sql) > MAX_SQL_CHARS:
            raise query_failed(
                f"USER_ERROR: Query text length ({len(sql)}) exceeds the maximum length "
                f"({MAX_SQL_CHARS})"
            )
        if _WRITE.match(sql, _statement_start(sql)):
            raise ToolError(READ_ONLY)
        rows_limit = self._limit(limit)
        budget = sqlworker.Budget(self._timeout(timeout_s))
        word = _first_word(sql)
        try:
            if word in ("show", "describe", "desc"):
                result = self._show(sql, rows_limit)
            elif word == "explain":
                result = self._explain(sql, rows_limit, budget, owner)
            elif word in _READS:
                result = self._select(sql, rows_limit, budget, owner)
            else:
                raise ToolError(READ_ONLY)
        except RecursionError:  # a syntax tree deeper than Python walks: refused, not a crash
            raise user_error(sql, None, "the statement is nested too deeply") from None
        out = _query_output(result, rows_limit)
        return unwrap_json_column(out) if unwrap_json else out

    def _limit(self, limit: int | None) -> int:
        if limit is None or limit <= 0:
            return self.default_rows
        return min(limit, self.max_rows)

    def _timeout(self, timeout_s: float | None) -> float:
        if timeout_s is None or timeout_s <= 0:
            return self.timeout_s
        if timeout_s > self.max_timeout_s:
            raise ToolError(
                f"timeout_seconds {timeout_s:g} exceeds this platform's maximum of "
                f"{self.max_timeout_s:g} seconds",
                code="invalid_arguments",
                category="client_input",
            )
        return timeout_s

    def _show(self, sql: str, limit: int) -> _Result:
        start = time.monotonic()
        names, types, rows = _synthetic(self, sql)
        elapsed = int((time.monotonic() - start) * 1000)
        return _Result(names, types, rows[:limit], len(rows) > limit, elapsed)

    def _select(self, sql: str, limit: int, budget: sqlworker.Budget, owner: str | None) -> _Result:
        cur = self._cursor()
        try:
            tree = parse(cur, sql)
            check_relations(sql, tree, self)
            check_trino_syntax(sql, tree)
            timestamp_text = check_types(sql, tree, self)
            rewriter = Rewriter(
                cur,
                tree,
                self._has_decimals,
                lambda q: self._describe(q, budget, owner),
                timestamp_text,
            )
            run_sql = rewriter.rewrite(sql) or sql
            result = self._run(run_sql, limit, budget, owner, sql, tree)
            names = column_names(tree["node"], result.names)
            return result._replace(names=names)
        finally:
            cur.close()

    def _explain(
        self, sql: str, limit: int, budget: sqlworker.Budget, owner: str | None
    ) -> _Result:
        m = _EXPLAIN.match(sql, _statement_start(sql))
        inner = sql[m.end() :] if m else ""
        if _first_word(inner) not in _READS:
            raise ToolError(READ_ONLY)
        cur = self._cursor()
        try:
            tree = parse(cur, inner)
            check_relations(inner, tree, self)
            check_trino_syntax(inner, tree)
            check_types(inner, tree, self)
            prefix = "EXPLAIN ANALYZE " if m and m.group(1) else "EXPLAIN "
            result = self._run(prefix + inner, limit, budget, owner, inner, tree)
        finally:
            cur.close()
        plan = "\n".join(str(r[-1]) for r in result.rows)
        return result._replace(names=["Query Plan"], types=["varchar"], rows=[(plan,)])

    def _run(
        self,
        run_sql: str,
        limit: int,
        budget: sqlworker.Budget,
        owner: str | None,
        sql: str,
        tree: dict[str, Any],
    ) -> _Result:
        """Execute in a SQL worker under the bounds; at most ``limit`` rows (+ truncated)."""
        answer = self._ask(("run", run_sql, limit), budget, owner)
        if isinstance(answer, sqlworker.Failed):
            raise self._failure(answer, sql, tree)
        assert isinstance(answer, sqlworker.Rows)
        types = [trino_type(t) for t in answer.types]
        return _Result(answer.names, types, answer.rows, answer.truncated, answer.elapsed_ms)

    def _describe(self, sql: str, budget: sqlworker.Budget, owner: str | None) -> list[str]:
        """DuckDB's column types of ``sql`` (binding folds constants, so a worker does it)."""
        answer = self._ask(("describe", sql, 0), budget, owner)
        if isinstance(answer, sqlworker.Failed):
            raise self._failure(answer, sql, {})
        assert isinstance(answer, list)
        return answer

    def _ask(
        self, request: tuple[str, str, int], budget: sqlworker.Budget, owner: str | None
    ) -> Any:
        # The worker's own clock starts when it receives the request: what the budget has
        # left then, as the wait for a worker is not taken from it.
        bounds = sqlworker.Bounds(budget.left(), self.max_result_bytes, self.max_cell_bytes)
        return self._workers.call((*request, bounds), budget, owner=owner, wait_s=self.queue_wait_s)

    def _failure(self, failed: sqlworker.Failed, sql: str, tree: dict[str, Any]) -> ToolError:
        """The peer's error for a statement the worker could not answer."""
        if failed.kind == "timeout":
            return query_failed("context deadline exceeded", trino=False)
        if failed.kind == "busy":  # never a timeout of the statement: it did not start
            return ToolError(
                f"{failed.message}: the statement did not start; try again",
                code="sql_busy",
                category="unavailable",
                hint="Other queries hold the platform's SQL workers; retry the query.",
            )
        if failed.kind == "bound":
            return too_large(failed.message)
        if failed.kind == "memory":
            return out_of_memory()
        if failed.kind == "unavailable":
            return query_failed(failed.message, trino=False)
        error = getattr(duckdb, failed.name, None)
        if not (isinstance(error, type) and issubclass(error, duckdb.Error)):
            error = duckdb.Error
        return translate(sql, tree, error(failed.message))

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
                out["sample"] = [row_map(names, r) for r in rows]
        return out

    def _resolve(self, catalog: str, schema: str, table: str, *, at: int) -> tuple[Column, ...]:
        """The table's columns, or the Trino error DESCRIBE gives for a name that is not there."""
        where = f"line 1:{at + 1}: "

        def failed(what: str) -> ToolError:
            return query_failed(
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
            raise query_failed(
                f"USER_ERROR: line 1:17: Schema '{schema.lower()}' does not exist",
                "failed to list tables: ",
                prefix="Failed to list tables: ",
            )
        if catalog.lower() == "system":
            return []
        if schema.lower() == "information_schema":
            return list(_INFORMATION_SCHEMA_TABLES)
        return self.tables(schema)


_INFORMATION_SCHEMA_TABLES: Final = (
    "applicable_roles", "columns", "enabled_roles", "roles", "schemata",
    "table_privileges", "tables", "views",
)  # fmt: skip


def _browse_failed(level: str, catalog: str, at: int) -> ToolError:
    """The failure of ``SHOW SCHEMAS|TABLES FROM <catalog>...`` for a catalog that is not there."""
    reason = f"USER_ERROR: line 1:{at + 1}: Catalog '{catalog.lower()}' not found"
    return query_failed(reason, f"failed to list {level}: ", prefix=f"Failed to list {level}: ")


def _query_output(result: _Result, limit: int) -> dict[str, Any]:
    rows = [row_map(result.names, r) for r in result.rows]
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


# ---------------------------------------------------------------------------- the first word


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
                raise user_error(
                    sql, None, "Catalog must be specified when session catalog is not set"
                )
            if catalog not in CATALOGS:
                raise user_error(sql, offset, f"Catalog '{catalog}' not found")
            return (
                ["Schema"],
                ["varchar"],
                [(s,) for s in _like(engine.schemas(catalog), m.group(2))],
            )
        parts = [_unquote(p) for p in re.findall(_NAME, m.group(1) or "")]
        if kind == "tables":
            if len(parts) < 2:
                what = "schema" if not parts else "catalog"
                raise user_error(
                    sql,
                    None,
                    f"{what.capitalize()} must be specified when session {what} is not set",
                )
            catalog, schema = parts
            if catalog not in CATALOGS:
                raise user_error(sql, offset, f"Catalog '{catalog}' not found")
            if schema not in engine.schemas(catalog):
                raise user_error(sql, offset, f"Schema '{schema}' does not exist")
            names = engine.tables(schema) if catalog == CATALOG else []
            return ["Table"], ["varchar"], [(t,) for t in _like(names, m.group(2))]
        if len(parts) < 3:
            what = "schema" if len(parts) < 2 else "catalog"
            raise user_error(
                sql, offset, f"{what.capitalize()} must be specified when session {what} is not set"
            )
        catalog, schema, table = parts
        columns = engine.columns(schema, table) if catalog == CATALOG else None
        if columns is None:
            raise user_error(sql, offset, f"Table '{catalog}.{schema}.{table}' does not exist")
        names = ["Column", "Type", "Extra", "Comment"]
        return names, ["varchar"] * 4, [(c.name, c.type, "", "") for c in columns]
    raise user_error(sql, 0, "this SHOW statement is not supported by refplatform's SQL engine")


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


__all__ = [
    "DEFAULT_LIMIT",
    "DEFAULT_TIMEOUT_S",
    "MAX_LIMIT",
    "MAX_TIMEOUT_S",
    "QUEUE_WAIT_S",
    "SqlEngine",
]
