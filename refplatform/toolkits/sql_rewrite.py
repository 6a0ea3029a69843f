"""The agent's statement, read as Trino reads it and rewritten where DuckDB differs.

``parse`` gives DuckDB's JSON syntax tree of the one statement (or Trino's syntax error).
Where DuckDB accepts what Trino refuses, the checks refuse as Trino does: a table named
without its catalog (the peer's Trino client sets no session catalog), ``label.*`` inside a
function call, a table function, a trailing semicolon. Where the two compute differently,
``Rewriter`` rewrites the tree to Trino's semantics: decimal division and ``avg``/``round``
of decimals keep Trino's decimal scale (rounded half up, by ``decimal_divide`` and
``decimal_round``, which the SQL workers register as functions), ``typeof`` names Trino's
types. ``translate`` turns a DuckDB error into Trino's. docs/refplatform.md lists what
still differs.
"""

from __future__ import annotations

import copy
import decimal
import fractions
import json
import re
from collections.abc import Callable, Iterator
from typing import Any, Final, Protocol

import duckdb

from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.toolkits.sql_trino import (
    CATALOG,
    CATALOGS,
    READ_ONLY,
    Column,
    decimal_type,
    first_line,
    out_of_memory,
    query_failed,
    user_error,
)

MAX_NESTING: Final = 256  # parentheses in one statement


_INFORMATION_SCHEMA_VIEWS: Final = frozenset({"columns", "schemata", "tables", "views"})


class Tables(Protocol):
    """What the checks read of the engine's catalog."""

    def schemas(self, catalog: str = CATALOG) -> list[str]:
        """The schemas of ``catalog`` as Trino lists them (sorted)."""
        ...

    def columns(self, schema: str, table: str) -> tuple[Column, ...] | None:
        """The columns of ``memory.<schema>.<table>``, or None if there is no such table."""
        ...


# ---------------------------------------------------------------------------- errors


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
_NOT_GROUPED = re.compile(r'column "([^"]+)" must appear in the GROUP BY clause')
_AGGREGATES: Final = frozenset(
    {"count", "count_star", "sum", "avg", "min", "max", "array_agg", "any_value", "arbitrary",
     "stddev", "variance", "approx_distinct", "bool_and", "bool_or", "string_agg", "listagg"}
)  # fmt: skip


def _not_grouped(sql: str, tree: dict[str, Any], column: str) -> ToolError:
    """Trino's error for a select item that is neither aggregated nor grouped: it names the
    whole item as written, at the item's position."""
    name = column.lower()

    def bare(node: Any) -> bool:  # the column, outside every aggregate call
        if isinstance(node, list):
            return any(bare(n) for n in node)
        if not isinstance(node, dict):
            return False
        if node.get("class") == "FUNCTION" and _function_name(node) in _AGGREGATES:
            return False
        if node.get("class") == "WINDOW":
            return False
        if node.get("class") == "COLUMN_REF":
            return str((node.get("column_names") or [""])[-1]).lower() == name
        return any(bare(v) for v in node.values())

    raw = sql.encode()
    for item in (tree.get("node") or {}).get("select_list") or []:
        at, length = item.get("query_location"), item.get("query_location_length")
        if bare(item) and isinstance(at, int) and isinstance(length, int) and length > 0:
            text = raw[at : at + length].decode(errors="replace")
            message = f"'{text}' must be an aggregate expression or appear in GROUP BY clause"
            return user_error(sql, at, message)
    return user_error(
        sql, None, f"'{name}' must be an aggregate expression or appear in GROUP BY clause"
    )


def translate(sql: str, tree: dict[str, Any], exc: duckdb.Error) -> ToolError:
    """The Trino-form error for a DuckDB failure of ``sql``."""
    text = str(exc)
    first = first_line(exc)
    if isinstance(exc, duckdb.OutOfMemoryException):
        return out_of_memory()
    if "Division by zero" in text or "ZeroDivisionError" in text:
        return user_error(sql, None, "Division by zero")
    for pattern in _MISSING_COLUMN:
        if m := pattern.search(first):
            parts = list(m.groups())
            loc = _find_column(tree, parts)
            return user_error(sql, loc, f"Column '{'.'.join(parts).lower()}' cannot be resolved")
    if m := _MISSING_TABLE_ALIAS.search(first):
        loc = _find_column(tree, [m.group(1), None])
        name = _column_text(tree, loc) or m.group(1)
        return user_error(sql, loc, f"Column '{name.lower()}' cannot be resolved")
    if m := _NOT_GROUPED.search(first):
        return _not_grouped(sql, tree, m.group(1))
    if m := _MISSING_FUNCTION.search(first):
        name = m.group(1).lower()
        return user_error(sql, _find_function(tree, name), f"Function '{name}' not registered")
    if isinstance(exc, duckdb.PermissionException | duckdb.InvalidInputException) and (
        "disabled" in first or "locked" in first
    ):
        return query_failed(f"USER_ERROR: Access Denied: {_DUCK_PREFIX.sub('', first)}")
    return user_error(sql, None, _DUCK_PREFIX.sub("", first))


