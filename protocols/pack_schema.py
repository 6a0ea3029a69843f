"""The seed-pack schema a protocol set needs, and the check that a run's pack has it.

A protocol's answers are what its questions return on one pack's data, so a set run on a
pack with other tables or columns is graded against answers that pack cannot give. The
set records the schema it needs (docs/protocols.md, "A set and its pack"):

- a set with a ``pack-schema.toml`` beside its files (benchledger's own, written by
  ``protocols generate``) needs the tables and columns that file lists;
- a set in the peer's bench layout (``protocols/`` beside ``seed/``) needs the schema of
  that seed's ``trino/setup.sql``;
- any other set records nothing, and nothing is checked.

Schemas are read from the data's own files: the ``CREATE TABLE`` statements of a pack's
``trino/setup.sql``. The check is by content: every table and column (with its type) the
set needs must be in the run's pack; the first difference is named with the protocol
file whose entity is that table.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Iterable
from typing import Final, NamedTuple

import blake3

from benchledger.ledger.codec import canonical_json
from benchledger.protocols.errors import InvalidInput, Problem
from benchledger.protocols.schema import Protocol

MANIFEST: Final = "pack-schema.toml"  # in a protocol set's folder
SETUP_SQL: Final = os.path.join("trino", "setup.sql")  # in a pack (the peer's seed layout)
PEER_SEED: Final = "seed"  # the peer's bench layout: bench/protocols beside bench/seed
_DOMAIN: Final = b"benchledger:pack-schema:v1\x00"
_CREATE: Final = re.compile(
    r"\bCREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?([\w.\"]+)\s*\(", re.IGNORECASE
)

Schema = dict[str, dict[str, str]]  # table (schema-qualified, lower case) -> column -> type


class Needs(NamedTuple):
    """The schema a set needs and the file that says so (its manifest, or a seed's SQL)."""

    schema: Schema
    source: str


def _columns(body: str) -> dict[str, str]:
    """``name TYPE`` pairs of a CREATE TABLE body, split at top-level commas."""
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(body):
        depth += (ch == "(") - (ch == ")")
        if ch == "," and depth == 0:
            parts.append(body[start:i])
            start = i + 1
    parts.append(body[start:])
    out = {}
    for part in parts:
        words = part.split(None, 1)
        if len(words) == 2 and words[0].upper() not in ("PRIMARY", "CONSTRAINT", "UNIQUE"):
            out[words[0].strip('"').lower()] = " ".join(words[1].split()).upper()
    return out


def parse_schema(sql: str) -> Schema:
    """The tables and columns the ``CREATE TABLE`` statements of ``sql`` define."""
    schema: Schema = {}
    for match in _CREATE.finditer(sql):
        depth, end = 1, match.end()
        while end < len(sql) and depth:
            depth += (sql[end] == "(") - (sql[end] == ")")
            end += 1
        schema[match.group(1).replace('"', "").lower()] = _columns(sql[match.end() : end - 1])
    return schema


def pack_schema(pack_dir: str) -> Schema:
    """The schema of the pack in folder ``pack_dir`` (its ``trino/setup.sql``)."""
    path = os.path.join(pack_dir, SETUP_SQL)
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_schema(fh.read())
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput(
            [Problem(path, None, "", f"cannot read the pack's SQL ({exc})")]
        ) from None


def schema_hash(schema: Schema) -> str:
    """A schema's content hash (blake3, domain-separated, of its canonical JSON)."""
    return blake3.blake3(_DOMAIN + canonical_json(schema)).hexdigest()


def render_manifest(schema: Schema) -> str:
    """The ``pack-schema.toml`` text recording ``schema`` (what ``protocols generate`` writes)."""
    lines = [
        "# The seed pack schema this protocol set's answers were computed on: a run refuses",
        "# a pack without these tables and columns (docs/protocols.md). Generated; do not edit.",
        f'schema_hash = "{schema_hash(schema)}"',
    ]
    for table in sorted(schema):
        lines += ["", f'[tables."{table}"]']
        lines += [f'{col} = "{kind}"' for col, kind in schema[table].items()]
    return "\n".join(lines) + "\n"


def needs(set_path: str) -> Needs | None:
    """The schema the set at ``set_path`` records needing, or None if it records none."""
    folder = set_path if os.path.isdir(set_path) else os.path.dirname(set_path)
    manifest = os.path.join(folder, MANIFEST)
    if os.path.isfile(manifest):
        try:
            with open(manifest, "rb") as fh:
                data = tomllib.load(fh)
            tables = data["tables"]
            schema = {t: {c: str(k) for c, k in cols.items()} for t, cols in tables.items()}
        except (OSError, tomllib.TOMLDecodeError, KeyError, AttributeError) as exc:
            raise InvalidInput([Problem(manifest, None, "tables", f"unreadable ({exc})")]) from None
        if data.get("schema_hash") != schema_hash(schema):
            raise InvalidInput([Problem(manifest, None, "schema_hash",
                                        "is not the hash of its tables")])  # fmt: skip
        return Needs(schema, manifest)
    seed = os.path.join(os.path.dirname(os.path.abspath(folder)), PEER_SEED)
    if os.path.isfile(os.path.join(seed, SETUP_SQL)):
        return Needs(pack_schema(seed), os.path.join(seed, SETUP_SQL))
    return None


def entity_table(urn: str) -> str:
    """The table a dataset URN names (``urn:li:dataset:(urn:li:dataPlatform:P,T,ENV)``)."""
    inner = urn.partition("(")[2].rpartition(")")[0]
    parts = inner.split(",")
    return parts[1].lower() if len(parts) == 3 else ""


def _difference(table: str, need: dict[str, str], have: dict[str, str] | None) -> str:
    """What the pack lacks of ``table`` as the set needs it ("" for nothing)."""
    if have is None:
        return f"has no table {table}"
    for column, kind in need.items():
        if column not in have:
            return f"has no column {table}.{column} {kind} (its columns: {', '.join(have)})"
        if have[column] != kind:
            return f"has {table}.{column} as {have[column]}, not {kind}"
    return ""


def check(
    protocols: Iterable[tuple[Protocol, str]], set_path: str, pack_dir: str, pack_name: str
) -> None:
    """InvalidInput (one problem) when the pack at ``pack_dir`` (called ``pack_name``) lacks a
    table or column the set at ``set_path`` needs; ``protocols``: the run's (protocol, file)."""
    needed = needs(set_path)
    if needed is None:
        return
    have = pack_schema(pack_dir)
    why = f"the set needs the schema of {needed.source}: give --pack the pack it was made with"
    for protocol, file in protocols:
        table = entity_table(protocol.entity_urn)
        if table in needed.schema:
            wrong = _difference(table, needed.schema[table], have.get(table))
            if wrong:
                raise InvalidInput([Problem(file, None, "entity_urn",
                                            f"the pack {pack_name} {wrong}; {why}")])  # fmt: skip
    for table, columns in needed.schema.items():
        wrong = _difference(table, columns, have.get(table))
        if wrong:
            raise InvalidInput([Problem(needed.source, None, "tables",
                                        f"the pack {pack_name} {wrong}")])  # fmt: skip
