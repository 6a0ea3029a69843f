"""The embedded reference platform in this process: the harness's one refplatform import."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any


@functools.cache
def _pack(path: str) -> Any:
    from refplatform.packs import default_pack, load_pack

    return load_pack(path) if path else default_pack()


def check_pack(path: str) -> str:
    """Load the seed pack at ``path`` (benchledger's own if empty); ValueError if unusable."""
    from refplatform.errors import PlatformError

    try:
        return str(_pack(path).pack_hash)
    except PlatformError as exc:
        raise ValueError(f"--pack {path}: {exc}") from None


@contextmanager
def in_thread(pool_size: int, admin_key: str, pool_base: str, pack: str = "") -> Iterator[str]:
    """A fresh refplatform on a loopback port, served from a thread; yields its base URL."""
    from refplatform.server import RunningPlatform

    running = RunningPlatform(
        pool_size=pool_size, admin_key=admin_key, pool_base=pool_base, pack=_pack(pack)
    )
    try:
        yield running.url
    finally:
        running.stop()
