"""@modelcontextprotocol/server-memory as a second platform behind the adapter.

The mapping, the scripted agent's graph dialect, the not-applicable rule and the
cross-platform comparison are checked on their own; everything else runs the real npm
server over stdio, installed once per test session by conftest's ``npm_dir`` (into
``$BENCHLEDGER_NPM_DIR`` when set, else a temporary folder) and skipped, saying why, only
when ``node`` or ``npm`` is missing.
"""

from __future__ import annotations

import asyncio
import shlex
import shutil
import sys

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.agents.base import Episode
from benchledger.harness.platforms import provision
from benchledger.harness.platforms.base import PollPolicy
from benchledger.harness.platforms.provision import (
    SERVER_MEMORY_VERSION,
    PlatformStartFailed,
    install_server_memory,
    parse_platform,
)
from benchledger.harness.platforms.server_memory import (
    ServerMemory,
    captures,
    entity_matches,
    merge,
    observation_id,
)
from benchledger.harness.platforms.vocabulary import SERVER_MEMORY
from benchledger.harness.prompts import SYSTEM
from benchledger.harness.suites.lifecycle import target
from benchledger.harness.unit import UnitContext, UnitPlan
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeStartedEvent,
    GraderDecisionEvent,
    ReadBackBody,
    ReadBackEvent,
    RunStartedBody,
    RunStartedEvent,
    SessionCallEvent,
)
from benchledger.projections.fold import fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites.lifecycle.decisions import decide_stage
from benchledger.projections.suites.lifecycle.report import table
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from benchledger.replay.full import replay_full
from benchledger.replay.target import verified
from tests.test_runner import subset

ORDERS = "urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.orders,PROD)"
# Two datahub promotions, two knowledge-page promotions (not applicable here), two updates.
SUBSET = [
    "bl-anchor-tier", "bl-whale-orders", "bl-core-cohort", "bl-dormant-customers",
    "bl-audit-channel", "bl-focus-region",
]  # fmt: skip
BY_ID = protocols.load(protocols.LIFECYCLE_DIR).by_id()


# -- the real server ----------------------------------------------------------------------


@pytest.fixture(scope="session")
def argv(npm_dir) -> tuple[str, ...]:
    node = shutil.which("node")
    assert node is not None
    return (node, install_server_memory(SERVER_MEMORY_VERSION, npm_dir))


@pytest.fixture
def use_npm_dir(monkeypatch, npm_dir) -> str:
    """`benchledger run --platform server-memory` finds the session's install."""
    monkeypatch.setenv("BENCHLEDGER_NPM_DIR", npm_dir)
    return npm_dir


@pytest.fixture(scope="module")
def runs(tmp_path_factory, npm_dir) -> str:
    """One ledger with the subset run on server-memory ("sm") and on refplatform ("ref")."""
    folder = tmp_path_factory.mktemp("sm-runs")
    path = subset(folder, SUBSET)
    ledger = str(folder / "l.sqlite")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("BENCHLEDGER_NPM_DIR", npm_dir)
        argv = ["run", "--protocols", path, "--ledger", ledger]
        assert main([*argv, "--platform", "server-memory", "--run-id", "sm"]) == 0
        assert main([*argv, "--run-id", "ref"]) == 0
    return ledger


def _events(path: str, run_id: str) -> list:
    store = open_store(path)
    try:
        return [e for e, _ in Ledger(store).events(run_id)]
    finally:
        store.close()


def test_the_scripted_suite_completes_on_server_memory_with_every_stage_graded(runs):
    store = open_store(runs)
    try:
        card = scorecard([fold(LifecycleFold(), from_ledger(Ledger(store), "sm").events)])
    finally:
        store.close()
    m = {k: (v.num, v.den) for k, v in card.metrics.items()}
    assert card.graded == len(SUBSET) and card.harness_failures == 0
    assert m["capture_rate"] == (6, 6) and m["personal_recall"] == (6, 6)
    assert m["transfer_rate"] == (2, 2)  # the two datahub promotions; pages do not apply
    assert m["update_correctness"] == (2, 2) and m["duplicate_rate"] == (0, 2)
    assert m["abstention_rate"] == (6, 6) and m["full_lifecycle"] == (6, 6)


