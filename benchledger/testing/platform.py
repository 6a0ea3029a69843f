"""The platform contract, as pytest tests a platform's author subclasses.

A vendor adding a platform (docs/plugins.md) checks their adapter against the core
contract every suite relies on, the way eventsourcing ships ``RecorderTestCase``::

    from benchledger.testing.platform import PlatformTestCase

    class TestMyPlatform(PlatformTestCase):
        platform = "my-platform"            # what ``--platform`` names it by
        lifecycle = False                    # it offers no LifecycleCapability

Each test provisions the platform as a run would (through the registry: its ``parse``,
``settle`` and ``provisioner``) and checks one part of the contract on one runtime the
class opens on first use and closes when its last test is done (a runtime is a real
server or process: starting one per test was most of a contract's time):
it describes itself, every pool index has its own identity, a session lists tools and
calls one (each call observed as the ``session_call`` event it becomes), the client
closes, the capabilities it has are the ones it claims, its run record names it again
for a resume, and full replay can serve it from a log or says why not.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import threading
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Mapping
from typing import Any, ClassVar, TypeVar

import pytest

from benchledger.harness.platforms.base import (
    STAGES,
    CallResult,
    Description,
    LifecycleCapability,
    PlatformClient,
    RefCapability,
)
from benchledger.harness.platforms.platform import (
    Platform,
    PlatformSpec,
    Provision,
    Provisioner,
    of_record,
    resolve,
)
from benchledger.harness.settings import Settings
from benchledger.ledger.events import SessionCallBody

__all__ = ["PlatformTestCase"]

T = TypeVar("T")


class _Observed:
    """An observer keeping every session call it is handed (as the runner records them)."""

    episode = "contract"

    def __init__(self) -> None:
        self.calls: list[SessionCallBody] = []

    def session_call(self, body: SessionCallBody) -> None:
        self.calls.append(body)


class _SharedRuntime:
    """One runtime held open by a task of its own on an event loop in a thread, as a run
    holds it while its units come and go; each test's use of the client is one more task
    on that loop."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._stop: asyncio.Event | None = None
        self._held: concurrent.futures.Future[None] | None = None
        self._client: PlatformClient | None = None

    def use(
        self, open_: Callable[[], Provisioner], use: Callable[[PlatformClient], Awaitable[T]]
    ) -> T:
        if self._client is None:
            self._open(open_)
        assert self._client is not None
        return self._submit(_awaited(use(self._client)))

    def _open(self, open_: Callable[[], Provisioner]) -> None:
        loop = self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=loop.run_forever, name="contract-runtime", daemon=True
        )
        self._thread.start()
        opened: concurrent.futures.Future[PlatformClient] = concurrent.futures.Future()

        async def hold() -> None:
            self._stop = asyncio.Event()
            try:
                async with open_().runtime() as client:
                    opened.set_result(client)
                    await self._stop.wait()
            except BaseException as exc:
                if not opened.done():  # the runtime never opened: the test using it says why
                    opened.set_exception(exc)
                    return
                raise

        self._held = asyncio.run_coroutine_threadsafe(hold(), loop)
        try:
            self._client = opened.result()
        except BaseException:
            self.close()
            raise

    def _submit(self, coro: Coroutine[Any, Any, T]) -> T:
        assert self._loop is not None
        return asyncio.run_coroutine_threadsafe(coro, self._loop).result()

    def close(self) -> None:
        """Close the runtime (its errors are the last test's to report) and the loop."""
        loop, self._client = self._loop, None
        if loop is None:
            return
        try:
            if self._stop is not None:
                loop.call_soon_threadsafe(self._stop.set)
            if self._held is not None:
                self._held.result()
        finally:
            loop.call_soon_threadsafe(loop.stop)
            assert self._thread is not None
            self._thread.join()
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()
            self._loop = None


async def _awaited(value: Awaitable[T]) -> T:
    return await value


