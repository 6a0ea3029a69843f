"""A mapped server's first-use install: pip into a virtual environment, or npm.

A mapping with ``[install]`` (harness/platforms/mcp_mapping.py) names one pinned PyPI
package and what the Python it runs on must offer (``install.python``: ``>=3.N``,
``sqlite-extensions`` for a server that loads SQLite extensions such as sqlite-vec).
The first run installs it into ``<dir>/<NAME>-<VERSION>`` (``<dir>``: ``.benchledger/mcp``,
or ``$BENCHLEDGER_MCP_DIR``) with the first Python that fits: ``--mcp-python``, else
``python3.1N`` and ``python3`` on PATH, ``/usr/bin/python3``, ``~/.pyenv/versions/*``;
each is run and checked, since a pyenv shim may fail and a pyenv build may lack
loadable SQLite extensions. None fitting is a one-line refusal naming what is missing.

A mapping with ``install.npm = "NAME@VERSION"`` is installed by npm into
``<dir>/npm/NAME-VERSION`` and its ``server.command`` found by name in that folder's
``node_modules/.bin``: the mapping (which the run records) names no path of this machine.
"""

from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys
import tempfile
from typing import Final

from benchledger.harness.errors import PlatformStartFailed
from benchledger.harness.platforms.mcp_mapping import McpMapping
from benchledger.harness.platforms.pinned_venv import PinnedVenv, ensure, install_step, output_tail

# Run by each candidate: its version, and whether it can load SQLite extensions.
_PROBE: Final = (
    "import json, sys\n"
    "ext = False\n"
    "try:\n"
    "    import sqlite3\n"
    "    c = sqlite3.connect(':memory:'); c.enable_load_extension(True); ext = True\n"
    "except Exception:\n"
    "    pass\n"
    "try:\n"
    "    import ensurepip, venv\n"
    "    envs = True\n"
    "except ImportError:\n"
    "    envs = False\n"
    "print(json.dumps({'version': list(sys.version_info[:2]), 'sqlite_extensions': ext,\n"
    "                  'venv': envs}))\n"
)


def probe(python: str) -> dict[str, object] | None:
    """What ``python`` offers (``version``, ``sqlite_extensions``), None when it does not run."""
    try:
        done = subprocess.run([python, "-c", _PROBE], capture_output=True, text=True, timeout=30)
        said = json.loads(done.stdout) if done.returncode == 0 else None
    except (OSError, subprocess.TimeoutExpired, ValueError):
        return None
    return said if isinstance(said, dict) else None


def lacks(offered: dict[str, object] | None, needs: tuple[str, ...]) -> str:
    """What a Python offering ``offered`` lacks of ``needs`` ("" when it fits)."""
    if offered is None:
        return "does not run"
    if offered.get("venv") is False:  # Debian splits venv's pip bootstrap into python3-venv
        return "cannot make virtual environments (no ensurepip)"
    said = offered.get("version")
    version = tuple(int(v) for v in said) if isinstance(said, list) else ()
    for need in needs:
        if need.startswith(">=3."):
            if version < (3, int(need.removeprefix(">=3."))):
                return f"is Python {'.'.join(map(str, version))}, not {need}"
        elif need == "sqlite-extensions" and not offered.get("sqlite_extensions"):
            return "cannot load SQLite extensions"
    return ""


def find_python(needs: tuple[str, ...], given: str = "", home: str = "") -> str:
    """The first Python fitting ``needs`` (``given`` alone when given); PlatformStartFailed
    naming what each candidate lacks when none fits."""
    if given:
        missing = lacks(probe(given), needs)
        if missing:
            raise PlatformStartFailed(f"--mcp-python {given} {missing} (the mapping needs "
                                      f"{', '.join(needs)})")  # fmt: skip
        return given
    names = [f"python3.{n}" for n in range(14, 9, -1)] + ["python3"]
    found = [p for p in (shutil.which(n) for n in names) if p] + ["/usr/bin/python3"]
    root = os.path.join(home or os.path.expanduser("~"), ".pyenv", "versions")
    found += sorted(glob.glob(os.path.join(root, "*", "bin", "python3")), reverse=True)
    tried: list[str] = []
    for candidate in dict.fromkeys(found):
        if not os.path.exists(candidate):
            continue
        missing = lacks(probe(candidate), needs)
        if not missing:
            return candidate
        tried.append(f"{candidate} {missing}")
    raise PlatformStartFailed(
        f"the mapping needs a Python with {', '.join(needs) or 'nothing more'} and none was "
        f"found ({'; '.join(tried)[:300] or 'no python3'}): install one (Debian: "
        "apt-get install python3-venv) and give --mcp-python PATH"
    )


