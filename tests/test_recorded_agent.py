"""The recorded agent re-enacts the peer's real k=5 run on refplatform serving its pack.

Each unit plays back the turns ``claude-sonnet-5`` took in the peer's run (attempt j =
pass j), with the ids the live platform handed out mapped to ours. Where our decisions
differ from the peer's published verdicts, each difference is named with its reason
(the same reasons docs/refplatform.md gives for the whole run).
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import shutil

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.agents import from_spec
from benchledger.harness.agents.base import Episode, UnitInfo
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.agents.recorded import RecordedAgent
from benchledger.harness.models.recorded import (
    ID_PATTERN,
    NO_RECORDING,
    IdMap,
    RecordedTransport,
)
from benchledger.harness.peer.recorded_run import RecordedRun
from benchledger.harness.peer.transcript import RecordedEpisode
from benchledger.harness.prompts import SYSTEM
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    ModelCallEvent,
    SessionCallEvent,
    UnitFinishedEvent,
    is_probe_stream,
)
from benchledger.projections.fold import fold
from benchledger.projections.source import from_ledger
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from tests.conftest import peer_dir

# Peer verdict -> benchledger check (the peer stores "search called in recall" as
# `recall_surfaced`, and leaves it null when nothing was captured).
CHECKS = {
    "captured": "captured",
    "recall_correct": "recall_correct",
    "promoted": "promoted",
    "transfer_correct": "transfer_correct",
    "transfer_surfaced": "transfer_surfaced",
    "update_captured": "update_captured",
    "update_correct": "update_correct",
    "duplicated": "duplicated",
    "abstain_correct": "abstain_correct",
}
FRESH_SEARCH = "refplatform's search shows the just-promoted sink at once; the live search did not"
SIMILARITY = "supersede similarity: the lexical embedder and nomic-embed-text straddle 0.90"
REJECTED = "the model rejected the original; the peer counts a rejected original as a duplicate"
NO_409 = (
    "the live harness failed approving an insight already superseded (409); here the "
    "promotion succeeds and the unrecorded transfer answers with a note"
)
# (protocol, attempt) -> {check: (peer, ours)} and why, for the protocols re-enacted below.
EXPECTED = {
    ("lc-core-market", 2): ({"duplicated": (True, False)}, REJECTED),
    ("lc-core-market", 3): ({"duplicated": (True, False)}, SIMILARITY),
    ("lc-core-market", 5): ({"duplicated": (False, True)}, SIMILARITY),
    ("lc-holiday-total", 1): ({"transfer_surfaced": (False, True)}, FRESH_SEARCH),
    ("lc-holiday-total", 2): ({"transfer_surfaced": (False, True)}, FRESH_SEARCH),
    ("lc-holiday-total", 4): ({"transfer_surfaced": (False, True)}, FRESH_SEARCH),
    ("lc-holiday-total", 5): (
        {
            "error": (True, False),
            "promoted": (None, True),
            "transfer_correct": (None, False),
            "transfer_surfaced": (None, False),
            "abstain_correct": (None, True),
        },
        NO_409,
    ),
}
REENACTED = ["lc-core-market", "lc-holiday-total"]


def run_dir(peer: str) -> str:
    return os.path.join(peer, "bench", "results", "s5-anthropic-k5")


def peer_subset(tmp_path, peer: str, ids: list[str]) -> str:
    folder = tmp_path / "protocols"
    folder.mkdir(exist_ok=True)
    for pid in ids:
        shutil.copy(os.path.join(peer, "bench", "protocols", f"{pid}.yaml"), folder)
    return str(folder)


def read(path: str, run_id: str) -> list:
    store = open_store(path)
    try:
        return [e for e, _ in Ledger(store).events(run_id)]
    finally:
        store.close()


def differences(recorded: RecordedRun, events: list) -> dict:
    """(protocol, attempt) -> {check: (peer, ours)} where our decisions differ from the peer's."""
    out = {}
    for e in events:
        if not isinstance(e, UnitFinishedEvent):
            continue
        _, pid, attempt = e.stream.split("/")
        run = recorded.attempts[pid][int(attempt) - 1].run
        diff = {}
        for theirs, ours in CHECKS.items():
            peer_value = run.get(theirs)
            if theirs == "update_captured" and peer_value is None and run.get("update_correct"):
                peer_value = True  # older peer records: the correction landed iff graded
            if peer_value != e.body.outcome.get(ours):
                diff[theirs] = (peer_value, e.body.outcome.get(ours))
        if bool(run.get("error")) != bool(e.body.error):
            diff["error"] = (bool(run.get("error")), bool(e.body.error))
        if diff:
            out[(pid, int(attempt))] = diff
    return out


