"""Seed packs: a folder in the peer's seed layout, read into one immutable, hashed ``Pack``.

The layout is the one txn2/mcp-data-platform's bench seeds its deployment from::

    trino/setup.sql                 SQL creating the ``memory.<schema>.*`` tables
    datahub/*.json                  DataHub metadata change proposals (descriptions, tags, ...)
    postgres/knowledge_pages.sql    INSERTs into ``portal_knowledge_pages``

Nothing here needs a database: the knowledge pages' INSERTs (with their ``$tag$``
dollar-quoted bodies and ``'...'::jsonb`` casts) are parsed by a small SQL lexer
(``pack_sql``, ``pack_pages``), the MCEs are read in ``pack_mces``, and the setup SQL is
only split into statements (with their line numbers) for the SQL engine to run. A
``datahub/*_empty.json`` file is the peer's ablation variant that blanks every
description; it is not part of the seeded state and is not read.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final

import blake3

from benchledger import protocols
from benchledger.refplatform.errors import PackError
from benchledger.refplatform.pack_mces import (
    Deprecation,
    Entity,
    Field,
    GlossaryTerm,
    Owner,
    Query,
    entities,
    glossary,
    read_mces,
)
from benchledger.refplatform.pack_pages import KnowledgePage, parse_pages
from benchledger.refplatform.pack_sql import SetupStatement, split_statements

SETUP_SQL: Final = "trino/setup.sql"
MCE_DIR: Final = "datahub"
PAGES_SQL: Final = "postgres/knowledge_pages.sql"
DEFAULT_PACK_DIR: Final = protocols.PACK_DIR
_VARIANT_SUFFIX: Final = "_empty.json"
_HASH_DOMAIN: Final = b"benchledger:pack:v1\x00"


@dataclass(frozen=True)
class Pack:
    """A loaded seed pack. ``pack_hash`` is blake3 over its files' bytes in a fixed order."""

    name: str
    path: str
    pack_hash: str
    files: tuple[str, ...]  # the files read (and hashed), relative to ``path``
    setup_sql: str
    setup_statements: tuple[SetupStatement, ...]
    entities: tuple[Entity, ...]
    glossary_terms: tuple[GlossaryTerm, ...]
    pages: tuple[KnowledgePage, ...]
    aspects: Mapping[str, Mapping[str, Any]]  # every MCE aspect by urn, then aspect name

    def entity(self, urn: str) -> Entity | None:
        """The entity with ``urn``, or None."""
        return next((e for e in self.entities if e.urn == urn), None)

    def page(self, slug: str) -> KnowledgePage | None:
        """The seeded page with ``slug``, or None."""
        return next((p for p in self.pages if p.slug == slug), None)


# ---------------------------------------------------------------------------- loading


def load_pack(path: str | os.PathLike[str]) -> Pack:
    """Read the pack in folder ``path``; raises ``PackError`` (file, line, what) if it is bad."""
    root = os.fspath(path)
    if not os.path.isdir(root):
        raise PackError(root, None, "not a folder; a pack is a folder in the peer's seed layout")
    mce_files = _mce_files(root)
    files = (SETUP_SQL, *mce_files, PAGES_SQL)
    blobs = {rel: _read(root, rel) for rel in files}
    texts = {rel: _decode(rel, data) for rel, data in blobs.items()}
    statements = tuple(split_statements(SETUP_SQL, texts[SETUP_SQL]))
    if not statements:
        raise PackError(SETUP_SQL, None, "holds no SQL statement; it must create the tables")
    aspects, origins, order = read_mces({rel: texts[rel] for rel in mce_files})
    return Pack(
        name=os.path.basename(os.path.normpath(root)),
        path=os.path.abspath(root),
        pack_hash=_hash(files, blobs),
        files=files,
        setup_sql=texts[SETUP_SQL],
        setup_statements=statements,
        entities=entities(aspects, origins, order),
        glossary_terms=glossary(aspects, order),
        pages=parse_pages(PAGES_SQL, texts[PAGES_SQL]),
        aspects=MappingProxyType({u: MappingProxyType(a) for u, a in aspects.items()}),
    )


@functools.cache
def default_pack() -> Pack:
    """benchledger's own committed pack (``protocols/data/pack``), loaded once per process."""
    return load_pack(DEFAULT_PACK_DIR)


def _mce_files(root: str) -> tuple[str, ...]:
    folder = os.path.join(root, MCE_DIR)
    if not os.path.isdir(folder):
        raise PackError(MCE_DIR + "/", None, "missing: a pack needs datahub/*.json MCE files")
    names = sorted(
        n for n in os.listdir(folder) if n.endswith(".json") and not n.endswith(_VARIANT_SUFFIX)
    )
    if not names:
        raise PackError(MCE_DIR + "/", None, "holds no *.json MCE file")
    return tuple(f"{MCE_DIR}/{n}" for n in names)


def _read(root: str, rel: str) -> bytes:
    try:
        with open(os.path.join(root, rel), "rb") as fh:
            return fh.read()
    except FileNotFoundError:
        raise PackError(rel, None, "missing: every pack has this file") from None
    except OSError as exc:
        raise PackError(rel, None, f"cannot be read: {exc.strerror}") from None


def _decode(rel: str, data: bytes) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        raise PackError(rel, line, "is not UTF-8 text") from None


def _hash(files: tuple[str, ...], blobs: Mapping[str, bytes]) -> str:
    # Name and length frame each file, so moving bytes between files changes the hash.
    h = blake3.blake3(_HASH_DOMAIN)
    for rel in sorted(files):
        data = blobs[rel]
        h.update(rel.encode() + b"\x00" + len(data).to_bytes(8, "big"))
        h.update(data)
    return h.hexdigest()


__all__ = [
    "DEFAULT_PACK_DIR",
    "Deprecation",
    "Entity",
    "Field",
    "GlossaryTerm",
    "KnowledgePage",
    "Owner",
    "Pack",
    "PackError",
    "Query",
    "SetupStatement",
    "default_pack",
    "load_pack",
]
