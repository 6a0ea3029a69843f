"""Trino's typing of a statement: the implicit coercions it allows, and its errors for the rest.

DuckDB coerces what Trino refuses (a string literal compared with a timestamp, a number
added to a string, a string literal handed to a date function), so a query that failed on
the live platform would answer here. ``check_types`` types the statement's expressions
bottom-up in the order Trino analyses them (WITH, FROM and its join criteria, WHERE, the
SELECT list, GROUP BY, HAVING, ORDER BY) and refuses the first operator, predicate or
function call whose argument types have no common type under Trino's coercion rules, with
Trino's message at Trino's position (docs/refplatform.md, "Trino's typing").

Types are Trino type names (``timestamp(3)``, ``varchar(10)``, ``integer``); a type this
module cannot tell is ``None`` and is never refused (DuckDB then decides). The check is a
pure walk of the syntax tree already parsed: no SQL runs.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, Protocol

import duckdb

from benchledger.refplatform.toolkits.sql_trino import CATALOG, Column, trino_type, user_error


class Tables(Protocol):
    """What the check reads of the engine's catalog."""

    def columns(self, schema: str, table: str) -> tuple[Column, ...] | None:
        """The columns of ``memory.<schema>.<table>``, or None if there is no such table."""
        ...


class _Stop(Exception):
    """A name the check cannot resolve: Trino would fail there first, so DuckDB decides."""


# ---------------------------------------------------------------------------- the coercion rules

_INTEGERS: Final = ("tinyint", "smallint", "integer", "bigint")
_FLOATS: Final = ("real", "double")


def family(t: str) -> str:
    """The coercion family of a Trino type: types of one family have a common super type."""
    base = t.split("(", 1)[0].strip()
    if t == "unknown":
        return "unknown"
    if base in _INTEGERS or base in _FLOATS or base == "decimal":
        return "number"
    if base in ("varchar", "char"):
        return "string"
    if base == "date" or (base == "timestamp"):
        # date coerces to timestamp(p); timestamp(p) to timestamp(p) with time zone
        return "datetime"
    if base == "time":
        return "time"
    if t.startswith("interval year"):
        return "interval year to month"
    if t.startswith("interval day"):
        return "interval day to second"
    return base


_OPAQUE: Final = frozenset({"array", "map", "row", "json", "uuid", "varbinary", "ipaddress"})


def coercible(a: str | None, b: str | None) -> bool:
    """Whether Trino finds a common super type of ``a`` and ``b`` (unknown types pass)."""
    if a is None or b is None or "unknown" in (a, b):
        return True
    fa, fb = family(a), family(b)
    if fa in _OPAQUE or fb in _OPAQUE:
        return True  # compared element-wise or not at all: not modelled
    return fa == fb


def _common(types: list[str | None]) -> str | None:
    """A representative of the types' common super type (the widest number, the string)."""
    known = [t for t in types if t is not None and t != "unknown"]
    if not known:
        return "unknown" if types and all(t == "unknown" for t in types) else None
    if all(family(t) == "number" for t in known):
        return _wider_number(known)
    if all(family(t) == "datetime" for t in known):
        stamps = [t for t in known if t.startswith("timestamp")]
        return stamps[0] if stamps else "date"
    if all(family(t) == "string" for t in known):
        return "varchar"
    return known[0]


def _wider_number(types: list[str]) -> str:
    bases = [t.split("(", 1)[0] for t in types]
    if "double" in bases:
        return "double"
    if "real" in bases:
        return "real"
    if "decimal" in bases:
        return next(t for t in types if t.startswith("decimal"))
    return max(bases, key=_INTEGERS.index)


_ARITHMETIC: Final = {"+", "-", "*", "/", "%"}


