"""benchledger's own platforms pass the platform contract a vendor runs on theirs.

``benchledger.testing.platform.PlatformTestCase`` is the contract (docs/plugins.md); each
class here names one built-in platform. server-memory and basic-memory run their real
servers (server-memory from the session's install, conftest's ``npm_dir``; basic-memory
installed on first use as its own tests do), and are skipped, saying why, where the
installer's runtime (Node.js with npm; a Python >= 3.12) is missing.
"""

from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any, ClassVar

import pytest

from benchledger.harness.errors import PlatformStartFailed
from benchledger.harness.platforms.base import CaptureCheck, UpdateCheck
from benchledger.harness.platforms.basic_memory_server import find_python
from benchledger.harness.platforms.builtin import Embedded
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform
from benchledger.harness.platforms.platform import PLATFORMS, PlatformSpec
from benchledger.harness.platforms.vocabulary import REFPLATFORM
from benchledger.harness.settings import Settings
from benchledger.ledger.events import HitRule
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

    @pytest.fixture(autouse=True, scope="class")
    def _node(self, npm_dir: str) -> None:
        # The session's install (conftest's npm_dir, skipped without Node.js), not one more.
        type(self)._npm_dir = npm_dir

    _npm_dir: ClassVar[str] = ""

    def settings(self) -> Settings:
        return dataclasses.replace(Settings(), npm_dir=self._npm_dir)


@pytest.mark.slow
class TestBasicMemory(PlatformTestCase):
    platform = "basic-memory"
    lifecycle = True
    refs = True

    @pytest.fixture(autouse=True, scope="class")  # finding it runs interpreters: once
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


# -- each bug of a broken adapter fails a named test of the contract ------------------------
#
# The embedded platform's adapter with one bug seeded at a time, as a vendor's first try had
# them (issue 49): a bool for the capture's id, statuses as a list, an UpdateCheck of the
# wrong arity, answers whose shape the declared vocabulary does not match.


class _BoolFound(McpDataPlatform):
    async def check_capture(self, ev: Any, **kw: Any) -> CaptureCheck:
        got = await super().check_capture(ev, **kw)
        return got._replace(found=got.found is not None)  # type: ignore[arg-type]


class _Listing:
    """A recorder handing on every read; an ``update`` read is recorded with its statuses
    as a list (the adapter itself goes on with what it read)."""

    def __init__(self, ev: Any) -> None:
        self._ev = ev
        self.clock = ev.clock

    async def read(self, purpose: str, action: Any, observe: Any) -> Any:
        kept: list[Any] = []

        def listed(rb: Any) -> Any:
            kept.append(seen := observe(rb))
            if purpose == "update" and isinstance(seen, dict) and "statuses" in seen:
                return {**seen, "statuses": list(seen["statuses"].values())}
            return seen

        _, seq = await self._ev.read(purpose, action, listed)
        return kept[-1], seq

    def __getattr__(self, name: str) -> Any:
        return getattr(self._ev, name)


class _ListStatuses(McpDataPlatform):
    async def check_update(self, ev: Any, **kw: Any) -> UpdateCheck:
        return await super().check_update(_Listing(ev), **kw)


class _WrongArity(McpDataPlatform):
    async def check_update(self, ev: Any, **kw: Any) -> UpdateCheck:
        got = await super().check_update(ev, **kw)
        return UpdateCheck(*got, "superseded")  # type: ignore[call-arg]


class _ListAnswers(McpDataPlatform):
    # Says its hits are a top-level list; its search answers {"groups": [...]}.
    vocabulary = REFPLATFORM._replace(hits=HitRule(path="$", id_field="ref"))


@pytest.fixture
def seeded() -> Iterator[Callable[[type], type[PlatformTestCase]]]:
    """A contract class on the embedded platform whose client is of the given class."""
    names: list[str] = []

    def make(client: type) -> type[PlatformTestCase]:
        name = f"embedded-{client.__name__.strip('_').lower()}"

        class Seeded(Embedded):
            kinds = (name,)

            def parse(self, text: str) -> PlatformSpec | None:
                return PlatformSpec(name) if text == name else None

            def provisioner(self, spec: PlatformSpec, provision: Any) -> Any:
                prov = super().provisioner(PlatformSpec("embedded"), provision)
                made = prov.runtime

                @asynccontextmanager
                async def runtime() -> AsyncIterator[Any]:
                    async with made() as real:
                        real.__class__ = client  # the same adapter, with the bug seeded
                        yield real

                prov.runtime = runtime  # type: ignore[method-assign]
                return prov

        PLATFORMS.add(name, Seeded(), origin="test")
        names.append(name)
        return type(
            f"Test{client.__name__}", (PlatformTestCase,), {"platform": name, "lifecycle": True}
        )

    yield make
    for name in names:
        PLATFORMS.unregister(name)


@pytest.mark.parametrize(
    ("bug", "test", "says"),
    [
        (_BoolFound, "test_the_capture_check_returns_the_id_of_the_capture", "not an id"),
        (_ListStatuses, "test_an_update_check_of_a_real_correction_has_the_documented_shape",
         "statuses: ["),
        (_WrongArity, "test_an_update_check_of_a_real_correction_has_the_documented_shape",
         "positional arguments"),
        (_ListAnswers, "test_a_memory_written_is_found_by_search_at_a_rank",
         "none holds the memory"),
    ],
    ids=["bool-found", "list-statuses", "update-check-arity", "answer-shape"],
)  # fmt: skip
def test_each_seeded_bug_fails_a_named_conformance_test(seeded, bug, test, says):
    case = seeded(bug)()
    with pytest.raises((AssertionError, TypeError), match=re.escape(says)):
        getattr(case, test)()
    clean = seeded(McpDataPlatform)()
    getattr(clean, test)()  # the same test passes on the adapter without the bug


# -- one runtime per class -------------------------------------------------------------------


class _Counted(McpDataPlatform):
    """The embedded adapter keeping every client a test used, and every one closed."""

    used: ClassVar[list[Any]] = []
    closed: ClassVar[list[Any]] = []

    def _use(self) -> None:
        if not any(c is self for c in _Counted.used):
            _Counted.used.append(self)

    async def describe(self) -> Any:
        self._use()
        return await super().describe()

    def email(self, index: int) -> str:
        self._use()
        return super().email(index)

    def session(self, *args: Any, **kw: Any) -> Any:
        self._use()
        return super().session(*args, **kw)

    async def aclose(self) -> None:
        self._use()
        if not any(c is self for c in _Counted.closed):
            _Counted.closed.append(self)
        await super().aclose()


def test_a_contract_class_shares_one_runtime_between_its_tests_and_closes_it(seeded):
    # As pytest runs a class: setup_class, each test on an instance, teardown_class. The
    # close test closes a client, so it gets one of its own; every other test shares one.
    _Counted.used.clear()
    _Counted.closed.clear()
    cls = seeded(_Counted)
    cls.setup_class()
    try:
        for name in sorted(n for n in dir(cls) if n.startswith("test_")):
            getattr(cls(), name)()
        assert len(_Counted.used) == 2, len(_Counted.used)
    finally:
        cls.teardown_class()
    assert all(any(c is u for c in _Counted.closed) for u in _Counted.used), "left open"
