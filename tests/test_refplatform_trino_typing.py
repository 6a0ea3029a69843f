"""refplatform's SQL refuses what Trino's type system refuses, with Trino's message and code.

One test per coercion rule (docs/refplatform.md, "Trino's typing"): refused with Trino's
``Cannot apply operator`` (or ``Cannot check``, ``Unexpected parameters``, ...) text at
Trino's ``line:col``, in the peer's error form; the coercions Trino does make still answer.
Then the outside check: every ``trino_query`` call recorded in the peer's transcripts
(the S5 k=5 runs and the knowledge-pollution study's arms) is replayed on refplatform over
the peer's seed pack, and must get rows where the live platform returned rows (the same
rows, as the live platform rendered them) and an error where it returned an error.
"""

from __future__ import annotations

import functools
import glob
import json
import math
import os
import re
from collections import Counter
from typing import Any, NamedTuple

import duckdb
import pytest

from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.packs import load_pack
from benchledger.refplatform.toolkits.sql import SqlEngine
from benchledger.refplatform.toolkits.sql_render import query_text
from tests.conftest import peer_dir

PREFIX = 'Query failed: query failed: trino: query failed (200 OK): "USER_ERROR: '


@pytest.fixture(scope="module")
def engine():
    try:
        peer = peer_dir()
    except pytest.skip.Exception:
        pytest.skip("the peer's seed pack is not on this machine")
    eng = SqlEngine(load_pack(os.path.join(peer, "bench", "seed")))
    yield eng
    eng.close()


# ---------------------------------------------------------------------------- one test per rule

ORDERS = "FROM memory.bench.orders"
REFUSED = [
    ("timestamp-vs-varchar-literal", f"SELECT count(*) {ORDERS} WHERE order_ts >= '2025-02-01'",
     "line 1:57: Cannot apply operator: timestamp(3) <= varchar(10)"),
    ("timestamp-vs-varchar-literal-on-a-later-line",
     f"SELECT count(*)\n{ORDERS}\nWHERE status = 'completed'\n  AND order_ts < '2026-02-01'",
     "line 4:16: Cannot apply operator: timestamp(3) < varchar(10)"),
    ("date-vs-varchar-literal",
     f"SELECT count(*) {ORDERS} WHERE DATE(order_ts) <= '2025-04-30'",
     "line 1:63: Cannot apply operator: date <= varchar(10)"),
    ("date-column-vs-varchar-literal",
     "SELECT count(*) FROM memory.bench.legacy_orders WHERE order_date = '2025-11-11'",
     "line 1:66: Cannot apply operator: date = varchar(10)"),
    ("integer-vs-varchar-literal", f"SELECT count(*) {ORDERS} WHERE amount > '100'",
     "line 1:55: Cannot apply operator: integer < varchar(3)"),
    ("varchar-vs-integer", f"SELECT count(*) {ORDERS} WHERE status <> 1",
     "line 1:55: Cannot apply operator: varchar = integer"),
    ("boolean-vs-integer", "SELECT TRUE = 1",
     "line 1:13: Cannot apply operator: boolean = integer"),
    ("timestamp-vs-number", f"SELECT count(*) {ORDERS} WHERE order_ts > 20250101",
     "line 1:57: Cannot apply operator: timestamp(3) < integer"),
    ("is-distinct-from", f"SELECT count(*) {ORDERS} WHERE amount IS DISTINCT FROM 'x'",
     "line 1:55: Cannot apply operator: integer IS DISTINCT FROM varchar(1)"),
    ("between-varchar-bounds",
     f"SELECT count(*) {ORDERS} WHERE order_ts BETWEEN '2025-01-01' AND '2025-02-01'",
     "line 1:57: Cannot check if timestamp(3) is BETWEEN varchar(10) and varchar(10)"),
    ("in-list-of-other-type", f"SELECT count(*) {ORDERS} WHERE amount IN (1, '2')",
     "line 1:55: IN value and list items must be the same type or coercible to a common "
     "type. Cannot find common type between integer and varchar(1), all types (without "
     "duplicates): [integer, varchar(1)]"),
    ("join-criteria", "SELECT count(*) FROM memory.bench.orders o JOIN memory.bench.customers c "
     "ON o.customer_id = c.name",
     "line 1:91: Cannot apply operator: integer = varchar"),
    ("arithmetic-integer-plus-varchar", f"SELECT amount + '1' {ORDERS}",
     "line 1:15: Cannot apply operator: integer + varchar(1)"),
    ("arithmetic-timestamp-minus-integer", f"SELECT order_ts - 1 {ORDERS}",
     "line 1:17: Cannot apply operator: timestamp(3) - integer"),
    ("arithmetic-in-where", f"SELECT count(*) {ORDERS} WHERE status * 2 > 1",
     "line 1:55: Cannot apply operator: varchar * integer"),
    ("coalesce-mixed", f"SELECT coalesce(amount, 'none') {ORDERS}",
     "line 1:8: All COALESCE operands must be the same type or coercible to a common type. "
     "Cannot find common type between integer and varchar(4), all types (without "
     "duplicates): [integer, varchar(4)]"),
    ("date-function-on-varchar-literal", "SELECT year('2025-01-01')",
     "line 1:8: Unexpected parameters (varchar(10)) for function year. Expected: year(date)"),
    ("date-trunc-on-varchar-literal", "SELECT date_trunc('month', '2025-01-01')",
     "line 1:8: Unexpected parameters (varchar(5), varchar(10)) for function date_trunc. "
     "Expected: date_trunc(varchar(x), date)"),
    ("concat-operator-with-integer", f"SELECT status || amount {ORDERS}",
     "line 1:15: Unexpected parameters (varchar, integer) for function concat."),
    ("through-a-cte",
     f"WITH o AS (SELECT order_ts AS ts {ORDERS}) SELECT count(*) FROM o WHERE ts >= '2025'",
     "line 1:92: Cannot apply operator: timestamp(3) <= varchar(4)"),
    ("through-a-subquery",
     f"SELECT count(*) FROM (SELECT order_ts AS ts {ORDERS}) s WHERE s.ts < '2025-01-01'",
     "line 1:84: Cannot apply operator: timestamp(3) < varchar(10)"),
    ("in-a-scalar-subquery",
     f"SELECT (SELECT count(*) {ORDERS} WHERE order_ts > '2025-01-01') AS n",
     "line 1:65: Cannot apply operator: timestamp(3) < varchar(10)"),
    ("iso-t-timestamp-cast", "SELECT CAST('2025-12-31T23:59:59' AS TIMESTAMP)",
     "Value cannot be cast to timestamp: 2025-12-31T23:59:59"),
    ("duckdb-cast-operator", f"SELECT count(*) {ORDERS} WHERE order_ts >= '2025-02-01'::timestamp",
     "line 1:72: mismatched input ':'"),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "message"), [r[1:] for r in REFUSED], ids=[r[0] for r in REFUSED])
