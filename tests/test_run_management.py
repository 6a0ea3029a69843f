"""Managing runs: the `runs` listing, subset runs and re-running infra-failed units."""

from __future__ import annotations

import asyncio
import json
import os
import time
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.cli.watch import live_frames
from benchledger.harness.driver import RunDriver
from benchledger.harness.record import RunConfig, read_record
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    InfraErrorEvent,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
)
from benchledger.ledger.keys import load_private_key, write_key_pair
from benchledger.ledger.signing import Signer
from benchledger.projections.fold import LiveView, fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites import lookup
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from tests.conftest import external_config, protocol_subset, refplatform_server, write_run
from tests.conftest import interrupted_after as run_until
from tests.sample import counter_clock

IDS = ["bl-focus-region", "bl-keystone-region", "bl-margin-region"]
ADMIN, POOL = "adm-key-123", "poolkey"
INSIGHTS = "/api/v1/admin/knowledge/insights"  # the capture read-back every unit makes


class NoWait:
    """The wall clock, with retry backoffs that do not wait."""

    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(0)


@pytest.fixture
def platform():
    with refplatform_server(ADMIN, POOL, outage=INSIGHTS) as server:
        yield server


def external(url: str, **kw: Any) -> RunConfig:
    return external_config(url, ADMIN, POOL, **kw)


def protocol_set(tmp_path: Any, ids: list[str] = IDS) -> str:
    return protocol_subset(tmp_path, ids)


def platform_args(url: str) -> list[str]:
    return ["--platform", url, "--admin-key", ADMIN, "--pool-base", POOL, "--pool-size", "60"]


def unit_streams(ledger: Ledger, run_id: str) -> dict[str, list[Any]]:
    out: dict[str, list[Any]] = {}
    for event, _ in ledger.events(run_id):
        if event.stream != run_id:
            out.setdefault(event.stream, []).append(event)
    return out


# -- runs -----------------------------------------------------------------------------------


def test_runs_json_lists_each_runs_start_agent_platform_units_seal_and_signature_newest_first(
    tmp_path, platform, capsys
):
    path, ledger_file = protocol_set(tmp_path, IDS[:1]), str(tmp_path / "l.sqlite")
    key, _, _ = write_key_pair(str(tmp_path))
    first, later = 1_780_000_000_000_000_000, 1_790_000_000_000_000_000
    # The older run sorts last by name too, so newest-first is not name order.
    for run_id, start, signer in (("a-older", first, None),
                                  ("z-newer", later, Signer(load_private_key(key)))):  # fmt: skip
        ledger = Ledger(open_store(ledger_file), clock=counter_clock(start), signer=signer)
        cfg = external(platform.url, protocols_path=path, run_id=run_id)
        assert asyncio.run(RunDriver(ledger, cfg).execute()).root
        ledger.store.close()
    capsys.readouterr()
    assert main(["runs", "--json", "--ledger", ledger_file]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in rows] == ["z-newer", "a-older"]
    newer, older = rows
    assert newer["started_at"] == "2026-09-21T14:13:20Z"  # 1_790_000_000 s
    assert older["started_at"] == "2026-05-28T20:26:40Z"  # 1_780_000_000 s
    assert newer["agent"] == "scripted" and newer["platform"].startswith("mcp-data-platform ")
    assert (newer["units_finished"], newer["units_planned"]) == (1, 1)
    assert (newer["sealed"], newer["signed"], older["sealed"], older["signed"]) == (
        True, True, True, False
    )  # fmt: skip
    assert newer["subset"] is False and newer["selection"] == ""
    info = Ledger(open_store(ledger_file)).run_info("a-older")
    assert (older["streams"], older["events"], older["root"]) == (2, info.events, info.root)
    assert main(["runs", "--ledger", ledger_file]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["run", "started"]
    assert lines[1].startswith("z-newer") and "sealed, signed" in lines[1]
    assert lines[2].startswith("a-older") and "sealed, unsigned" in lines[2]
    assert info.root in lines[2] and "1/1" in lines[2]


def test_runs_counts_an_unsealed_runs_finished_units_from_its_stream_heads(
    tmp_path, platform, capsys
):
    ledger_file = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(ledger_file))
    cfg = external(platform.url, protocols_path=protocol_set(tmp_path), run_id="cut",
                   concurrency=1)  # fmt: skip
    interrupted_after(ledger, cfg, 1)
    ledger.store.close()
    assert main(["runs", "--json", "--ledger", ledger_file]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["units_finished"], row["units_planned"], row["sealed"]) == (1, 3, False)
    assert row["root"] == "" and row["signed"] is False


