"""Configuration: the one place that reads environment variables."""

from __future__ import annotations

import os
from dataclasses import dataclass, field

DEFAULT_LEDGER = os.path.join(".benchledger", "ledger.sqlite")


@dataclass(frozen=True)
class Settings:
    ledger: str
    test_postgres: str
    peer_data: str = ""
    admin_key: str = ""
    pool_base: str = ""
    # repr=False: a logged or printed Settings never shows a key.
    anthropic_api_key: str = field(default="", repr=False)
    anthropic_base_url: str = ""
    openai_api_key: str = field(default="", repr=False)


def load(environ: dict[str, str] | None = None) -> Settings:
    """Settings from the environment (``BENCHLEDGER_*``, provider keys), with defaults."""
    env = os.environ if environ is None else environ
    return Settings(
        ledger=env.get("BENCHLEDGER_LEDGER") or DEFAULT_LEDGER,
        test_postgres=env.get("BENCHLEDGER_TEST_POSTGRES", ""),
        peer_data=env.get("BENCHLEDGER_PEER_DATA", ""),
        admin_key=env.get("BENCHLEDGER_ADMIN_KEY", ""),
        pool_base=env.get("BENCHLEDGER_POOL_BASE", ""),
        # The provider SDKs' own variable names, so an existing setup works unchanged.
        anthropic_api_key=env.get("ANTHROPIC_API_KEY", ""),
        anthropic_base_url=env.get("ANTHROPIC_BASE_URL", ""),
        openai_api_key=env.get("OPENAI_API_KEY", ""),
    )
