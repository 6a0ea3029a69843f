"""One way to reach a platform: parse ``--platform`` once, start or connect, hand out clients.

``embedded`` (alias ``embedded:thread``) serves a fresh refplatform in this process;
``embedded:process`` serves it as a child process (``python -m refplatform serve``),
so it runs on another core; an ``http(s)://`` URL is an external platform, shared by
every pass, with ``--reset-cmd`` run between passes. Every runtime an embedded
provisioner hands out starts from a fresh platform state.
"""

from __future__ import annotations

import asyncio
import os
import re
import secrets
import signal
import subprocess
import sys
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import NamedTuple

from harness.errors import HarnessError
from harness.platforms import embedded
from harness.platforms.base import Description, PlatformClient
from harness.platforms.mcp_data_platform import McpDataPlatform
from ledger.events import PlatformRecord

KINDS = ("embedded", "embedded:thread", "embedded:process")
STARTUP_TIMEOUT_S = 60.0


class PlatformStartFailed(HarnessError):
    """The embedded platform did not start (its first line is kept as evidence)."""


class ResetFailed(HarnessError):
    """``--reset-cmd`` failed between passes: later passes would see earlier state."""

    def __init__(self, code: int, stderr: str) -> None:
        super().__init__(f"--reset-cmd exited {code}: {stderr.strip()[:200]}")
        self.code = code
        self.stderr = stderr


class PlatformSpec(NamedTuple):
    """A parsed ``--platform``: ``kind`` is embedded, process or external."""

    kind: str
    url: str = ""

    @property
    def label(self) -> str:
        """How the platform is named in a run record (never with a key)."""
        return self.url or ("embedded:process" if self.kind == "process" else "embedded")


def parse_platform(text: str) -> PlatformSpec:
    """``embedded[:thread|:process]`` or an http(s):// URL; ValueError says what is accepted."""
    if text in ("embedded", "embedded:thread"):
        return PlatformSpec("embedded")
    if text == "embedded:process":
        return PlatformSpec("process")
    if text.startswith(("http://", "https://")):
        return PlatformSpec("external", text.rstrip("/"))
    raise ValueError(f"--platform {text!r}: use embedded, embedded:process or an http(s):// URL")


class Provisioner(ABC):
    """Hands out platform clients for a run; ``fresh_state`` says each runtime starts clean."""

    fresh_state: bool

    def __init__(self, spec: PlatformSpec, *, pool_size: int) -> None:
        self.spec = spec
        self.pool_size = pool_size

    @abstractmethod
    def runtime(self) -> AbstractAsyncContextManager[PlatformClient]:
        """A client for one scope (a pass, or a unit), closed (and stopped) on exit."""

    def between_passes(self) -> None:  # noqa: B027 - a hook: most platforms need nothing
        """What must happen before the next pass reuses the platform (nothing by default)."""

    @property
    def coupled(self) -> bool:
        """Whether passes share platform state (so one pass can answer another's questions)."""
        return False

    def record(self, described: Description) -> PlatformRecord:
        """The run record's platform entry: kind, URL, and what the platform said it is."""
        return PlatformRecord(
            kind=self.spec.kind,
            url=self.spec.url,
            name=described.name,
            version=described.version,
            stages=list(described.stages),
            sinks=list(described.sinks),
        )


class EmbeddedProvisioner(Provisioner):
    """A fresh refplatform per runtime, in this process or as a child process."""

    fresh_state = True

    def __init__(self, spec: PlatformSpec, *, pool_size: int, pack: str = "") -> None:
        super().__init__(spec, pool_size=pool_size)
        self.pack = os.path.abspath(pack) if pack else ""
        embedded.check_pack(self.pack)  # a broken pack is refused before anything starts
        # Per-run keys: never recorded, gone with the platform.
        self.admin_key = f"bl-admin-{secrets.token_hex(8)}"
        self.pool_base = f"bl-key-{secrets.token_hex(4)}"

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[PlatformClient]:
        if self.spec.kind == "process":
            async with self._child() as url, self._client(url) as client:
                yield client
            return
        with embedded.in_thread(self.pool_size, self.admin_key, self.pool_base, self.pack) as url:
            async with self._client(url) as client:
                yield client

    @asynccontextmanager
    async def _client(self, url: str) -> AsyncIterator[McpDataPlatform]:
        client = McpDataPlatform(
            url, admin_key=self.admin_key, pool_base=self.pool_base, pool_size=self.pool_size
        )
        try:
            yield client
        finally:
            await client.aclose()

    @asynccontextmanager
    async def _child(self) -> AsyncIterator[str]:
        cmd = [sys.executable, "-m", "refplatform", "serve", "--port", "0",
               "--pool", str(self.pool_size), "--admin-key", self.admin_key,
               "--pool-base", self.pool_base]  # fmt: skip
        cmd += ["--pack", self.pack] if self.pack else []
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
    ) -> None:
        super().__init__(spec, pool_size=pool_size)
        self.admin_key = admin_key
        self.pool_base = pool_base
        self.reset_cmd = reset_cmd
        self.k = k

    @asynccontextmanager
    async def runtime(self) -> AsyncIterator[PlatformClient]:
        client = McpDataPlatform(
            self.spec.url,
            admin_key=self.admin_key,
            pool_base=self.pool_base,
            pool_size=self.pool_size,
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
            raise ResetFailed(done.returncode, done.stderr)

    @property
    def coupled(self) -> bool:
        return self.k > 1 and not self.reset_cmd


def provisioner(
    spec: PlatformSpec,
    *,
    pool_size: int,
    admin_key: str = "",
    pool_base: str = "",
    reset_cmd: str = "",
    k: int = 1,
    pack: str = "",
) -> Provisioner:
    """The provisioner for a parsed ``--platform`` (``pack``: the embedded platform's seed)."""
    if spec.kind == "external":
        return ExternalProvisioner(
            spec,
            pool_size=pool_size,
            admin_key=admin_key,
            pool_base=pool_base,
            reset_cmd=reset_cmd,
            k=k,
        )
    return EmbeddedProvisioner(spec, pool_size=pool_size, pack=pack)
