"""``export RUN --format inspect``: a run as Inspect AI's eval log, read back by Inspect itself.

inspect_ai is a test-only dependency (the ``test`` extra): the package writes the format
from its description (docs/inspect.md) and never imports it; these tests read what it
wrote with inspect_ai's own reader and its own viewer, served on loopback and rendered in
headless Chromium.
"""

from __future__ import annotations

import os
import selectors
import shutil
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    EpisodeStartedEvent,
    GraderDecisionEvent,
    ModelCallEvent,
    SessionCallEvent,
    UnitStartedBody,
    UnitStartedEvent,
)
from benchledger.projections.inspect_log import safe_name
from tests.browser import CHROMIUM, dump_dom, needs_chromium
from tests.conftest import cli, one_line_exit_2, peer_dir, protocol_subset, write_run
from tests.test_recorded_agent import REENACTED, reenact

inspect_log = pytest.importorskip("inspect_ai.log", reason="inspect_ai is in the test extra")

SCRIPTED = ["bl-keystone-region", "bl-margin-region"]
VALUE = {True: "C", False: "I", None: "N"}
# The lifecycle checks an eval log scores: those deciding a unit's pass, true when good.
LIFECYCLE_SCORED = {"captured", "recall_correct", "promoted", "transfer_correct",
                    "abstain_correct", "update_captured", "update_correct"}  # fmt: skip


def ledger_view(path: str, run_id: str) -> tuple[str, list]:
    """(the sealed root, every (event, link)) of a run, read straight from the ledger."""
    with open_store(path) as store:
        ledger = Ledger(store)
        return ledger.run_info(run_id).root, list(ledger.events(run_id))


def units_of(events: list) -> dict[str, list]:
    """Unit stream -> its (event, link) pairs."""
    out: dict[str, list] = {}
    for event, link in events:
        if event.stream.count("/") == 2:  # RUN/<protocol>/<attempt>; not RUN/probe
            out.setdefault(event.stream, []).append((event, link))
    return out


def unit_key(pairs: list) -> tuple[str, int]:
    start = next(e for e, _ in pairs if isinstance(e, UnitStartedEvent))
    return start.body.protocol_id, start.body.attempt


def agent_calls(pairs: list) -> list[str]:
    """The tools called in the unit's episodes (the harness's own calls open no episode)."""
    episodes: set[str] = set()
    called = []
    for event, _ in pairs:
        if isinstance(event, EpisodeStartedEvent):
            episodes.add(event.body.episode)
        elif isinstance(event, SessionCallEvent) and event.body.method == "tools/call":
            called += [event.body.tool] if event.body.episode in episodes else []
    return called


def export(ledger: str, run: str, out: str) -> None:
    argv = ["export", run, "--format", "inspect", "-o", out, "--ledger", ledger]
    assert main(argv) == 0


@pytest.fixture(autouse=True)
def _recursion_limit() -> Iterator[None]:
    """inspect_ai's reader raises the process's recursion limit (to 3000) and leaves it so;
    refplatform's SQL bounds are tested at the interpreter's own limit: put it back."""
    limit = sys.getrecursionlimit()
    yield
    sys.setrecursionlimit(limit)


@pytest.fixture(scope="module")
def scripted(tmp_path_factory):
    """A scripted run of two protocols, sealed: (ledger path, run id)."""
    tmp = tmp_path_factory.mktemp("scripted")
    ledger = str(tmp / "l.sqlite")
    argv = ["run", "--protocols", protocol_subset(tmp, SCRIPTED), "--ledger", ledger,
            "--run-id", "s1"]  # fmt: skip
    assert main(argv) == 0
    return ledger, "s1"


@pytest.fixture(scope="module")
def reenacted(tmp_path_factory):
    """The peer's recorded turns for two protocols re-enacted at k=2: (ledger, run id)."""
    return reenact(tmp_path_factory.mktemp("reenact"), 2), "re"


