"""benchledger: benchmarks of long-term memory platforms for AI agents, on a hash-chained ledger.

The library API (docs/api.md)::

    import benchledger
    result = benchledger.run(ledger="x.sqlite", limit=3)
    run = benchledger.open_run(result.run_id, ledger="x.sqlite")
    print(run.verification.ok, result.root, run.scorecard())

Every name here is loaded on first use (PEP 562): ``import benchledger.ledger`` runs this
module, and the everyday commands must not pay for the run's imports (tests/test_startup.py).
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

try:
    __version__ = version("benchledger")
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0.0.0+unknown"

if TYPE_CHECKING:
    from benchledger.harness.settings import Settings
    from benchledger.judging import Comparison, GateVerdict, compare, gate
    from benchledger.ledger.completeness import Completeness
    from benchledger.ledger.errors import BenchledgerError
    from benchledger.ledger.verified import Origin, Standing
    from benchledger.reading import (
        Checked,
        Exported,
        Run,
        Verification,
        Verified,
        export,
        open_run,
        verify,
    )
    from benchledger.running import RunResult, run, run_async
    from benchledger.scoring import Rate, Scorecard, report
    from benchledger.trust import Unauthenticated

# Public name -> the module that defines it (imported when the name is first used).
_LAZY: dict[str, str] = {
    "BenchledgerError": "benchledger.ledger.errors",
    "run": "benchledger.running",
    "run_async": "benchledger.running",
    "RunResult": "benchledger.running",
    "open_run": "benchledger.reading",
    "verify": "benchledger.reading",
    "export": "benchledger.reading",
    "Run": "benchledger.reading",
    "Verification": "benchledger.reading",
    "Verified": "benchledger.reading",
    "Checked": "benchledger.reading",
    "Exported": "benchledger.reading",
    "Unauthenticated": "benchledger.trust",
    "report": "benchledger.scoring",
    "Scorecard": "benchledger.scoring",
    "Rate": "benchledger.scoring",
    "compare": "benchledger.judging",
    "gate": "benchledger.judging",
    "Comparison": "benchledger.judging",
    "GateVerdict": "benchledger.judging",
    "Settings": "benchledger.harness.settings",
    "Standing": "benchledger.ledger.verified",
    "Origin": "benchledger.ledger.verified",
    "Completeness": "benchledger.ledger.completeness",
}

__all__ = [
    "BenchledgerError",
    "Checked",
    "Comparison",
    "Completeness",
    "Exported",
    "GateVerdict",
    "Origin",
    "Rate",
    "Run",
    "RunResult",
    "Scorecard",
    "Settings",
    "Standing",
    "Unauthenticated",
    "Verification",
    "Verified",
    "__version__",
    "compare",
    "export",
    "gate",
    "open_run",
    "report",
    "run",
    "run_async",
    "verify",
]


def __getattr__(name: str) -> object:
    """A public name, imported from its module on first use (then kept here)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'benchledger' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
