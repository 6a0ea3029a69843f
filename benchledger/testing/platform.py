"""The platform contract, as pytest tests a platform's author subclasses.

A vendor adding a platform (docs/plugins.md) checks their adapter against the core
contract every suite relies on, the way eventsourcing ships ``RecorderTestCase``::

    from benchledger.testing.platform import PlatformTestCase

    class TestMyPlatform(PlatformTestCase):
        platform = "my-platform"            # what ``--platform`` names it by
        lifecycle = False                    # it offers no LifecycleCapability

Each test provisions the platform as a run would (through the registry: its ``parse``,
``settle`` and ``provisioner``), uses the runtime its class shares (one per class, as a
run's units share one; docs/plugins.md) and checks one part of the contract:
it describes itself, every pool index has its own identity, a session lists tools and
calls one (each call observed as the ``session_call`` event it becomes), the client
closes, the capabilities it has are the ones it claims, its run record names it again
for a resume, and full replay can serve it from a log or says why not.

Then what it does, not only what it has: a memory written in its declared vocabulary is
found by search at a rank (the probe, harness/probe.py); and, with
``LifecycleCapability``, after the scripted agent's teach the capture check returns the
capture's id (a string, the newest of the ``ids`` its read recorded), after a real
correction the update check has the documented shape (``UpdateCheck``: ``landed`` an id
or None, ``original_status`` a status or None; its read's ``statuses`` an id -> status
map), and a promotion to a sink it describes lands there (``Promotion.ok``; its ``sink``
read ``shows`` the fact). docs/plugins.md, "The lifecycle capabilities", has the types.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import importlib
import os
import tempfile
import threading
from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar, TypeVar

from benchledger import protocols
from benchledger.harness.agents.base import Episode
from benchledger.harness.agents.scripted import ScriptedAgent
from benchledger.harness.episode import COUNTED, run_episode
from benchledger.harness.platforms.base import (
    STAGES,
    CallResult,
    CaptureCheck,
    Description,
    LifecycleCapability,
    PlatformClient,
    PollPolicy,
    Promotion,
    ReadBack,
    RefCapability,
    UpdateCheck,
    target_of,
)
from benchledger.harness.platforms.platform import (
    Platform,
    PlatformSpec,
    Provision,
    Provisioner,
    of_record,
    resolve,
)
from benchledger.harness.probe import probe
from benchledger.harness.prompts import SYSTEM
from benchledger.harness.settings import Settings
from benchledger.harness.unit import SystemClock
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import SessionCallBody
from benchledger.protocols.schema import Protocol

__all__ = ["PlatformTestCase"]

T = TypeVar("T")


class _Observed:
    """An observer keeping every session call it is handed (as the runner records them)."""

    episode = "contract"

    def __init__(self) -> None:
        self.calls: list[SessionCallBody] = []

    def session_call(self, body: SessionCallBody) -> None:
        self.calls.append(body)


class _Recorder:
    """A ``UnitRecorder`` keeping each read's purpose and observed reading, in order."""

    def __init__(self) -> None:
        self.clock = SystemClock()
        self.reads: list[tuple[str, Any]] = []

    async def read(
        self, purpose: str, action: Callable[[], Awaitable[ReadBack]],
        observe: Callable[[ReadBack], Any],
    ) -> tuple[Any, int | None]:  # fmt: skip
        seen = observe(await action())
        self.reads.append((purpose, seen))
        return seen, len(self.reads)

    def observer(self, purpose: str) -> Any:
        kept = _Observed()
        kept.seqs = []  # type: ignore[attr-defined]
        return kept

    async def retrying(self, purpose: str, action: Callable[[], Awaitable[T]]) -> T:
        return await action()

    def last(self, purpose: str) -> Any:
        """The observed reading of the last read for ``purpose`` (None: none)."""
        return next((seen for p, seen in reversed(self.reads) if p == purpose), None)


