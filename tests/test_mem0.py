"""mem0 as a platform: benchledger's MCP server over the mem0 library, behind the adapter.

The fast tests run the real server script over stdio in this interpreter with its
``--backend memory`` store (the same tools, memories in a dict): the adapter's scope,
capture, update, promotion and replay logic against a real MCP process. The slow ones
install the pinned mem0ai into ``$BENCHLEDGER_MEM0_DIR`` when set, else
``${XDG_CACHE_HOME:-~/.cache}/benchledger/mem0`` (once per machine), and run the server
with its network namespace cut off (``unshare -n``) where that is allowed; they skip,
saying why, when the venv cannot be made.
"""

from __future__ import annotations

import asyncio
import json
import os
import shlex
import shutil
import subprocess
import sys

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.agents.base import Episode
from benchledger.harness.platforms.base import PollPolicy
from benchledger.harness.platforms.mem0 import (
    SHARED,
    Mem0,
    install,
    memory_id,
    parse_memory_id,
    server_argv,
)
from benchledger.harness.platforms.mem0_platform import VERSION
from benchledger.harness.platforms.provision import parse_platform
from benchledger.harness.platforms.vocabulary import MEM0, vocabulary_of
from benchledger.harness.suites.lifecycle import target
from benchledger.harness.unit import UnitContext, UnitPlan
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import RunStartedBody, RunStartedEvent, SessionCallEvent
from tests.test_runner import subset

# Two datahub promotions, two knowledge-page promotions, two updates.
SUBSET = [
    "bl-anchor-tier", "bl-whale-orders", "bl-core-cohort", "bl-dormant-customers",
    "bl-audit-channel", "bl-focus-region",
]  # fmt: skip
BY_ID = protocols.load(protocols.LIFECYCLE_DIR).by_id()
DICT_ARGV = (*server_argv(sys.executable), "--backend", "memory")


def _events(path: str, run_id: str) -> list:
    store = open_store(path)
    try:
        return [e for e, _ in Ledger(store).events(run_id)]
    finally:
        store.close()


# -- the whole run, over the dict backend ---------------------------------------------------


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> str:
    """A ledger holding the subset run on mem0 (the dict backend) as "m0"."""
    folder = tmp_path_factory.mktemp("m0-runs")
    path = subset(folder, SUBSET)
    ledger = str(folder / "l.sqlite")
    argv = ["run", "--protocols", path, "--ledger", ledger, "--platform", "mem0",
            "--mem0-cmd", shlex.join(DICT_ARGV), "--run-id", "m0"]  # fmt: skip
    assert main(argv) == 0
    return ledger


def test_a_mem0_run_seals_verifies_rederives_and_replays_in_full_from_its_log(runs, capsys):
    assert main(["verify", "m0", "--ledger", runs]) == 0
    assert main(["replay", "m0", "--level", "rederive", "--ledger", runs]) == 0
    assert main(["replay", "m0", "--level", "full", "--ledger", runs]) == 0
    out = capsys.readouterr().out
    assert "ok full m0" in out and "all equal" in out


def test_the_run_record_names_the_given_command_and_every_stage_is_graded(runs, capsys):
    started = next(e for e in _events(runs, "m0") if isinstance(e, RunStartedEvent))
    platform = started.body.record.platform
    assert platform.kind == "mem0" and platform.url.startswith("mem0-cmd:")
    assert platform.name == "mem0" and "promote" in platform.stages
    assert main(["report", "m0", "--format", "json", "--ledger", runs]) == 0
    metrics = json.loads(capsys.readouterr().out)["metrics"]
    rates = {name: (m["num"], m["den"]) for name, m in metrics.items()}
    assert rates["capture_rate"] == (6, 6)
    assert rates["update_correctness"] == (2, 2) and rates["duplicate_rate"] == (0, 2)
    assert rates["transfer_rate"][1] == 4  # knowledge-page promotions apply too


def test_the_scripted_agent_speaks_mem0_and_none_of_its_calls_names_a_user(runs):
    calls = [e.body for e in _events(runs, "m0") if isinstance(e, SessionCallEvent)
             and e.body.method == "tools/call"
             and e.body.episode in ("teach", "recall")]  # fmt: skip
    assert calls and not any("user_ids" in c.arguments for c in calls)
    assert {c.tool for c in calls} == {"add_memory", "search_memories"}


# -- the adapter's steps against the server -------------------------------------------------


