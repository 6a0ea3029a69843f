"""refplatform's SQL engine answers as the peer's live Trino tools did, and refuses what it must.

The first half replays every ``trino_query``, ``trino_describe_table`` and
``trino_browse`` call of the peer's k=5 run (its transcripts hold the live platform's
answers) against ``SqlEngine`` over the peer's seed pack, compares the tool's text byte for
byte, and prints the counts. The second half is the attack surface
(docs/refplatform.md, Seed packs and SQL).
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
import re
import shutil
import threading
import time
from collections import Counter
from typing import Any, NamedTuple

import duckdb
import pytest

from benchledger.refplatform.errors import PackError, ToolError
from benchledger.refplatform.packs import DEFAULT_PACK_DIR, default_pack, load_pack
from benchledger.refplatform.toolkits.sql import SqlEngine
from benchledger.refplatform.toolkits.sql_database import loaded
from benchledger.refplatform.toolkits.sql_render import (
    browse_text,
    describe_text,
    go_float,
    query_text,
)
from benchledger.refplatform.toolkits.sql_trino import READ_ONLY
from tests.conftest import peer_dir

K5 = os.path.join("bench", "results", "s5-anthropic-k5")
# The peer's own harness answers this once an episode's tool budget is spent; the call
# never reached the platform, so there is nothing to compare.
HARNESS_REFUSAL = "tool-call budget exhausted"
NOT_IN_PACK = "e2e_test"  # a schema the live deployment had from its own e2e tests


class Call(NamedTuple):
    """One recorded tool call and the live platform's answer."""

    transcript: str  # <run>/<episode>.json
    call_id: str
    tool: str
    args: dict[str, Any]
    text: str
    is_error: bool

    @property
    def key(self) -> str:
        return f"{self.transcript}:{self.call_id}"


def _peer_or_none() -> str | None:
    try:
        return peer_dir()
    except pytest.skip.Exception:
        return None


@functools.cache
def _calls() -> tuple[Call, ...]:
    peer = _peer_or_none()
    if peer is None:
        return ()
    out = []
    pattern = os.path.join(peer, K5, "*", "lifecycle-a3.json.transcripts", "*.json")
    for path in sorted(glob.glob(pattern)):
        with open(path, encoding="utf-8") as fh:
            episode = json.load(fh)
        name = f"{path.split(os.sep)[-3]}/{os.path.basename(path)}"
        asked: dict[str, dict[str, Any]] = {}
        for turn in episode["transcript"]:
            for call in turn.get("tool_calls") or []:
                asked[call["id"]] = call
            for result in turn.get("tool_results") or []:
                call = asked[result["call_id"]]
                if call["name"].startswith("trino_"):
                    out.append(
                        Call(name, call["id"], call["name"], call["args"], result["text"],
                             result["is_error"])
                    )  # fmt: skip
    return tuple(out)


def _of(tool: str) -> list[Call]:
    return [c for c in _calls() if c.tool == tool]


@pytest.fixture(scope="module")
def engine():
    peer = _peer_or_none()
    if peer is None:
        pytest.skip("the peer's seed pack is not on this machine")
    eng = SqlEngine(load_pack(os.path.join(peer, "bench", "seed")))
    yield eng
    eng.close()


# ---------------------------------------------------------------------------- judging a call

_DURATION = re.compile(r'"duration_ms": \d+')


def _ordered(sql: str) -> bool:
    """Whether the statement's own (outermost) ORDER BY fixes the row order."""
    tree = json.loads(duckdb.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()[0])
    node = tree["statements"][0]["node"]
    return any(m.get("type") == "ORDER_MODIFIER" for m in node.get("modifiers", []))


def _close(a: Any, b: Any) -> bool:
    """Equal, except doubles may differ in their last digits (Trino sums in no fixed order)."""
    if isinstance(a, float) or isinstance(b, float):
        is_num = isinstance(a, int | float) and isinstance(b, int | float)
        return is_num and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_close(a[k], b[k]) for k in a)
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_close(x, y) for x, y in zip(a, b, strict=True))
    return a == b


