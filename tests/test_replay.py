"""`benchledger replay`: verify first, re-derive, re-execute from the log, check a folder in CI."""

from __future__ import annotations

import asyncio
import dataclasses
import gzip
import os
import shutil
import socket
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.errors import InfraError
from benchledger.harness.peer.importer import import_peer
from benchledger.harness.platforms.base import CallResult
from benchledger.harness.platforms.provision import EmbeddedProvisioner, PlatformSpec
from benchledger.harness.probe import MEMORY as PROBE_MEMORY
from benchledger.harness.probe import ProbeReport
from benchledger.ledger import Ledger, UnusableInput, open_store
from benchledger.ledger.bundle import export_run, read_header, records
from benchledger.ledger.codec import decode_event
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    Event,
    GraderDecisionEvent,
    InfraErrorBody,
    ModelCallEvent,
    ProbeFinishedEvent,
    ReadBackBody,
    RunStartedEvent,
    SessionCallEvent,
    UnitStartedEvent,
    is_probe_stream,
)
from benchledger.ledger.verified import open_run
from benchledger.projections.suites.lifecycle import scorecard as lc
from benchledger.projections.suites.lifecycle.decisions import decide_unit
from benchledger.protocols import grading
from benchledger.replay.findings import first_difference
from benchledger.replay.levels import replay
from benchledger.replay.log_platform import LogPlatform
from benchledger.replay.tape import Tape, ToolDivergence
from tests.conftest import peer_dir

# Two page promotions, two updates: every stage. (A datahub-sink promotion has its own test.)
SUBSET = ["bl-core-cohort", "bl-margin-region", "bl-focus-region", "bl-showcase-region"]
DATAHUB_SINK = "bl-keystone-region"
AGENTS = {"scripted": "scripted", "fake": "fake:0"}


@dataclasses.dataclass
class Recorded:
    """The runs every test here replays: recorded once per module, never changed."""

    ledger_path: str
    protocols: str
    bundles: dict[str, str]  # run id -> exported bundle
    ledger: Ledger

    def events(self, run_id: str) -> list[Event]:
        return [e for e, _ in self.ledger.events(run_id)]


def protocol_folder(base: Any, ids: list[str] = SUBSET) -> str:
    folder = base / "protocols"
    folder.mkdir()
    for pid in ids:
        with open(os.path.join(protocols.LIFECYCLE_DIR, f"{pid}.yaml")) as fh:
            (folder / f"{pid}.yaml").write_text(fh.read())
    return str(folder)


@pytest.fixture(scope="module")
def recorded(tmp_path_factory) -> Iterator[Recorded]:
    base = tmp_path_factory.mktemp("replay")
    folder = protocol_folder(base)
    path = str(base / "l.sqlite")
    bundles = {}
    for run_id, agent in AGENTS.items():
        # A fresh platform per unit: what a live replay re-creates exactly.
        args = [
            "run",
            "--protocols",
            folder,
            "--ledger",
            path,
            "--run-id",
            run_id,
            "--agent",
            agent,
            "--platform-scope",
            "unit",
        ]
        assert main(args) == 0
        bundles[run_id] = str(base / f"{run_id}.jsonl")
        assert main(["export", run_id, "-o", bundles[run_id], "--ledger", path]) == 0
    led = Ledger(open_store(path))
    yield Recorded(path, folder, bundles, led)
    led.store.close()


def target(rec: Recorded, run_id: str, source: str) -> str:
    return rec.bundles[run_id] if source == "bundle" else run_id


@pytest.fixture
def no_network(monkeypatch) -> None:
    """Any attempt to open a connection fails the test: replay from the log needs none."""

    def refuse(self: socket.socket, address: Any) -> None:
        raise AssertionError(f"replay tried to connect to {address}")

    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket.socket, "connect_ex", refuse)


# -- zero divergences ---------------------------------------------------------------------------


