"""The run driver and its seams: run record, resume, identities, preflight, fault barrier."""

from __future__ import annotations

import asyncio
import collections
from typing import Any

import msgspec
import pytest

from benchledger.harness.agents.fake import scripted_decision
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.driver import Progress, RunDriver
from benchledger.harness.models import FakeTransport, ModelResponse
from benchledger.harness.record import RunConfig, RunRefused, diff, read_record, redact_command
from benchledger.harness.settings import Settings
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    PlatformRecord,
    RunRecord,
    RunStartedEvent,
    SessionCallEvent,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
    is_probe_stream,
)
from benchledger.refplatform.auth import Keyring
from benchledger.refplatform.platform import VERSION, Platform
from benchledger.refplatform.server import LoopbackServer, build_app
from tests.conftest import protocol_subset

SUBSET = ["bl-keystone-region", "bl-margin-region", "bl-focus-region", "bl-showcase-region"]
ADMIN, POOL = "adm-key-123", "poolkey"


def subset(tmp_path, ids=SUBSET) -> str:
    return protocol_subset(tmp_path, list(ids))


@pytest.fixture
def ledger():
    led = Ledger(open_store(":memory:"))
    yield led
    led.store.close()


@pytest.fixture
def server():
    srv = LoopbackServer(build_app(Platform(), Keyring(ADMIN, POOL, 40)))
    srv.start()
    yield srv
    srv.stop()


def external(path: str, url: str, **kw: Any) -> RunConfig:
    given = frozenset(kw.pop("given", ()))
    return RunConfig(protocols_path=path, platform=url, admin_key=ADMIN, pool_base=POOL,
                     pool_size=kw.pop("pool_size", 40), given=given, **kw)  # fmt: skip


def interrupted_after(ledger: Ledger, cfg: RunConfig, units: int, **kw: Any) -> None:
    """Run until ``units`` units finished, then cancel, as Ctrl-C does."""

    async def go() -> None:
        task = asyncio.current_task()
        assert task is not None

        def done(outcome: Any, n: int, total: int) -> None:
            if n == units:
                task.cancel()

        await RunDriver(ledger, cfg, Progress(unit_done=done), **kw).execute()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())


class Stalling:
    """A scripted agent that never finishes a teach turn; cancels the run once ``n`` wait."""

    name, model, records_model_calls = "stalling", "", False

    def __init__(self, n: int) -> None:
        self.n, self.waiting = n, 0

    def for_unit(self, unit: Any) -> Any:
        return self

    async def next_turn(self, episode, messages, tools, observer=None):
        self.waiting += 1
        if self.waiting == self.n:
            self.task.cancel()
        await asyncio.Event().wait()


def interrupted_mid_unit(ledger: Ledger, cfg: RunConfig, n: int) -> None:
    """Start a run and cancel it once ``n`` units are inside their teach episode."""
    agent = Stalling(n)

    async def go() -> None:
        agent.task = asyncio.current_task()
        await RunDriver(ledger, cfg, agent=agent).execute()  # type: ignore[arg-type]

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())


def evs(ledger: Ledger, run_id: str) -> list[Any]:
    return [e for e, _ in ledger.events(run_id)]


def test_the_run_record_is_written_once_and_read_back_whole(tmp_path, ledger, server):
    cfg = external(subset(tmp_path), server.url, run_id="r", k=2, concurrency=3,
                   reset_cmd="echo reset")  # fmt: skip
    result = asyncio.run(RunDriver(ledger, cfg).execute())
    assert result.status == 0 and result.root
    record = read_record(ledger, "r")
    assert record.suite == "lifecycle" and record.k == 2 and record.concurrency == 3
    assert record.pool_size == 40 and record.reset_cmd == ""  # never the command itself
    assert record.reset_program == "echo" and record.reset_digest
    assert record.platform.kind == "external" and record.platform.url == server.url
    assert [(u.unit_id, u.attempt) for u in record.units] == [
        (pid, j) for j in (1, 2) for pid in sorted(SUBSET)
    ]
    assert msgspec.json.decode(msgspec.json.encode(record), type=RunRecord) == record


def test_run_started_records_the_version_the_server_reports(tmp_path, ledger, server):
    asyncio.run(RunDriver(ledger, external(subset(tmp_path, SUBSET[:1]), server.url,
                                           run_id="v")).execute())  # fmt: skip
    started = next(e for e in evs(ledger, "v") if isinstance(e, RunStartedEvent))
    assert started.body.platform_version == VERSION
    assert started.body.record is not None and started.body.record.platform.version == VERSION