def _row_key(row: dict[str, Any]) -> str:
    return json.dumps(
        {k: float(f"{v:.10g}") if isinstance(v, float) else v for k, v in row.items()},
        sort_keys=True,
    )


def _judge_query(engine: SqlEngine, call: Call) -> tuple[str, str]:
    """A verdict on one recorded ``trino_query`` call and what differs, if anything."""
    if call.text.startswith(HARNESS_REFUSAL):
        return "refused by the peer's harness", ""
    try:
        out = engine.query(call.args["sql"], call.args.get("limit"))
    except ToolError as exc:
        ours = exc.agent_text()
        if not call.is_error:
            return "DIFFERS", f"the live platform answered; ours failed: {ours}"
        if (exc.code, exc.category) != ("tool_error", "tool_error"):
            return "DIFFERS", f"error code/category {exc.code}/{exc.category}"
        if ours != call.text:
            return "DIFFERS", f"recorded error {call.text!r}, ours {ours!r}"
        return "failed in both", ""
    if call.is_error:
        return "DIFFERS", f"the live platform failed ({call.text!r}); ours answered"
    recorded, end = json.JSONDecoder().raw_decode(call.text)
    rest = call.text[end:]
    assert not rest or rest.startswith("\n{"), f"{call.key}: unexpected trailing text"
    ours_text = query_text(out)
    if _DURATION.sub("", ours_text) == _DURATION.sub("", call.text[:end]):
        return "same text", ""
    mine = json.loads(ours_text)
    for doc in (mine, recorded):
        doc["stats"]["duration_ms"] = 0
    if not _ordered(call.args["sql"]):
        for doc in (mine, recorded):
            doc["rows"].sort(key=_row_key)
        if mine == recorded:
            return "same text, rows in another order (no ORDER BY)", ""
    if _close(mine, recorded):
        return "same but a double's last digits", ""
    return "DIFFERS", f"recorded {json.dumps(recorded)[:600]}\nours     {json.dumps(mine)[:600]}"


def _listed(text: str) -> list[str]:
    return re.findall(r"^- `([^`]+)`$", text, re.M)


def _judge_catalog_call(engine: SqlEngine, call: Call) -> tuple[str, str]:
    """A verdict on one recorded ``trino_describe_table`` or ``trino_browse`` call."""
    args = dict(call.args)
    try:
        if call.tool == "trino_browse":
            ours = browse_text(engine.browse(**args))
        else:
            sample = bool(args.pop("include_sample", False))
            ours = describe_text(engine.describe_table(**args, include_sample=sample))
    except ToolError as exc:
        ours = exc.agent_text()
    # The platform appends its enrichment (semantic_context, ...) as further text blocks.
    if call.text == ours or call.text.startswith(ours + "\n{"):
        return "same text", ""
    if args.get("schema") == NOT_IN_PACK:
        if f"Schema '{NOT_IN_PACK}' does not exist" in ours:
            return f"not in the pack (memory.{NOT_IN_PACK})", ""
    elif call.tool == "trino_browse" and NOT_IN_PACK in _listed(call.text):
        live = [s for s in _listed(call.text) if s != NOT_IN_PACK]
        if _listed(ours) == live:
            return f"same but for memory.{NOT_IN_PACK}, not in the pack", ""
    return "DIFFERS", f"recorded {call.text[:500]!r}\nours     {ours[:500]!r}"


# ---------------------------------------------------------------------------- the transcripts


@pytest.mark.parametrize("call", _of("trino_query"), ids=lambda c: c.key)
def test_every_recorded_trino_query_answers_as_the_live_platform_did(engine, call):
    verdict, detail = _judge_query(engine, call)
    assert verdict != "DIFFERS", f"{call.key} ({call.args['sql']!r}):\n{detail}"


@pytest.mark.parametrize(
    "call", _of("trino_describe_table") + _of("trino_browse"), ids=lambda c: c.key
)
def test_every_recorded_describe_and_browse_answers_as_the_live_platform_did(engine, call):
    verdict, detail = _judge_catalog_call(engine, call)
    assert verdict != "DIFFERS", f"{call.key} {call.tool}({call.args}):\n{detail}"