@pytest.mark.parametrize("level", ["rederive", "full"])
@pytest.mark.parametrize("source", ["ledger", "bundle"])
@pytest.mark.parametrize("run_id", list(AGENTS))
def test_a_recorded_run_replays_with_zero_divergences(recorded, no_network, run_id, source, level):
    report = replay(target(recorded, run_id, source), level=level, ledger=lambda: recorded.ledger)
    assert report.ok, "\n".join(report.lines())
    assert report.mismatches == [] and report.failure is None
    episodes = sum(  # the units' (the probe's lifecycle episodes are its own)
        isinstance(e.body, EpisodeFinishedBody)
        for e in recorded.events(run_id)
        if hasattr(e, "body") and not is_probe_stream(e.stream)
    )
    if level == "full":
        # The probe too: its calls served from the log, its findings the recorded ones.
        assert report.compared == {"episodes": episodes, "units": len(SUBSET), "probe": 1}
    else:
        assert report.compared["trace hashes"] == episodes + len(SUBSET)
        assert report.compared["probe findings"] == 8  # 5 re-derived from its recorded calls
        # Every lifecycle metric, the retrieval ones (projections over search results) too.
        assert report.compared["decisions"] > 0 and report.compared["metrics"] == 33
        assert report.skipped["trace hashes not recorded"] == 0


def test_every_episode_and_unit_of_a_live_run_records_its_trace_hash(recorded):
    for run_id in AGENTS:
        for e in recorded.events(run_id):
            if type(e).__name__ in ("EpisodeFinishedEvent", "UnitFinishedEvent"):
                assert len(e.body.trace_hash) == 64, (e.stream, e.seq)  # type: ignore[attr-defined]


def test_the_fake_model_run_replays_served_from_the_log_by_request_hash(recorded):
    calls = [e for e in recorded.events("fake") if isinstance(e, ModelCallEvent)]
    assert calls, "the fake-model run records its model calls"
    report = replay(recorded.bundles["fake"], level="full")
    assert report.ok and report.compared["episodes"] > 0


@pytest.mark.parametrize("level", ["rederive", "full"])
def test_the_command_line_replays_a_run_and_a_bundle_and_exits_0(recorded, capsys, level):
    args = ["replay", "scripted", "--level", level, "--ledger", recorded.ledger_path]
    assert main(args) == 0
    assert main(["replay", recorded.bundles["fake"], "--level", level]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"ok {level} scripted: compared ")
    assert out[1].startswith(f"ok {level} {recorded.bundles['fake']}: compared ")


def test_a_datahub_sink_promotion_replays_from_the_log(tmp_path):
    folder = protocol_folder(tmp_path, [DATAHUB_SINK])
    path = str(tmp_path / "l.sqlite")
    assert main(["run", "--protocols", folder, "--ledger", path, "--run-id", "dh"]) == 0
    led = Ledger(open_store(path))
    try:
        report = replay("dh", level="full", ledger=lambda: led)
    finally:
        led.store.close()
    assert report.ok, "\n".join(report.lines())


def test_tools_live_on_a_fresh_platform_replays_the_scripted_run_with_zero_divergences(recorded):
    report = replay(recorded.bundles["scripted"], level="full", tools="live")
    assert report.ok, "\n".join(report.lines())


def test_a_run_against_the_fake_messages_api_replays_fully_with_no_server_running(
    tmp_path, monkeypatch, capsys
):
    from tests.fakes.anthropic_api import FakeAnthropic
    from tests.fakes.brain import ScriptedBrain

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-key-" + "x" * 20)
    monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
    folder = protocol_folder(tmp_path, SUBSET[:2])
    path, bundle = str(tmp_path / "l.sqlite"), str(tmp_path / "anthropic.jsonl")
    with FakeAnthropic(ScriptedBrain(protocols.load(folder).protocols)) as server:
        args = [
            "run",
            "--protocols",
            folder,
            "--ledger",
            path,
            "--run-id",
            "claude",
            "--agent",
            "anthropic:claude-test",
            "--base-url",
            server.url,
        ]
        assert main(args) == 0
        answered = server.answered
    assert answered > 0
    assert main(["export", "claude", "-o", bundle, "--ledger", path]) == 0
    # The server is gone, the key too, and no connection may be opened: all from the log.
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    monkeypatch.setattr(socket.socket, "connect", _refuse)
    capsys.readouterr()
    assert main(["replay", bundle, "--level", "full"]) == 0, capsys.readouterr().out
    assert capsys.readouterr().out.startswith(f"ok full {bundle}: compared ")


