"""What the peer's Trino says: its catalog names, its type names and its failure texts.

The SQL toolkit's modules (``sql.py`` and its ``sql_*`` siblings) answer in these words:
``trino_type`` names a DuckDB type as Trino's ``DESCRIBE`` and ``typeof`` do, ``client_type``
as trino-go-client reports a column, and ``query_failed``/``user_error`` write a failure in
the form the peer's tools return it
(``Query failed: query failed: trino: query failed (200 OK): "USER_ERROR: line L:C: ..."``).
It imports nothing heavy: the SQL worker processes import it too.
"""

from __future__ import annotations

import re
import unicodedata
from typing import Final, NamedTuple
from zoneinfo import ZoneInfo

from benchledger.refplatform.errors import ToolError

CATALOG: Final = "memory"
CATALOGS: Final = ("memory", "system")
MEMORY_LIMIT: Final = "512MB"  # as Trino's INSUFFICIENT_RESOURCES message names it
ZONE: Final = ZoneInfo("America/Los_Angeles")  # the live platform's local zone

READ_ONLY: Final = (
    "trino_query is read-only — write operations (INSERT, UPDATE, DELETE, CREATE, DROP, "
    "etc.) are not allowed. Use trino_execute for write operations."
)


class Column(NamedTuple):
    """A table column: its name and its Trino type name (``integer``, ``timestamp(3)``, ...)."""

    name: str
    type: str


# ---------------------------------------------------------------------------- type names

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
    if d := decimal_type(t):
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
    """The column type trino-go-client reports (``DatabaseTypeName``): base name, upper case;
    an array keeps its element type (``ARRAY(VARCHAR)``, as the live platform reported)."""
    if trino.startswith("array(") and trino.endswith(")"):
        return f"ARRAY({client_type(trino[6:-1])})"
    out, depth = [], 0
    for ch in trino:
        depth += ch == "("
        if depth == 0:
            out.append(ch)
        depth -= ch == ")"
    return re.sub(r"\s+", " ", "".join(out)).strip().upper()


def decimal_type(duck_type: str) -> tuple[int, int] | None:
    m = re.fullmatch(r"DECIMAL\((\d+),\s*(\d+)\)", duck_type.strip(), re.I)
    return (int(m.group(1)), int(m.group(2))) if m else None


# ---------------------------------------------------------------------------- failure texts


def first_line(exc: BaseException) -> str:
    return str(exc).strip().split("\n", 1)[0]


def query_failed(
    reason: str,
    wrap: str = "query failed: ",
    *,
    prefix: str = "Query failed: ",
    trino: bool = True,
) -> ToolError:
    """The peer's failure text: its handler's prefix, the client's wrap, trino-go-client's form."""
    body = f"trino: query failed (200 OK): {_go_quote(reason)}" if trino else reason
    return ToolError(f"{prefix}{wrap}{body}")


def out_of_memory() -> ToolError:
    return query_failed(
        f"INSUFFICIENT_RESOURCES: Query exceeded per-node memory limit of {MEMORY_LIMIT}"
    )


def too_large(what: str) -> ToolError:
    """A result over the size bound: Trino's resource-error form, naming the bound."""
    return query_failed(
        f"INSUFFICIENT_RESOURCES: Query result too large: {what}; select fewer rows or "
        "columns, or aggregate"
    )


def user_error(sql: str, location: int | None, message: str) -> ToolError:
    where = ""
    if location is not None and location >= 0:
        line, col = _line_col(sql, location)
        where = f"line {line}:{col}: "
    return query_failed(f"USER_ERROR: {where}{message}")


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