def _report(title: str, counts: Counter[str], capsys: pytest.CaptureFixture[str]) -> None:
    lines = [f"{title}: {sum(counts.values())} calls"]
    lines += [f"    {n:4d}  {verdict}" for verdict, n in counts.most_common()]
    with capsys.disabled():
        print("\n" + "\n".join(lines))


def test_the_trino_query_replay_counts_are_reported_and_pinned(engine, capsys):
    calls = _of("trino_query")
    if not calls:
        pytest.skip("no transcripts")
    counts = Counter(_judge_query(engine, c)[0] for c in calls)
    _report("trino_query calls of the k=5 transcripts", counts, capsys)
    # How the 361 answered calls split among the first three verdicts varies from run to
    # run: DuckDB's parallel GROUP BY emits rows in no fixed order, and both engines sum
    # doubles in no fixed order (the live platform's own answers to one query differ).
    alike = ("same text", "same text, rows in another order (no ORDER BY)",
             "same but a double's last digits")  # fmt: skip
    assert sum(counts[v] for v in alike) == 361
    assert counts["same but a double's last digits"] <= 6
    assert counts["failed in both"] == 21
    assert counts["refused by the peer's harness"] == 1
    assert counts["DIFFERS"] == 0


def test_the_describe_and_browse_replay_counts_are_reported_and_pinned(engine, capsys):
    calls = _of("trino_describe_table") + _of("trino_browse")
    if not calls:
        pytest.skip("no transcripts")
    counts = Counter(f"{c.tool}: {_judge_catalog_call(engine, c)[0]}" for c in calls)
    _report("trino_describe_table and trino_browse calls of the k=5 transcripts", counts, capsys)
    assert counts == {
        "trino_describe_table: same text": 345,
        "trino_describe_table: not in the pack (memory.e2e_test)": 5,
        "trino_browse: same text": 126,
        "trino_browse: same but for memory.e2e_test, not in the pack": 5,
        "trino_browse: not in the pack (memory.e2e_test)": 2,
    }


# ---------------------------------------------------------------------------- shapes and rendering


def test_a_query_has_the_peers_result_shape_and_rendering(engine):
    out = engine.query(
        "SELECT order_ts, CAST(order_ts AS DATE) AS day, CAST(amount AS DECIMAL(12,2)) / 100 "
        "AS usd, amount, discount * 1.0 / amount AS share, status FROM memory.bench.orders "
        "WHERE order_id = 1000"
    )
    assert list(out) == ["columns", "rows", "row_count", "stats"]
    assert [c["type"] for c in out["columns"]] == [
        "TIMESTAMP", "DATE", "DECIMAL", "INTEGER", "DECIMAL", "VARCHAR",
    ]  # fmt: skip
    row = out["rows"][0]
    assert row["order_ts"] == "2025-11-11T09:05:00-08:00"  # RFC 3339 at the LA offset
    assert row["day"] == "2025-11-11T00:00:00-08:00"  # a DATE is a midnight timestamp
    assert row["usd"] == "586.92" and row["share"] == "0.2"  # decimals as text, Trino's scale
    assert out["stats"] | {"duration_ms": 0} == {
        "row_count": 1, "truncated": False, "limit_applied": 1000, "duration_ms": 0,
    }  # fmt: skip
    text = query_text(out)
    assert text.startswith('{\n  "columns": [\n    {\n      "name": "order_ts",')
    assert '"rows": [\n    {\n      "amount": 58692,\n      "day": ' in text  # keys sorted


def test_unnamed_columns_are_named_as_trino_names_them(engine):
    out = engine.query(
        "SELECT o.status, count(*), max(o.amount) AS top FROM memory.bench.orders o "
        "GROUP BY 1 ORDER BY 1"
    )
    assert [c["name"] for c in out["columns"]] == ["status", "_col1", "top"]
    assert [c["type"] for c in out["columns"]] == ["VARCHAR", "BIGINT", "INTEGER"]