def arithmetic(op: str, a: str | None, b: str | None) -> tuple[bool, str | None]:
    """Whether Trino has ``a op b`` (after coercion), and the result type if known."""
    if a is None or b is None:
        return True, None
    if "unknown" in (a, b):
        return True, b if a == "unknown" else a
    fa, fb = family(a), family(b)
    if fa in _OPAQUE or fb in _OPAQUE:
        return True, None
    if fa == fb == "number":
        return True, _wider_number([a, b])
    intervals = ("interval day to second", "interval year to month")
    if op in "+-" and fa in ("datetime", "time") and fb in intervals:
        return True, a
    if op == "+" and fa in intervals and fb in ("datetime", "time"):
        return True, b
    if op in "+-" and fa == fb and fa in intervals:
        return True, a
    if op in "*/" and fa in intervals and fb == "number":
        return True, a
    if op == "*" and fa == "number" and fb in intervals:
        return True, b
    if op == "-" and fa == fb == "datetime" and a.startswith("timestamp") and b.startswith("t"):
        return True, "interval day to second"
    if op == "-" and fa == fb and fa in ("datetime", "time"):
        return True, None  # not modelled: DuckDB decides
    return False, None


# Trino's function signatures for the functions whose arguments DuckDB coerces and Trino
# does not (a string literal where a date or timestamp is expected, a number where a string
# is): the argument families each accepts, and the signature list Trino's message shows.
_DATE_PARTS: Final = (
    "year", "quarter", "month", "week", "week_of_year", "day", "day_of_month",
    "day_of_week", "dow", "day_of_year", "doy", "year_of_week", "yow",
)  # fmt: skip
_TIME_PARTS: Final = ("hour", "minute", "second", "millisecond")


def _function_refusal(name: str, types: list[str | None]) -> str | None:
    """Trino's ``Unexpected parameters`` message for ``name(types)``, or None if it binds."""
    if any(t is None for t in types):
        return None
    known = [t for t in types if t is not None]
    fams = [family(t) if t != "unknown" else "unknown" for t in known]
    expected: str | None = None
    if name in _DATE_PARTS and len(known) == 1 and fams[0] in ("string", "number", "boolean"):
        expected = (
            f"{name}(date), {name}(interval year to month), {name}(timestamp(p) with time zone), "
            f"{name}(timestamp(p))"
        )
        if name in ("day", "day_of_month"):
            expected += f", {name}(interval day to second)"
    elif name in _TIME_PARTS and len(known) == 1 and fams[0] in ("string", "number", "boolean"):
        expected = (
            f"{name}(interval day to second), {name}(time(p)), {name}(time(p) with time zone), "
            f"{name}(timestamp(p)), {name}(timestamp(p) with time zone)"
        )
    elif name == "date_trunc" and len(known) == 2 and fams[1] in ("string", "number", "boolean"):
        expected = (
            "date_trunc(varchar(x), date), date_trunc(varchar(x), time(p)), "
            "date_trunc(varchar(x), time(p) with time zone), date_trunc(varchar(x), timestamp(p)), "
            "date_trunc(varchar(x), timestamp(p) with time zone)"
        )
    elif name in ("date_add", "date_diff") and len(known) == 3:
        dated = fams[2:] if name == "date_add" else fams[1:]
        if any(f in ("string", "number", "boolean") for f in dated):
            second = "bigint" if name == "date_add" else "T"
            expected = ", ".join(
                f"{name}(varchar(x), {second}, {t})" if name == "date_add" else
                f"{name}(varchar(x), {t}, {t})"
                for t in ("date", "time(p)", "time(p) with time zone", "timestamp(p)",
                          "timestamp(p) with time zone")
            )  # fmt: skip
    elif (
        name in ("sum", "avg") and len(known) == 1 and fams[0] in ("string", "datetime", "boolean")
    ):
        expected = f"{name}(bigint), {name}(decimal(p,s)), {name}(double), {name}(real)" + (
            f", {name}(interval day to second), {name}(interval year to month)"
        )
    if expected is None:
        return None
    return f"Unexpected parameters ({', '.join(known)}) for function {name}. Expected: {expected}"


