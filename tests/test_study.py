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
import shutil
from collections.abc import Iterator
from typing import Any

import pytest

from benchledger.cli import main
from benchledger.harness.peer.arms import split_label
from benchledger.harness.peer.tasks_import import import_arm, import_family
from benchledger.ledger import Ledger, open_store
from benchledger.protocols import tasks as task_files
from tests import test_peer_layouts as layouts
from tests.conftest import copied_ledger, peer_dir

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
def study(
    tmp_path_factory: pytest.TempPathFactory, pollution_families: tuple[str, Any]
) -> Iterator[dict[str, Any]]:
    """The three families imported into one ledger, and ``study --format json`` over it.
    The two big ones come from conftest's session import (the study reads runs, not their
    order of import)."""
    built, runs = pollution_families
    path = copied_ledger(built, tmp_path_factory.mktemp("study"))
    ledger = Ledger(open_store(path))
    for family in FAMILIES:
        if family not in runs:
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
    assert last.startswith("not in the ledger (not imported, or never run): ")
    assert f"{CLASS['checkable']} (" in last and "wrong, opus, claude-cli" in last
    assert f"{CLASS['convention']} (" in last and "wrong, haiku, claude-cli" in last


def test_a_ledger_with_no_study_arm_is_one_line_and_exit_2(capsys, tmp_path) -> None:
    path = str(tmp_path / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    import_arm(ledger, os.path.join(results(), "rq1-warehouse", "checkable-wrong-sonnet-DRIFTED-1"))
    ledger.store.close()
    assert main(["study", "--ledger", path]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "none of the 1 runs is an analysed arm" in err[0]


# -- no table depends on a family's or an arm's name -------------------------------------


@pytest.mark.slow  # the three families imported again: about 10 s on a 2-core machine
def test_every_table_is_the_same_under_family_and_arm_names_the_study_never_used(
    study, tmp_path
) -> None:
    """The shared families copied under other names give the same tables, number for number
    (before: ``arm_of`` kept only the families and arm names the report uses: no table)."""
    bench = tmp_path / "bench"
    peer = os.path.join(peer_dir(), "bench")
    for part in ("seed", "tasks"):  # what the import reads beside results/
        shutil.copytree(os.path.join(peer, part), bench / part)
    names: dict[str, str] = {}  # the new name -> the one it stands for
    ledger = Ledger(open_store(str(tmp_path / "l.sqlite")))
    for n, family in enumerate(FAMILIES):
        new_family = f"zq{n}famx"
        names[new_family] = family
        src, dst = os.path.join(results(), family), bench / "results" / "k" / new_family
        if family == "probe":  # a flat family: its README names its arm files, kept
            shutil.copytree(src, dst)
        else:
            os.makedirs(dst)
            for m, folder in enumerate(sorted(os.listdir(src))):
                if not os.path.isdir(os.path.join(src, folder)):
                    continue
                arm, label = split_label(folder)
                new_arm = f"zq{n}arm{m:02d}x"
                names[new_arm] = arm
                shutil.copytree(os.path.join(src, folder),
                                dst / (f"{new_arm}-{label}" if label else new_arm))  # fmt: skip
    for new_family in names:  # all copied first: the flat family's plant is read beside it
        if new_family.endswith("famx"):
            import_family(ledger, str(bench / "results" / "k" / new_family))
    ledger.store.close()
    out = str(tmp_path / "study.json")
    assert main(["study", "--ledger", str(tmp_path / "l.sqlite"), "--format", "json",
                 "-o", out]) == 0  # fmt: skip
    with open(out, encoding="utf-8") as fh:
        text = fh.read()
    for new in sorted(names, key=len, reverse=True):
        text = text.replace(new, names[new])
    renamed = json.loads(text)
    original = {k: v for k, v in study.items() if k != "ledger"}
    assert renamed["tables"] == original["tables"]
    assert renamed == original
    print(f"{len(names)} names replaced; {len(original['tables'])} tables the same")


# -- the families shared/ lacks: built from the script's readers, checked against it ----


def _patch(path: str, change: Any) -> None:
    with open(path, encoding="utf-8") as fh:
        data = json.load(fh)
    change(data)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(data, fh)


def _results(folder: str) -> str:
    sub = os.path.join(folder, "results", "results.json")
    return sub if os.path.exists(sub) else os.path.join(folder, "results.json")


def _set_manifest(folder: str, **fields: Any) -> None:
    _patch(_results(folder), lambda d: d["manifest"].update(fields))


def _monitor_arm(bench: str, family: str, arm: str, planted: dict[str, Any] | None,
                 model: str) -> str:  # fmt: skip
    """An arm of the second fixture (the API world's monitor count), as the layout test."""
    folder = os.path.join(bench, "results", "knowledge-pollution", family, arm)
    task = {"id": "monitor-count", "suite": "api", "prompt": "How many monitors fire?",
            "arms": ["a3"], "budget_tool_calls": 20,
            "grading": {"kind": "numeric", "value": 3, "abs_tolerance": 0.5}}  # fmt: skip
    os.makedirs(os.path.join(folder, "tasks"))
    with open(os.path.join(folder, "tasks", "monitor-count.yaml"), "w") as fh:
        json.dump(task, fh)  # JSON is YAML
    loaded = task_files.load(os.path.join(folder, "tasks"))
    values = ["3", "3", "5", "6", "5", "3"] if planted and "5" in planted["needle"] else [
        "3", "3", "3", "6", "3", "3"]  # fmt: skip
    attempts = [{"task_id": "monitor-count", "attempt": n, "correct": v == "3",
                 "final_answer": f"FINAL ANSWER: {v}", "got_value": float(v)}
                for n, v in enumerate(values, 1)]  # fmt: skip
    manifest = {"started_at": "2026-08-07T10:00:00Z", "arm": "a3", "model": model, "k": 6,
                "llm_provider": "claude-cli",
                "task_set_hash": task_files.task_set_hash(loaded.tasks)}  # fmt: skip
    layouts._write(os.path.join(folder, "results", "results.json"),
                   {"manifest": manifest, "attempts": attempts})  # fmt: skip
    if planted:
        layouts._write(os.path.join(folder, "planted.json"), planted)
    return folder


USAGE = {"input_tokens": 1200, "output_tokens": 300, "cache_read_tokens": 5000,
         "cache_creation_tokens": 700}  # fmt: skip


def _built(tmp: str) -> tuple[str, str]:
    """A bench of arms the shared folder lacks: one claim at two sinks, metered raw-API arms
    (one excluded), a second fixture's absent, correct and wrong arms; and a ledger of them."""
    bench = layouts._bench(tmp)
    arms = []
    # one claim at two sinks: the plant's changeset on an entity, or a page with its needle
    entity = layouts._arm(bench, "fam-s", "one", sub=False)
    _patch(os.path.join(entity, "planted.json"), lambda d: d.update(changeset_id="cs1"))
    for snap in ("store-before-eval.json", "store-after-eval.json"):
        _patch(
            os.path.join(entity, snap),
            lambda d: d.update(
                changesets=[{"id": "cs1", "target_urn": "urn:li:dataset:(x,orders,PROD)"}]
            ),
        )
    page = layouts._arm(bench, "fam-s", "two", sub=False)
    note = {"slug": "a-note", "title": "Order count", "summary": layouts.PLANT["needle"]}
    for snap in ("store-before-eval.json", "store-after-eval.json"):
        _patch(os.path.join(page, snap), lambda d: d["pages"].append(note))
    for folder in (entity, page):
        _set_manifest(folder, model="haiku", llm_provider="claude-cli")
    arms += [entity, page]
    # metered raw-API arms: per-attempt tokens, full model ids; one excluded attempt
    for name, model in (("three", "claude-haiku-4-5-20251001"), ("four", "claude-sonnet-5"),
                        ("five-DRIFTED-0", "claude-opus-5")):  # fmt: skip
        folder = layouts._arm(bench, "fam-m", name, sub=True, snapshots=False, usage=USAGE)
        _set_manifest(folder, model=model, llm_provider="anthropic")
        arms.append(folder)
    # a second fixture: absent, correct and wrong at one model, wrong at a second
    wrong = {**layouts.PLANT, "treatment_id": "w", "text": "The account has 5 monitors.",
             "needle": "account has 5 listening monitors provisioned"}  # fmt: skip
    right = {**wrong, "treatment_id": "r", "text": "The account has 3 monitors.",
             "needle": "account has 3 listening monitors provisioned"}  # fmt: skip
    for name, planted, model in (("six", None, "haiku"), ("seven", right, "haiku"),
                                 ("eight", wrong, "haiku"), ("nine", wrong, "sonnet")):  # fmt: skip
        arms.append(_monitor_arm(bench, "fam-f", name, planted, model))
    # the same world's pkrun-shaped arms (question_id, replicate, a world file): absent, wrong
    for name in ("ten", "eleven"):
        folder = layouts._pk_arm(bench, "fam-k", name, sub=name == "ten")
        _set_manifest(folder, model="haiku")
        if name == "ten":  # nothing planted; its answers of the planted value (5) are its
            os.remove(os.path.join(folder, "planted.json"))  # chance baseline, the script's
        arms.append(folder)
    path = os.path.join(tmp, "built.sqlite")
    ledger = Ledger(open_store(path))
    for arm in arms:
        import_arm(ledger, arm)
    ledger.store.close()
    out = os.path.join(tmp, "built.json")
    assert main(["study", "--ledger", path, "--format", "json", "-o", out]) == 0
    return bench, out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, dict[str, Any]]:
    bench, out = _built(str(tmp_path_factory.mktemp("built")))
    script = layouts._script()
    script.RESULTS = os.path.join(bench, "results", "knowledge-pollution")
    with open(out, encoding="utf-8") as fh:
        return script, json.load(fh)


def test_one_claim_at_two_sinks_reads_as_the_peers_script_reads_it(built) -> None:
    """(before: no sink was read from the data; the page-sink row was never printed)"""
    script, doc = built
    rows = {r["coords"]["arm"]: r for t in doc["tables"] if t["id"] == "sink" for r in t["rows"]}
    assert {a: r["coords"]["sink"] for a, r in rows.items()} == {
        "one": "entity description", "two": "knowledge page"}  # fmt: skip
    for arm, r in rows.items():
        _, attempts, dirpath = script.load_arm("fam-s", arm)
        t = script.tally(attempts)
        queried, observed = script.count_mechanism(dirpath)
        cells = r["cells"]
        assert (cells["adopted"]["k"], cells["adopted"]["n"]) == (t.get("adopted", 0), t["n"])
        assert cells["correct"]["k"] == t.get("correct", 0)
        assert cells["queried the count"]["k"] == queried
        assert cells["observed it"]["k"] == observed
        assert cells["exceptions"] == script.separation_exceptions("fam-s", arm)
    assert not [m for m in doc["missing"] if "sink" in m]  # both sinks are here


def test_metered_spend_equals_the_peers_arm_cost_analysed_and_excluded_apart(built) -> None:
    """(before: no spend table; the raw-API arms' tokens were priced nowhere in study)"""
    script, doc = built
    [t] = [t for t in doc["tables"] if t["id"] == "spend"]
    rows = {r["key"]: r["cells"] for r in t["rows"]}
    theirs = {}
    for arm in ("three", "four", "five-DRIFTED-0"):
        manifest, attempts, _ = script.load_arm("fam-m", arm)
        theirs[arm] = script.arm_cost(manifest, attempts)
        ours = rows[f"fam-m/{split_label(arm)[0]}" if "DRIFTED" not in arm else "fam-m/five"]
        assert ours["spend"]["usd"] == pytest.approx(theirs[arm], abs=1e-9), arm
        assert ours["cache_read tokens"] == USAGE["cache_read_tokens"] * len(attempts)
    assert rows["fam-m/five"]["status"].startswith("excluded")
    analysed = theirs["three"] + theirs["four"]
    assert rows["total/analysed arms"]["spend"]["usd"] == pytest.approx(analysed, abs=1e-9)
    assert rows["total/excluded attempts"]["spend"]["usd"] == pytest.approx(
        theirs["five-DRIFTED-0"], abs=1e-9)  # fmt: skip
    assert not any(k.startswith("fam-s/") for k in rows)  # a subscription alias: unpriced
    # the excluded attempt is counted in no rate
    assert "fam-m/five" not in {r["key"] for t in doc["tables"] if t["id"] == "adoption"
                                for r in t["rows"]}  # fmt: skip


def test_the_client_contrast_pairs_an_alias_with_its_full_model_id(built) -> None:
    """(before: no client contrast; 'haiku' and 'claude-haiku-4-5-20251001' were two models)"""
    script, doc = built
    [t] = [t for t in doc["tables"] if t["id"] == "clients"]
    assert t["columns"] == ["anthropic", "claude-cli"]
    [r] = [r for r in t["rows"] if r["coords"]["model"] == "haiku"]
    for client, (family, arm) in (("claude-cli", ("fam-s", "one")),
                                  ("anthropic", ("fam-m", "three"))):  # fmt: skip
        theirs = script.tally(script.load_arm(family, arm)[1])
        assert (r["cells"][client]["k"], r["cells"][client]["n"]) == (
            theirs.get("adopted", 0), theirs["n"])  # fmt: skip


def test_the_cross_fixture_arms_and_wrong_minus_absent_equal_the_peers_h5b(built) -> None:
    """(before: no cross-fixture table)"""
    script, doc = built
    [t] = [t for t in doc["tables"] if t["id"] == "fixtures"]
    rows = {r["key"]: r["cells"] for r in t["rows"]}
    tallies = {}
    for arm in ("six", "seven", "eight", "nine"):
        tallies[arm] = theirs = script.tally(script.load_arm("fam-f", arm)[1])
        ours = rows[f"fam-f/{arm}"]
        assert ours["episodes"] == theirs["n"]
        assert ours["correct"]["k"] == theirs.get("correct", 0), arm
        assert ours["adopted"]["k"] == theirs.get("adopted", 0), arm
    plants = {r["coords"]["arm"]: r["coords"]["plant"] for r in t["rows"]
              if r["coords"]["family"] == "fam-f"}  # fmt: skip
    assert plants == {"six": "absent", "seven": "correct", "eight": "wrong", "nine": "wrong"}
    w, a = tallies["eight"], tallies["six"]
    low, high = script.newcombe(w.get("adopted", 0), w["n"], a.get("adopted", 0), a["n"])
    diff = rows["fam-f/eight-minus-absent"]["wrong minus absent"]
    # the script's z is 1.96, ours the exact quantile: equal at the report's 0.1 point
    assert ours_interval(diff) == (round(100 * low, 1), round(100 * high, 1))
    assert diff["diff"] == pytest.approx(w.get("adopted", 0) / w["n"])
    # the sonnet wrong arm has no absent arm at sonnet: the family's cross names it
    assert rows["fam-f/nine-minus-absent"]["wrong minus absent"] is None
    assert any(m.startswith("fam-f: ") and "absent, sonnet" in m for m in doc["missing"])


def test_a_cell_with_only_an_excluded_attempt_says_so_and_is_named(built) -> None:
    """(before: no metered arm was read; the excluded attempt's cell read '(not imported)')"""
    _, doc = built
    [t] = [t for t in doc["tables"] if t["id"] == "adoption"]
    [r] = [r for r in t["rows"] if r["coords"]["family"] == "fam-m"]
    assert r["cells"]["claude-opus-5"] == "excluded (DRIFTED-0)"  # its one attempt set aside
    assert any(m.startswith("fam-m: ") and "(only excluded attempts: DRIFTED-0)" in m
               for m in doc["missing"])  # fmt: skip


def test_pkrun_arms_of_a_recorded_world_are_cross_fixture_arms_as_the_script_tallies(
    built,
) -> None:
    """(before: the pkrun shape did not import; study read no world's name)"""
    script, doc = built
    [t] = [t for t in doc["tables"] if t["id"] == "fixtures"]
    rows = {r["key"]: r for r in t["rows"]}
    assert rows["fam-k/eleven"]["coords"]["fixture"] == layouts.WORLD["profile"]
    assert rows["fam-k/ten"]["coords"]["plant"] == "absent"
    tallies = {}
    for arm in ("ten", "eleven"):
        tallies[arm] = theirs = script.tally(script.load_arm("fam-k", arm)[1], benchrun=False)
        ours = rows[f"fam-k/{arm}"]["cells"]
        assert ours["episodes"] == theirs["n"], arm
        assert ours["correct"]["k"] == theirs.get("correct", 0), arm
        assert ours["adopted"]["k"] == theirs.get("adopted", 0), arm
        assert ours["other"]["k"] == theirs.get("other", 0) + theirs.get("no_number", 0), arm
    # the absent arm answers the planted value by chance: the baseline H5b subtracts
    assert tallies["ten"].get("adopted", 0) > 0
    w, a = tallies["eleven"], tallies["ten"]
    low, high = script.newcombe(w.get("adopted", 0), w["n"], a.get("adopted", 0), a["n"])
    diff = rows["fam-k/eleven-minus-absent"]["cells"]["wrong minus absent"]
    assert ours_interval(diff) == (round(100 * low, 1), round(100 * high, 1))


# A plant's id and a model name, as an arm's own files may carry them: HTML, a table pipe,
# a newline that would start a forged row, terminal control.
HOSTILE_ID = "<img src=x onerror=alert(1)>|x\n| forged | row\x1b[2J"


@pytest.mark.parametrize("fmt", ["table", "markdown"])
def test_what_an_arm_recorded_is_shown_as_written_in_every_table(tmp_path, capsys, fmt) -> None:
    """(before: Markdown rendered the plant's id as HTML and its newline began a row)"""
    bench = layouts._bench(str(tmp_path))
    folder = layouts._arm(bench, "fam-h", "one", sub=False)
    _patch(os.path.join(folder, "planted.json"), lambda d: d.update(treatment_id=HOSTILE_ID))
    _set_manifest(folder, model="haiku" + HOSTILE_ID, llm_provider="claude-cli")
    path = str(tmp_path / "h.sqlite")
    ledger = Ledger(open_store(path))
    import_arm(ledger, folder)
    ledger.store.close()
    capsys.readouterr()
    assert main(["study", "--ledger", path, "--format", fmt]) == 0
    out = capsys.readouterr().out
    assert "\x1b" not in out and not any(x.startswith("| forged") for x in out.splitlines())
    assert "\\u000a" in out  # the newline shown escaped, on its own row's line
    if fmt == "markdown":
        assert not re.search(r"(?<!\\)<img", out)  # only ever escaped
        assert "\\<img src=x onerror=alert(1)\\>\\|x" in out
