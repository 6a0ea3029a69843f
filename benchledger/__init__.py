"""benchledger: benchmarks of long-term memory platforms for AI agents, on a hash-chained ledger."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("benchledger")
except PackageNotFoundError:  # a source tree on sys.path that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