_RETURNS: Final[dict[str, Callable[[list[str | None]], str | None]]] = {
    "count": lambda a: "bigint",
    "count_star": lambda a: "bigint",
    "sum": lambda a: _sum_type(a[0]) if a else None,
    "avg": lambda a: a[0] if a and a[0] and a[0].startswith("decimal") else "double",
    "min": lambda a: a[0] if a else None,
    "max": lambda a: a[0] if a else None,
    "any_value": lambda a: a[0] if a else None,
    "arbitrary": lambda a: a[0] if a else None,
    "abs": lambda a: a[0] if a else None,
    "round": lambda a: a[0] if a else None,
    "floor": lambda a: a[0] if a else None,
    "ceil": lambda a: a[0] if a else None,
    "ceiling": lambda a: a[0] if a else None,
    "coalesce": lambda a: _common(a),
    "nullif": lambda a: a[0] if a else None,
    "greatest": lambda a: _common(a),
    "least": lambda a: _common(a),
    "date_trunc": lambda a: a[1] if len(a) == 2 else None,
    "date_add": lambda a: a[2] if len(a) == 3 else None,
    "date_diff": lambda a: "bigint",
    "now": lambda a: "timestamp(3) with time zone",
    "current_timestamp": lambda a: "timestamp(3) with time zone",
    "current_date": lambda a: "date",
    "concat": lambda a: "varchar",
    "||": lambda a: "varchar",
    "stddev": lambda a: "double",
    "variance": lambda a: "double",
    "approx_distinct": lambda a: "bigint",
    "to_days": lambda a: "interval day to second",
    "to_hours": lambda a: "interval day to second",
    "to_minutes": lambda a: "interval day to second",
    "to_seconds": lambda a: "interval day to second",
    "to_months": lambda a: "interval year to month",
    "to_years": lambda a: "interval year to month",
    "date_part": lambda a: "bigint",
    "extract": lambda a: "bigint",
    "row_number": lambda a: "bigint",
    "rank": lambda a: "bigint",
    "dense_rank": lambda a: "bigint",
}
for _name in (*_DATE_PARTS, *_TIME_PARTS):
    _RETURNS[_name] = lambda a: "bigint"
for _name in ("lower", "upper", "trim", "ltrim", "rtrim", "reverse", "substr", "substring",
              "replace", "split_part", "lpad", "rpad"):  # fmt: skip
    _RETURNS[_name] = lambda a: "varchar"
_RETURNS["length"] = lambda a: "bigint"
_RETURNS["strpos"] = lambda a: "bigint"


def _sum_type(t: str | None) -> str | None:
    if t is None:
        return None
    if t in _INTEGERS:
        return "bigint"
    if t.startswith("decimal"):
        return "decimal(38," + t.split(",", 1)[1] if "," in t else "decimal(38,0)"
    return t


# ---------------------------------------------------------------------------- literals and casts

_MAX_INTEGER: Final = 2**31 - 1


def literal_type(literal: dict[str, Any]) -> str | None:
    """Trino's type of a literal in DuckDB's tree (``'abc'`` is ``varchar(3)``)."""
    kind = literal.get("kind")
    text = str(literal.get("text", ""))
    if kind == "STRING":
        return f"varchar({len(text)})"
    if kind == "INTEGER":
        return "integer" if -_MAX_INTEGER - 1 <= int(text) <= _MAX_INTEGER else "bigint"
    if kind == "NUMERIC":
        if "e" in text.lower():
            return "double"
        digits = text.lstrip("-+")
        whole, _, frac = digits.partition(".")
        precision = max(len(whole.lstrip("0")) + len(frac), 1)
        return f"decimal({precision},{len(frac)})"
    if kind == "NULL_LITERAL":
        return "unknown"
    if kind == "BOOLEAN":
        return "boolean"
    return None


