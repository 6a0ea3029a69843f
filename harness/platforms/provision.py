"""benchledger's platforms' provisioners: start or connect, hand out clients.

Each is made by its platform (``builtin.py``, one ``Platform`` each, found through the
registry in ``platform.py``). ``embedded`` serves a fresh refplatform in this process, on
the run's event loop, over an HTTP transport without a socket; ``embedded:process`` serves
it as a child process (``python -m benchledger.refplatform serve``), so it runs on another
core; an ``http(s)://`` URL is an external platform, shared by every pass, with
``--reset-cmd`` run between passes; ``server-memory[@VERSION]`` runs
@modelcontextprotocol/server-memory over stdio, installed with npm on first use (or the
command ``--server-memory-cmd`` gives); ``basic-memory`` runs PyPI basic-memory over
streamable HTTP. Every runtime an embedded or stdio provisioner hands out starts from a
fresh platform state.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager

import httpx2
import msgspec

from benchledger.harness.errors import HarnessError, PlatformStartFailed
from benchledger.harness.platforms import basic_memory_server, embedded
from benchledger.harness.platforms.base import Description, PlatformClient
from benchledger.harness.platforms.basic_memory import SHARED, BasicMemory
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform
from benchledger.harness.platforms.pinned_venv import install_step
from benchledger.harness.platforms.platform import (
    PlatformSpec,
    Provision,
    Provisioner,
    of_record,
    resolve,
)
from benchledger.harness.platforms.server_memory import CMD as SERVER_MEMORY_CMD
from benchledger.harness.platforms.server_memory import PACKAGE, ServerMemory
from benchledger.harness.platforms.server_memory import VERSION as SERVER_MEMORY_VERSION
from benchledger.harness.record import command_secrets, redact_command
from benchledger.harness.scrub import scrubber
from benchledger.harness.settings import DEFAULT_NPM_DIR, Settings
from benchledger.ledger.events import PlatformRecord

__all__ = [
    "SERVER_MEMORY_CMD",
    "SERVER_MEMORY_VERSION",
    "PlatformSpec",
    "Provisioner",
    "install_server_memory",
    "parse_platform",
    "provisioner",
]

STARTUP_TIMEOUT_S = 60.0
NPM_TIMEOUT_S = 600.0


class ResetFailed(HarnessError):
    """``--reset-cmd`` failed between passes: later passes would see earlier state.

    ``stderr`` comes scrubbed (``ExternalProvisioner.between_passes``): it is printed."""

    def __init__(self, code: int, stderr: str) -> None:
        super().__init__(f"--reset-cmd exited {code}: {stderr.strip()[:200]}")
        self.code = code
        self.stderr = stderr


def parse_platform(text: str) -> PlatformSpec:
    """The spec ``--platform text`` names, through the platform registry (``platform.resolve``):
    ``embedded[:thread|:process]``, ``server-memory[@VERSION]``, ``basic-memory[@VERSION]``,
    an http(s):// URL, an installed plugin's name, or a form a run record names a platform
    by (so a resume reaches the same one). ValueError says what is accepted."""
    return resolve(text)[1]


class EmbeddedProvisioner(Provisioner):
    """A fresh refplatform per runtime, in this process or as a child process."""

    fresh_state = True

    def run_label(self, described: Description) -> str:
        return f"{described.name} (embedded)"

    def __init__(
        self, spec: PlatformSpec, *, pool_size: int, pack: str = "", embedder: str = ""
    ) -> None:
        super().__init__(spec, pool_size=pool_size)
        self.pack = os.path.abspath(pack) if pack else ""
        self.embedder = embedder
        embedded.check_pack(self.pack)  # a broken pack is refused before anything starts
        embedded.check_embedder(embedder)  # so is an unusable embedder
        if spec.kind == "embedded":  # a child process loads its own
            embedded.preload(self.pack)
        # Per-run keys: never recorded, gone with the platform.
        self.admin_key = f"bl-admin-{secrets.token_hex(8)}"
        self.pool_base = f"bl-key-{secrets.token_hex(4)}"

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[PlatformClient]:
        if self.spec.kind == "process":
            async with self._child() as url, self._client(url) as client:
                yield client
            return
        served = embedded.in_memory(
            self.pool_size, self.admin_key, self.pool_base, self.pack, self.embedder
        )
        async with served as (url, transport), self._client(url, transport) as client:
            yield client

    @asynccontextmanager
    async def _client(
        self, url: str, transport: httpx2.AsyncBaseTransport | None = None
    ) -> AsyncIterator[McpDataPlatform]:
        client = McpDataPlatform(
            url,
            admin_key=self.admin_key,
            pool_base=self.pool_base,
            pool_size=self.pool_size,
            transport=transport,
        )
        try:
            yield client
        finally:
            await client.aclose()

    @asynccontextmanager
    async def _child(self) -> AsyncIterator[str]:
        cmd = [sys.executable, "-m", "benchledger.refplatform", "serve", "--port", "0",
               "--pool", str(self.pool_size), "--admin-key", self.admin_key,
               "--pool-base", self.pool_base]  # fmt: skip
        cmd += ["--pack", self.pack] if self.pack else []
        cmd += ["--embedder", self.embedder] if self.embedder else []
        proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True
        )
        try:
            assert proc.stdout is not None
            first = await asyncio.wait_for(
                asyncio.to_thread(proc.stdout.readline), STARTUP_TIMEOUT_S
            )
            match = re.search(r"serving (http://\S+)/mcp", first)
            if match is None:
                err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
                raise PlatformStartFailed(
                    f"the embedded platform did not start: {(first or err).strip()[:200]!r}"
                )
            yield match.group(1)
        finally:
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
            try:
                await asyncio.to_thread(proc.wait, 15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class ExternalProvisioner(Provisioner):
    """One running platform at a URL, shared by every pass; reset between passes if told how."""

    fresh_state = False

    def __init__(
        self,
        spec: PlatformSpec,
        *,
        pool_size: int,
        admin_key: str,
        pool_base: str,
        reset_cmd: str = "",
        k: int = 1,
        timeout_s: float = 0.0,
    ) -> None:
        super().__init__(spec, pool_size=pool_size)
        self.admin_key = admin_key
        self.pool_base = pool_base
        self.reset_cmd = reset_cmd
        self.k = k
        self.timeout_s = timeout_s  # bounds every request when > 0 (else the client's defaults)

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[PlatformClient]:
        client = McpDataPlatform(
            self.spec.url,
            admin_key=self.admin_key,
            pool_base=self.pool_base,
            pool_size=self.pool_size,
            timeout_s=self.timeout_s or 30.0,
            read_timeout_s=self.timeout_s or None,
        )
        try:
            yield client
        finally:
            await client.aclose()

    def between_passes(self) -> None:
        if not self.reset_cmd:
            return
        done = subprocess.run(self.reset_cmd, shell=True, capture_output=True, text=True)
        if done.returncode != 0:
            # Scrubbed as every platform error is (the keys the client holds), and of what
            # the command itself carries (a token it was given, echoed back in its error).
            known = command_secrets(self.reset_cmd) or set()
            scrub = scrubber(self.admin_key, self.pool_base, *sorted(known))
            raise ResetFailed(done.returncode, scrub.text(done.stderr))

    @property
    def coupled(self) -> bool:
        return self.k > 1 and not self.reset_cmd


def install_server_memory(version: str, npm_dir: str) -> str:
    """The server's entry script, installed with npm into ``npm_dir/server-memory-VERSION``.

    Installed once; later runs reuse the folder. The install goes to a scratch folder
    first and is renamed into place, so an interrupted install is never mistaken for one.
    """
    home = os.path.join(os.path.abspath(npm_dir), f"server-memory-{version}")
    entry = _installed_entry(home, version)
    if entry:
        return entry
    npm = shutil.which("npm")
    if npm is None:
        raise PlatformStartFailed(
            f"--platform server-memory installs {PACKAGE}@{version} with npm, which is not on "
            "PATH: install Node.js 18+ with npm, or give --server-memory-cmd CMD"
        )
    os.makedirs(os.path.dirname(home), exist_ok=True)
    scratch = tempfile.mkdtemp(prefix=f".server-memory-{version}-", dir=os.path.dirname(home))
    # Seconds of silence would look like a hang: say what is happening, once.
    print(f"installing {PACKAGE}@{version} with npm into {home} (first use, about 10-20 s)",
          file=sys.stderr, flush=True)  # fmt: skip
    try:
        cmd = [npm, "install", "--prefix", scratch, "--ignore-scripts", "--no-audit",
               "--no-fund", "--loglevel=error", f"{PACKAGE}@{version}"]  # fmt: skip
        install_step(cmd, NPM_TIMEOUT_S, slow=(
            f"npm install {PACKAGE}@{version} took over {NPM_TIMEOUT_S:g}s: check the "
            "npm registry is reachable (npm config get registry)"
        ), failed=lambda done: (f"npm install {PACKAGE}@{version} exited {done.returncode}: "
                                f"{done.stderr.strip()[:300]!r}"))  # fmt: skip
        if not _installed_entry(scratch, version):
            raise PlatformStartFailed(f"npm installed no {PACKAGE}@{version} into {scratch}")
        try:
            os.rename(scratch, home)
        except OSError:
            if not _installed_entry(home, version):  # else another run installed it first
                raise
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return _installed_entry(home, version)


def _installed_entry(prefix: str, version: str) -> str:
    """The entry script of the package installed under ``prefix``, if it is ``version``."""
    root = os.path.join(prefix, "node_modules", *PACKAGE.split("/"))
    try:
        with open(os.path.join(root, "package.json"), encoding="utf-8") as f:
            meta = json.load(f)
    except (OSError, ValueError):
        return ""
    bins = meta.get("bin")
    script = next(iter(bins.values()), "") if isinstance(bins, dict) else str(bins or "")
    entry = os.path.join(root, script)
    return entry if meta.get("version") == version and script and os.path.isfile(entry) else ""


class ServerMemoryProvisioner(Provisioner):
    """@modelcontextprotocol/server-memory over stdio; each runtime gets a fresh folder."""

    fresh_state = True

    def __init__(
        self, spec: PlatformSpec, *, pool_size: int, npm_dir: str = DEFAULT_NPM_DIR
    ) -> None:
        super().__init__(spec, pool_size=pool_size)
        self.npm_dir = npm_dir or DEFAULT_NPM_DIR
        self._argv: tuple[str, ...] = ()
        self._installing = asyncio.Lock()

    def _resolve(self) -> tuple[str, ...]:
        if self.spec.url.startswith(SERVER_MEMORY_CMD):
            return tuple(shlex.split(self.spec.url.removeprefix(SERVER_MEMORY_CMD)))
        node = shutil.which("node")
        if node is None:
            raise PlatformStartFailed(
                "--platform server-memory runs on Node.js, and `node` is not on PATH: install "
                "Node.js 18+ with npm, or give --server-memory-cmd CMD"
            )
        return (node, install_server_memory(self.spec.url.rpartition("@")[2], self.npm_dir))

    async def argv(self) -> tuple[str, ...]:
        """The command that starts one server (installing the package on first use)."""
        async with self._installing:
            if not self._argv:
                self._argv = await asyncio.to_thread(self._resolve)
        return self._argv

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[PlatformClient]:
        argv = await self.argv()
        # MEMORY_FILE_PATH must be absolute: a relative one resolves in the package's folder.
        folder = tempfile.mkdtemp(prefix="benchledger-server-memory-")
        try:
            async with ServerMemory.running(argv, folder, pool_size=self.pool_size) as client:
                yield client
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def record(self, described: Description) -> PlatformRecord:
        """The npm package and version (or the given command, redacted) and the server's own."""
        rec = super().record(described)
        if self.spec.url.startswith(SERVER_MEMORY_CMD):
            cmd = redact_command(self.spec.url.removeprefix(SERVER_MEMORY_CMD))
            rec = PlatformRecord(**{**msgspec.structs.asdict(rec), "url": SERVER_MEMORY_CMD + cmd})
        return rec