# ---------------------------------------------------------------------------- the syntax tree


def parse(cur: duckdb.DuckDBPyConnection, sql: str) -> dict[str, Any]:
    """The one SELECT statement of ``sql`` as DuckDB's JSON syntax tree, or a Trino error."""
    _check_nesting(sql)
    raw = cur.execute("SELECT json_serialize_sql(?)", [sql]).fetchone()
    tree = json.loads(raw[0] if raw else "{}")
    if tree.get("error"):
        if tree.get("error_type") == "parser":
            position = tree.get("position")
            loc = int(position) if isinstance(position, str) and position.isdigit() else None
            return _raise(user_error(sql, loc, str(tree.get("error_message", "syntax error"))))
        return _raise(ToolError(READ_ONLY))
    statements = tree.get("statements") or []
    semicolon = _first_semicolon(sql)
    if semicolon is not None:
        return _raise(user_error(sql, semicolon, "mismatched input ';'. Expecting: <EOF>"))
    if len(statements) != 1:
        return _raise(user_error(sql, len(sql.encode()), "mismatched input '<EOF>'"))
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
                raise user_error(
                    sql, int(position), f"parentheses nested more than {MAX_NESTING} deep"
                )


def _first_semicolon(sql: str) -> int | None:
    raw = sql.encode()
    for position, kind in duckdb.tokenize(sql):
        if kind == duckdb.token_type.operator and raw[position : position + 1] == b";":
            return int(position)
    return None


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


def check_relations(sql: str, tree: dict[str, Any], engine: Tables) -> None:
    """Refuse, as Trino would, a table that is unqualified, missing, or a table function."""
    ctes = _cte_names(tree)
    for node in _nodes(tree):
        kind = node.get("type")
        loc = node.get("query_location")
        if kind == "TABLE_FUNCTION":
            name = _function_name(node.get("function", {})) or "?"
            raise user_error(sql, loc, f"Table function '{name}' not registered")
        if kind != "BASE_TABLE":
            continue
        catalog = str(node.get("catalog_name") or "").lower()
        schema = str(node.get("schema_name") or "").lower()
        table = str(node.get("table_name") or "").lower()
        if not catalog and not schema:
            if table in ctes:
                continue
            raise user_error(sql, loc, "Schema must be specified when session schema is not set")
        if not catalog:
            raise user_error(sql, loc, "Catalog must be specified when session catalog is not set")
        if catalog not in CATALOGS:
            raise user_error(sql, loc, f"Catalog '{catalog}' not found")
        if catalog != CATALOG or schema not in engine.schemas():
            raise user_error(sql, loc, f"Schema '{schema}' does not exist")
        if schema == "information_schema" and table in _INFORMATION_SCHEMA_VIEWS:
            continue  # DuckDB's own views: the columns agents filter on have Trino's names
        if engine.columns(schema, table) is None:
            raise user_error(sql, loc, f"Table '{catalog}.{schema}.{table}' does not exist")


