"""basic-memory's startup: a Python >= 3.12, its own virtual environment, an HTTP server.

``--platform basic-memory[@VERSION]`` installs PyPI ``basic-memory==VERSION`` on first use
into ``<dir>/basic-memory-VERSION`` (a virtual environment made with the first Python >=
3.12 found: ``--basic-memory-python``, else ``python3.13``, ``python3.12``, ``python3`` on
PATH, else ``~/.pyenv/versions/*/bin/python3.1N``; each candidate is run, since a pyenv
shim on PATH may fail for a version that is not activated). ``--basic-memory-cmd CMD`` runs
a server the user installed. Every runtime gets a fresh folder holding every write of the
server (HOME, its config and database, each project's Markdown files) and one
streamable-HTTP server on a loopback port, started with the offline settings
(docs/basic-memory.md): a stdio process per session would take 15-18 s to start.
"""

from __future__ import annotations

import asyncio
import contextlib
import glob
import os
import re
import shlex
import shutil
import signal
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Final

from mcp.client.stdio import get_default_environment

from benchledger.harness.errors import PlatformStartFailed
from benchledger.harness.platforms.basic_memory import PACKAGE
from benchledger.harness.platforms.pinned_venv import PinnedVenv, ensure
from benchledger.harness.platforms.servers import (
    BASIC_MEMORY_CMD,
    BASIC_MEMORY_PYPI,
    BASIC_MEMORY_VERSION,
)

VERSION: Final = BASIC_MEMORY_VERSION  # named once, in harness.platforms.servers
PYPI: Final = BASIC_MEMORY_PYPI
CMD: Final = BASIC_MEMORY_CMD
MIN_PYTHON: Final = (3, 12)
START_TIMEOUT_S: Final = 90.0
READY: Final = "Uvicorn running on"
# Offline and quiet: without text search every search tries to download an embedding
# model (41 s, then fails); the rest keep promotions, update checks and banners off.
OFFLINE_ENV: Final = {
    "BASIC_MEMORY_DEFAULT_SEARCH_TYPE": "text",
    "BASIC_MEMORY_NO_PROMOS": "1",
    "FASTMCP_CHECK_FOR_UPDATES": "off",
    "FASTMCP_SHOW_SERVER_BANNER": "false",
}
_VERSION_SAID = re.compile(r"(\d+\.\d+\.\d+\S*)")


def python_version(python: str) -> tuple[int, int] | None:
    """The (major, minor) ``python`` reports when run, None when it does not run."""
    try:
        done = subprocess.run([python, "-c", "import sys; print(*sys.version_info[:2])"],
                              capture_output=True, text=True, timeout=30)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    parts = done.stdout.split()
    if done.returncode != 0 or len(parts) != 2 or not all(p.isdigit() for p in parts):
        return None
    return int(parts[0]), int(parts[1])


def find_python(given: str = "", home: str = "") -> str:
    """The interpreter to install basic-memory with: ``given``, else the first candidate that
    runs and is >= 3.12; PlatformStartFailed saying what to do when there is none."""
    if given:
        found = python_version(given)
        if found is None or found < MIN_PYTHON:
            said = "does not run" if found is None else f"is Python {found[0]}.{found[1]}"
            raise PlatformStartFailed(f"--basic-memory-python {given} {said}: basic-memory "
                                      "needs Python >= 3.12")  # fmt: skip
        return given
    names = ["python3.13", "python3.12", "python3.14", "python3"]
    on_path = [p for p in (shutil.which(n) for n in names) if p]
    root = os.path.join(home or os.path.expanduser("~"), ".pyenv", "versions")
    pyenv = sorted(glob.glob(os.path.join(root, "*", "bin", "python3.1[2-9]")), reverse=True)
    for candidate in [*on_path, *pyenv]:
        found = python_version(candidate)
        if found is not None and found >= MIN_PYTHON:
            return candidate
    raise PlatformStartFailed(
        "--platform basic-memory needs Python >= 3.12, and none was found (PATH, "
        "~/.pyenv/versions): install one and give --basic-memory-python PATH, or give "
        "--basic-memory-cmd CMD"
    )


