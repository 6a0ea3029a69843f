"""``compare`` leads with what differs: the metrics on which the runs disagree (and only
those), wall time, latency, cost, stages not applicable and platform options, before the
full matrix, in every format; whatever a run recorded is shown inert.

Two real runs on the embedded platform: the committed protocols with the lexical embedder,
and the same with an embedder that fails (an Ollama stand-in on loopback answering 500),
so refplatform's duplicate detection cannot supersede and every update duplicates.
"""

from __future__ import annotations

import json
import os
import re

import pytest
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from benchledger.cli import main
from benchledger.harness.peer.tasks_import import import_arm
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    GraderDecisionBody,
    RunStartedBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.projections import determinism, differences
from benchledger.projections.card import RunMeta
from benchledger.refplatform.server import LoopbackServer
from tests.sample import PASSING, PROMOTE
from tests.test_tasks_suite import family_dir

# Two protocols with an update (where duplicate detection decides) and one without.
PROTOCOLS = ("bl-audit-channel", "bl-benchmark-tier", "bl-anchor-tier")
# The correction lands beside the original instead of replacing it, so the corrected fact
# also ranks lower after the update (the lifecycle's retrieval metrics, update_recall).
DIFFERING = ["full_lifecycle", "pass_k", "duplicate_rate", "recall_at_1", "mrr",
             "recall_at_1.update_recall", "mrr.update_recall"]  # fmt: skip
# A model name carrying terminal control (clear screen, a bidi override) and HTML.
HOSTILE = "bro\x1b[2J\u202eken<b>x</b>"
ESCAPED = "bro\\u001b[2J\\u202eken"
# ... and in Markdown, its backslashes and bracket escaped too, so it renders as ESCAPED.
MD_ESCAPED = ESCAPED.replace("\\", "\\\\").replace("[", "\\[")


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> str:
    """A ledger holding ``lexical`` and ``broken`` (the failing embedder) runs."""

    async def embeddings(request: Request) -> JSONResponse:
        return JSONResponse({"error": "model not loaded"}, status_code=500)

    server = LoopbackServer(
        Starlette(routes=[Route("/api/embeddings", embeddings, methods=["POST"])])
    )
    server.start()
    path = str(tmp_path_factory.mktemp("differences") / "l.sqlite")
    picked = [x for p in PROTOCOLS for x in ("--protocol", p)]
    try:
        assert main(["run", *picked, "--run-id", "lexical", "--ledger", path]) == 0
        embedder = f"ollama:{HOSTILE}@{server.url}"
        argv = ["run", *picked, "--run-id", "broken", "--embedder", embedder, "--ledger", path]
        assert main(argv) == 0
    finally:
        server.stop()
    return path


def compare(capsys, path: str, fmt: str, *runs: str) -> str:
    capsys.readouterr()
    code = main(["compare", *(runs or ("lexical", "broken")), "--format", fmt, "--ledger", path])
    out = capsys.readouterr()
    assert code == 0, out.err
    return out.out


def section(out: str, fmt: str) -> str:
    """The what-differs section of a compare output, up to where the matrix begins."""
    if fmt == "html":
        return out.split('<div class="differs">', 1)[1].split("</div>", 1)[0]
    start = out.index("what differs" if fmt == "table" else "**What differs**")
    return out[start : out.index("\nA = " if fmt == "table" else "- **A**", start)]


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_the_lead_names_exactly_the_metrics_that_differ(runs, capsys, fmt):
    lead = section(compare(capsys, runs, fmt), fmt)
    named = [m for m in (*DIFFERING, "capture_rate", "personal_recall", "update_correctness",
                         "transfer_rate", "abstention_rate", "recall_at_10",
                         "recall_at_5.recall") if f"{m}: A = " in lead]  # fmt: skip
    assert named == DIFFERING, lead
    assert "duplicate_rate: A = 0/2 0.0%, B = 2/2 100.0%" in lead
    # MRR is a mean of reciprocal ranks, not a share: a number over its episodes
    assert re.search(r"mrr: A = 1\.000 \(\d+ episodes\), B = 0\.\d{3} \(\d+ episodes\)", lead)
    assert "the other 25 of 32 metrics agree" in lead
    assert "platform options: A = none (defaults), B = embedder=ollama:" in lead
    # Timing is shown beside the metrics when it differs as displayed; two runs this small
    # can show the same rounded wall, which is then no difference (the facts' own test).
    walls = json.loads(compare(capsys, runs, "json"))["extra"]["wall"]
    shown = f"wall: A = {walls['a']}, B = {walls['b']}"
    assert (shown in lead) == (walls["a"] != walls["b"]), (walls, lead)