def assert_log_is_the_run(log, ledger: str, run_id: str) -> None:
    """One sample per unit, scored as the ledger decided, leading back to its root and heads."""
    root, events = ledger_view(ledger, run_id)
    units = units_of(events)
    assert log.status == "success"
    assert log.eval.metadata["root"] == root and log.eval.metadata["benchledger_run_id"] == run_id
    assert len(log.samples) == len(units)
    by_key = {unit_key(pairs): (stream, pairs) for stream, pairs in units.items()}
    assert {(s.id, s.epoch) for s in log.samples} == set(by_key)
    for sample in log.samples:
        stream, pairs = by_key[(sample.id, sample.epoch)]
        assert sample.metadata["stream"] == stream
        assert sample.metadata["stream_head"] == pairs[-1][1]
        assert sample.metadata["root"] == root
        decided = {e.body.check: VALUE[e.body.verdict] for e, _ in pairs
                   if isinstance(e, GraderDecisionEvent)}  # fmt: skip
        # Verdicts are letters; a number is the unit's term in a card mean (mrr.recall).
        scored = {name: s.value for name, s in sample.scores.items()
                  if name != "lifecycle_pass" and isinstance(s.value, str)}  # fmt: skip
        # Every decision is either a score (it decides the pass, true when good) or a
        # diagnostic in the sample's metadata, with no value an accuracy could count.
        diagnostics = sample.metadata.get("diagnostics", {})
        assert set(scored) <= LIFECYCLE_SCORED and not set(diagnostics) & LIFECYCLE_SCORED
        assert all("value" not in d for d in diagnostics.values())
        shown = scored | {n: VALUE[d["metadata"]["verdict"]] for n, d in diagnostics.items()}
        assert shown == decided
        reasons = {e.body.check: e.body.reason for e, _ in pairs
                   if isinstance(e, GraderDecisionEvent)}  # fmt: skip
        explained = {n: s.explanation or "" for n, s in sample.scores.items() if n in reasons}
        explained |= {n: d.get("explanation", "") for n, d in diagnostics.items()}
        assert explained == reasons
        called = agent_calls(pairs)
        shown = [c.function for m in sample.messages if m.role == "assistant"
                 for c in m.tool_calls or ()]  # fmt: skip
        assert shown == called and "memory_capture" in shown
        tools = [m.function for m in sample.messages if m.role == "tool"]
        assert tools == called


@pytest.mark.parametrize("suffix", [".eval", ".json"], ids=["eval-zip", "json-document"])
def test_a_scripted_run_reads_back_in_inspect_as_one_sample_per_unit_scored_as_decided(
    scripted, tmp_path, suffix
):
    ledger, run_id = scripted
    out = str(tmp_path / f"s1{suffix}")
    export(ledger, run_id, out)
    log = inspect_log.read_eval_log(out)
    assert_log_is_the_run(log, ledger, run_id)
    [sample] = [s for s in log.samples if s.id == "bl-keystone-region"]
    assert sample.scores["lifecycle_pass"].value == "C"
    assert [m.role for m in sample.messages[:2]] == ["system", "user"]
    assert sample.messages[-1].metadata["final_answer"] is True
    assert sample.output.completion == sample.messages[-1].content


def test_the_eval_zip_and_the_json_document_hold_the_same_log(scripted, tmp_path):
    ledger, run_id = scripted
    export(ledger, run_id, str(tmp_path / "a.eval"))
    export(ledger, run_id, str(tmp_path / "a.json"))
    zipped = inspect_log.read_eval_log(str(tmp_path / "a.eval"))
    document = inspect_log.read_eval_log(str(tmp_path / "a.json"))
    assert [s.model_dump() for s in zipped.samples] == [s.model_dump() for s in document.samples]
    assert zipped.results == document.results and zipped.eval == document.eval
    summaries = inspect_log.read_eval_log_sample_summaries(str(tmp_path / "a.eval"))
    assert [(s.id, s.epoch) for s in summaries] == [(s.id, s.epoch) for s in zipped.samples]


def test_exporting_a_run_twice_writes_the_same_bytes(scripted, tmp_path):
    ledger, run_id = scripted
    for name in ("one.eval", "two.eval"):
        export(ledger, run_id, str(tmp_path / name))
    assert (tmp_path / "one.eval").read_bytes() == (tmp_path / "two.eval").read_bytes()


def test_a_bundle_exports_as_the_run_it_holds(scripted, tmp_path):
    ledger, run_id = scripted
    bundle = str(tmp_path / "s1.jsonl")
    assert main(["export", run_id, "-o", bundle, "--ledger", ledger]) == 0
    export(ledger, bundle, str(tmp_path / "from-bundle.eval"))
    export(ledger, run_id, str(tmp_path / "from-ledger.eval"))
    a = inspect_log.read_eval_log(str(tmp_path / "from-bundle.eval"))
    b = inspect_log.read_eval_log(str(tmp_path / "from-ledger.eval"))
    assert [s.model_dump() for s in a.samples] == [s.model_dump() for s in b.samples]
    assert a.eval.metadata["source"] == "bundle" and b.eval.metadata["source"] == "ledger"