@pytest.mark.parametrize(
    ("value", "text"),
    [(0.0, "0"), (1.0, "1"), (0.1, "0.1"), (1e-7, "1e-7"), (1.5e21, "1.5e+21"),
     (123456789.25, "123456789.25"), (1e20, "100000000000000000000")],
    ids=["zero", "one", "tenth", "tiny", "huge", "plain", "below-1e21"],
)  # fmt: skip
def test_doubles_render_as_gos_encoding_json_writes_them(value, text):
    assert go_float(value) == text


def test_text_in_a_result_is_escaped_as_go_escapes_it(engine):
    out = engine.query("SELECT 'a<b & c>d' AS s")
    assert '"s": "a\\u003cb \\u0026 c\\u003ed"' in query_text(out)


def test_csv_and_markdown_render_as_the_peers_formats(engine):
    out = engine.query(
        "SELECT status, count(*) AS n FROM memory.bench.orders GROUP BY status ORDER BY status"
    )
    ms = out["stats"]["duration_ms"]
    assert query_text(out, "csv") == (
        "status,n\ncompleted,948\npending,86\nrefunded,166\n"
        f"\n# 3 rows returned, executed in {ms}ms"
    )
    assert query_text(out, "markdown").startswith(
        "| status | n |\n| --- | --- |\n| completed | 948 |"
    )
    with pytest.raises(ToolError, match='invalid format "xml": must be one of json, csv, markdown'):
        query_text(out, "xml")


def test_describe_and_browse_have_the_peers_shapes(engine):
    described = engine.describe_table("memory", "bench", "legacy_orders", include_sample=True)
    assert described["columns"][2] == {"name": "order_date", "type": "date"}
    assert described["column_count"] == 4 and len(described["sample"]) == 5
    assert described["sample"][0]["order_date"] == "2025-11-11T00:00:00-08:00"
    assert engine.browse() == {"level": "catalogs", "items": ["memory", "system"], "count": 2}
    assert engine.browse("memory")["items"] == ["bench", "default", "information_schema"]
    tables = engine.browse("memory", "bench", "%order%")
    assert tables["items"] == ["legacy_orders", "orders"] and tables["pattern"] == "%order%"
    assert engine.browse("memory", "bench", "zzz")["items"] is None  # Go's nil slice
    with pytest.raises(ToolError, match=r"^schema requires catalog$"):
        engine.browse(schema="bench")


# ---------------------------------------------------------------------------- refusals


def _all_rows(engine: SqlEngine) -> dict[str, Any]:
    """Every table's full contents: the data an attack must leave exactly as it was."""
    return {
        t: engine.query(f"SELECT * FROM memory.bench.{t}", 10000)["rows"]
        for t in engine.tables("bench")
    }


@pytest.fixture(scope="module")
def pristine(engine) -> dict[str, Any]:
    return _all_rows(engine)


TABLE_FN = "Table function 'read_csv' not registered"
ATTACKS = [
    ("read-csv", "SELECT * FROM read_csv('/etc/passwd')", TABLE_FN),
    ("read-text", "SELECT content FROM read_text('/etc/passwd')", "Table function 'read_text'"),
    ("read-file-by-name", "SELECT * FROM '/etc/passwd'", "Schema must be specified"),
    ("copy-to-file", "COPY (SELECT 1) TO '/tmp/benchledger-copy.csv'", READ_ONLY),
    ("export-database", "EXPORT DATABASE '/tmp/benchledger-export'", READ_ONLY),
    ("attach", "ATTACH '/tmp/benchledger-attach.db' AS x", READ_ONLY),
    ("install", "INSTALL httpfs", READ_ONLY),
    ("load", "LOAD httpfs", READ_ONLY),
    ("set", "SET enable_external_access = true", READ_ONLY),
    ("reset", "RESET lock_configuration", READ_ONLY),
    ("pragma", "PRAGMA database_list", READ_ONLY),
    ("drop-table", "DROP TABLE memory.bench.orders", READ_ONLY),
    ("create-table", "CREATE TABLE memory.bench.x AS SELECT 1 AS a", READ_ONLY),
    ("insert", "INSERT INTO memory.bench.orders SELECT * FROM memory.bench.orders", READ_ONLY),
    ("update", "UPDATE memory.bench.orders SET amount = 0", READ_ONLY),
    ("delete-after-comments", "/* c */ -- x\n  DELETE FROM memory.bench.orders", READ_ONLY),
    ("delete-in-a-cte", "WITH x AS (SELECT 1) DELETE FROM memory.bench.orders", READ_ONLY),
    ("stacked-statements", "SELECT 1; DROP TABLE memory.bench.orders", READ_ONLY),
    ("explain-a-write", "EXPLAIN DROP TABLE memory.bench.orders", READ_ONLY),
    ("duckdb-settings", "SELECT * FROM duckdb_settings()", "Table function 'duckdb_settings'"),
    ("duckdb-system-catalog", "SELECT * FROM system.main.duckdb_tables", "Schema 'main'"),
]


