"""docs/testing.md's examples are what they say: each marked block, written to a folder of
its own as a third party's test module, passes under a plain pytest run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs pytest on the docs' examples in a child

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MARKER = re.compile(r"<!-- conformance-example: (\S+) -->\n```python\n(.*?)```", re.S)


def examples() -> dict[str, str]:
    text = Path(REPO, "docs", "testing.md").read_text(encoding="utf-8")
    return {name: body for name, body in MARKER.findall(text)}


def test_the_docs_mark_an_example_for_each_contract():
    found = examples()
    assert set(found) == {"test_my_ledger.py", "test_my_transport.py", "test_my_suite.py"}
    for contract in ("LedgerBackendContract", "ModelTransportContract", "SuiteContract"):
        assert any(contract in body for body in found.values()), contract


def test_the_examples_pass_as_a_third_partys_tests(tmp_path):
    for name, body in examples().items():
        (tmp_path / name).write_text(body, encoding="utf-8")
    env = {**os.environ, "PYTHONPATH": REPO}
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rs", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=600,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    summary = done.stdout.strip().splitlines()[-1]
    assert " passed" in summary and "failed" not in summary and "error" not in summary, summary
