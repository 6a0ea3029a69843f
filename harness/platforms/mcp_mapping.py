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
from typing import Any, Final

import blake3
import msgspec

from benchledger.harness.platforms import mapping_schema as schema
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

    def hits(self, value: str | schema.Hits | None) -> HitRule | None:
        """``search.hits``: a JSON path, or a table saying where the hits are."""
        if value is None:
            return None
        said = msgspec.structs.asdict(schema.Hits(path=value) if isinstance(value, str) else value)
        ways = [k for k in ("path", "line", "separator") if said[k]]
        if len(ways) != 1:
            raise self.fail("search.hits", "give one of path (JSON), line or separator (text)")
        if said["path"] and (said["line"] or said["separator"]):
            raise self.fail("search.hits.path", "a JSON path takes no text patterns")
        for k in ("line", "separator"):
            self.pattern(f"search.hits.{k}", said[k])
        self.pattern("search.hits.id", said["id"], groups=1)
        return HitRule(**said)

    def call(self, table: schema.Call, key: str) -> ToolCallTemplate:
        if not _TOOL.match(table.tool):
            raise self.fail(f"{key}.tool", f"{table.tool[:60]!r} is not a tool name")
        self.template(table.arguments, f"{key}.arguments")
        return ToolCallTemplate(table.tool, dict(table.arguments))

    def server(self, server: schema.Server) -> None:
        """How the server starts (a command) or where it runs (a URL), and its environment."""
        url, command = server.url, server.command
        if not (url or command):
            raise self.fail("server.command", "missing")
        if url and command:
            raise self.fail("server.url", "give command (stdio) or url (streamable HTTP), not both")
        if url and not _URL.match(url):
            raise self.fail("server.url", "an http(s):// URL without credentials, e.g. "
                            "http://127.0.0.1:8000/mcp")  # fmt: skip
        if url and (server.args or server.env or server.secrets):
            raise self.fail("server.url", "a server at a URL runs already: no args, env or secrets")
        self.template(list(server.args), "server.args")
        for k, v in server.env.items():
            if not _ENV.match(k):
                raise self.fail(f"server.env.{k}", "not an environment variable name")
            self.template(v, "server.env")
        for s in server.secrets:
            if not _ENV.match(s):
                raise self.fail("server.secrets", f"{s[:40]!r} is not an environment variable name")
            if s in server.env:
                raise self.fail(f"server.env.{s}", "is named secret: its value comes from the "
                                "environment, never from the mapping")  # fmt: skip

    def install(self, install: schema.Install | None, server: schema.Server) -> None:
        """One package, pinned: from PyPI (with what its Python needs) or from npm."""
        if install is None:
            return
        pip, npm = install.pip, install.npm
        if not (pip or npm):
            raise self.fail("install.pip", "missing (the package to install, pinned: "
                            "NAME==VERSION; or install.npm = NAME@VERSION)")  # fmt: skip
        if pip and npm:
            raise self.fail("install.npm", "install one package: install.pip or install.npm, "
                            "not both")  # fmt: skip
        if npm and not _NPM.match(npm):
            raise self.fail("install.npm", f"{npm[:60]!r}: pin one package exactly, NAME@VERSION")
        if npm and install.python:
            raise self.fail("install.python", "only with install.pip")
        if pip and not _PIP.match(pip):
            raise self.fail("install.pip", f"{pip[:60]!r}: pin one package exactly, NAME==VERSION")
        for need in install.python:
            if need not in REQUIREMENTS and not _PY_MIN.match(need):
                raise self.fail("install.python", f"{need[:40]!r}: use >=3.N or "
                                f"{', '.join(REQUIREMENTS)}")  # fmt: skip
        if server.url:
            raise self.fail("install", "a server at a URL is not installed: drop [install]")
        if "/" in server.command:
            raise self.fail("server.command", "with [install], name the installed command alone")

    def identities(self, ids: schema.Identities) -> str:
        """How pool identities are kept apart: "process" or "argument"."""
        separate = ids.separate or ("argument" if ids.argument else "process")
        if separate not in SEPARATIONS:
            raise self.fail("identities.separate",
                            f"{separate[:40]!r}: use {' or '.join(SEPARATIONS)}")  # fmt: skip
        if separate == "argument" and not (ids.argument and ids.tools):
            raise self.fail("identities.argument", "argument separation needs argument and "
                            "tools (the tools the identity's argument goes to)")  # fmt: skip
        if separate == "process" and (ids.argument or ids.tools):
            raise self.fail("identities.argument", 'only with separate = "argument"')
        return separate

    def correction(self, table: schema.Correction | None) -> ToolCallTemplate | None:
        """The correction call, which must name the original and, updating, the correction."""
        if table is None:
            return None
        correction = self.call(table, "correction")
        if table.mode not in CORRECTIONS:
            raise self.fail("correction.mode", f"{table.mode[:40]!r}: use update (the tool "
                            "writes the correction) or delete (then the write)")  # fmt: skip
        if table.mode == "update" and not uses(correction.arguments, "fact"):
            raise self.fail("correction.arguments", "an update must place the correction: {fact}")
        if not any(uses(correction.arguments, n) for n in ("id", "old", "title", "entity")):
            raise self.fail("correction.arguments", "must name the original: {id} or {old}, or "
                            "the key it was written under ({title} or {entity})")  # fmt: skip
        return correction

    def isolation(self, m: schema.Mapping, separate: str,
                  correction: ToolCallTemplate | None) -> None:  # fmt: skip
        """On one pool server every tool an agent may call gets the identity, or is checked."""
        tools = frozenset(m.identities.tools)
        for tool in sorted(frozenset(m.expose)):
            if not _TOOL.match(tool):
                raise self.fail("expose", f"{tool[:60]!r} is not a tool name")
            if separate == "argument" and tool not in tools:
                # One pool server holds every identity's memories: a tool that gets no identity
                # reads or changes them all (docs/platforms.md, "Isolation").
                raise self.fail("expose", f"{tool} gets no identity: list it in "
                                "identities.tools (the server filters by that argument) or do "
                                "not expose it")  # fmt: skip
        if (correction is not None and separate == "argument" and correction.tool not in tools
                and not any(uses(v, "id") for v in correction.arguments.values())):  # fmt: skip
            raise self.fail("correction.tool", f"{correction.tool} gets no identity, so the "
                            "harness checks the memory it names is the caller's: name it by {id} "
                            "in an argument, or list the tool in identities.tools")  # fmt: skip

    def shared(self, shared: schema.Shared | None, separate: str, url: str) -> tuple[str, str]:
        """Where shared knowledge lives: (how it is kept apart, its identity)."""
        how = shared.separate if shared else ""
        identity = shared.identity if shared else ""
        if how not in ("", *SEPARATIONS):
            raise self.fail("shared.separate", 'use "process" (a server with its own data '
                            'folder) or "argument" (an identity of the pool server)')  # fmt: skip
        if how == "argument" and separate != "argument":
            raise self.fail("shared.separate",
                            'a shared identity needs identities.separate = "argument"')  # fmt: skip
        if how == "argument" and not identity:
            raise self.fail("shared.identity", "missing (the identity holding shared knowledge)")
        if how == "process" and identity:
            raise self.fail("shared.identity", 'only with separate = "argument"')
        if url and (separate != "argument" or how == "process"):
            raise self.fail("identities.separate", 'a server at a URL is one server: separate = '
                            '"argument" for identities and shared knowledge')  # fmt: skip
        return how, identity


