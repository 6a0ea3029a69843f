"""The HTML scorecard as a user sees it: laid out by headless Chromium and measured in the page.

The report itself carries no script. The test renders a copy with one appended script that
measures every label and cell after layout and writes what it found into the DOM, which
Chromium's ``--dump-dom`` hands back. Debian's ``chromium`` package is enough; where it is
absent the browser tests are skipped with that reason (``.ci/run`` installs it).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    GraderDecisionBody,
    RunStartedBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.projections.card import fmt_interval, fmt_num, fmt_pct, fmt_signed
from benchledger.projections.source import from_ledger
from benchledger.projections.suites.lifecycle.page import DECIDES_PASS
from benchledger.projections.suites.lifecycle.report import render
from benchledger.projections.suites.lifecycle.scorecard import LifecycleFold, scorecard
from tests.browser import measured, needs_chromium
from tests.conftest import peer_dir
from tests.sample import PASSING, PROMOTE, UPDATE

WIDTHS = (800, 1400)  # the narrowest window the page is laid out for, and a wide one
HEIGHT = 1000  # the first screen: what a reader sees before scrolling

# Runs synchronously at the end of <body>: reading a size forces layout, so the numbers are
# the ones the user sees. A box is clipped when its content is wider than the box; an SVG
# label when its text runs past the drawing's edge.
MEASURE = r"""<script>
(() => {
  const out = {viewport: innerWidth, height: innerHeight,
               pageWidth: document.documentElement.scrollWidth, clipped: [], wrapped: [],
               tables: {}, outcomes: {heads: [], rows: [], details: []}, headline: null,
               hashes: [], crosses: []};
  const text = el => el.textContent.trim();
  const lines = el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
  };
  const measure = () => {
    for (const el of document.querySelectorAll("svg text")) {
      const box = el.getBBox(), svg = el.ownerSVGElement, view = svg.viewBox.baseVal;
      // Text is laid out in the drawing's own units: the viewBox's, when it has one.
      const w = view && view.width ? view.width : svg.width.baseVal.value;
      const h = view && view.height ? view.height : svg.height.baseVal.value;
      if (box.x < 0 || box.y < 0 || box.x + box.width > w + 0.5 || box.y + box.height > h + 0.5)
        out.clipped.push("svg: " + text(el));
    }
    for (const svg of document.querySelectorAll("svg")) {
      if (svg.getBoundingClientRect().right > svg.parentElement.getBoundingClientRect().right + 1)
        out.clipped.push("svg wider than its box");
    }
    for (const el of document.querySelectorAll("td, th, code, .fname, .figure, dd")) {
      if (el.scrollWidth > el.clientWidth + 1) out.clipped.push(el.tagName + ": " + text(el));
    }
    // Every figure and name stays on one line; only the definitions, the reasons and an
    // attempt's failed check (under its mark, in a narrow window) may wrap.
    const cells = "table.metrics td:not(:last-child), table.outcomes tr.unit > td:not(.att)";
    for (const el of document.querySelectorAll(cells)) {
      if (text(el) && lines(el) > 1) out.wrapped.push(text(el));
    }
    const style = getComputedStyle(document.body);
    const content =
      document.body.clientWidth - parseFloat(style.paddingLeft) - parseFloat(style.paddingRight);
    for (const el of document.querySelectorAll("table.metrics, table.outcomes")) {
      out.tables[el.classList.contains("metrics") ? "metrics" : "outcomes"] =
        el.getBoundingClientRect().width / content;
    }
    const outcomes = document.querySelector("table.outcomes");
    out.outcomes.heads = [...outcomes.querySelectorAll(":scope > tbody > tr:first-child > th")]
      .map(text);
    for (const tr of outcomes.querySelectorAll(":scope > tbody > tr.unit")) {
      out.outcomes.rows.push([...tr.children].map(text));
      const more = tr.nextElementSibling, checks = more && more.querySelector("table.checks");
      out.outcomes.details.push(checks ? [...checks.rows].map(r => [...r.cells].map(text)) : []);
    }
    const headline = document.querySelector(".headline");
    if (headline) {
      const box = headline.getBoundingClientRect();
      out.headline = {top: box.top, bottom: box.bottom, text: text(headline)};
    }
    // A full hash (64 hex digits) shown anywhere but a closed-by-default <details> or a title.
    const walk = document.createTreeWalker(document.body, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      if (/[0-9a-f]{64}/.test(n.data) && !n.parentElement.closest("details, title, #measured"))
        out.hashes.push(n.data.trim());
    }
    // Every ✗ of the outcomes: its hover text, and the visible text around it (its cell and,
    // for a protocol's row, the reasons row under it).
    const crosses = document.createTreeWalker(outcomes, NodeFilter.SHOW_TEXT);
    for (let n = crosses.nextNode(); n; n = crosses.nextNode()) {
      if (!n.data.includes("✗")) continue;
      const el = n.parentElement, line = el.closest(".reason"), cell = el.closest("td");
      const row = cell.parentElement, next = row.nextElementSibling;
      const more = row.classList.contains("unit") && next && next.classList.contains("more");
      const under = more ? (next.querySelector("summary") || next.cells[0]).textContent : "";
      const within = el.closest("details");
      const summary = within && !line ? within.querySelector("summary").textContent : "";
      out.crosses.push({title: (el.closest("[title]") || {title: ""}).title,
                        line: line ? text(line) : "",
                        near: [text(cell), under, summary].join(" ")});
    }
  };
  try { measure(); } catch (e) { out.error = String(e); }
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();
</script>"""


def rendered(page: Path, tmp: Path, width: int = 1400) -> dict[str, Any]:
    """What Chromium measured in ``page`` in a window ``width`` px wide."""
    return measured(page, MEASURE, tmp, width, HEIGHT)


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> tuple[str, Path]:
    """The README's main job (`benchledger run`: 30 protocols, k=1, scripted, embedded)."""
    tmp = tmp_path_factory.mktemp("default-run")
    ledger = str(tmp / "ledger.sqlite")
    assert main(["run", "--ledger", ledger, "--run-id", "default"]) == 0
    page = tmp / "report.html"
    assert main(["report", "default", "--ledger", ledger, "--format", "html", "-o", str(page)]) == 0
    return ledger, page


@pytest.fixture(scope="module", params=WIDTHS, ids=[f"{w}px" for w in WIDTHS])
def width(request) -> int:
    """The window's width: every layout test runs in a narrow and a wide window."""
    return request.param


@pytest.fixture(scope="module")
def default_seen(default_run, width, tmp_path_factory) -> dict[str, Any]:
    """The default run's report as Chromium laid it out (once per window width)."""
    return rendered(default_run[1], tmp_path_factory.mktemp("chromium"), width)


REASON = "answered 1, expected 2"  # every failing decision of the passes below says it


def reasoned_run(ledger: Ledger, run_id: str, outcomes: dict[str, dict[str, bool]]) -> None:
    """A sealed k=1 lifecycle run whose failing decisions each give their own reason."""
    ledger.start_run(run_id, RunStartedBody(
        suite="lifecycle", protocol_set_hash="ab" * 32, agent="scripted", model="none",
        platform="refplatform", platform_version="test"))  # fmt: skip
    for pid, checks in sorted(outcomes.items()):
        w = ledger.new_stream(f"{run_id}/{pid}/1")
        w.append(UnitStartedBody(protocol_id=pid, attempt=1))
        fin = w.append(EpisodeFinishedBody(episode="recall", final_answer="FINAL ANSWER: 1"))
        for check, verdict in checks.items():
            bad = verdict is (check == "duplicated")
            reason = f"{run_id} {pid} {check}: {REASON}" if bad else "matched"
            body = GraderDecisionBody(
                stage=check.split("_")[0],
                check=check,
                verdict=verdict,
                reason=reason,
                answer="FINAL ANSWER: 1",
                expected=2,
            )
            w.append(body, refs=[fin])
        w.append(UnitFinishedBody(outcome=dict(checks)))
        ledger.commit(w)
    ledger.seal(run_id)


# What fails in each pass of the same 6 protocols (p00 and p03 carry an update); on monday
# p02's promoted fact never surfaced in a tool result: a diagnostic, so that unit passes.
FAILS: dict[str, dict[str, dict[str, bool]]] = {
    "monday": {"p02": {"transfer_surfaced": False}},
    "tuesday": {"p00": {"recall_correct": False}, "p01": {"recall_correct": False}},
    "wednesday": {"p01": {"captured": False, "recall_correct": False},
                  "p03": {"duplicated": True}},
}  # fmt: skip


@pytest.fixture(scope="module")
def passes(tmp_path_factory) -> tuple[str, Path]:
    """Three k=1 runs of the same 6 protocols, to merge as passes (k=3); and its folder."""
    tmp = tmp_path_factory.mktemp("passes")
    path = str(tmp / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    for run_id, fails in FAILS.items():
        outcomes = {
            f"p{i:02d}": dict(PASSING) | dict(UPDATE if i % 3 == 0 else PROMOTE)
            | fails.get(f"p{i:02d}", {})
            for i in range(6)
        }  # fmt: skip
        reasoned_run(ledger, run_id, outcomes)
    ledger.store.close()
    return path, tmp


def report_page(ledger: str, folder: Path, name: str, *runs: str) -> Path:
    """``benchledger report RUNS --format html`` written to ``folder/name.html``."""
    page = folder / f"{name}.html"
    assert main(["report", *runs, "--ledger", ledger, "--format", "html", "-o", str(page)]) == 0
    return page


@pytest.fixture(scope="module")
def merged_seen(passes, width) -> dict[str, Any]:
    """The three passes merged (k=3) as Chromium laid them out."""
    page = report_page(*passes, "merged", "monday", "tuesday", "wednesday")
    return rendered(page, passes[1], width)


@pytest.fixture(scope="module")
def single_seen(passes, width) -> dict[str, Any]:
    """One of the passes alone (k=1, two failed units) as Chromium laid it out."""
    return rendered(report_page(*passes, "tuesday", "tuesday"), passes[1], width)


@pytest.fixture(scope="module")
def peer_seen(width, tmp_path_factory) -> dict[str, Any]:
    """The peer's recorded k=5 run (real agent, real failures) imported and reported."""
    tmp = tmp_path_factory.mktemp("peer-k5")
    results = Path(peer_dir(), "bench", "results", "s5-anthropic-k5", "lifecycle-a3-k5.json")
    ledger = str(tmp / "ledger.sqlite")
    argv = ["import-peer", "mcp-data-platform", str(results), "--run-id", "k5", "--ledger", ledger]
    assert main(argv) == 0
    return rendered(report_page(ledger, tmp, "k5", "k5"), tmp, width)


@needs_chromium
def test_no_label_of_the_default_run_report_is_clipped_or_wrapped(default_seen):
    seen = default_seen
    assert seen["clipped"] == []
    assert seen["wrapped"] == []  # intervals, counts and protocol names stay on one line
    assert seen["pageWidth"] <= seen["viewport"]  # no sideways scrolling


@needs_chromium
def test_the_tables_use_the_width_of_the_page(default_seen):
    widths = default_seen["tables"]
    assert set(widths) == {"metrics", "outcomes"}
    assert all(w > 0.99 for w in widths.values()), widths


@needs_chromium
def test_a_passing_unit_shows_no_cross_not_even_for_a_check_whose_good_outcome_is_false(
    default_seen,
):
    outcomes = default_seen["outcomes"]
    assert "within teach budget" in outcomes["heads"] and "no duplicate" in outcomes["heads"]
    assert len(outcomes["rows"]) == 30
    for row in outcomes["rows"]:
        assert row[-1] == "pass", row  # the scripted agent passes every protocol
        assert "✗" not in row, row


@needs_chromium
def test_the_headline_gives_the_pass_rate_and_pass_k_with_intervals_on_the_first_screen(
    default_seen,
):
    headline = default_seen["headline"]
    assert headline is not None, "no .headline element"
    assert headline["top"] >= 0 and headline["bottom"] < default_seen["height"], headline
    text = headline["text"]
    assert "full lifecycle pass" in text and "pass^1" in text, text
    assert text.count("100.0%") >= 2 and "[88.6%, 100.0%]" in text, text  # 30/30, Wilson


@needs_chromium
def test_no_full_hash_is_shown_outside_details_and_hover_titles(default_seen, merged_seen):
    assert default_seen["hashes"] == []  # its root and set hash: 12 characters, whole on hover
    assert merged_seen["hashes"] == []  # three roots and a set hash


@needs_chromium
def test_several_passes_show_one_row_per_protocol_and_one_cell_per_pass(merged_seen):
    seen = merged_seen
    outcomes = seen["outcomes"]
    assert outcomes["heads"] == ["protocol", "monday", "tuesday", "wednesday", "passed"]
    rows = {r[0]: r[1:] for r in outcomes["rows"]}
    assert list(rows) == [f"p{i:02d}" for i in range(6)]  # one row per protocol
    cells = {(pid, run): r[i] for pid, r in rows.items() for i, run in enumerate(FAILS)}
    failed = {key for key, cell in cells.items() if "✗" in cell}
    assert failed == {("p00", "tuesday"), ("p01", "tuesday"), ("p01", "wednesday"),
                      ("p03", "wednesday")}  # fmt: skip
    assert rows["p01"][1:] == ["✗ recall correct", "✗ captured +1", "1/3"]
    assert rows["p02"] == ["✓", "✓", "✓", "3/3"]  # a diagnostic decides nothing
    p02 = dict((r[0], r[1:]) for r in outcomes["details"][2])  # its per-check detail
    assert p02["check"] == ["monday", "tuesday", "wednesday"]
    assert p02["transfer surfaced"] == ["no", "yes", "yes"]
    assert seen["clipped"] == [] and seen["wrapped"] == []
    assert seen["pageWidth"] <= seen["viewport"]


@needs_chromium
@pytest.mark.parametrize("k", [1, 3], ids=["k1", "k3"])
def test_every_cross_shows_the_graders_reason(k, single_seen, merged_seen):
    seen = single_seen if k == 1 else merged_seen
    crosses = seen["crosses"]
    assert crosses
    for cross in crosses:
        if cross["line"]:  # a visible reason line, ✗ check: reason
            assert REASON in cross["line"], cross
        else:  # a mark: the reason on hover, and in sight under its row
            assert REASON in cross["title"] and REASON in cross["near"], cross
    shown = " ".join(c["line"] for c in crosses)
    runs = ["tuesday"] if k == 1 else list(FAILS)
    for run in runs:
        for pid, checks in FAILS[run].items():
            for check in set(checks) & DECIDES_PASS:
                where = f"{run} {pid} {check}: {REASON}"
                assert any(where in c["title"] for c in crosses), where
                assert (f"{pid} {check}: {REASON}") in shown, where


@needs_chromium
def test_a_real_k5_run_lays_out_in_the_window_and_explains_every_failure(peer_seen):
    seen = peer_seen
    assert seen["clipped"] == [] and seen["pageWidth"] <= seen["viewport"]
    assert seen["headline"] and seen["headline"]["bottom"] < seen["height"]
    assert seen["hashes"] == []
    outcomes = seen["outcomes"]
    assert outcomes["heads"] == ["protocol", *(f"attempt {a}" for a in range(1, 6)), "passed"]
    assert len(outcomes["rows"]) == 30
    crosses = seen["crosses"]
    assert len(crosses) > 30  # the agent failed captures, recalls, updates
    for cross in crosses:
        if cross["line"].startswith("✗ infra error"):  # its reason is the error itself
            assert "status 409" in cross["line"], cross
            continue
        said = "recorded by mcp-data-platform as "  # the peer's verdicts carry no other reason
        assert said in (cross["line"] or cross["title"]) and said in cross["near"], cross


def test_a_run_whose_standing_was_never_read_opens_with_an_unauthenticated_banner(passes):
    fold = LifecycleFold()
    for event, link in from_ledger(Ledger(open_store(passes[0])), "monday").events:
        fold.apply(event, link)
    card = scorecard([fold.result()])
    assert card.meta.standing is None  # read without the door: nobody checked who vouches
    body = render(card, "html").split("<body>", 1)[1].lstrip()
    assert body.startswith('<p class="standing" role="alert"'), body[:300]
    assert "UNAUTHENTICATED" in body.split("</p>", 1)[0]


def test_the_report_html_stays_free_of_scripts_and_fetches(default_run):
    page = default_run[1].read_text()
    assert not re.search(r"(src|href)=|https?://|<script|@import", page)


def test_rates_and_their_intervals_share_one_notation_in_every_text_format(default_run, capsys):
    ledger = default_run[0]
    for fmt in ("table", "markdown", "html"):
        assert main(["report", "default", "--ledger", ledger, "--format", fmt]) == 0
        out = capsys.readouterr().out
        assert "[88.6%, 100.0%]" in out, fmt  # Wilson 30/30, as the rate beside it: in %
        assert not re.search(r"\[0\.\d{3}, ", out), fmt


def test_json_keeps_full_precision(default_run, capsys):
    assert main(["report", "default", "--ledger", default_run[0], "--format", "json"]) == 0
    capture = json.loads(capsys.readouterr().out)["metrics"]["capture_rate"]
    assert capture["rate"] == 1.0 and len(repr(capture["ci_low"])) > 8


def test_only_the_checks_of_the_pass_rule_are_shown_as_pass_or_fail():
    decisive = {"captured", "recall_correct", "promoted", "transfer_correct", "update_captured",
                "update_correct", "duplicated", "abstain_correct"}  # fmt: skip
    assert set(DECIDES_PASS) == decisive  # the rest are diagnostics: yes or no, never ✗


def test_display_rounding_never_shows_float_noise_or_a_negative_zero():
    assert fmt_num(29.999999999999996) == "30"
    assert fmt_num(7.25) == "7.25"
    assert fmt_pct(0.9999999999999999) == "100.0%"
    assert fmt_pct(-1e-12) == "0.0%"
    assert fmt_pct(None) == "n/a"
    assert fmt_signed(-1e-9) == "+0.000"
    assert fmt_signed(-0.2917) == "-0.292"
    assert fmt_interval(0.88649, 1.0) == "[88.6%, 100.0%]"