def test_the_run_record_names_the_npm_package_and_the_servers_own_version(runs):
    started = next(e for e in _events(runs, "sm") if isinstance(e, RunStartedEvent))
    platform = started.body.record.platform
    assert platform.kind == "stdio"
    assert platform.url == f"npm:@modelcontextprotocol/server-memory@{SERVER_MEMORY_VERSION}"
    assert (platform.name, platform.version) == ("memory-server", "0.6.3")
    assert platform.sinks == ["datahub"] and "promote" in platform.stages
    assert started.body.platform_version == "0.6.3"


def test_every_stdio_call_and_every_read_back_is_an_event(runs):
    evs = _events(runs, "sm")
    episodes = [e for e in evs if isinstance(e, EpisodeStartedEvent)]
    calls = [e for e in evs if isinstance(e, SessionCallEvent)]
    # A fresh session is a fresh process: each episode opens with its own handshake.
    for ep in episodes:
        first = next(c for c in calls if c.stream == ep.stream and c.seq > ep.seq)
        assert first.body.method == "initialize"
        assert first.body.result["server"] == {"name": "memory-server", "version": "0.6.3"}
    reads = [e.body for e in evs if isinstance(e, ReadBackEvent)]
    assert {b.purpose for b in reads} >= {
        "capture", "approve", "apply", "insight_status", "sink", "update", "original_status",
        "not_applicable",
    }  # fmt: skip
    assert all(b.method in ("MCP", "DESCRIBE") for b in reads)


def test_verify_and_rederive_pass_on_a_server_memory_run(runs, capsys):
    assert main(["verify", "sm", "--ledger", runs]) == 0
    assert main(["replay", "sm", "--level", "rederive", "--ledger", runs]) == 0
    assert "all equal" in capsys.readouterr().out


def test_a_full_replay_from_the_log_re_drives_every_unit_and_finds_them_equal(runs, capsys):
    assert main(["replay", "sm", "--level", "full", "--ledger", runs]) == 0
    assert "compared 24 episodes, 6 units, 1 probe, all equal" in capsys.readouterr().out


def test_a_full_replay_names_a_graph_read_the_recording_does_not_hold(runs):
    """The log adapter checks each call against the tape: drop the teacher's graph read at
    capture and the replayed adapter, which still makes it, diverges right there."""
    run, failure = verified("sm", lambda: Ledger(open_store(runs, create=False)))
    assert run is not None and failure is None
    unit = run.units[0]
    read = next(
        i for i, e in enumerate(unit.events)
        if isinstance(e, SessionCallEvent) and e.body.tool == "read_graph"
    )  # fmt: skip
    dropped = unit.events[read]
    del unit.events[read]
    report = replay_full(run, BY_ID, target="sm")
    assert report.first is not None and report.first.stream == unit.stream
    assert not report.ok
    assert all(m.stream == unit.stream for m in report.mismatches), "other units are equal"
    assert dropped.seq <= report.first.seq


def test_a_live_replay_of_a_server_memory_run_is_refused_naming_the_log_option(runs, capsys):
    assert main(["replay", "sm", "--level", "full", "--tools", "live", "--ledger", runs]) == 2
    assert "use --tools log" in capsys.readouterr().err


