"""Known secrets out of everything recorded, in any case and in the encodings servers use.

A platform or a model server may echo a key back (an error quoting the bearer token, a
"whoami" answer, a field that stores what it was sent), not always as sent: upper-cased,
base64 (standard or URL-safe, padded or not, alone or inside a longer blob), percent-
encoded, hex, or JSON-escaped. A ``Scrubber`` replaces each of those forms of its secrets
with ``<redacted>`` at the capture boundary, before anything is recorded, graded or shown
to the agent, so live grading, the ledger and a re-derivation all see the same text.

Every form is worked out once, when the scrubber is made (one per client, so once per
run); a value is then checked by one encoding and a substring test per form, and only a
value holding a form is walked and rewritten. Secrets shorter than ``MIN_SECRET`` are
left alone: they would match ordinary text, and could be guessed anyway.
"""

from __future__ import annotations

import base64
import functools
import json
import re
import urllib.parse
from collections.abc import Iterable
from typing import Any, Final, TypeVar

import msgspec

REDACTED: Final = "<redacted>"
MIN_SECRET: Final = 8

T = TypeVar("T")


def _base64_forms(raw: bytes) -> set[str]:
    """``raw`` in base64, standard and URL-safe: whole (padded and not), and the part that
    stays the same wherever it sits inside a longer encoded blob (base64 turns 3 bytes into
    4 characters, so each of the 3 alignments has its own run of whole groups)."""
    out: set[str] = set()
    for encode in (base64.b64encode, base64.urlsafe_b64encode):
        whole = encode(raw).decode()
        out |= {whole, whole.rstrip("=")}
        for offset in range(3):
            groups = (offset + len(raw)) // 3  # 3-byte groups, the first partly padding
            inner = encode(b"\0" * offset + raw).decode()[4 if offset else 0 : 4 * groups]
            if inner:
                out.add(inner)
    return out


def forms(secret: str) -> set[str]:
    """Every form of ``secret`` a scrubber looks for (matched ignoring case)."""
    out: set[str] = set()
    for text in {secret, secret.upper(), secret.lower()}:
        raw = text.encode()
        out |= {
            text,
            urllib.parse.quote(text, safe=""),
            urllib.parse.quote_plus(text),
            "".join(f"%{b:02x}" for b in raw),  # every byte percent-encoded
            raw.hex(),
            json.dumps(text)[1:-1],
            json.dumps(text, ensure_ascii=False)[1:-1],
            "".join(f"\\u{ord(c):04x}" for c in text),  # every character JSON-escaped
            text.replace("/", "\\/"),
        }
        out |= _base64_forms(raw)
    return {f for f in out if len(f) >= MIN_SECRET // 2}


class Scrubber:
    """Replaces every form of a few known secrets with ``<redacted>``."""

    def __init__(self, secrets: Iterable[str]) -> None:
        found: set[str] = set()
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET:
                found |= forms(secret)
        # Longest first: a whole encoding is replaced before a part of it could be.
        ordered = sorted(found, key=lambda f: (-len(f), f))
        self._pattern = (
            re.compile("|".join(map(re.escape, ordered)), re.IGNORECASE) if ordered else None
        )
        # What a substring test looks for: each form lower-cased, and as it reads inside a
        # JSON string (a form holding a backslash or a quote is escaped there).
        needles = {f.lower() for f in ordered}
        needles |= {json.dumps(f)[1:-1].lower() for f in ordered}
        self._needles = tuple(sorted(needles, key=len))

    def __bool__(self) -> bool:
        return self._pattern is not None

    def _holds(self, lowered: str) -> bool:
        return any(n in lowered for n in self._needles)

    def text(self, text: str) -> str:
        """``text`` with every form of every secret replaced."""
        if self._pattern is None or not self._holds(text.lower()):
            return text
        return self._pattern.sub(REDACTED, text)

    def value(self, value: T) -> T:
        """A JSON value (dicts, lists, tuples, strings, numbers) with every string scrubbed;
        ``value`` itself, untouched, when no string holds a secret (the common case)."""
        if self._pattern is None:
            return value
        try:
            encoded = msgspec.json.encode(value).decode()
        except (TypeError, msgspec.EncodeError):
            encoded = repr(value)
        if not self._holds(encoded.lower()):
            return value
        walked: T = self._walk(value)  # the same shape, strings scrubbed
        return walked

    def _walk(self, value: Any) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self._walk(k): self._walk(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self._walk(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._walk(v) for v in value)
        return value


@functools.lru_cache(maxsize=64)
def scrubber(*secrets: str) -> Scrubber:
    """The scrubber for these secrets, made once (its forms are worked out once)."""
    return Scrubber(secrets)
