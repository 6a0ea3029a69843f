"""The embedded reference platform in this process: the harness's one refplatform import."""

from __future__ import annotations

import contextlib
import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx2

from benchledger.harness.errors import PlatformStartFailed
from benchledger.refplatform.auth import MAX_POOL as MAX_POOL  # identities it holds


@functools.cache
def _pack(path: str) -> Any:
    from benchledger.refplatform.packs import default_pack, load_pack

    return load_pack(path) if path else default_pack()


def check_pack(path: str) -> str:
    """Load the seed pack at ``path`` (benchledger's own if empty); ValueError if unusable."""
    from benchledger.refplatform.errors import PlatformError

    try:
        return str(_pack(path).pack_hash)
    except PlatformError as exc:
        raise ValueError(f"--pack {path}: {exc}") from None


@functools.cache
def _embedder(spec: str) -> Any:
    # One per process and spec: wordllama's weights load once, every platform shares them
    # (an embedder keeps no state between texts).
    from benchledger.refplatform.embedder import parse_spec

    return parse_spec(spec or "lexical")


def check_embedder(spec: str) -> str:
    """Load the embedder ``spec`` names (lexical if empty); its name, or ValueError naming
    ``--embedder`` and what is wrong (an unknown spec, wordllama not installed)."""
    try:
        return str(_embedder(spec).name)
    except ValueError as exc:
        raise ValueError(f"--embedder: {exc}") from None


def preload(path: str) -> None:
    """Start loading the (checked) pack's SQL tables now, while the run starts up: the
    platforms the run starts share them once loaded (``refplatform.toolkits.sql_database``)."""
    from benchledger.refplatform.toolkits.sql import warm

    warm(_pack(path))


@asynccontextmanager
async def in_memory(
    pool_size: int, admin_key: str, pool_base: str, pack: str = "", embedder: str = ""
) -> AsyncIterator[tuple[str, httpx2.AsyncBaseTransport]]:
    """A fresh refplatform served on this event loop without a socket; yields its base URL
    and the HTTP transport that reaches it (MCP and REST as over loopback, see
    ``refplatform.server.InMemoryPlatform``)."""
    from benchledger.refplatform.errors import Unavailable
    from benchledger.refplatform.server import InMemoryPlatform

    served = InMemoryPlatform(
        pool_size=pool_size,
        admin_key=admin_key,
        pool_base=pool_base,
        pack=_pack(pack),
        embedder=_embedder(embedder),
    )
    try:
        platform = await served.__aenter__()
    except Unavailable as exc:  # before anything is served or written: one line, exit 2
        raise PlatformStartFailed(f"the embedded platform did not start: {exc}") from None
    async with contextlib.AsyncExitStack() as stack:
        stack.push_async_exit(served)
        yield platform.url, platform.transport