def test_a_difference_says_whether_its_interval_resolves_it(runs, capsys):
    lead = section(compare(capsys, runs, "table"), "table")
    full = next(x for x in lead.splitlines() if x.strip().startswith("full_lifecycle:"))
    assert "A = 3/3 100.0%, B = 1/3 33.3%" in full and "(B: Δ -0.667 [" in full
    assert full.endswith("not resolved at 95%)")  # three pairs resolve nothing smaller
    # Two paired episodes that moved alike once gave a zero-width bootstrap, "resolved".
    mrr = next(x for x in lead.splitlines() if x.strip().startswith("mrr.update_recall:"))
    assert "2 paired episodes: too few for a bootstrap interval" in mrr
    assert mrr.endswith("not resolved at 95%)")


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_what_differs_comes_before_the_matrix(runs, capsys, fmt):
    out = compare(capsys, runs, fmt)
    lead = out.index('class="differs"' if fmt == "html" else section(out, fmt))
    matrix = {"table": "\nmetric ", "markdown": "| metric |", "html": 'class="matrix"'}[fmt]
    assert lead < out.index(matrix)
    if fmt != "html":  # after who vouches for each run, before the legend
        assert out.index("UNAUTHENTICATED") < lead < out.index("root ")


def test_the_json_carries_what_differs(runs, capsys):
    doc = json.loads(compare(capsys, runs, "json"))["what_differs"]
    assert [m["name"] for m in doc["metrics"]] == DIFFERING
    assert doc["metrics"][2]["values"] == {"a": "0/2 0.0%", "b": "2/2 100.0%"}
    assert "capture_rate" in doc["agree"]
    assert differences.OPTIONS in [f["name"] for f in doc["facts"]]


def test_runs_that_agree_say_so_in_one_line(runs, capsys):
    out = compare(capsys, runs, "table", "lexical", "lexical")
    lines = [x for x in out.splitlines() if x.startswith("what differs")]
    assert lines == [
        "what differs: all 32 metrics and every recorded run fact agree"
    ]  # the same run twice: even its timing is the same


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_a_hostile_recorded_option_is_inert_in_every_format(runs, capsys, fmt):
    out = compare(capsys, runs, fmt)
    assert "\x1b" not in out and "\u202e" not in out
    if fmt == "json":
        facts = json.loads(out)["what_differs"]["facts"]
        shown = next(f for f in facts if f["name"] == differences.OPTIONS)["values"]["b"]
        assert ESCAPED in shown
        return
    shown = MD_ESCAPED if fmt == "markdown" else ESCAPED
    assert shown in section(out, fmt)
    if fmt == "html":
        assert "<b>x</b>" not in out and "&lt;b&gt;x&lt;/b&gt;" in section(out, fmt)
    if fmt == "markdown":
        assert "<b>" not in section(out, fmt) and "\\<b\\>x\\</b\\>" in section(out, fmt)


# -- stages not applicable, with a hostile reason ----------------------------------------

REASON = "no knowledge pages\x1b]0;owned\x07 <script>alert(1)</script>\nforged: line"


def _run(ledger: Ledger, run_id: str, promote_applies: bool) -> None:
    """A sealed lifecycle run of two protocols, whose promotions are not applicable (with
    REASON) unless ``promote_applies``."""
    ledger.start_run(
        run_id,
        RunStartedBody(
            suite="lifecycle",
            protocol_set_hash="set-1",
            agent="scripted",
            platform="p",
            platform_version="1",
        ),
    )
    for pid in ("p0", "p1"):
        w = ledger.new_stream(f"{run_id}/{pid}/1")
        w.append(UnitStartedBody(protocol_id=pid, attempt=1))
        checks: dict[str, bool | None] = dict(PASSING)
        for check, verdict in checks.items():
            w.append(GraderDecisionBody(stage=check.split("_")[0], check=check, verdict=verdict))
        if promote_applies:
            checks |= PROMOTE
            w.append(GraderDecisionBody(stage="promote", check="promoted", verdict=True))
        else:
            checks["promoted"] = None
            w.append(GraderDecisionBody(stage="promote", check="promoted", verdict=None,
                                        reason=f"not applicable: {REASON}"))  # fmt: skip
        w.append(UnitFinishedBody(outcome=checks))
        ledger.commit(w)
    ledger.seal(run_id)