def _ctx(client: Mem0, ledger: Ledger, pid: str, stream: str) -> UnitContext:
    if not ledger.store.run_ids():
        ledger.start_run("t", RunStartedBody(suite="lifecycle"))
    return UnitContext(ledger, client, ScriptedAgent(), UnitPlan(BY_ID[pid], 1, stream, (1, 2)))


async def _add(client: Mem0, who: int, text: str) -> str:
    async with client.session(who) as s:
        got = await s.call_tool("add_memory", {"text": text})
    assert not got.is_error, got.text
    return str(got.data["results"][0]["id"])


def _adapter(argv, tmp_path, scenario):
    """Run ``scenario(client, ledger)`` against a fresh server folder; return its result."""
    ledger = Ledger(open_store(":memory:"))

    async def go():
        async with Mem0.running(argv, str(tmp_path), pool_size=8) as client:
            return await scenario(client, ledger)

    return asyncio.run(go()), ledger


@pytest.fixture(params=["memory", pytest.param("mem0", marks=pytest.mark.slow)])
def argv(request, tmp_path_factory) -> tuple[str, ...]:
    """The server: the dict backend here, or the real mem0 in its venv (slow)."""
    if request.param == "memory":
        return DICT_ARGV
    return tuple(request.getfixturevalue("mem0_argv"))


def test_a_second_identity_can_neither_find_nor_touch_the_first_identitys_memories(argv, tmp_path):
    """Identity 2 tries every tool it is shown on identity 1's memory (issue 50, item 3):
    reads, the change and the delete by its id, and the user ids named outright."""
    fact = "Refunds are recorded as negative rows in the orders table"

    async def scenario(client, ledger):
        mine = await _add(client, 1, fact)
        ctx = _ctx(client, ledger, "bl-audit-channel", "t/x")
        async with client.session(2, ctx.observer("recall")) as s:
            shown = {t["name"] for t in MEM0.shown(await s.list_tools())}
            said = [
                await s.call_tool("search_memories", {"query": "how are refunds recorded"}),
                await s.call_tool("list_memories", {}),
                await s.call_tool("get_memory", {"memory_id": mine}),
                await s.call_tool("update_memory", {"memory_id": mine, "text": "gone"}),
                await s.call_tool("delete_memory", {"memory_id": mine}),
                await s.call_tool("search_memories", {"query": "refunds",
                                                      "user_ids": ["bench-agent-001"]}),
                await s.call_tool("list_memories", {"user_id": "bench-agent-001"}),
            ]  # fmt: skip
        async with client.session(1) as s:
            still = await s.call_tool("get_memory", {"memory_id": mine})
        await ctx.commit()
        return shown, said, still

    (shown, said, still), ledger = _adapter(argv, tmp_path, scenario)
    # Every tool an agent sees is tried above (add_memory writes only the caller's own).
    tried = {"search_memories", "list_memories", "get_memory", "update_memory", "delete_memory"}
    assert shown == tried | {"add_memory"}, "a tool an agent sees is not tried here"
    search, listing, get, update, delete, named, named_one = said
    assert not search.is_error and "negative rows" not in search.text
    assert not listing.is_error and "negative rows" not in listing.text
    assert get.is_error and update.is_error and delete.is_error
    assert named.is_error and named.text.startswith("refused by benchledger")
    assert named_one.is_error and named_one.text.startswith("refused by benchledger")
    assert not still.is_error and still.data["memory"] == fact  # untouched
    recorded = [e.body for e, _ in ledger.events("t") if isinstance(e, SessionCallEvent)]
    assert [b.tool for b in recorded if b.is_error][-2:] == ["search_memories", "list_memories"]


def test_a_capture_is_a_memory_of_the_teacher_with_the_fact_naming_the_entity(argv, tmp_path):
    p = BY_ID["bl-audit-channel"]

    async def scenario(client, ledger):
        await _add(client, 1, f"orders: {p.fact}")  # the table's name counts
        await _add(client, 2, f"memory.bench.customers: {p.fact}")  # another entity
        await _add(client, 3, "memory.bench.orders: audit channel: ask finance")  # no fact
        found = []
        for who in (1, 2, 3):
            ctx = _ctx(client, ledger, p.id, f"t/{who}")
            ctx.stage = "capture"
            check = await client.check_capture(
                ctx, identity=who, target=target(p), since=0.0, poll=PollPolicy(0.0)
            )
            found.append(check.found)
        return found

    found, _ = _adapter(argv, tmp_path, scenario)
    assert found[1:] == [None, None]
    parsed = parse_memory_id(found[0] or "")
    assert parsed is not None and parsed[0] == "bench-agent-001"


