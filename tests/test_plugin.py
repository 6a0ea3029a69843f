"""The example plugin of docs/plugins.md, built from the docs' text, works end to end.

Its ``pyproject.toml`` and module are taken from the marked code blocks, written into a
temporary package (the module where its ``# file:`` line says), and installed beside
benchledger (this tree) into a fresh virtual environment; there, ``benchledger platforms``
lists it with its distribution as origin, and ``benchledger run --platform tiny-memory``
runs the default lifecycle suite with the scripted agent to a sealed run that
``benchledger verify`` passes. The environment reuses the installed dependencies
(``--system-site-packages``); the builds run without isolation where ``wheel`` is
installed, else pip fetches setuptools and wheel from its configured index (a local one
on the CI machine), so nothing else is downloaded.
"""

from __future__ import annotations

import importlib.util
import os
import re
import site
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # builds the example plugin into a fresh virtual environment

REPO = Path(__file__).resolve().parent.parent
DOC = REPO / "docs" / "plugins.md"
BLOCK = re.compile(r"<!-- example-plugin:(?P<part>[a-z]+) -->\n```[a-z]*\n(?P<text>.*?)```", re.S)
FILE_LINE = re.compile(r"^# file: (?P<path>\S+)\n")


def example() -> dict[str, str]:
    """The docs' marked blocks, by part (``pyproject``, ``module``)."""
    return {m["part"]: m["text"] for m in BLOCK.finditer(DOC.read_text(encoding="utf-8"))}


def _run(argv: list[str], cwd: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def test_the_docs_show_a_whole_package_whose_module_says_where_it_goes():
    parts = example()
    assert set(parts) == {"pyproject", "module"}
    assert '[project.entry-points."benchledger.platforms"]' in parts["pyproject"]
    assert FILE_LINE.match(parts["module"]), parts["module"].splitlines()[0]


def test_the_example_plugin_installed_in_a_fresh_venv_is_listed_and_runs_to_a_verified_run(
    tmp_path: Path,
):
    parts = example()
    package = tmp_path / "plugin"
    package.mkdir()
    (package / "pyproject.toml").write_text(parts["pyproject"], encoding="utf-8")
    where = FILE_LINE.match(parts["module"])
    assert where is not None
    module = package / where["path"]
    module.parent.mkdir(parents=True, exist_ok=True)
    module.write_text(parts["module"], encoding="utf-8")

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    bin_dir = venv / "bin"
    # The dependencies are this interpreter's (itself a venv, perhaps, whose packages
    # --system-site-packages would not see): its site folders, by a .pth file.
    [site_dir] = venv.glob("lib/python*/site-packages")
    (site_dir / "parent.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    # No PYTHONPATH: what runs is what the environment installed, from an empty folder.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env["PATH"] = f"{bin_dir}{os.pathsep}{env.get('PATH', '')}"
    work = tmp_path / "work"
    work.mkdir()
    pip = [str(bin_dir / "python"), "-m", "pip", "install", "-q", "--no-deps"]
    if importlib.util.find_spec("wheel") is not None:
        pip.append("--no-build-isolation")  # setuptools and wheel are here: build with them
    for target in (["-e", str(REPO)], [str(package)]):
        done = _run([*pip, *target], work, env)
        assert done.returncode == 0, done.stderr[-2000:]

    cli = [str(bin_dir / "benchledger")]
    listed = _run([*cli, "platforms"], work, env)
    assert listed.returncode == 0, listed.stderr
    line = next(x for x in listed.stdout.splitlines() if x.startswith("tiny-memory "))
    assert "benchledger-tiny-memory 0.1.0" in line, listed.stdout
    builtin = next(x for x in listed.stdout.splitlines() if x.startswith("embedded "))
    assert "  benchledger  " in builtin

    ledger = str(tmp_path / "tiny.sqlite")
    ran = _run([*cli, "run", "--platform", "tiny-memory", "--limit", "3", "--ledger", ledger],
               work, env)  # fmt: skip
    sealed = re.search(r"run (\S+) sealed, root ([0-9a-f]{64})", ran.stdout)
    assert sealed is not None, ran.stdout[-2000:] + ran.stderr[-2000:]
    assert "n/a stages" in ran.stdout and "LifecycleCapability" in ran.stdout
    run_id, root = sealed.groups()
    verified = _run([*cli, "verify", run_id, "--root", root, "--ledger", ledger], work, env)
    assert verified.returncode == 0, verified.stdout + verified.stderr