def _refuse(self: socket.socket, address: Any) -> None:
    raise AssertionError(f"replay tried to connect to {address}")


# -- a changed grader ---------------------------------------------------------------------------


def strict_abstention(text: str) -> grading.Verdict:
    """A changed grader: no refusal counts as an abstention any more."""
    return grading.Verdict(
        False, "the changed grader accepts no refusal", grading.final_answer(text)
    )


def with_abstention_grader(grade: Callable[[str], grading.Verdict]) -> Any:
    """The decision function with the abstention grader replaced (re-derivation's seam)."""

    def decide(protocol: Any, events: Any) -> Any:
        out = []
        for d in decide_unit(protocol, events):
            if d.body.check == lc.ABSTAIN_CORRECT:
                answer = next(
                    b.final_answer
                    for _, b in events
                    if isinstance(b, EpisodeFinishedBody) and b.episode == "abstain"
                )
                v = grade(answer)
                body = msgspec.structs.replace(
                    d.body, verdict=v.ok, reason=v.reason, answer=v.scored
                )
                d = d._replace(body=body)
            out.append(d)
        return out

    return decide


def test_a_changed_grader_makes_rederive_fail_naming_the_first_decision_it_alters(recorded):
    report = replay(
        "scripted", ledger=lambda: recorded.ledger, decide=with_abstention_grader(strict_abstention)
    )
    assert not report.ok and report.status == 1
    first_abstain = next(
        e
        for e in recorded.events("scripted")
        if isinstance(e, GraderDecisionEvent) and e.body.check == lc.ABSTAIN_CORRECT
    )
    first = report.first_mismatch
    assert first is not None
    assert (first.stream, first.seq, first.what, first.field) == (
        first_abstain.stream,
        first_abstain.seq,
        lc.ABSTAIN_CORRECT,
        "verdict",
    )
    assert (first.recorded, first.replayed) == (True, False)
    fields = {(m.what, m.field) for m in report.mismatches}
    assert ("metric abstention_rate", "num/den") in fields
    assert "first mismatch: stream scripted/" in "\n".join(report.lines())


def test_an_unchanged_grader_passed_in_changes_nothing(recorded):
    same = with_abstention_grader(grading.abstention)
    assert replay("scripted", ledger=lambda: recorded.ledger, decide=same).ok


# -- an edited model response -------------------------------------------------------------------


def rechain(src: str, dst: str, edit: Callable[[Event], Event]) -> None:
    """Write ``src`` to ``dst`` with ``edit`` applied, every link, head and root recomputed,
    so the result verifies: only replay can tell it was changed."""
    header = read_header(src)
    events = [decode_event(r.data) for r in records(src)]
    kept = [e for e in events if type(e).__name__ != "RunSealedEvent"]
    ats = iter(e.at for e in kept)
    led = Ledger(open_store(":memory:"), clock=lambda: next(ats))
    writers: dict[str, Any] = {}
    for e in kept:
        e = edit(e)
        w = writers.get(e.stream) or writers.setdefault(e.stream, led.new_stream(e.stream))
        w.append(e.body, refs=e.refs)  # type: ignore[attr-defined]
    led.commit(*writers.values())
    led.seal(header.run)
    export_run(led, header.run, dst)
    led.store.close()


