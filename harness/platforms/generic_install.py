"""A mapped server's first-use install: a Python that fits, a virtual environment, pip.

A mapping with ``[install]`` (harness/platforms/mcp_mapping.py) names one pinned PyPI
package and what the Python it runs on must offer (``install.python``: ``>=3.N``,
``sqlite-extensions`` for a server that loads SQLite extensions such as sqlite-vec).
The first run installs it into ``<dir>/<NAME>-<VERSION>`` (``<dir>``: ``.benchledger/mcp``,
or ``$BENCHLEDGER_MCP_DIR``) with the first Python that fits: ``--mcp-python``, else
``python3.1N`` and ``python3`` on PATH, ``/usr/bin/python3``, ``~/.pyenv/versions/*``;
each is run and checked, since a pyenv shim may fail and a pyenv build may lack
loadable SQLite extensions. None fitting is a one-line refusal naming what is missing.
"""

from __future__ import annotations

import fcntl
import glob
import json
import os
import shutil
import subprocess
import sys
import time
from typing import Final

from benchledger.harness.errors import PlatformStartFailed
from benchledger.harness.platforms.mcp_mapping import McpMapping

PIP_TIMEOUT_S: Final = 900.0
INSTALLED: Final = ".benchledger-installed"  # written last: an interrupted install is redone
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


def _installed(home: str, pip: str, command: str) -> str:
    exe = os.path.join(home, "bin", command)
    try:
        with open(os.path.join(home, INSTALLED), encoding="utf-8") as f:
            done = f.read().strip() == pip
    except OSError:
        return ""
    return exe if done and os.access(exe, os.X_OK) else ""


def install(mapping: McpMapping, root: str, python: str = "") -> str:
    """The mapping's command in its installed environment, installing it on first use.

    A lock file serialises installs; one that did not finish (no marker) is redone. A
    virtual environment cannot be moved, so it is built in place.
    """
    package, _, version = mapping.pip.partition("==")
    home = os.path.join(os.path.abspath(root), f"{package}-{version}")
    found = _installed(home, mapping.pip, mapping.command)
    if found:
        return found
    os.makedirs(os.path.dirname(home), exist_ok=True)
    with open(home + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = _installed(home, mapping.pip, mapping.command)
        if found:
            return found
        interpreter = find_python(mapping.python, python)
        shutil.rmtree(home, ignore_errors=True)
        print(f"installing {mapping.pip} with {interpreter} into {home} (first use)",
              file=sys.stderr, flush=True)  # fmt: skip
        began = time.monotonic()
        steps = [
            [interpreter, "-m", "venv", home],
            [os.path.join(home, "bin", "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", mapping.pip],
        ]  # fmt: skip
        for cmd in steps:
            try:
                done = subprocess.run(cmd, capture_output=True, text=True, timeout=PIP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise PlatformStartFailed(f"installing {mapping.pip} took over "
                                          f"{PIP_TIMEOUT_S:g}s: is the package index "
                                          "reachable (pip config list)?") from None  # fmt: skip
            if done.returncode != 0:
                said = " ".join((done.stderr or done.stdout).split())[-300:]
                raise PlatformStartFailed(f"{' '.join(cmd[-3:])} exited {done.returncode} "
                                          f"({said!r})")  # fmt: skip
        exe = os.path.join(home, "bin", mapping.command)
        if not os.access(exe, os.X_OK):
            raise PlatformStartFailed(f"{mapping.pip} installed no command {mapping.command!r} "
                                      f"(server.command in {mapping.path})")  # fmt: skip
        with open(os.path.join(home, INSTALLED), "w", encoding="utf-8") as f:
            f.write(mapping.pip)
        print(f"installed {mapping.pip} in {time.monotonic() - began:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    return exe


def command(mapping: McpMapping, root: str, python: str = "") -> str:
    """The server's command: installed (``[install]``), else as the mapping names it."""
    if mapping.pip:
        return install(mapping, root, python)
    if os.sep in mapping.command:
        return os.path.abspath(mapping.command)
    found = shutil.which(mapping.command)
    if found is None:
        raise PlatformStartFailed(f"{mapping.path}: server.command {mapping.command!r} is not "
                                  "on PATH")  # fmt: skip
    return found
