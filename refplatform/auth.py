"""Who is calling: API keys to identities, as the peer's S5 arm configures them.

The arm (``bench/config/platform.bench.a3.yaml``) declares one admin key named
``bench-admin`` and a pool of keys ``<admin key>-NNN`` named ``bench-agent-NNN``, every
one with the ``admin`` role. An API-key identity's user id is ``apikey:<name>`` and its
email ``<name>@apikey.local``. Keys arrive as ``X-API-Key: KEY`` or
``Authorization: Bearer KEY`` (the former wins when both are sent, as in the peer).
"""

from __future__ import annotations

import hmac
from collections.abc import Mapping
from typing import Final, NamedTuple

ADMIN_NAME: Final = "bench-admin"
ADMIN_ROLE: Final = "admin"
ADMIN_PERSONA: Final = "admin"
DEFAULT_PERSONA: Final = "default"
# Four digits: a LoCoMo file asks one identity per question (locomo10.json: 1,986). The
# peer's own pools are three-digit (``-001``); ``pool_key`` pads to three, so both read.
MAX_POOL: Final = 9999


class Identity(NamedTuple):
    """An authenticated caller."""

    name: str  # the key's name, e.g. bench-agent-001
    admin: bool  # holds the admin role (admin REST, apply_knowledge, page writes)
    pool_index: int  # 1-based; 0 for the admin key

    @property
    def user_id(self) -> str:
        return f"apikey:{self.name}"

    @property
    def email(self) -> str:
        return f"{self.name}@apikey.local"

    @property
    def roles(self) -> list[str]:
        return [ADMIN_ROLE] if self.admin else []

    @property
    def persona(self) -> str:
        # Every role-holder of the arm resolves to the persona named ``admin``.
        return ADMIN_PERSONA if self.admin else DEFAULT_PERSONA


def pool_name(index: int) -> str:
    """The key name of pool identity ``index`` (1-based)."""
    return f"bench-agent-{index:03d}"


def pool_email(index: int) -> str:
    """The email of pool identity ``index``: ``bench-agent-NNN@apikey.local``."""
    return f"{pool_name(index)}@apikey.local"


def pool_key(base: str, index: int) -> str:
    """The API key of pool identity ``index``: ``<base>-NNN``."""
    return f"{base}-{index:03d}"


def presented_key(headers: Mapping[str, str]) -> str:
    """The key a request presents (``X-API-Key`` first, then a Bearer token), or ``""``."""
    lowered = {k.lower(): v for k, v in headers.items()}
    key = lowered.get("x-api-key", "").strip()
    if key:
        return key
    auth = lowered.get("authorization", "")
    return auth[7:].strip() if auth.lower().startswith("bearer ") else ""


class Keyring:
    """Maps API keys to identities; compares keys in constant time."""

    def __init__(
        self, admin_key: str, pool_base: str, pool_size: int, *, pool_admin: bool = True
    ) -> None:
        if not admin_key or not pool_base:
            raise ValueError("the admin key and the pool base must not be empty")
        if not 0 < pool_size <= MAX_POOL:
            raise ValueError(f"the pool holds 1 to {MAX_POOL} identities")
        self.admin_key = admin_key
        self.pool_base = pool_base
        self.pool_size = pool_size
        # The S5 arm gives every pool key the admin role; False models a plain analyst
        # deployment (tests use it to check the admin-only paths).
        self.pool_admin = pool_admin

    def identify(self, headers: Mapping[str, str]) -> Identity | None:
        """The identity behind a request's headers, or None (missing or unknown key)."""
        return self.identify_key(presented_key(headers))

    def identify_key(self, key: str) -> Identity | None:
        """The identity of one API key, or None."""
        if not key:
            return None
        if hmac.compare_digest(key.encode(), self.admin_key.encode()):
            return Identity(ADMIN_NAME, True, 0)
        # The suffix picks the one key the whole key is then compared with, in constant
        # time. ASCII digits only: ``str.isdigit`` also takes superscripts (``int`` raises)
        # and other scripts' digits (``int`` reads "٠٠١" as 1, another identity's key).
        suffix = key.rpartition("-")[2]
        if 3 <= len(suffix) <= 4 and suffix.isascii() and suffix.isdigit():
            index = int(suffix)
            if 1 <= index <= self.pool_size:
                expected = pool_key(self.pool_base, index)
                if hmac.compare_digest(key.encode(), expected.encode()):
                    return Identity(pool_name(index), self.pool_admin, index)
        return None
