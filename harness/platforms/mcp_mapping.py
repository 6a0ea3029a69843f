"""A generic MCP memory server's mapping: a TOML file saying how benchledger speaks it.

``--platform mcp:FILE`` runs any MCP memory server from such a file, no Python written
for it, ``mcp:NAME`` from a shipped one in ``mappings/`` (docs/platforms.md, "Any MCP
memory server"). This module is the pure half: it reads and checks a mapping (``load``,
``parse``), refusing a broken or incomplete one before anything starts with one line
naming the file, the key and the problem
(``UnusableInput``, exit 2), and says what the mapping means: the arguments of a write,
a search, a read-back and a correction (``fill``), the memories and their ids in an
answer (``memories``), the model-free agents' ``Vocabulary`` for the server.

Templates are TOML values whose strings may hold the placeholders of ``PLACEHOLDERS``
(each defined for every agent and suite, docs/platforms.md "Placeholders"), each only
where ``_ALLOWED`` says; any other is refused at load. A string that is one placeholder
alone (``"{k}"``) takes the value's own type. Patterns (``search.hits``, the read-back's
``id_pattern`` and ``hit_separator``) are ``projections.pattern``'s, which cannot hang a
reader of a recorded run.
"""

from __future__ import annotations

import dataclasses
import os
import re
import tomllib
from collections.abc import Mapping as AnyMapping
from typing import Any, Final

import blake3

from benchledger.harness.platforms.vocabulary import Vocabulary
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.events import HitRule
from benchledger.projections import pattern
from benchledger.projections.retrieval import items

PREFIX: Final = "mcp:"  # how --platform names a mapping file
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")
_TOOL = re.compile(r"^[A-Za-z0-9_.:/-]{1,128}$")
_ENV = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PIP = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9,._-]+\])?==[0-9][0-9A-Za-z.+!-]*$")
# An npm package pinned to one version (a scope allowed): NAME@MAJOR.MINOR.PATCH[-pre].
_NPM = re.compile(
    r"^(@[a-z0-9][a-z0-9._-]*/)?[a-z0-9][a-z0-9._-]*@\d+\.\d+\.\d+([-+][0-9A-Za-z.-]+)?$"
)
_URL = re.compile(r"^https?://[^/@\s]+(/\S*)?$")
_NAME = re.compile(r"^[a-z0-9][a-z0-9._-]{0,63}$")
REQUIREMENTS: Final = ("sqlite-extensions",)  # what install.python may ask of a Python
_PY_MIN = re.compile(r"^>=3\.(\d{1,2})$")
SEPARATIONS: Final = ("process", "argument")
CORRECTIONS: Final = ("update", "delete")

# Each table's keys, and the placeholders each template may use.
_KEYS: Final[dict[str, frozenset[str]]] = {
    "": frozenset(
        {
            "name",
            "version",
            "server",
            "install",
            "identities",
            "write",
            "search",
            "readback",
            "correction",
            "shared",
            "expose",
        }
    ),
    "server": frozenset({"command", "args", "env", "secrets", "url"}),
    "install": frozenset({"pip", "python", "npm"}),
    "identities": frozenset({"separate", "argument", "tools"}),
    "write": frozenset({"tool", "arguments"}),
    "search": frozenset({"tool", "arguments", "hits"}),
    "search.hits": frozenset({"path", "id_field", "text_field", "line", "id", "separator"}),
    "readback": frozenset(
        {"tool", "arguments", "path", "id_field", "id_pattern", "text_field", "hit_separator"}
    ),
    "correction": frozenset({"mode", "tool", "arguments"}),
    "shared": frozenset({"separate", "identity"}),
}
# Every placeholder, as every agent and suite fills it (docs/platforms.md, "Placeholders").
PLACEHOLDERS: Final[dict[str, str]] = {
    "data": "the server's own data folder (absolute)",
    "fact": "the memory's text: the fact written, the correction, the fact read back",
    "title": "the memory's subject (a protocol's dataset name, a LoCoMo turn's id)",
    "entity": "the same as {title} (a knowledge graph's entity name)",
    "query": "the search's text",
    "k": "how many hits a search asks for (an integer)",
    "id": "the original memory's id, found with the read-back (a correction)",
    "old": "the original memory's text (a correction)",
}
_ALLOWED: Final[dict[str, frozenset[str]]] = {
    "server.args": frozenset({"data"}),
    "server.env": frozenset({"data"}),
    "write.arguments": frozenset({"fact", "title", "entity"}),
    "search.arguments": frozenset({"query", "k"}),
    "readback.arguments": frozenset({"fact", "title", "entity"}),
    "correction.arguments": frozenset({"id", "old", "fact", "entity", "title"}),
}
_REQUIRED: Final = ("name", "server", "write", "search", "readback")


