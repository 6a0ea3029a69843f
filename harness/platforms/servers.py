"""The third-party memory servers a run starts itself: how ``--platform`` and a run record
name them (package, pinned release, command forms). Light on purpose: a ``--platform`` is
parsed, and a bad one refused, before any server's code or the MCP stack loads."""

from __future__ import annotations

import re
import shlex
from typing import Final

# server-memory (npm)
SERVER_MEMORY_PACKAGE: Final = "@modelcontextprotocol/server-memory"
# The release `--platform server-memory` runs (npm 2026.8.31 reports 0.6.3).
SERVER_MEMORY_VERSION: Final = "2026.8.31"
SERVER_MEMORY_CMD: Final = "server-memory-cmd:"  # how a --server-memory-cmd platform is recorded

# basic-memory (PyPI)
BASIC_MEMORY_VERSION: Final = "0.24.1"  # the release `--platform basic-memory` runs
BASIC_MEMORY_PYPI: Final = "pypi:basic-memory=="  # how an installed platform is recorded
BASIC_MEMORY_CMD: Final = "basic-memory-cmd:"  # how a --basic-memory-cmd platform is recorded
EXACT_VERSION: Final = re.compile(r"^\d+\.\d+\.\d+$")


def basic_memory_url(text: str) -> str:
    """The platform url (``pypi:basic-memory==VERSION`` or ``basic-memory-cmd:CMD``) that
    ``basic-memory[@VERSION]`` or a recorded form names; "" when it is not basic-memory."""
    pypi, cmd = BASIC_MEMORY_PYPI, BASIC_MEMORY_CMD
    if text == "basic-memory" or text.startswith(("basic-memory@", pypi)):
        version = text.rpartition("@")[2] if "@" in text else text.removeprefix(pypi)
        version = BASIC_MEMORY_VERSION if version in ("basic-memory", "") else version
        if not EXACT_VERSION.match(version):
            raise ValueError(f"--platform {text!r}: pin an exact version, e.g. "
                             f"basic-memory@{BASIC_MEMORY_VERSION}")  # fmt: skip
        return pypi + version
    if text.startswith(cmd):
        try:
            argv = shlex.split(text.removeprefix(cmd))
        except ValueError as exc:
            raise ValueError(f"--basic-memory-cmd: {exc}") from None
        if not argv or any("<redacted>" in a for a in argv):
            raise ValueError("--basic-memory-cmd: give the basic-memory command (a recorded "
                             "command with redacted secrets must be given again)")  # fmt: skip
        return text
    return ""


# mem0 (PyPI mem0ai, behind benchledger's MCP server: docs/mem0.md)
MEM0_PACKAGE: Final = "mem0ai"
MEM0_VERSION: Final = "2.2.1"  # the release `--platform mem0` runs
MEM0_PYPI: Final = "pypi:mem0ai=="  # how an installed platform is recorded
MEM0_CMD: Final = "mem0-cmd:"  # how a --mem0-cmd platform is recorded


def mem0_url(text: str) -> str:
    """The platform url (``pypi:mem0ai==VERSION`` or ``mem0-cmd:CMD``) that ``mem0[@VERSION]``
    or a recorded form names; "" when it is not mem0."""
    if text == "mem0" or text.startswith(("mem0@", MEM0_PYPI)):
        version = text.rpartition("@")[2] if "@" in text else text.removeprefix(MEM0_PYPI)
        version = MEM0_VERSION if version in ("mem0", "") else version
        if not EXACT_VERSION.match(version):
            raise ValueError(f"--platform {text!r}: pin an exact version, e.g. mem0@{MEM0_VERSION}")
        return MEM0_PYPI + version
    if text.startswith(MEM0_CMD):
        try:
            argv = shlex.split(text.removeprefix(MEM0_CMD))
        except ValueError as exc:
            raise ValueError(f"--mem0-cmd: {exc}") from None
        if not argv or any("<redacted>" in a for a in argv):
            raise ValueError("--mem0-cmd: give the command that serves mem0 (a recorded "
                             "command with redacted secrets must be given again)")  # fmt: skip
        return text
    return ""