def test_what_trinos_type_system_refuses_is_refused_with_its_message_and_code(engine, sql, message):
    with pytest.raises(ToolError) as caught:
        engine.query(sql)
    error = caught.value
    assert error.message.startswith(PREFIX + message), error.message
    assert (error.code, error.category) == ("tool_error", "tool_error")


ALLOWED = [
    ("date-vs-date-literal",
     "SELECT count(*) FROM memory.bench.legacy_orders WHERE order_date >= DATE '2025-11-01'", 1),
    ("timestamp-vs-timestamp-literal",
     f"SELECT count(*) {ORDERS} WHERE order_ts >= TIMESTAMP '2025-02-01 00:00:00'", 1),
    ("timestamp-vs-date", f"SELECT count(*) {ORDERS} WHERE order_ts >= DATE '2025-02-01'", 1),
    ("timestamp-vs-cast-varchar",
     f"SELECT count(*) {ORDERS} WHERE order_ts < CAST('2026-02-01' AS timestamp)", 1),
    ("date-of-timestamp-vs-date",
     f"SELECT count(*) {ORDERS} WHERE DATE(order_ts) = DATE '2025-05-01'", 1),
    ("varchar-vs-varchar", f"SELECT count(*) {ORDERS} WHERE status = 'completed'", 1),
    ("integer-vs-bigint", f"SELECT count(*) {ORDERS} WHERE amount > 3000000000", 1),
    ("integer-vs-double", f"SELECT count(*) {ORDERS} WHERE amount > 1.5e3", 1),
    ("integer-vs-decimal", f"SELECT count(*) {ORDERS} WHERE amount > 100.50", 1),
    ("integer-in-list", f"SELECT count(*) {ORDERS} WHERE order_id IN (1000, 1001)", 1),
    ("null-vs-anything", f"SELECT count(*) {ORDERS} WHERE order_ts <> NULL", 1),
    ("numeric-arithmetic", f"SELECT sum(amount - discount) / 100.0 AS usd {ORDERS}", 1),
    ("timestamp-plus-interval",
     f"SELECT max(order_ts + INTERVAL '1' DAY) AS t {ORDERS}", 1),
    ("timestamp-minus-timestamp",
     f"SELECT max(order_ts) - min(order_ts) AS span {ORDERS}", 1),
    ("date-function-on-timestamp",
     f"SELECT year(order_ts) AS y, count(*) AS n {ORDERS} GROUP BY 1", 1),
    ("date-trunc-on-timestamp",
     f"SELECT date_trunc('month', order_ts) AS m {ORDERS} GROUP BY 1 ORDER BY 1 LIMIT 1", 1),
    ("varchar-concat", f"SELECT status || '!' AS s {ORDERS} GROUP BY 1", 3),
    ("order-by-an-alias",
     f"SELECT status AS s, count(*) AS n {ORDERS} GROUP BY status ORDER BY s", 3),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "rows"), [r[1:] for r in ALLOWED], ids=[r[0] for r in ALLOWED])