def install(version: str, root: str, python: str = "") -> str:
    """The ``basic-memory`` command of ``root/basic-memory-VERSION``, installed on first use
    (``harness.platforms.pinned_venv``), checked to say the pinned version."""
    home = os.path.join(os.path.abspath(root), f"basic-memory-{version}")
    venv = PinnedVenv(home, version, [f"{PACKAGE}=={version}"], os.path.join("bin", "basic-memory"),
                      f"{PACKAGE}=={version}", "first use: about 1-2 minutes, 650 MB",
                      " or give --basic-memory-cmd CMD")  # fmt: skip

    def says_version(exe: str) -> None:
        said = installed_version([exe])
        if said != version:
            raise PlatformStartFailed(f"{exe} --version says {said!r}, not {version}")

    return ensure(venv, lambda: find_python(python), says_version)


def installed_version(argv: list[str]) -> str:
    """What ``basic-memory --version`` says (``Basic Memory version: 0.24.1``), "" if nothing."""
    try:
        done = subprocess.run([*argv, "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    m = _VERSION_SAID.search(done.stdout)
    return m.group(1) if m and done.returncode == 0 else ""


def free_port() -> int:
    """A loopback port nobody listens on now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(folder: str) -> dict[str, str]:
    """The server's environment: every write in ``folder``, offline and quiet."""
    return {
        **get_default_environment(),  # the MCP SDK's safe few (PATH, ...), as for stdio
        "HOME": os.path.join(folder, "home"),
        "XDG_CONFIG_HOME": os.path.join(folder, "home", ".config"),
        "XDG_CACHE_HOME": os.path.join(folder, "home", ".cache"),
        "XDG_DATA_HOME": os.path.join(folder, "home", ".local", "share"),
        "BASIC_MEMORY_CONFIG_DIR": os.path.join(folder, "config"),
        "BASIC_MEMORY_HOME": os.path.join(folder, "main"),
        **OFFLINE_ENV,
    }


@asynccontextmanager
async def serve(argv: list[str], folder: str, *, project: str = "") -> AsyncIterator[str]:
    """Start ``argv mcp`` over streamable HTTP on a loopback port with its writes in
    ``folder``; yields its MCP URL once it listens, stops it on exit. ``project``: start
    it constrained to one project (``--project``), as the tests show it redirects."""
    port = free_port()
    cmd = [
        *argv,
        "mcp",
        "--transport",
        "streamable-http",
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--path",
        "/mcp",
        *(["--project", project] if project else []),
    ]
    for sub in ("home", "config", "main", "projects"):
        os.makedirs(os.path.join(folder, sub), exist_ok=True)
    try:
        proc = await asyncio.create_subprocess_exec(
            *cmd, env=server_env(folder), stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
    except OSError as exc:
        raise PlatformStartFailed(f"cannot start {shlex.join(argv)}: {exc}") from None
    log = open(os.path.join(folder, "server.log"), "w", encoding="utf-8")  # noqa: SIM115
    ready = asyncio.get_running_loop().create_future()
    said: list[str] = []

    async def drain() -> None:
        assert proc.stdout is not None
        while line := (await proc.stdout.readline()).decode("utf-8", "replace"):
            log.write(line)
            said.append(line.strip())
            if READY in line and not ready.done():
                ready.set_result(True)
        if not ready.done():
            ready.set_result(False)

    task = asyncio.create_task(drain())
    try:
        try:
            up = await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_S)
        except TimeoutError:
            up = False
        if not up:
            tail = " | ".join(s for s in said if s)[-300:]
            raise PlatformStartFailed(f"{shlex.join(argv)} mcp did not start: {tail!r}")
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        if proc.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                await asyncio.wait_for(proc.wait(), 15)
            except TimeoutError:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                await proc.wait()
        await task
        log.close()