def install(mapping: McpMapping, root: str, python: str = "") -> str:
    """The mapping's command in its installed environment, installing it on first use
    (``harness.platforms.pinned_venv``)."""
    package, _, version = mapping.pip.partition("==")
    home = os.path.join(os.path.abspath(root), f"{package}-{version}")
    remedy = f"; see {mapping.path} ([install], server.command)"
    venv = PinnedVenv(home, mapping.pip, [mapping.pip], os.path.join("bin", mapping.command),
                      mapping.pip, remedy=remedy)  # fmt: skip
    return ensure(venv, lambda: find_python(mapping.python, python))


NPM_TIMEOUT_S: Final = 600.0


def _npm_entry(home: str, command: str) -> str:
    """``command`` in an npm install folder's ``node_modules/.bin`` ("" when not there)."""
    found = os.path.join(home, "node_modules", ".bin", command)
    return found if os.access(found, os.X_OK) else ""


def install_npm(mapping: McpMapping, root: str) -> str:
    """The mapping's command from its npm package, installed into ``<root>/npm/NAME-VERSION``
    on first use (to a scratch folder renamed into place: an interrupted install is never
    taken for one). PlatformStartFailed, saying what to do, when npm cannot install it."""
    package, _, version = mapping.npm.rpartition("@")
    home = os.path.join(os.path.abspath(root), "npm", f"{package.replace('/', '+')}-{version}")
    found = _npm_entry(home, mapping.command)
    if found:
        return found
    remedy = f"; see {mapping.path} ([install], server.command)"
    npm = shutil.which("npm")
    if npm is None:
        raise PlatformStartFailed(f"install.npm needs npm, which is not on PATH: install "
                                  f"Node.js with npm{remedy}")  # fmt: skip
    os.makedirs(os.path.dirname(home), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=".npm-", dir=os.path.dirname(home))
    print(f"installing {mapping.npm} with npm into {home} (first use)", file=sys.stderr,
          flush=True)  # fmt: skip
    try:
        cmd = [npm, "install", "--prefix", scratch, "--no-audit", "--no-fund",
               "--loglevel=error", mapping.npm]  # fmt: skip
        install_step(cmd, NPM_TIMEOUT_S, slow=(
            f"npm install {mapping.npm} took over {NPM_TIMEOUT_S:g}s: "
            f"check the npm registry is reachable{remedy}"
        ), failed=lambda done: (f"npm install {mapping.npm} exited {done.returncode} "
                                f"({output_tail(done)!r}){remedy}"))  # fmt: skip
        if not _npm_entry(scratch, mapping.command):
            what = f"{mapping.command!r} (node_modules/.bin)"
            raise PlatformStartFailed(f"{mapping.npm} installed no command {what}{remedy}")
        try:
            os.rename(scratch, home)
        except OSError:
            if not _npm_entry(home, mapping.command):  # else another run installed it first
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _npm_entry(home, mapping.command)


def command(mapping: McpMapping, root: str, python: str = "") -> str:
    """The server's command: installed (``[install]``), else as the mapping names it."""
    if mapping.npm:
        return install_npm(mapping, root)
    if mapping.pip:
        return install(mapping, root, python)
    if os.sep in mapping.command:
        return os.path.abspath(mapping.command)
    found = shutil.which(mapping.command)
    if found is None:
        raise PlatformStartFailed(f"{mapping.path}: server.command {mapping.command!r} is not "
                                  "on PATH")  # fmt: skip
    return found