def test_a_refused_resume_writes_nothing(tmp_path, ledger, server):
    cfg = external(subset(tmp_path), server.url, run_id="p", pool_size=12, concurrency=4)
    interrupted_mid_unit(ledger, cfg, 4)  # four started units: resuming needs 8 more
    before = len(evs(ledger, "p"))
    resume = external("", server.url, resume="p")
    with pytest.raises(RunRefused, match="pool identities up to"):
        asyncio.run(RunDriver(ledger, resume).execute())
    assert len(evs(ledger, "p")) == before
    assert not any(isinstance(e, UnitAbandonedEvent) for e in evs(ledger, "p"))


def test_successive_resumes_never_reuse_a_pool_identity(tmp_path, ledger, server):
    cfg = external(subset(tmp_path), server.url, run_id="i", concurrency=2)
    interrupted_mid_unit(ledger, cfg, 2)
    interrupted_mid_unit(ledger, external("", server.url, resume="i"), 2)
    result = asyncio.run(RunDriver(ledger, external("", server.url, resume="i")).execute())
    assert result.root
    starts = [e.body for e in evs(ledger, "i") if isinstance(e, UnitStartedEvent)]
    identities = [x for b in starts for x in (b.teacher, b.learner)]
    abandoned = sum(isinstance(e, UnitAbandonedEvent) for e in evs(ledger, "i"))
    assert abandoned >= 4 and len(starts) == len(SUBSET) + abandoned
    assert len(set(identities)) == len(identities)
    started = {
        e.stream: e.body.protocol_id for e in evs(ledger, "i") if isinstance(e, UnitStartedEvent)
    }
    finished = collections.Counter(
        started[e.stream] for e in evs(ledger, "i") if isinstance(e, UnitFinishedEvent)
    )
    assert finished == collections.Counter(SUBSET)
    assert ledger.verify("i", require_seal=True)[0] is None


def test_resume_restores_the_record_and_refuses_what_contradicts_it(tmp_path, ledger, server):
    cfg = external(subset(tmp_path), server.url, run_id="c", pool_size=30, concurrency=1)
    interrupted_after(ledger, cfg, 1)
    for option, value in (("k", 3), ("concurrency", 7), ("agent", "fake:0")):
        bad = external("", server.url, resume="c", given={option}, **{option: value})
        with pytest.raises(RunRefused, match=f"--{option} {value}"):
            asyncio.run(RunDriver(ledger, bad).execute())
    # --pool-size, --concurrency and the protocols come back from the record.
    result = asyncio.run(RunDriver(ledger, external("", server.url, resume="c",
                                                    pool_size=0)).execute())  # fmt: skip
    assert result.root and not result.missing


def test_a_run_without_a_record_cannot_be_resumed(ledger):
    from benchledger.ledger.events import RunStartedBody

    ledger.start_run("old", RunStartedBody(suite="lifecycle"))
    with pytest.raises(RunRefused, match="without a run record"):
        asyncio.run(RunDriver(ledger, RunConfig(resume="old")).execute())


def test_an_unreachable_platform_is_refused_before_anything_is_written(tmp_path, ledger):
    cfg = external(subset(tmp_path, SUBSET[:1]), "http://127.0.0.1:9", run_id="u")
    with pytest.raises(RunRefused, match="preflight failed"):
        asyncio.run(RunDriver(ledger, cfg).execute())
    assert ledger.store.run_ids() == []


def test_a_wrong_admin_key_is_refused_before_anything_is_written(tmp_path, ledger, server):
    cfg = external(subset(tmp_path, SUBSET[:1]), server.url, run_id="w")
    cfg.admin_key = "not-the-key"
    with pytest.raises(RunRefused, match="preflight failed"):
        asyncio.run(RunDriver(ledger, cfg).execute())
    assert ledger.store.run_ids() == []


class Crashing:
    """A model agent whose policy has a bug on one protocol's recall."""

    def __init__(self) -> None:
        self.inner = ModelAgent(FakeTransport(scripted_decision, delay_s=0), model="fake-model")
        self.name, self.model, self.records_model_calls = "crashing", "fake-model", True

    def for_unit(self, unit: Any) -> Any:
        return self

    async def next_turn(self, episode, messages, tools, observer=None):
        if episode.protocol.id == SUBSET[0] and episode.stage == "recall":
            raise KeyError("a bug in the agent")
        return await self.inner.next_turn(episode, messages, tools, observer)


def test_a_bug_in_one_unit_ends_that_unit_the_run_goes_on_and_is_not_green(tmp_path, ledger):
    logs = str(tmp_path / "logs")
    cfg = RunConfig(protocols_path=subset(tmp_path), run_id="b", settings=Settings(log_dir=logs))
    result = asyncio.run(RunDriver(ledger, cfg, agent=Crashing()).execute())  # type: ignore[arg-type]
    # Sealed, every other unit run; but a unit that did not run is no result: exit 1.
    assert result.root and result.status == 1
    assert result.harness == [f"{SUBSET[0]}/1"] and result.log == f"{logs}/b.log"
    errors = {o.unit_id: o.error for o in result.outcomes}
    assert errors[SUBSET[0]].startswith("internal error in recall: KeyError")
    assert errors[SUBSET[0]].endswith(f"(traceback in {logs}/b.log)")
    assert all(not errors[p] for p in SUBSET[1:])


