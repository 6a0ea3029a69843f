"""Canonical protocol-set hashes, two recipes.

``benchledger``: blake3 over ``b"benchledger:protocol-set:v1\\x00"`` + the canonical
JSON (sorted keys, no whitespace, defaults omitted) of the protocols sorted by id.

``peer``: SHA-256 over what Go's ``encoding/json`` writes for the peer platform's
``[]Protocol`` sorted by id — struct field order, ``omitempty`` fields dropped when
empty, HTML-safe escaping, floats in Go's shortest form — so a set loaded here
hashes to the value the peer platform records in its run manifests.

A set's content identity (``content_id``) is the benchledger recipe, whoever ran it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from decimal import Decimal
from typing import Any, Final

import blake3
import msgspec

from benchledger.ledger.codec import canonical_json
from benchledger.protocols.schema import Protocol

RECIPES: Final = ("benchledger", "peer")
SET_DOMAIN: Final = b"benchledger:protocol-set:v1\x00"

# Fields the peer's Go structs tag `omitempty` (pinned by the peer hash test), and a
# page's `summary`: the v1.102 Page struct had no such field, so its sets' Go JSON has
# no "summary" key; today's sets all give one, so their hash does not move.
_OMITEMPTY: Final = frozenset(
    {"page", "transfer", "update", "abstain", "superseded_value"}
    | {"value", "abs_tolerance", "aliases", "wrong_aliases", "summary"}
)
_NOT_IN_PEER: Final = frozenset({"query"})  # benchledger's own extension fields


def _sorted(protocols: Iterable[Protocol]) -> list[Protocol]:
    return sorted(protocols, key=lambda p: p.id)


def benchledger_hash(protocols: Iterable[Protocol]) -> str:
    """The benchledger recipe: domain-separated blake3 of the canonical JSON, hex."""
    data = canonical_json(msgspec.to_builtins(_sorted(protocols)))
    return blake3.blake3(SET_DOMAIN + data).hexdigest()


def content_id(protocols: Iterable[Protocol]) -> str:
    """A set's content identity, the same for a benchledger run and an imported peer run.

    It is the benchledger recipe: the peer recipe follows the peer's Go structs, so
    it names the set only as one peer version encodes it.
    """
    return benchledger_hash(protocols)


def go_float(x: float) -> str:
    """A float64 as Go's encoding/json writes it: shortest digits, no trailing ``.0``."""
    if x == 0:
        return "-0" if str(x).startswith("-") else "0"
    r = repr(float(x))
    if abs(x) < 1e-6 or abs(x) >= 1e21:
        mantissa, _, exp = r.partition("e")
        sign = exp[0] if exp[0] in "+-" else "+"
        digits = exp.lstrip("+-").lstrip("0") or "0"  # Go trims "e-07" to "e-7"
        return f"{mantissa.removesuffix('.0')}e{sign}{digits}"
    text = format(Decimal(r), "f")
    if "." in text:
        text = text.rstrip("0").rstrip(".")
    return text


def go_string(s: str) -> str:
    """A string as Go's encoding/json writes it (HTML-safe: <, >, & and U+2028/9 escaped)."""
    out = ['"']
    for ch in s:
        o = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\r":
            out.append("\\r")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\b":
            out.append("\\b")
        elif ch == "\f":
            out.append("\\f")
        elif o < 0x20 or ch in "<>&" or o in (0x2028, 0x2029):
            out.append(f"\\u{o:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def _empty(value: Any) -> bool:
    return (
        value is None
        or value == ()
        or value == ""
        or (isinstance(value, (int, float)) and not isinstance(value, bool) and value == 0)
    )


StructFields = Callable[[msgspec.Struct], Iterable[tuple[str, Any]]]


def _protocol_fields(value: msgspec.Struct) -> Iterable[tuple[str, Any]]:
    """A protocol Struct's fields as the peer's Go structs encode them (``omitempty``)."""
    for name in value.__struct_fields__:
        if name in _NOT_IN_PEER:
            continue
        item = getattr(value, name)
        if name in _OMITEMPTY and _empty(item):
            continue
        yield name, item


def go_json(value: Any, fields: StructFields = _protocol_fields) -> str:
    """Go encoding/json of a value: Structs as ``fields`` lists them (declaration order,
    the protocols' ``omitempty`` by default), maps with sorted keys."""
    if isinstance(value, msgspec.Struct):
        parts = [f"{go_string(name)}:{go_json(item, fields)}" for name, item in fields(value)]
        return "{" + ",".join(parts) + "}"
    if isinstance(value, dict):  # Go writes map keys sorted
        items = sorted(value.items())
        return "{" + ",".join(f"{go_string(str(k))}:{go_json(v, fields)}" for k, v in items) + "}"
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return go_float(value)
    if isinstance(value, str):
        return go_string(value)
    if isinstance(value, (list, tuple)):
        return "[" + ",".join(go_json(v, fields) for v in value) + "]"
    raise TypeError(f"no Go JSON form for {type(value).__name__}")


def peer_hash(protocols: Iterable[Protocol]) -> str:
    """The peer recipe: SHA-256 hex of Go encoding/json of the set sorted by id."""
    return hashlib.sha256(go_json(_sorted(protocols)).encode()).hexdigest()


def set_hash(protocols: Iterable[Protocol], recipe: str = "benchledger") -> str:
    """The protocol-set hash under ``recipe`` (``benchledger`` or ``peer``)."""
    if recipe == "peer":
        return peer_hash(protocols)
    if recipe == "benchledger":
        return benchledger_hash(protocols)
    raise ValueError(f"unknown recipe {recipe!r}; known: {', '.join(RECIPES)}")