@pytest.fixture(scope="module")
def na_runs(tmp_path_factory) -> str:
    path = str(tmp_path_factory.mktemp("na") / "l.sqlite")
    ledger = Ledger(open_store(path))
    _run(ledger, "full", promote_applies=True)
    _run(ledger, "lacking", promote_applies=False)
    ledger.store.close()
    return path


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_stages_not_applicable_lead_with_their_reason_inert(na_runs, capsys, fmt):
    out = compare(capsys, na_runs, fmt, "full", "lacking")
    assert "\x1b" not in out and "\x07" not in out
    if fmt == "json":
        facts = json.loads(out)["what_differs"]["facts"]
        na = next(f for f in facts if f["name"] == differences.NOT_APPLICABLE)["values"]
        assert na["a"] == "none" and na["b"].startswith("promote in 2 unit(s): no knowledge pages")
        assert "\\u001b]0;owned\\u0007" in na["b"] and "\\u000aforged: line" in na["b"]
        return
    lead = section(out, fmt)
    assert "n/a stages: A = none, B = promote in 2 unit(s): no knowledge pages" in lead
    assert "\\u000aforged: line" in lead  # the newline is escaped: no line of its own
    assert not any(x.startswith("forged") for x in out.splitlines())
    if fmt == "html":
        assert "<script>" not in out and "&lt;script&gt;" in lead


# -- the tasks suite: the same lead over its Newcombe differences ------------------------


@pytest.fixture(scope="module")
def arms(tmp_path_factory) -> tuple[str, str, str]:
    """The peer's haiku and sonnet arms of one study, imported: (ledger, haiku, sonnet)."""
    path = str(tmp_path_factory.mktemp("tasks") / "l.sqlite")
    ledger = Ledger(open_store(path))
    folder = family_dir()  # skips, with the reason, where the peer's material is absent
    haiku, sonnet = (
        import_arm(ledger, os.path.join(folder, f"checkable-wrong-{m}"))[0]
        for m in ("haiku", "sonnet")
    )
    ledger.store.close()
    return path, haiku, sonnet


@pytest.mark.parametrize("fmt", ["table", "markdown", "html"])
def test_a_tasks_compare_leads_with_the_rates_that_differ(arms, capsys, fmt):
    path, haiku, sonnet = arms
    out = compare(capsys, path, fmt, haiku, sonnet)
    if fmt == "html":
        lead = section(out, fmt)
    else:
        start = out.index("what differs" if fmt == "table" else "**What differs**")
        lead = out[start : out.index("A = haiku" if fmt == "table" else "- **A**", start)]
    named = [m for m in ("correct", "adopted", "trap", "queried", "observed", "exposed", "other")
             if f"\n{'- ' if fmt == 'markdown' else '  ' if fmt == 'table' else ''}{m}: A = "
             in lead.replace("<li>", "\n")]  # fmt: skip
    assert named == ["correct", "adopted", "queried", "observed", "exposed"], lead
    assert "adopted: A = 16/24 66.7%, B = 0/24 0.0% (B: Δ -0.667 " in lead.replace("\\[", "[")
    assert "exposed: A = 3/24 12.5%, B = 0/24 0.0%" in lead and "not resolved at 95%" in lead
    assert out.index(lead) < out.index({"table": "\nmetric ", "markdown": "| metric |",
                                        "html": "<table>"}[fmt])  # fmt: skip


