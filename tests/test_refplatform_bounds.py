"""refplatform stays bounded in time and memory whatever a model or a client sends it.

Each test is an attack of issue 27 (item 8), sent as the attacker sent it, over loopback
where it came over loopback: SQL that made a regex or DuckDB's parser super-linear,
queries that spun or ballooned past DuckDB's memory_limit, request bodies read whole,
MCP sessions that never ended. Peak memory is the child server's own ``VmHWM``
(benchmarks/bounds.py starts it), never this test process's.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator

import pytest

from benchledger.benchmarks.bounds import (
    ADMIN_KEY,
    CEILING_KB,
    ORDERS,
    PROTOCOL,
    ROOT,
    SPIN,
    Mcp,
    Served,
    huge_body,
)
from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.packs import default_pack
from benchledger.refplatform.server import RunningPlatform
from benchledger.refplatform.toolkits import sqlworker
from benchledger.refplatform.toolkits.sql import SqlEngine
from benchledger.refplatform.toolkits.sql_render import query_text
from benchledger.refplatform.toolkits.sqlworker import GRACE_S

READ_ONLY = "read-only"


@pytest.fixture(scope="module")
def engine() -> Iterator[SqlEngine]:
    eng = SqlEngine(default_pack())
    yield eng
    eng.close()


@pytest.fixture(scope="module")
def served() -> Iterator[Served]:
    server = Served()
    yield server
    server.stop()


def _sql_error(engine: SqlEngine, sql: str, **kwargs: object) -> str:
    with pytest.raises(ToolError) as caught:
        engine.query(sql, **kwargs)  # type: ignore[arg-type]
    return caught.value.message


# ---------------------------------------------------------------------------- the statement

# (shape, SQL of about n characters, what the engine answers): each at n and 10n, in a
# child process, so that a super-linear path shows as the child not finishing.
CLASSIFY = textwrap.dedent(
    """
    import json, sys
    from benchledger.refplatform.errors import ToolError
    from benchledger.refplatform.packs import default_pack
    from benchledger.refplatform.toolkits.sql import SqlEngine

    SHAPES = {
        "spaces": lambda n: " " * n,
        "open-parens-and-spaces": lambda n: "( " * (n // 2),
        "line-comments": lambda n: "-- c\\n" * (n // 5) + "x",
        "block-comments": lambda n: "/* c */ " * (n // 8) + "x",
        "unterminated-comments": lambda n: "/*" * (n // 2),
        "explain-then-spaces": lambda n: "EXPLAIN" + " " * n + "x",
        "show-like-wildcards": lambda n: "SHOW TABLES FROM memory.bench LIKE '"
        + "%" * (n // 100) + "x'",
        "open-parens-for-the-parser": lambda n: "SELECT " + "(" * n,
    }
    engine = SqlEngine(default_pack())
    out = {}
    for name, make in SHAPES.items():
        for n in (int(sys.argv[1]), 10 * int(sys.argv[1])):
            try:
                engine.query(make(n), 5)
                out[f"{name}/{n}"] = "answered"
            except ToolError as exc:
                out[f"{name}/{n}"] = exc.message
    print(json.dumps(out))
    """
)


def test_classifying_a_statement_takes_time_linear_in_its_length():
    # 20,000 spaces once held the whole server ~20 s (three quantifiers splitting one run
    # of whitespace); 4,000 open parentheses held DuckDB's parser 25 s. Generous bound.
    proc = subprocess.run(
        [sys.executable, "-c", CLASSIFY, "4000"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    answers = json.loads(proc.stdout)
    assert len(answers) == 16
    for key, answer in answers.items():
        if key.startswith("show-like"):
            assert answer == "answered", key
        elif key.startswith("open-parens-for"):
            assert "parentheses nested more than 256 deep" in answer, (key, answer)
        else:
            assert READ_ONLY in answer, (key, answer)


@pytest.mark.parametrize(
    ("sql", "expected"),
    [
        (" " * 20_000, READ_ONLY),
        (" " * 200_000, "Query text length (200000) exceeds the maximum length (50000)"),
        ("SELECT " + "(" * 20_000, "line 1:264: parentheses nested more than 256 deep"),
        ("SELECT " + "abs(" * 200 + "1.5" + ")" * 200 + " AS x", "nested too deeply"),
    ],
    ids=["20k-spaces", "200k-spaces", "20k-open-parens", "200-nested-calls"],
)
def test_an_oversize_or_overdeep_statement_is_refused_in_trinos_form(engine, sql, expected):
    message = _sql_error(engine, sql)
    assert expected in message


def test_json_nested_deeper_than_python_goes_is_left_as_text(engine):
    out = engine.query("SELECT repeat('[', 5000) || repeat(']', 5000) AS j", unwrap_json=True)
    assert out["columns"][0]["type"] == "VARCHAR" and out["rows"][0]["j"].startswith("[[[")


# ---------------------------------------------------------------------------- the query


SPINS = [
    # Before, 50 MB of '<' was rendered (as 300 MB of \u003c) after the timer had stopped.
    ("materialising-a-huge-value", "SELECT repeat('<', 50000000) AS x", r"exceeds 1048576 bytes"),
    # Before, the type probe that a decimal literal asks for ran with no timer at all:
    # 17 s and 2 GB for this one under a 3 s timeout.
    (
        "folded-in-a-type-probe",
        "SELECT len(generate_series(1, 50000000)) / 2.0 AS d",
        r"context deadline exceeded|INSUFFICIENT_RESOURCES: Query exceeded per-node memory",
    ),
]


@pytest.mark.parametrize(("sql", "expected"), [s[1:] for s in SPINS], ids=[s[0] for s in SPINS])
def test_a_spinning_query_ends_at_its_timeout_or_bound_whatever_it_spins_in(engine, sql, expected):
    started = time.monotonic()
    message = _sql_error(engine, sql, timeout_s=3)
    assert re.search(expected, message), message
    assert time.monotonic() - started < 3 + GRACE_S + 3
    assert engine.query("SELECT 1 AS x")["rows"] == [{"x": 1}]


def test_a_statement_that_ignores_its_interrupt_is_killed_with_its_worker(engine):
    # The worker's own watchdog set past the caller's deadline: only the kill can stop it.
    pool = engine._workers
    bounds = sqlworker.Bounds(60.0, 1 << 20, 1 << 20)
    started = time.monotonic()
    answer = pool.call(("run", SPIN, 1, bounds), sqlworker.Budget(1))
    assert answer == sqlworker.Failed("timeout", "", "killed at its deadline")
    assert time.monotonic() - started < 1 + GRACE_S + 3
    assert engine.query("SELECT 1 AS x")["rows"] == [{"x": 1}]  # a fresh worker answers


BALLOONS = [
    ("repeat-300mb", "SELECT repeat('x', 300000000) AS x"),
    ("generate-series-30m", "SELECT generate_series(1, 30000000) AS x"),
    ("repeat-1mb-per-row", f"SELECT repeat('x', 1000000) AS x FROM {ORDERS}"),
    ("string-agg", f"SELECT string_agg(repeat('x', 1000), ',') FROM {ORDERS} a, {ORDERS} b"),
]


@pytest.mark.parametrize("sql", [b[1] for b in BALLOONS], ids=[b[0] for b in BALLOONS])
def test_a_ballooning_query_is_a_resource_error_and_the_server_stays_small(served, sql):
    mcp = Mcp(served.host, served.port)
    try:
        mcp.open()
        mcp.ready_for_sql()
        is_error, text = mcp.tool("trino_query", {"sql": sql})
        assert is_error and "INSUFFICIENT_RESOURCES: Query exceeded per-node memory" in text
        is_error, text = mcp.tool("trino_query", {"sql": f"SELECT count(*) AS n FROM {ORDERS}"})
        assert not is_error, text
    finally:
        mcp.close()
    server_kb, worker_kb = served.peak_kb()
    assert server_kb < CEILING_KB, f"server VmHWM {server_kb} kB"
    assert worker_kb < CEILING_KB, f"SQL worker VmHWM {worker_kb} kB"


def test_a_result_over_the_size_bound_is_a_tool_error_naming_the_bound():
    small = SqlEngine(default_pack(), max_result_bytes=64 << 10, max_cell_bytes=1 << 10)
    try:
        whole = _sql_error(small, f"SELECT * FROM {ORDERS}")
        assert "INSUFFICIENT_RESOURCES: Query result too large: the result exceeds 65536 " in whole
        cell = _sql_error(small, "SELECT repeat('x', 2000) AS big")
        assert "a value of column 'big' exceeds 1024 bytes" in cell
        assert small.query(f"SELECT * FROM {ORDERS}", 10)["row_count"] == 10
    finally:
        small.close()


def test_a_rendered_result_over_the_size_bound_is_refused_though_its_rows_fit(engine):
    # Go escapes '<' as \u003c: 0.9 MB of rows become 5.4 MB of text.
    out = engine.query(f"SELECT repeat('<', 900) AS x FROM {ORDERS}")
    with pytest.raises(ToolError, match="the result exceeds 4194304 bytes"):
        query_text(out)


# ---------------------------------------------------------------------------- the transport


@pytest.fixture(scope="module")
def platform() -> Iterator[RunningPlatform]:
    with RunningPlatform(admin_key=ADMIN_KEY, pool_size=2) as running:
        yield running


def test_a_long_name_in_a_query_is_enriched_in_time_linear_in_the_sql(platform):
    # The enrichment's table-name scan tried every position inside one long identifier:
    # quadratic, 4.7 s for 8,000 characters, minutes for this one.
    mcp = Mcp("127.0.0.1", platform.port, timeout=30)
    try:
        mcp.open()
        mcp.ready_for_sql()
        sql = f"SELECT count(*) AS {'n' * 40_000} FROM {ORDERS}"
        started = time.monotonic()
        is_error, text = mcp.tool("trino_query", {"sql": sql})
        assert not is_error, text[:200]
        assert time.monotonic() - started < 10
    finally:
        mcp.close()


@pytest.mark.parametrize("chunked", [False, True], ids=["declared-length", "chunked"])
def test_a_huge_rest_body_is_refused_with_413_as_soon_as_it_passes_the_bound(platform, chunked):
    answer, refused = huge_body("127.0.0.1", platform.port, chunked=chunked, total=64 << 20)
    assert refused, answer
    sent_mib = int(answer.rsplit(" after ", 1)[1].split()[0])
    assert sent_mib <= 5  # the 4 MiB bound and the chunk that passed it; never the rest


def _initialize(port: int) -> tuple[int, dict[str, object] | None]:
    mcp = Mcp("127.0.0.1", port)
    try:
        return mcp.request(
            "initialize",
            {"protocolVersion": PROTOCOL, "capabilities": {},
             "clientInfo": {"name": "test", "version": "1"}},
        )  # fmt: skip
    finally:
        mcp.close()  # the connection; the session it opened stays open


def test_mcp_sessions_past_the_cap_are_refused_until_idle_ones_expire():
    with RunningPlatform(admin_key=ADMIN_KEY, pool_size=2, max_sessions=2, session_idle_s=1) as p:
        assert [_initialize(p.port)[0] for _ in range(2)] == [200, 200]
        status, answer = _initialize(p.port)
        assert status == 503 and answer is not None
        assert answer["error"] == {"code": -32603, "message": "Too many open sessions"}
        # Idle sessions close after 1 s: a bounded poll for the room they leave.
        deadline = time.monotonic() + 30
        while _initialize(p.port)[0] != 200:
            assert time.monotonic() < deadline, "idle sessions never expired"
            time.sleep(0.2)


def test_a_query_past_the_memory_limit_spills_nothing_into_the_users_folder(tmp_path):
    # An in-memory DuckDB spills into ./.tmp of the current folder unless told not to.
    script = textwrap.dedent(
        """
        import duckdb
        from benchledger.refplatform.toolkits.sql_database import _configure
        db = duckdb.connect(":memory:")
        _configure(db)
        print(repr(db.execute("SELECT current_setting('temp_directory')").fetchone()[0]))
        db.execute("SET memory_limit = '40MB'")
        try:
            db.execute("SELECT count(*) FROM (SELECT range r, repeat('x', 100) s "
                       "FROM range(3000000) ORDER BY s, r DESC)").fetchall()
        except duckdb.OutOfMemoryException:
            print("refused")
        """
    )
    root = str(__import__("pathlib").Path(__file__).resolve().parent.parent)
    res = subprocess.run(
        [sys.executable, "-c", script],
        cwd=tmp_path,
        env={"PYTHONPATH": root, "PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.stdout.split() == ["''", "refused"], res.stderr
    assert list(tmp_path.iterdir()) == []