# -- subset runs ----------------------------------------------------------------------------


def test_a_subset_run_records_its_selection_runs_only_it_and_is_labelled_and_not_gated(
    tmp_path, platform, capsys
):
    path, ledger_file = protocol_set(tmp_path), str(tmp_path / "l.sqlite")
    run = ["run", "--protocols", path, "--ledger", ledger_file, *platform_args(platform.url)]
    assert main([*run, "--run-id", "full"]) == 0
    picked = ["--protocol", IDS[2], "--protocol", IDS[1], "--limit", "1"]
    assert main([*run, "--run-id", "part", *picked]) == 0
    out = capsys.readouterr().out
    assert "SUBSET: 1 of 3 protocols" in out
    ledger = Ledger(open_store(ledger_file))
    record = read_record(ledger, "part")
    assert (record.only, record.limit, record.set_items) == ([IDS[2], IDS[1]], 1, 3)
    # The first of the named protocols in set order, and nothing else.
    assert [(u.unit_id, u.attempt) for u in record.units] == [(IDS[1], 1)]
    streams = unit_streams(ledger, "part").values()
    started = [
        e.body.protocol_id for evs in streams for e in evs if isinstance(e, UnitStartedEvent)
    ]
    assert started == [IDS[1]]

    assert main(["report", "part", "--ledger", ledger_file]) == 0
    head = capsys.readouterr().out.splitlines()[:8]
    assert any(line.startswith("subset") and "SUBSET: 1 of 3 protocols" in line for line in head)
    assert main(["report", "full", "--ledger", ledger_file]) == 0
    assert "SUBSET" not in capsys.readouterr().out
    assert main(["runs", "--ledger", ledger_file]) == 0
    lines = {line.split()[0]: line for line in capsys.readouterr().out.splitlines()[1:]}
    assert "SUBSET: 1 of 3 protocols (--protocol bl-margin-region, bl-keystone-region; " \
        "--limit 1)" in lines["part"]  # fmt: skip
    assert "SUBSET" not in lines["full"]

    for candidate, baseline in (("part", "full"), ("full", "part")):
        assert main(["gate", candidate, "--baseline", baseline, "--ledger", ledger_file]) == 2
        err = capsys.readouterr().err.strip()
        assert len(err.splitlines()) == 1 and "differ in subset" in err
        assert "the candidate part is a subset run" in err or "the baseline part is a subset" in err


@pytest.mark.parametrize(
    ("extra", "says"),
    [
        (["--protocol", "bl-nope"], "--protocol bl-nope: no protocol with that id in"),
        (["--limit", "0"], "--limit must be at least 1, not 0"),
        (["--limit", "-3"], "--limit must be at least 1, not -3"),
        (["--suite", "provenance", "--protocol", "pv-nope"], "--protocol pv-nope: no case"),
        (["--retry-infra"], "--retry-infra re-runs an unsealed run's infra-failed units"),
    ],
    ids=["unknown-protocol", "limit-zero", "limit-negative", "unknown-case", "retry-no-resume"],
)
def test_an_unusable_selection_is_one_line_exit_2_and_writes_nothing(tmp_path, extra, says, capsys):
    ledger_file = str(tmp_path / "l.sqlite")
    argv = ["run", "--ledger", ledger_file, *extra]
    if "--suite" not in extra:
        argv += ["--protocols", protocol_set(tmp_path)]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and says in err and "Traceback" not in err
    assert not os.path.exists(ledger_file)