@dataclasses.dataclass(frozen=True)
class ToolCallTemplate:
    """One tool and its argument template."""

    tool: str
    arguments: dict[str, Any]


@dataclasses.dataclass(frozen=True)
class McpMapping:
    """A checked mapping (see the module docstring); ``text`` and ``sha`` are what runs record."""

    path: str
    text: str
    sha: str
    name: str
    version: str
    command: str  # "" when the server is reached at ``url`` (streamable HTTP)
    args: tuple[str, ...]
    env: dict[str, str]
    secrets: tuple[str, ...]
    pip: str
    python: tuple[str, ...]
    separate: str  # how pool identities are kept apart: "process" or "argument"
    argument: str  # the argument carrying the identity ("argument" separation)
    argument_tools: frozenset[str]
    write: ToolCallTemplate
    search: ToolCallTemplate
    readback: ToolCallTemplate
    items_at: str  # readback.path
    id_field: str
    id_pattern: str
    text_field: str
    hit_separator: str
    correction: ToolCallTemplate | None
    correction_mode: str
    shared: bool
    shared_separate: str = ""  # "process": a server of its own; "argument": an identity
    shared_identity: str = ""  # the shared knowledge's identity ("argument")
    url: str = ""
    hits: HitRule | None = None  # search.hits: where a search answer's hits are
    expose: frozenset[str] = frozenset()  # more of the server's tools agents may call
    npm: str = ""  # install.npm: NAME@VERSION, installed under the install folder

    @property
    def exposed(self) -> frozenset[str]:
        """The tools agents see and may call: the mapped ones and ``expose`` (docs/platforms.md,
        "Isolation"); any other the server lists is neither listed to agents nor forwarded."""
        return self.tools | self.expose

    @property
    def keyed(self) -> bool:
        """Whether the correction replaces by key, naming neither ``{id}`` nor ``{old}``."""
        return self.correction is not None and not (
            uses(self.correction.arguments, "id") or uses(self.correction.arguments, "old")
        )

    @property
    def id_argument(self) -> str:
        """The correction's argument naming the original by ``{id}`` ("" when none does)."""
        if self.correction is None:
            return ""
        return next((k for k, v in self.correction.arguments.items() if uses(v, "id")), "")

    @property
    def checked_tools(self) -> frozenset[str]:
        """Exposed tools of a shared pool server that take no identity: each call's memory
        id is checked to be the caller's own (the correction), since the server would
        reach any identity's memory by its id."""
        if self.separate != "argument" or self.correction is None:
            return frozenset()
        return frozenset({self.correction.tool}) - self.argument_tools

    @property
    def readback_rule(self) -> HitRule:
        """Where a read-back answer's memories are (the ``readback`` keys)."""
        return HitRule(path=self.items_at, id_field=self.id_field, text_field=self.text_field,
                       id=self.id_pattern, separator=self.hit_separator)  # fmt: skip

    @property
    def read_tools(self) -> frozenset[str]:
        """The tools that read memory (a pool session's calls of them see shared knowledge too)."""
        return frozenset({self.search.tool, self.readback.tool})

    @property
    def write_tools(self) -> frozenset[str]:
        """The tools that write memory (counted as a capture attempt)."""
        fix = self.correction.tool if self.correction and self.correction_mode == "update" else ""
        return frozenset({self.write.tool, *([fix] if fix else [])})

    @property
    def tools(self) -> frozenset[str]:
        """Every tool the mapping names (the server must list them all)."""
        named = {self.write.tool, self.search.tool, self.readback.tool}
        return frozenset(named | ({self.correction.tool} if self.correction else set()))

    @property
    def needs_id(self) -> bool:
        """Whether a correction names the original memory by its id."""
        return self.correction is not None and uses(self.correction.arguments, "id")

    def vocabulary(self) -> Vocabulary:
        """The server's vocabulary, as its mapping says it: its write, search and correction
        calls; its read-back counts as a search; an agent sees the mapped tools alone."""
        fix = self.correction.tool if self.correction and self.correction_mode == "update" else ""
        return Vocabulary(
            name=f"{PREFIX}{self.name}",
            write_tool=self.write.tool,
            write=lambda text, title: fill(
                self.write.arguments, fact=text, title=title, entity=title
            ),
            search_tool=self.search.tool,
            search=lambda q, k: fill(self.search.arguments, query=q, k=k),
            correct_tool=fix,
            searches=frozenset({self.readback.tool}),
            expose=self.tools,
            hits=self.hits or HitRule(),
            lifecycle=self,
        )

    def fill_readback(self, *, fact: str, entity: str) -> dict[str, Any]:
        """The read-back call's arguments (``{title}`` is ``{entity}``)."""
        return dict(fill(self.readback.arguments, fact=fact, entity=entity, title=entity))

    def fill_correction(self, *, id: str, old: str, fact: str, entity: str) -> dict[str, Any]:
        """The correction call's arguments (``{}`` when the mapping has none)."""
        if self.correction is None:
            return {}
        return dict(fill(self.correction.arguments, id=id, old=old, fact=fact, entity=entity,
                         title=entity))  # fmt: skip

    def memories(self, text: str, *, strict: bool = False) -> list[tuple[str, str]]:
        """The memories in a read-back answer, as ``(id, text)`` in answer order.

        ``projections.retrieval.items`` under the ``readback`` keys: a JSON answer's are the
        items of the array at ``path`` (in each part of a fanned-out ``[own, shared]``
        answer), else its hits; a text answer's its parts between ``hit_separator`` matches
        (all of it without one). A memory's id is its ``id_field``, else the group of
        ``id_pattern``, else a hash of its text. ``strict``: a JSON answer without ``path``
        raises ``retrieval.NoSuchPath`` (a wrong path, never read as an empty store).
        """
        return [(ident or blake3.blake3(said.encode()).hexdigest()[:16], said)
                for ident, said in items(text, self.readback_rule, strict=strict)]  # fmt: skip


