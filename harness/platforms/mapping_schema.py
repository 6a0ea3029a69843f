"""A mapping file's shape as a schema: its tables, their keys and their types.

``--platform mcp:FILE``'s mapping (docs/platforms.md, "Any MCP memory server") is TOML; these
frozen msgspec Structs say which tables and keys it may hold and of what type, refusing an
unknown key (``forbid_unknown_fields``). ``read`` decodes a file's text into them and turns
msgspec's error into the loader's one line: the file, the key (``server.args``, not
``$.server.args[0]``) and the problem, in the words the checks of ``mcp_mapping`` use
(``UnusableInput``, exit 2). What a value means (a tool name, a pinned package, which
placeholders a template may hold, how keys combine) is ``mcp_mapping.parse``'s to check.
"""

from __future__ import annotations

import re
import tomllib
from typing import Annotated, Any, Final

import msgspec

from benchledger.ledger.errors import UnusableInput

# A string key is never empty (a separator may be whitespace). Each table refuses a key it
# does not declare (forbid_unknown_fields); the keys of a table are keyword-only, so a
# required one may follow one with a default.
Text = Annotated[str, msgspec.Meta(min_length=1)]
Texts = tuple[Text, ...]


class Server(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    command: Text = ""  # "" when the server is reached at ``url``
    args: Texts = ()
    env: dict[str, str] = {}
    secrets: Texts = ()
    url: Text = ""


class Install(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    pip: Text = ""
    python: Texts = ()
    npm: Text = ""


class Identities(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    separate: Text = ""
    argument: Text = ""
    tools: Texts = ()


class Hits(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """``search.hits`` as a table (a string is its ``path`` alone)."""

    path: Text = ""
    id_field: Text = ""
    text_field: Text = ""
    line: Text = ""
    id: Text = ""
    separator: Text = ""


class Call(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """A tool and its argument template."""

    tool: Text
    arguments: dict[str, Any] = {}


class Search(Call, frozen=True, forbid_unknown_fields=True, kw_only=True):
    hits: Text | Hits | None = None


class Readback(Call, frozen=True, forbid_unknown_fields=True, kw_only=True):
    path: Text = ""
    id_field: Text = ""
    id_pattern: Text = ""
    text_field: Text = ""
    hit_separator: Text = ""


class Correction(Call, frozen=True, forbid_unknown_fields=True, kw_only=True):
    mode: Text


class Shared(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    separate: Text
    identity: Text = ""


class Mapping(msgspec.Struct, frozen=True, forbid_unknown_fields=True, kw_only=True):
    """The whole file."""

    name: Text
    version: Text = ""
    server: Server
    install: Install | None = None
    identities: Identities = Identities()
    write: Call
    search: Search
    readback: Readback
    correction: Correction | None = None
    shared: Shared | None = None
    expose: Texts = ()


# Where each table sits, by its key ("" the file itself).
TABLES: Final[dict[str, type[msgspec.Struct]]] = {
    "": Mapping,
    "server": Server,
    "install": Install,
    "identities": Identities,
    "write": Call,
    "search": Search,
    "search.hits": Hits,
    "readback": Readback,
    "correction": Correction,
    "shared": Shared,
}
REQUIRED: Final = tuple(
    f.name for f in msgspec.structs.fields(Mapping) if f.required
)  # name, server, write, search, readback
_OPTIONAL: Final = frozenset(
    f.encode_name for f in msgspec.structs.fields(Mapping) if not f.required
)
# What a key of the wrong type must be, where it is not a non-empty string.
_MUST: Final[dict[str, str]] = {
    "server.args": "must be a list of non-empty strings",
    "server.secrets": "must be a list of non-empty strings",
    "server.env": "must be a table of strings",
    "install.python": "must be a list of non-empty strings",
    "identities.tools": "must be a list of non-empty strings",
    "expose": "must be a list of non-empty strings",
    "write.arguments": "must be a table of the tool's arguments",
    "search.arguments": "must be a table of the tool's arguments",
    "readback.arguments": "must be a table of the tool's arguments",
    "correction.arguments": "must be a table of the tool's arguments",
}
_ERROR = re.compile(r"^(?P<what>.*?)(?: - at `\$(?P<at>[^`]*)`)?$", re.S)
_FIELD = re.compile(r"`([^`]+)`")
_GOT = re.compile(r"got `([^`]+)`")
_INDEX = re.compile(r"\[[^\]]*\]")  # an item's index or a table's key: [0], [...]


def keys(table: str) -> list[str]:
    """The keys the table at ``table`` may hold, sorted."""
    return sorted(f.encode_name for f in msgspec.structs.fields(TABLES[table]))


def _key(at: str) -> str:
    """``$.server.args[0]`` -> ``server.args``: the key, without an item's index."""
    return ".".join(part for part in _INDEX.sub("", at).split(".") if part)


def _problem(error: str) -> tuple[str, str]:
    """msgspec's error as (the key, the problem in the loader's words)."""
    found = _ERROR.match(error)
    assert found is not None  # the pattern matches any text
    what, at = found.group("what"), _key(found.group("at") or "")
    field = _FIELD.search(what)
    if what.startswith("Object contains unknown field") and field:
        return f"{at}.{field.group(1)}".lstrip("."), (f"unknown key (known: {', '.join(keys(at))})")
    if what.startswith("Object missing required field") and field:
        key = f"{at}.{field.group(1)}".lstrip(".")
        return key, "missing (required: " + ", ".join(REQUIRED) + ")" if not at else "missing"
    got = _GOT.search(what)
    if at in TABLES:
        kind = "a JSON path or a table" if at == "search.hits" else "a table"
        return at, f"must be {kind}, not {got.group(1) if got else 'that'}"
    return at, _MUST.get(at, "must be a non-empty string")


def read(text: str, path: str) -> Mapping:
    """The mapping in ``text`` (read from ``path``) as the schema's tables; UnusableInput
    naming the key when it is not TOML, holds an unknown key or one of the wrong type, or
    lacks a required one."""
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UnusableInput(path, f"not TOML: {exc}") from None
    # An empty optional table is absent, as the loader always took it: a recorded run's
    # mapping that has one still loads, and so replays.
    given = {k: v for k, v in data.items() if not (k in _OPTIONAL and v == {})}
    try:
        return msgspec.convert(given, Mapping)
    except msgspec.ValidationError as exc:
        key, problem = _problem(str(exc))
        raise UnusableInput(path, f"{key}: {problem}") from None


__all__ = [
    "REQUIRED",
    "TABLES",
    "Call",
    "Correction",
    "Hits",
    "Identities",
    "Install",
    "Mapping",
    "Readback",
    "Search",
    "Server",
    "Shared",
    "Text",
    "keys",
    "read",
]