def test_a_tampered_bundle_is_refused_and_nothing_is_written(scripted, tmp_path, capsys):
    ledger, run_id = scripted
    bundle = tmp_path / "s1.jsonl"
    assert main(["export", run_id, "-o", str(bundle), "--ledger", ledger]) == 0
    bundle.write_text(bundle.read_text().replace("FINAL ANSWER: West", "FINAL ANSWER: East"))
    capsys.readouterr()
    code, _, err = cli(capsys, "export", str(bundle), "--format", "inspect", "-o",
                       str(tmp_path / "x.eval"))  # fmt: skip
    assert code == 1 and "does not verify" in err
    assert not (tmp_path / "x.eval").exists()


@pytest.mark.parametrize(
    ("extra", "output", "needles"),
    [
        pytest.param([], "out.zip", ["out.zip", "FILE.eval", "FILE.json"], id="wrong-suffix"),
        pytest.param(
            ["--withhold", "model_call"],
            "out.eval",
            ["--withhold", "--format inspect"],
            id="withhold",
        ),
        pytest.param([], "missing/out.eval", ["does not exist"], id="no-such-directory"),
    ],
)
def test_unusable_export_options_are_one_line_and_exit_2_writing_nothing(
    scripted, tmp_path, capsys, extra, output, needles
):
    ledger, run_id = scripted
    out = str(tmp_path / output)
    code, _, err = cli(capsys, "export", run_id, "--format", "inspect", "-o", out,
                       "--ledger", ledger, *extra)  # fmt: skip
    one_line_exit_2(code, err, *needles)
    assert not os.path.exists(out)


def test_an_unknown_run_is_one_line_and_exit_2(scripted, tmp_path, capsys):
    ledger, _ = scripted
    code, _, err = cli(capsys, "export", "nope", "--format", "inspect", "-o",
                       str(tmp_path / "x.json"), "--ledger", ledger)  # fmt: skip
    one_line_exit_2(code, err, "nope")


def test_an_unsealed_run_exports_as_cancelled_its_unfinished_unit_an_error(
    ledger, tmp_path, capsys
):
    write_run(ledger, "u1", {("p000", 1): {"captured": True, "recall_correct": False}},
              planned=2, seal=False)  # fmt: skip
    w = ledger.new_stream("u1/p001/1")
    w.append(UnitStartedBody(protocol_id="p001", attempt=1))
    ledger.commit(w)
    out = str(tmp_path / "u1.json")
    code, _, err = cli(capsys, "export", "u1", "--format", "inspect", "-o", out,
                       "--ledger", str(tmp_path / "ledger.sqlite"))  # fmt: skip
    assert code == 0, err
    log = inspect_log.read_eval_log(out)
    assert log.status == "cancelled" and log.eval.metadata["sealed"] is False
    assert log.eval.metadata["root"] == "" and log.eval.metadata["heads_root"]
    done, unfinished = sorted(log.samples, key=lambda s: s.id)
    assert done.scores["lifecycle_pass"].value == "I" and done.error is None
    assert {n: s.value for n, s in done.scores.items()} == {
        "lifecycle_pass": "I", "captured": "C", "recall_correct": "I"}  # fmt: skip
    assert unfinished.error is not None and "did not finish" in unfinished.error.message
    assert unfinished.scores["lifecycle_pass"].value == "N"


