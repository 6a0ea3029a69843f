"""Platforms: the core interface (``base``), one ``Platform`` each registered by name
(``platform``, ``builtin``), their provisioners (``provision``) and adapters.

Importing this package loads nothing heavy: the names below load their module on first use.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = ["CallResult", "McpDataPlatform", "Observer", "PlatformClient", "PlatformSession"]

_WHERE = {
    "CallResult": "benchledger.harness.platforms.base",
    "Observer": "benchledger.harness.platforms.base",
    "PlatformClient": "benchledger.harness.platforms.base",
    "PlatformSession": "benchledger.harness.platforms.base",
    "McpDataPlatform": "benchledger.harness.platforms.mcp_data_platform",
}


def __getattr__(name: str) -> Any:  # PEP 562: the adapters load only when asked for
    if name in _WHERE:
        return getattr(importlib.import_module(_WHERE[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