def cast_type(type_expr: dict[str, Any]) -> str | None:
    """The Trino type a CAST's type node names."""
    name = str(type_expr.get("type_name") or "").upper()
    args = [str((c.get("literal") or {}).get("text", "")) for c in type_expr.get("children") or []]
    if name in ("DECIMAL", "NUMERIC"):
        precision, scale = [*args, "38", "0"][:2] if args else ("38", "0")  # Trino's default
        return f"decimal({precision},{scale if len(args) > 1 else 0})"
    if name == "VARCHAR":
        return f"varchar({args[0]})" if args else "varchar"
    if name in ("TIMESTAMP", "DATETIME"):
        return "timestamp(3)"
    if name in ("TIMESTAMPTZ",):
        return "timestamp(3) with time zone"
    if name in ("INT", "INT4"):
        return "integer"
    if name in ("INT8", "LONG"):
        return "bigint"
    if name in ("FLOAT8",):
        return "double"
    if name in ("STRING", "TEXT"):
        return "varchar"
    t = trino_type(name)
    return None if t == name.lower() and t not in _KNOWN_NAMES else t


_KNOWN_NAMES: Final = frozenset(
    {"boolean", "tinyint", "smallint", "integer", "bigint", "real", "double", "varchar", "date"}
)

# ---------------------------------------------------------------------------- the walk

_COMPARISONS: Final = {
    "COMPARE_EQUAL": "=", "COMPARE_NOTEQUAL": "=", "COMPARE_LESSTHAN": "<",
    "COMPARE_GREATERTHAN": "<", "COMPARE_LESSTHANOREQUALTO": "<=",
    "COMPARE_GREATERTHANOREQUALTO": "<=", "COMPARE_DISTINCT_FROM": "IS DISTINCT FROM",
    "COMPARE_NOT_DISTINCT_FROM": "IS DISTINCT FROM",
}  # fmt: skip
_BOOLEAN_FUNCTIONS: Final = frozenset(
    {"~~", "!~~", "~~*", "!~~*", "regexp_like", "starts_with", "contains", "like", "ilike"}
)
_NO_LOCATION: Final = 2**64 - 1


class _Scope:
    """The relations a SELECT reads (alias -> column types, None if not known), and its parent."""

    def __init__(self, parent: _Scope | None, ctes: dict[str, Any]) -> None:
        self.parent = parent
        self.ctes = ctes  # name -> CTE output columns (name -> type), or None if unknown
        self.relations: list[tuple[str, dict[str, str | None] | None]] = []
        self.outputs: dict[str, str | None] = {}  # SELECT aliases (ORDER BY may name them)

    def cte(self, name: str) -> tuple[bool, dict[str, str | None] | None]:
        scope: _Scope | None = self
        while scope is not None:
            if name in scope.ctes:
                return True, scope.ctes[name]
            scope = scope.parent
        return False, None

    def resolve(self, parts: list[str], order_by: bool = False) -> str | None:
        """The type of a column reference; raises ``_Stop`` where Trino could not resolve it."""
        names = [p.lower() for p in parts]
        scope: _Scope | None = self
        while scope is not None:
            found, complete = scope._lookup(names)
            if found is not None:
                return found[0]
            if not complete:
                return None
            scope = scope.parent
        if order_by and len(names) == 1 and names[0] in self.outputs:
            return self.outputs[names[0]]
        if len(names) == 1 and names[0] in ("current_date",):
            return "date"
        if len(names) == 1 and names[0] in ("current_timestamp", "localtimestamp", "now"):
            return "timestamp(3) with time zone"
        raise _Stop

    def _lookup(self, names: list[str]) -> tuple[tuple[str | None] | None, bool]:
        """((type,), _) if found here; (None, complete) where complete says every relation
        was known (so a miss here means the name is not in this scope)."""
        complete = True
        column = names[-1]
        qualifier = names[-2] if len(names) >= 2 else None
        for alias, columns in self.relations:
            if qualifier is not None and qualifier != alias:
                continue
            if columns is None:
                complete = False
                continue
            if column in columns:
                return (columns[column],), True
        return None, complete


