"""Fixtures and helpers shared by the tests: stores and ledgers, signed and planned runs,
the reference platform served over loopback (with an outage it can be told to inject),
and the command line run in one line."""

from __future__ import annotations

import asyncio
import os
import shutil
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from benchledger import protocols
from benchledger.harness import settings
from benchledger.harness.driver import Progress, RunDriver
from benchledger.harness.record import RunConfig
from benchledger.ledger import Ledger, Store, open_store
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    GraderDecisionBody,
    PlannedUnit,
    PlatformRecord,
    RunRecord,
    RunStartedBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.keys import load_private_key, write_key_pair
from benchledger.ledger.signing import Signer
from tests.sample import PASSING, counter_clock, lifecycle_run


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


# The knowledge-pollution families several test files read, imported once per session.
POLLUTION_FAMILIES = ("rq1-warehouse", "directive-contrast")

ImportedArms = dict[str, list[tuple[str, str, str]]]


@pytest.fixture(scope="session")
def pollution_families(tmp_path_factory) -> tuple[str, ImportedArms]:
    """The peer's rq1-warehouse and directive-contrast families imported (``import_family``)
    into one SQLite ledger, closed: (its path, each family's (run id, root, label)). The
    import is seconds of CPU; a test reads a ``copied_ledger`` of it, never the file itself."""
    from benchledger.harness.peer.tasks_import import import_family

    results = os.path.join(peer_dir(), "bench", "results", "knowledge-pollution")
    path = str(tmp_path_factory.mktemp("pollution") / "ledger.sqlite")
    ledger = Ledger(open_store(path))
    try:
        runs = {
            fam: import_family(ledger, os.path.join(results, fam)) for fam in POLLUTION_FAMILIES
        }
    finally:
        ledger.store.close()
    return path, runs


def copied_ledger(path: str, folder: Path) -> str:
    """A copy of the closed SQLite ledger at ``path`` in ``folder``: the same bytes a fresh
    build would write (imports are deterministic), for a test to read or add to."""
    folder.mkdir(parents=True, exist_ok=True)
    copy = str(folder / os.path.basename(path))
    shutil.copyfile(path, copy)
    if os.path.exists(path + "-wal"):  # rows a closed WAL ledger did not checkpoint
        shutil.copyfile(path + "-wal", copy + "-wal")
    return copy


@pytest.fixture(scope="session")
def npm_dir(tmp_path_factory) -> str:
    """Where the pinned server-memory is installed for this session, once for every file
    that runs it (``$BENCHLEDGER_NPM_DIR`` when set); skipped, saying why, without Node.js."""
    from benchledger.harness.platforms.provision import (
        SERVER_MEMORY_VERSION,
        install_server_memory,
    )

    missing = [tool for tool in ("node", "npm") if shutil.which(tool) is None]
    if missing:
        pytest.skip(f"server-memory runs on Node.js: {' and '.join(missing)} not on PATH")
    folder = os.environ.get("BENCHLEDGER_NPM_DIR") or str(tmp_path_factory.mktemp("npm"))
    install_server_memory(SERVER_MEMORY_VERSION, folder)
    return folder


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


