"""Configuration: the settings type, and the one reader of environment variables.

Only the command line calls ``load`` (tests/test_layering.py holds every other package to
that); below it the values are handed down: ``RunConfig.settings``, constructor arguments.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

DEFAULT_LEDGER = os.path.join(".benchledger", "ledger.sqlite")
# Where npm-installed platforms (server-memory) are kept, one folder per exact version.
DEFAULT_NPM_DIR = os.path.join(".benchledger", "npm")
# Where basic-memory is installed, one virtual environment per exact version.
DEFAULT_BASIC_MEMORY_DIR = os.path.join(".benchledger", "basic-memory")
# Where mapped servers (--platform mcp:FILE) are installed, one environment per package.
DEFAULT_MCP_DIR = os.path.join(".benchledger", "mcp")
# Where harness failures' tracebacks go, one file per run (harness/logging.py FailureLog).
DEFAULT_LOG_DIR = os.path.join(".benchledger", "logs")


@dataclass(frozen=True)
class Settings:
    """What the environment configures; ``Settings()`` is the defaults, no keys."""

    ledger: str = DEFAULT_LEDGER
    test_postgres: str = ""
    peer_data: str = ""
    admin_key: str = ""
    pool_base: str = ""
    # repr=False: a logged or printed Settings never shows a key.
    anthropic_api_key: str = field(default="", repr=False)
    anthropic_base_url: str = ""
    openai_api_key: str = field(default="", repr=False)
    npm_dir: str = DEFAULT_NPM_DIR
    basic_memory_dir: str = DEFAULT_BASIC_MEMORY_DIR
    signing_key: str = ""  # path of the Ed25519 private key that signs seals (never the key)
    key_dir: str = ""  # where `keys new` writes a key pair by default
    # Seconds an external platform may take to answer any request (0: the client's defaults,
    # 30 s to connect and 60 s to read); the fault selftest lowers it to provoke timeouts.
    platform_timeout_s: float = 0.0
    mcp_dir: str = DEFAULT_MCP_DIR
    log_dir: str = DEFAULT_LOG_DIR


def load(environ: Mapping[str, str] | None = None) -> Settings:
    """Settings from ``environ`` (default: this process's environment): ``BENCHLEDGER_*``,
    the provider keys, with defaults."""
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
        npm_dir=env.get("BENCHLEDGER_NPM_DIR") or DEFAULT_NPM_DIR,
        basic_memory_dir=env.get("BENCHLEDGER_BASIC_MEMORY_DIR") or DEFAULT_BASIC_MEMORY_DIR,
        mcp_dir=env.get("BENCHLEDGER_MCP_DIR") or DEFAULT_MCP_DIR,
        log_dir=env.get("BENCHLEDGER_LOG_DIR") or DEFAULT_LOG_DIR,
        signing_key=env.get("BENCHLEDGER_SIGNING_KEY", ""),
        platform_timeout_s=_seconds(env.get("BENCHLEDGER_PLATFORM_TIMEOUT_S", "")),
        key_dir=env.get("BENCHLEDGER_KEY_DIR")
        or os.path.join(
            env.get("XDG_CONFIG_HOME")
            or os.path.join(env.get("HOME") or os.path.expanduser("~"), ".config"),
            "benchledger",
        ),
    )


def _seconds(text: str) -> float:
    """A positive number of seconds, or 0.0 (the default) for anything else."""
    try:
        value = float(text)
    except ValueError:
        return 0.0
    return value if 0 < value < float("inf") else 0.0
