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


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _project() -> dict:
    with open(os.path.join(REPO, "pyproject.toml"), "rb") as fh:
        return tomllib.load(fh)["project"]


def _name(dep: str) -> str:
    return _normalise(re.split(r"[\s\[<>=!~;]", dep, maxsplit=1)[0])


def _declared() -> set[str]:
    return {_name(dep) for dep in _project()["dependencies"]}


def _optional_extras() -> dict[str, list[str]]:
    """The extras a user installs for a feature (``test`` is the developers' own)."""
    extras = _project()["optional-dependencies"]
    return {name: deps for name, deps in extras.items() if name != "test"}


def _pytest_only(rel: str) -> bool:
    return any(rel == p or (p.endswith("/") and rel.startswith(p)) for p in PYTEST_ONLY)


def _imports() -> Iterator[tuple[str, str, int, bool]]:
    """(top-level module imported, file, line, at module level) for every import in our
    packages (an indented import sits in a function or block: loaded only when reached)."""
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
                        yield module.split(".")[0], rel, node.lineno, node.col_offset == 0


def _runtime_imports() -> dict[str, str]:
    """Top-level module name -> the first ``file:line`` importing it, over our packages
    (the pytest-only modules left out)."""
    found: dict[str, str] = {}
    for module, rel, line, _ in _imports():
        if not _pytest_only(rel):
            found.setdefault(module, f"{rel}:{line}")
    return found


def _optional_modules() -> set[str]:
    """Top-level modules an optional extra provides (a feature's own, imported lazily)."""
    providers = packages_distributions()
    names = {_name(dep) for deps in _optional_extras().values() for dep in deps}
    return {m for m, dists in providers.items() if {_normalise(d) for d in dists} & names}


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
        if module in _optional_modules():
            continue  # an optional extra's: lazily imported (the test below)
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


def test_an_optional_extra_is_pinned_exactly_also_in_test_and_imported_only_lazily():
    extras = _optional_extras()
    assert "wordllama" in extras  # the scan sees them
    test_extra = set(_project()["optional-dependencies"]["test"])
    optional = _optional_modules()
    assert "wordllama" in optional
    for name, deps in extras.items():
        for dep in deps:
            assert re.fullmatch(r"[A-Za-z0-9_.\-]+==[0-9][0-9A-Za-z.]*", dep), (name, dep)
            assert dep in test_extra, f"extra {name}: {dep} is not in the test extra"
    eager = [f"{rel}:{line}" for m, rel, line, top in _imports() if m in optional and top]
    assert not eager, f"an optional extra's module imported at module level: {eager}"


def test_only_the_pytest_only_modules_import_pytest():
    importers = {rel for module, rel, *_ in _imports() if module in ("pytest", "_pytest")}
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