def test_a_run_whose_units_all_fail_exits_1(tmp_path, ledger):
    class AlwaysBroken(Crashing):
        async def next_turn(self, episode, messages, tools, observer=None):
            raise RuntimeError("broken")

    settings = Settings(log_dir=str(tmp_path / "logs"))
    cfg = RunConfig(protocols_path=subset(tmp_path, SUBSET[:2]), run_id="f", settings=settings)
    result = asyncio.run(RunDriver(ledger, cfg, agent=AlwaysBroken()).execute())  # type: ignore[arg-type]
    assert result.root and result.status == 1 and len(result.failed) == 2


def test_cache_tokens_are_rolled_up_per_episode(tmp_path, ledger):
    def cached(request, hint) -> ModelResponse:
        resp = scripted_decision(request, hint)
        usage = {"input_tokens": 10, "output_tokens": 2, "cache_read_tokens": 7,
                 "cache_creation_tokens": 3}  # fmt: skip
        return msgspec.structs.replace(resp, usage=usage)

    agent = ModelAgent(FakeTransport(cached, delay_s=0), model="fake-model")
    cfg = RunConfig(protocols_path=subset(tmp_path, SUBSET[:1]), run_id="t")
    asyncio.run(RunDriver(ledger, cfg, agent=agent).execute())  # type: ignore[arg-type]
    ended = [e for e in evs(ledger, "t") if isinstance(e, EpisodeFinishedEvent)]
    finished = [e.body for e in ended if not is_probe_stream(e.stream)]  # the units' episodes
    assert finished and all(b.cache_read_tokens == 7 * b.tool_calls + 7 for b in finished)
    assert all(b.cache_creation_tokens == 3 * (b.tool_calls + 1) for b in finished)


def test_tool_results_are_recorded_as_their_content_blocks(tmp_path, ledger):
    asyncio.run(RunDriver(ledger, RunConfig(protocols_path=subset(tmp_path, SUBSET[:1]),
                                            run_id="cb")).execute())  # fmt: skip
    calls = [e.body for e in evs(ledger, "cb") if isinstance(e, SessionCallEvent)]
    tool_calls = [b for b in calls if b.method == "tools/call"]
    assert tool_calls and all(b.result is None and b.content for b in tool_calls)
    assert all(b.content[0]["type"] == "text" and b.text() for b in tool_calls)


def test_a_fresh_platform_per_unit_gives_every_unit_its_own_ids(tmp_path, ledger):
    cfg = RunConfig(protocols_path=subset(tmp_path, SUBSET[:2]), run_id="pu",
                    runtime_scope="unit")  # fmt: skip
    result = asyncio.run(RunDriver(ledger, cfg).execute())
    assert result.root and not result.failed
    first_handle: dict[str, str] = {}
    for e in evs(ledger, "pu"):
        if isinstance(e, SessionCallEvent) and e.body.tool == "platform_info":
            if is_probe_stream(e.stream):  # the probe's, on the preflight's platform
                continue
            first_handle.setdefault(e.stream, msgspec.json.decode(e.body.text())["session_id"])
    # Each unit opened the first session of its own platform.
    assert len(first_handle) == 2 and len(set(first_handle.values())) == 1


@pytest.mark.parametrize(
    ("cmd", "secret"),
    [
        ("API_KEY=sk-abc123 ./reset.sh", "sk-abc123"),
        ("psql postgresql://bench:hunter2@db/x -c 'truncate t'", "hunter2"),
        ("./reset --token abcdef", "abcdef"),
        ("./reset --password=opensesame", "opensesame"),
        ("curl -H x-api-key: ghp_0123456789 http://h", "ghp_0123456789"),
        ("./reset ADMIN-PLANTED", "ADMIN-PLANTED"),
    ],
    ids=["env-assignment", "url-password", "flag-value", "flag-equals", "token-prefix", "known"],
)
def test_reset_commands_are_recorded_with_secrets_redacted(cmd, secret):
    out = redact_command(cmd, ("ADMIN-PLANTED",))
    assert secret not in out and "<redacted>" in out


def test_a_harmless_reset_command_is_recorded_as_given():
    assert redact_command("docker compose restart platform") == "docker compose restart platform"


def test_diff_names_every_field_that_differs():
    a = RunRecord(suite="lifecycle", platform=PlatformRecord(kind="embedded"), k=1)
    b = RunRecord(suite="lifecycle", platform=PlatformRecord(kind="external", url="http://x"), k=2)
    assert [d.split(":")[0] for d in diff(a, b)] == ["k", "platform"]
    assert diff(a, a) == []