def parse(text: str, path: str) -> McpMapping:
    """The mapping in ``text`` (read from ``path``), checked; UnusableInput naming the key.

    Its shape (tables, keys, types) is ``mapping_schema``'s; what the values mean and how
    they combine is checked here, table by table, in the order a reader of the file meets
    them."""
    c = _Check(path)
    m = schema.read(text, path)
    if not _NAME.match(m.name):
        raise c.fail("name", "use lower-case letters, digits, '.', '_' or '-' (at most 64)")
    c.server(m.server)
    c.install(m.install, m.server)
    separate = c.identities(m.identities)
    write, search = c.call(m.write, "write"), c.call(m.search, "search")
    readback = c.call(m.readback, "readback")
    if not uses(write.arguments, "fact"):
        raise c.fail("write.arguments", "must place the fact: put {fact} in an argument")
    if not uses(search.arguments, "query"):
        raise c.fail("search.arguments", "must place the query: put {query} in an argument")
    rb = m.readback
    c.pattern("readback.id_pattern", rb.id_pattern, groups=1)
    c.pattern("readback.hit_separator", rb.hit_separator)
    found = c.hits(m.search.hits)
    correction = c.correction(m.correction)
    c.isolation(m, separate, correction)
    shared_separate, shared_identity = c.shared(m.shared, separate, m.server.url)
    argument_tools = frozenset(m.identities.tools)
    if separate == "argument" and not uses_any(write, search, readback, argument_tools):
        raise c.fail("identities.tools", "must name the write, search and read-back tools")
    return McpMapping(
        path=path, text=text, sha=blake3.blake3(text.encode()).hexdigest(), name=m.name,
        version=m.version, command=m.server.command, args=m.server.args, env=dict(m.server.env),
        secrets=m.server.secrets, pip=m.install.pip if m.install else "",
        python=m.install.python if m.install else (), separate=separate,
        argument=m.identities.argument, argument_tools=argument_tools,
        write=write, search=search, readback=readback, items_at=rb.path, id_field=rb.id_field,
        id_pattern=rb.id_pattern, text_field=rb.text_field, hit_separator=rb.hit_separator,
        correction=correction, correction_mode=m.correction.mode if m.correction else "",
        shared=m.shared is not None, shared_separate=shared_separate,
        shared_identity=shared_identity, url=m.server.url, hits=found,
        expose=frozenset(m.expose), npm=m.install.npm if m.install else "",
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