def test_targets_read_as_text_and_diagnostics_are_metadata_never_an_accuracy(tmp_path):
    ledger = str(tmp_path / "l.sqlite")
    argv = ["run", "--protocols", protocol_subset(tmp_path, ["bl-audit-channel"]), "--ledger",
            ledger, "--run-id", "up"]  # fmt: skip
    assert main(argv) == 0
    export(ledger, "up", str(tmp_path / "up.eval"))
    log = inspect_log.read_eval_log(str(tmp_path / "up.eval"))
    [sample] = log.samples
    _, events = ledger_view(ledger, "up")
    decided = [e.body for e, _ in events if isinstance(e, GraderDecisionEvent)]
    [update] = [d.expected for d in decided if d.check == "update_correct"]
    assert isinstance(update, dict) and set(update) == {"value", "not"}
    assert f"{update['value']:g} (not {update['not']:g})" in sample.target
    assert not [t for t in sample.target if t.startswith(("{", "["))], sample.target
    diagnostics = sample.metadata["diagnostics"]
    assert {"teach_budget_exhausted", "duplicated", "capture_attempted"} <= set(diagnostics)
    assert diagnostics["teach_budget_exhausted"]["metadata"]["verdict"] is False
    accuracies = {s.name for s in log.results.scores if "accuracy" in s.metrics}
    assert "teach_budget_exhausted" not in sample.scores and "duplicated" not in accuracies
    assert accuracies == {"lifecycle_pass"} | (LIFECYCLE_SCORED & set(sample.scores))


def test_a_run_with_a_hostile_protocol_id_is_not_exported_in_any_form(ledger, tmp_path, capsys):
    write_run(ledger, "h1", {("p000", 1): {"captured": True}}, planned=2, seal=False)
    hostile = "../../../../tmp/x\\y\x1b[2J\x00"
    w = ledger.new_stream("h1/p001/1")
    w.append(UnitStartedBody(protocol_id=hostile, attempt=1))
    ledger.commit(w)
    out = str(tmp_path / "h1.eval")
    code, _, err = cli(capsys, "export", "h1", "--format", "inspect", "-o", out,
                       "--ledger", str(tmp_path / "ledger.sqlite"))  # fmt: skip
    # The name grammar (docs/ledger-format.md, "Names") fails the run's verification.
    assert code == 1 and "bad name" in err and "\x1b" not in err, err
    assert not os.path.exists(out)


@pytest.mark.parametrize(
    "hostile",
    ["../../../../tmp/x", "..\\..\\x", "a/b\x1b[2J\x00", ".", ""],
    ids=["climbs-with-slashes", "climbs-with-backslashes", "escape-and-nul", "dot", "empty"],
)
def test_a_sample_name_is_one_printable_path_step_whatever_the_id(hostile):
    # Defence in depth under the grammar: an id the reader lets through never names a path.
    name = safe_name(hostile)
    assert name and "/" not in name and "\\" not in name and name not in (".", "..")
    assert all(ch.isprintable() for ch in name), name
    assert os.path.normpath(f"samples/{name}").startswith("samples/")


def test_a_peer_results_import_has_no_sample_timings_its_timestamps_being_synthetic(
    tmp_path, capsys
):
    base = os.path.join(peer_dir(), "bench", "results", "s5-anthropic-k5")
    one = sorted(d for d in os.listdir(base) if d.startswith("lifecycle-a3-2"))[0]
    ledger = str(tmp_path / "l.sqlite")
    results = os.path.join(base, one, "lifecycle-a3.json")
    assert main(["import-peer", "mcp-data-platform", results, "--ledger", ledger,
                 "--run-id", "pass1"]) == 0  # fmt: skip
    out = str(tmp_path / "pass1.eval")
    export(ledger, "pass1", out)
    log = inspect_log.read_eval_log(out)
    assert log.eval.metadata["timestamps"] == "synthetic"
    assert log.eval.metadata["origin"] == "peer claims" and "peer-claims" in log.eval.tags
    assert log.samples and all(s.total_time is None for s in log.samples)
    assert all(s.model_usage["claude-sonnet-5"].output_tokens > 0 for s in log.samples)


def test_a_recorded_re_enactment_reads_back_with_the_models_own_tool_call_ids_and_tokens(
    reenacted, tmp_path
):
    ledger, run_id = reenacted
    out = str(tmp_path / "re.eval")
    export(ledger, run_id, out)
    log = inspect_log.read_eval_log(out)
    assert_log_is_the_run(log, ledger, run_id)
    assert {(s.id, s.epoch) for s in log.samples} == {(p, a) for p in REENACTED for a in (1, 2)}
    _, events = ledger_view(ledger, run_id)
    for stream, pairs in units_of(events).items():
        [sample] = [s for s in log.samples if s.metadata["stream"] == stream]
        asked = [c["id"] for e, _ in pairs if isinstance(e, ModelCallEvent)
                 for c in (e.body.response or {}).get("tool_calls", [])]  # fmt: skip
        answered = [m.tool_call_id for m in sample.messages if m.role == "tool"]
        assert asked and set(asked) <= set(answered)
        finals = [e.body for e, _ in pairs if isinstance(e, EpisodeFinishedEvent)]
        usage = sample.model_usage["claude-sonnet-5"]
        assert usage.output_tokens == sum(f.output_tokens for f in finals)
        assert usage.input_tokens_cache_read == sum(f.cache_read_tokens for f in finals)
        contents = [m.content for m in sample.messages if m.role == "assistant"]
        assert all(f.final_answer in contents for f in finals)
        assert sample.total_time is not None and sample.total_time > 0
    assert log.stats.model_usage["claude-sonnet-5"].output_tokens == sum(
        s.model_usage["claude-sonnet-5"].output_tokens for s in log.samples
    )


