"""The import direction between our packages (docs/architecture.md), read by an AST walk.

Every import counts: module level and inside functions, ``import x`` and ``from x import y``,
relative imports resolved against the importing module. A lazy import is still a dependency.
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from dataclasses import dataclass
from itertools import pairwise

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

_LIBRARY = ("ledger", "protocols", "projections", "refplatform", "harness", "replay")
# What each package may import, besides itself. ``cli`` sits on top: it may import anything.
ALLOWED: dict[str, frozenset[str]] = {
    "ledger": frozenset(),
    "protocols": frozenset({"ledger"}),
    "projections": frozenset({"ledger", "protocols"}),
    "refplatform": frozenset({"protocols"}),
    "harness": frozenset({"ledger", "protocols", "projections"}),
    # Full replay re-drives the harness's episode loop through its interfaces.
    "replay": frozenset({"ledger", "protocols", "projections", "harness"}),
    "benchmarks": frozenset({"ledger", "protocols", "projections", "harness", "refplatform"}),
    # The namespace's own modules (benchledger/*.py): the library API, over everything but
    # the command line, which calls it.
    "benchledger": frozenset(_LIBRARY),
    "cli": frozenset({*_LIBRARY, "benchmarks", "benchledger"}),
}
NAMESPACE = "benchledger"
OURS = frozenset(ALLOWED)


def _folders() -> frozenset[str]:
    """Our top-level folders, each importable only as ``benchledger.NAME``: the build's
    ``package-dir`` in pyproject.toml, the one place they are listed."""
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        mapped = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    return frozenset(p.removeprefix(NAMESPACE + ".") for p in mapped if p != NAMESPACE)


FOLDERS = _folders()
TOP = "cli"
# The harness starts refplatform in-process from this one module and nowhere else.
REFPLATFORM_DOOR = "harness/platforms/embedded.py"


@dataclass(frozen=True)
class Import:
    """One imported module, where it is imported, and the statement as written."""

    file: str  # relative to the repository, with forward slashes
    line: int
    target: str  # absolute dotted module name
    statement: str
    names: tuple[str, ...] = ()  # ``from target import a, b``: a and b (maybe modules too)
    bare: bool = False  # written without the namespace (``import ledger``): a second copy

    @property
    def importer(self) -> str:
        return self.file.split("/")[0]

    @property
    def imported(self) -> str:
        return self.target.split(".")[0]

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.statement}"


def _module_name(rel_path: str) -> tuple[str, bool]:
    """``harness/agents/fake.py`` -> (``harness.agents.fake``, False); packages -> True."""
    parts = rel_path.removesuffix(".py").split("/")
    is_package = parts[-1] == "__init__"
    if is_package:
        parts = parts[:-1]
    return ".".join(parts), is_package


def _within_namespace(target: str) -> str:
    """``benchledger.ledger.chain`` -> ``ledger.chain``: our packages are named here by the
    folder they live in; the namespace's own modules keep their name (``benchledger.scoring``)
    and a bare ``ledger.chain`` stays as it is (and is refused below)."""
    inner = target.removeprefix(NAMESPACE + ".")
    return inner if inner.split(".")[0] in FOLDERS else target


def _statement(node: ast.Import | ast.ImportFrom) -> str:
    names = ", ".join(a.name + (f" as {a.asname}" if a.asname else "") for a in node.names)
    if isinstance(node, ast.Import):
        return f"import {names}"
    return f"from {'.' * node.level}{node.module or ''} import {names}"


def imports_in(source: str, rel_path: str) -> Iterator[Import]:
    """Every import in ``source`` (of the module at ``rel_path``), as absolute module names."""
    module, is_package = _module_name(rel_path)
    package = module if is_package else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(source, rel_path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                bare = alias.name.split(".")[0] in FOLDERS
                target = _within_namespace(alias.name)
                yield Import(rel_path, node.lineno, target, _statement(node), bare=bare)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, node.module] if node.module else base)
            elif node.module == NAMESPACE:
                # ``from benchledger import ledger`` imports the package ledger; other names
                # are the namespace's own (its library API).
                for alias in node.names:
                    sub = alias.name in FOLDERS
                    yield Import(
                        rel_path, node.lineno, alias.name if sub else NAMESPACE,
                        _statement(node), () if sub else (alias.name,),
                    )  # fmt: skip
                continue
            else:
                target = _within_namespace(node.module or "")
            bare = not node.level and (node.module or "").split(".")[0] in FOLDERS
            names = tuple(a.name for a in node.names)
            yield Import(rel_path, node.lineno, target, _statement(node), names, bare)


def _python_files(package: str) -> Iterator[str]:
    for folder, dirs, files in os.walk(os.path.join(REPO, package)):
        dirs[:] = sorted(d for d in dirs if d != "__pycache__" and not d.startswith("."))
        for name in sorted(files):
            if name.endswith(".py"):
                yield os.path.relpath(os.path.join(folder, name), REPO).replace(os.sep, "/")


# ``python -m benchledger``: the namespace's entry point runs the command line.
ENTRY_POINT = f"{NAMESPACE}/__main__.py"


def cross_package_imports(package: str) -> list[Import]:
    """The imports in ``package`` of our other packages."""
    found = []
    for rel in _python_files(package):
        if rel == ENTRY_POINT:
            continue
        with open(os.path.join(REPO, rel), encoding="utf-8") as fh:
            source = fh.read()
        found += [
            i for i in imports_in(source, rel) if i.imported in OURS and i.imported != package
        ]
    return found


def _forbidden(package: str) -> list[str]:
    bad, allowed = [], ALLOWED[package]
    for imp in cross_package_imports(package):
        # These two are judged by their own tests below, so each violation fails once.
        if imp.imported == TOP or (package == "harness" and imp.imported == "refplatform"):
            continue
        if imp.imported not in allowed:
            may = ", ".join(sorted(allowed)) or "nothing of ours"
            bad.append(f"{imp}: {package} imports {imp.target}; {package} may import {may}")
    return bad


@pytest.mark.parametrize("package", sorted(OURS - {TOP}), ids=lambda p: p)
def test_each_package_imports_only_the_packages_below_it(package):
    bad = _forbidden(package)
    assert not bad, "forbidden imports:\n  " + "\n  ".join(bad)


def test_nothing_below_the_command_line_imports_it():
    bad = [
        f"{imp}: {imp.importer} imports the command line ({imp.target})"
        for package in sorted(OURS - {TOP})
        for imp in cross_package_imports(package)
        if imp.imported == TOP
    ]
    assert not bad, "\n  ".join(["only the command line may import cli:", *bad])


def test_the_harness_reaches_refplatform_only_through_its_embedded_platform_module():
    bad = [
        f"{imp}: only {REFPLATFORM_DOOR} may import refplatform"
        for imp in cross_package_imports("harness")
        if imp.imported == "refplatform" and imp.file != REFPLATFORM_DOOR
    ]
    assert not bad, "\n  ".join(["the harness imports refplatform elsewhere:", *bad])


def test_there_are_no_import_cycles_between_our_packages():
    edges: dict[str, dict[str, Import]] = {p: {} for p in OURS}
    for package in sorted(OURS):
        for imp in cross_package_imports(package):
            edges[package].setdefault(imp.imported, imp)
    cycle = _find_cycle({p: sorted(e) for p, e in edges.items()})
    if cycle:
        steps = [str(edges[a][b]) for a, b in pairwise(cycle)]
        pytest.fail(f"import cycle {' -> '.join(cycle)}:\n  " + "\n  ".join(steps))


def _find_cycle(graph: dict[str, list[str]]) -> list[str] | None:
    """A cycle in ``graph`` as [a, b, ..., a], or None (depth-first, three colours)."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in graph.get(node, []):
            found = visit(nxt)
            if found:
                return found
        path.pop()
        done.add(node)
        return None

    for start in sorted(graph):
        found = visit(start)
        if found:
            return found
    return None