def test_the_report_says_which_stages_did_not_apply_and_why(runs, capsys):
    assert main(["report", "sm", "--ledger", runs]) == 0
    out = capsys.readouterr().out
    line = next(x for x in out.splitlines() if x.startswith("n/a stages"))
    assert "promote in 2 unit(s)" in line and "no knowledge_page sink (its sinks: datahub)" in line
    promoted = {
        e.stream.split("/")[1]: e.body
        for e in _events(runs, "sm")
        if isinstance(e, GraderDecisionEvent) and e.body.check == "promoted"
    }
    assert promoted["bl-core-cohort"].verdict is None
    assert promoted["bl-core-cohort"].reason.startswith("not applicable: ")
    assert promoted["bl-anchor-tier"].verdict is True
    assert "no changeset to check (not applicable)" in promoted["bl-anchor-tier"].reason


def test_a_comparison_across_platforms_renders_and_names_the_difference(runs, capsys):
    assert main(["compare", "ref", "sm", "--ledger", runs]) == 0
    out = capsys.readouterr().out
    assert "differs: platform: A = mcp-data-platform (embedded)" in out
    assert "B = memory-server 0.6.3" in out
    assert "transfer_rate" in out and "in one run's denominator only" in out
    # Merging passes and gating still refuse two platforms.
    assert main(["report", "ref", "sm", "--ledger", runs]) == 2
    assert main(["gate", "sm", "--baseline", "ref", "--ledger", runs]) == 2
    assert "platform" in capsys.readouterr().err


def test_a_given_server_command_runs_and_is_recorded(tmp_path, argv):
    ledger = str(tmp_path / "l.sqlite")
    cmd = shlex.join(argv)
    path = subset(tmp_path, ["bl-focus-region"])
    assert main(["run", "--platform", "server-memory", "--server-memory-cmd", cmd,
                 "--protocols", path, "--ledger", ledger, "--run-id", "c"]) == 0  # fmt: skip
    started = next(e for e in _events(ledger, "c") if isinstance(e, RunStartedEvent))
    assert started.body.record.platform.url == f"server-memory-cmd:{cmd}"


def test_a_command_that_is_no_mcp_server_is_refused_before_anything_is_written(
    tmp_path, capsys, argv
):
    ledger = str(tmp_path / "l.sqlite")
    code = main(["run", "--platform", "server-memory", "--server-memory-cmd",
                 f"{sys.executable} -c pass", "--ledger", ledger, "--run-id", "x"])  # fmt: skip
    assert code == 2
    assert "platform preflight failed" in capsys.readouterr().err
    store = open_store(ledger)
    try:
        assert store.run_ids() == []
    finally:
        store.close()


# -- the adapter's steps against the real server ----------------------------------------


def _ctx(client: ServerMemory, ledger: Ledger, pid: str, stream: str) -> UnitContext:
    if not ledger.store.run_ids():
        ledger.start_run("t", RunStartedBody(suite="lifecycle"))
    return UnitContext(ledger, client, ScriptedAgent(), UnitPlan(BY_ID[pid], 1, stream, (1, 2)))


async def _write(client: ServerMemory, who: int, entity: str, *texts: str) -> None:
    async with client.session(who) as s:
        new = {"name": entity, "entityType": "dataset", "observations": list(texts)}
        got = await s.call_tool("create_entities", {"entities": [new]})
    assert not got.is_error, got.text


def _adapter(argv, tmp_path, scenario):
    """Run ``scenario(client, ledger)`` against a fresh server folder; return its result."""
    ledger = Ledger(open_store(":memory:"))

    async def go():
        async with ServerMemory.running(argv, str(tmp_path), pool_size=8) as client:
            return await scenario(client, ledger)

    return asyncio.run(go()), ledger


def test_a_capture_is_an_observation_with_the_fact_on_an_entity_matching_the_protocol(
    argv, tmp_path
):
    p = BY_ID["bl-audit-channel"]

    async def scenario(client, ledger):
        await _write(client, 1, "orders", p.fact)  # the table's name counts
        await _write(client, 2, "memory.bench.customers", p.fact)  # another entity
        await _write(client, 3, "memory.bench.orders", "audit channel: ask finance")
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
    assert found == [observation_id(1, "orders", p.fact), None, None]


