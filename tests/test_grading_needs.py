"""A suite whose grading needs a package this Python lacks is refused before anything is
written (``SuitePlugin.grading_needs``), rather than sealing a run whose every unit failed
on the import; LoCoMo's own stemmer comes with benchledger's plain install."""

from __future__ import annotations

import dataclasses
import os
import tomllib
from pathlib import Path

from benchledger.cli import main
from benchledger.projections import suites as read_suites
from tests.conftest import one_line_exit_2
from tests.test_toy_suite import NAME, PLUGIN

ABSENT = "benchledger_test_no_such_grader"


def test_a_suite_whose_grading_needs_an_absent_module_is_refused_and_nothing_is_written(
    tmp_path, capsys
):
    read_suites.register(dataclasses.replace(PLUGIN, grading_needs=(ABSENT, f"{ABSENT}.stem")))
    try:
        ledger = tmp_path / "l.sqlite"
        code = main(["run", "--suite", NAME, "--ledger", str(ledger), "--run-id", "r"])
    finally:
        read_suites.unregister(NAME)
    out, err = capsys.readouterr()
    one_line_exit_2(code, err, f"suite {NAME} cannot grade here", f"{ABSENT}, {ABSENT}.stem")
    assert not os.path.exists(ledger) and "running" not in out


def test_the_same_suite_with_its_grading_modules_present_runs(tmp_path, capsys):
    read_suites.register(dataclasses.replace(PLUGIN, grading_needs=("json", "email.utils")))
    try:
        ledger = tmp_path / "l.sqlite"
        code = main(["run", "--suite", NAME, "--ledger", str(ledger), "--run-id", "r"])
    finally:
        read_suites.unregister(NAME)
    assert code == 0 and "run r sealed" in capsys.readouterr().out


def test_locomo_declares_its_stemmer_which_a_plain_install_brings():
    assert read_suites.plugin("locomo").grading_needs == ("nltk",)
    assert read_suites.plugin("locomo").missing_modules() == []
    pyproject = Path(__file__).resolve().parent.parent / "pyproject.toml"
    with open(pyproject, "rb") as fh:
        project = tomllib.load(fh)["project"]
    assert "nltk==3.10.4" in project["dependencies"]  # pinned: LoCoMo's F1 depends on it