class PlatformTestCase:
    """The core platform contract; subclass it and set ``platform`` (see the module doc).

    ``options``: the platform's own options by name (``{"server_memory_cmd": ...}``);
    ``pool_size``: the identities provisioned; ``call``: the tool (and arguments) a
    session calls, default the first one listed, with no arguments (an error result is
    fine: the call and its recording are checked, not the platform's answer);
    ``lifecycle`` / ``refs``: whether the client offers ``LifecycleCapability`` /
    ``RefCapability`` (None: not checked); ``settings``: what the command line would pass.
    """

    platform: ClassVar[str] = ""
    options: ClassVar[Mapping[str, str]] = {}
    pool_size: ClassVar[int] = 3
    call: ClassVar[tuple[str, dict[str, Any]] | None] = None
    lifecycle: ClassVar[bool | None] = None
    refs: ClassVar[bool | None] = None

    def settings(self) -> Settings:
        """The settings the platform is provisioned with (override to point at an install)."""
        return Settings()

    # -- how each test reaches the platform ---------------------------------------------

    def resolved(self) -> tuple[Platform, PlatformSpec]:
        """The registered platform ``platform`` names, and its settled spec."""
        assert self.platform, f"{type(self).__name__}: set `platform` to what --platform names"
        found, spec = resolve(self.platform)
        return found, found.settle(spec, self.options)

    def provisioner(self) -> Provisioner:
        """The provisioner a run would use."""
        found, spec = self.resolved()
        provision = Provision(self.pool_size, dict(self.options), settings=self.settings())
        return found.provisioner(spec, provision)

    _runtime: ClassVar[_SharedRuntime | None] = None

    @pytest.fixture(scope="class", autouse=True)
    def _one_runtime_per_class(self, request: pytest.FixtureRequest) -> Iterator[None]:
        # Opened on first use, after the test's own fixtures have set the class up.
        shared = request.cls._runtime = _SharedRuntime()
        try:
            yield
        finally:
            request.cls._runtime = None
            shared.close()

    def with_client(self, use: Callable[[PlatformClient], Awaitable[T]]) -> T:
        """``use(client)`` on the class's runtime of the platform (opened on first use)."""
        shared = type(self)._runtime
        if shared is None:  # outside pytest's class fixture: a runtime of its own
            return self.with_fresh_client(use)
        return shared.use(self.provisioner, use)

    def with_fresh_client(self, use: Callable[[PlatformClient], Awaitable[T]]) -> T:
        """``use(client)`` on one fresh runtime of the platform, closed afterwards."""

        async def go() -> T:
            async with self.provisioner().runtime() as client:
                return await use(client)

        return asyncio.run(go())

    # -- the contract ---------------------------------------------------------------------

    def test_the_platform_is_registered_and_names_itself_by_its_spec(self) -> None:
        found, spec = self.resolved()
        assert found.name
        assert spec.kind in found.record_kinds(), (spec.kind, found.record_kinds())

    def test_it_describes_itself_with_a_name_and_the_stages_it_supports(self) -> None:
        described = self.with_client(lambda client: client.describe())
        assert isinstance(described, Description)
        assert described.name and isinstance(described.version, str)
        assert set(described.stages) <= set(STAGES), described.stages

    def test_every_pool_index_has_an_identity_of_its_own(self) -> None:
        async def emails(client: PlatformClient) -> list[str]:
            return [client.email(i) for i in range(1, self.pool_size + 1)]

        found = self.with_client(emails)
        assert all(found) and len(set(found)) == len(found), found

    def test_a_session_lists_its_tools_and_calls_one_each_call_observed(self) -> None:
        observer = _Observed()

        async def session(client: PlatformClient) -> tuple[list[dict[str, Any]], CallResult]:
            async with client.session(1, observer) as s:
                tools = await s.list_tools()
                name, args = self.call or (str(tools[0]["name"]) if tools else "", {})
                return tools, await s.call_tool(name, args)

        tools, result = self.with_client(session)
        assert tools, "a session lists no tools"
        assert all({"name", "description", "input_schema"} <= set(t) for t in tools), tools[0]
        assert isinstance(result, CallResult) and isinstance(result.text, str)
        methods = [c.method for c in observer.calls]
        assert "tools/list" in methods and "tools/call" in methods, methods
        assert all(c.episode == observer.episode for c in observer.calls)

    def test_the_client_closes(self) -> None:
        async def close(client: PlatformClient) -> bool:
            await client.aclose()
            return True

        assert self.with_fresh_client(close)  # not the class's: later tests still use it

    def test_it_has_the_capabilities_it_claims(self) -> None:
        async def has(client: PlatformClient) -> tuple[bool, bool]:
            return isinstance(client, LifecycleCapability), isinstance(client, RefCapability)

        lifecycle, refs = self.with_client(has)
        if self.lifecycle is not None:
            assert lifecycle == self.lifecycle, "LifecycleCapability"
        if self.refs is not None:
            assert refs == self.refs, "RefCapability"

    def test_its_run_record_names_the_same_platform_again_for_a_resume(self) -> None:
        prov = self.provisioner()
        found, _ = self.resolved()
        record = prov.record(Description("contract", "0"))
        assert of_record(record.kind).name == found.name
        label = PlatformSpec(record.kind, record.url).label  # what a resume names it by
        assert resolve(label)[0].name == found.name, label

    def test_full_replay_can_serve_it_from_a_log_or_says_why_not(self) -> None:
        found, _ = self.resolved()
        if not found.replay:
            assert found.not_replayable, "say why the platform cannot be replayed from a log"
            return
        module, _, name = found.replay.partition(":")
        assert callable(getattr(importlib.import_module(module), name)), found.replay
