"""Every module our packages import at run time is the standard library, ours, or a
declared dependency: a plain ``pip install .`` (no extras) must be enough to run.

A test extra that happens to bring a runtime import (scipy brought numpy) would hide a
broken install; this reads the imports from the source, so it does not depend on what
happens to be installed beside the project.
"""

from __future__ import annotations

import ast
import os
import re
import sys
import tomllib
from collections.abc import Iterator
from importlib.metadata import packages_distributions

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OURS = (
    "benchledger",  # the namespace's own modules (its links to the folders are not walked)
    "ledger",
    "protocols",
    "projections",
    "replay",
    "harness",
    "refplatform",
    "benchmarks",
    "cli",
)
# Loaded only by pytest itself (the pytest11 entry point) or by a test suite (the conformance
# tests a third party subclasses), so pytest is there when they are; a folder ends in "/".
PYTEST_ONLY = {"replay/pytest_plugin.py", "benchledger/testing/"}
# Installed with a declared dependency's own extra: psycopg[binary,pool].
EXTRA_OF_DECLARED = {"psycopg_pool": "psycopg", "psycopg_binary": "psycopg"}
# Imported only inside a function, from one module, and declared in one of our own extras:
# module -> (extra, the one file allowed to import it).
OPTIONAL = {"nltk": ("locomo", "projections/suites/locomo/grading.py")}


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _declared(extra: str | None = None) -> set[str]:
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        project = tomllib.load(fh)["project"]
    deps = project["optional-dependencies"][extra] if extra else project["dependencies"]
    return {_normalise(re.split(r"[\s\[<>=!~;]", dep, maxsplit=1)[0]) for dep in deps}


def _pytest_only(rel: str) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in PYTEST_ONLY)


def _imports() -> Iterator[tuple[str, str, int]]:
    """(top-level module imported, file, line) for every import in our packages."""
    for package in OURS:
        for folder, dirs, files in os.walk(os.path.join(REPO, package)):
            dirs[:] = sorted(d for d in dirs if d != "__pycache__")
            for name in sorted(files):
                if not name.endswith(".py"):
                    continue
                path = os.path.join(folder, name)
                rel = os.path.relpath(path, REPO).replace(os.sep, "/")
                with open(path, encoding="utf-8") as fh:
                    tree = ast.parse(fh.read(), rel)
                for node in ast.walk(tree):
                    if isinstance(node, ast.Import):
                        names = [a.name for a in node.names]
                    elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                        names = [node.module]
                    else:
                        continue
                    for module in names:
                        yield module.split(".")[0], rel, node.lineno


def _runtime_imports() -> dict[str, str]:
    """Top-level module name -> the first ``file:line`` importing it, over our packages
    (the pytest-only modules left out)."""
    found: dict[str, str] = {}
    for module, rel, line in _imports():
        if not _pytest_only(rel):
            found.setdefault(module, f"{rel}:{line}")
    return found


def test_the_dependency_scan_sees_our_known_imports():
    imports = _runtime_imports()
    # Guards the scan itself: a walk that found nothing would pass the test below vacuously.
    assert {"msgspec", "blake3", "duckdb", "eventsourcing"} <= set(imports)


def test_every_runtime_import_is_the_standard_library_ours_or_a_declared_dependency():
    declared = _declared()
    providers = packages_distributions()
    missing = []
    for module, where in sorted(_runtime_imports().items()):
        if module in sys.stdlib_module_names or module in OURS or module == "__future__":
            continue
        if module in OPTIONAL:
            continue  # checked by the test below
        dists = {_normalise(d) for d in providers.get(module, [])}
        if module in EXTRA_OF_DECLARED:
            dists.add(EXTRA_OF_DECLARED[module])
        if not dists & declared:
            missing.append(
                f"{where}: imports {module} (from {sorted(dists) or 'nothing installed'})"
            )
    assert not missing, "declare these in pyproject.toml [project] dependencies:\n  " + (
        "\n  ".join(missing)
    )


@pytest.mark.parametrize("module", sorted(OPTIONAL))
def test_an_optional_dependency_is_declared_in_its_extra_and_imported_in_a_function_only(module):
    extra, allowed = OPTIONAL[module]
    assert _normalise(module) in _declared(extra)
    where = [rel for name, rel, _ in _imports() if name == module]
    assert where and set(where) == {allowed}
    with open(os.path.join(REPO, allowed), encoding="utf-8") as fh:
        tree = ast.parse(fh.read())
    top = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    names = {a.name for n in top if isinstance(n, ast.Import) for a in n.names}
    names |= {n.module or "" for n in top if isinstance(n, ast.ImportFrom)}
    assert not {n for n in names if n.split(".")[0] == module}, "imported at module level"


def test_only_the_pytest_only_modules_import_pytest():
    importers = {rel for module, rel, _ in _imports() if module in ("pytest", "_pytest")}
    assert "benchledger/testing/__init__.py" in importers  # the scan sees them
    assert {rel for rel in importers if not _pytest_only(rel)} == set()


def test_the_sql_engine_s_indirect_need_for_numpy_is_declared():
    # DuckDB's Python UDFs (refplatform/toolkits/sql_database.py create_function) import numpy on
    # first registration; our code never imports it, so the scan above cannot see it.
    assert "numpy" in _declared()


@pytest.mark.parametrize(
    ("dependency", "name"),
    [
        ("psycopg[binary,pool]>=3.3.9", "psycopg"),
        ("PyYAML>=6.0", "pyyaml"),
        ("mcp-types>=2", "mcp-types"),
    ],
    ids=["extras", "case", "dash"],
)
def test_declared_names_are_normalised_as_pip_does(dependency, name):
    assert _normalise(re.split(r"[\s\[<>=!~;]", dependency, maxsplit=1)[0]) == name