@pytest.mark.parametrize("in_place", [True, False], ids=["edited-in-place", "added-beside"])
def test_an_update_in_place_supersedes_the_original_and_one_added_beside_it_duplicates(
    argv, tmp_path, in_place
):
    p = BY_ID["bl-audit-channel"]
    assert p.update is not None
    old_text, new_text = f"orders: {p.fact}", f"orders: {p.update.fact}"

    async def scenario(client, ledger):
        old = await _add(client, 1, old_text)
        async with client.session(1) as s:
            if in_place:
                got = await s.call_tool("update_memory", {"memory_id": old, "text": new_text})
            else:
                got = await s.call_tool("add_memory", {"text": new_text})
        assert not got.is_error, got.text
        ctx = _ctx(client, ledger, p.id, "t/1")
        ctx.stage = "update"
        original = memory_id("bench-agent-001", old, old_text)
        check = await client.check_update(
            ctx, identity=1, original=original, target=target(p), since=0.0
        )
        return check, old

    (upd, old), _ = _adapter(argv, tmp_path, scenario)
    assert upd.landed is not None and upd.landed != memory_id("bench-agent-001", old, old_text)
    if in_place:
        assert upd.landed == memory_id("bench-agent-001", old, new_text)
        assert upd.original_status == "superseded" and not upd.duplicated
    else:
        assert upd.original_status == "pending" and upd.duplicated


def test_a_promotion_lands_in_the_shared_user_where_the_learner_finds_it(argv, tmp_path):
    p = BY_ID["bl-anchor-tier"]

    async def learner_search(client, ctx):
        async with client.session(2, ctx.observer("transfer")) as s:
            return await s.call_tool("search_memories", {"query": p.fact, "limit": 5})

    async def scenario(client, ledger):
        ctx = _ctx(client, ledger, p.id, "t/a")
        await _add(client, 1, f"memory.bench.customers: {p.fact}")
        before = await learner_search(client, ctx)
        ctx.stage = "capture"
        check = await client.check_capture(
            ctx, identity=1, target=target(p), since=0.0, poll=PollPolicy(0.0)
        )
        ctx.stage = "promote"
        promotion = await client.promote(ctx, capture=check.found, target=target(p))
        after = await learner_search(client, ctx)
        await ctx.commit()
        return before, promotion, after

    (before, promotion, after), _ = _adapter(argv, tmp_path, scenario)
    assert p.fact not in before.text
    assert promotion.ok, promotion.reason
    assert p.fact in after.text
    assert {r["user_id"] for r in after.data["results"]} == {SHARED}


def test_an_agent_sees_no_user_ids_in_the_tools_it_is_listed(tmp_path):
    async def scenario(client, ledger):
        async with client.session(1) as s:
            return await s.list_tools()

    tools, _ = _adapter(DICT_ARGV, tmp_path, scenario)
    assert {t["name"] for t in tools} >= {"add_memory", "search_memories", "update_memory"}
    for t in tools:
        assert "user_ids" not in t["input_schema"].get("properties", {}), t["name"]
        assert "user_ids" not in t["input_schema"].get("required", []), t["name"]


# -- parsing, the vocabulary, the scripted agent --------------------------------------------


def test_the_platform_pins_an_exact_mem0_version_and_a_command_needs_the_mem0_platform(capsys):
    assert parse_platform("mem0").url == f"pypi:mem0ai=={VERSION}"
    assert parse_platform("mem0@2.2.0").url == "pypi:mem0ai==2.2.0"
    with pytest.raises(ValueError, match="exact version"):
        parse_platform("mem0@latest")
    assert main(["run", "--platform", "embedded", "--mem0-cmd", "x"]) == 2
    assert "mem0" in capsys.readouterr().err


def test_the_mem0_adapter_declares_the_mem0_vocabulary():
    vocab = vocabulary_of(Mem0(None, pool_size=1))
    assert vocab is MEM0
    assert vocab.write_call("c", "text", "D1:1").arguments == {"text": "text"}
    assert vocab.search_call("c", "q", 5).arguments == {"query": "q", "limit": 5}


