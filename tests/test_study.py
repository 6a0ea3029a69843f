"""The knowledge-pollution report's tables, re-derived from the imported arms and checked
number by number against the published report's own text (which we did not write).

The peer's report (contract/source/docs/reference/benchmark-report-knowledge-pollution.md)
is read as markdown: each of its tables is found by its header row, each cell's counts and
interval parsed, and set against ``benchledger study --format json`` over the
rq1-warehouse and directive-contrast families imported into one ledger.
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections.abc import Iterator
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.peer.tasks_import import import_family
from benchledger.ledger import Ledger, open_store
from tests.conftest import peer_dir

FAMILIES = ("probe", "rq1-warehouse", "directive-contrast")
_COUNT = re.compile(r"(\d+)/(\d+)")
_INTERVAL = re.compile(r"\[(-?[\d.]+), (-?[\d.]+)\]")


def results() -> str:
    return os.path.join(peer_dir(), "bench", "results", "knowledge-pollution")


def report_text() -> str:
    path = os.path.join(
        peer_dir(), "contract", "source", "docs", "reference",
        "benchmark-report-knowledge-pollution.md",
    )  # fmt: skip
    with open(path, encoding="utf-8") as fh:
        return fh.read()


def prose() -> str:
    """The report's text with every run of whitespace one space (its lines wrap anywhere)."""
    return " ".join(report_text().split())


