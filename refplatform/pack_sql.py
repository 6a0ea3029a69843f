"""The SQL lexer of seed packs: tokens, and ``trino/setup.sql`` split into statements.

Nothing here needs a database. ``tokens`` reads PostgreSQL's quoting (``'...'`` with
doubled quotes, ``"..."`` identifiers, ``$tag$`` dollar bodies, ``--`` and ``/* */``
comments) so the knowledge pages' INSERTs can be parsed; ``split_statements`` cuts the
setup SQL at top-level semicolons, each statement with the line it starts on, for the
SQL engine to run.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import NamedTuple

from benchledger.refplatform.errors import PackError


class SetupStatement(NamedTuple):
    """One statement of ``trino/setup.sql`` and the line it starts on."""

    line: int
    sql: str


class Token(NamedTuple):
    kind: str  # word, number, string, dollar, ident, punct
    text: str  # the value: unquoted for strings, dollar bodies and quoted identifiers
    line: int
    start: int
    end: int


_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_$]*")
_NUMBER = re.compile(r"\d+(?:\.\d*)?(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?")
_DOLLAR = re.compile(r"\$([A-Za-z_][A-Za-z0-9_]*)?\$")


def tokens(file: str, text: str) -> Iterator[Token]:
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
# runs of characters that open nothing (no quote, comment, dollar quote or ";"), spaces
# included (a statement's text is cut at its last token by stripping them again).
_PLAIN = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_$]*|[^'\";$/\-A-Za-z_])+")


def split_statements(file: str, text: str) -> list[SetupStatement]:
    """``text``'s statements, split at each ``;`` outside quotes and comments, each from
    its first token to its last with the first one's line: what ``tokens`` gives, without
    making a token of every value (the default pack's ~66,000 took ~0.4 s of a run's CPU).
    A quoting error is left to ``tokens``, which names it."""
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
                out.append(SetupStatement(line, text[first:last].rstrip()))
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
                return list(split_tokens(file, text))
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
            return list(split_tokens(file, text))
        first = i if first < 0 else first
        last = i = end
    if first >= 0:
        line += text.count("\n", counted, first)
        out.append(SetupStatement(line, text[first:last].rstrip()))
    return out


def split_tokens(file: str, text: str) -> Iterator[SetupStatement]:
    """``split_statements`` token by token: the reference it must agree with."""
    first: Token | None = None
    last: Token | None = None
    for tok in tokens(file, text):
        if tok.kind == "punct" and tok.text == ";":
            if first is not None and last is not None:
                yield SetupStatement(first.line, text[first.start : last.end])
            first = last = None
            continue
        first = first or tok
        last = tok
    if first is not None and last is not None:
        yield SetupStatement(first.line, text[first.start : last.end])