@pytest.mark.parametrize(("sql", "message"), [a[1:] for a in ATTACKS], ids=[a[0] for a in ATTACKS])
def test_an_attack_is_refused_in_the_peers_error_shape_and_changes_nothing(
    engine, pristine, sql, message
):
    with pytest.raises(ToolError) as caught:
        engine.query(sql)
    error = caught.value
    assert error.envelope() == {"code": "tool_error", "category": "tool_error",
                                "message": error.message}  # fmt: skip
    assert message in error.message
    assert _all_rows(engine) == pristine
    assert engine.tables("bench") == [
        "customers",
        "daily_region_revenue",
        "legacy_orders",
        "orders",
    ]
    assert not glob.glob("/tmp/benchledger-copy.csv") and not glob.glob("/tmp/benchledger-attach*")


def test_below_the_statement_gate_the_database_itself_refuses_files_and_settings(engine):
    cur = engine._cursor()  # past the SQL gate: the configuration lock must hold alone
    try:
        with pytest.raises(duckdb.PermissionException):
            cur.execute("SELECT * FROM read_csv('/etc/passwd')")
        with pytest.raises(duckdb.Error, match="locked"):
            cur.execute("SET enable_external_access = true")
    finally:
        cur.close()


def test_a_long_query_is_interrupted_at_its_timeout_and_the_engine_carries_on(engine):
    start = time.monotonic()
    with pytest.raises(ToolError, match=r"^Query failed: query failed: context deadline exceeded"):
        engine.query(
            "SELECT count(*) FROM memory.bench.orders a, memory.bench.orders b, "
            "memory.bench.orders c, memory.bench.orders d",
            timeout_s=0.5,
        )
    assert time.monotonic() - start < 5
    assert engine.query("SELECT count(*) AS n FROM memory.bench.orders")["rows"] == [{"n": 1200}]


def test_a_huge_result_is_cut_at_the_row_limit_as_the_peer_cuts_it(engine):
    huge = "SELECT a.order_id FROM memory.bench.orders a, memory.bench.orders b"  # 1.44M rows
    out = engine.query(huge, 7)
    assert out["row_count"] == len(out["rows"]) == 7
    assert out["stats"]["truncated"] and out["stats"]["limit_applied"] == 7
    assert engine.query(huge)["stats"]["limit_applied"] == 1000  # the S5 arm's default
    assert engine.query(huge, 10**9)["stats"]["limit_applied"] == 10000  # and its maximum
    assert not engine.query("SELECT 1 AS x", 1)["stats"]["truncated"]


