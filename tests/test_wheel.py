"""The built distribution installs one top-level package, ``benchledger``, holding all of ours,
and builds the same from any checkout.

The wheels and the sdist are built from clones of this repository, so from what is
committed (commit first): one clone as Git makes it here, one made with
``git -c core.symlinks=false clone`` (Git for Windows' default), where each link in
``benchledger/`` is a small text file. Both wheels are read as zips; the sdist is unpacked
and a few of its own tests run from it. .ci/run installs the tree into a fresh virtual
environment and checks ``import cli`` fails there while ``import benchledger`` works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds two wheels and an sdist

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NAMESPACE = "benchledger"
_JUNK = shutil.ignore_patterns(".git", "build", "*.egg-info", "__pycache__")


def _run(cmd: list[str], cwd: Path | str | None = None, env: dict[str, str] | None = None) -> str:
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, f"{cmd}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout


def _clone(dest: Path, *options: str) -> Path:
    if not os.path.exists(os.path.join(REPO, ".git")):
        pytest.skip("not a git checkout (an unpacked sdist): nothing to clone")
    _run(["git", *options, "clone", "-q", "--no-hardlinks", REPO, str(dest)])
    return dest


def _wheel_of(checkout: Path, out: Path) -> zipfile.ZipFile:
    src = out / "src"  # a copy, so the build's build/ and egg-info stay out of the checkout
    shutil.copytree(checkout, src, symlinks=True, ignore=_JUNK)
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out / "dist"),
          str(src)])  # fmt: skip
    [built] = list((out / "dist").glob("benchledger-*.whl"))
    return zipfile.ZipFile(built)


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return _clone(tmp_path_factory.mktemp("clone") / "repo")


@pytest.fixture(scope="module")
def wheel(clone: Path, tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    return _wheel_of(clone, tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def linkless_wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    base = tmp_path_factory.mktemp("linkless")
    checkout = _clone(base / "repo", "-c", "core.symlinks=false")
    link = checkout / NAMESPACE / "ledger"
    assert link.is_file() and link.read_text() == "../ledger"  # Git wrote the link as text
    return _wheel_of(checkout, base)


@pytest.fixture(scope="module")
def sdist(clone: Path, tmp_path_factory: pytest.TempPathFactory) -> tarfile.TarFile:
    out = tmp_path_factory.mktemp("sdist")
    src = out / "src"
    shutil.copytree(clone, src, symlinks=True, ignore=_JUNK)
    # The PEP 517 hook pip and `python -m build` call, in this interpreter.
    hook = "import sys, setuptools.build_meta as b; print(b.build_sdist(sys.argv[1]))"
    name = _run([sys.executable, "-c", hook, str(out / "dist")], cwd=src).strip().splitlines()[-1]
    return tarfile.open(out / "dist" / name)


def _tracked(checkout: Path, *paths: str) -> dict[str, str]:
    """Each tracked file under ``paths`` -> its mode (120000: a symbolic link)."""
    listing = _run(["git", "ls-files", "-s", "--", *paths], cwd=checkout)
    return {line.split("\t", 1)[1]: line.split()[0] for line in listing.splitlines()}


def _folders(checkout: Path) -> dict[str, str]:
    """The build's package -> folder mapping (pyproject.toml's package-dir)."""
    with open(checkout / "pyproject.toml", "rb") as fh:
        mapping: dict[str, str] = tomllib.load(fh)["tool"]["setuptools"]["package-dir"]
    return mapping


def test_a_wheel_holds_no_top_level_package_but_benchledger(wheel: zipfile.ZipFile) -> None:
    tops = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in tops if not t.endswith(".dist-info")} == {"benchledger"}


@pytest.mark.parametrize(
    "member",
    [
        "benchledger/__init__.py",
        "benchledger/__main__.py",
        "benchledger/ledger/chain.py",
        "benchledger/cli/__init__.py",
        "benchledger/refplatform/toolkits/sqlworker.py",
        "benchledger/projections/data/prices.toml",
        "benchledger/protocols/data/lifecycle/bl-anchor-tier.yaml",
        "benchledger/harness/platforms/mappings/mcp-memory-service.toml",
        "benchledger/testing/ledger.py",
        "benchledger/py.typed",
    ],
    ids=[
        "namespace",
        "main",
        "ledger",
        "cli",
        "nested",
        "package-data",
        "protocol-data",
        "mapping",
        "conformance",
        "typed",
    ],
)
def test_a_wheel_holds_every_linked_folder_as_plain_files(
    wheel: zipfile.ZipFile, member: str
) -> None:
    assert member in wheel.namelist()
    assert not wheel.getinfo(member).is_dir()


def test_a_wheel_holds_every_tracked_file_of_our_folders_and_nothing_else(
    clone: Path, wheel: zipfile.ZipFile
) -> None:
    expected = set()
    for package, folder in _folders(clone).items():
        prefix = package.replace(".", "/")
        for path, mode in _tracked(clone, folder).items():
            if mode != "120000":  # a link in benchledger/: its folder is mapped itself
                expected.add(f"{prefix}/{path.removeprefix(folder + '/')}")
    shipped = {n for n in wheel.namelist() if not n.split("/")[0].endswith(".dist-info")}
    assert sorted(shipped - expected) == [], "shipped, but not tracked"
    assert sorted(expected - shipped) == [], "tracked under our folders, but not shipped"


def test_a_wheel_built_from_a_checkout_without_symbolic_links_equals_the_normal_one(
    wheel: zipfile.ZipFile, linkless_wheel: zipfile.ZipFile
) -> None:
    assert sorted(linkless_wheel.namelist()) == sorted(wheel.namelist())
    differ = [n for n in wheel.namelist() if wheel.read(n) != linkless_wheel.read(n)]
    assert differ == []


def test_the_console_script_and_the_pytest_plugin_point_into_the_namespace(
    wheel: zipfile.ZipFile,
) -> None:
    [points] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(points).decode()
    assert "benchledger = benchledger.cli:main" in text
    assert "benchledger = benchledger.replay.pytest_plugin" in text
    assert Path(REPO, "benchledger", "ledger").is_symlink()


def test_the_sdist_carries_every_tracked_test_doc_and_link(
    clone: Path, sdist: tarfile.TarFile
) -> None:
    [top] = {m.name.split("/")[0] for m in sdist.getmembers()}
    members = {m.name.removeprefix(top + "/"): m for m in sdist.getmembers()}
    needed = _tracked(clone, "tests", "docs", "README.md", ".ci/run", "pyproject.toml")
    assert "tests/conftest.py" in needed and "tests/data/golden-run.jsonl" in needed
    assert sorted(set(needed) - set(members)) == []
    for package, folder in _folders(clone).items():
        if package != NAMESPACE:
            link = members[package.replace(".", "/")]
            assert (link.issym(), link.linkname) == (True, f"../{folder}")


def test_the_sdist_runs_its_own_tests(sdist: tarfile.TarFile, tmp_path: Path) -> None:
    sdist.extractall(tmp_path, filter="data")
    [unpacked] = tmp_path.iterdir()
    env = {**os.environ, "PYTHONPATH": str(unpacked)}
    where = _run([sys.executable, "-c", "import benchledger.ledger.chain as c; print(c.__file__)"],
                 cwd=unpacked, env=env)  # fmt: skip
    assert where.strip().startswith(str(unpacked))  # its own code, not an installed copy
    # Its conftest, its data (the golden run) and its pyproject's markers.
    out = _run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                "tests/test_golden.py", "tests/test_chain.py"], cwd=unpacked, env=env)  # fmt: skip
    assert " passed" in out and "error" not in out.lower()
