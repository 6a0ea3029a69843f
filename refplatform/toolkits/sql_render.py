"""The SQL tools' answers rendered as the peer renders them: values, then text.

``render_value`` turns a DuckDB value into what the peer's client hands to JSON:
timestamps in RFC 3339 at the America/Los_Angeles offset (without fractions), DATE values
as midnight timestamps, decimals as text at their Trino scale. ``query_text``,
``describe_text`` and ``browse_text`` render a result as the tool's text content, byte for
byte as the peer's Go code does (``json.MarshalIndent``, sorted row keys, Go's float and
HTML escaping rules).
"""

from __future__ import annotations

import datetime as dt
import decimal
import json
import math
import re
import uuid
from typing import Any, Final

from benchledger.refplatform.errors import ToolError
from benchledger.refplatform.toolkits.sql_trino import ZONE, too_large

MAX_RESULT_BYTES: Final = 4 << 20  # a result's rendered text
FORMATS: Final = ("json", "csv", "markdown")


# ---------------------------------------------------------------------------- values


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


def row_map(names: list[str], row: tuple[Any, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, value in zip(names, row, strict=True):
        out[name] = render_value(value)  # a repeated name keeps the last value, as a Go map
    return dict(sorted(out.items()))


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


# ---------------------------------------------------------------------------- text


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
        raise too_large(f"the result exceeds {MAX_RESULT_BYTES} bytes")
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