# -- --retry-infra ------------------------------------------------------------------------


def interrupted_after(ledger: Ledger, cfg: RunConfig, units: int, **kw: Any) -> None:
    """Run until ``units`` units finished, then cancel the run; backoffs do not wait."""
    run_until(ledger, cfg, units, clock=NoWait(), **kw)


def test_retry_infra_reruns_exactly_the_infra_failed_units_and_keeps_the_failed_attempts(
    tmp_path, platform, capsys
):
    ledger_file = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(ledger_file))
    cfg = external(platform.url, protocols_path=protocol_set(tmp_path), run_id="flaky",
                   concurrency=1)  # fmt: skip

    def outage_after_first(n: int) -> None:
        platform.outage.down = n >= 1  # the platform's insights API goes down after unit 1

    # Unit 1 passes, unit 2 infra-fails (every retry of its capture read-back gets a 503),
    # then the run is stopped before unit 3 finishes.
    interrupted_after(ledger, cfg, 2, after=outage_after_first)
    before = unit_streams(ledger, "flaky")
    ends = {s: [e for e in evs if isinstance(e, UnitFinishedEvent)] for s, evs in before.items()}
    failed = [s for s, got in ends.items() if any(e.body.error for e in got)]
    passed = [s for s, got in ends.items() if any(not e.body.error for e in got)]
    assert len(failed) == 1 and len(passed) == 1
    assert any(isinstance(e, InfraErrorEvent) for e in before[failed[0]])
    ledger.store.close()

    platform.outage.down = False  # the outage is over
    resume = ["run", "--resume", "flaky", "--ledger", ledger_file, "--platform", platform.url,
              "--admin-key", ADMIN, "--pool-base", POOL]  # fmt: skip
    assert main([*resume, "--retry-infra"]) == 0
    assert "run flaky sealed" in capsys.readouterr().out
    ledger = Ledger(open_store(ledger_file))
    after = unit_streams(ledger, "flaky")
    retried = f"{failed[0]}-r1"
    # The failed attempt is kept whole, then marked as re-run; the passed unit is untouched.
    assert after[failed[0]][: len(before[failed[0]])] == before[failed[0]]
    (mark,) = after[failed[0]][len(before[failed[0]]) :]
    assert isinstance(mark, UnitAbandonedEvent) and mark.body.resumed_as == retried
    assert after[passed[0]] == before[passed[0]]
    start = after[retried][0]
    assert isinstance(start, UnitStartedEvent) and start.body.resumes == failed[0]
    new = set(after) - set(before)
    assert retried in new and len(new) == 2  # the retry and the never-finished third unit
    assert all(not e.body.error for s in new for e in after[s] if isinstance(e, UnitFinishedEvent))

    card = scorecard([fold(LifecycleFold(), from_ledger(ledger, "flaky").events)])
    assert card.harness_failures == 0 and card.metrics["pass_k"].num == 3
    assert card.metrics["full_lifecycle"].units == tuple(sorted(new | set(passed)))
    assert main(["verify", "flaky", "--ledger", ledger_file]) == 0
    assert main(["log", "flaky", failed[0].removeprefix("flaky/"), "--ledger", ledger_file]) == 0
    log = capsys.readouterr().out
    assert "infra_error" in log and "unit_finished" in log and "unit_abandoned" in log

    assert main([*resume, "--retry-infra"]) == 2  # sealed: final
    err = capsys.readouterr().err
    assert "a sealed run is final" in err and len(err.strip().splitlines()) == 1