def test_an_update_that_keeps_the_old_observation_is_a_duplicate(argv, tmp_path):
    p = BY_ID["bl-audit-channel"]
    assert p.update is not None

    async def scenario(client, ledger):
        await _write(client, 1, "memory.bench.orders", p.fact)
        async with client.session(1) as s:  # the correction added, the original kept
            adds = [{"entityName": "memory.bench.orders", "contents": [p.update.fact]}]
            await s.call_tool("add_observations", {"observations": adds})
        ctx = _ctx(client, ledger, p.id, "t/1")
        ctx.stage = "update"
        original = observation_id(1, "memory.bench.orders", p.fact)
        return await client.check_update(
            ctx, identity=1, original=original, target=target(p), since=0.0
        )

    upd, _ = _adapter(argv, tmp_path, scenario)
    assert upd.landed == observation_id(1, "memory.bench.orders", p.update.fact)
    assert upd.original_status == "pending" and upd.duplicated


def test_the_learner_sees_the_shared_graph_and_never_the_teachers_own_file(argv, tmp_path):
    p = BY_ID["bl-anchor-tier"]

    async def learner_search(client, ctx):
        async with client.session(2, ctx.observer("transfer")) as s:
            return await s.call_tool("search_nodes", {"query": "anchor tier"})

    async def scenario(client, ledger):
        ctx = _ctx(client, ledger, p.id, "t/a")
        await _write(client, 1, "memory.bench.customers", p.fact)
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

    (before, promotion, after), ledger = _adapter(argv, tmp_path, scenario)
    assert p.fact not in before.text
    assert promotion.ok, promotion.reason
    assert p.fact in after.text
    searches = [e.body for e, _ in ledger.events("t") if isinstance(e, SessionCallEvent)
                and e.body.tool == "search_nodes"]  # fmt: skip
    servers = [f["server"] for f in searches[-1].result["fanout"]]
    assert servers == ["bench-agent-002.jsonl", "shared.jsonl"]


# -- isolation: every tool an agent sees keeps identities apart (issue 50, item 3) ---------

VAULT = "vault"
PRIVATE = "identity one's private fact: the vault code is 4417"
# What identity 2 tries on identity 1's entity, one call per tool it is shown: reads that
# name it, changes and deletes aimed at it, and writes of its own name.
ATTEMPTS = {
    "read_graph": {},
    "search_nodes": {"query": "vault code"},
    "open_nodes": {"names": [VAULT]},
    "create_entities": {"entities": [{"name": VAULT, "entityType": "memory",
                                      "observations": ["identity two's own"]}]},
    "create_relations": {"relations": [{"from": VAULT, "to": VAULT, "relationType": "owns"}]},
    "add_observations": {"observations": [{"entityName": VAULT, "contents": ["changed"]}]},
    "delete_observations": {"deletions": [{"entityName": VAULT, "observations": [PRIVATE]}]},
    "delete_relations": {"relations": [{"from": VAULT, "to": VAULT, "relationType": "owns"}]},
    "delete_entities": {"entityNames": [VAULT]},
}  # fmt: skip


def test_a_second_identity_cannot_read_change_or_delete_the_firsts_graph_with_any_tool_it_sees(
    argv, tmp_path
):
    """Identity 1 keeps a private entity; identity 2 calls every tool it is shown on it
    (each identity's file has its own server process, so nothing it sends reaches identity
    1's file): no answer holds the fact, and identity 1 reads its entity back unchanged."""

    async def scenario(client, ledger):
        await _write(client, 1, VAULT, PRIVATE)
        async with client.session(2) as two:
            shown = {t["name"] for t in SERVER_MEMORY.shown(await two.list_tools())}
            said = {tool: await two.call_tool(tool, args) for tool, args in ATTEMPTS.items()}
        async with client.session(1) as one:
            back = await one.call_tool("open_nodes", {"names": [VAULT]})
        return shown, said, back

    (shown, said, back), _ = _adapter(argv, tmp_path, scenario)
    assert shown == set(ATTEMPTS), "a tool an agent sees is not tried here"
    for tool, got in said.items():
        assert "4417" not in got.text, (tool, got.text)
    own = [e for e in back.data["entities"] if e["name"] == VAULT]
    assert [e["observations"] for e in own] == [[PRIVATE]], back.text


