"""A pinned virtual environment a platform's server runs from, built on first use.

basic-memory, mem0 and a mapped MCP server installed from PyPI (docs/platforms.md) each
run from their own venv under the platforms' folder, one per pinned version. A lock file
serialises installs between processes; a marker written last says the install finished,
so one killed half-way (no marker) is removed and built again. A venv cannot be moved, so
it is built in place.
"""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

from benchledger.harness.errors import PlatformStartFailed

PIP_TIMEOUT_S: Final = 900.0
INSTALLED: Final = ".benchledger-installed"  # written last: an interrupted install is redone


class PinnedVenv(NamedTuple):
    """Where a venv lives, what it holds and what a caller runs from it."""

    home: str  # the venv's folder
    marker: str  # what the finished marker says: the pinned version or requirement
    requirements: Sequence[str]  # what pip installs into it
    entry: str  # what the caller runs, relative to ``home`` ("bin/python")
    what: str  # how messages name it ("mem0ai==2.2.1")
    first_use: str = "first use"  # said while installing: how long, how large
    remedy: str = ""  # said after a failure: what to do (", or give --mem0-python")

    @property
    def path(self) -> str:
        return os.path.join(self.home, self.entry)


def install_step(
    cmd: Sequence[str],
    timeout_s: float,
    *,
    slow: str,
    failed: Callable[[subprocess.CompletedProcess[str]], str],
) -> None:
    """Run one install step (pip, venv, npm): PlatformStartFailed saying ``slow`` when it
    runs past ``timeout_s``, or ``failed(done)`` when it exits non-zero. Each installer
    (this one, a mapping's npm package, server-memory's) words its own messages."""
    try:
        done = subprocess.run(list(cmd), capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        raise PlatformStartFailed(slow) from None
    if done.returncode != 0:
        raise PlatformStartFailed(failed(done))


def output_tail(done: subprocess.CompletedProcess[str]) -> str:
    """The last 300 characters of what a failed step printed, on one line."""
    return " ".join((done.stderr or done.stdout).split())[-300:]


def installed(venv: PinnedVenv) -> str:
    """The venv's entry when ``venv.home`` holds a finished install of ``venv.marker``."""
    try:
        with open(os.path.join(venv.home, INSTALLED), encoding="utf-8") as f:
            done = f.read().strip() == venv.marker
    except OSError:
        return ""
    return venv.path if done and os.access(venv.path, os.X_OK) else ""


def ensure(
    venv: PinnedVenv,
    interpreter: Callable[[], str],
    check: Callable[[str], None] = lambda entry: None,
) -> str:
    """The venv's entry, installing the venv first when it is not there (``interpreter``:
    the Python to build it with, asked only then; ``check``: raises when what was installed
    is not what was pinned). PlatformStartFailed, saying what to do, when pip fails."""
    found = installed(venv)
    if found:
        return found
    os.makedirs(os.path.dirname(venv.home), exist_ok=True)
    with open(venv.home + ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        found = installed(venv)  # another run may have installed it meanwhile
        if found:
            return found
        python = interpreter()
        shutil.rmtree(venv.home, ignore_errors=True)
        # Minutes of silence would look like a hang: say what is happening, once.
        print(f"installing {venv.what} with {python} into {venv.home} ({venv.first_use})",
              file=sys.stderr, flush=True)  # fmt: skip
        began = time.monotonic()
        steps = [
            [python, "-m", "venv", venv.home],
            [os.path.join(venv.home, "bin", "python"), "-m", "pip", "install", "--quiet",
             "--disable-pip-version-check", *venv.requirements],
        ]  # fmt: skip
        slow = (f"installing {venv.what} took over {PIP_TIMEOUT_S:g}s: check the package "
                f"index is reachable (pip config list){venv.remedy}")  # fmt: skip
        for cmd in steps:

            def failed(done: subprocess.CompletedProcess[str], cmd: list[str] = cmd) -> str:
                return (f"{' '.join(cmd[-3:])} exited {done.returncode} "
                        f"({output_tail(done)!r}): fix the install{venv.remedy}")  # fmt: skip

            install_step(cmd, PIP_TIMEOUT_S, slow=slow, failed=failed)
        if not os.access(venv.path, os.X_OK):
            raise PlatformStartFailed(f"{venv.what} installed no {venv.entry}{venv.remedy}")
        check(venv.path)
        with open(os.path.join(venv.home, INSTALLED), "w", encoding="utf-8") as f:
            f.write(venv.marker)
        print(f"installed {venv.what} in {time.monotonic() - began:.0f} s",
              file=sys.stderr, flush=True)  # fmt: skip
    return venv.path


__all__ = ["INSTALLED", "PIP_TIMEOUT_S", "PinnedVenv", "ensure", "installed"]