def _edit_final_text(body: Any) -> Any:
    return {**body, "text": "FINAL ANSWER: an edited answer"}


def _edit_tool_call(body: Any) -> Any:
    calls = [dict(c) for c in body["tool_calls"]]
    calls[0]["arguments"] = {**calls[0]["arguments"], "content": "an edited fact"}
    return {**body, "tool_calls": calls}


EDITS = {
    # (episode, which of its model calls, the edit, the field replay reports first)
    "final-answer-text": ("recall", -1, _edit_final_text, "episode_finished.final_answer"),
    "tool-call-arguments": ("teach", 0, _edit_tool_call, "session_call.arguments.content"),
}


@pytest.mark.parametrize("edit", list(EDITS))
def test_one_edited_model_response_makes_full_replay_fail_at_exactly_that_episode(
    recorded, tmp_path, edit
):
    episode, which, change, field = EDITS[edit]
    units = sorted({e.stream for e in recorded.events("fake") if isinstance(e, UnitStartedEvent)})
    stream = units[1]
    calls = [
        e
        for e in recorded.events("fake")
        if isinstance(e, ModelCallEvent) and e.stream == stream and e.body.episode == episode
    ]
    victim = calls[which]

    def edit_one(e: Event) -> Event:
        if isinstance(e, ModelCallEvent) and (e.stream, e.seq) == (victim.stream, victim.seq):
            body = msgspec.structs.replace(e.body, response=change(e.body.response))
            return msgspec.structs.replace(e, body=body)
        return e

    tampered = str(tmp_path / "tampered.jsonl")
    rechain(recorded.bundles["fake"], tampered, edit_one)
    open_run(tampered, require_seal=False, allow_partial=False)  # links recomputed: it verifies

    report = replay(tampered, level="full")
    assert not report.ok
    finished = next(
        e
        for e in recorded.events("fake")
        if e.stream == stream and e.seq > victim.seq and isinstance(e.body, EpisodeFinishedBody)
    )  # type: ignore[attr-defined]
    first = report.first_mismatch
    assert first is not None and first.stream == stream and first.what == f"episode {episode}"
    assert first.field == field
    assert victim.seq <= first.seq <= finished.seq
    # Every other unit replayed the same; in this one, the edited episode diverged first.
    assert {m.stream for m in report.mismatches} == {stream}
    assert report.mismatches[0].what == f"episode {episode}"
    if edit == "final-answer-text":  # the loop went on as recorded: only its hashes differ
        assert [m.what for m in report.mismatches] == [f"episode {episode}", "unit"]


# -- a platform whose answers changed -----------------------------------------------------------

EXTRA = {"type": "text", "text": "(an answer the test changed)"}


class _EditingObserver:
    """Records what the changed platform answered: search results carry one more block."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.episode = inner.episode if inner is not None else ""

    def session_call(self, body):
        if body.tool == "search":
            body = msgspec.structs.replace(body, content=[*body.content, EXTRA])
        if self.inner is not None:
            self.inner.session_call(body)


class _EditedSession:
    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.email = inner.email

    async def list_tools(self) -> Any:
        return await self.inner.list_tools()

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> CallResult:
        res = await self.inner.call_tool(name, arguments)
        if name != "search":
            return res
        return res._replace(content=(*res.content, EXTRA), text=f"{res.text}\n{EXTRA['text']}")


class ChangedPlatform:
    """The embedded platform, except that every search answer has an extra text block."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    @asynccontextmanager
    async def session(self, pool_index: Any, observer: Any = None) -> AsyncIterator[Any]:
        async with self.inner.session(pool_index, _EditingObserver(observer)) as s:
            yield _EditedSession(s)


@asynccontextmanager
async def changed_runtime() -> AsyncIterator[Any]:
    async with EmbeddedProvisioner(PlatformSpec("embedded"), pool_size=20).runtime() as client:
        yield ChangedPlatform(client)