def test_retry_infra_on_a_sealed_run_names_its_infra_failed_units_for_a_new_run(
    tmp_path, platform, capsys
):
    ledger_file = str(tmp_path / "l.sqlite")
    platform.outage.down = True
    ledger = Ledger(open_store(ledger_file))
    cfg = external(platform.url, protocols_path=protocol_set(tmp_path, IDS[:1]), run_id="s",
                   seal_despite_infra=True)  # fmt: skip
    assert asyncio.run(RunDriver(ledger, cfg, clock=NoWait()).execute()).root  # sealed, failed
    before = len(list(ledger.events("s")))
    ledger.store.close()
    argv = ["run", "--resume", "s", "--retry-infra", "--ledger", ledger_file,
            "--admin-key", ADMIN, "--pool-base", POOL]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "a sealed run is final" in err and f"benchledger run --protocol {IDS[0]}" in err
    assert len(list(Ledger(open_store(ledger_file)).events("s"))) == before


def test_a_finished_unit_abandoned_for_a_retry_is_unfinished_until_its_retry_finishes():
    from benchledger.ledger.errors import UnitsMissing
    from benchledger.ledger.events import (
        PlannedUnit,
        PlatformRecord,
        RunRecord,
        RunStartedBody,
        UnitAbandonedBody,
        UnitFinishedBody,
        UnitStartedBody,
    )

    ledger = Ledger(open_store(":memory:"))
    record = RunRecord(suite="lifecycle", platform=PlatformRecord(kind="embedded"),
                       units=[PlannedUnit("p", 1)])  # fmt: skip
    ledger.start_run("r", RunStartedBody(suite="lifecycle", record=record))
    w = ledger.new_stream("r/p/1")
    w.append(UnitStartedBody(protocol_id="p", attempt=1))
    w.append(UnitFinishedBody(error="capture: http_5xx: 503"))
    ledger.commit(w)
    assert ledger.unfinished("r") == []
    w.append(UnitAbandonedBody(reason="infra-failed; re-run by --retry-infra", resumed_as="x"))
    ledger.commit(w)
    assert ledger.unfinished("r") == ["p/1"]
    with pytest.raises(UnitsMissing):
        ledger.seal_complete("r")  # the retry never ran: the unit must not count as done
    retry = ledger.new_stream("r/p/1-r1")
    retry.append(UnitStartedBody(protocol_id="p", attempt=1, resumes="r/p/1"))
    retry.append(UnitFinishedBody())
    ledger.commit(retry)
    assert ledger.unfinished("r") == [] and ledger.seal_complete("r")


# -- a finished run with infra-failed units -------------------------------------------------

# IDS[1] is unit 2 of pass 1, so its teacher is pool identity 3: every capture read-back
# of that unit (and of no other) names it in its query.
KEYSTONE_TEACHER = b"bench-agent-003"


def run_with_a_platform_hiccup(tmp_path: Any, platform: Any, capsys: Any,
                               *extra: str) -> tuple[str, int, str, str]:  # fmt: skip
    """A CLI run of IDS in which the platform fails every capture read-back of IDS[1]'s
    unit (after its retries); (ledger file, exit code, stdout, stderr)."""
    ledger_file = str(tmp_path / "l.sqlite")
    platform.outage.down, platform.outage.only = True, KEYSTONE_TEACHER
    argv = ["run", "--protocols", protocol_set(tmp_path), "--run-id", "hiccup", "--ledger",
            ledger_file, *platform_args(platform.url), *extra]  # fmt: skip
    code = main(argv)
    platform.outage.down, platform.outage.only = False, b""  # the platform recovered
    out, err = capsys.readouterr()
    return ledger_file, code, out, err


def retry_line(ledger_file: str, units: str) -> str:
    return (
        f"run hiccup: 1 unit ended in infrastructure errors ({units}); not sealed. Retry them "
        f"with `benchledger run --resume hiccup --retry-infra --ledger {ledger_file}`, or seal "
        f"the run as it is with `benchledger seal hiccup --ledger {ledger_file}`"
    )