# -- the mapping, the dialect and the rules, without a server -----------------------------


def test_the_platform_option_pins_an_exact_npm_version():
    npm = "npm:@modelcontextprotocol/server-memory@"
    assert parse_platform("server-memory").url == npm + SERVER_MEMORY_VERSION
    assert parse_platform("server-memory@2026.7.4") == parse_platform(npm + "2026.7.4")
    assert parse_platform("server-memory@2026.7.4").kind == "stdio"
    with pytest.raises(ValueError, match="exact npm version"):
        parse_platform("server-memory@^2026")
    with pytest.raises(ValueError, match="given again"):
        parse_platform("server-memory-cmd:node <redacted>")


def test_without_npm_the_install_says_what_to_install_or_give(tmp_path, monkeypatch):
    monkeypatch.setattr(provision.shutil, "which", lambda name: None)
    with pytest.raises(PlatformStartFailed, match=r"Node.js 18\+ with npm.*--server-memory-cmd"):
        install_server_memory(SERVER_MEMORY_VERSION, str(tmp_path))


def test_a_server_command_needs_the_server_memory_platform(capsys):
    assert main(["run", "--server-memory-cmd", "node x.js"]) == 2
    assert "use it with --platform server-memory" in capsys.readouterr().err


def test_an_entity_matches_the_protocols_dataset_by_any_of_its_names():
    for name in (
        ORDERS,
        "memory.bench.orders",
        "bench.orders",
        "Orders",
        "memory.bench.orders table",
    ):
        assert entity_matches(name, ORDERS), name
    for name in ("legacy_orders", "memory.bench.legacy_orders", "customers", "order"):
        assert not entity_matches(name, ORDERS), name


def test_captures_are_newest_first_and_carry_the_fact():
    graph = {"entities": [
        {"name": "orders", "entityType": "dataset", "observations": ["old: x", "the fact"]},
        {"name": "memory.bench.orders", "entityType": "dataset", "observations": ["The Fact!"]},
    ]}  # fmt: skip
    assert captures(graph, 4, ORDERS, "the fact") == [
        observation_id(4, "memory.bench.orders", "The Fact!"),
        observation_id(4, "orders", "the fact"),
    ]


def test_a_merged_answer_lists_each_entity_once_with_both_servers_observations():
    own = {"entities": [{"name": "a", "entityType": "t", "observations": ["x"]}],
           "relations": [{"from": "a", "to": "b", "relationType": "r"}]}  # fmt: skip
    shared = {"entities": [{"name": "a", "entityType": "t", "observations": ["x", "y"]},
                           {"name": "b", "entityType": "t", "observations": []}],
              "relations": [{"from": "a", "to": "b", "relationType": "r"}]}  # fmt: skip
    merged = merge(own, shared)
    assert merged["entities"] == [
        {"name": "a", "entityType": "t", "observations": ["x", "y"]},
        {"name": "b", "entityType": "t", "observations": []},
    ]
    assert merged["relations"] == own["relations"]


def _turn(stage: str, pid: str, results: list[dict]):
    p = BY_ID[pid]
    ep = Episode(stage, SYSTEM[stage], "a question?", p, p.budget_tool_calls, SERVER_MEMORY)
    messages = [{"role": "user", "text": "a question?"}] + [{"role": "tool", **r} for r in results]
    return ScriptedAgent().decide(ep, messages, {"search_nodes", "create_entities"})


