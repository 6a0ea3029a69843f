"""A partial run is never shown as whole: every display of an unsealed run says so first.

The partial runs here: a lifecycle run that planned 30 units and was interrupted after 26,
a bundle of a finished 30-unit run whose seal and one whole unit were cut out (with its
header's root blanked, so the chain alone cannot tell), and a real run cancelled by the
driver after 3 of its 4 units.
"""

from __future__ import annotations

import json
import re

import pytest

from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import export_run
from tests.conftest import cli, write_run
from tests.sample import PASSING, PROMOTE, counter_clock
from tests.test_driver import ADMIN, POOL, SUBSET, external, interrupted_after, subset

PLANNED = 30
CUT = "p007/1"  # the unit cut out of the bundle


def write_partial(ledger: Ledger, run_id: str, *, suite: str, finished: int, seal: bool) -> None:
    """A run whose record plans 30 units (p000/1 ..), of which the first ``finished`` ran."""
    units = {(f"p{i:03d}", 1): dict(PASSING) | dict(PROMOTE) for i in range(finished)}
    write_run(ledger, run_id, units, suite=suite, planned=PLANNED, seal=seal)


@pytest.fixture(scope="module")
def runs(tmp_path_factory) -> dict[str, str]:
    """A ledger with "part" (26 of 30, unsealed), "whole" (sealed) and "prov" (provenance,
    12 of 30, unsealed), and "cut.jsonl": the whole run less its seal and unit p007/1."""
    folder = tmp_path_factory.mktemp("partial")
    db = str(folder / "l.sqlite")
    ledger = Ledger(open_store(db), clock=counter_clock())
    write_partial(ledger, "part", suite="lifecycle", finished=26, seal=False)
    write_partial(ledger, "whole", suite="lifecycle", finished=PLANNED, seal=True)
    write_partial(ledger, "prov", suite="provenance", finished=12, seal=False)
    full = folder / "whole.jsonl"
    export_run(ledger, "whole", str(full))
    ledger.store.close()
    header, *lines = full.read_text().splitlines()
    kept = [ln for ln in lines if '"run_sealed"' not in ln and f'"whole/{CUT}"' not in ln]
    assert len(kept) < len(lines) - 1  # the seal and every line of the unit went
    header = re.sub(r'"root":"[0-9a-f]+"', '"root":""', header)
    cut = folder / "cut.jsonl"
    cut.write_text("\n".join([header, *kept]) + "\n")
    return {"db": db, "cut": str(cut), "dir": str(folder)}


def target(runs: dict[str, str], which: str) -> list[str]:
    return [runs["cut"]] if which == "bundle" else [which, "--ledger", runs["db"]]


SOURCES = {"ledger-run": ("part", 26), "bundle": ("bundle", 29)}


@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.parametrize(("which", "finished"), SOURCES.values(), ids=SOURCES.keys())
def test_a_text_report_of_an_unsealed_run_says_so_on_its_first_line(
    runs, capsys, fmt, which, finished
):
    code, out, _ = cli(capsys, "report", *target(runs, which), "--format", fmt)
    assert code == 0
    assert f"UNSEALED: {finished} of 30 planned units finished" in out.splitlines()[0]


@pytest.mark.parametrize(("which", "finished"), SOURCES.values(), ids=SOURCES.keys())
def test_a_json_report_of_an_unsealed_run_carries_its_completeness_and_a_warning(
    runs, capsys, which, finished
):
    code, out, _ = cli(capsys, "report", *target(runs, which), "--format", "json")
    doc = json.loads(out)
    assert code == 0
    found = doc["completeness"]
    assert (found["sealed"], found["planned_units"], found["finished_units"]) == (
        False,
        30,
        finished,
    )
    assert doc["warning"].startswith(f"UNSEALED: {finished} of 30 planned units finished")
    if which == "bundle":
        assert found["missing_units"][0] == CUT
    assert doc["runs"][0]["completeness"] == found


def test_a_json_report_of_a_sealed_whole_run_says_it_is_whole_and_warns_of_nothing(runs, capsys):
    doc = json.loads(cli(capsys, "report", *target(runs, "whole"), "--format", "json")[1])
    assert doc["completeness"]["sealed"] is True and doc["completeness"]["missing_units"] == []
    assert doc["completeness"]["finished_units"] == 30 and "warning" not in doc


@pytest.mark.parametrize(("which", "finished"), SOURCES.values(), ids=SOURCES.keys())
def test_an_html_report_of_an_unsealed_run_opens_with_a_visible_banner(
    runs, capsys, which, finished
):
    code, page, _ = cli(capsys, "report", *target(runs, which), "--format", "html")
    body = page.split("<body>", 1)[1].lstrip()
    assert code == 0 and body.startswith('<p class="banner" role="alert"')
    banner = body.split("</p>", 1)[0]
    assert f"UNSEALED: {finished} of 30 planned units finished" in banner
    assert "display:none" not in banner and "<h1>" not in banner