def reenact(tmp, k: int) -> str:
    """Run ``re``: the peer's turns for ``REENACTED`` at k, time scale 0; its ledger's path."""
    peer = peer_dir()
    ledger = str(tmp / "l.sqlite")
    argv = ["run", "--agent", f"recorded:{run_dir(peer)}", "--time-scale", "0", "--k", str(k),
            "--protocols", peer_subset(tmp, peer, REENACTED), "--pack",
            os.path.join(peer, "bench", "seed"), "--ledger", ledger, "--run-id", "re"]  # fmt: skip
    assert main(argv) == 0
    return ledger


@pytest.fixture(scope="module")
def reenacted(tmp_path_factory):
    """lc-core-market and lc-holiday-total at k=5, re-enacted at time scale 0."""
    ledger = reenact(tmp_path_factory.mktemp("reenact"), 5)
    return peer_dir(), ledger, read(ledger, "re")


def test_the_recorded_agent_plays_the_peers_tool_calls_and_final_answers(reenacted):
    peer, _, events = reenacted
    recorded = RecordedRun(run_dir(peer))
    calls: dict[tuple[str, str], list] = {}
    for e in events:
        # platform_info is the harness's session handle, not a call of the model's
        if (
            isinstance(e, SessionCallEvent)
            and e.body.method == "tools/call"
            and (e.body.tool != "platform_info")
        ):
            calls.setdefault((e.stream, e.body.episode), []).append(e.body)
    finished = [
        e for e in events if isinstance(e, EpisodeFinishedEvent) and not is_probe_stream(e.stream)
    ]
    assert len(finished) >= 40
    for e in finished:
        _, pid, attempt = e.stream.split("/")
        episodes, _ = recorded.unit(pid, int(attempt))
        rec = episodes.get(e.body.episode)
        if rec is None:
            continue
        assert e.body.final_answer == rec.final_answer
        played = [(c.tool, c.arguments) for c in calls.get((e.stream, e.body.episode), [])]
        wanted = [(name, args) for turn in rec.turns for _, name, args in turn.calls]
        assert [name for name, _ in played] == [name for name, _ in wanted]
        for (_, ours), (_, theirs) in zip(played, wanted, strict=True):
            # Equal but for platform ids, which are ours now.
            mask = json.dumps(theirs, sort_keys=True)
            assert ID_PATTERN.sub("ID", json.dumps(ours, sort_keys=True)) == ID_PATTERN.sub(
                "ID", mask
            )


def test_a_recorded_insight_id_in_a_reject_becomes_the_one_our_platform_gave(reenacted):
    _, _, events = reenacted
    for attempt in (1, 2, 3):  # the model rejects its taught insight by id in these passes
        stream = f"re/lc-core-market/{attempt}"
        mine = [e.body for e in events if isinstance(e, SessionCallEvent) and e.stream == stream]
        taught = next(b for b in mine if b.episode == "teach" and b.tool == "memory_capture")
        taught_id = json.loads(taught.content[0]["text"])["id"]
        reject = next(b for b in mine if b.tool == "apply_knowledge")
        assert reject.arguments["action"] == "reject"
        assert reject.arguments["insight_ids"] == [taught_id]