def uses(template: Any, name: str) -> bool:
    """Whether the template holds the placeholder ``{name}`` anywhere."""
    if isinstance(template, str):
        return name in _PLACEHOLDER.findall(template)
    if isinstance(template, dict):
        return any(uses(v, name) for v in template.values())
    if isinstance(template, list):
        return any(uses(v, name) for v in template)
    return False


def fill(template: Any, **values: Any) -> Any:
    """The template with its placeholders replaced (a lone placeholder keeps its value's type)."""
    if isinstance(template, str):
        whole = _PLACEHOLDER.fullmatch(template)
        if whole and whole.group(1) in values:
            return values[whole.group(1)]
        return _PLACEHOLDER.sub(
            lambda m: str(values[m.group(1)]) if m.group(1) in values else m.group(0), template
        )
    if isinstance(template, dict):
        return {k: fill(v, **values) for k, v in template.items()}
    if isinstance(template, list):
        return [fill(v, **values) for v in template]
    return template


class _Check:
    """The loader's one way to refuse: the file, the key, the problem."""

    def __init__(self, path: str) -> None:
        self.path = path

    def fail(self, key: str, problem: str) -> UnusableInput:
        return UnusableInput(self.path, f"{key}: {problem}")

    def table(self, data: AnyMapping[str, Any], key: str, *, required: bool) -> dict[str, Any]:
        value = data.get(key.rpartition(".")[2])
        if value is None:
            if required:
                raise self.fail(key, "missing (a table is required)")
            return {}
        if not isinstance(value, dict):
            raise self.fail(key, f"must be a table, not {type(value).__name__}")
        allowed = _KEYS[key]
        for k in value:
            if k not in allowed:
                raise self.fail(f"{key}.{k}", f"unknown key (known: {', '.join(sorted(allowed))})")
        return value

    def text(self, table: dict[str, Any], key: str, *, required: bool = False) -> str:
        name = key.rpartition(".")[2]
        value = table.get(name)
        if value is None:
            if required:
                raise self.fail(key, "missing")
            return ""
        if not isinstance(value, str) or not value:  # a separator may be whitespace
            raise self.fail(key, "must be a non-empty string")
        return value

    def strings(self, table: dict[str, Any], key: str) -> tuple[str, ...]:
        value = table.get(key.rpartition(".")[2], [])
        if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
            raise self.fail(key, "must be a list of non-empty strings")
        return tuple(value)

    def template(self, value: Any, key: str) -> None:
        allowed = _ALLOWED[key.rsplit(".", 1)[0] if key.count(".") > 1 else key]
        if isinstance(value, str):
            for name in _PLACEHOLDER.findall(value):
                if name not in allowed:
                    here = ", ".join("{" + a + "}" for a in sorted(allowed))
                    raise self.fail(key, f"unknown placeholder {{{name}}} (here: {here})")
        elif isinstance(value, dict):
            for k, v in value.items():
                self.template(v, f"{key}.{k}" if key.count(".") < 2 else key)
        elif isinstance(value, list):
            for v in value:
                self.template(v, key)

    def pattern(self, key: str, source: str, *, groups: int | None = None) -> None:
        """A pattern the reader can run (``projections.pattern``), with ``groups`` groups."""
        if not source:
            return
        try:
            compiled = pattern.compile(source)
        except pattern.PatternError as exc:
            raise self.fail(key, f"not a regular expression this reader runs ({exc}; "
                            "docs/platforms.md, Patterns)") from None  # fmt: skip
        if groups is not None and compiled.groups != groups:
            raise self.fail(key, "must have exactly one group (the id)")

    def hits(self, search: dict[str, Any]) -> HitRule | None:
        """``search.hits``: a JSON path, or a table saying where the hits are."""
        value = search.get("hits")
        if value is None:
            return None
        if isinstance(value, str):
            value = {"path": value}
        table = self.table({"hits": value}, "search.hits", required=True)
        said = {k: self.text(table, f"search.hits.{k}") for k in _KEYS["search.hits"]}
        ways = [k for k in ("path", "line", "separator") if said[k]]
        if len(ways) != 1:
            raise self.fail("search.hits", "give one of path (JSON), line or separator (text)")
        if said["path"] and (said["line"] or said["separator"]):
            raise self.fail("search.hits.path", "a JSON path takes no text patterns")
        for k in ("line", "separator"):
            self.pattern(f"search.hits.{k}", said[k])
        self.pattern("search.hits.id", said["id"], groups=1)
        return HitRule(**said)

    def call(self, data: dict[str, Any], key: str, *, required: bool) -> ToolCallTemplate | None:
        table = self.table(data, key, required=required)
        if not table:
            return None
        tool = self.text(table, f"{key}.tool", required=True)
        if not _TOOL.match(tool):
            raise self.fail(f"{key}.tool", f"{tool[:60]!r} is not a tool name")
        arguments = table.get("arguments", {})
        if not isinstance(arguments, dict):
            raise self.fail(f"{key}.arguments", "must be a table of the tool's arguments")
        self.template(arguments, f"{key}.arguments")
        return ToolCallTemplate(tool, arguments)