def test_tools_live_against_a_changed_platform_fails_at_the_first_changed_tool_result(recorded):
    report = replay(
        recorded.bundles["scripted"], level="full", tools="live", runtime=changed_runtime
    )
    assert not report.ok
    record = next(e for e in recorded.events("scripted") if type(e).__name__ == "RunStartedEvent")
    first_unit = record.body.record.units[0]  # type: ignore[attr-defined]
    stream = f"scripted/{first_unit.unit_id}/{first_unit.attempt}"
    first_search = next(
        e
        for e in recorded.events("scripted")
        if isinstance(e, SessionCallEvent) and e.stream == stream and e.body.tool == "search"
    )
    first = report.first_mismatch
    assert first is not None
    assert (first.stream, first.seq) == (stream, first_search.seq)
    assert first.what == f"episode {first_search.body.episode}"
    assert first.field.startswith("session_call.content")
    assert first.recorded is None and first.replayed == EXTRA


# -- imported peer runs -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def peer_run(tmp_path_factory) -> Iterator[tuple[Ledger, str, str]]:
    base = os.path.join(peer_dir(), "bench", "results", "s5-anthropic-k5")
    led = Ledger(open_store(str(tmp_path_factory.mktemp("peer") / "l.sqlite")))
    run_id, _, _ = import_peer(led, os.path.join(base, "lifecycle-a3-k5.json"))
    yield led, run_id, os.path.join(peer_dir(), "bench", "protocols")
    led.store.close()


def test_an_imported_peer_run_rederives_its_435_answer_verdicts_with_zero_mismatches(peer_run):
    led, run_id, peer_protocols = peer_run
    report = replay(run_id, protocols=peer_protocols, ledger=lambda: led)
    assert report.ok, "\n".join(report.lines())
    assert report.compared["decisions"] == 435
    assert report.skipped["decisions not re-derivable (imported)"] > 0
    assert report.compared["metrics"] == 33 and report.notes == []  # retrieval ones too


def test_an_imported_peer_run_cannot_be_fully_replayed_and_says_why(peer_run):
    led, run_id, peer_protocols = peer_run
    with pytest.raises(UnusableInput, match="--level rederive still works"):
        replay(run_id, level="full", protocols=peer_protocols, ledger=lambda: led)


def test_an_imported_peer_run_without_its_protocols_is_unusable_input(tmp_path):
    results = os.path.join(
        peer_dir(), "bench", "results", "s5-anthropic-k5", "lifecycle-a3-k5.json"
    )
    alone = tmp_path / "lifecycle-a3-k5.json"  # no bench/protocols beside it: no set recorded
    shutil.copy(results, alone)
    led = Ledger(open_store(str(tmp_path / "l.sqlite")))
    run_id, _, _ = import_peer(led, str(alone), transcripts=[])
    with pytest.raises(UnusableInput, match="pass the protocol folder with --protocols PATH"):
        replay(run_id, ledger=lambda: led)


# -- inputs replay refuses ----------------------------------------------------------------------


# -- the probe's calls are events of the run ------------------------------------------------


def test_the_probes_calls_are_events_of_its_stream_and_its_findings_cite_them(recorded):
    events = [e for e in recorded.events("scripted") if e.stream == "scripted/probe"]
    *before, end = events
    assert isinstance(end, ProbeFinishedEvent) and end.refs == tuple(e.seq for e in before)
    calls = [e for e in before if isinstance(e, SessionCallEvent) and e.body.episode == "probe"]
    said = {(e.body.tool, e.body.text().count(PROBE_MEMORY) > 0) for e in calls}
    assert {("memory_capture", False), ("search", True)} <= said  # written, then found
    # Then its lifecycle checks: the scripted agent's teach and correction as episodes,
    # the capture check's, the promotion's and the update check's reads as read-backs.
    kinds = {type(e.body).__name__ for e in before}
    assert {"EpisodeStartedBody", "EpisodeFinishedBody", "ReadBackBody"} <= kinds
    started = next(e for e in recorded.events("scripted") if isinstance(e, RunStartedEvent))
    assert started.body.record is not None
    assert ProbeReport.of(end.body).record() == started.body.record.probe
    assert [(f.what, f.ok) for f in end.body.findings] == [
        (what, True) for what in ("vocabulary", "tools", "write", "search", "hit ids",
                                  "capture", "promote", "update")]  # fmt: skip


