"""Our three suites pass the contract a third party's suite runs
(``benchledger.testing.SuiteContract``); the toy suite's run is in tests/test_toy_suite.py."""

from __future__ import annotations

import os
from typing import Any

from benchledger.protocols import tasks as task_files
from benchledger.testing import SuiteContract
from tests.conftest import peer_dir


class TestLifecycleSuite(SuiteContract):
    suite_name = "lifecycle"


class TestProvenanceSuite(SuiteContract):
    suite_name = "provenance"


class TestTasksSuite(SuiteContract):
    """The peer's tasks on the peer's seed (skipped, with the reason, where it is absent)."""

    suite_name = "tasks"

    def items_path(self) -> str:
        return os.path.join(peer_dir(), "bench", "tasks")

    def run_options(self) -> dict[str, Any]:
        s2 = [t.id for t in task_files.load(self.items_path()).tasks if t.suite == "s2"]
        return {"pack": os.path.join(peer_dir(), "bench", "seed"), "protocol": s2[: self.units]}
