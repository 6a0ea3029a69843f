"""Deterministic ids: a per-database counter per kind, hashed into the peer's id forms.

Two fresh platforms given the same calls in the same order hand out the same ids,
which keeps replays and tests reproducible; the forms match what the peer hands out
(32 hex characters for records and changesets, ``dps_`` session handles, ``kp_`` page
ids), so a client that checks id shapes cannot tell the difference.
"""

from __future__ import annotations

import hashlib
from typing import Final

HANDLE_PREFIX: Final = "dps_"
PAGE_PREFIX: Final = "kp_"
EVENT_PREFIX: Final = "evt_"


def hex_id(kind: str, n: int) -> str:
    """The ``n``-th id of ``kind``: 32 lower-case hex characters."""
    return hashlib.sha256(f"refplatform:{kind}:{n}".encode()).hexdigest()[:32]


def session_handle(n: int) -> str:
    """The ``n``-th session handle, ``dps_`` + 32 hex (as the peer's ``platform_info`` mints)."""
    return HANDLE_PREFIX + hex_id("session", n)


def page_id(n: int) -> str:
    """The ``n``-th created knowledge page id, ``kp_`` + a UUID-shaped hex string."""
    h = hex_id("page", n)
    return f"{PAGE_PREFIX}{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:32]}"


def event_id(n: int) -> str:
    """The ``n``-th audit event id."""
    return EVENT_PREFIX + hex_id("audit", n)[:24]


def is_handle(value: object) -> bool:
    """Whether ``value`` has the form of a session handle (the peer strips only those)."""
    return isinstance(value, str) and value.startswith(HANDLE_PREFIX) and len(value) > 4