def test_the_scripted_agent_speaks_the_graph_dialect_server_memory_declares():
    p = BY_ID["bl-audit-channel"]
    assert p.update is not None
    teach = _turn("teach", p.id, []).tool_calls[0]
    assert teach.name == "create_entities"
    assert teach.arguments["entities"][0]["name"] == "memory.bench.orders"
    existed = _turn("teach", p.id, [{"text": "[]", "is_error": False}]).tool_calls[0]
    assert existed.name == "add_observations"
    delete = _turn("update", p.id, []).tool_calls[0]
    add = _turn("update", p.id, [{"text": "ok", "is_error": False}]).tool_calls[0]
    assert (delete.name, add.name) == ("delete_observations", "add_observations")
    assert add.arguments["observations"][0]["contents"] == [p.update.fact]
    # search_nodes matches a substring of the whole query: search the quoted term.
    search = _turn("recall", p.id, []).tool_calls[0]
    assert (search.name, search.arguments) == ("search_nodes", {"query": "audit channel"})
    assert _turn("recall", p.id, [{"text": p.fact, "is_error": False}]).text == "FINAL ANSWER: 58"
    assert "INSUFFICIENT" in _turn("recall", p.id, [{"text": "{}", "is_error": False}]).text


def _na_read(what: str, seq: int = 0) -> tuple[int, ReadBackBody]:
    seen = {"what": what, "why": f"no {what} here"}
    return seq, ReadBackBody(stage="promote", method="DESCRIBE", path="capabilities", body=seen,
                             purpose="not_applicable", observed=seen)  # fmt: skip


def test_a_stage_the_platform_cannot_run_is_decided_none_with_its_reason():
    (d,) = decide_stage(BY_ID["bl-core-cohort"], "promote", [_na_read("promote")])
    assert d.body.verdict is None
    assert d.body.reason == "not applicable: no promote here"
    assert d.refs == (0,)


def test_a_step_the_platform_lacks_is_named_in_the_reason_not_passed_silently():
    def read(seq: int, purpose: str, observed: dict) -> tuple[int, ReadBackBody]:
        return seq, ReadBackBody(stage="promote", method="MCP", path="x", purpose=purpose,
                                 observed=observed)  # fmt: skip

    events = [
        read(1, "approve", {"approved": True}),
        read(2, "apply", {"ok": True, "message": ""}),
        read(3, "insight_status", {"status": "applied"}),
        _na_read("changeset", 4),
        read(5, "sink", {"shows": True, "sink": "shared graph"}),
    ]
    (d,) = decide_stage(BY_ID["bl-anchor-tier"], "promote", events)
    assert d.body.verdict is True
    assert d.body.reason == (
        "insight is applied; no changeset to check (not applicable); "
        "the shared graph shows the fact"
    )
    # Without the platform saying so, a missing changeset still fails the promotion.
    (strict,) = decide_stage(BY_ID["bl-anchor-tier"], "promote", events[:3] + events[4:])
    assert strict.body.verdict is False


def test_the_scorecard_table_lists_not_applicable_stages_only_when_there_are_some(runs):
    store = open_store(runs)
    try:
        cards = {r: scorecard([fold(LifecycleFold(), from_ledger(Ledger(store), r).events)])
                 for r in ("sm", "ref")}  # fmt: skip
    finally:
        store.close()
    assert "n/a stages" in table(cards["sm"])
    assert "n/a stages" not in table(cards["ref"])


@pytest.mark.slow
def test_the_whole_committed_suite_completes_on_server_memory(tmp_path, use_npm_dir, capsys):
    ledger = str(tmp_path / "l.sqlite")
    assert main(["run", "--platform", "server-memory", "--ledger", ledger, "--run-id", "all"]) == 0
    assert main(["replay", "all", "--level", "rederive", "--ledger", ledger]) == 0
    out = capsys.readouterr().out
    assert "full_lifecycle                       30/30" in out
    assert "promote in 10 unit(s)" in out