# No two modules of a package import each other, directly or round a longer loop: a cycle
# is untangled (shared pieces moved to a module both import, or the dispatch moved to the
# caller), never allow-listed here.


def module_imports(package: str) -> dict[str, dict[str, Import]]:
    """Each module of ``package`` -> the modules of the same package it imports (and where).

    ``from pkg import name`` imports the module ``pkg.name`` when there is one, else a name
    that ``pkg``'s ``__init__`` defines.
    """
    modules = {_module_name(rel)[0]: rel for rel in _python_files(package)}
    edges: dict[str, dict[str, Import]] = {m: {} for m in modules}
    for module, rel in modules.items():
        with open(os.path.join(REPO, rel), encoding="utf-8") as fh:
            source = fh.read()
        for imp in imports_in(source, rel):
            subs = [f"{imp.target}.{n}" for n in imp.names if f"{imp.target}.{n}" in modules]
            plain = len(subs) < len(imp.names) or not imp.names
            for target in [*subs, *([imp.target] if plain else [])]:
                if target in modules and target != module:
                    edges[module].setdefault(target, imp)
    return edges


@pytest.mark.parametrize("package", sorted(OURS), ids=lambda p: p)
def test_there_are_no_import_cycles_between_the_modules_of_a_package(package):
    edges = module_imports(package)
    graph = {a: sorted(targets) for a, targets in edges.items()}
    cycle = _find_cycle(graph)
    if cycle:
        steps = [str(edges[a][b]) for a, b in pairwise(cycle)]
        pytest.fail(f"import cycle {' -> '.join(cycle)}:\n  " + "\n  ".join(steps))