# -- the scorecard names the platform options its run recorded ---------------------------


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_a_report_names_the_embedder_its_run_recorded(runs, capsys, fmt):
    capsys.readouterr()
    assert main(["report", "broken", "--format", fmt, "--ledger", runs]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and "\u202e" not in out
    assert "<b>x" not in out or fmt != "html"  # HTML escapes it
    if fmt == "json":
        (run,) = json.loads(out)["runs"]
        assert run["platform_options"]["embedder"].startswith(f"ollama:{HOSTILE}@http://127.0.0.1:")
        return
    shown = MD_ESCAPED if fmt == "markdown" else ESCAPED
    assert "platform options" in out and f"embedder=ollama:{shown}" in out
    assert main(["report", "lexical", "--format", fmt, "--ledger", runs]) == 0
    assert "none (defaults)" in capsys.readouterr().out  # lexical, the default: none recorded


@pytest.mark.parametrize("command", ["report", "compare"])
def test_markdown_shows_recorded_markup_as_written_and_renders_none_of_it(runs, capsys, command):
    """A recorded name's HTML, brackets and code ticks are escaped wherever Markdown shows
    it (the header bullets, the lead, the matrix): pasted in a pull request, it renders as
    the text it is."""
    capsys.readouterr()
    runs_named = ["broken"] if command == "report" else ["lexical", "broken"]
    assert main([command, *runs_named, "--format", "markdown", "--ledger", runs]) == 0
    out = capsys.readouterr().out
    assert "<b>" not in out and "</b>" not in out, out
    assert "\\<b\\>x\\</b\\>" in out
    assert f"embedder=ollama:{MD_ESCAPED}" in out


def test_the_platforms_tool_call_latency_is_on_the_card_and_in_the_lead(runs, capsys):
    """Each tools/call the run recorded (session_call latency_ms), as p50 / p95."""
    capsys.readouterr()
    assert main(["report", "lexical", "--format", "json", "--ledger", runs]) == 0
    tools = json.loads(capsys.readouterr().out)["usage"]["tool_calls"]["latency_ms"]
    assert tools["n"] > 3 * 5 and 0 < tools["p50"] <= tools["p95"]  # 5+ episodes a protocol
    doc = json.loads(compare(capsys, runs, "json"))
    assert set(doc["extra"]["tool call p50 / p95"]) == {"a", "b"}
    assert main(["report", "lexical", "--ledger", runs]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("tool calls"))
    assert f"{tools['n']}, latency p50 " in line


# -- the shared function, as another suite's compare calls it --------------------------


def test_plain_rows_of_any_suite_keep_only_what_differs():
    """A suite with means, not rates (LoCoMo's F1), hands in (name, values) pairs."""
    found = differences.what_differs(
        ["A", "B", "C"],
        metrics=[("locomo_f1", ["0.412", "0.412", "0.388"]), ("recall_at_5", ["0.6"] * 3)],
        facts=[("wall", ["4.0 s", "48 s", "67 s"]), ("tokens in / out", ["0 / 0"] * 3)],
    )
    assert [f.name for f in found.metrics] == ["locomo_f1"] and found.agree == ("recall_at_5",)
    assert differences.items(found) == [
        "locomo_f1: A = 0.412, B = 0.412, C = 0.388",
        "the other 1 of 2 metrics agree",
        "wall: A = 4.0 s, B = 48 s, C = 67 s",
    ]


@pytest.mark.parametrize(
    ("render", "expected"),
    [
        (differences.text_lines, ["what differs: all 2 metrics and every recorded run fact agree"]),
        (
            differences.markdown_lines,
            ["**What differs**", "", "- nothing differs: all 2 metrics and every recorded "
             "run fact agree", ""],
        ),
        (
            differences.html_items,
            "<li>nothing differs: all 2 metrics and every recorded run fact agree</li>",
        ),
    ],
    ids=["text", "markdown", "html"],
)  # fmt: skip
def test_when_nothing_differs_each_format_says_so_in_one_line(render, expected):
    same = differences.what_differs(["A", "B"], [("x", ["1", "1"]), ("y", ["2", "2"])],
                                    [("wall", ["1 s", "1 s"])])  # fmt: skip
    assert same.nothing and render(same) == expected


def test_a_row_without_one_value_per_run_is_refused():
    with pytest.raises(ValueError, match="row 'x' has 1 values for 2 runs"):
        differences.what_differs(["A", "B"], [("x", ["1"])])


# -- determinism across runs: the runs' trace hashes, unit by unit ----------------------------


@pytest.fixture(scope="module")
def twins(tmp_path_factory) -> str:
    """``one`` and ``two``: the same configuration run twice (one unit at a time, so no
    unit's memory reaches another's in a different order); ``wl``: the same with the
    platform option ``--embedder wordllama``."""
    pytest.importorskip("wordllama", reason="wordllama is in the test extra")
    path = str(tmp_path_factory.mktemp("twins") / "l.sqlite")
    picked = [x for p in PROTOCOLS for x in ("--protocol", p)]
    for run_id, extra in (("one", []), ("two", []), ("wl", ["--embedder", "wordllama"])):
        argv = ["run", *picked, "--concurrency", "1", "--run-id", run_id, "--ledger", path]
        assert main([*argv, *extra]) == 0
    return path


def test_compare_leads_with_the_trace_hashes_and_where_a_run_first_differs(twins, capsys):
    out = compare(capsys, twins, "table", "one", "two", "wl")
    lines = out.splitlines()
    lead = next(i for i, x in enumerate(lines) if x.startswith("trace hashes equal: "))
    # After who vouches for each run, before what differs.
    assert lead > max(i for i, x in enumerate(lines) if "UNAUTHENTICATED" in x)
    assert lead < lines.index("what differs:")
    assert lines[lead] == "trace hashes equal: 0 of 3 units"  # wl differs on every unit
    assert (
        lines[lead + 1]
        == "  two: 3 of 3 units equal to one's; same configuration, identical traces"
    )
    wl = lines[lead + 2]
    assert wl.startswith("  wl: 0 of 3 units equal to one's; configuration differs: platform "
                         "options: one = none (defaults), wl = embedder=wordllama; first differs "
                         "at unit bl-anchor-tier/1, item ")  # fmt: skip
    # The first differing item of the trace is the platform saying what it embeds with.
    assert re.search(r"\(session_call, seq \d+ vs \d+\): content\[0\]\.text\.embedder: "
                     r"'lexical' vs 'wordllama'$", wl), wl  # fmt: skip
    doc = json.loads(compare(capsys, twins, "json", "one", "two", "wl"))["what_differs"]
    traces = doc["traces"]
    assert (traces["equal"], traces["units"], traces["missing"]) == (0, 3, [])
    for unit in (f"{p}/1" for p in PROTOCOLS):
        hashes = traces["per_unit"][unit]["hashes"]
        assert hashes["one"] == hashes["two"] != hashes["wl"] and len(hashes["one"]) == 64
    assert traces["versus"]["two"] == {"equal": 3, "units": 3, "same_configuration": True,
                                       "configuration_differs": [],
                                       "first_difference": None}  # fmt: skip
    assert traces["versus"]["wl"]["same_configuration"] is False
    # Two runs alone: every unit agrees, the count says so.
    out = compare(capsys, twins, "table", "one", "two")
    assert "trace hashes equal: 3 of 3 units\n" in out
    for fmt in ("markdown", "html"):
        assert "trace hashes equal: 0 of 3 units" in compare(capsys, twins, fmt, "one", "two", "wl")


def test_runs_of_one_configuration_whose_traces_differ_are_said_not_identical(twins):
    # wl's units judged under one's configuration: what a re-run that should have been
    # identical, and was not, is told (the first unit, item and field where they part).
    with open_store(twins) as store:
        one, two, wl = (list(Ledger(store).events(r)) for r in ("one", "two", "wl"))
    started = next(e.body for e, _ in one if isinstance(e.body, RunStartedBody))
    same = RunMeta(run_id="one", started=started)
    runs = [determinism.of_run([(r, evs)]) for r, evs in (("one", one), ("two", two), ("wl", wl))]
    found = determinism.agreement([same, same, same], runs)
    assert [v.configuration for v in found.versus] == [(), ()]
    assert (
        found.lines()[1] == "two: 3 of 3 units equal to one's; same configuration, identical traces"
    )
    assert found.lines()[2].startswith(
        "wl: 0 of 3 units equal to one's; same configuration: not "
        "identical; first differs at unit bl-anchor-tier/1, item "
    )
    unit = "bl-anchor-tier/1"
    assert determinism.first_difference(runs[0].events[unit], runs[1].events[unit]) == ""
