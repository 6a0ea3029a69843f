from __future__ import annotations

import os
import uuid
from collections.abc import Iterator

import pytest

from harness import settings
from ledger import Ledger, Store, open_store
from tests.sample import counter_clock


@pytest.fixture
def sqlite_store(tmp_path) -> Iterator[Store]:
    store = open_store(str(tmp_path / "ledger.sqlite"))
    yield store
    store.close()


REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_PEER_CANDIDATES = (
    os.path.join(REPO, "..", "shared", "peers", "mcp-data-platform"),
    "/work/shared/peers/mcp-data-platform",  # where a CI clone elsewhere finds it on this machine
)


def peer_dir() -> str:
    """The peer platform's published data (never copied into the project), or skip."""
    named = settings.load().peer_data
    for candidate in (named, *_PEER_CANDIDATES) if named else _PEER_CANDIDATES:
        if candidate and os.path.isdir(os.path.join(candidate, "bench", "protocols")):
            return os.path.abspath(candidate)
    pytest.skip(
        "the peer platform's data (../shared/peers/mcp-data-platform) is not on this machine; "
        "set BENCHLEDGER_PEER_DATA to its folder"
    )


@pytest.fixture
def peer() -> str:
    return peer_dir()


def postgres_url() -> str:
    """A URL with a fresh schema, or skip (with the reason) when no server was named."""
    base = settings.load().test_postgres
    if not base:
        pytest.skip(
            "PostgreSQL tests need BENCHLEDGER_TEST_POSTGRES=postgresql://... "
            "(.ci/run sets it); skipped on this machine"
        )
    sep = "&" if "?" in base else "?"
    return f"{base}{sep}schema=t_{uuid.uuid4().hex[:12]}"


def drop_schema(url: str) -> None:
    import urllib.parse

    import psycopg

    parts = urllib.parse.urlsplit(url)
    schema = dict(urllib.parse.parse_qsl(parts.query))["schema"]
    with psycopg.connect(
        host=parts.hostname,
        port=parts.port or 5432,
        user=parts.username,
        dbname=parts.path.lstrip("/"),
        autocommit=True,
    ) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def any_store(request, tmp_path) -> Iterator[Store]:
    if request.param == "sqlite":
        store = open_store(str(tmp_path / "ledger.sqlite"))
        yield store
        store.close()
        return
    url = postgres_url()
    store = open_store(url)
    yield store
    store.close()
    drop_schema(url)


@pytest.fixture
def ledger(sqlite_store) -> Ledger:
    return Ledger(sqlite_store, clock=counter_clock())


@pytest.fixture(autouse=True)
def _no_ambient_ledger(monkeypatch, tmp_path):
    # Commands under test never touch a developer's real .benchledger/ directory.
    monkeypatch.setenv("BENCHLEDGER_LEDGER", str(tmp_path / "default-ledger.sqlite"))
    os.environ.pop("BENCHLEDGER_DEBUG", None)