def check_trino_syntax(sql: str, tree: dict[str, Any]) -> None:
    """Refuse DuckDB-only syntax the agent's queries have been seen to use."""
    raw = sql.encode()
    for node in _nodes(tree):
        if node.get("class") == "CAST":
            at = node.get("query_location")
            if isinstance(at, int) and raw[at : at + 2] == b"::":
                # Trino's parser stops at the first ':' (its "Expecting:" list is not kept)
                raise user_error(sql, at, "mismatched input ':'")
        if node.get("class") != "FUNCTION":
            continue
        for arg in node.get("arguments", []):
            expr = arg.get("expression", {}) if isinstance(arg, dict) else {}
            if expr.get("class") == "STAR" and expr.get("relation_name"):
                raise user_error(
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


def column_names(node: dict[str, Any], duck_names: list[str]) -> list[str]:
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


class Rewriter:
    """Rewrites the tree where DuckDB and Trino compute differently; typed by DuckDB probes."""

    _DECIMAL_TEXT = re.compile(
        r"(?<![\w.])\d*+\.\d|\b\d++\.(?![\w.])|\b(?:decimal|numeric)\b", re.I
    )
    _TYPEOF = re.compile(r"\btypeof\s*+\(", re.I)
    _FORMAT = re.compile(r"\bformat\s*+\(", re.I)
    # Trino's varchar-to-timestamp cast reads 'yyyy-MM-dd[ HH:mm[:ss[.f...]]]' (a space, not
    # ISO 8601's 'T', between date and time); DuckDB reads both.
    _ISO_T = re.compile(r"\d{4}-\d\d?-\d\d?T\d")

    def __init__(
        self,
        cur: duckdb.DuckDBPyConnection,
        tree: dict[str, Any],
        has_decimals: bool,
        describe: Callable[[str], list[str]],
        timestamp_text: dict[int, int] | None = None,
    ) -> None:
        self.cur = cur
        self.tree = tree
        self.has_decimals = has_decimals
        self.describe = describe  # column types of a query, evaluated where SQL may run
        self.changed = False
        self.decimals = False
        self.typeof = False
        self.information_schema = False
        self.format = False
        self.iso_t = False
        # CASTs of a timestamp(p) to varchar (location -> p), from ``sql_types.check_types``
        self.timestamp_text = timestamp_text or {}

    def rewrite(self, sql: str) -> str | None:
        """The rewritten SQL, or None when ``sql`` needs no rewrite (the common case)."""
        self.decimals = self.has_decimals or bool(self._DECIMAL_TEXT.search(sql))
        self.typeof = bool(self._TYPEOF.search(sql))
        self.information_schema = "information_schema" in sql.lower()
        self.format = bool(self._FORMAT.search(sql))
        self.iso_t = bool(self._ISO_T.search(sql))
        wanted = (self.decimals, self.typeof, self.information_schema, self.format, self.iso_t)
        if not (any(wanted) or self.timestamp_text):
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
        elif obj.get("class") == "CAST":
            self._cast(obj)

    def _cast(self, node: dict[str, Any]) -> None:
        """Trino's casts where DuckDB's differ: timestamp to text, ISO 8601 text to timestamp."""
        child = node.get("child") or {}
        target = str((node.get("type_expr") or {}).get("type_name") or "").upper()
        precision = self.timestamp_text.get(node.get("query_location", -1))
        if precision is not None:
            fraction = {0: "", 3: ".%g", 6: ".%f"}.get(precision)
            if fraction is not None:
                self._replace(node, f"strftime(__a, '%Y-%m-%d %H:%M:%S{fraction}')", {"__a": child})
            return
        text = str((child.get("literal") or {}).get("text", ""))
        if (
            self.iso_t
            and target.startswith("TIMESTAMP")
            and child.get("class") == "CONSTANT"
            and (child.get("literal") or {}).get("kind") == "STRING"
            and self._ISO_T.match(text.strip())
        ):
            # A failure when evaluated, not when analysed: Trino folds the constant only
            # where rows reach it (a filter that passes none never fails).
            message = f"Value cannot be cast to timestamp: {text}".replace("'", "''")
            self._replace(node, f"CAST(error('{message}') AS TIMESTAMP)", {})

    def _function(self, node: dict[str, Any], scopes: list[dict[str, Any]]) -> None:
        name = _function_name(node)
        args = [a.get("expression") for a in node.get("arguments", [])]
        if name == "typeof" and self.typeof and len(args) == 1:
            self._replace(node, "__bl_trino_type(typeof(__a))", {"__a": args[0]})
        elif name == "format" and self.format and args:
            # Trino's format is Java's printf-style String.format; DuckDB's is fmt-style.
            node["function_name"] = "printf"
            if isinstance(node.get("qualified_name"), dict):
                node["qualified_name"] = {"path": ["printf"]}
            self.changed = True
        elif not self.decimals:
            return
        elif name in ("/", "//") and node.get("is_operator") and len(args) == 2:
            types = self._types(args, scopes)
            if types is not None:
                self._divide(node, args, types)
        elif name == "avg" and len(args) == 1:
            types = self._types(args, scopes)
            if types is not None and (d := decimal_type(types[0])):
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
            if types is not None and digits is not None and (d := decimal_type(types[0])):
                p, s = d
                rp, rs = (min(38, p + 1), s) if len(args) == 2 else (max(1, p - s + min(s, 1)), 0)
                template = (
                    f"CAST(__bl_decimal_round(CAST(__a AS VARCHAR), {digits}) "
                    f"AS DECIMAL({rp},{rs}))"
                )
                self._replace(node, template, {"__a": args[0]})

    def _divide(self, node: dict[str, Any], args: list[Any], types: list[str]) -> None:
        left, right = (decimal_type(t) or _INTEGER_DECIMALS.get(t.lower()) for t in types)
        if not (left and right) or not any(decimal_type(t) for t in types):
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
        tree = parse(self.cur, f"SELECT {template}")
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


def decimal_divide(a: str, b: str, scale: int) -> str:
    """Trino's decimal quotient: ``a / b`` rounded half up to ``scale`` digits, exactly."""
    divisor = fractions.Fraction(decimal.Decimal(b))
    if divisor == 0:
        raise ZeroDivisionError("Division by zero")
    value = fractions.Fraction(decimal.Decimal(a)) / divisor * 10**scale
    return _scaled(value, scale)


def decimal_round(x: str, digits: int) -> str:
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
