"""docs/cli.md's command reference is the parser's own ``--help``, regenerated here: a
changed option fails this test until ``python -m benchledger.cli.reference`` is run."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from benchledger.cli import reference

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def test_docs_cli_md_holds_the_reference_the_parser_generates_now():
    if sys.version_info[:2] != (3, 11):  # argparse lays help out differently in each version
        pytest.skip("docs/cli.md is generated with Python 3.11's argparse")
    # A fresh interpreter: no plugin a test registered in this one adds its options.
    done = subprocess.run([sys.executable, "-m", "benchledger.cli.reference", "--check"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr


def test_a_stale_reference_is_named_and_rewritten(tmp_path, capsys):
    doc = tmp_path / "cli.md"
    doc.write_text(f"# hand-written\n\n{reference.BEGIN}\nold help\n{reference.END}\ntail\n")
    assert reference.main(["--check", str(doc)]) == 1
    assert f"{doc}: the command reference is stale" in capsys.readouterr().err
    assert reference.main([str(doc)]) == 0
    text = doc.read_text()
    assert text.startswith("# hand-written\n\n") and text.endswith(f"{reference.END}\ntail\n")
    assert "old help" not in text and "### `benchledger run`" in text
    assert "#### `benchledger protocols validate`" in text and "--retry-infra" in text
