"""The HTML scorecard as a user sees it: laid out by headless Chromium and measured in the page.

The report itself carries no script. The test renders a copy with one appended script that
measures every label and cell after layout and writes what it found into the DOM, which
Chromium's ``--dump-dom`` hands back. Debian's ``chromium`` package is enough; where it is
absent the browser tests are skipped with that reason (``.ci/run`` installs it).
"""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from cli import main
from ledger import Ledger, open_store
from projections.card import fmt_interval, fmt_num, fmt_pct, fmt_signed
from projections.suites.lifecycle.report import DECIDES_PASS
from tests.sample import PASSING, PROMOTE, UPDATE, lifecycle_run

CHROMIUM = shutil.which("chromium") or (
    "/usr/bin/chromium" if os.access("/usr/bin/chromium", os.X_OK) else None
)
needs_chromium = pytest.mark.skipif(
    CHROMIUM is None,
    reason="headless Chromium is not installed (apt-get install -y chromium; .ci/run does)",
)
# No network, no first-run work, no GPU: a page load and a DOM dump, the same on every machine.
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--hide-scrollbars",
    "--window-size=1400,1000",
)

# Runs synchronously at the end of <body>: reading a size forces layout, so the numbers are
# the ones the user sees. A box is clipped when its content is wider than the box; an SVG
# label when its text runs past the drawing's edge.
MEASURE = r"""<script>
(() => {
  const out = {viewport: innerWidth, pageWidth: document.documentElement.scrollWidth,
               clipped: [], wrapped: [], tables: {}, outcomes: {heads: [], rows: []}};
  const text = el => el.textContent.trim();
  const lines = el => {
    const range = document.createRange();
    range.selectNodeContents(el);
    return new Set([...range.getClientRects()].map(r => Math.round(r.top))).size;
  };
  const measure = () => {
    for (const el of document.querySelectorAll("svg text")) {
      const box = el.getBBox(), svg = el.ownerSVGElement;
      const w = svg.width.baseVal.value, h = svg.height.baseVal.value;
      if (box.x < 0 || box.y < 0 || box.x + box.width > w + 0.5 || box.y + box.height > h + 0.5)
        out.clipped.push("svg: " + text(el));
    }
    for (const el of document.querySelectorAll("td, th, code, .fname")) {
      if (el.scrollWidth > el.clientWidth + 1) out.clipped.push(el.tagName + ": " + text(el));
    }
    // Every figure and name stays on one line; only the definitions may wrap.
    const cells = "table.metrics td:not(:last-child), table.outcomes td";
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
    out.outcomes.heads = [...outcomes.querySelectorAll("tr:first-child th")].map(text);
    for (const tr of outcomes.querySelectorAll("tr.unit"))
      out.outcomes.rows.push([...tr.children].map(text));
  };
  try { measure(); } catch (e) { out.error = String(e); }
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();
</script>"""


def rendered(page: Path, tmp: Path) -> dict[str, Any]:
    """What Chromium measured in ``page`` at 1400 px wide."""
    probe = tmp / f"probe-{page.stem}.html"
    probe.write_text(page.read_text().replace("</body>", MEASURE + "</body>"))
    assert CHROMIUM is not None
    res = subprocess.run(
        [CHROMIUM, *FLAGS, f"--user-data-dir={tmp / 'chromium-profile'}", "--dump-dom",
         probe.as_uri()],
        capture_output=True, text=True, timeout=180, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    found = re.search(r'<pre id="measured">(.*?)</pre>', res.stdout, re.S)
    assert found, f"chromium exit {res.returncode}, no measurement: {res.stderr[-2000:]}"
    seen = json.loads(html.unescape(found.group(1)))
    assert "error" not in seen, seen["error"]
    return seen


@pytest.fixture(scope="module")
def default_run(tmp_path_factory) -> tuple[str, Path]:
    """The README's main job (`benchledger run`: 30 protocols, k=1, scripted, embedded)."""
    tmp = tmp_path_factory.mktemp("default-run")
    ledger = str(tmp / "ledger.sqlite")
    assert main(["run", "--ledger", ledger, "--run-id", "default"]) == 0
    page = tmp / "report.html"
    assert main(["report", "default", "--ledger", ledger, "--format", "html", "-o", str(page)]) == 0
    return ledger, page


@pytest.fixture(scope="module")
def default_seen(default_run, tmp_path_factory) -> dict[str, Any]:
    """The default run's report as Chromium laid it out (rendered once for the module)."""
    return rendered(default_run[1], tmp_path_factory.mktemp("chromium"))


@pytest.fixture(scope="module")
def merged_page(tmp_path_factory) -> Path:
    """Two runs of the same 6 protocols merged as passes; the second fails recall on two.

    On the first, p02's promoted fact never surfaced in a tool result: a diagnostic, not a
    failure, so that unit still passes.
    """
    tmp = tmp_path_factory.mktemp("merged")
    path = str(tmp / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    for run_id, recall_fails in (("monday", 0), ("tuesday", 2)):
        outcomes: dict[tuple[str, int], dict[str, bool | None]] = {}
        for i in range(6):
            checks = dict(PASSING) | (dict(UPDATE) if i % 3 == 0 else dict(PROMOTE))
            if i < recall_fails:
                checks["recall_correct"] = False
            if run_id == "monday" and i == 2:
                checks["transfer_surfaced"] = False
            outcomes[(f"p{i:02d}", 1)] = checks  # each run is one pass: attempt 1
        lifecycle_run(ledger, run_id, outcomes)
    ledger.store.close()
    page = tmp / "merged.html"
    argv = ["report", "monday", "tuesday", "--ledger", path, "--format", "html", "-o", str(page)]
    assert main(argv) == 0
    return page


@needs_chromium
def test_no_label_of_the_default_run_report_is_clipped_or_wrapped(default_seen):
    seen = default_seen
    assert seen["clipped"] == []
    assert seen["wrapped"] == []  # intervals, counts and protocol names stay on one line
    assert seen["pageWidth"] <= seen["viewport"]  # no sideways scrolling at 1400 px


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
def test_each_merged_row_names_its_run_and_attempt(merged_page, tmp_path):
    seen = rendered(merged_page, tmp_path)
    heads, rows = seen["outcomes"]["heads"], seen["outcomes"]["rows"]
    assert heads[:3] == ["protocol", "run", "attempt"]
    assert len(rows) == 12
    assert {(r[1], r[2]) for r in rows} == {("monday", "1"), ("tuesday", "1")}
    failed = {(r[0], r[1]) for r in rows if r[-1] == "fail"}
    assert failed == {("p00", "tuesday"), ("p01", "tuesday")}  # which pass failed, by name
    for row in rows:
        assert ("✗" in row) == (row[-1] == "fail"), row
    p02 = next(r for r in rows if r[:2] == ["p02", "monday"])
    assert p02[heads.index("transfer surfaced")] == "no" and p02[-1] == "pass"
    assert seen["clipped"] == [] and seen["wrapped"] == []


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