def test_a_run_that_finishes_with_infra_failed_units_is_left_unsealed_saying_how_to_retry_or_seal(
    tmp_path, platform, capsys
):
    ledger_file, code, out, err = run_with_a_platform_hiccup(tmp_path, platform, capsys)
    failed = f"{IDS[1]}/1"
    assert code == 1
    assert err.strip() == retry_line(ledger_file, failed)
    assert f"infra-failed: hiccup/{failed}: capture:" in out and "run hiccup sealed" not in out
    ledger = Ledger(open_store(ledger_file))
    assert ledger.run_info("hiccup").root == "" and ledger.unfinished("hiccup") == []
    ledger.store.close()

    assert main(["runs", "--json", "--ledger", ledger_file]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert (row["sealed"], row["units_finished"], row["units_planned"]) == (False, 3, 3)
    assert row["infra_failed_units"] == [failed]
    assert main(["runs", "--ledger", ledger_file]) == 0
    line = capsys.readouterr().out.splitlines()[1]
    assert f"UNSEALED: 1 infra-failed ({failed})" in line

    assert main(["report", "hiccup", "--ledger", ledger_file]) == 0
    banner = capsys.readouterr().out.splitlines()[0]
    assert banner.startswith("UNSEALED: 3 of 3 planned units finished")
    assert f"1 in an infrastructure error ({failed})" in banner
    assert "interrupted" not in banner and "--retry-infra" in banner

    assert main(["gate", "hiccup", "--baseline", "hiccup", "--ledger", ledger_file]) == 2
    err = capsys.readouterr().err
    assert (
        f"run hiccup is not sealed: 3 of 3 planned units finished, 1 in an infrastructure "
        f"error ({failed}); retry them with `benchledger run --resume hiccup --retry-infra`" in err
    )

    view = LiveView(open_store(ledger_file), LifecycleFold(), run_id="hiccup")
    label = next(live_frames(view, lookup("lifecycle"), "table", lambda: None)).splitlines()[0]
    assert label.startswith("LIVE run hiccup: unsealed, 3 of 3 planned units finished, 1 in "
                            f"an infrastructure error ({failed})")  # fmt: skip


def test_retry_infra_reruns_exactly_a_finished_runs_infra_failed_units_until_none_is_left_and_seals(
    tmp_path, platform, capsys
):
    ledger_file, code, _, _ = run_with_a_platform_hiccup(tmp_path, platform, capsys)
    assert code == 1
    before = unit_streams(Ledger(open_store(ledger_file)), "hiccup")
    failed = f"hiccup/{IDS[1]}/1"
    resume = ["run", "--resume", "hiccup", "--retry-infra", "--ledger", ledger_file,
              "--platform", platform.url, "--admin-key", ADMIN, "--pool-base", POOL]  # fmt: skip

    platform.outage.down = True  # down again for the retry: it fails too, and says so again
    assert main(resume) == 1
    out, err = capsys.readouterr()
    assert err.strip() == retry_line(ledger_file, f"{IDS[1]}/1") and "run hiccup sealed" not in out
    platform.outage.down = False
    assert main(resume) == 0
    assert "run hiccup sealed" in capsys.readouterr().out

    ledger = Ledger(open_store(ledger_file))
    after = unit_streams(ledger, "hiccup")
    assert set(after) - set(before) == {f"{failed}-r1", f"{failed}-r2"}
    for old, new in ((failed, f"{failed}-r1"), (f"{failed}-r1", f"{failed}-r2")):
        assert (
            isinstance(after[old][-1], UnitAbandonedEvent) and after[old][-1].body.resumed_as == new
        )
        assert after[new][0].body.resumes == old
    assert after[failed][:-1] == before[failed]  # the failed attempt is kept whole
    for stream in set(before) - {failed}:
        assert after[stream] == before[stream]  # the units that ran cleanly are untouched
    card = scorecard([fold(LifecycleFold(), from_ledger(ledger, "hiccup").events)])
    assert card.harness_failures == 0 and card.metrics["pass_k"].num == 3
    assert main(["verify", "hiccup", "--ledger", ledger_file]) == 0


@pytest.mark.parametrize("how", ["seal-command", "seal-despite-infra-option"])
def test_a_run_with_infra_failed_units_can_be_sealed_as_it_is_counting_them_as_harness_failures(
    tmp_path, platform, capsys, how
):
    extra = ["--seal-despite-infra"] if how == "seal-despite-infra-option" else []
    ledger_file, code, out, err = run_with_a_platform_hiccup(tmp_path, platform, capsys, *extra)
    if how == "seal-command":
        assert code == 1
        assert main(["seal", "hiccup", "--ledger", ledger_file]) == 0
        out = capsys.readouterr().out
    else:
        assert code == 0 and err == ""
    ledger = Ledger(open_store(ledger_file))
    root = ledger.run_info("hiccup").root
    assert root and f"run hiccup sealed, root {root}" in out
    card = scorecard([fold(LifecycleFold(), from_ledger(ledger, "hiccup").events)])
    assert card.harness_failures == 1 and card.metrics["pass_k"].num == 2
    ledger.store.close()
    assert main(["report", "hiccup", "--ledger", ledger_file]) == 0
    assert not capsys.readouterr().out.startswith(("UNSEALED", "INCOMPLETE"))
    assert main(["verify", "hiccup", "--root", root, "--ledger", ledger_file]) == 0


# -- one count of failed units ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("error", "infra", "ours"),
    [
        ("capture: transport: MCP session: connection reset", ["p001/1"], []),
        ("internal error in promote: BrokenResourceError: ", [], ["p001/1"]),
    ],
    ids=["infra-error", "error-of-ours"],
)
def test_the_scorecard_its_json_and_retry_infra_count_failed_units_alike(
    tmp_path, capsys, error, infra, ours
):
    ledger_file = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(ledger_file))
    units = {(f"p00{i}", 1): {"captured": True} for i in range(3)}
    write_run(ledger, "r", units, errors={("p001", 1): error}, seal=False)
    assert ledger.infra_failed("r") == infra  # what --retry-infra re-runs
    ledger.store.close()

    assert main(["report", "r", "--ledger", ledger_file]) == 0
    (line,) = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("units")]
    assert f"3 finished, {len(infra)} infra-failed, {len(ours)} harness-failed" in line
    assert main(["report", "r", "--ledger", ledger_file, "--format", "json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    done = doc["completeness"]
    assert (done["infra_failed_units"], done.get("harness_failed_units")) == (infra, ours)
    assert doc["harness_failures"] == len(infra) + len(ours) == 1


def test_retry_infra_on_a_sealed_run_names_its_harness_failed_units_as_not_retried(
    tmp_path, capsys
):
    ledger_file = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(ledger_file))
    units = {(f"p00{i}", 1): {"captured": True} for i in range(3)}
    errors = {("p001", 1): "internal error in promote: KeyError: 'x'"}
    write_run(ledger, "r", units, errors=errors, seal=True)
    ledger.store.close()
    code = main(["run", "--resume", "r", "--retry-infra", "--ledger", ledger_file])
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "no infra-failed units" in err and "1 harness-failed unit (p001)" in err, err


def test_retry_infra_on_a_sealed_run_says_how_to_run_its_infra_failed_protocols_again(
    tmp_path, capsys
):
    ledger_file = str(tmp_path / "l.sqlite")
    ledger = Ledger(open_store(ledger_file))
    units = {(f"p00{i}", a): {"captured": True} for i in range(3) for a in (1, 2)}
    errors = {("p001", 2): "capture: transport: MCP session: connection reset"}
    write_run(ledger, "r", units, errors=errors, seal=True)
    ledger.store.close()
    code = main(["run", "--resume", "r", "--retry-infra", "--ledger", ledger_file])
    err = capsys.readouterr().err
    assert code == 2 and "run its 1 infra-failed protocol(s) again" in err, err
    assert "--protocol p001" in err and "p000" not in err.split("again")[1], err
