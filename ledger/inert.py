"""Inert text: what a bundle, a ledger, a peer folder or a platform says, made safe to show.

A string read from any of them may carry terminal control: an ESC sequence that moves the
cursor and overwrites the ``UNAUTHENTICATED`` first line, a carriage return, a bidi
override that reorders what is read. ``inert`` escapes every C0 and C1 control character
(and the bidi controls) as ``\\uXXXX``: readable, and still valid inside a JSON string.
The command line passes all it writes through it (``cli.common.InertStream``), so no
command can forget it; HTML pages escape with ``inert_html``.
"""

from __future__ import annotations

import functools
import html
import re
from collections.abc import Callable
from typing import ParamSpec

_P = ParamSpec("_P")

# C0 but tab and newline (our own layout's), DEL, C1, and the bidi embeddings, overrides
# and isolates. ``_VALUE`` escapes tab and newline too: inside one value they are not ours.
_LAYOUT = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")
_VALUE = re.compile("[\x00-\x1f\x7f-\x9f\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    return f"\\u{ord(m.group()):04x}"


def inert(text: str, *, value: bool = False) -> str:
    """``text`` with every control character escaped; ``value``: tab and newline too."""
    return (_VALUE if value else _LAYOUT).sub(_escape, text)


def inert_html(text: str) -> str:
    """``text`` HTML-escaped and inert (a control character is escaped, not passed on)."""
    return html.escape(_VALUE.sub(_escape, text))


# What starts Markdown of its own: code spans, links and images, HTML, table cells, '*'
# emphasis. An underscore is left: '_x_' changes only how a value looks, and identifiers
# (metric names, run ids) are full of them; a heading or a list needs a line start, and
# every value is shown after our own prefix on one line.
_MD = re.compile(r"([\\`*\[\]<>|])")


def inert_md(text: str) -> str:
    """``text`` inert on one line, each character that could start Markdown markup (or the
    HTML Markdown passes through) backslash-escaped: shown as written, not rendered."""
    return _MD.sub(r"\\\1", inert(text, value=True))


def inert_rows(
    rows: Callable[_P, list[tuple[str, str]]],
) -> Callable[_P, list[tuple[str, str]]]:
    """Decorate a function of (label, value) header rows: each value made inert, its tab
    and newline too (a run's agent name must not start a line of its own)."""

    @functools.wraps(rows)
    def inert_values(*args: _P.args, **kwargs: _P.kwargs) -> list[tuple[str, str]]:
        return [(k, inert(v, value=True)) for k, v in rows(*args, **kwargs)]

    return inert_values