def test_the_coercions_trino_makes_still_answer(engine, sql, rows):
    out = engine.query(sql)
    assert out["row_count"] == rows, out


CASTS = [
    ("timestamp-column-to-varchar-keeps-its-fraction",
     f"SELECT CAST(order_ts AS varchar) AS t {ORDERS} WHERE order_id = 1000",
     {"t": "2025-11-11 09:05:00.000"}),
    ("timestamp-literal-to-varchar-keeps-its-digits",
     "SELECT CAST(TIMESTAMP '2025-01-01 00:00:00' AS varchar) AS t",
     {"t": "2025-01-01 00:00:00"}),
    ("format-is-printf-style", "SELECT format('%.2f', 317090.5e0) AS f", {"f": "317090.50"}),
    ("iso-t-cast-no-row-reaches-it",
     f"SELECT count(*) AS n {ORDERS} WHERE status = 'COMPLETED' "
     "AND order_ts <= CAST('2025-12-31T23:59:59' AS TIMESTAMP)", {"n": 0}),
]  # fmt: skip


@pytest.mark.parametrize(("sql", "row"), [r[1:] for r in CASTS], ids=[r[0] for r in CASTS])
def test_casts_and_format_answer_as_trino_computes_them(engine, sql, row):
    assert engine.query(sql)["rows"] == [row]


def test_a_select_item_neither_aggregated_nor_grouped_is_named_as_trino_names_it(engine):
    with pytest.raises(ToolError) as caught:
        engine.query(f"SELECT typeof(order_ts) AS t, count(*) AS n {ORDERS}")
    assert caught.value.message == (
        f"{PREFIX}line 1:8: 'typeof(order_ts)' must be an aggregate expression or appear in "
        'GROUP BY clause"'
    )


# ---------------------------------------------------------------------------- the transcripts

_REACHED_TRINO = "Query failed: "  # the peer's trino_query handler's prefix for every SQL failure


class Call(NamedTuple):
    """One recorded ``trino_query`` call and the live platform's answer."""

    key: str  # <transcript path under the peer's folder>:<call id>
    args: dict[str, Any]
    text: str
    is_error: bool


@functools.cache
def _calls() -> tuple[Call, ...]:
    try:
        peer = peer_dir()
    except pytest.skip.Exception:
        return ()
    out = []
    pattern = os.path.join(peer, "bench", "results", "**", "*.transcripts", "*.json")
    for path in sorted(glob.glob(pattern, recursive=True)):
        with open(path, encoding="utf-8") as fh:
            episode = json.load(fh)
        name = os.path.relpath(path, os.path.join(peer, "bench", "results"))
        asked: dict[str, dict[str, Any]] = {}
        for turn in episode.get("transcript") or []:
            for call in turn.get("tool_calls") or []:
                asked[call["id"]] = call
            for result in turn.get("tool_results") or []:
                call = asked.get(result["call_id"])
                # claude-cli names an MCP tool mcp__<server>__<tool>
                if call and call["name"].rsplit("__", 1)[-1] == "trino_query":
                    key = f"{name}:{call['id']}"
                    out.append(Call(key, call["args"], result["text"], result["is_error"]))
    return tuple(out)


def _order_keys(sql: str, names: list[str]) -> list[str] | None:
    """The output columns the statement's outermost ORDER BY sorts on; None if it has none,
    [] if they are not all output columns (an ordinal, a column or an alias)."""
    try:
        raw = duckdb.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
        node = json.loads(raw[0])["statements"][0]["node"] if raw else {}
    except (duckdb.Error, KeyError, IndexError):
        return None
    orders = [
        o.get("expression") or {}
        for m in node.get("modifiers", [])
        if m.get("type") == "ORDER_MODIFIER"
        for o in m.get("orders", [])
    ]
    if not orders:
        return None
    keys = []
    for e in orders:
        text = str((e.get("literal") or {}).get("text", ""))
        if e.get("class") == "CONSTANT" and text.isdigit() and 0 < int(text) <= len(names):
            keys.append(names[int(text) - 1])
        elif e.get("class") == "COLUMN_REF" and str(e["column_names"][-1]).lower() in names:
            keys.append(str(e["column_names"][-1]).lower())
        else:
            return []
    return keys


