"""Run ids, stream names and protocol ids: the one grammar, printable and path-safe.

A name is shown on consoles, used as a file or zip entry name (an Inspect sample, an
export) and compared bytewise, so it holds no control character, no space, no ``..``
part and no path separator but the stream's own ``/``: each part starts with a letter or
digit and goes on with letters, digits and ``. _ : -``, at most 128 characters
(docs/ledger-format.md, "Names"). A stream is its run id, or the run id and further parts
joined by ``/`` (``RUN/PROTOCOL/ATTEMPT``). Checked where a stream is written, where a
peer's ids are imported, and by the verifier (a bundle's names are a forger's to choose).
"""

from __future__ import annotations

import re

_PART = r"[A-Za-z0-9][A-Za-z0-9._:-]{0,127}"
_NAME = re.compile(_PART)
_STREAM = re.compile(rf"{_PART}(?:/{_PART})*")


def is_name(text: str) -> bool:
    """Whether ``text`` is a valid run id or protocol id (one part)."""
    return _NAME.fullmatch(text) is not None


def is_stream_name(text: str) -> bool:
    """Whether ``text`` is a valid stream name (parts joined by ``/``)."""
    return _STREAM.fullmatch(text) is not None


RULE = (
    "must start with a letter or digit and use only letters, digits and . _ : - "
    "(at most 128 characters)"
)
