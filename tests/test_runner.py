"""`benchledger run` end to end: embedded and external platforms, faults, budgets, resume."""

from __future__ import annotations

import asyncio
import collections
import json
import os
import shutil
import signal
import subprocess
import sys

import msgspec
import pytest
from starlette.responses import JSONResponse

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.agents import FakeModelAgent, ScriptedAgent
from benchledger.harness.agents.base import Episode
from benchledger.harness.episode import request_hash
from benchledger.harness.prompts import SYSTEM
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    GraderDecisionEvent,
    InfraErrorEvent,
    ModelCallEvent,
    ReadBackEvent,
    RunStartedEvent,
    SessionCallEvent,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
)
from benchledger.projections.fold import fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from benchledger.refplatform.auth import Keyring
from benchledger.refplatform.platform import Platform
from benchledger.refplatform.server import LoopbackServer, build_app
from tests.conftest import REPO, peer_dir

SUBSET = ["bl-keystone-region", "bl-margin-region", "bl-focus-region", "bl-showcase-region"]


def subset(tmp_path, ids=SUBSET, budget: int | None = None) -> str:
    folder = tmp_path / "protocols"
    folder.mkdir(exist_ok=True)
    for pid in ids:
        with open(os.path.join(protocols.LIFECYCLE_DIR, f"{pid}.yaml")) as fh:
            text = fh.read()
        if budget is not None:
            text = text.replace("budget_tool_calls: 15", f"budget_tool_calls: {budget}")
        (folder / f"{pid}.yaml").write_text(text)
    return str(folder)


def events(path: str, run_id: str):
    store = open_store(path)
    try:
        return list(Ledger(store).events(run_id))
    finally:
        store.close()


def metrics(path: str, run_id: str) -> dict:
    store = open_store(path)
    try:
        card = scorecard([fold(LifecycleFold(), from_ledger(Ledger(store), run_id).events)])
    finally:
        store.close()
    return {k: (m.num, m.den) for k, m in card.metrics.items()}