def parse(text: str, path: str) -> McpMapping:
    """The mapping in ``text`` (read from ``path``), checked; UnusableInput naming the key."""
    c = _Check(path)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise UnusableInput(path, f"not TOML: {exc}") from None
    for k in data:
        if k not in _KEYS[""]:
            raise c.fail(k, f"unknown key (known: {', '.join(sorted(_KEYS['']))})")
    for k in _REQUIRED:
        if k not in data:
            raise c.fail(k, "missing (required: " + ", ".join(_REQUIRED) + ")")
    name = c.text(data, "name", required=True)
    if not _NAME.match(name):
        raise c.fail("name", "use lower-case letters, digits, '.', '_' or '-' (at most 64)")
    version = c.text(data, "version")
    server = c.table(data, "server", required=True)
    url = c.text(server, "server.url")
    command = c.text(server, "server.command", required=not url)
    if url and command:
        raise c.fail("server.url", "give command (stdio) or url (streamable HTTP), not both")
    if url and not _URL.match(url):
        raise c.fail("server.url", "an http(s):// URL without credentials, e.g. "
                     "http://127.0.0.1:8000/mcp")  # fmt: skip
    if url and (server.get("args") or server.get("env") or server.get("secrets")):
        raise c.fail("server.url", "a server at a URL runs already: no args, env or secrets")
    args = c.strings(server, "server.args")
    c.template(list(args), "server.args")
    env = server.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise c.fail("server.env", "must be a table of strings")
    for k, v in env.items():
        if not _ENV.match(k):
            raise c.fail(f"server.env.{k}", "not an environment variable name")
        c.template(v, "server.env")
    secrets = c.strings(server, "server.secrets")
    for s in secrets:
        if not _ENV.match(s):
            raise c.fail("server.secrets", f"{s[:40]!r} is not an environment variable name")
        if s in env:
            raise c.fail(f"server.env.{s}", "is named secret: its value comes from the "
                                            "environment, never from the mapping")  # fmt: skip
    install = c.table(data, "install", required=False)
    pip = c.text(install, "install.pip") if install else ""
    npm = c.text(install, "install.npm") if install else ""
    if install and not (pip or npm):
        raise c.fail("install.pip", "missing (the package to install, pinned: NAME==VERSION; "
                     "or install.npm = NAME@VERSION)")  # fmt: skip
    if pip and npm:
        raise c.fail("install.npm", "install one package: install.pip or install.npm, not both")
    if npm and not _NPM.match(npm):
        raise c.fail("install.npm", f"{npm[:60]!r}: pin one package exactly, NAME@VERSION")
    if npm and install.get("python"):
        raise c.fail("install.python", "only with install.pip")
    if pip and not _PIP.match(pip):
        raise c.fail("install.pip", f"{pip[:60]!r}: pin one package exactly, NAME==VERSION")
    python = c.strings(install, "install.python") if install else ()
    for need in python:
        if need not in REQUIREMENTS and not _PY_MIN.match(need):
            raise c.fail("install.python", f"{need[:40]!r}: use >=3.N or "
                                           f"{', '.join(REQUIREMENTS)}")  # fmt: skip
    if install and url:
        raise c.fail("install", "a server at a URL is not installed: drop [install]")
    if install and "/" in command:
        raise c.fail("server.command", "with [install], name the installed command alone")
    ids = c.table(data, "identities", required=False)
    separate = c.text(ids, "identities.separate") or ("argument" if ids.get("argument")
                                                       else "process")  # fmt: skip
    if separate not in SEPARATIONS:
        raise c.fail("identities.separate", f"{separate[:40]!r}: use {' or '.join(SEPARATIONS)}")
    argument = c.text(ids, "identities.argument")
    argument_tools = frozenset(c.strings(ids, "identities.tools"))
    if separate == "argument" and not (argument and argument_tools):
        raise c.fail("identities.argument", "argument separation needs argument and tools "
                     "(the tools the identity's argument goes to)")  # fmt: skip
    if separate == "process" and (argument or argument_tools):
        raise c.fail("identities.argument", 'only with separate = "argument"')
    write = c.call(data, "write", required=True)
    search = c.call(data, "search", required=True)
    readback = c.call(data, "readback", required=True)
    assert write is not None and search is not None and readback is not None
    if not uses(write.arguments, "fact"):
        raise c.fail("write.arguments", "must place the fact: put {fact} in an argument")
    if not uses(search.arguments, "query"):
        raise c.fail("search.arguments", "must place the query: put {query} in an argument")
    rb = data["readback"]
    id_field = c.text(rb, "readback.id_field")
    id_pattern = c.text(rb, "readback.id_pattern")
    separator = c.text(rb, "readback.hit_separator")
    c.pattern("readback.id_pattern", id_pattern, groups=1)
    c.pattern("readback.hit_separator", separator)
    found = c.hits(data["search"])
    correction = c.call(data, "correction", required=False)
    mode = ""
    if correction is not None:
        mode = c.text(data["correction"], "correction.mode", required=True)
        if mode not in CORRECTIONS:
            raise c.fail("correction.mode", f"{mode[:40]!r}: use update (the tool writes the "
                                            "correction) or delete (then the write)")  # fmt: skip
        if mode == "update" and not uses(correction.arguments, "fact"):
            raise c.fail("correction.arguments", "an update must place the correction: {fact}")
        if not any(uses(correction.arguments, n) for n in ("id", "old", "title", "entity")):
            raise c.fail("correction.arguments", "must name the original: {id} or {old}, or "
                         "the key it was written under ({title} or {entity})")  # fmt: skip
    expose = frozenset(c.strings(data, "expose"))
    for tool in sorted(expose):
        if not _TOOL.match(tool):
            raise c.fail("expose", f"{tool[:60]!r} is not a tool name")
        if separate == "argument" and tool not in argument_tools:
            # One pool server holds every identity's memories: a tool that gets no identity
            # reads or changes them all (docs/platforms.md, "Isolation").
            raise c.fail("expose", f"{tool} gets no identity: list it in identities.tools "
                         "(the server filters by that argument) or do not expose it")  # fmt: skip
    if (correction is not None and separate == "argument" and correction.tool not in argument_tools
            and not any(uses(v, "id") for v in correction.arguments.values())):  # fmt: skip
        raise c.fail("correction.tool", f"{correction.tool} gets no identity, so the harness "
                     "checks the memory it names is the caller's: name it by {id} in an "
                     "argument, or list the tool in identities.tools")  # fmt: skip
    shared = c.table(data, "shared", required=False)
    shared_separate = c.text(shared, "shared.separate", required=True) if shared else ""
    if shared_separate not in ("", *SEPARATIONS):
        raise c.fail("shared.separate", 'use "process" (a server with its own data folder) '
                     'or "argument" (an identity of the pool server)')  # fmt: skip
    shared_identity = c.text(shared, "shared.identity") if shared else ""
    if shared_separate == "argument" and separate != "argument":
        raise c.fail("shared.separate", 'a shared identity needs identities.separate = "argument"')
    if shared_separate == "argument" and not shared_identity:
        raise c.fail("shared.identity", "missing (the identity holding shared knowledge)")
    if shared_separate == "process" and shared_identity:
        raise c.fail("shared.identity", 'only with separate = "argument"')
    if url and (separate != "argument" or shared_separate == "process"):
        raise c.fail("identities.separate", 'a server at a URL is one server: separate = '
                     '"argument" for identities and shared knowledge')  # fmt: skip
    if separate == "argument" and not uses_any(write, search, readback, argument_tools):
        raise c.fail("identities.tools", "must name the write, search and read-back tools")
    return McpMapping(
        path=path, text=text, sha=blake3.blake3(text.encode()).hexdigest(), name=name,
        version=version, command=command, args=args, env=dict(env), secrets=secrets, pip=pip,
        python=python, separate=separate, argument=argument, argument_tools=argument_tools,
        write=write, search=search, readback=readback, items_at=c.text(rb, "readback.path"),
        id_field=id_field,
        id_pattern=id_pattern, text_field=c.text(rb, "readback.text_field"),
        hit_separator=separator, correction=correction, correction_mode=mode,
        shared=bool(shared), shared_separate=shared_separate,
        shared_identity=shared_identity, url=url, hits=found, expose=expose, npm=npm,
    )  # fmt: skip


