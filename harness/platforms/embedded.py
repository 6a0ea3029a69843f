"""The embedded reference platform in this process: the harness's one refplatform import."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def in_thread(pool_size: int, admin_key: str, pool_base: str) -> Iterator[str]:
    """A fresh refplatform on a loopback port, served from a thread; yields its base URL."""
    from refplatform.server import RunningPlatform

    running = RunningPlatform(pool_size=pool_size, admin_key=admin_key, pool_base=pool_base)
    try:
        yield running.url
    finally:
        running.stop()
