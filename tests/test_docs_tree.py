"""The docs stand on their own and match the tree.

docs/architecture.md names modules (``ledger/chain.py``, ``platforms/provision``, ``stdio.py``)
and the names they define (``ledger/verified.py`` ``open_run``,
``ledger.completeness.completeness``): each must exist. And nothing in the repository
cites the design picture the project started from, which is not in it; the facts code
relies on are stated in docs/.
"""

from __future__ import annotations

import ast
import fnmatch
import functools
import os
import re
from collections.abc import Iterator

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
ARCHITECTURE = os.path.join(ROOT, "docs", "architecture.md")
PACKAGES = sorted(
    name for name in os.listdir(ROOT) if os.path.isfile(os.path.join(ROOT, name, "__init__.py"))
)
_IDENT = r"[a-z_][a-z0-9_]+"  # two letters at least: ``i/n`` is a placeholder
# A path: dirs then a module (``.py`` or not) or ``{a,b}``; or a bare ``name.py``.
PATH = re.compile(
    rf"(?<![\w./@:-])((?:{_IDENT}/)+(?:{_IDENT}(?:\.py)?|\{{[a-z0-9_,]+\}})?|{_IDENT}\.py)(?![\w/-])"
)
# A module path in backticks followed by a name in backticks: ``ledger/chain.py` `RunChecker``.
PLACED = re.compile(rf"`((?:{_IDENT}/)+{_IDENT}\.py)`\s+`([A-Za-z_][\w*]*)`")
# A dotted name rooted in one of our packages: ``ledger.events.infra_failure``.
DOTTED = re.compile(r"`((?:" + "|".join(PACKAGES) + r")(?:\.\w+)+)`")
# How a citation of the design picture reads (spelled in pieces so this file holds none).
DESIGN = "DES" + "IGN"
CITATION = re.compile(rf"\b{DESIGN}(?:\.md)?\s*§|\b{DESIGN}\.md\b|shared/{DESIGN}")


def _doc() -> str:
    with open(ARCHITECTURE, encoding="utf-8") as f:
        return f.read()


def _expand(token: str) -> list[str]:
    """``suites/{lifecycle,provenance}`` -> ``suites/lifecycle``, ``suites/provenance``."""
    m = re.search(r"\{([^}]*)\}", token)
    if not m:
        return [token]
    return [token[: m.start()] + part + token[m.end() :] for part in m.group(1).split(",")]


def _resolves(path: str) -> bool:
    """A path from the repository root or from inside a package, a module or a folder."""
    if "/" not in path:  # a bare ``name.py``: some package holds it
        return any(name == path for _, _, files in _walk() for name in files)
    path = path.rstrip("/")
    bases = [ROOT] + [os.path.join(ROOT, p) for p in PACKAGES] + [os.path.join(ROOT, "harness")]
    for base in bases:
        full = os.path.join(base, path)
        if os.path.isdir(full) or os.path.isfile(full) or os.path.isfile(full + ".py"):
            return True
    return False


@functools.cache
def _walk() -> list[tuple[str, list[str], list[str]]]:
    out = []
    for dirpath, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIP]
        out.append((dirpath, list(dirs), files))
    return out


_SKIP = {"node_modules", "__pycache__", "benchledger.egg-info"}


def module_paths(text: str) -> list[str]:
    """Every module or folder path the text names, braces expanded."""
    return [p for token in PATH.findall(text) for p in _expand(token)]


def _defined(path: str) -> set[str]:
    """Top-level names a module defines or imports (a re-export counts)."""
    with open(os.path.join(ROOT, path), encoding="utf-8") as f:
        tree = ast.parse(f.read(), path)
    names: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                for n in ast.walk(target):
                    if isinstance(n, ast.Name):
                        names.add(n.id)
        elif isinstance(node, ast.ImportFrom | ast.Import):
            names.update((a.asname or a.name).split(".")[0] for a in node.names)
    return names


def _module_file(dotted: list[str]) -> tuple[str, list[str]] | None:
    """The longest prefix of a dotted name that is a module file, and the rest."""
    for i in range(len(dotted), 0, -1):
        base = "/".join(dotted[:i])
        for candidate in (base + ".py", base + "/__init__.py"):
            if os.path.isfile(os.path.join(ROOT, candidate)):
                return candidate, dotted[i:]
    return None


def placed_names(text: str) -> Iterator[tuple[str, str]]:
    """(module file, name) for every name the text places in a module."""
    yield from PLACED.findall(text)
    for dotted in DOTTED.findall(text):
        found = _module_file(dotted.split("."))
        yield (found[0], found[1][0]) if found and found[1] else (dotted, "")


def test_the_path_reader_sees_each_form_the_architecture_doc_uses():
    text = (
        "`ledger/chain.py` suites/{lifecycle,provenance} platforms/provision ─► `episode.py`;"
        " [scaling.md](scaling.md) docs/trace-hash.md `--platform-scope unit` --shard i/n cli/ (x)"
    )
    assert module_paths(text) == [
        "ledger/chain.py",
        "suites/lifecycle",
        "suites/provenance",
        "platforms/provision",
        "episode.py",
        "cli/",
    ]
    assert not _resolves("harness/platforms/launcher.py") and not _resolves("gone.py")


def test_every_module_path_the_architecture_doc_names_exists_in_the_tree():
    paths = module_paths(_doc())
    assert len(paths) > 30, paths  # the reader still finds the doc's paths
    missing = sorted({p for p in paths if not _resolves(p)})
    assert not missing, f"docs/architecture.md names paths the tree does not have: {missing}"


def test_every_name_the_architecture_doc_places_in_a_module_is_defined_there():
    placed = list(placed_names(_doc()))
    assert len(placed) >= 6, placed  # the reader still finds the doc's names
    wrong = []
    for path, name in placed:
        if not name or not os.path.isfile(os.path.join(ROOT, path)):
            wrong.append(f"{path}: no such module")
        elif not fnmatch.filter(_defined(path), name):
            wrong.append(f"{path}: no top-level {name}")
    assert not wrong, f"docs/architecture.md: {wrong}"


def _files(*suffixes: str) -> Iterator[str]:
    for dirpath, _, files in _walk():
        for name in files:
            if name.endswith(suffixes):
                yield os.path.relpath(os.path.join(dirpath, name), ROOT)


def _citations(paths: Iterator[str]) -> list[str]:
    found = []
    for path in paths:
        with open(os.path.join(ROOT, path), encoding="utf-8") as f:
            for number, line in enumerate(f, 1):
                if CITATION.search(line):
                    found.append(f"{path}:{number}: {line.strip()}")
    return found


@pytest.mark.parametrize(
    "line",
    [
        pytest.param(f"(see {DESIGN} §6)", id="section"),
        pytest.param(f"as {DESIGN}.md says", id="file"),
        pytest.param(f"../shared/{DESIGN}.md", id="path"),
    ],
)
def test_a_design_citation_is_recognised(line):
    assert CITATION.search(line)


def test_no_code_file_cites_the_design_picture():
    found = _citations(_files(".py"))
    assert not found, "cite docs/ instead (state the fact there):\n" + "\n".join(found)


def test_no_doc_cites_the_design_picture():
    docs = [p for p in _files(".md") if p.startswith("docs" + os.sep) or p == "README.md"]
    assert len(docs) > 10
    found = _citations(iter(docs))
    assert not found, "state the fact in docs/ itself:\n" + "\n".join(found)
