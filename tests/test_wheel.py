"""The built distribution installs one top-level package, ``benchledger``, holding all of ours.

A wheel built from this tree is read as a zip: its top-level names are ``benchledger`` and
its ``.dist-info`` and nothing else, and the folders the namespace links to are in it as
plain files (with their package data). .ci/run installs the same tree into a fresh virtual
environment and checks ``import cli`` fails there while ``import benchledger`` works.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds a wheel

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    # A copy of the tree, so the build's own build/ and egg-info never land in the checkout.
    src = out / "src"
    junk = shutil.ignore_patterns(
        ".git", "build", "*.egg-info", "__pycache__", ".benchledger", ".mypy_cache", ".ruff_cache"
    )
    shutil.copytree(REPO, src, symlinks=True, ignore=junk)
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "-q",
         "-w", str(out / "dist"), str(src)],
        capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    [built] = list((out / "dist").glob("benchledger-*.whl"))
    return zipfile.ZipFile(built)


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
        "benchledger/testing/ledger.py",
    ],
    ids=[
        "namespace",
        "main",
        "ledger",
        "cli",
        "nested",
        "package-data",
        "protocol-data",
        "conformance",
    ],
)
def test_a_wheel_holds_every_linked_folder_as_plain_files(
    wheel: zipfile.ZipFile, member: str
) -> None:
    assert member in wheel.namelist()
    assert not wheel.getinfo(member).is_dir()


def test_the_console_script_and_the_pytest_plugin_point_into_the_namespace(
    wheel: zipfile.ZipFile,
) -> None:
    [points] = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(points).decode()
    assert "benchledger = benchledger.cli:main" in text
    assert "benchledger = benchledger.replay.pytest_plugin" in text
    assert Path(REPO, "benchledger", "ledger").is_symlink()