def test_a_merged_report_names_its_unsealed_run_first(runs, capsys):
    code, out, _ = cli(capsys, "report", "whole", "part", "--ledger", runs["db"])
    assert code == 0 and out.splitlines()[0].startswith("UNSEALED: 26 of 30 planned units")
    assert "run part was interrupted" in out.splitlines()[0]


@pytest.mark.parametrize("fmt", ["table", "markdown", "json"])
def test_compare_with_an_unsealed_run_says_so_first(runs, capsys, fmt):
    code, out, _ = cli(capsys, "compare", "whole", "part", "--ledger", runs["db"], "--format", fmt)
    assert code == 0
    if fmt == "json":
        doc = json.loads(out)
        assert doc["completeness"]["a"]["sealed"] is True
        assert doc["completeness"]["b"]["finished_units"] == 26
        assert doc["warning"].startswith("UNSEALED: 26 of 30 planned units finished")
    else:
        assert "UNSEALED: 26 of 30 planned units finished" in out.splitlines()[0]


@pytest.mark.parametrize("command", [["audit", "{t}", "capture_rate"], ["log", "{t}"]],
                         ids=["audit", "log"])  # fmt: skip
@pytest.mark.parametrize(("which", "finished"), SOURCES.values(), ids=SOURCES.keys())
def test_audit_and_log_of_an_unsealed_run_say_so_first(runs, capsys, command, which, finished):
    where = target(runs, which)
    argv = [a.replace("{t}", where[0]) for a in command] + where[1:]
    code, out, _ = cli(capsys, *argv)
    assert code == 0
    assert out.splitlines()[0].startswith(f"UNSEALED: {finished} of 30 planned units finished")


@pytest.mark.parametrize("fmt", ["table", "markdown", "json", "html"])
def test_a_provenance_report_of_an_unsealed_run_says_so_first(runs, capsys, fmt):
    code, out, _ = cli(capsys, "report", "prov", "--ledger", runs["db"], "--format", fmt)
    assert code == 0
    needle = "UNSEALED: 12 of 30 planned units finished"
    if fmt == "json":
        doc = json.loads(out)
        assert doc["completeness"]["finished_units"] == 12 and needle in doc["warning"]
    elif fmt == "html":
        assert out.split("<body>", 1)[1].lstrip().startswith('<p class="banner"')
        assert needle in out
    else:
        assert needle in out.splitlines()[0]


def test_verify_of_an_unsealed_bundle_fails_naming_what_is_missing(runs, capsys):
    code, out, _ = cli(capsys, "verify", runs["cut"])
    assert code == 1
    assert out.startswith(f"FAILED bundle {runs['cut']} (run whole): UNSEALED: 29 of 30 planned")
    assert f"1 planned unit missing: {CUT}" in out and "--allow-unsealed" in out


def test_verify_allow_unsealed_accepts_the_bundle_and_says_how_many_units_are_missing(runs, capsys):
    code, out, _ = cli(capsys, "verify", runs["cut"], "--allow-unsealed")
    assert code == 0
    assert f"ok bundle {runs['cut']} (run whole)" in out
    line = next(ln for ln in out.splitlines() if ln.startswith("UNSEALED"))
    assert line.startswith("UNSEALED: 29 of 30 planned units finished; 1 planned unit missing")


def test_verify_of_an_unsealed_run_in_the_ledger_fails_unless_allowed(runs, capsys):
    code, out, _ = cli(capsys, "verify", "part", "--ledger", runs["db"])
    assert code == 1 and out.startswith("FAILED run part: UNSEALED: 26 of 30 planned")
    assert "4 planned units missing: p026/1, p027/1, p028/1, ..." in out
    code, out, _ = cli(capsys, "verify", "--ledger", runs["db"])  # every run: part, prov fail
    assert code == 1 and "ok run whole" in out and out.count("FAILED run") == 2
    code, out, _ = cli(capsys, "verify", "part", "--ledger", runs["db"], "--allow-unsealed")
    assert code == 0 and "ok run part" in out and "4 planned units missing" in out


@pytest.fixture
def server():
    from benchledger.refplatform.auth import Keyring
    from benchledger.refplatform.platform import Platform
    from benchledger.refplatform.server import LoopbackServer, build_app

    srv = LoopbackServer(build_app(Platform(), Keyring(ADMIN, POOL, 40)))
    srv.start()
    yield srv
    srv.stop()


def test_a_run_cancelled_after_three_of_four_units_reports_and_verifies_as_unsealed(
    tmp_path, capsys, server
):
    db = str(tmp_path / "run.sqlite")
    ledger = Ledger(open_store(db))
    interrupted_after(
        ledger, external(subset(tmp_path), server.url, run_id="cut", concurrency=1), 3
    )
    ledger.store.close()
    assert len(SUBSET) == 4
    code, out, _ = cli(capsys, "report", "cut", "--ledger", db)
    assert code == 0 and out.startswith("UNSEALED: 3 of 4 planned units finished")
    code, out, _ = cli(capsys, "verify", "cut", "--ledger", db)
    assert code == 1 and "1 planned unit missing" in out
    assert cli(capsys, "verify", "cut", "--ledger", db, "--allow-unsealed")[0] == 0
