"""Seed packs: a folder in the peer's seed layout, read into one immutable, hashed ``Pack``.

The layout is the one txn2/mcp-data-platform's bench seeds its deployment from::

    trino/setup.sql                 SQL creating the ``memory.<schema>.*`` tables
    datahub/*.json                  DataHub metadata change proposals (descriptions, tags, ...)
    postgres/knowledge_pages.sql    INSERTs into ``portal_knowledge_pages``

Nothing here needs a database: the knowledge pages' INSERTs (with their ``$tag$``
dollar-quoted bodies and ``'...'::jsonb`` casts) are parsed by a small SQL lexer, and
the setup SQL is only split into statements (with their line numbers) for the SQL
engine to run. A ``datahub/*_empty.json`` file is the peer's ablation variant that
blanks every description; it is not part of the seeded state and is not read.
"""

from __future__ import annotations

import functools
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Final, NamedTuple

import blake3

import protocols
from refplatform.errors import PackError

SETUP_SQL: Final = "trino/setup.sql"
MCE_DIR: Final = "datahub"
PAGES_SQL: Final = "postgres/knowledge_pages.sql"
PAGES_TABLE: Final = "portal_knowledge_pages"
DEFAULT_PACK_DIR: Final = os.path.join(protocols.DATA_DIR, "pack")
_VARIANT_SUFFIX: Final = "_empty.json"
_HASH_DOMAIN: Final = b"benchledger:pack:v1\x00"


# ---------------------------------------------------------------------------- the pack's types


class SetupStatement(NamedTuple):
    """One statement of ``trino/setup.sql`` and the line it starts on."""

    line: int
    sql: str


@dataclass(frozen=True)
class Field:
    """An entity's schema field: ``schemaMetadata`` overlaid by ``editableSchemaMetadata``."""

    path: str
    type: str  # native data type as the MCE gives it; "" when only an editable overlay names it
    description: str
    tags: tuple[str, ...] = ()
    glossary_terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Owner:
    urn: str
    type: str


@dataclass(frozen=True)
class Deprecation:
    deprecated: bool
    note: str
    actor: str


@dataclass(frozen=True)
class Query:
    """A saved query (a DataHub ``query`` entity) about a dataset."""

    urn: str
    name: str
    statement: str
    language: str
    description: str


@dataclass(frozen=True)
class Entity:
    """A catalog entity as the pack's MCEs describe it; ``aspects`` keeps every aspect raw."""

    urn: str
    entity_type: str
    name: str
    platform: str
    qualified_name: str
    description: str
    fields: tuple[Field, ...]
    has_schema_metadata: bool  # False: the peer's DataHub answers ``"fields": null``
    tags: tuple[str, ...]
    glossary_terms: tuple[str, ...]
    owners: tuple[Owner, ...]
    custom_properties: Mapping[str, str]
    queries: tuple[Query, ...]
    deprecation: Deprecation | None
    aspects: Mapping[str, Any]
    source: str  # "datahub/<file>.json:<line>" of its first MCE


@dataclass(frozen=True)
class GlossaryTerm:
    urn: str
    name: str
    definition: str
    parent: str
    source: str
    aspects: Mapping[str, Any]