def test_the_scripted_agent_adds_searches_and_updates_in_mem0s_dialect():
    p = BY_ID["bl-audit-channel"]
    assert p.update is not None
    tools = {"add_memory", "search_memories", "update_memory"}
    agent = ScriptedAgent()

    def turn(stage: str, messages: list) -> object:
        return agent.decide(Episode(stage, "", "question?", p, 15, MEM0), messages, tools)

    teach = turn("teach", [])
    assert teach.tool_calls[0].name == "add_memory"
    assert p.fact in teach.tool_calls[0].arguments["text"]
    found = json.dumps({"results": [{"id": "m-1", "memory": f"orders: {p.fact}"}]})
    update = turn("update", [{"role": "tool", "text": found}])
    assert update.tool_calls[0].name == "update_memory"
    assert update.tool_calls[0].arguments["memory_id"] == "m-1"
    recall = turn("recall", [{"role": "tool", "text": found}])
    assert recall.text.startswith("FINAL ANSWER:") and "INSUFFICIENT" not in recall.text
    nothing = turn("recall", [{"role": "tool", "text": json.dumps({"results": []})}])
    assert "INSUFFICIENT" in nothing.text


# -- the real mem0, installed once, offline ------------------------------------------------


def _mem0_dir() -> str:
    given = os.environ.get("BENCHLEDGER_MEM0_DIR")
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return given or os.path.join(cache, "benchledger", "mem0")


def _offline_prefix() -> list[str]:
    """``unshare -n`` when this machine lets us cut a process off the network, else []."""
    unshare = shutil.which("unshare")
    if unshare is None:
        return []
    done = subprocess.run([unshare, "-n", "true"], capture_output=True)
    return [unshare, "-n"] if done.returncode == 0 else []


@pytest.fixture(scope="session")
def mem0_python() -> str:
    """The python of the pinned mem0's venv (installed on first use; may take minutes)."""
    try:
        return install(VERSION, _mem0_dir())
    except Exception as exc:  # no index, no venv module: say why and skip
        pytest.skip(f"cannot make mem0's venv: {exc}")


@pytest.fixture(scope="session")
def mem0_argv(mem0_python) -> list[str]:
    return [*_offline_prefix(), *server_argv(mem0_python)]


@pytest.mark.slow
def test_the_server_cannot_reach_the_network_and_still_serves_mem0(mem0_argv, tmp_path):
    if mem0_argv[:1] != [shutil.which("unshare")]:
        pytest.skip("unshare -n is not allowed here: the network cannot be cut off")

    async def scenario(client, ledger):
        await _add(client, 1, "The fiscal year starts in February")
        async with client.session(1) as s:
            found = await s.call_tool("search_memories", {"query": "when does the financial "
                                                          "year begin", "limit": 3})  # fmt: skip
        return found, client.version

    (found, version), _ = _adapter(tuple(mem0_argv), tmp_path, scenario)
    assert version == VERSION
    assert "February" in found.data["results"][0]["memory"]  # wordllama found the paraphrase
    probe = [*mem0_argv[:2], sys.executable, "-c",
             "import socket; socket.create_connection(('1.1.1.1', 443), timeout=3)"]  # fmt: skip
    assert subprocess.run(probe, capture_output=True).returncode != 0  # the cut holds


@pytest.mark.slow
def test_the_committed_suite_runs_on_mem0_offline_and_replays_in_full(mem0_argv, tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    run = ["run", "--platform", "mem0", "--mem0-cmd", shlex.join(mem0_argv),
           "--ledger", ledger, "--run-id", "real"]  # fmt: skip
    assert main(run) == 0
    started = next(e for e in _events(ledger, "real") if isinstance(e, RunStartedEvent))
    assert started.body.record.platform.version == VERSION
    assert main(["verify", "real", "--ledger", ledger]) == 0
    assert main(["replay", "real", "--level", "rederive", "--ledger", ledger]) == 0
    assert main(["replay", "real", "--level", "full", "--ledger", ledger]) == 0
    assert "all equal" in capsys.readouterr().out


@pytest.mark.slow
def test_the_plain_mem0_platform_installs_once_records_its_release_and_replays(
    mem0_python, tmp_path, capsys
):
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, SUBSET)
    run = ["run", "--platform", "mem0", "--mem0-dir", _mem0_dir(), "--protocols", path,
           "--ledger", ledger, "--run-id", "plain"]  # fmt: skip
    assert main(run) == 0
    platform = next(e for e in _events(ledger, "plain")
                    if isinstance(e, RunStartedEvent)).body.record.platform  # fmt: skip
    assert (platform.kind, platform.url) == ("mem0", f"pypi:mem0ai=={VERSION}")
    assert platform.version == VERSION
    assert main(["replay", "plain", "--level", "full", "--ledger", ledger]) == 0
    assert "all equal" in capsys.readouterr().out