# What each lifecycle test teaches: its own protocol under its own identity (by position in
# the pool), so the tests sharing one runtime never teach one fact twice, as a run's units
# never do between two resets.
_TEACHES = {"capture": 0, "update": 1, "promotion": 2}


def _lifecycle_protocol(sinks: tuple[str, ...], test: str) -> Protocol:
    """The committed protocol ``test`` (a ``_TEACHES`` key) teaches: the first with a
    correction (update), or the first (promotion) or the second (capture) promoting to one
    of ``sinks``."""
    correction = test == "update"

    def fits(p: Protocol) -> bool:
        return p.update is not None if correction else p.promotes and p.sink in sinks

    found = [p for p in protocols.load(protocols.LIFECYCLE_DIR).protocols if fits(p)]
    assert found, f"no committed protocol {'corrects' if correction else 'promotes to'} {sinks}"
    return (found[1:2] or found)[0] if test == "capture" else found[0]


async def _taught(
    client: Any, p: Protocol, episode: Any, identity: int
) -> tuple[CaptureCheck, _Recorder]:
    """The scripted agent's teach of ``p`` as ``identity``, then the platform's capture
    check of it, read through a fresh recorder: (the check, the recorder)."""
    since = SystemClock().time()
    await episode("teach")
    ev = _Recorder()
    got = await client.check_capture(ev, identity=identity, target=target_of(p), since=since,
                                     poll=PollPolicy(10.0, 0.1))  # fmt: skip
    return got, ev