def test_every_turn_is_a_model_call_under_the_recorded_model_with_the_recorded_usage(reenacted):
    peer, _, events = reenacted
    models = [e.body for e in events if isinstance(e, ModelCallEvent)]
    assert models and {m.response["model"] for m in models} == {"claude-sonnet-5"}
    assert all(m.request["model"] == "claude-sonnet-5" for m in models)
    recorded = RecordedRun(run_dir(peer))
    want = sum(
        int(ep.get("output_tokens") or 0)
        for pid in REENACTED
        for at in recorded.attempts[pid]
        for ep in at.run["episodes"]
    )
    assert sum(m.usage.get("output_tokens", 0) for m in models) == want


def test_the_re_enactment_verifies_and_differs_from_the_peer_only_for_named_reasons(reenacted):
    peer, ledger, events = reenacted
    assert main(["verify", "re", "--ledger", ledger]) == 0
    got = differences(RecordedRun(run_dir(peer)), events)
    assert got == {key: diff for key, (diff, _why) in EXPECTED.items()}
    note = [e for e in events if isinstance(e, EpisodeFinishedEvent)
            and e.stream == "re/lc-holiday-total/5" and e.body.episode == "transfer"]  # fmt: skip
    assert note[0].body.final_answer.endswith(NO_RECORDING)
    assert "[recorded: no transfer episode for lc-holiday-total attempt 5" in (
        note[0].body.final_answer
    )


def test_a_recorded_run_replays_from_its_own_log(reenacted):
    _, ledger, _ = reenacted
    assert main(["replay", "re", "--level", "full", "--ledger", ledger]) == 0