def test_the_module_cycle_check_sees_the_namespace_s_own_modules_import_each_other():
    edges = module_imports(NAMESPACE)
    assert "benchledger.reading" in edges["benchledger.running"]  # absolute
    assert "benchledger.scoring" in edges["benchledger.reading"]  # lazy, in a method
    assert "benchledger.testing.ledger" in edges["benchledger.testing"]
    [imp] = imports_in("from benchledger.scoring import report\n", "cli/x.py")
    assert (imp.target, imp.imported) == ("benchledger.scoring", NAMESPACE)


def test_the_module_cycle_check_sees_a_lazy_from_package_import(tmp_path):
    source = "def f():\n    from benchledger.projections import provenance_audit\n"
    [imp] = imports_in(source, "projections/audit.py")
    assert (imp.target, imp.names) == ("projections", ("provenance_audit",))
    assert _find_cycle({"a": ["b"], "b": ["a"]}) == ["a", "b", "a"]


# A module past this is split by its natural parts (issue 53, docs/architecture.md "Size").
MAX_LINES = 700


def test_no_module_of_ours_is_over_700_lines():
    over = []
    for package in sorted(OURS):
        for rel in _python_files(package):
            with open(os.path.join(REPO, rel), encoding="utf-8") as fh:
                lines = sum(1 for _ in fh)
            if lines > MAX_LINES:
                over.append(f"{rel}: {lines} lines")
    assert over == [], f"split these by their natural parts (at most {MAX_LINES} lines each)"


def test_every_top_level_package_of_the_repository_has_a_rule():
    packages = {
        name
        for name in os.listdir(REPO)
        if os.path.isfile(os.path.join(REPO, name, "__init__.py")) and name != "tests"
    }
    assert packages == set(OURS), "give each package a row in ALLOWED (and docs/architecture.md)"
    assert packages - {NAMESPACE} == FOLDERS, "map each folder in pyproject.toml's package-dir"


@pytest.mark.parametrize(
    ("path", "source", "expected"),
    [
        ("harness/x.py", "import benchledger.ledger.chain, os\n", ["ledger.chain", "os"]),
        ("harness/x.py", "def f():\n    from benchledger.cli import main\n", ["cli"]),
        ("harness/agents/fake.py", "from .base import Turn\n", ["harness.agents.base"]),
        ("harness/agents/fake.py", "from .. import settings\n", ["harness"]),
        ("harness/agents/__init__.py", "from . import fake\n", ["harness.agents"]),
        (
            "cli/run.py",
            "if True:\n    import benchledger.harness.runner as r\n",
            ["harness.runner"],
        ),
    ],
    ids=[
        "module-level-import",
        "function-level-from-import",
        "relative-sibling",
        "relative-parent",
        "relative-in-package-init",
        "nested-block-import-as",
    ],
)
def test_the_walk_finds_every_kind_of_import(path, source, expected):
    assert [i.target for i in imports_in(source, path)] == expected


def test_an_import_is_named_by_its_file_line_and_statement():
    first, lazy = imports_in(
        "import os\n\ndef f():\n    from benchledger.cli import main\n", "ledger/x.py"
    )
    assert str(first) == "ledger/x.py:1: import os"
    assert str(lazy) == "ledger/x.py:4: from benchledger.cli import main"
    assert (lazy.importer, lazy.imported) == ("ledger", "cli")