class _Held:
    """One runtime of a platform held open for a test class, on an event loop of its own
    thread: each test's coroutine runs there, on the same client (as a run's units share
    one runtime), and ``close`` leaves the runtime from the task that entered it."""

    def __init__(self, provisioner: Provisioner) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        ready: concurrent.futures.Future[PlatformClient] = concurrent.futures.Future()
        self.held = asyncio.run_coroutine_threadsafe(self._hold(provisioner, ready), self.loop)
        try:
            self.client = ready.result()
        except BaseException:
            self._stop_loop()
            raise

    async def _hold(
        self, provisioner: Provisioner, ready: concurrent.futures.Future[PlatformClient]
    ) -> None:
        self.done = asyncio.Event()
        try:
            async with provisioner.runtime() as client:
                ready.set_result(client)
                await self.done.wait()
        except BaseException as exc:
            if ready.done():
                raise
            ready.set_exception(exc)

    def run(self, use: Callable[[PlatformClient], Awaitable[T]]) -> T:
        async def go() -> T:
            return await use(self.client)

        return asyncio.run_coroutine_threadsafe(go(), self.loop).result()

    def close(self) -> None:
        """Leave the runtime (its errors raised here) and stop the loop."""
        try:
            self.loop.call_soon_threadsafe(self.done.set)
            self.held.result()
        finally:
            self._stop_loop()

    def _stop_loop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join()
        self.loop.close()


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

    # One runtime per class: pytest calls ``setup_class`` before a class's first test and
    # ``teardown_class`` after its last. The runtime is opened on first use (a class whose
    # tests are all skipped or need none opens none). Without ``setup_class`` (a test method
    # called directly) each use gets a fresh runtime.
    _held: ClassVar[list[_Held] | None] = None

    @classmethod
    def setup_class(cls) -> None:
        cls._held = []

    @classmethod
    def teardown_class(cls) -> None:
        held, cls._held = cls._held, None
        for runtime in held or ():
            runtime.close()

    def with_client(
        self, use: Callable[[PlatformClient], Awaitable[T]], *, fresh: bool = False
    ) -> T:
        """``use(client)`` on the class's runtime of the platform (``fresh``: on one of its
        own, closed afterwards)."""
        held = type(self)._held
        if held is not None and not fresh:
            if not held:
                held.append(_Held(self.provisioner()))
            return held[0].run(use)

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

        assert self.with_client(close, fresh=True)  # not the runtime the others share

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

    # -- what it does -----------------------------------------------------------------------

    def test_a_memory_written_is_found_by_search_at_a_rank(self) -> None:
        found = self.with_client(lambda client: probe(client, self.platform))
        assert not found.refused, f"the probe refuses it: {found.refused}"
        search = next(f for f in found.findings if f.what == "search")
        assert search.ok and " at rank " in search.detail, search.detail

    def _teach(
        self, test: str,
        use: Callable[[PlatformClient, Protocol, Callable[[str], Awaitable[Any]], int],
                      Awaitable[T]],
    ) -> T:  # fmt: skip
        """``use(client, protocol, episode, identity)`` after checking the client has the
        lifecycle, with the protocol and identity ``test`` teaches (``_TEACHES``);
        ``episode(stage)`` runs the scripted agent's episode of that stage as that identity."""
        identity = 1 + _TEACHES[test] % self.pool_size

        async def go(client: PlatformClient) -> T:
            assert isinstance(client, LifecycleCapability), "it offers no LifecycleCapability"
            sinks = tuple((await client.describe()).sinks)
            p = _lifecycle_protocol(sinks, test)
            with tempfile.TemporaryDirectory() as folder:
                ledger = Ledger(open_store(os.path.join(folder, "contract.sqlite")))
                w = ledger.writer("contract/unit/0")

                async def episode(stage: str) -> Any:
                    prompt = p.update.prompt if stage == "update" and p.update else p.teach.prompt
                    ep = Episode(stage, SYSTEM[stage], prompt, p, p.budget_tool_calls)
                    return await run_episode(ScriptedAgent(), client, w, ep, identity,
                                             client.email(identity), tools=COUNTED)  # fmt: skip

                return await use(client, p, episode, identity)

        if self.lifecycle is False:
            import pytest

            pytest.skip("it offers no LifecycleCapability")
        return self.with_client(go)

    def test_the_capture_check_returns_the_id_of_the_capture(self) -> None:
        async def check(
            client: Any, p: Protocol, episode: Any, identity: int
        ) -> tuple[CaptureCheck, Any]:
            got, ev = await _taught(client, p, episode, identity)
            return got, ev.last("capture")

        got, seen = self._teach("capture", check)
        assert isinstance(got, CaptureCheck), type(got)
        assert isinstance(got.found, str) and got.found, f"found is {got.found!r}, not an id"
        assert isinstance(seen, dict) and isinstance(seen.get("ids"), list), seen
        assert [str(i) for i in seen["ids"]][:1] == [got.found], seen

    def test_an_update_check_of_a_real_correction_has_the_documented_shape(self) -> None:
        async def check(
            client: Any, p: Protocol, episode: Any, identity: int
        ) -> tuple[UpdateCheck, Any]:
            got, ev = await _taught(client, p, episode, identity)
            assert isinstance(got.found, str), f"found is {got.found!r}, not an id"
            since = SystemClock().time()
            await episode("update")
            upd = await client.check_update(ev, identity=identity, original=got.found,
                                            target=target_of(p), since=since)  # fmt: skip
            return upd, ev.last("update")

        upd, seen = self._teach("update", check)
        assert isinstance(upd, UpdateCheck), type(upd)
        assert upd.landed is None or isinstance(upd.landed, str), upd.landed
        assert upd.original_status is None or isinstance(upd.original_status, str), upd
        assert isinstance(seen, dict), seen
        assert isinstance(seen.get("statuses", {}), dict), f"statuses: {seen.get('statuses')!r}"

    def test_a_promotion_lands_where_its_sinks_say(self) -> None:
        async def check(
            client: Any, p: Protocol, episode: Any, identity: int
        ) -> tuple[Promotion, Any]:
            got, ev = await _taught(client, p, episode, identity)
            assert isinstance(got.found, str), f"found is {got.found!r}, not an id"
            promoted = await client.promote(ev, capture=got.found, target=target_of(p))
            return promoted, ev.last("sink")

        promoted, seen = self._teach("promotion", check)
        assert isinstance(promoted, Promotion) and promoted.ok is True, promoted
        assert isinstance(seen, dict) and seen.get("shows") is True, seen
