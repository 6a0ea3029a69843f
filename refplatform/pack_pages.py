"""The seeded knowledge pages: ``postgres/knowledge_pages.sql`` parsed into ``KnowledgePage``s.

The file holds INSERTs into ``portal_knowledge_pages`` (with ``$tag$`` dollar-quoted
bodies and ``'...'::jsonb`` casts), read with the pack lexer; an error names the file and
line.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

from benchledger.refplatform.errors import PackError
from benchledger.refplatform.pack_sql import Token, tokens

PAGES_TABLE: Final = "portal_knowledge_pages"


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


def parse_pages(file: str, text: str) -> tuple[KnowledgePage, ...]:
    """The pages ``file`` seeds; ``PackError`` (file, line, what) when it is not such INSERTs."""
    cur = _Cursor(file, list(tokens(file, text)))
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