def test_a_tampered_probe_event_breaks_verify(recorded, tmp_path, capsys):
    src = recorded.bundles["scripted"]
    with open(src, "rb") as fh:
        lines = fh.read().split(b"\n")
    lineno = next(i for i, line in enumerate(lines) if b'"stream":"scripted/probe"' in line
                  and b'"kind":"session_call"' in line)  # fmt: skip
    tampered = str(tmp_path / "tampered.jsonl")
    _flip_line(src, tampered, lineno)
    assert main(["verify", tampered]) == 1
    assert "'scripted/probe'" in capsys.readouterr().out


@pytest.mark.parametrize("level", ["rederive", "full"])
def test_a_probe_answer_changed_and_rechained_fails_replay_at_its_findings(
    recorded, tmp_path, level
):
    def forget(e: Event) -> Event:  # the search no longer found the probe's memory
        if (
            isinstance(e, SessionCallEvent)
            and e.stream == "scripted/probe"
            and (e.body.tool == "search")
        ):
            content = [{"type": "text", "text": '{"results": []}'}]
            return msgspec.structs.replace(e, body=msgspec.structs.replace(e.body, content=content))
        return e

    tampered = str(tmp_path / "forgot.jsonl")
    rechain(recorded.bundles["scripted"], tampered, forget)
    open_run(tampered, require_seal=False, allow_partial=False)  # links recomputed: it verifies
    report = replay(tampered, level=level)
    assert not report.ok
    first = report.mismatches[0]
    assert (first.stream, first.what) == ("scripted/probe", "probe")
    # Re-derived, its search finding differs; re-run, the probe asks for a second search
    # (one word of the memory) that the log does not hold.
    assert first.field == ("findings.search" if level == "rederive" else "call")


def _flip_line(src: str, dst: str, lineno: int) -> None:
    with open(src, "rb") as fh:
        lines = fh.read().split(b"\n")
    lines[lineno] = lines[lineno].replace(b'"episode":"', b'"episode":"x', 1)
    with open(dst, "wb") as fh:
        fh.write(b"\n".join(lines))


@pytest.mark.parametrize("level", ["rederive", "full"])
def test_a_tampered_bundle_is_refused_naming_the_first_bad_stream_and_seq(
    recorded, tmp_path, capsys, level
):
    src = recorded.bundles["scripted"]
    with open(src, "rb") as fh:
        lines = fh.read().split(b"\n")
    lineno = next(i for i, line in enumerate(lines) if b'"kind":"session_call"' in line)
    bad = decode_event(lines[lineno])
    tampered = str(tmp_path / "tampered.jsonl")
    _flip_line(src, tampered, lineno)
    assert main(["replay", tampered, "--level", level]) == 1
    out = capsys.readouterr().out
    assert out.startswith(f"FAILED verification of {tampered}: stream {bad.stream!r} seq ")
    assert "nothing was replayed" in out
    report = replay(tampered, level=level)
    assert report.failure is not None and report.failure.stream == bad.stream
    assert report.failure.seq in (bad.seq, bad.seq - 1)  # the changed event, or the one it links