def test_a_redacted_bundle_exports_its_withheld_tool_results_counted_not_shown(reenacted, tmp_path):
    ledger, run_id = reenacted
    bundle = str(tmp_path / "redacted.jsonl")
    argv = ["export", run_id, "-o", bundle, "--withhold", "session_call", "--ledger", ledger]
    assert main(argv) == 0
    out = str(tmp_path / "redacted.eval")
    export(ledger, bundle, out)
    log = inspect_log.read_eval_log(out)
    assert log.eval.metadata["source"] == "redacted bundle"
    _, events = ledger_view(ledger, run_id)
    for stream, pairs in units_of(events).items():
        [sample] = [s for s in log.samples if s.metadata["stream"] == stream]
        calls = sum(isinstance(e, SessionCallEvent) for e, _ in pairs)
        assert sample.metadata["withheld_events"] == calls
        assert not [m for m in sample.messages if m.role == "tool"]
        assert [m for m in sample.messages if m.role == "assistant" and m.tool_calls]


# -- Inspect View, rendered --------------------------------------------------------------

INSPECT = shutil.which("inspect", path=os.path.dirname(sys.executable)) or shutil.which("inspect")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_for_line(proc: subprocess.Popen, needle: str, deadline: float) -> str:
    """Read ``proc``'s output until a line holds ``needle``; fail at ``deadline``."""
    assert proc.stdout is not None
    seen = []
    with selectors.DefaultSelector() as sel:
        sel.register(proc.stdout, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not sel.select(timeout=deadline - time.monotonic()):
                break
            line = proc.stdout.readline()
            if not line:  # the server exited
                break
            seen.append(line)
            if needle in line:
                return line
    raise AssertionError(f"inspect view never said {needle!r}: {''.join(seen)[-2000:]}")


NEEDLES = (*REENACTED, "benchledger/lifecycle", "lifecycle_pass")


def rendered_until(url: str, needles: tuple[str, ...], tmp_path, deadline: float) -> str:
    """The page's DOM as headless Chromium renders it, rendered again (a fresh profile each
    time) until it shows every needle or ``deadline`` passes: a loaded machine can use up
    the virtual time budget before the viewer has fetched the log."""
    assert CHROMIUM is not None
    dom, attempt = "", 0
    while time.monotonic() < deadline and not all(n in dom for n in needles):
        attempt += 1
        profile = tmp_path / f"chromium-{attempt}"
        dom = dump_dom(url, profile, 1400, 900, "--virtual-time-budget=30000").stdout
    return dom


@pytest.mark.slow  # about 25 s: the viewer starts in ~7 s, Chromium renders for the rest
@needs_chromium
@pytest.mark.skipif(INSPECT is None, reason="the inspect command (inspect_ai) is not installed")
def test_inspect_view_serves_the_re_enactment_and_chromium_renders_its_samples(reenacted, tmp_path):
    ledger, run_id = reenacted
    logs = tmp_path / "logs"
    logs.mkdir()
    export(ledger, run_id, str(logs / "re.eval"))
    port = free_port()
    assert INSPECT is not None and CHROMIUM is not None
    proc = subprocess.Popen(
        [INSPECT, "view", "start", "--log-dir", str(logs), "--host", "127.0.0.1",
         "--port", str(port)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    try:
        wait_for_line(proc, f"127.0.0.1:{port}", time.monotonic() + 90)
        dom = rendered_until(f"http://127.0.0.1:{port}/", NEEDLES, tmp_path, time.monotonic() + 180)
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    missing = [n for n in NEEDLES if n not in dom]
    assert not missing, f"the page never showed {missing}: {dom[-2000:]}"
