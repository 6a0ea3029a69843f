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

    @pytest.fixture(autouse=True, scope="class")  # once: it runs each candidate interpreter
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


# -- the contract's own cost: one runtime per class ------------------------------------------

COUNTED = '''
from benchledger.testing.platform import PlatformTestCase

OPENED = []


class _Counting:
    """The provisioner a run would use, counting the runtimes opened through it."""

    def __init__(self, inner):
        self.inner = inner

    def runtime(self):
        OPENED.append(1)
        return self.inner.runtime()

    def __getattr__(self, name):
        return getattr(self.inner, name)


class TestCounted(PlatformTestCase):
    platform = "embedded"
    lifecycle = True
    refs = True

    def provisioner(self):
        return _Counting(super().provisioner())


def teardown_module():
    with open(COUNT_FILE, "w") as fh:
        fh.write(str(len(OPENED)))
'''


def test_a_contract_class_opens_one_runtime_for_its_tests_and_one_for_the_close(
    pytester: pytest.Pytester,
) -> None:
    """A runtime is a real server or process: per test it was most of a contract's time.
    (before: the embedded platform's contract opened five, one per test that uses a client)"""
    count = pytester.path / "opened.txt"
    pytester.makepyfile(test_counted=f"COUNT_FILE = {str(count)!r}\n" + COUNTED)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-q", "test_counted.py")
    result.assert_outcomes(passed=8)
    assert count.read_text() == "2"  # the class's own, and the one the close test closes