def test_an_unsealed_bundle_is_partial_and_refused(recorded, tmp_path):
    src = recorded.bundles["scripted"]
    with open(src, "rb") as fh:
        lines = fh.read().split(b"\n")
    partial = str(tmp_path / "partial.jsonl.gz")
    with gzip.open(partial, "wb") as fh:
        fh.write(b"\n".join(line for line in lines if b'"kind":"run_sealed"' not in line))
    report = replay(partial)
    assert report.failure is not None and report.status == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["replay", "no-such.jsonl"], "no such file"),
        (["replay", "check"], "replay check needs a folder"),
        (["replay", "check", "no-such-dir"], "not a folder"),
        (["replay", "a.jsonl", "b.jsonl"], "replay takes one RUN or BUNDLE"),
    ],
    ids=["missing-bundle", "check-without-dir", "check-missing-dir", "two-targets"],
)
def test_unusable_input_is_one_line_and_exit_2(tmp_path, monkeypatch, capsys, args, message):
    monkeypatch.chdir(tmp_path)
    assert main(args) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_a_run_whose_protocols_are_gone_asks_for_protocols(recorded, tmp_path, capsys):
    moved = str(tmp_path / "moved.jsonl")
    # As if recorded on another machine: the recorded protocol folder does not exist here.
    rechain(
        recorded.bundles["scripted"],
        moved,
        lambda e: _relocate(e, recorded.protocols, "/gone/protocols"),
    )
    assert main(["replay", moved]) == 2
    assert "pass the protocol folder with --protocols PATH" in capsys.readouterr().err
    assert main(["replay", moved, "--protocols", recorded.protocols]) == 0


def _relocate(e: Event, old: str, new: str) -> Event:
    body = getattr(e, "body", None)
    record = getattr(body, "record", None)
    if record is None or record.protocols_path != old:
        return e
    record = msgspec.structs.replace(record, protocols_path=new)
    return msgspec.structs.replace(e, body=msgspec.structs.replace(body, record=record))


# -- replay check DIR and the pytest plugin -----------------------------------------------------


@pytest.fixture
def bundle_dir(recorded, tmp_path) -> str:
    folder = tmp_path / "bundles"
    folder.mkdir()
    for run_id, path in recorded.bundles.items():
        with open(path, "rb") as fh:
            (folder / f"{run_id}.jsonl").write_bytes(fh.read())
    return str(folder)


def _add_changed_verdict(recorded: Recorded, folder: str) -> str:
    """A bundle whose recorded abstain verdict no grader of ours gives (re-chained, verifies)."""

    def flip(e: Event) -> Event:
        if isinstance(e, GraderDecisionEvent) and e.body.check == lc.ABSTAIN_CORRECT:
            return msgspec.structs.replace(e, body=msgspec.structs.replace(e.body, verdict=False))
        return e

    path = os.path.join(folder, "changed.jsonl")
    rechain(recorded.bundles["scripted"], path, flip)
    return path


def test_replay_check_prints_one_line_per_bundle_and_exits_0_when_all_rederive(bundle_dir, capsys):
    assert main(["replay", "check", bundle_dir]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["ok", "ok", "2"]
    assert lines[-1] == "2 of 2 bundles ok"


def test_replay_check_exits_1_naming_each_bundle_that_fails(recorded, bundle_dir, capsys):
    bad = _add_changed_verdict(recorded, bundle_dir)
    with open(os.path.join(bundle_dir, "broken.jsonl.gz"), "wb") as fh:
        fh.write(b"not a bundle")
    assert main(["replay", "check", bundle_dir]) == 1
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith(f"ERROR {os.path.join(bundle_dir, 'broken.jsonl.gz')}: ")
    assert lines[1].startswith(f"FAILED rederive {bad}: ")
    assert "abstain_correct field verdict: recorded false, re-derived true" in lines[1]
    assert lines[-1] == "2 of 4 bundles ok, 2 failed"


def test_the_pytest_plugin_runs_one_test_per_bundle(recorded, bundle_dir, tmp_path):
    from importlib.metadata import entry_points

    assert [e.value for e in entry_points(group="pytest11") if e.name == "benchledger"] == [
        "benchledger.replay.pytest_plugin"
    ], "the plugin's entry point is not installed: pip install -e ."
    _add_changed_verdict(recorded, bundle_dir)
    project = tmp_path / "project"
    project.mkdir()
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--benchledger-replay",
            bundle_dir,
            "-m",
            "benchledger_replay",
            "-p",
            "no:cacheprovider",
            "-v",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        timeout=300,
    )
    out = done.stdout
    assert done.returncode == 1, out + done.stderr
    assert "changed.jsonl FAILED" in out and "fake.jsonl PASSED" in out
    assert "scripted.jsonl PASSED" in out and "1 failed, 2 passed" in out
    assert "first mismatch: stream scripted/" in out


