"""Pre-registered gates: the bar (metrics, tolerance, baseline root, items by content hash)
is fixed in ``run_started`` before any unit runs, and ``gate`` judges by it alone.

Exit codes: 0 the run meets its bar, 1 it does not (a regression, or it ran other items
than it pre-registered), 2 the gate cannot judge (a different bar without --override, a
bad pre-registration, an unusable run).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import blake3
import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    GraderDecisionBody,
    Preregistration,
    RunStartedBody,
    RunStartedEvent,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.projections.prereg import (
    BadPreregistration,
    digest,
    parse,
    recorded,
    resolve,
    to_bytes,
)
from benchledger.projections.source import from_ledger
from tests.conftest import one_line_exit_2
from tests.sample import PASSING, PROMOTE, counter_clock

Outcomes = dict[tuple[str, int], dict[str, bool | None]]


def item(pid: str) -> str:
    """A protocol's content hash in these synthetic runs."""
    return blake3.blake3(f"content of {pid}".encode()).hexdigest()


def outcomes(n: int, flip: int = 0, check: str = "personal_recall") -> Outcomes:
    name = {"personal_recall": "recall_correct"}.get(check, check)
    return {
        (f"p{i:03d}", 1): dict(PASSING) | dict(PROMOTE) | ({name: False} if i < flip else {})
        for i in range(n)
    }


def write(
    ledger: Ledger,
    run_id: str,
    units: Outcomes,
    *,
    prereg: Preregistration | None = None,
    changed: frozenset[str] = frozenset(),
) -> str:
    """A sealed lifecycle run; units in ``changed`` ran other content than their name says."""
    ledger.start_run(
        run_id,
        RunStartedBody(
            suite="lifecycle",
            protocol_set_hash="set-1",
            protocols=len(units),
            k=1,
            agent="scripted",
            model="m",
            platform="refplatform",
            platform_version="t",
            prereg=prereg,
        ),
    )
    for (pid, attempt), checks in sorted(units.items()):
        w = ledger.new_stream(f"{run_id}/{pid}/{attempt}")
        content = item(pid + "-edited") if pid in changed else item(pid)
        w.append(UnitStartedBody(protocol_id=pid, attempt=attempt, protocol_hash=content))
        fin = w.append(EpisodeFinishedBody(episode="recall", final_answer="FINAL ANSWER: 1"))
        for name, verdict in checks.items():
            w.append(
                GraderDecisionBody(stage=name.split("_")[0], check=name, verdict=verdict),
                refs=[fin],
            )
        w.append(UnitFinishedBody(outcome=dict(checks)))
        ledger.commit(w)
    return ledger.seal(run_id)


def bar(root: str, *, metrics=("personal_recall",), tolerance=0.05, n=30) -> Preregistration:
    return Preregistration(
        baseline_run="base",
        baseline_root=root,
        metrics=list(metrics),
        tolerance=tolerance,
        protocol_set_hash="set-1",
        items=sorted(item(f"p{i:03d}") for i in range(n)),
    )


@pytest.fixture
def db(tmp_path) -> str:
    return str(tmp_path / "gate.sqlite")


def build(db: str, cand: Outcomes, *, metrics=("personal_recall",), changed=frozenset()) -> str:
    """base (30 passing units), other (a second baseline) and a pre-registered cand."""
    store = open_store(db)
    ledger = Ledger(store, clock=counter_clock())
    root = write(ledger, "base", outcomes(30))
    write(ledger, "other", outcomes(30, flip=1))
    write(ledger, "cand", cand, prereg=bar(root, metrics=metrics), changed=changed)
    store.close()
    return root


def gate(capsys, db: str, *extra: str) -> tuple[int, str, str]:
    code = main(["gate", "cand", "--ledger", db, *extra])
    out = capsys.readouterr()
    return code, out.out, out.err


def metric_rows(out: str) -> list[str]:
    return [x.split()[0] for x in out.splitlines() if x and x.split()[0] in _GATED]


_GATED = (
    "capture_rate",
    "personal_recall",
    "transfer_rate",
    "abstention_rate",
    "full_lifecycle",
    "update_correctness",
    "duplicate_rate",
    "pass_k",
)


# -- gate judges a pre-registered run by its bar -----------------------------------------------