def test_a_run_records_every_call_grades_every_stage_and_seals(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    assert main(["run", "--protocols", subset(tmp_path), "--ledger", ledger, "--run-id", "r1"]) == 0
    out = capsys.readouterr().out
    assert "run r1 sealed, root" in out and "capture_rate" in out and "4/4" in out
    assert main(["verify", "r1", "--ledger", ledger]) == 0
    evs = [e for e, _ in events(ledger, "r1")]
    kinds = collections.Counter(type(e).__name__ for e in evs)
    assert kinds["UnitStartedEvent"] == kinds["UnitFinishedEvent"] == 4
    methods = {e.body.method for e in evs if isinstance(e, SessionCallEvent)}
    assert methods == {"initialize", "tools/list", "tools/call"}
    tools = {e.body.tool for e in evs if isinstance(e, SessionCallEvent)}
    assert {"platform_info", "memory_capture", "search", "trino_query", "apply_knowledge"} <= tools
    assert any(isinstance(e, ReadBackEvent) and e.body.method == "PUT" for e in evs)
    checks = collections.Counter(e.body.check for e in evs if isinstance(e, GraderDecisionEvent))
    assert checks["captured"] == 4 and checks["promoted"] == 2 and checks["transfer_correct"] == 2
    assert checks["update_captured"] == checks["duplicated"] == checks["update_correct"] == 2
    for e in evs:
        if isinstance(e, GraderDecisionEvent):
            assert e.refs, e.body.check  # every decision cites its evidence
    recall = next(
        e for e in evs if isinstance(e, EpisodeFinishedEvent) and e.body.episode == "recall"
    )
    assert recall.body.search_called and recall.body.fact_surfaced and recall.body.tool_calls == 2
    assert recall.body.final_answer.startswith("FINAL ANSWER:")
    for e in evs:  # the session handle is injected, never recorded as an argument
        if isinstance(e, SessionCallEvent):
            assert "session_id" not in e.body.arguments
    m = metrics(ledger, "r1")
    assert m["capture_rate"] == m["personal_recall"] == m["abstention_rate"] == (4, 4)
    assert m["update_correctness"] == (2, 2) and m["duplicate_rate"] == (0, 2)


def test_units_with_one_identity_pair_each(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    assert (
        main(
            [
                "run",
                "--protocols",
                subset(tmp_path),
                "--ledger",
                ledger,
                "--run-id",
                "r",
                "--k",
                "2",
            ]
        )
        == 0
    )
    starts = [e for e, _ in events(ledger, "r") if isinstance(e, UnitStartedEvent)]
    idents = [x for s in starts for x in (s.body.teacher, s.body.learner)]
    assert len(starts) == 8 and len(set(idents)) == 16
    assert all(x.startswith("pool:") for x in idents)


def test_passes_never_see_each_others_promoted_knowledge(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    assert (
        main(
            [
                "run",
                "--protocols",
                subset(tmp_path, SUBSET[:2]),
                "--ledger",
                ledger,
                "--run-id",
                "r",
                "--k",
                "2",
            ]
        )
        == 0
    )
    evs = [e for e, _ in events(ledger, "r")]
    run = next(e for e in evs if isinstance(e, RunStartedEvent))
    assert run.body.coupled is False and run.body.k == 2
    for e in evs:
        if (
            isinstance(e, SessionCallEvent)
            and e.body.episode == "transfer"
            and e.body.tool == "search"
        ):
            hits = next(g for g in json.loads(e.body.text())["groups"] if g["source"] == "insights")
            facts = [h["text"] for h in hits["hits"]]
            assert len(facts) == len(set(facts)), "a fact promoted twice means shared state"
    assert metrics(ledger, "r")["transfer_rate"] == (4, 4)


def test_the_stage_prompts_carry_the_answer_convention():
    for stage in ("recall", "transfer", "update_recall", "abstain"):
        assert "FINAL ANSWER:" in SYSTEM[stage] and "INSUFFICIENT INFORMATION" in SYSTEM[stage]


def test_the_budget_refuses_calls_and_the_agent_still_answers(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, ["bl-keystone-region"], budget=1)
    assert main(["run", "--protocols", path, "--ledger", ledger, "--run-id", "b"]) == 0
    evs = [e for e, _ in events(ledger, "b")]
    recall = next(
        e for e in evs if isinstance(e, EpisodeFinishedEvent) and e.body.episode == "recall"
    )
    assert recall.body.budget_exhausted and recall.body.tool_calls == 1
    assert recall.body.final_answer == "FINAL ANSWER: INSUFFICIENT INFORMATION"
    assert metrics(ledger, "b")["personal_recall"] == (0, 1)


def test_the_fake_model_agent_records_model_calls_by_request_hash(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, ["bl-keystone-region"])
    assert (
        main(["run", "--protocols", path, "--ledger", ledger, "--run-id", "f", "--agent", "fake:0"])
        == 0
    )
    calls = [e for e, _ in events(ledger, "f") if isinstance(e, ModelCallEvent)]
    assert len(calls) >= 10
    for c in calls:
        assert c.body.request_hash == request_hash(c.body.request)
        assert c.body.usage["input_tokens"] > 0
    assert metrics(ledger, "f")["full_lifecycle"] == (1, 1)


def test_the_scripted_agent_answers_only_when_the_fact_surfaced():
    p = protocols.load(protocols.LIFECYCLE_DIR).by_id()["bl-keystone-region"]
    agent = ScriptedAgent()
    ep = Episode("recall", SYSTEM["recall"], p.recall.prompt, p, 15)
    first = agent.decide(ep, [])
    assert first.tool_calls[0].name == "search"
    miss = agent.decide(ep, [{"role": "tool", "text": '{"groups": []}'}])
    assert miss.text == "FINAL ANSWER: INSUFFICIENT INFORMATION" and not miss.tool_calls
    hit = agent.decide(ep, [{"role": "tool", "text": json.dumps({"t": p.fact})}])
    assert (
        hit.tool_calls[0].name == "trino_query"
        and hit.tool_calls[0].arguments["sql"] == p.recall.query
    )
    # The peer's trino_query result: rows keyed by column, enrichment text appended.
    rows = json.dumps({"columns": [{"name": "region", "type": "VARCHAR"}],
                       "rows": [{"region": "North"}]}) + '\n{"semantic_context": {}}'  # fmt: skip
    done = agent.decide(ep, [{"role": "tool", "text": p.fact}, {"role": "tool", "text": rows}])
    assert done.text == "FINAL ANSWER: North"
    abstain = Episode("abstain", SYSTEM["abstain"], p.abstain.prompt, p, 15)
    assert agent.decide(abstain, [{"role": "tool", "text": p.fact}]).text.endswith(
        "INSUFFICIENT INFORMATION"
    )


def test_the_scripted_agent_answers_a_protocol_without_a_query_as_an_oracle():
    p = protocols.load(protocols.LIFECYCLE_DIR).by_id()["bl-keystone-region"]
    bare = msgspec.structs.replace(p, recall=msgspec.structs.replace(p.recall, query=""))
    ep = Episode("recall", SYSTEM["recall"], p.recall.prompt, bare, 15)
    hit = ScriptedAgent().decide(ep, [{"role": "tool", "text": p.fact}])
    assert hit.text == f"FINAL ANSWER: {p.recall.grading.aliases[0]}" and not hit.tool_calls


def test_the_fake_model_waits_its_delay_per_call():
    p = protocols.load(protocols.LIFECYCLE_DIR).by_id()["bl-keystone-region"]
    agent = FakeModelAgent(0.05)
    ep = Episode("teach", SYSTEM["teach"], p.teach.prompt, p, 15)

    async def two() -> float:
        loop = asyncio.get_running_loop()
        start = loop.time()
        await asyncio.gather(agent.next_turn(ep, [], []), agent.next_turn(ep, [], []))
        return loop.time() - start

    assert 0.05 <= asyncio.run(two()) < 0.5  # concurrent calls overlap


class Flaky:
    """ASGI wrapper: answers 503 to the first ``n`` requests whose path starts with ``prefix``,
    sparing the preflight's count of what the platform already holds (``per_page=1``): the
    faults are meant for the units' calls."""

    def __init__(self, app, prefix: str, n: int) -> None:
        self.app, self.prefix, self.left = app, prefix, n

    async def __call__(self, scope, receive, send):
        counting = scope.get("query_string", b"") == b"per_page=1"
        if (scope["type"] == "http" and scope["path"].startswith(self.prefix) and self.left > 0
                and not counting):  # fmt: skip
            self.left -= 1
            await JSONResponse({"error": "injected"}, status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


def external(prefix: str, n: int, pool: int = 40):
    app = build_app(Platform(), Keyring("adm-key-123", "poolkey", pool))
    server = LoopbackServer(Flaky(app, prefix, n))
    server.start()
    return server


def run_external(server, protocols_path: str, ledger: str, run_id: str, *extra: str) -> int:
    """``benchledger run`` against ``server`` as an external platform, then stop the server."""
    try:
        return main(
            [
                "run",
                "--protocols",
                protocols_path,
                "--ledger",
                ledger,
                "--run-id",
                run_id,
                "--platform",
                server.url,
                "--admin-key",
                "adm-key-123",
                "--pool-base",
                "poolkey",
                "--pool-size",
                "40",
                *extra,
            ]
        )
    finally:
        server.stop()


def test_transient_5xx_is_retried_and_recorded(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    server = external("/api/v1/admin/knowledge/insights", 2)
    assert run_external(server, subset(tmp_path, ["bl-keystone-region"]), ledger, "x") == 0
    evs = [e for e, _ in events(ledger, "x")]
    errors = [e for e in evs if isinstance(e, InfraErrorEvent)]
    assert [(e.body.error, e.body.retry, e.body.retryable) for e in errors] == [
        ("http_5xx", 0, True),
        ("http_5xx", 1, True),
    ]
    assert metrics(ledger, "x")["capture_rate"] == (1, 1)


def test_a_unit_that_keeps_failing_ends_with_an_error_and_is_excluded(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    server = external("/api/v1/admin/knowledge/changesets", 10_000)
    # Sealed as it is (a run with infra-failed units is otherwise left unsealed for a retry).
    assert run_external(server, subset(tmp_path, SUBSET[:3]), ledger, "y",
                        "--seal-despite-infra") == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "2 infra-failed, 0 harness-failed (excluded from rates)" in out
    evs = [e for e, _ in events(ledger, "y")]
    finished = [e for e in evs if isinstance(e, UnitFinishedEvent)]
    assert sorted(bool(e.body.error) for e in finished) == [False, True, True]
    m = metrics(ledger, "y")
    assert m["capture_rate"] == (1, 1) and m["pass_k"] == (1, 3)  # failures count in pass^k


def test_a_run_whose_units_all_infra_fail_exits_1_and_lists_them(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    server = external("/api/v1/admin/knowledge/insights", 10_000)
    assert run_external(server, subset(tmp_path, SUBSET[:2]), ledger, "z",
                        "--seal-despite-infra") == 1  # fmt: skip
    out = capsys.readouterr().out
    assert out.count("infra-failed: z/") == 2 and "run FAILED" in out
    assert main(["verify", "z", "--ledger", ledger]) == 0  # sealed: what happened is kept


def test_an_external_platform_without_reset_is_coupled(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    server = external("/nothing", 0)
    assert run_external(server, subset(tmp_path, SUBSET[:1]), ledger, "c", "--k", "2") == 0
    assert "COUPLED" in capsys.readouterr().out
    run = next(e for e, _ in events(ledger, "c") if isinstance(e, RunStartedEvent))
    assert run.body.coupled is True


def test_a_reset_command_runs_between_passes_and_the_run_is_not_coupled(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    marker = tmp_path / "resets"
    server = external("/nothing", 0)
    code = run_external(
        server,
        subset(tmp_path, SUBSET[:1]),
        ledger,
        "rc",
        "--k",
        "3",
        "--reset-cmd",
        f"echo x >> {marker}",
    )
    assert code == 0 and "COUPLED" not in capsys.readouterr().out
    assert marker.read_text() == "x\nx\n"  # between passes 1-2 and 2-3
    run = next(e for e, _ in events(ledger, "rc") if isinstance(e, RunStartedEvent))
    assert run.body.coupled is False and run.body.record.reset_program == "echo"


FAILING_RESETS = [
    # (the reset command, the secret its error output carries)
    ("echo 'curl: 401 Authorization: Bearer adm-key-123' >&2; exit 3", "adm-key-123"),
    ("RESET_TOKEN=tok-5ecret-0123456789 sh -c 'echo \"denied: $RESET_TOKEN\" >&2; exit 3'",
     "tok-5ecret-0123456789"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("cmd", "secret"), FAILING_RESETS, ids=["the-admin-key", "a-token-of-the-command"]
)
def test_a_failing_reset_commands_output_is_scrubbed_before_it_is_shown(
    tmp_path, capsys, cmd, secret
):
    ledger = str(tmp_path / "l.sqlite")
    server = external("/nothing", 0)
    code = run_external(
        server, subset(tmp_path, SUBSET[:1]), ledger, "rf", "--k", "2", "--reset-cmd", cmd
    )
    out, err = capsys.readouterr()
    assert code != 0
    assert "--reset-cmd exited 3: " in err and "<redacted>" in err
    assert secret not in out + err


def test_the_pool_check_refuses_with_one_line(tmp_path, capsys):
    code = main(
        [
            "run",
            "--protocols",
            subset(tmp_path),
            "--ledger",
            str(tmp_path / "l.sqlite"),
            "--platform",
            "http://127.0.0.1:9",
            "--admin-key",
            "a",
            "--pool-base",
            "b",
            "--pool-size",
            "10",
            "--k",
            "2",
        ]
    )
    err = capsys.readouterr().err.strip().split("\n")
    assert code == 2 and len(err) == 1
    assert "needs 16 identities (4 protocols x k=2 x 2) plus a retry margin of 4" in err[0]
    assert "--pool-size is 10" in err[0]


def test_secrets_never_reach_the_ledger_a_bundle_a_report_or_a_log(tmp_path, forks):
    admin, base, model = "sk-admin-PLANTED-3141", "PLANTEDPOOL", "sk-ant-PLANTED-2718"
    ledger = str(tmp_path / "l.sqlite")
    env = {"ANTHROPIC_API_KEY": model, "OPENAI_API_KEY": model}
    logs = ""
    for argv in (
        [
            "run",
            "--protocols",
            subset(tmp_path, SUBSET[:2]),
            "--ledger",
            ledger,
            "--run-id",
            "s",
            "--admin-key",
            admin,
            "--pool-base",
            base,
        ],
        ["export", "s", "-o", str(tmp_path / "s.jsonl"), "--ledger", ledger],
        ["report", "s", "--ledger", ledger, "--format", "html", "-o", str(tmp_path / "s.html")],
        ["report", "s", "--ledger", ledger, "--format", "json", "-o", str(tmp_path / "s.json")],
        ["audit", "s", "capture_rate", "--ledger", ledger],
        ["log", "s", "--ledger", ledger],
    ):
        done = forks.run(argv, env=env)  # every byte it writes to stdout and stderr
        assert done.returncode == 0, done.stderr
        logs += done.stdout + done.stderr
    stored = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.is_file())
    assert b"pool:001" in stored  # identities are recorded, as pool index and email
    for secret in (admin, base, model):
        assert secret.encode() not in stored, secret
        assert secret not in logs, secret


def _unit_lines(proc, until: int) -> None:
    for line in proc.stdout:
        if line.startswith(f"unit {until}/"):
            return
    raise AssertionError("the run ended before reaching the kill point")


def _finished_once(path: str, run_id: str) -> collections.Counter:
    evs = [e for e, _ in events(path, run_id)]
    starts = {
        e.stream: (e.body.protocol_id, e.body.attempt)
        for e in evs
        if isinstance(e, UnitStartedEvent)
    }
    return collections.Counter(starts[e.stream] for e in evs if isinstance(e, UnitFinishedEvent))


@pytest.mark.slow
def test_a_killed_run_resumes_to_the_same_metrics_as_an_uninterrupted_one(tmp_path, capsys):
    ids = [
        "bl-keystone-region",
        "bl-margin-region",
        "bl-quiet-market",
        "bl-refund-hotspot",
        "bl-anchor-tier",
        "bl-whale-orders",
        "bl-focus-region",
        "bl-pilot-region",
        "bl-showcase-region",
        "bl-bulk-order",
    ]
    path = subset(tmp_path, ids)
    killed = str(tmp_path / "killed.sqlite")
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchledger",
            "run",
            "--protocols",
            path,
            "--ledger",
            killed,
            "--run-id",
            "k",
            "--concurrency",
            "2",
        ],
        stdout=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    try:
        _unit_lines(proc, 3)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    assert proc.returncode == -signal.SIGKILL
    before = _finished_once(killed, "k")
    assert 3 <= sum(before.values()) < 10
    assert main(["run", "--resume", "k", "--ledger", killed]) == 0
    assert main(["verify", "k", "--ledger", killed]) == 0
    after = _finished_once(killed, "k")
    assert after == collections.Counter({(pid, 1): 1 for pid in ids})
    abandoned = [e for e, _ in events(killed, "k") if isinstance(e, UnitAbandonedEvent)]
    assert all(e.body.resumed_as.endswith("-r1") for e in abandoned)
    whole = str(tmp_path / "whole.sqlite")
    assert main(["run", "--protocols", path, "--ledger", whole, "--run-id", "w"]) == 0
    assert metrics(killed, "k") == metrics(whole, "w")


@pytest.mark.slow
def test_ctrl_c_stops_cleanly_and_prints_the_resume_command(tmp_path, capsys):
    path = subset(tmp_path, SUBSET * 1)
    ledger = str(tmp_path / "l.sqlite")
    # A later-sorting run already in the ledger: the hint must name the interrupted one.
    (tmp_path / "one").mkdir()
    one = subset(tmp_path / "one", SUBSET[:1])
    assert main(["run", "--protocols", one, "--ledger", ledger, "--run-id", "zz-other"]) == 0
    shutil.copy(os.path.join(protocols.LIFECYCLE_DIR, "bl-whale-orders.yaml"), path)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "benchledger",
            "run",
            "--protocols",
            path,
            "--ledger",
            ledger,
            "--concurrency",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
    )
    _unit_lines(proc, 1)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    store = open_store(ledger)
    run_id = next(r for r in store.run_ids() if r != "zz-other")
    store.close()
    assert f"benchledger run --resume {run_id} --ledger {ledger}" in err and "Traceback" not in err
    assert main(["run", "--resume", run_id, "--ledger", ledger]) == 0
    assert sum(_finished_once(ledger, run_id).values()) == 5


def test_resuming_a_sealed_run_is_refused(tmp_path, capsys):
    ledger = str(tmp_path / "l.sqlite")
    assert (
        main(
            [
                "run",
                "--protocols",
                subset(tmp_path, SUBSET[:1]),
                "--ledger",
                ledger,
                "--run-id",
                "d",
            ]
        )
        == 0
    )
    capsys.readouterr()
    assert main(["run", "--resume", "d", "--ledger", ledger]) == 2
    assert "already sealed" in capsys.readouterr().err


def test_bench_run_prints_both_wall_times_and_the_speed_up(tmp_path, capsys):
    path = subset(tmp_path, SUBSET[:2])
    assert (
        main(["bench", "run", "--delay", "0", "--concurrency", "2", "--protocols", path, "--json"])
        == 0
    )
    report = json.loads(capsys.readouterr().out.strip().split("\n")[-1])
    assert report["serial"]["units"] == report["parallel"]["units"] == 2
    assert report["serial"]["model_calls"] > 0 and report["speedup"] > 0


def test_the_peers_protocols_on_the_peers_pack_score_full_lifecycle_with_the_scripted_agent(
    tmp_path, capsys, monkeypatch
):
    """The README's peer command (`<!-- peer-run -->`), as written, into a temporary ledger."""
    from tests.test_readme import ROOT, _block_commands

    [(_, readme)] = _block_commands("<!-- peer-run -->")
    # Its paths are relative to a checkout beside ../shared; a clone elsewhere runs it from
    # the shared folder itself (shared/../shared is shared), which the run writes nothing to.
    beside = os.path.isdir(os.path.join(ROOT, "..", "shared", "peers", "mcp-data-platform"))
    monkeypatch.chdir(ROOT if beside else os.path.dirname(os.path.dirname(peer_dir())))
    ledger = str(tmp_path / "l.sqlite")
    assert main([*readme, "--ledger", ledger, "--run-id", "peer"]) == 0
    m = metrics(ledger, "peer")
    assert m["full_lifecycle"] == (30, 30) and m["transfer_rate"] == (20, 20)
    assert m["update_correctness"] == (10, 10) and m["duplicate_rate"] == (0, 10)
    run = next(e for e, _ in events(ledger, "peer") if isinstance(e, RunStartedEvent))
    assert run.body.protocol_set_hash and run.body.record.pack.endswith("seed")
    assert len(run.body.record.pack_hash) == 64