def _close(a: Any, b: Any) -> bool:
    """Equal as rendered; doubles may differ in their last digits (sums in no fixed order)."""
    if isinstance(a, float) or isinstance(b, float):
        nums = isinstance(a, int | float) and isinstance(b, int | float)
        return nums and math.isclose(a, b, rel_tol=1e-12, abs_tol=1e-300)
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


_UNORDERED_ARRAY = re.compile(r"\barray_agg\s*+\((?![^)]*\border\s+by\b)", re.I)


def _sorted_arrays(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [
        {k: sorted(v, key=json.dumps) if isinstance(v, list) else v for k, v in row.items()}
        for row in rows
    ]


def _judge(engine: SqlEngine, call: Call) -> tuple[str, str]:
    """A verdict on one recorded call, and what differs if anything."""
    sql = call.args.get("sql")
    if call.is_error and not call.text.startswith(_REACHED_TRINO):
        # the tool's argument validation, an unknown connection, the harness's budget
        return "never reached Trino", ""
    if not isinstance(sql, str):
        return "DIFFERS", "no sql argument, yet the live platform answered"
    try:
        out = engine.query(sql, call.args.get("limit"))
    except ToolError as exc:
        if not call.is_error:
            return "DIFFERS", f"the live platform answered; ours failed: {exc.agent_text()}"
        if exc.agent_text() == call.text:
            return "an error in both, the same text", ""
        return "an error in both", f"live {call.text!r}\nours {exc.agent_text()!r}"
    if call.is_error:
        return "DIFFERS", f"the live platform failed ({call.text!r}); ours answered"
    recorded, _ = json.JSONDecoder().raw_decode(call.text)
    mine = json.loads(query_text(out))  # rendered as the live platform renders values
    live_rows, our_rows = recorded["rows"], mine["rows"]
    keys = _order_keys(sql, [c["name"] for c in mine["columns"]])
    if keys is None:
        live_rows, our_rows = sorted(live_rows, key=_row_key), sorted(our_rows, key=_row_key)
    if recorded["columns"] == mine["columns"] and _close(live_rows, our_rows):
        return "the same rows", ""
    if keys and recorded["columns"] == mine["columns"]:
        # rows that tie on every ORDER BY key come in no fixed order, in either engine
        in_order = [[r[k] for k in keys] for r in live_rows] == [
            [r[k] for k in keys] for r in our_rows
        ]
        if in_order and _close(sorted(live_rows, key=_row_key), sorted(our_rows, key=_row_key)):
            return "the same rows, rows tied on the ORDER BY in another order", ""
    if _UNORDERED_ARRAY.search(sql):  # both engines collect in no fixed order
        live_rows, our_rows = _sorted_arrays(live_rows), _sorted_arrays(our_rows)
        if recorded["columns"] == mine["columns"] and _close(live_rows, our_rows):
            return "the same rows, array_agg's elements in another order", ""
    return "DIFFERS", f"live {json.dumps(recorded)[:600]}\nours {json.dumps(mine)[:600]}"


def test_every_recorded_trino_query_gets_rows_where_live_did_and_an_error_where_it_failed(
    engine, capsys
):
    calls = _calls()
    if not calls:
        pytest.skip("no transcripts")
    verdicts = [(c, *_judge(engine, c)) for c in calls]
    counts = Counter(v for _, v, _ in verdicts)
    live_rows = sum(not c.is_error for c in calls)
    live_errors = sum(c.is_error and c.text.startswith(_REACHED_TRINO) for c in calls)
    same_rows = sum(n for verdict, n in counts.items() if verdict.startswith("the same rows"))
    errors = counts["an error in both"] + counts["an error in both, the same text"]
    with capsys.disabled():
        print(f"\ntrino_query calls in the peer's transcripts: {len(calls)}")
        print(f"    rows where live returned rows (same rows): {same_rows} of {live_rows}")
        print(f"    an error where live returned an error:     {errors} of {live_errors}")
        for verdict, n in counts.most_common():
            print(f"    {n:5d}  {verdict}")
        for c, verdict, detail in verdicts:
            if verdict in ("DIFFERS", "an error in both"):
                print(f"  {verdict}: {c.key}\n    {c.args.get('sql')!r}\n    {detail}")
    assert (len(calls), live_rows, live_errors) == (1632, 1496, 127)
    assert same_rows == live_rows
    assert errors == live_errors
    assert counts["an error in both, the same text"] == live_errors - 1  # the `::` one
    assert counts["DIFFERS"] == 0
