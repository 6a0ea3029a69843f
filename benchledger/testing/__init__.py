"""Conformance tests a third party runs against their own ledger backend, model provider
or suite: pytest classes to subclass (docs/testing.md).

Imports pytest, so it is for test suites only; nothing else in benchledger imports it.
"""

from __future__ import annotations

import pytest

# The contracts' own asserts report their values as a test's would (pytest rewrites them).
pytest.register_assert_rewrite(
    "benchledger.testing.ledger", "benchledger.testing.models", "benchledger.testing.suites"
)

from benchledger.testing.ledger import LedgerBackendContract  # noqa: E402
from benchledger.testing.models import ModelTransportContract  # noqa: E402
from benchledger.testing.suites import SuiteContract  # noqa: E402

__all__ = ["LedgerBackendContract", "ModelTransportContract", "SuiteContract"]