# -- settings and the environment are read once, by the command line ------------------------

# Below ``cli`` nothing reads an environment variable or loads the settings: the command line
# reads them once and hands the values down (constructors, parameters, ``RunConfig.settings``),
# so a caller (a test, the reliability selftest) steers them by passing values, never by
# editing ``os.environ``. Each exception names where it is, as ``file:function``, and why.
ENVIRONMENT_READERS: dict[str, str] = {
    "harness/settings.py:load": "the one reader of the settings: a call of it below cli is "
    "itself a read this test refuses, so only the command line calls it",
    "refplatform/toolkits/sqlworker.py:_Worker.__init__": "copies the environment into the "
    "SQL worker child it starts (adding two variables); it reads no setting",
    "harness/platforms/generic_mcp.py:GenericMcpProvisioner.env": "hands the variables a "
    "mapping names secret (server.secrets) to the server it starts, as the mapping says; "
    "their values are never recorded and it reads no setting",
    "harness/platforms/mem0_server.py:main": "runs in mem0's own venv, a process of its own: "
    "the harness hands it the token of its loopback LLM endpoint in its environment, kept "
    "off its command line (docs/mem0.md); it reads no setting",
}
_ENV_NAMES = frozenset({"environ", "environb", "getenv", "getenvb", "putenv", "unsetenv"})
SETTINGS_MODULE = "harness.settings"


@dataclass(frozen=True)
class Read:
    """One read of the environment or the settings, and the function it sits in."""

    file: str
    line: int
    where: str  # the enclosing function's qualified name ("" at module level)
    what: str

    @property
    def key(self) -> str:
        return f"{self.file}:{self.where}"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}: {self.what}" + (
            f" (in {self.where})" if self.where else ""
        )


def _bindings(tree: ast.AST, rel_path: str) -> tuple[set[str], set[str], set[str]]:
    """Names bound to the ``os`` module, to ``harness.settings``, and to its ``load``."""
    os_names, settings_names, load_names = set(), set(), set()
    for imp_node in ast.walk(tree):
        if isinstance(imp_node, ast.Import):
            for a in imp_node.names:
                if a.name == "os":
                    os_names.add(a.asname or "os")
                elif a.name == SETTINGS_MODULE and a.asname:
                    settings_names.add(a.asname)
        elif isinstance(imp_node, ast.ImportFrom):
            for imp in imports_in(ast.unparse(imp_node), rel_path):
                for a in imp_node.names:
                    bound = a.asname or a.name
                    if imp.target == "harness" and a.name == "settings":
                        settings_names.add(bound)
                    elif imp.target == SETTINGS_MODULE and a.name == "load":
                        load_names.add(bound)
    return os_names, settings_names, load_names


def reads_in(source: str, rel_path: str) -> Iterator[Read]:
    """Every read of the environment (``os.environ``, ``os.getenv``, ``from os import
    environ``, ...) or of the settings (``harness.settings.load``) in ``source``."""
    tree = ast.parse(source, rel_path)
    os_names, settings_names, load_names = _bindings(tree, rel_path)
    # ``load(mapping)`` parses the mapping it is given (the selftest's bad-input cases name
    # their environment): only ``load()`` reads this process's.
    parses = {
        id(node.func)
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and (node.args or node.keywords)
    }

    def visit(node: ast.AST, where: str) -> Iterator[Read]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                yield from visit(child, f"{where}.{child.name}" if where else child.name)
                continue
            what = ""
            if isinstance(child, ast.ImportFrom) and child.module == "os" and not child.level:
                names = [a.name for a in child.names if a.name in _ENV_NAMES]
                what = f"from os import {', '.join(names)}" if names else ""
            elif isinstance(child, ast.Attribute) and isinstance(child.value, ast.Name):
                owner = child.value.id
                if owner in os_names and child.attr in _ENV_NAMES:
                    what = f"{owner}.{child.attr}"
                elif owner in settings_names and child.attr == "load":
                    what = f"{owner}.load (the settings)"
            elif (
                isinstance(child, ast.Attribute) and ast.unparse(child) == SETTINGS_MODULE + ".load"
            ):
                what = "harness.settings.load (the settings)"
            elif isinstance(child, ast.Name) and child.id in load_names:
                what = f"{child.id} (harness.settings.load: the settings)"
            if what.endswith("the settings)") and id(child) in parses:
                what = ""
            if what:
                yield Read(rel_path, child.lineno, where, what)
            yield from visit(child, where)

    yield from visit(tree, "")