def test_gate_uses_the_pre_registered_baseline_and_bar_and_says_so(db, capsys):
    build(db, outcomes(30))
    code, out, _ = gate(capsys, db)
    assert code == 3  # 30 protocols cannot resolve 0.05: undecided (tests/test_gate.py)
    first = out.splitlines()[0]
    assert first.startswith("bar: metrics personal_recall; tolerance 0.05: pre-registered")
    assert metric_rows(out) == ["personal_recall"]  # only the pre-registered metric decides


def test_a_regression_on_the_pre_registered_metric_fails_the_gate(db, capsys):
    build(db, outcomes(30, flip=20))
    code, out, _ = gate(capsys, db)
    assert code == 1 and "gate: FAILED: personal_recall regressed" in out


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (("--gate-metrics", "capture_rate"), "metrics personal_recall -> capture_rate"),
        (("--tolerance", "0.5"), "tolerance 0.05 -> 0.5"),
        (("--baseline", "other"), "baseline root"),
        (("--strict",), "strict off -> on"),
    ],
    ids=["other-metrics", "looser-tolerance", "other-baseline", "stricter"],
)
def test_a_different_bar_is_refused_without_override(db, capsys, extra, needle):
    build(db, outcomes(30, flip=20))
    one_line_exit_2(*gate(capsys, db, *extra)[::2], "pre-registered its gate", needle, "--override")


def test_repeating_the_pre_registered_bar_is_not_an_override(db, capsys):
    build(db, outcomes(30))
    code, out, _ = gate(
        capsys, db, "--baseline", "base", "--tolerance", "0.05", "--gate-metrics", "personal_recall"
    )
    assert code == 3 and "OVERRIDDEN" not in out


def test_an_override_is_visible_in_the_output_and_the_json(db, capsys):
    build(db, outcomes(30, flip=20))  # regresses on recall, the pre-registered metric
    code, out, _ = gate(capsys, db, "--gate-metrics", "capture_rate", "--override")
    assert code == 3  # swapping the metric would no longer fail it (undecided at 30)...
    assert out.splitlines()[0].startswith("bar: OVERRIDDEN with --override: metrics ")
    assert "[judged by an OVERRIDDEN bar, not the pre-registered one]" in out.splitlines()[-1]
    code, out, _ = gate(
        capsys, db, "--gate-metrics", "capture_rate", "--override", "--format", "json"
    )
    report = json.loads(out)
    assert report["bar"]["source"] == "overridden"
    assert report["bar"]["overrides"] == ["metrics personal_recall -> capture_rate"]
    assert report["bar"]["prereg"]["metrics"] == ["personal_recall"]
    assert report["bar"]["prereg_digest"] == digest(recorded_prereg(db))
    assert [r["metric"] for r in report["rows"]] == ["capture_rate"]
    assert "OVERRIDDEN" in report["verdict"] and report["exit"] == code


def recorded_prereg(db: str) -> Preregistration:
    store = open_store(db)
    p = recorded(from_ledger(Ledger(store), "cand"))
    store.close()
    assert p is not None
    return p


def test_a_run_that_ran_other_items_than_it_pre_registered_fails(db, capsys):
    build(db, outcomes(30), changed=frozenset({"p007"}))
    code, out, _ = gate(capsys, db)
    assert code == 1
    assert "broke its pre-registration" in out and "1 pre-registered items never ran" in out


def test_without_a_pre_registration_gate_needs_a_baseline(db, capsys):
    store = open_store(db)
    write(Ledger(store, clock=counter_clock()), "cand", outcomes(3))
    store.close()
    one_line_exit_2(*gate(capsys, db)[::2], "gate needs --baseline")


def test_a_gate_by_the_command_line_bar_says_the_run_pre_registered_none(db, capsys):
    store = open_store(db)
    ledger = Ledger(store, clock=counter_clock())
    write(ledger, "base", outcomes(30))
    write(ledger, "cand", outcomes(30))
    store.close()
    code, out, _ = gate(capsys, db, "--baseline", "base", "--tolerance", "0.2")
    says = "no pre-registered bar: judged by the command-line bar"
    bar_line = next(x for x in out.splitlines() if x.startswith("bar: "))
    assert code == 0 and bar_line.startswith(f"bar: {says}: "), out
    assert out.splitlines()[-1].endswith(f"[{says}]"), out
    code, out, _ = gate(capsys, db, "--baseline", "base", "--tolerance", "0.2", "--format", "json")
    report = json.loads(out)
    assert report["bar"]["source"] == "given" and report["bar"]["note"] == says
    assert report["verdict"].endswith(f"[{says}]")


