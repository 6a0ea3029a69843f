"""``--platform mem0``: how it is named, its options, its provisioner, its replay twin.

Light on purpose (no MCP stack, no adapter): a ``--platform`` is parsed, and a bad one
refused, before any server's code loads. The adapter is ``mem0.py``; docs/mem0.md.
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Mapping
from typing import ClassVar, Final

from benchledger.harness.platforms.platform import (
    Platform,
    PlatformOption,
    PlatformSpec,
    Provision,
    Provisioner,
)
from benchledger.harness.platforms.servers import EXACT_VERSION

PACKAGE: Final = "mem0ai"
VERSION: Final = "2.2.1"  # the release `--platform mem0` runs
PYPI: Final = "pypi:mem0ai=="  # how an installed platform is recorded
CMD: Final = "mem0-cmd:"  # how a --mem0-cmd platform is recorded
KIND: Final = "mem0"


def mem0_url(text: str) -> str:
    """The platform url (``pypi:mem0ai==VERSION`` or ``mem0-cmd:CMD``) that ``mem0[@VERSION]``
    or a recorded form names; "" when it is not mem0."""
    if text == "mem0" or text.startswith(("mem0@", PYPI)):
        version = text.rpartition("@")[2] if "@" in text else text.removeprefix(PYPI)
        version = VERSION if version in ("mem0", "") else version
        if not EXACT_VERSION.match(version):
            raise ValueError(f"--platform {text!r}: pin an exact version, e.g. mem0@{VERSION}")
        return PYPI + version
    if text.startswith(CMD):
        try:
            argv = shlex.split(text.removeprefix(CMD))
        except ValueError as exc:
            raise ValueError(f"--mem0-cmd: {exc}") from None
        if not argv or any("<redacted>" in a for a in argv):
            raise ValueError("--mem0-cmd: give the command that serves mem0 (a recorded "
                             "command with redacted secrets must be given again)")  # fmt: skip
        return text
    return ""


class Mem0Platform(Platform):
    """mem0 behind benchledger's MCP server over stdio; each runtime a fresh folder."""

    name = "mem0"
    summary = "PyPI mem0ai, offline, behind benchledger's MCP server over stdio (pip-installed on first use)"  # noqa: E501
    kinds = (KIND,)
    replay = "benchledger.replay.log_mem0:LogMem0"
    options: ClassVar[tuple[PlatformOption, ...]] = (
        PlatformOption(
            "--mem0-cmd",
            "mem0: the command that serves mem0 over stdio (the harness adds --folder F), "
            "instead of the pip install",
            "CMD",
            purpose="serves mem0 with the given command",
        ),
        PlatformOption(
            "--mem0-python",
            "mem0: the Python to make mem0's virtual environment with (default: this one)",
            "PATH",
            purpose="names the Python mem0 is installed with",
        ),
        PlatformOption(
            "--mem0-dir",
            "mem0: where mem0's virtual environments are kept (default: .benchledger/mem0)",
            "PATH",
            purpose="names where mem0 is installed",
        ),
    )

    def parse(self, text: str) -> PlatformSpec | None:
        url = mem0_url(text)
        return PlatformSpec(KIND, url) if url else None

    def settle(self, spec: PlatformSpec, options: Mapping[str, str]) -> PlatformSpec:
        cmd = options.get("mem0_cmd", "")
        if not cmd:
            return spec
        if spec.url != PYPI + VERSION:
            raise ValueError("--mem0-cmd serves mem0 with the given command: use it with "
                             "--platform mem0 (no @VERSION: the command decides it)")  # fmt: skip
        return PlatformSpec(KIND, mem0_url(CMD + cmd))

    def provisioner(self, spec: PlatformSpec, provision: Provision) -> Provisioner:
        from benchledger.harness.platforms.mem0 import Mem0Provisioner

        # Beside basic-memory's installs unless told: .benchledger/mem0 by default.
        home = os.path.dirname(provision.settings.basic_memory_dir) or "."
        root = provision.options.get("mem0_dir", "") or os.path.join(home, "mem0")
        return Mem0Provisioner(spec, pool_size=provision.pool_size, root=root,
                               python=provision.options.get("mem0_python", ""))  # fmt: skip


MEM0: Final = Mem0Platform()