# -- the log platform on its own ----------------------------------------------------------------


def _read(stage: str, path: str, ids: list[str]) -> ReadBackBody:
    return ReadBackBody(
        stage=stage,
        method="GET",
        path=path,
        body={"data": ids},
        purpose=stage,
        observed={"ids": ids},
    )


async def _drive(events: list[tuple[int, Any]], calls: list[str]) -> tuple[list[Any], list[int]]:
    platform = LogPlatform(Tape("u", events), pool_size=2)
    out: list[Any] = []
    try:
        for path in calls:
            try:
                out.append((await platform.rest("GET", path)).body)
            except InfraError as exc:
                out.append(exc.kind)
            except ToolDivergence as exc:
                out.append(f"divergence at seq {exc.seq}")
    finally:
        await platform.aclose()
    return out, [s for s, _ in platform.tape.left()]


def test_the_log_platform_repeats_a_poll_past_its_recording_and_replays_recorded_failures():
    events = [
        (1, _read("capture", "/i?since=2026-01-01T00%3A00%3A00Z&a=1", [])),
        (2, InfraErrorBody(stage="capture", error="http_5xx", message="HTTP 502", retryable=True)),
        (3, _read("capture", "/i?since=2026-01-01T00%3A00%3A09Z&a=1", [])),
        (4, InfraErrorBody(stage="recall", error="timeout", message="slow", retryable=True)),
    ]
    # The since parameter is the wall clock: it never has to match.
    got, left = asyncio.run(_drive(events, ["/i?since=x&a=1"] * 4))
    assert got == [{"data": []}, "http_5xx", {"data": []}, {"data": []}]
    assert left == [4]  # the recall failure waits for recall


def test_the_log_platform_refuses_a_read_the_recording_does_not_hold_next():
    got, left = asyncio.run(_drive([(7, _read("capture", "/i?a=1", ["x"]))], ["/other", "/i?a=2"]))
    assert got == ["divergence at seq 7", "divergence at seq 7"] and left == [7]


def test_first_difference_names_the_first_differing_leaf():
    a = {"x": [1, {"y": "a"}], "z": 1}
    assert first_difference(a, {"x": [1, {"y": "b"}], "z": 1}) == ("x[1].y", "a", "b")
    assert first_difference(a, {"x": [1], "z": 1}) == ("x[1]", {"y": "a"}, None)
    assert first_difference(a, a) is None


def test_the_commands_and_options_in_docs_ci_exist():
    import re
    import shlex

    from benchledger.cli import build_parser
    from tests.conftest import REPO

    with open(os.path.join(REPO, "docs", "ci.md"), encoding="utf-8") as fh:
        text = fh.read()
    commands = re.findall(r"(?:^\$ |- run: |^)(benchledger [^\n#]+)", text, re.M)
    assert len(commands) >= 3
    parser = build_parser()
    for command in commands:
        parser.parse_args(shlex.split(command)[1:])  # exits (fails the test) if unknown
    with open(os.path.join(REPO, "replay", "pytest_plugin.py"), encoding="utf-8") as fh:
        plugin = fh.read()
    for option in set(re.findall(r"--benchledger-replay[a-z-]*", text)):
        assert f'"{option}"' in plugin, option