class BasicMemoryProvisioner(Provisioner):
    """basic-memory over streamable HTTP (harness/platforms/basic_memory_server.py): each
    runtime gets a fresh folder and its own server."""

    fresh_state = True

    def __init__(self, spec: PlatformSpec, *, pool_size: int, root: str, python: str = "") -> None:
        super().__init__(spec, pool_size=pool_size)
        self.root = root
        self.python = python
        self._argv: list[str] = []
        self._version = ""
        self._installing = asyncio.Lock()

    def _resolve(self) -> tuple[list[str], str]:
        bm = basic_memory_server
        if self.spec.url.startswith(bm.CMD):
            argv = shlex.split(self.spec.url.removeprefix(bm.CMD))
            return argv, bm.installed_version(argv)
        version = self.spec.url.removeprefix(bm.PYPI)
        return [bm.install(version, self.root, self.python)], version

    async def argv(self) -> list[str]:
        """The ``basic-memory`` command (installing it on first use)."""
        async with self._installing:
            if not self._argv:
                self._argv, self._version = await asyncio.to_thread(self._resolve)
        return self._argv

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[PlatformClient]:
        argv = await self.argv()
        folder = tempfile.mkdtemp(prefix="benchledger-basic-memory-")
        try:
            async with basic_memory_server.serve(argv, folder) as url:
                client = BasicMemory(url, folder, pool_size=self.pool_size, version=self._version)
                await client.ensure_project(SHARED)
                yield client
        finally:
            shutil.rmtree(folder, ignore_errors=True)

    def record(self, described: Description) -> PlatformRecord:
        """The PyPI package and version (or the given command, redacted) and what it said."""
        rec = super().record(described)
        cmd = basic_memory_server.CMD
        if self.spec.url.startswith(cmd):
            given = redact_command(self.spec.url.removeprefix(cmd))
            rec = PlatformRecord(**{**msgspec.structs.asdict(rec), "url": cmd + given})
        return rec


def provisioner(
    spec: PlatformSpec,
    *,
    pool_size: int,
    admin_key: str = "",
    pool_base: str = "",
    reset_cmd: str = "",
    k: int = 1,
    pack: str = "",
    settings: Settings | None = None,
    options: Mapping[str, str] | None = None,
) -> Provisioner:
    """The provisioner of the platform that writes ``spec.kind`` (``pack``: the embedded
    platform's seed; ``settings``: the command line's; ``options``: the platform's own)."""
    provision = Provision(pool_size, dict(options or {}), admin_key, pool_base, reset_cmd, k, pack,
                          settings if settings is not None else Settings())  # fmt: skip
    try:
        platform = of_record(spec.kind)
    except LookupError as exc:
        raise ValueError(str(exc)) from None
    return platform.provisioner(spec, provision)