def published_tables(text: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every markdown table of ``text``: its header cells and its rows' cells."""
    out: list[tuple[list[str], list[list[str]]]] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        if lines[i].startswith("|") and i + 1 < len(lines) and lines[i + 1].startswith("| ---"):
            head = [c.strip() for c in lines[i].strip("|").split("|")]
            rows = []
            i += 2
            while i < len(lines) and lines[i].startswith("|"):
                rows.append([c.strip().strip("*").strip() for c in lines[i].strip("|").split("|")])
                i += 1
            out.append((head, rows))
        else:
            i += 1
    return out


def table(head: list[str]) -> list[list[str]]:
    """The rows of the published table with this header (the first, when several)."""
    found = [rows for h, rows in published_tables(report_text()) if h == head]
    assert found, f"the published report has no table headed {head}"
    return found[0]


def count(cell: str) -> tuple[int, int]:
    m = _COUNT.search(cell)
    assert m, f"no k/n in published cell {cell!r}"
    return int(m[1]), int(m[2])


def interval(cell: str) -> tuple[float, float]:
    m = _INTERVAL.search(cell)
    assert m, f"no interval in published cell {cell!r}"
    return float(m[1]), float(m[2])


def ours_interval(cell: dict[str, Any]) -> tuple[float, float]:
    return round(100 * cell["ci_low"], 1), round(100 * cell["ci_high"], 1)


@pytest.fixture(scope="module")
def study(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, Any]]:
    """Both families imported into one ledger, and ``study --format json`` over it."""
    path = str(tmp_path_factory.mktemp("study") / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    for family in FAMILIES:
        import_family(ledger, os.path.join(results(), family))
    ledger.store.close()
    out = str(tmp_path_factory.mktemp("out") / "study.json")
    assert main(["study", "--ledger", path, "--format", "json", "-o", out]) == 0
    with open(out, encoding="utf-8") as fh:
        doc = json.load(fh)
    doc["ledger"] = path
    yield doc


def ours(study: dict[str, Any], table_id: str) -> dict[str, dict[str, Any]]:
    """Our table ``table_id``: row key -> {column: cell}."""
    [t] = [t for t in study["tables"] if t["id"] == table_id]
    return {row["key"]: row["cells"] for row in t["rows"]}


# The report's words for a claim's class, and the class the study reads from the data.
CLASS = {"convention": "stated by a seeded page", "checkable": "settled by one query"}


def row(study: dict[str, Any], table_id: str, **coords: str) -> dict[str, Any]:
    """The one row of our table ``table_id`` whose coordinates include ``coords``."""
    [t] = [t for t in study["tables"] if t["id"] == table_id]
    found = [r["cells"] for r in t["rows"]
             if all(r["coords"].get(k) == v for k, v in coords.items())]  # fmt: skip
    assert len(found) == 1, (table_id, coords, len(found))
    return found[0]


# -- Section 1 and the data availability table -------------------------------------------


def test_the_premise_probe_equals_the_published_one(study) -> None:
    m = re.search(r"\((\d+)/(\d+) adoption of a wrong fiscal convention", prose())
    assert m, "the published sentence on the premise probe moved"
    probe = ours(study, "arms")
    polluted = probe["probe/polluted"]["adopted"]
    assert (polluted["k"], polluted["n"]) == (int(m[1]), int(m[2]))
    [row] = [r for r in table(["Run family", "Directory under `bench/results/knowledge-pollution/`",
                               "Contents"]) if r[0] == "Premise probe"]  # fmt: skip
    episodes = int(re.match(r"(\d+) episodes", row[2])[1])
    assert probe["probe/control"]["episodes"] + probe["probe/polluted"]["episodes"] == episodes
    assert probe["probe/control"]["adopted"]["k"] == 0


# -- Section 3 ---------------------------------------------------------------------------


def test_the_rq1_matrix_equals_the_published_one_with_its_intervals(study) -> None:
    rows = table(["Cell", "haiku", "sonnet", "opus"])
    assert [r[0].split(" ")[0] for r in rows] == ["convention", "checkable"]
    for label, *cells in rows:
        mine = row(study, "adoption", family="rq1-warehouse", **{"class": CLASS[label.split()[0]]})
        for tier, cell in zip(("haiku", "sonnet", "opus"), cells, strict=True):
            got = mine[tier]
            assert (got["k"], got["n"]) == count(cell), (label, tier)
            assert ours_interval(got) == interval(cell), (label, tier)


MECHANISM_ROWS = {
    "checkable/wrong/haiku": "rq1-warehouse/checkable-wrong-haiku",
    "checkable/absent/haiku (control)": "rq1-warehouse/checkable-absent-haiku",
    "checkable/wrong/sonnet": "rq1-warehouse/checkable-wrong-sonnet",
    "checkable/wrong/opus": "rq1-warehouse/checkable-wrong-opus",
}


def test_the_mechanism_table_equals_the_published_one(study) -> None:
    rows = table(["Cell", "queried the count", "adopted", "correct"])
    mine = ours(study, "mechanism")
    assert [r[0] for r in rows] == list(MECHANISM_ROWS)
    for label, queried, adopted, correct in rows:
        got = mine[MECHANISM_ROWS[label]]
        for col, cell in (("queried the count", queried), ("adopted", adopted),
                          ("correct", correct)):  # fmt: skip
            assert (got[col]["k"], got[col]["n"]) == count(cell), (label, col)


def test_the_separation_is_exact_on_every_checkable_wrong_arm_as_published(study) -> None:
    text = prose()
    assert "every episode that observed the count answered correctly" in text
    assert "in the 72 directive-contrast episodes" in text
    [t] = [t for t in study["tables"] if t["id"] == "mechanism"]
    wrong = {r["key"]: r["cells"] for r in t["rows"] if r["coords"]["plant"] == "wrong"}
    assert len(wrong) == 6  # three RQ1 tiers, three directive levels
    assert {key: cells["exceptions"] for key, cells in wrong.items()} == dict.fromkeys(wrong, 0)
    assert sum(cells["adopted"]["n"] for key, cells in ours(study, "variants").items()) == 72


def test_the_control_floors_equal_the_published_prose(study) -> None:
    m = re.search(
        r"haiku answers the convention tasks at (\d+/\d+) unaided \(sonnet (\d+/\d+), opus "
        r"(\d+/\d+)\)", prose(),
    )  # fmt: skip
    assert m, "the published sentence on the convention floor moved"
    floor = row(study, "controls", family="rq1-warehouse", plant="absent",
                **{"class": CLASS["convention"]})  # fmt: skip
    for tier, cell in zip(("haiku", "sonnet", "opus"), m.groups(), strict=True):
        assert f"{floor[tier]['k']}/{floor[tier]['n']}" == cell, tier
    assert "The checkable floor is clean at every tier" in prose()
    clean = row(study, "controls", family="rq1-warehouse", plant="absent",
                **{"class": CLASS["checkable"]})  # fmt: skip
    assert all(clean[t]["k"] == clean[t]["n"] == 24 for t in ("haiku", "sonnet", "opus"))


def test_delivery_and_co_presence_equal_the_published_prose(study) -> None:
    text = prose()
    assert "confirmed the claim reachable in search and present at its sink" in text
    assert "the planted text appears in all 24 transcripts" in text
    assert "the seeded correct source appears beside it in all 24" in text
    rq1 = {k: v for k, v in ours(study, "delivery").items() if k.startswith("rq1-warehouse/")}
    assert len(rq1) == 6
    for key, cells in rq1.items():
        assert cells["in search"] is True and cells["in sink"] is True, key
        assert (cells["claim in transcript"]["k"], cells["claim in transcript"]["n"]) == (24, 24)
        if key.startswith("rq1-warehouse/convention"):
            beside = cells["correct source beside it"]
            assert (beside["k"], beside["n"]) == (24, 24), key


# -- Sections 4 and 5 --------------------------------------------------------------------

LEVELS = {
    "bare": "directive-contrast/checkable-wrong-haiku-bare",
    "plain": "directive-contrast/checkable-wrong-haiku-plain",
    "imperative": "directive-contrast/checkable-wrong-haiku",
}


def test_the_directive_contrast_equals_the_published_one(study) -> None:
    rows = table(["Level", "Adopted", "Queried the count", "Correct"])
    mine = ours(study, "variants")
    assert sorted(mine) == sorted(LEVELS.values())
    assert [r[0].split(" ")[0] for r in rows] == list(LEVELS)
    for label, adopted, queried, correct in rows:
        got = mine[LEVELS[label.split(" ")[0]]]
        assert (got["adopted"]["k"], got["adopted"]["n"]) == count(adopted), label
        assert ours_interval(got["adopted"]) == interval(adopted), label
        assert (got["queried the count"]["k"], got["queried the count"]["n"]) == count(queried)
        assert (got["correct"]["k"], got["correct"]["n"]) == count(correct), label
    # H4: the bare level's interval excludes zero
    assert mine[LEVELS["bare"]]["adopted"]["ci_low"] > 0


def test_the_entity_sink_rows_equal_the_published_ones_and_the_page_sink_is_missing(
    study,
) -> None:
    rows = table(["Cell", "Adopted", "Queried the count", "Correct"])
    mine = ours(study, "sink")
    keys = ["rq1-warehouse/checkable-wrong-haiku", "directive-contrast/checkable-wrong-haiku"]
    assert [r[0] for r in rows][:2] == [
        "entity-description sink (RQ1 arm)",
        "entity-description sink (contrast imperative arm)",
    ]
    for key, (label, adopted, queried, correct) in zip(keys, rows[:2], strict=True):
        got = mine[key]
        assert (got["adopted"]["k"], got["adopted"]["n"]) == count(adopted), label
        assert ours_interval(got["adopted"]) == interval(adopted), label
        assert (got["queried the count"]["k"], got["queried the count"]["n"]) == count(queried)
        assert (got["correct"]["k"], got["correct"]["n"]) == count(correct), label
    assert rows[2][0] == "knowledge-page sink"  # the generalization family: not published here
    assert not os.path.isdir(os.path.join(results(), "generalization"))
    assert sorted(mine) == sorted(keys)  # one claim at one sink so far: the page arm is named
    assert any("knowledge page sink" in m and "haiku" in m for m in study["missing"])


# -- Sections 7, 8 and 9 -----------------------------------------------------------------


def test_exposure_to_the_reviewer_note_equals_the_published_table(study) -> None:
    rows = table(["Wrong arm", "haiku", "sonnet", "opus"])
    cli_rows = [r for r in rows if r[0].endswith("claude-cli")]
    assert [r[0] for r in cli_rows] == ["convention, claude-cli", "checkable, claude-cli"]
    for label, *cells in cli_rows:
        cls, client = label.split(", ")
        got = row(study, "exposure", family="rq1-warehouse", client=client,
                  **{"class": CLASS[cls]})  # fmt: skip
        for tier, cell in zip(("haiku", "sonnet", "opus"), cells, strict=True):
            assert (got[tier]["k"], got[tier]["n"]) == count(cell), (label, tier)


def test_adoption_conditional_on_exposure_equals_the_published_prose(study) -> None:
    text = prose()
    m = re.search(r"adoption is (\d+)/(\d+) \(haiku\) and (\d+)/(\d+) \(sonnet\)", text)
    assert m, "the published sentence on unexposed adoption moved"
    mine = ours(study, "conditional")
    for tier, (k, n) in (("haiku", m.groups()[:2]), ("sonnet", m.groups()[2:])):
        got = mine[f"rq1-warehouse/convention-wrong-{tier}"]["unexposed adopted"]
        assert (got["k"], got["n"]) == (int(k), int(n)), tier
    m = re.search(r"\((\d+)/(\d+) RQ1, (\d+)/(\d+) bare, (\d+)/(\d+) plain", text)
    assert m, "the published sentence on exposed weak-tier adoption moved"
    arms = ("rq1-warehouse/checkable-wrong-haiku", LEVELS["bare"], LEVELS["plain"])
    pairs = list(zip(m.groups()[::2], m.groups()[1::2], strict=True))
    for arm, (k, n) in zip(arms, pairs, strict=True):
        got = mine[arm]["exposed adopted"]
        assert (got["k"], got["n"]) == (int(k), int(n)), arm


def test_evaluator_writes_equal_the_published_table(study) -> None:
    rows = table(["Wrong arm (claude-cli)", "evaluator captures", "corrective"])
    mine = ours(study, "writes")
    assert len(rows) == 5
    for label, captures, corrective in rows:
        keys = ["checkable/sonnet", "convention/sonnet"] if label == "both cells, sonnet" else [
            label]  # fmt: skip
        for key in keys:
            cls, tier = key.split("/")
            got = mine[f"rq1-warehouse/{cls}-wrong-{tier}"]
            assert got["evaluator captures"] == int(captures), key
            assert got["corrective"] == int(corrective), key
    text = prose()
    assert "On claude-cli every such capture is pending" in text
    assert {c["statuses"] for c in mine.values()} <= {"pending", "-"}


def test_the_preregistered_contrasts_equal_the_published_ones(study) -> None:
    rows = {r[0]: r[1] for r in table(["Hypothesis", "Outcome"])}
    h1a = next(v for k, v in rows.items() if k.startswith("H1a"))
    h1b = next(v for k, v in rows.items() if k.startswith("H1b"))
    low, high = interval(re.search(r"Newcombe (\[[^]]+\])", h1a)[1].replace("+", ""))
    for tier in ("sonnet", "opus"):  # H1a: convention minus checkable, at each strong tier
        got = row(study, "contrasts", family="rq1-warehouse", differs="cell", a_model=tier,
                  b_model=tier)["difference"]  # fmt: skip
        assert ours_interval(got) == (low, high), tier
    m = re.search(r"difference \+([\d.]+) points, Newcombe \[\+([\d.]+), \+([\d.]+)\]", h1b)
    assert m, "the published H1b outcome moved"
    for tier in ("sonnet", "opus"):  # H1b: haiku minus a strong tier, checkable
        got = row(study, "contrasts", family="rq1-warehouse", differs="model", a_model="haiku",
                  b_model=tier, a_class=CLASS["checkable"])["difference"]  # fmt: skip
        assert round(100 * got["diff"], 1) == float(m[1]), tier
        assert ours_interval(got) == (float(m[2]), float(m[3])), tier


def test_budget_and_harness_failures_equal_the_attempts_own_fields(study) -> None:
    """The report prints no counts; the peer's attempts' own fields are the outside check."""
    mine = ours(study, "flags")
    for family in FAMILIES:
        attempts = []
        shape = "*.json" if family == "probe" else os.path.join("*", "results.json")  # flat
        for path in glob.glob(os.path.join(results(), family, shape)):
            if re.search(r"-[A-Z]", os.path.basename(os.path.dirname(path))):
                continue  # an excluded attempt folder
            with open(path, encoding="utf-8") as fh:
                attempts += json.load(fh)["attempts"]
        got = mine[family]
        assert got["episodes"] == len(attempts), family
        assert got["budget exhausted"] == sum(bool(a.get("budget_exhausted")) for a in attempts)
        assert got["harness failures"] == sum(bool(a.get("error")) for a in attempts)


# -- the command -------------------------------------------------------------------------


def test_excluded_attempts_are_never_counted(study) -> None:
    assert not any(re.search(r"-[A-Z]", run) for run in study["runs"])
    # 2 probe arms, 18 RQ1 arms and 3 levels: the labelled folders set aside
    assert len(study["runs"]) == 23


def test_a_subset_of_arms_marks_what_is_missing(capsys, study) -> None:
    """Two arms cross two claims and two models: the other two arms of the cross are named."""
    runs = [study["runs"]["rq1-warehouse/checkable-wrong-haiku"],
            study["runs"]["rq1-warehouse/convention-wrong-opus"]]  # fmt: skip
    assert main(["study", *runs, "--ledger", study["ledger"]]) == 0
    out = capsys.readouterr().out
    assert "(not imported)" in out
    last = out.splitlines()[-1]
    assert last.startswith("not imported: ")
    assert f"{CLASS['checkable']} (" in last and "wrong, opus, claude-cli" in last
    assert f"{CLASS['convention']} (" in last and "wrong, haiku, claude-cli" in last


def test_a_ledger_with_no_study_arm_is_one_line_and_exit_2(capsys, tmp_path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    from benchledger.harness.peer.tasks_import import import_arm

    import_arm(ledger, os.path.join(results(), "rq1-warehouse", "checkable-wrong-sonnet-DRIFTED-1"))
    ledger.store.close()
    assert main(["study", "--ledger", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none of the 1 runs is an analysed arm" in err[0]