@dataclass(frozen=True)
class KnowledgePage:
    """A seeded knowledge page, one row of ``portal_knowledge_pages``."""

    id: str
    slug: str
    title: str
    summary: str
    body: str
    tags: tuple[str, ...]
    created_by: str
    created_email: str
    updated_by: str
    current_version: int
    created_at: str
    updated_at: str


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
    statements = tuple(_split_statements(SETUP_SQL, texts[SETUP_SQL]))
    if not statements:
        raise PackError(SETUP_SQL, None, "holds no SQL statement; it must create the tables")
    aspects, origins, order = _read_mces({rel: texts[rel] for rel in mce_files})
    return Pack(
        name=os.path.basename(os.path.normpath(root)),
        path=os.path.abspath(root),
        pack_hash=_hash(files, blobs),
        files=files,
        setup_sql=texts[SETUP_SQL],
        setup_statements=statements,
        entities=_entities(aspects, origins, order),
        glossary_terms=_glossary(aspects, order),
        pages=_parse_pages(PAGES_SQL, texts[PAGES_SQL]),
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


# ---------------------------------------------------------------------------- SQL lexing


class Token(NamedTuple):
    kind: str  # word, number, string, dollar, ident, punct
    text: str  # the value: unquoted for strings, dollar bodies and quoted identifiers
    line: int
    start: int
    end: int


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def _tokens(file: str, text: str) -> Iterator[Token]:
    """The SQL tokens of ``text``; comments are skipped, quoting errors raise ``PackError``."""
    i, n, line = 0, len(text), 1
    spanning: Token | None = None  # the first string literal that runs over a line break
    while i < n:
        c = text[i]
        if c == "\n":
            line += 1
            i += 1
        elif c.isspace():
            i += 1
        elif text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
        elif text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                raise PackError(file, line, "a /* comment is never closed")
            line += text.count("\n", i, end)
            i = end + 2
        elif c in "'\"":
            end = _quote_end(text, i + 1, c)
            if end < 0:
                raise _unclosed(file, line, c, spanning)
            value = text[i + 1 : end - 1].replace(c * 2, c)
            tok = Token("string" if c == "'" else "ident", value, line, i, end)
            if spanning is None and "\n" in value:
                spanning = tok
            yield tok
            line += text.count("\n", i, end)
            i = end
        elif c == "$" and (m := _DOLLAR.match(text, i)):
            tag = m.group(0)
            close = text.find(tag, m.end())
            if close < 0:
                what = f"the dollar-quoted text opened with {tag} on this line is never closed"
                raise PackError(file, line, f"{what}; a closing {tag} is missing here or earlier")
            yield Token("dollar", text[m.end() : close], line, i, close + len(tag))
            line += text.count("\n", i, close)
            i = close + len(tag)
        elif m := _WORD.match(text, i):
            yield Token("word", m.group(0), line, i, m.end())
            i = m.end()
        elif (c.isdigit() or c == ".") and (m := _NUMBER.match(text, i)):
            yield Token("number", m.group(0), line, i, m.end())
            i = m.end()
        elif text.startswith("::", i):
            yield Token("punct", "::", line, i, i + 2)
            i += 2
        else:
            yield Token("punct", c, line, i, i + 1)
            i += 1


def _quote_end(text: str, i: int, quote: str) -> int:
    """The offset just past the closing ``quote`` (a doubled quote escapes), or -1."""
    while True:
        close = text.find(quote, i)
        if close < 0:
            return -1
        if text.startswith(quote * 2, close):
            i = close + 2
            continue
        return close + 1


def _unclosed(file: str, line: int, quote: str, spanning: Token | None) -> PackError:
    what = "string literal" if quote == "'" else "quoted identifier"
    if spanning is not None:
        # A missing quote pairs every later quote with the wrong partner; the first literal
        # that runs over a line break is where that started.
        last = spanning.line + spanning.text.count("\n")
        return PackError(
            file, spanning.line, f"a {what} runs from this line to line {last}: a quote is missing"
        )
    return PackError(file, line, f"a {what} opened on this line is never closed")


# What the statement splitter steps over in one match: words (a word may hold "$") and
# runs of characters that open nothing (no space, quote, comment, dollar quote or ";").
_PLAIN = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_$]*|[^\s'\";$/\-A-Za-z_])+")


def _split_statements(file: str, text: str) -> list[SetupStatement]:
    """``text``'s statements, split at each ``;`` outside quotes and comments, each from
    its first token to its last with the first one's line: what ``_tokens`` gives, without
    making a token of every value (the default pack's ~66,000 took ~0.4 s of a run's CPU).
    A quoting error is left to ``_tokens``, which names it."""
    out: list[SetupStatement] = []
    i, n = 0, len(text)
    first = last = -1  # the statement's first token's start, its last token's end
    line, counted = 1, 0  # the line of offset ``counted``
    while i < n:
        c = text[i]
        end = -1
        if c.isspace():
            i += 1
            continue
        if c == ";":
            if first >= 0:
                line += text.count("\n", counted, first)
                counted = first
                out.append(SetupStatement(line, text[first:last]))
            first = last = -1
            i += 1
            continue
        if text.startswith("--", i):
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if text.startswith("/*", i):
            end = text.find("*/", i + 2)
            if end < 0:
                return list(_split_tokens(file, text))
            i = end + 2
            continue
        if c in "'\"":
            end = _quote_end(text, i + 1, c)
        elif c == "$" and (m := _DOLLAR.match(text, i)):
            close = text.find(m.group(0), m.end())
            end = close + len(m.group(0)) if close >= 0 else -1
        else:
            plain = _PLAIN.match(text, i)
            end = plain.end() if plain else i + 1  # a lone "$", "/" or "-"
        if end < 0:
            return list(_split_tokens(file, text))
        first = i if first < 0 else first
        last = i = end
    if first >= 0:
        line += text.count("\n", counted, first)
        out.append(SetupStatement(line, text[first:last]))
    return out


def _split_tokens(file: str, text: str) -> Iterator[SetupStatement]:
    """``_split_statements`` token by token: the reference it must agree with."""
    first: Token | None = None
    last: Token | None = None
    for tok in _tokens(file, text):
        if tok.kind == "punct" and tok.text == ";":
            if first is not None and last is not None:
                yield SetupStatement(first.line, text[first.start : last.end])
            first = last = None
            continue
        first = first or tok
        last = tok
    if first is not None and last is not None:
        yield SetupStatement(first.line, text[first.start : last.end])


# ---------------------------------------------------------------------------- knowledge pages

_PAGE_COLUMNS: Final = (
    "id", "slug", "title", "summary", "body", "tags", "created_by", "created_email",
    "updated_by", "current_version", "created_at", "updated_at",
)  # fmt: skip
_PAGE_REQUIRED: Final = ("id", "slug", "title", "body")
_SKIPPED_STATEMENTS: Final = frozenset({"begin", "commit", "start"})


class _Cursor:
    """A token stream with one-token lookahead and errors that name file and line."""

    def __init__(self, file: str, tokens: list[Token]) -> None:
        self.file = file
        self.tokens = tokens
        self.i = 0

    def peek(self) -> Token | None:
        return self.tokens[self.i] if self.i < len(self.tokens) else None

    def line(self) -> int | None:
        tok = self.peek()
        if tok is not None:
            return tok.line
        return self.tokens[-1].line if self.tokens else None

    def fail(self, what: str) -> PackError:
        return PackError(self.file, self.line(), what)

    def next(self, expected: str) -> Token:
        tok = self.peek()
        if tok is None:
            raise self.fail(f"the file ends where {expected} was expected")
        self.i += 1
        return tok

    def is_(self, text: str) -> bool:
        tok = self.peek()
        return tok is not None and tok.kind in ("word", "punct") and tok.text.lower() == text

    def expect(self, text: str) -> Token:
        tok = self.next(repr(text.upper() if text.isalpha() else text))
        if tok.kind not in ("word", "punct") or tok.text.lower() != text:
            shown = text.upper() if text.isalpha() else text
            self.i -= 1
            raise self.fail(f"expected {shown!r}, found {_shown(tok)}")
        return tok


def _shown(tok: Token) -> str:
    if tok.kind in ("string", "dollar"):
        return "a string"
    return repr(tok.text)


def _parse_pages(file: str, text: str) -> tuple[KnowledgePage, ...]:
    cur = _Cursor(file, list(_tokens(file, text)))
    pages: list[KnowledgePage] = []
    first_line: dict[tuple[str, str], int] = {}
    while cur.peek() is not None:
        if cur.is_(";"):
            cur.next(";")
            continue
        tok = cur.peek()
        assert tok is not None
        if tok.kind == "word" and tok.text.lower() in _SKIPPED_STATEMENTS:
            _skip_statement(cur)
            continue
        for line, page in _insert(cur):
            for key in ("id", "slug"):
                value = getattr(page, key)
                if (key, value) in first_line:
                    where = f"first at line {first_line[key, value]}"
                    raise PackError(file, line, f"duplicate page {key} {value!r} ({where})")
                first_line[key, value] = line
            pages.append(page)
    return tuple(pages)


def _skip_statement(cur: _Cursor) -> None:
    while (tok := cur.peek()) is not None:
        cur.next(";")
        if tok.kind == "punct" and tok.text == ";":
            return


def _insert(cur: _Cursor) -> list[tuple[int, KnowledgePage]]:
    tok = cur.peek()
    if tok is None or tok.kind != "word" or tok.text.lower() != "insert":
        found = _shown(tok) if tok is not None else "the end"
        raise cur.fail(f"expected INSERT INTO {PAGES_TABLE}, found {found}")
    cur.expect("insert")
    cur.expect("into")
    table = cur.next("a table name")
    name = table.text
    while cur.is_("."):
        cur.next(".")
        name = cur.next("a table name").text
    if name.lower() != PAGES_TABLE:
        raise PackError(
            cur.file, table.line, f"inserts into {name!r}; only {PAGES_TABLE} is seeded"
        )
    columns = _column_list(cur)
    cur.expect("values")
    rows = [_row(cur, columns)]
    while cur.is_(","):
        cur.next(",")
        rows.append(_row(cur, columns))
    if cur.is_("on"):  # ON CONFLICT ... only matters to a re-seeded Postgres
        _skip_statement(cur)
    elif cur.peek() is not None:
        cur.expect(";")
    return rows


def _column_list(cur: _Cursor) -> list[str]:
    cur.expect("(")
    columns: list[str] = []
    while True:
        tok = cur.next("a column name")
        if tok.kind not in ("word", "ident"):
            cur.i -= 1
            raise cur.fail(f"expected a column name, found {_shown(tok)}")
        name = tok.text.lower()
        if name not in _PAGE_COLUMNS:
            raise PackError(
                cur.file, tok.line, f"unknown column {name!r}; known: {', '.join(_PAGE_COLUMNS)}"
            )
        if name in columns:
            raise PackError(cur.file, tok.line, f"column {name!r} is listed twice")
        columns.append(name)
        if cur.is_(")"):
            cur.next(")")
            break
        cur.expect(",")
    missing = [c for c in _PAGE_REQUIRED if c not in columns]
    if missing:
        raise cur.fail(f"the column list lacks {', '.join(missing)}")
    return columns


def _row(cur: _Cursor, columns: list[str]) -> tuple[int, KnowledgePage]:
    opened = cur.expect("(")
    values: list[Any] = []
    while True:
        values.append(_value(cur))
        if cur.is_(")"):
            cur.next(")")
            break
        cur.expect(",")
    if len(values) != len(columns):
        raise PackError(
            cur.file, opened.line, f"a row has {len(values)} values for {len(columns)} columns"
        )
    return opened.line, _page(cur.file, opened.line, dict(zip(columns, values, strict=True)))


def _value(cur: _Cursor) -> Any:
    tok = cur.next("a value")
    sign = ""
    if tok.kind == "punct" and tok.text == "-":
        sign, tok = "-", cur.next("a number")
    if tok.kind in ("string", "dollar"):
        value: Any = tok.text
    elif tok.kind == "number":
        text = sign + tok.text
        value = int(text) if text.lstrip("-").isdigit() else float(text)
    elif tok.kind == "word" and tok.text.lower() in ("null", "true", "false"):
        value = {"null": None, "true": True, "false": False}[tok.text.lower()]
    else:
        cur.i -= 1
        raise cur.fail(f"expected a value, found {_shown(tok)}")
    if cur.is_("::"):
        cur.next("::")
        cast = cur.next("a type name")
        if cast.text.lower() in ("json", "jsonb") and isinstance(value, str):
            try:
                value = json.loads(value)
            except json.JSONDecodeError as exc:
                raise PackError(
                    cur.file, tok.line + exc.lineno - 1, f"bad JSON in ::{cast.text}: {exc.msg}"
                ) from None
    return value


def _page(file: str, line: int, row: dict[str, Any]) -> KnowledgePage:
    def text(key: str) -> str:
        value = row.get(key, "")
        if value is None:
            return ""
        if not isinstance(value, str):
            raise PackError(file, line, f"{key} must be text, got {value!r}")
        return value

    tags = row.get("tags") or []
    if isinstance(tags, str):
        tags = [tags]
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        raise PackError(file, line, "tags must be a JSON array of strings ('[...]'::jsonb)")
    version = row.get("current_version", 1)
    if isinstance(version, str) and version.isdigit():
        version = int(version)
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise PackError(file, line, f"current_version must be a positive integer, got {version!r}")
    for key in _PAGE_REQUIRED:
        if not text(key).strip():
            raise PackError(file, line, f"{key} must not be empty")
    return KnowledgePage(
        id=text("id"), slug=text("slug"), title=text("title"), summary=text("summary"),
        body=text("body"), tags=tuple(tags), created_by=text("created_by"),
        created_email=text("created_email"), updated_by=text("updated_by"),
        current_version=version, created_at=text("created_at"), updated_at=text("updated_at"),
    )  # fmt: skip


# ---------------------------------------------------------------------------- DataHub MCEs

_Aspects = dict[str, dict[str, Any]]


def _read_mces(texts: Mapping[str, str]) -> tuple[_Aspects, dict[str, str], list[str]]:
    """Every aspect by urn (later UPSERTs win), where each urn first appears, and urn order."""
    aspects: _Aspects = {}
    origins: dict[str, str] = {}
    for rel, text in texts.items():
        for line, item in _json_items(rel, text):
            urn, name, value = _proposal(rel, line, item)
            aspects.setdefault(urn, {})[name] = value
            origins.setdefault(urn, f"{rel}:{line}")
    return aspects, origins, list(origins)


def _json_items(rel: str, text: str) -> Iterator[tuple[int, Any]]:
    """The items of the file's top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        while i < len(text) and text[i].isspace():
            i += 1
        return i

    def decode(i: int) -> tuple[Any, int]:
        try:
            return decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise PackError(rel, exc.lineno, f"bad JSON: {exc.msg}") from None

    i = skip(0)
    if i < len(text) and text[i] == "{":  # a single proposal on its own
        item, end = decode(i)
        if text[skip(end) :]:
            raise PackError(
                rel, text.count("\n", 0, end) + 1, "bad JSON: extra data after the object"
            )
        yield text.count("\n", 0, i) + 1, item
        return
    if i >= len(text) or text[i] != "[":
        raise PackError(rel, text.count("\n", 0, i) + 1, "must hold a JSON array of MCEs")
    i = skip(i + 1)
    if i < len(text) and text[i] == "]":
        i = skip(i + 1)
    else:
        while True:
            item, end = decode(i)
            yield text.count("\n", 0, i) + 1, item
            i = skip(end)
            if i < len(text) and text[i] == ",":
                i = skip(i + 1)
                continue
            if i < len(text) and text[i] == "]":
                i = skip(i + 1)
                break
            raise PackError(rel, text.count("\n", 0, i) + 1, "bad JSON: expected ',' or ']'")
    if i < len(text):
        raise PackError(rel, text.count("\n", 0, i) + 1, "bad JSON: extra data after the array")


def _proposal(rel: str, line: int, item: Any) -> tuple[str, str, Any]:
    """(urn, aspect name, aspect value) of one metadata change proposal."""
    if not isinstance(item, dict):
        raise PackError(rel, line, "each MCE must be a JSON object")
    urn, name = item.get("entityUrn"), item.get("aspectName")
    if not isinstance(urn, str) or not urn.startswith("urn:li:"):
        raise PackError(rel, line, "an MCE needs entityUrn (urn:li:...)")
    if not isinstance(name, str) or not name:
        raise PackError(rel, line, f"the MCE for {urn} needs aspectName")
    change = item.get("changeType", "UPSERT")
    if change != "UPSERT":
        raise PackError(rel, line, f"changeType {change!r} is not supported (only UPSERT)")
    aspect = item.get("aspect")
    if not isinstance(aspect, dict):
        raise PackError(rel, line, f"the MCE for {urn} {name} needs an aspect object")
    if "json" in aspect:
        value = aspect["json"]
    elif isinstance(aspect.get("value"), str):  # the REST form: the aspect as a JSON string
        try:
            value = json.loads(aspect["value"])
        except json.JSONDecodeError as exc:
            raise PackError(
                rel, line, f"aspect.value of {urn} {name} is bad JSON: {exc.msg}"
            ) from None
    else:
        raise PackError(rel, line, f"the MCE for {urn} {name} needs aspect.json")
    if not isinstance(value, dict):
        raise PackError(rel, line, f"aspect {name} of {urn} must be a JSON object")
    return urn, name, value


def _entity_type(urn: str) -> str:
    return urn.split(":", 3)[2] if urn.count(":") >= 3 else ""


def _dataset_parts(urn: str) -> tuple[str, str]:
    """(platform, qualified name) of ``urn:li:dataset:(urn:li:dataPlatform:P,NAME,ENV)``."""
    m = re.fullmatch(r"urn:li:dataset:\(urn:li:dataPlatform:([^,]+),(.+),([^,]+)\)", urn)
    return (m.group(1), m.group(2)) if m else ("", "")


def _strs(items: Any, key: str) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(str(x[key]) for x in items if isinstance(x, dict) and key in x)


def _entities(aspects: _Aspects, origins: dict[str, str], order: list[str]) -> tuple[Entity, ...]:
    queries = _queries(aspects, order)
    out = []
    for urn in order:
        kind = _entity_type(urn)
        if kind != "dataset":
            continue
        a = aspects[urn]
        props = a.get("datasetProperties", {})
        editable = a.get("editableDatasetProperties", {})
        platform, qualified = _dataset_parts(urn)
        name = props.get("name") or qualified.rsplit(".", 1)[-1] or urn
        description = editable.get("description") or props.get("description") or ""
        dep = a.get("deprecation")
        out.append(
            Entity(
                urn=urn,
                entity_type=kind,
                name=str(name),
                platform=platform,
                qualified_name=qualified,
                description=str(description),
                fields=_fields(a),
                has_schema_metadata="schemaMetadata" in a,
                tags=_strs(a.get("globalTags", {}).get("tags"), "tag"),
                glossary_terms=_strs(a.get("glossaryTerms", {}).get("terms"), "urn"),
                owners=tuple(
                    Owner(str(o.get("owner", "")), str(o.get("type", "")))
                    for o in a.get("ownership", {}).get("owners", [])
                    if isinstance(o, dict)
                ),
                custom_properties=MappingProxyType(
                    {str(k): str(v) for k, v in (props.get("customProperties") or {}).items()}
                ),
                queries=tuple(queries.get(urn, ())),
                deprecation=None
                if dep is None
                else Deprecation(
                    bool(dep.get("deprecated")), str(dep.get("note", "")), str(dep.get("actor", ""))
                ),
                aspects=MappingProxyType(dict(a)),
                source=origins[urn],
            )
        )
    return tuple(out)


def _fields(a: dict[str, Any]) -> tuple[Field, ...]:
    fields: dict[str, Field] = {}
    for f in a.get("schemaMetadata", {}).get("fields", []):
        if isinstance(f, dict) and "fieldPath" in f:
            fields[f["fieldPath"]] = Field(
                path=str(f["fieldPath"]),
                type=str(f.get("nativeDataType", "")),
                description=str(f.get("description") or ""),
                tags=_strs((f.get("globalTags") or {}).get("tags"), "tag"),
                glossary_terms=_strs((f.get("glossaryTerms") or {}).get("terms"), "urn"),
            )
    for e in a.get("editableSchemaMetadata", {}).get("editableSchemaFieldInfo", []):
        if not isinstance(e, dict) or "fieldPath" not in e:
            continue
        base = fields.get(e["fieldPath"]) or Field(str(e["fieldPath"]), "", "")
        fields[base.path] = Field(
            path=base.path,
            type=base.type,
            description=str(e.get("description") or base.description),
            tags=base.tags + _strs((e.get("globalTags") or {}).get("tags"), "tag"),
            glossary_terms=base.glossary_terms
            + _strs((e.get("glossaryTerms") or {}).get("terms"), "urn"),
        )
    return tuple(fields.values())


def _queries(aspects: _Aspects, order: list[str]) -> dict[str, list[Query]]:
    by_subject: dict[str, list[Query]] = {}
    for urn in order:
        if _entity_type(urn) != "query":
            continue
        props = aspects[urn].get("queryProperties", {})
        statement = props.get("statement") or {}
        query = Query(
            urn=urn,
            name=str(props.get("name") or ""),
            statement=str(statement.get("value", "")) if isinstance(statement, dict) else "",
            language=str(statement.get("language", "")) if isinstance(statement, dict) else "",
            description=str(props.get("description") or ""),
        )
        for subject in _strs(aspects[urn].get("querySubjects", {}).get("subjects"), "entity"):
            by_subject.setdefault(subject, []).append(query)
    return by_subject


def _glossary(aspects: _Aspects, order: list[str]) -> tuple[GlossaryTerm, ...]:
    out = []
    for urn in order:
        if _entity_type(urn) != "glossaryTerm":
            continue
        a = aspects[urn]
        info = a.get("glossaryTermInfo", {})
        out.append(
            GlossaryTerm(
                urn=urn,
                name=str(info.get("name") or urn.rsplit(":", 1)[-1]),
                definition=str(info.get("definition") or ""),
                parent=str(info.get("parentNode") or ""),
                source=str(info.get("termSource") or ""),
                aspects=MappingProxyType(dict(a)),
            )
        )
    return tuple(out)


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
