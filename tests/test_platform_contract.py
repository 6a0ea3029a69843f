"""benchledger's own platforms pass the platform contract a vendor runs on theirs.

``benchledger.testing.platform.PlatformTestCase`` is the contract (docs/plugins.md); each
class here names one built-in platform. server-memory and basic-memory run their real
servers (server-memory the session's install, conftest's ``npm_dir``; basic-memory installed
on first use as its own tests do), and are skipped, saying why, where
the installer's runtime (Node.js with npm; a Python >= 3.12) is missing.
"""

from __future__ import annotations

import dataclasses
import os
from typing import Any, ClassVar

import pytest

from benchledger.harness.errors import PlatformStartFailed
from benchledger.harness.platforms.basic_memory_server import find_python
from benchledger.harness.settings import Settings
from benchledger.testing.platform import PlatformTestCase


class TestEmbedded(PlatformTestCase):
    platform = "embedded"
    call: ClassVar[tuple[str, dict[str, Any]] | None] = ("search", {"intent": "orders"})
    lifecycle = True
    refs = True


class TestEmbeddedProcess(PlatformTestCase):
    platform = "embedded:process"
    lifecycle = True
    refs = True


# Each test starts the real server (a Node.js process; a Python server), so these are slow.
@pytest.mark.slow
class TestServerMemory(PlatformTestCase):
    platform = "server-memory"
    call: ClassVar[tuple[str, dict[str, Any]] | None] = ("read_graph", {})
    lifecycle = True
    refs = True

    @pytest.fixture(autouse=True)
    def _node(self, npm_dir: str) -> None:
        # the session's install (conftest), shared with test_server_memory's
        type(self)._npm_dir = npm_dir

    _npm_dir: ClassVar[str] = ""

    def settings(self) -> Settings:
        return dataclasses.replace(Settings(), npm_dir=self._npm_dir)


@pytest.mark.slow
class TestBasicMemory(PlatformTestCase):
    platform = "basic-memory"
    lifecycle = True
    refs = True

    @pytest.fixture(autouse=True)
    def _python(self) -> None:
        try:
            find_python()
        except PlatformStartFailed as exc:
            pytest.skip(f"basic-memory needs Python >= 3.12: {exc}")

    def settings(self) -> Settings:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        given = os.environ.get("BENCHLEDGER_BASIC_MEMORY_DIR")
        folder = given or os.path.join(cache, "benchledger", "basic-memory")
        return dataclasses.replace(Settings(), basic_memory_dir=folder)
