"""``compare --format html`` as a user sees it: three runs laid out by headless Chromium.

At 800 and 1400 px the matrix fits the window (no sideways scroll), no cell is clipped,
each non-baseline cell shows its difference against the baseline, and what differs is
above the matrix. Skipped, with the reason, where Debian's ``chromium`` is absent.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from tests.browser import measured, needs_chromium
from tests.sample import PASSING, PROMOTE, UPDATE, lifecycle_run

MEASURE = r"""<script>
(() => {
  const out = {viewport: innerWidth, pageWidth: document.documentElement.scrollWidth,
               clipped: [], cells: [], differsTop: null, matrixTop: null};
  const text = el => el.textContent.trim();
  try {
    for (const el of document.querySelectorAll("td, th"))
      if (el.scrollWidth > el.clientWidth + 1) out.clipped.push(text(el));
    for (const tr of document.querySelectorAll("table.matrix tr"))
      out.cells.push([...tr.children].map(text));
    out.differsTop = document.querySelector(".differs").getBoundingClientRect().top;
    out.matrixTop = document.querySelector("table.matrix").getBoundingClientRect().top;
  } catch (e) { out.error = String(e); }
  const pre = document.createElement("pre");
  pre.id = "measured";
  pre.textContent = JSON.stringify(out);
  document.body.append(pre);
})();
</script>"""


def _outcomes(fails: int) -> dict[tuple[str, int], dict[str, bool | None]]:
    out: dict[tuple[str, int], dict[str, bool | None]] = {}
    for i in range(12):
        checks = dict(PASSING) | (dict(UPDATE) if i % 3 == 0 else dict(PROMOTE))
        if i < fails:
            checks["recall_correct"] = False
        out[(f"lc-protocol-with-a-long-name-{i:02d}", 1)] = checks
    return out


@pytest.fixture(scope="module")
def page(tmp_path_factory) -> Path:
    """Three runs of one set: scripted, a model, and a recorded run's long labels."""
    tmp = tmp_path_factory.mktemp("compare")
    path = str(tmp / "l.sqlite")
    ledger = Ledger(open_store(path))
    lifecycle_run(ledger, "scripted", _outcomes(0))
    lifecycle_run(ledger, "haiku", _outcomes(4), agent="anthropic:claude-haiku-4-5",
                  model="claude-haiku-4-5")  # fmt: skip
    recorded = "recorded:/work/shared/peers/mcp-data-platform/bench/results/s5-anthropic-k5"
    lifecycle_run(ledger, "sonnet", _outcomes(1), agent=recorded, model="claude-sonnet-4-5",
                  platform="mcp-data-platform (embedded) refplatform-2.0")  # fmt: skip
    ledger.store.close()
    out = tmp / "compare.html"
    argv = ["compare", "scripted", "haiku", "sonnet", "--format", "html", "-o", str(out)]
    assert main([*argv, "--ledger", path]) == 0
    return out


@needs_chromium
@pytest.mark.parametrize("width", [800, 1400], ids=["800px", "1400px"])
def test_three_runs_fit_the_window_with_nothing_clipped(page, tmp_path, width):
    seen = measured(page, MEASURE, tmp_path, width)
    assert seen["viewport"] == width
    assert seen["pageWidth"] <= seen["viewport"], seen["pageWidth"]  # no sideways scroll
    assert seen["clipped"] == []
    assert seen["differsTop"] < seen["matrixTop"]  # what differs comes before the numbers
    head, *rows = seen["cells"]
    assert len(head) == 4 and "recorded:s5-anthropic-k5 (claude-sonnet-4-5)" in head[3]
    recall = next(r for r in rows if r[0] == "personal_recall")
    assert recall[1].startswith("12/12") and "Δ" not in recall[1]  # the baseline
    assert recall[2].startswith("8/12") and "Δ -0.333" in recall[2]
    assert recall[3].startswith("11/12") and "Δ -0.083" in recall[3]
