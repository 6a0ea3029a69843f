"""``--platform mem0``: how it is named, its options, its provisioner, its replay twin.

Light on purpose (no MCP stack, no adapter): a ``--platform`` is parsed, and a bad one
refused, before any server's code loads. The adapter is ``mem0.py``; docs/mem0.md.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import ClassVar, Final

from benchledger.harness.platforms.platform import (
    Platform,
    PlatformOption,
    PlatformSpec,
    Provision,
    Provisioner,
)
from benchledger.harness.platforms.servers import (
    MEM0_CMD,
    MEM0_PACKAGE,
    MEM0_PYPI,
    MEM0_VERSION,
    mem0_url,
)

PACKAGE: Final = MEM0_PACKAGE  # named once, in harness.platforms.servers
VERSION: Final = MEM0_VERSION
PYPI: Final = MEM0_PYPI
CMD: Final = MEM0_CMD
KIND: Final = "mem0"


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
            "--mem0-llm",
            "mem0: run mem0's own fact extraction (infer=True) with this model, named as "
            "--agent names one (anthropic:MODEL, openai:MODEL@BASE_URL); its calls are "
            "recorded (default: none, every memory stored as given)",
            "SPEC",
            purpose="runs mem0's fact extraction with a model",
            recorded=True,
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
                               python=provision.options.get("mem0_python", ""),
                               llm=provision.options.get("mem0_llm", ""),
                               settings=provision.settings)  # fmt: skip


MEM0: Final = Mem0Platform()