def uses_any(
    write: ToolCallTemplate, search: ToolCallTemplate, readback: ToolCallTemplate,
    tools: frozenset[str],
) -> bool:  # fmt: skip
    """Whether ``tools`` covers the write, search and read-back tools."""
    return {write.tool, search.tool, readback.tool} <= tools


# The mappings benchledger ships, named by their file's stem (``mcp:mcp-memory-service``);
# beside this module, so they are in the wheel as in a checkout.
SHIPPED_DIR: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "mappings")


def shipped() -> list[str]:
    """The names of the shipped mappings, sorted."""
    return sorted(f.removesuffix(".toml") for f in os.listdir(SHIPPED_DIR) if f.endswith(".toml"))


def locate(ref: str) -> str:
    """The file ``mcp:REF`` names: a path to a mapping file, or the name of a shipped one.

    An existing file wins; a value without a folder or a ``.toml`` ending is a name, and
    an unknown name is refused in one line listing the shipped ones."""
    if os.path.isfile(ref) or os.sep in ref or "/" in ref or ref.endswith(".toml"):
        return ref
    if ref in shipped():
        return os.path.join(SHIPPED_DIR, f"{ref}.toml")
    raise UnusableInput(f"mcp:{ref}", "no such shipped mapping (shipped: "
                        f"{', '.join(shipped())}; or give a mapping file's path)")  # fmt: skip


def load(path: str) -> McpMapping:
    """The mapping ``mcp:PATH`` names (a file, or a shipped mapping's name), checked."""
    path = locate(path)
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as exc:
        raise UnusableInput(path, f"cannot read the mapping: {exc}") from None
    return loaded(text, path)


def loaded(text: str, path: str) -> McpMapping:
    """``parse``: the mapping checked (its vocabulary is its platform client's)."""
    return parse(text, path)