# -- the command line ---------------------------------------------------------------------


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``benchledger ARGV``: (exit code, stdout, stderr)."""
    from benchledger.cli import main

    code = main(list(argv))
    out = capsys.readouterr()
    return code, out.out, out.err


def one_line_exit_2(code: int, err: str, *needles: str) -> None:
    """The command refused its input in one stderr line, exit 2, saying each of ``needles``."""
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


# -- signed runs --------------------------------------------------------------------------


def keypair(directory: Path) -> tuple[str, str]:
    """A new key pair written in ``directory`` (made if missing): (private, public) paths."""
    directory.mkdir(parents=True, exist_ok=True)
    key, pub, _ = write_key_pair(str(directory))
    return key, pub


def signing_ledger(store: Store, key: str, tool: str = "benchledger test", **kw: Any) -> Ledger:
    """A ledger over ``store`` on the test clock whose seals are signed with the private key
    at ``key`` (``tool``: the version the signature names)."""
    signer = Signer(load_private_key(key), tool)
    return Ledger(store, clock=counter_clock(), signer=signer, **kw)


def signed_run(path: str, key: str | None, run_id: str = "r1") -> str:
    """A sealed lifecycle run of three passing units in the ledger at ``path`` (signed with
    ``key`` when given); its root."""
    with open_store(path) as store:
        ledger = signing_ledger(store, key) if key else Ledger(store, clock=counter_clock())
        outcomes = {(f"p{i}", 1): dict(PASSING) for i in range(3)}
        return lifecycle_run(ledger, run_id, outcomes)


# -- planned runs -------------------------------------------------------------------------

Outcomes = dict[tuple[str, int], dict[str, bool | None]]


def write_run(
    ledger: Ledger,
    run_id: str,
    units: Outcomes,
    *,
    suite: str = "lifecycle",
    planned: int | None = None,
    k: int = 1,
    errors: dict[tuple[str, int], str] | None = None,
    seal: bool = True,
    record: bool = True,
    coupled: bool = False,
    set_hash: str = "set-1",
    model: str = "m-1",
) -> None:
    """A run of ``suite`` whose units carry exactly ``units`` as grader decisions, its record
    planning ``planned`` protocols (p000, p001, ...; default: as many as ``units`` name) of
    ``k`` attempts; sealed unless ``seal`` is False. A unit in ``errors`` ended in that error."""
    pids = sorted({pid for pid, _ in units})
    n_protocols = planned if planned is not None else len(pids)
    plan = [PlannedUnit(f"p{i:03d}", a) for a in range(1, k + 1) for i in range(n_protocols)]
    rec = RunRecord(
        suite=suite,
        platform=PlatformRecord(kind="embedded", name="refplatform"),
        protocol_set_hash=set_hash,
        units=plan,
        k=k,
        agent="scripted",
    )
    ledger.start_run(
        run_id,
        RunStartedBody(
            suite=suite,
            protocol_set_hash=set_hash,
            protocols=n_protocols,
            k=k,
            agent="scripted",
            model=model,
            platform="refplatform (embedded)",
            platform_version="test",
            coupled=coupled,
            record=rec if record else None,
        ),
    )
    for (pid, attempt), checks in sorted(units.items()):
        w = ledger.new_stream(f"{run_id}/{pid}/{attempt}")
        w.append(UnitStartedBody(protocol_id=pid, attempt=attempt))
        fin = w.append(EpisodeFinishedBody(episode="recall", final_answer="FINAL ANSWER: 1"))
        error = (errors or {}).get((pid, attempt), "")
        for name, verdict in ({} if error else checks).items():
            w.append(
                GraderDecisionBody(stage=name.split("_")[0], check=name, verdict=verdict),
                refs=[fin],
            )
        w.append(UnitFinishedBody(outcome={} if error else dict(checks), error=error))
        ledger.commit(w)
    if seal:
        ledger.seal(run_id)


def planned_run(ledger: Ledger, run_id: str, units: list[str], finished: list[str]) -> None:
    """An unsealed run whose record plans ``units`` (attempt 1), of which ``finished`` ran
    (each a bare unit: started, finished captured)."""
    record = RunRecord(suite="lifecycle", platform=PlatformRecord(kind="embedded"),
                       units=[PlannedUnit(u, 1) for u in units])  # fmt: skip
    ledger.start_run(run_id, RunStartedBody(suite="lifecycle", protocols=len(units), record=record))
    for unit in finished:
        unit_stream(ledger, f"{run_id}/{unit}/1", unit)


def unit_stream(ledger: Ledger, stream: str, unit: str, outcome: bool = True) -> None:
    """One bare finished unit (attempt 1) in ``stream``, ``captured`` as ``outcome``."""
    w = ledger.new_stream(stream)
    w.append(UnitStartedBody(protocol_id=unit, attempt=1))
    w.append(UnitFinishedBody(outcome={"captured": outcome}))
    ledger.commit(w)


# -- the reference platform as an external one ----------------------------------------------


def protocol_subset(tmp_path: Path, ids: list[str]) -> str:
    """A protocols folder in ``tmp_path`` holding the lifecycle protocols ``ids``."""
    folder = tmp_path / "protocols"
    folder.mkdir(exist_ok=True)
    for pid in ids:
        with open(os.path.join(protocols.LIFECYCLE_DIR, f"{pid}.yaml")) as fh:
            (folder / f"{pid}.yaml").write_text(fh.read())
    return str(folder)


class Outage:
    """ASGI wrapper: while ``down``, every request under ``prefix`` gets a 503 (with
    ``only``, only those whose query string holds it: one unit's identity, say)."""

    def __init__(self, app: Any, prefix: str) -> None:
        self.app, self.prefix, self.down, self.only = app, prefix, False, b""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        from starlette.responses import JSONResponse

        hit = scope["type"] == "http" and scope["path"].startswith(self.prefix)
        if self.down and hit and self.only in scope["query_string"]:
            await JSONResponse({"error": "injected outage"}, status_code=503)(scope, receive, send)
            return
        await self.app(scope, receive, send)


@contextmanager
def refplatform_server(admin: str, pool: str, *, outage: str = "") -> Iterator[Any]:
    """refplatform served over loopback with ``admin``'s key and a pool of 60 ``pool``
    keys: an external platform. With ``outage`` (a path prefix) it sits behind an
    ``Outage`` the test switches on and off through ``server.outage``."""
    from benchledger.refplatform.auth import Keyring
    from benchledger.refplatform.platform import Platform
    from benchledger.refplatform.server import LoopbackServer, build_app

    app: Any = build_app(Platform(), Keyring(admin, pool, 60))
    if outage:
        app = Outage(app, outage)
    server = LoopbackServer(app)
    server.start()
    server.outage = app if outage else None  # type: ignore[attr-defined]
    try:
        yield server
    finally:
        server.stop()


def external_config(url: str, admin: str, pool: str, **kw: Any) -> RunConfig:
    """A run against the external platform at ``url`` (``refplatform_server``'s keys)."""
    return RunConfig(platform=url, admin_key=admin, pool_base=pool, pool_size=60, **kw)


def interrupted_after(
    ledger: Ledger,
    cfg: RunConfig,
    units: int,
    *,
    after: Callable[[int], None] | None = None,
    **kw: Any,
) -> None:
    """Run ``cfg`` until ``units`` units finished, then cancel it, as Ctrl-C does;
    ``after(n)`` is told each count as it is reached, ``kw`` go to the RunDriver."""

    async def go() -> None:
        task = asyncio.current_task()
        assert task is not None

        def done(outcome: Any, n: int, total: int) -> None:
            if after is not None:
                after(n)
            if n == units:
                task.cancel()

        await RunDriver(ledger, cfg, Progress(unit_done=done), **kw).execute()

    with pytest.raises(asyncio.CancelledError):
        asyncio.run(go())


@pytest.fixture(scope="session")
def forks() -> Iterator[Any]:
    """``benchledger ARGV`` as in a fresh interpreter, forked from one (tests/forked.py)."""
    from tests.forked import Forks

    server = Forks()
    yield server
    server.close()