TRINO_REFUSALS = [
    ("unqualified-table", "SELECT count(*) FROM orders",
     "line 1:22: Schema must be specified when session schema is not set"),
    ("schema-without-catalog", "SELECT count(*) FROM bench.orders",
     "line 1:22: Catalog must be specified when session catalog is not set"),
    ("unknown-catalog", "SELECT 1 FROM hive.bench.orders", "line 1:15: Catalog 'hive' not found"),
    ("unknown-schema", "SELECT 1 FROM memory.sales.orders",
     "line 1:15: Schema 'sales' does not exist"),
    ("unknown-table", "SELECT 1 FROM memory.bench.sales",
     "line 1:15: Table 'memory.bench.sales' does not exist"),
    ("unknown-column-on-line-2", "SELECT status\nFROM memory.bench.orders WHERE region = 'x'",
     "line 2:32: Column 'region' cannot be resolved"),
    ("qualified-unknown-column", "SELECT o.region FROM memory.bench.orders o",
     "line 1:8: Column 'o.region' cannot be resolved"),
    ("unknown-function", "SELECT nosuch(1)", "line 1:8: Function 'nosuch' not registered"),
    ("label-star-in-count", "SELECT count(o.*) FROM memory.bench.orders o",
     "line 1:14: label.* syntax is only supported as the only argument of row pattern count"),
    ("trailing-semicolon", "SELECT 1;", "line 1:9: mismatched input ';'"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("sql", "message"), [r[1:] for r in TRINO_REFUSALS], ids=[r[0] for r in TRINO_REFUSALS]
)
def test_what_trino_refuses_is_refused_with_trinos_kind_of_message(engine, sql, message):
    with pytest.raises(ToolError) as caught:
        engine.query(sql)
    prefix = 'Query failed: query failed: trino: query failed (200 OK): "USER_ERROR: '
    assert caught.value.message == f'{prefix}{message}"' or caught.value.message.startswith(
        prefix + message
    ), caught.value.message


def test_integer_and_decimal_arithmetic_follow_trino(engine):
    row = engine.query(
        "SELECT 7 / 2 AS i, -7 / 2 AS n, 10 / 4.0 AS d, round(12.345, 2) AS r, "
        "avg(amount / 100.0) AS a, typeof(avg(amount / 100.0)) AS t FROM memory.bench.orders"
    )["rows"][0]
    assert row == {"i": 3, "n": -3, "d": "2.5", "r": "12.350", "a": "1532.9", "t": "decimal(12,1)"}


def test_the_engine_answers_from_many_threads_at_once(engine):
    errors: list[BaseException] = []

    def work(n: int) -> None:
        try:
            for _ in range(10):
                out = engine.query(
                    f"SELECT count(*) AS c FROM memory.bench.orders WHERE order_id < {1000 + n}"
                )
                assert out["rows"] == [{"c": n}]
        except BaseException as exc:  # reported below, from the main thread
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(n,)) for n in range(1, 9)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


# ---------------------------------------------------------------------------- loading


@pytest.fixture
def seed_copy(tmp_path) -> str:
    peer = _peer_or_none()
    if peer is None:
        pytest.skip("the peer's seed pack is not on this machine")
    dest = str(tmp_path / "seed")
    shutil.copytree(os.path.join(peer, "bench", "seed"), dest)
    return dest


def _append(pack_dir: str, sql: str) -> None:
    with open(os.path.join(pack_dir, "trino", "setup.sql"), "a", encoding="utf-8") as fh:
        fh.write(sql)


def test_setup_sql_that_fails_names_its_line(seed_copy):
    with open(os.path.join(seed_copy, "trino", "setup.sql"), encoding="utf-8") as fh:
        line = fh.read().count("\n") + 2  # the appended statement's line
    _append(seed_copy, "\nCREATE TABLE memory.bench.broken (a NOSUCHTYPE);\n")
    pack = load_pack(seed_copy)
    with pytest.raises(PackError, match=rf"^trino/setup\.sql:{line}: .*NOSUCHTYPE"):
        SqlEngine(pack)


def test_even_the_packs_own_sql_cannot_read_files(seed_copy):
    _append(seed_copy, "\nCREATE TABLE memory.bench.p AS SELECT * FROM read_csv('/etc/passwd');\n")
    with pytest.raises(PackError, match=r"^trino/setup\.sql:\d+: .*disabled"):
        SqlEngine(load_pack(seed_copy))


def test_engines_over_one_pack_share_its_tables_loaded_once():
    # Loading a pack's INSERTs is the dearest part of starting a platform, and a run starts
    # one for its preflight and one per pass (or per unit), all over the same pack.
    first = SqlEngine(default_pack())
    second = SqlEngine(load_pack(DEFAULT_PACK_DIR))  # another Pack object, the same SQL
    try:
        assert loaded(first.pack) is loaded(second.pack)
        first.close()  # closes its own connection only: the other engine answers on
        got = second.query("SELECT count(*) AS n FROM memory.bench.customers")
        assert got["rows"][0]["n"] > 0
    finally:
        second.close()
