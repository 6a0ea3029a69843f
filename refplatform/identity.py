"""Who is calling: one admin key and a pool of ``<base>-NNN`` keys."""

from __future__ import annotations

import hmac
from typing import NamedTuple

ADMIN_EMAIL = "admin@apikey.local"


class Identity(NamedTuple):
    email: str
    admin: bool
    pool_index: int  # 1-based; 0 for the admin


def pool_key(base: str, index: int) -> str:
    """The API key of pool identity ``index`` (1-based)."""
    return f"{base}-{index:03d}"


def pool_email(index: int) -> str:
    return f"bench-agent-{index:03d}@apikey.local"


class Keyring:
    """Maps bearer keys to identities; compares keys in constant time."""

    def __init__(self, admin_key: str, pool_base: str, pool_size: int) -> None:
        if not admin_key or not pool_base:
            raise ValueError("the admin key and the pool base must not be empty")
        if not 0 < pool_size <= 999:
            raise ValueError("the pool holds 1 to 999 identities")
        self.admin_key = admin_key
        self.pool_base = pool_base
        self.pool_size = pool_size

    def identify(self, authorization: str | None) -> Identity | None:
        """The identity behind an ``Authorization: Bearer KEY`` header, or None."""
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        key = authorization[7:].strip()
        if hmac.compare_digest(key.encode(), self.admin_key.encode()):
            return Identity(ADMIN_EMAIL, True, 0)
        prefix = self.pool_base + "-"
        suffix = key[len(prefix) :]
        if key.startswith(prefix) and len(suffix) == 3 and suffix.isdigit():
            index = int(suffix)
            if 1 <= index <= self.pool_size:
                return Identity(pool_email(index), False, index)
        return None