def test_a_recording_of_another_protocol_set_is_refused_before_anything_is_written(
    tmp_path, capsys, peer
):
    folder = tmp_path / "own"
    folder.mkdir()
    shutil.copy(os.path.join(protocols.LIFECYCLE_DIR, "bl-keystone-region.yaml"), folder)
    ledger = tmp_path / "l.sqlite"
    argv = ["run", "--agent", f"recorded:{run_dir(peer)}", "--time-scale", "0",
            "--protocols", str(folder), "--ledger", str(ledger), "--run-id", "own"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the recording holds no protocol bl-keystone-region" in err[0]
    assert not ledger.exists()


def test_a_recorded_protocol_whose_content_changed_is_refused_naming_it(tmp_path, capsys, peer):
    folder = peer_subset(tmp_path, peer, ["lc-core-market", "lc-holiday-total"])
    changed = os.path.join(folder, "lc-core-market.yaml")
    with open(changed, encoding="utf-8") as fh:
        text = fh.read()
    with open(changed, "w", encoding="utf-8") as fh:
        fh.write(text.replace("value: 259", "value: 260"))  # the same id, another answer
    ledger = tmp_path / "l.sqlite"
    argv = ["run", "--agent", f"recorded:{run_dir(peer)}", "--time-scale", "0",
            "--protocols", folder, "--pack", os.path.join(peer, "bench", "seed"),
            "--ledger", str(ledger)]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "protocol lc-core-market of" in err[0] and "differs from the one the recording" in err[0]
    assert not ledger.exists()


def test_a_missing_run_dir_is_one_line_and_exit_2_before_anything_is_written(tmp_path, capsys):
    ledger = tmp_path / "l.sqlite"
    missing = str(tmp_path / "no-such-run")
    assert main(["run", "--agent", f"recorded:{missing}", "--ledger", str(ledger)]) == 2
    err = capsys.readouterr().err.strip()
    assert missing in err and len(err.splitlines()) == 1
    assert not ledger.exists()


def test_an_unreadable_results_file_is_refused_naming_it(tmp_path):
    broken = tmp_path / "lifecycle-a3.json"
    broken.write_text("{not json")
    (tmp_path / "lifecycle-a3.json.transcripts").mkdir()
    with pytest.raises(ValueError, match=re.escape(str(broken))):
        from_spec(f"recorded:{tmp_path}")
    (tmp_path / "passes.txt").write_text("bench/results/elsewhere/lifecycle-a3.json\n")
    with pytest.raises(ValueError, match=re.escape("passes.txt names 'bench/results/elsewhere")):
        from_spec(f"recorded:{tmp_path}")


def test_time_scale_needs_a_recorded_agent_and_a_non_negative_value(tmp_path, capsys, peer):
    ledger = str(tmp_path / "l.sqlite")
    assert main(["run", "--time-scale", "0.5", "--ledger", ledger]) == 2
    assert "--time-scale" in capsys.readouterr().err
    argv = ["run", "--agent", f"recorded:{run_dir(peer)}", "--time-scale", "-1", "--ledger", ledger]
    assert main(argv) == 2
    assert not os.path.exists(ledger)


def test_a_single_pass_folder_is_a_recorded_run_of_one_attempt(peer):
    one = os.path.join(run_dir(peer), "lifecycle-a3-20260801-115803-55395")
    recorded = RecordedRun(one)
    assert recorded.model == "claude-sonnet-5" and len(recorded.attempts) == 30
    episodes, missing = recorded.unit("lc-core-market", 1)
    assert set(episodes) == {"teach", "recall", "update", "update_recall", "abstain"}
    assert not missing
    assert recorded.unit("lc-core-market", 2) == (
        {},
        {"*": f"{one} records 1 attempts of lc-core-market"},
    )


def _episode(stage: str = "recall") -> Episode:
    p = protocols.load(protocols.LIFECYCLE_DIR).protocols[0]
    return Episode(stage, SYSTEM[stage], "How many?", p, 15)


def test_the_recorded_wall_time_and_tokens_are_spread_over_the_turns():
    slept: list[float] = []

    async def sleep(seconds: float) -> None:
        slept.append(seconds)

    turns = [
        {"role": "user", "text": "How many?"},
        {"role": "assistant",
         "tool_calls": [{"id": "t1", "name": "search", "args": {"intent": "x"}}]},
        {"role": "user", "tool_results": [{"call_id": "t1", "text": "{}", "is_error": False}]},
        {"role": "assistant", "text": "FINAL ANSWER: 80"},
    ]  # fmt: skip
    usage = {"input_tokens": 7, "output_tokens": 101, "cache_read_tokens": 0,
             "cache_creation_tokens": 3}  # fmt: skip
    rec = RecordedEpisode.from_transcript("recall", turns, wall_ms=9000, usage=usage)
    transport = RecordedTransport({"recall": rec}, model="m", time_scale=0.5, sleep=sleep)
    agent = ModelAgent(transport, model="m")

    async def play() -> list:
        messages: list = [{"role": "user", "text": "How many?"}]
        first = await agent.next_turn(_episode(), messages, [])
        asked = [c._asdict() for c in first.tool_calls]
        messages += [{"role": "assistant", "text": "", "tool_calls": asked},
                     {"role": "tool", "call_id": "t1", "name": "search", "text": "{}",
                      "is_error": False}]  # fmt: skip
        second = await agent.next_turn(_episode(), messages, [])
        messages.append({"role": "assistant", "text": second.text})
        beyond = await agent.next_turn(_episode(), messages, [])
        return [first, second, beyond]

    first, second, beyond = asyncio.run(play())
    assert first.tool_calls[0].name == "search" and second.text == "FINAL ANSWER: 80"
    assert slept == [2.25, 2.25]  # 9 s x 0.5 over two turns
    for key, total in usage.items():
        assert first.usage[key] + second.usage[key] == total
    assert beyond.text == "FINAL ANSWER: 80" and not beyond.tool_calls  # past the recording


def test_ids_map_by_their_anchor_text_first_then_by_order_of_first_appearance():
    a, b, c = "a" * 32, "b" * 32, "c" * 32
    x, y, z = "1" * 32, "2" * 32, "3" * 32
    theirs_kp = "kp_11111111-1111-1111-1111-111111111111"
    ours_kp = "kp_22222222-2222-2222-2222-222222222222"
    recorded = json.dumps({"hits": [{"text": "old fact", "ref": a}, {"text": "other", "ref": b}],
                           "page": theirs_kp, "next": c})  # fmt: skip
    live = json.dumps({"hits": [{"text": "unrelated", "ref": x}, {"text": "old fact", "ref": y}],
                       "page": ours_kp, "next": z})  # fmt: skip
    ids = IdMap()
    ids.learn(recorded, live)
    assert ids.ours[a] == y  # same anchor text
    assert ids.ours[b] == x and ids.ours[c] == z  # the rest in order, kind by kind
    assert ids.translate({"insight_ids": [a, "dd" * 16], "note": f"see {b}"}) == {
        "insight_ids": [y, "dd" * 16],
        "note": f"see {x}",
    }
    assert ids.ours[theirs_kp] == ours_kp


def test_from_spec_builds_the_recorded_agent_per_unit(peer):
    agent = from_spec(f"recorded:{run_dir(peer)}", time_scale=0)
    assert isinstance(agent, RecordedAgent) and agent.model == "claude-sonnet-5"
    unit = agent.for_unit(UnitInfo("r/lc-core-market/4", "lc-core-market", 4, "t", "l"))
    assert isinstance(unit, ModelAgent) and unit is not agent
    with pytest.raises(ValueError, match="sampling"):
        from_spec(f"recorded:{run_dir(peer)}", params={"temperature": 0.5})


@pytest.mark.slow  # two re-enactments at two concurrencies
def test_bench_run_re_enacts_a_recorded_subset_at_both_concurrencies(tmp_path, capsys, peer):
    argv = ["bench", "run", "--agent", f"recorded:{run_dir(peer)}", "--k", "1",
            "--protocols", peer_subset(tmp_path, peer, ["lc-active-customers"]),
            "--time-scale", "0", "--concurrency", "2", "--json"]  # fmt: skip
    assert main(argv) == 0
    out = capsys.readouterr().out.strip().splitlines()
    assert out[0].startswith("time scale 0")
    report = json.loads(out[-1])
    assert report["serial"]["units"] == report["parallel"]["units"] == 1
    assert report["serial"]["infra_failed"] == report["parallel"]["infra_failed"] == 0
    assert report["model"] == "claude-sonnet-5" and report["time_scale"] == 0


@pytest.mark.slow
def test_the_whole_k5_run_re_enacts_with_the_published_tokens_and_named_differences(tmp_path):
    peer = peer_dir()
    bench = os.path.join(peer, "bench")
    ledger = str(tmp_path / "l.sqlite")
    argv = ["run", "--agent", f"recorded:{run_dir(peer)}", "--time-scale", "0", "--k", "5",
            "--concurrency", "8", "--protocols", os.path.join(bench, "protocols"),
            "--pack", os.path.join(bench, "seed"), "--ledger", ledger,
            "--run-id", "k5"]  # fmt: skip
    assert main(argv) == 0
    with open(os.path.join(run_dir(peer), "lifecycle-a3-k5.json")) as fh:
        published = json.load(fh)["metrics"]
    store = open_store(ledger)
    try:
        card = scorecard([fold(LifecycleFold(), from_ledger(Ledger(store), "k5").events)])
    finally:
        store.close()
    for key in ("input", "output", "cache_read", "cache_creation"):
        assert card.tokens[key] == published[f"total_{key}_tokens"]
    got = differences(RecordedRun(run_dir(peer)), read(ledger, "k5"))
    kinds = {check for diff in got.values() for check in diff}
    assert kinds <= {"duplicated", "transfer_surfaced", "error", "promoted", "transfer_correct",
                     "abstain_correct"}  # fmt: skip
    assert sum("transfer_surfaced" in d for d in got.values()) >= 25
    assert sum("duplicated" in d for d in got.values()) <= 15