def test_a_run_that_shows_no_run_started_has_no_readable_pre_registration(db):
    store = open_store(db)
    write(Ledger(store, clock=counter_clock()), "cand", outcomes(3))
    run = from_ledger(Ledger(store), "cand")
    store.close()
    cut = run._replace(events=[(e, h) for e, h in run.events if not isinstance(e, RunStartedEvent)])
    with pytest.raises(BadPreregistration, match=r"shows no run_started event \(it is absent\)"):
        recorded(cut)


# -- resolving the bar, pure -------------------------------------------------------------------

ROOT = "ab" * 32
P = Preregistration("base", ROOT, ["capture_rate", "personal_recall"], 0.05, "set-1", [])


@pytest.mark.parametrize(
    ("asked", "source"),
    [
        ({}, "pre-registered"),
        ({"tolerance": 0.05, "metrics": ["personal_recall", "capture_rate"]}, "pre-registered"),
        ({"tolerance": 0.1, "override": True}, "overridden"),
        ({"baseline_root": "cd" * 32, "override": True}, "overridden"),
    ],
    ids=["nothing-asked", "same-bar-reordered", "override-tolerance", "override-baseline"],
)
def test_resolve_keeps_the_pre_registered_bar_unless_overridden(asked, source):
    kw = {
        "baseline_root": ROOT,
        "tolerance": None,
        "metrics": None,
        "strict": False,
        "override": False,
    } | asked
    got = resolve(P, **kw)
    assert got.source == source
    assert (got.overrides == ()) == (source == "pre-registered")


def test_resolve_without_a_pre_registration_takes_the_given_bar():
    got = resolve(
        None, baseline_root=ROOT, tolerance=None, metrics=None, strict=True, override=False
    )
    assert got.source == "given" and got.tolerance == 0.05 and got.strict
    assert "pass_k" in got.metrics


# -- pre-registration files: bad input is one line, exit 2 -------------------------------------


def _file(tmp_path: Path, content: bytes) -> str:
    path = tmp_path / "prereg.json"
    path.write_bytes(content)
    return str(path)


GOOD = to_bytes(P)
BAD_FILES = {
    "not-json": (b"{nope", "not a benchledger pre-registration"),
    "other-format": (
        GOOD.replace(b"benchledger-prereg/1", b"benchledger-prereg/9"),
        "is not benchledger-prereg/1",
    ),
    "unknown-metric": (GOOD.replace(b'"capture_rate"', b'"vibes"'), "vibes"),
    "tolerance-out-of-range": (
        GOOD.replace(b'"tolerance":0.05', b'"tolerance":5'),
        "must be in (0, 1)",
    ),
    "short-root": (GOOD.replace(ROOT.encode(), b"abc"), "64-hex root"),
    "unknown-field": (GOOD.replace(b'"format"', b'"extra":1,"format"'), "unknown field"),
}


@pytest.mark.parametrize("case", list(BAD_FILES), ids=list(BAD_FILES))
def test_a_bad_pre_registration_file_is_refused_naming_the_problem(tmp_path, case):
    content, needle = BAD_FILES[case]
    with pytest.raises(BadPreregistration, match=needle.replace("(", r"\(").replace(")", r"\)")):
        parse(content, "prereg.json")


def test_a_good_file_round_trips_with_the_same_digest():
    assert digest(parse(GOOD, "f")) == digest(P)