class _Checker:
    def __init__(self, sql: str, tables: Tables) -> None:
        self.sql = sql
        self.raw = sql.encode()
        self.tables = tables
        self._tokens: list[int] | None = None
        self.timestamp_text: dict[int, int] = {}  # CAST location -> the timestamp's precision

    # -- errors at Trino's positions

    def fail(self, location: int | None, message: str) -> None:
        raise user_error(self.sql, location, message)

    def tokens(self) -> list[int]:
        if self._tokens is None:
            self._tokens = [int(p) for p, _ in duckdb.tokenize(self.sql)]
        return self._tokens

    def token_at(self, start: int, texts: tuple[str, ...]) -> int | None:
        """The first token at or after byte ``start`` whose text is one of ``texts``."""
        toks = self.tokens()
        for i, pos in enumerate(toks):
            if pos < start:
                continue
            end = toks[i + 1] if i + 1 < len(toks) else len(self.raw)
            text = self.raw[pos:end].decode(errors="ignore").strip().upper()
            if text in texts:
                return pos
        return None

    @staticmethod
    def end_of(node: dict[str, Any]) -> int:
        """Where ``node``'s text ends (the largest location + length in its subtree)."""
        best = 0
        stack: list[Any] = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, dict):
                loc = n.get("query_location")
                if isinstance(loc, int) and loc != _NO_LOCATION:
                    best = max(best, loc + int(n.get("query_location_length") or 0))
                stack.extend(n.values())
            elif isinstance(n, list):
                stack.extend(n)
        return best

    # -- queries

    def query(self, node: dict[str, Any], parent: _Scope | None) -> dict[str, str | None] | None:
        """Check a query node; its output columns (name -> type), or None if not known."""
        ctes: dict[str, Any] = {}
        scope_for_ctes = _Scope(parent, ctes)
        for entry in (node.get("cte_map") or {}).get("map", []):
            value = entry.get("value") or {}
            inner = value.get("query_node") or (value.get("query") or {}).get("node")
            out = self.query(inner, scope_for_ctes) if isinstance(inner, dict) else None
            aliases = [str(a).lower() for a in value.get("aliases") or []]
            if out is not None and aliases:
                out = dict(zip(aliases, out.values(), strict=False))
            ctes[str(entry.get("key", "")).lower()] = out
        kind = node.get("type")
        if kind == "SET_OPERATION_NODE":
            children = node.get("children") or [node.get("left"), node.get("right")]
            outs = [self.query(c, scope_for_ctes) for c in children if isinstance(c, dict)]
            return outs[0] if outs else None
        if kind != "SELECT_NODE":
            return None
        scope = _Scope(parent, ctes)
        self.relation(node.get("from_table"), scope)
        if node.get("where_clause"):
            self.expr(node["where_clause"], scope)
        outputs: dict[str, str | None] = {}
        known = True
        for i, e in enumerate(node.get("select_list") or []):
            if e.get("class") == "STAR":
                if e.get("relation_name") or e.get("exclude_list") or e.get("replace_list"):
                    known = False
                    continue
                for _, columns in scope.relations:
                    if columns is None:
                        known = False
                    else:
                        outputs.update(columns)
                continue
            t = self.expr(e, scope)
            name = e.get("alias") or (
                e["column_names"][-1] if e.get("class") == "COLUMN_REF" else f"_col{i}"
            )
            outputs[str(name).lower()] = t
        scope.outputs = outputs
        for e in node.get("group_expressions") or []:
            if e.get("class") != "CONSTANT":
                self.expr(e, scope, order_by=True)
        if node.get("having"):
            self.expr(node["having"], scope, order_by=True)
        for modifier in node.get("modifiers") or []:
            for order in modifier.get("orders") or []:
                if isinstance(order.get("expression"), dict):
                    self.expr(order["expression"], scope, order_by=True)
        return outputs if known else None

    def relation(self, node: Any, scope: _Scope) -> None:
        if not isinstance(node, dict):
            return
        kind = node.get("type")
        alias = str(node.get("alias") or "").lower()
        if kind == "BASE_TABLE":
            table = str(node.get("table_name") or "").lower()
            schema = str(node.get("schema_name") or "").lower()
            catalog = str(node.get("catalog_name") or "").lower()
            columns: dict[str, str | None] | None = None
            if not schema and not catalog:
                _, columns = scope.cte(table)
            elif catalog == CATALOG and schema != "information_schema":
                cols = self.tables.columns(schema, table)
                columns = {c.name.lower(): c.type for c in cols} if cols is not None else None
            scope.relations.append((alias or table, columns))
        elif kind == "JOIN":
            self.relation(node.get("left"), scope)
            self.relation(node.get("right"), scope)
            if isinstance(node.get("condition"), dict):
                self.expr(node["condition"], scope)
        elif kind == "SUBQUERY":
            inner = (node.get("subquery") or {}).get("node")
            out = self.query(inner, scope.parent) if isinstance(inner, dict) else None
            aliases = [str(a).lower() for a in node.get("column_name_alias") or []]
            if out is not None and aliases:
                out = dict(zip(aliases, out.values(), strict=False))
            scope.relations.append((alias, out))
        else:
            scope.relations.append((alias, None))

    # -- expressions

    def expr(self, node: dict[str, Any], scope: _Scope, order_by: bool = False) -> str | None:
        """The Trino type of an expression; raises Trino's error for the first mistyped part."""
        cls = node.get("class")
        if cls == "CONSTANT":
            return literal_type(node.get("literal") or {})
        if cls == "COLUMN_REF":
            return scope.resolve(list(node.get("column_names") or []), order_by)
        sub = lambda n: self.expr(n, scope, order_by)  # noqa: E731
        if cls == "CAST":
            child = node.get("child") or {}
            source = sub(child)
            target = cast_type(node.get("type_expr") or {})
            literal = child.get("literal") or {}
            if (
                target == "timestamp(3)"
                and child.get("query_location") == _NO_LOCATION
                and literal.get("kind") == "STRING"
            ):
                # TIMESTAMP '...' (DuckDB's tree: a cast of a placeless string): Trino's
                # literal has as many fractional digits as it is written with
                _, _, fraction = str(literal.get("text", "")).partition(".")
                digits = len(fraction) - len(fraction.lstrip("0123456789"))
                target = f"timestamp({len(fraction) if digits == len(fraction) else digits})"
            if (
                source is not None
                and source.startswith("timestamp(")
                and source.endswith(")")
                and target is not None
                and target.startswith("varchar")
            ):
                precision = int(source[len("timestamp(") : -1])
                self.timestamp_text[int(node["query_location"])] = precision
            return target
        if cls == "COMPARISON":
            left, right = node.get("left") or {}, node.get("right") or {}
            a, b = sub(left), sub(right)
            op = _COMPARISONS.get(str(node.get("type")), "=")
            if not coercible(a, b):
                self.fail(self._operator_at(left), f"Cannot apply operator: {a} {op} {b}")
            return "boolean"
        if cls == "BETWEEN":
            a, lo, hi = sub(node["input"]), sub(node["lower"]), sub(node["upper"])
            if not (coercible(a, lo) and coercible(a, hi) and coercible(lo, hi)):
                self.fail(
                    node.get("query_location"), f"Cannot check if {a} is BETWEEN {lo} and {hi}"
                )
            return "boolean"
        if cls == "CONJUNCTION":
            for child in node.get("children") or []:
                sub(child)
            return "boolean"
        if cls == "OPERATOR":
            return self.operator(node, sub)
        if cls == "FUNCTION":
            return self.function(node, sub)
        if cls == "CASE":
            results = []
            for check in node.get("case_checks") or []:
                sub(check["when_expr"])
                results.append(sub(check["then_expr"]))
            if isinstance(node.get("else_expr"), dict):
                results.append(sub(node["else_expr"]))
            return _common(results)
        if cls == "SUBQUERY":
            inner = (node.get("subquery") or {}).get("node")
            out = self.query(inner, scope) if isinstance(inner, dict) else None
            if isinstance(node.get("child"), dict):
                sub(node["child"])
                return "boolean"
            if node.get("subquery_type") == "EXISTS":
                return "boolean"
            return next(iter(out.values())) if out else None
        if cls == "WINDOW":
            args = [sub(c) for c in node.get("children") or []]
            for key in ("partitions",):
                for p in node.get(key) or []:
                    sub(p)
            for order in node.get("orders") or []:
                if isinstance(order.get("expression"), dict):
                    sub(order["expression"])
            ret = _RETURNS.get(str(node.get("function_name") or "").lower())
            return ret(args) if ret else None
        return None

    def _operator_at(self, left: dict[str, Any]) -> int | None:
        return self.token_at(self.end_of(left), ("=", "<>", "!=", "<", ">", "<=", ">=", "IS"))

    def operator(
        self, node: dict[str, Any], sub: Callable[[dict[str, Any]], str | None]
    ) -> str | None:
        kind = node.get("type")
        children = node.get("children") or []
        types = [sub(c) for c in children]
        if kind in ("COMPARE_IN", "COMPARE_NOT_IN") and types:
            value, items = types[0], types[1:]
            everything = [value, *items]
            for i, t in enumerate(items):
                if not coercible(value, t) or not all(coercible(t, u) for u in items[:i]):
                    distinct = list(dict.fromkeys(x for x in everything if x is not None))
                    at = self.token_at(self.end_of(children[0]), ("IN", "NOT"))
                    so_far = _common(everything[: i + 1])
                    self.fail(
                        at,
                        "IN value and list items must be the same type or coercible to a "
                        f"common type. Cannot find common type between {so_far} "
                        f"and {t}, all types (without duplicates): [{', '.join(distinct)}]",
                    )
            return "boolean"
        if kind == "OPERATOR_COALESCE":
            for i, t in enumerate(types):
                if not all(coercible(t, u) for u in types[:i]):
                    distinct = list(dict.fromkeys(x for x in types if x is not None))
                    self.fail(
                        node.get("query_location"),
                        "All COALESCE operands must be the same type or coercible to a common "
                        f"type. Cannot find common type between {_common(types[:i])} and {t}, "
                        f"all types (without duplicates): [{', '.join(distinct)}]",
                    )
            return _common(types)
        if kind in ("OPERATOR_NOT", "OPERATOR_IS_NULL", "OPERATOR_IS_NOT_NULL"):
            return "boolean"
        return None

    def function(
        self, node: dict[str, Any], sub: Callable[[dict[str, Any]], str | None]
    ) -> str | None:
        name = str(node.get("function_name") or "").lower()
        args = [a.get("expression") or {} for a in node.get("arguments") or []]
        types = [sub(a) for a in args]
        for key in ("filter",):
            if isinstance(node.get(key), dict):
                sub(node[key])
        if node.get("is_operator") and name in _ARITHMETIC and len(types) == 2:
            ok, result = arithmetic(name, types[0], types[1])
            if not ok:
                at = self.token_at(self.end_of(args[0]), (name,))
                self.fail(at, f"Cannot apply operator: {types[0]} {name} {types[1]}")
            return result
        if node.get("is_operator") and name == "-" and len(types) == 1:
            return types[0]
        if name == "||" and len(types) == 2:
            if all(t is not None for t in types) and any(
                family(t) not in ("string", "unknown", "array") for t in types if t
            ):
                at = self.token_at(self.end_of(args[0]), ("||",))
                shown = ", ".join(t for t in types if t)
                self.fail(
                    at,
                    f"Unexpected parameters ({shown}) for function concat. Expected: "
                    "concat(char(x), char(y)), concat(array(E)), concat(E, array(E)), "
                    "concat(array(E), E), concat(varbinary), concat(varchar)",
                )
            return "varchar"
        if name in _BOOLEAN_FUNCTIONS:
            return "boolean"
        message = _function_refusal(name, types)
        if message is not None:
            self.fail(node.get("query_location"), message)
        ret = _RETURNS.get(name)
        return ret(types) if ret else None


def check_types(sql: str, tree: dict[str, Any], tables: Tables) -> dict[int, int]:
    """Refuse ``sql`` as Trino would if an expression mixes types Trino does not coerce.

    Returns where ``sql`` casts a ``timestamp(p)`` to ``varchar`` (each CAST node's location
    and ``p``): Trino writes ``p`` fractional digits, DuckDB none.
    """
    node = tree.get("node")
    if not isinstance(node, dict):
        return {}
    checker = _Checker(sql, tables)
    try:
        checker.query(node, None)
    except _Stop:
        return {}
    return checker.timestamp_text