def reads_below_the_command_line() -> list[Read]:
    """Every read of the environment or the settings in the packages under ``cli``."""
    found = []
    for package in sorted(OURS - {TOP}):
        for rel in _python_files(package):
            with open(os.path.join(REPO, rel), encoding="utf-8") as fh:
                found += reads_in(fh.read(), rel)
    return found


def test_nothing_below_the_command_line_reads_the_environment_or_the_settings():
    bad = [str(r) for r in reads_below_the_command_line() if r.key not in ENVIRONMENT_READERS]
    assert not bad, "\n  ".join(
        ["read these in cli/ and hand the values down (or allow one with a reason):", *bad]
    )


def test_every_allowed_environment_reader_still_reads_it():
    keys = {r.key for r in reads_below_the_command_line()}
    stale = sorted(set(ENVIRONMENT_READERS) - keys)
    assert not stale, f"allowed, but no longer reading the environment: {stale}"


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import os\nx = os.environ['HOME']\n", ["os.environ"]),
        ("import os\ndef f():\n    return os.getenv('X')\n", ["os.getenv"]),
        ("import os as o\nx = o.environ.get('X')\n", ["o.environ"]),
        ("from os import environ\n", ["from os import environ"]),
        ("from os import getenv as g\n", ["from os import getenv"]),
        (
            "from benchledger.harness import settings\nsettings.load()\n",
            ["settings.load (the settings)"],
        ),
        (
            "from benchledger.harness.settings import load as ls\nls()\n",
            ["ls (harness.settings.load: the settings)"],
        ),
        ("from .. import settings\nsettings.load()\n", ["settings.load (the settings)"]),
        ("from benchledger.harness import settings\nsettings.load({'A': 'b'})\n", []),
        ("import os\nx = os.path.join('a', 'b')\n", []),
        ("from benchledger.harness.settings import Settings\nSettings()\n", []),
    ],
    ids=[
        "environ-item",
        "getenv",
        "aliased-os",
        "from-os-environ",
        "from-os-getenv",
        "settings-load",
        "load-alias",
        "relative-settings",
        "settings-from-a-mapping",
        "other-os",
        "settings-type",
    ],
)
def test_the_walk_finds_every_kind_of_environment_read(source, expected):
    assert [r.what for r in reads_in(source, "harness/agents/x.py")] == expected


def test_a_read_is_named_by_its_file_line_and_function():
    source = "import os\nclass A:\n    def f(self):\n        return os.environ\n"
    [read] = reads_in(source, "harness/x.py")
    assert (str(read), read.key) == ("harness/x.py:4: os.environ (in A.f)", "harness/x.py:A.f")


# Run in a child: each module is imported first, with none of ours loaded before it (a
# cycle through a package's __init__ fails only in that order, which the AST walk above
# cannot see: importing projections.compare once loaded the suites, whose report imported
# the half-made compare).
_FIRST_IMPORT = """
import importlib, sys
ours, names = set(sys.argv[1].split(",")), sys.argv[2:]
for name in names:
    for loaded in [m for m in sys.modules if m.split(".")[0] in ours]:
        del sys.modules[loaded]
    try:
        importlib.import_module(name)
    except Exception as exc:
        print(f"{name}: {type(exc).__name__}: {exc}")
"""


def _modules() -> list[str]:
    out = []
    for package in sorted(OURS):
        for folder, _, files in os.walk(os.path.join(REPO, package)):
            for file in sorted(files):
                if file.endswith(".py") and file != "__main__.py":
                    rel = os.path.relpath(os.path.join(folder, file), REPO)
                    name = _module_name(rel.replace(os.sep, "/"))[0]
                    out.append(name if package == NAMESPACE else f"{NAMESPACE}.{name}")
    return out


