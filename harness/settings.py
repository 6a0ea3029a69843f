"""Configuration: the one place that reads environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass

DEFAULT_LEDGER = os.path.join(".benchledger", "ledger.sqlite")


@dataclass(frozen=True)
class Settings:
    ledger: str
    test_postgres: str
    peer_data: str = ""
    admin_key: str = ""
    pool_base: str = ""


def load(environ: dict[str, str] | None = None) -> Settings:
    """Settings from the environment (``BENCHLEDGER_*``), with defaults."""
    env = os.environ if environ is None else environ
    return Settings(
        ledger=env.get("BENCHLEDGER_LEDGER") or DEFAULT_LEDGER,
        test_postgres=env.get("BENCHLEDGER_TEST_POSTGRES", ""),
        peer_data=env.get("BENCHLEDGER_PEER_DATA", ""),
        admin_key=env.get("BENCHLEDGER_ADMIN_KEY", ""),
        pool_base=env.get("BENCHLEDGER_POOL_BASE", ""),
    )