@pytest.mark.parametrize("case", ["not-json", "unknown-metric"], ids=["not-json", "unknown-metric"])
def test_run_with_a_bad_pre_registration_is_one_line_exit_2_and_writes_nothing(
    tmp_path, capsys, case
):
    path = _file(tmp_path, BAD_FILES[case][0])
    db = tmp_path / "l.sqlite"
    code = main(["run", "--prereg", path, "--ledger", str(db), "--run-id", "x"])
    one_line_exit_2(code, capsys.readouterr().err, BAD_FILES[case][1])
    assert not db.exists()


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["--tolerance", "0.1"], "add --gate-baseline"),
        (["--gate-baseline", "nope"], "baseline nope"),
        (["--prereg", "f.json", "--gate-baseline", "b"], "fixes the whole bar"),
    ],
    ids=["tolerance-without-baseline", "unknown-baseline", "both-ways"],
)
def test_run_refuses_an_unusable_gate_option_before_writing(tmp_path, capsys, argv, needle):
    db = tmp_path / "l.sqlite"
    code = main(["run", *argv, "--ledger", str(db), "--run-id", "x"])
    one_line_exit_2(code, capsys.readouterr().err, needle)
    assert not db.exists()


# -- end to end: a real scripted run records its bar before any unit runs ----------------------


@pytest.fixture(scope="module")
def real(tmp_path_factory) -> dict[str, str]:
    tmp = tmp_path_factory.mktemp("prereg")
    folder = tmp / "protocols"
    folder.mkdir()
    src = os.path.join(protocols.LIFECYCLE_DIR, "bl-keystone-region.yaml")
    (folder / "bl-keystone-region.yaml").write_text(Path(src).read_text())
    db = str(tmp / "real.sqlite")
    common = ["--protocols", str(folder), "--ledger", db]
    assert main(["run", *common, "--run-id", "base"]) in (0, 1)
    code = main(
        [
            "run",
            *common,
            "--run-id",
            "cand",
            "--gate-baseline",
            "base",
            "--tolerance",
            "0.1",
            "--gate-metrics",
            "capture_rate",
        ]
    )
    assert code in (0, 1)
    prereg_file = str(tmp / "bar.json")
    assert (
        main(
            [
                "prereg",
                "new",
                "--baseline",
                "base",
                "--protocols",
                str(folder),
                "--ledger",
                db,
                "-o",
                prereg_file,
            ]
        )
        == 0
    )
    assert main(["run", *common, "--run-id", "filed", "--prereg", prereg_file]) in (0, 1)
    return {"db": db, "folder": str(folder), "file": prereg_file, "dir": str(tmp)}


def _run_started(db: str, run_id: str) -> RunStartedEvent:
    store = open_store(db)
    event = next(e for e, _ in Ledger(store).events(run_id, run_id))
    store.close()
    assert isinstance(event, RunStartedEvent)
    return event


def test_run_gate_baseline_records_the_bar_in_run_started(real):
    p = _run_started(real["db"], "cand").body.prereg
    assert p is not None
    store = open_store(real["db"])
    base_root = Ledger(store).run_info("base").root
    store.close()
    assert (p.baseline_run, p.baseline_root) == ("base", base_root)
    assert (p.metrics, p.tolerance) == (["capture_rate"], 0.1)
    assert len(p.items) == 1 and len(p.items[0]) == 64


def test_run_prereg_records_exactly_the_published_file(real):
    p = _run_started(real["db"], "filed").body.prereg
    assert p is not None
    assert digest(p) == digest(parse(Path(real["file"]).read_bytes(), "f"))


def test_gate_on_the_real_pre_registered_run_uses_its_bar(real, capsys):
    code = main(["gate", "cand", "--ledger", real["db"]])
    out = capsys.readouterr().out
    assert code in (1, 3)  # 3 protocols decide nothing: a regression, or undecided
    assert "pre-registered in run_started" in out and metric_rows(out) == ["capture_rate"]


def test_a_pre_registration_for_other_protocols_is_refused_before_the_run(real, tmp_path, capsys):
    other = tmp_path / "other"
    other.mkdir()
    src = os.path.join(protocols.LIFECYCLE_DIR, "bl-margin-region.yaml")
    (other / "bl-margin-region.yaml").write_text(Path(src).read_text())
    code = main(
        [
            "run",
            "--protocols",
            str(other),
            "--ledger",
            real["db"],
            "--run-id",
            "nope",
            "--prereg",
            real["file"],
        ]
    )
    one_line_exit_2(code, capsys.readouterr().err, "protocol set")
    store = open_store(real["db"])
    assert "nope" not in store.run_ids()
    store.close()