@pytest.mark.slow  # every module imported in a fresh interpreter (~40 s)
def test_every_module_imports_when_it_is_the_first_of_ours_imported():
    env = {**os.environ, "PYTHONPATH": REPO}
    done = subprocess.run(
        [sys.executable, "-c", _FIRST_IMPORT, NAMESPACE, *_modules()],
        capture_output=True, text=True, cwd=REPO, env=env, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout == "", "modules that fail when imported first:\n" + done.stdout


# -- one namespace ------------------------------------------------------------------------

# Every import of ours goes through ``benchledger``: a bare ``import ledger`` (possible from
# a source checkout, whose root is on sys.path) would load a second copy of the module under
# another name, with classes of its own that ``isinstance`` and ``except`` do not match.


def _every_python_file() -> Iterator[str]:
    for top in sorted(FOLDERS | {NAMESPACE, "tests"}):
        yield from _python_files(top)


def test_no_module_imports_one_of_our_packages_by_its_bare_name():
    bare = []
    for rel in _every_python_file():
        with open(os.path.join(REPO, rel), encoding="utf-8") as fh:
            bare += [str(i) for i in imports_in(fh.read(), rel) if i.bare]
    assert not bare, "\n  ".join(["import these as benchledger.NAME:", *bare])


@pytest.mark.parametrize(
    ("source", "bare"),
    [
        ("import ledger\n", [True]),
        ("import ledger.chain as c\n", [True]),
        ("from cli import main\n", [True]),
        ("from benchledger import ledger\n", [False]),
        ("import benchledger.ledger.chain\n", [False]),
        ("from .chain import x\n", [False]),
        ("import ledgers\n", [False]),
    ],
    ids=["import", "import-as", "from", "from-namespace", "namespaced", "relative", "other"],
)
def test_the_walk_tells_a_bare_import_from_a_namespaced_one(source, bare):
    assert [i.bare for i in imports_in(source, "harness/x.py")] == bare


def test_the_namespace_links_each_folder_of_ours_and_nothing_else():
    folder = os.path.join(REPO, NAMESPACE)
    links = {n for n in os.listdir(folder) if os.path.islink(os.path.join(folder, n))}
    assert links == set(FOLDERS)
    for name in links:
        assert os.path.realpath(os.path.join(folder, name)) == os.path.join(REPO, name)


# -- nothing above the suites names one -------------------------------------------------------

# The command line, replay, the library API and the projections shared by every suite reach a
# suite only through its registration (``projections.suites`` lookup, ``harness.suites``
# suite_for): importing one suite's own modules would make its behaviour the default.
ABOVE_THE_SUITES = ("cli", "replay", NAMESPACE)
SUITE_FOLDERS = ("projections/suites", "harness/suites")
# Each exception names the file and why it may.
SUITE_OWN_COMMANDS = {
    "cli/study.py": "the `study` command is the tasks suite's own view: the peer's published "
    "knowledge-pollution tables, re-derived from imported tasks runs",
}


def _suite_modules() -> set[str]:
    """Each built-in suite's own modules and packages (not the registry or its base)."""
    found = set()
    for folder in SUITE_FOLDERS:
        for name in os.listdir(os.path.join(REPO, folder)):
            stem = name.removesuffix(".py")
            if stem not in ("__init__", "base", "builtin", "__pycache__"):
                found.add(f"{folder.replace('/', '.')}.{stem}")
    return found


def _imports_a_suite(imp: Import, suites: set[str]) -> bool:
    targets = [imp.target, *(f"{imp.target}.{n}" for n in imp.names)]
    return any(t == s or t.startswith(s + ".") for t in targets for s in suites)


def test_nothing_above_the_suites_imports_one_suite_s_own_modules():
    suites = _suite_modules()
    assert "projections.suites.lifecycle" in suites and "harness.suites.tasks" in suites
    files = [f for top in ABOVE_THE_SUITES for f in _python_files(top)]
    files += [f"projections/{n}" for n in os.listdir(os.path.join(REPO, "projections"))
              if n.endswith(".py")]  # fmt: skip
    bad = []
    for rel in files:
        if rel in SUITE_OWN_COMMANDS:
            continue
        with open(os.path.join(REPO, rel), encoding="utf-8") as fh:
            bad += [str(i) for i in imports_in(fh.read(), rel) if _imports_a_suite(i, suites)]
    assert not bad, "\n  ".join(["reach the suite through its registration:", *bad])
