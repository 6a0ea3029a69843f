"""Reading a peer folder: only real files, never through a symbolic link.

``import-peer`` seals what it reads into a run, so a symlink in a peer folder (an arm's
snapshot pointing at any JSON file the importing user can read) would seal that file into
a published bundle. Every peer file is read here: a regular file, opened without following
a link, with no symlink on its way down from the folder ``import-peer`` was given (or, for
the files a flat layout keeps beside it, from the folder both lie in); its JSON bounded in
depth as the ledger's is (ledger/codec.py).
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
from collections.abc import Iterator
from contextvars import ContextVar
from typing import Any

from benchledger.ledger import UnusableInput
from benchledger.ledger.codec import check_depth

# The paths import-peer was given (absolute): the user's own choice, links or not.
_GIVEN: ContextVar[tuple[str, ...]] = ContextVar("peer_given", default=())


@contextlib.contextmanager
def peer_root(*given: str) -> Iterator[None]:
    """Within it, peer files are checked from the paths import-peer was given down (an outer
    call wins: the command line names what the user gave, not what was found beside it)."""
    if _GIVEN.get():
        yield
        return
    token = _GIVEN.set(tuple(os.path.abspath(g) for g in given))
    try:
        yield
    finally:
        _GIVEN.reset(token)


def check_path(path: str) -> None:
    """UnusableInput when ``path`` is, or lies under, a symlink below what was given: the
    given folder holding it, else the folder it shares with the first path given."""
    full = os.path.abspath(path)
    given = _GIVEN.get()
    inside = [g for g in given if full == g or full.startswith(g.rstrip(os.sep) + os.sep)]
    if inside:
        base = max(inside, key=len)
    else:
        first = given[0] if given else full
        folder = first if os.path.isdir(first) else os.path.dirname(first)
        base = os.path.commonpath([full, folder])
    at = base
    for part in os.path.relpath(full, base).split(os.sep):
        if part in ("", "."):
            continue
        at = os.path.join(at, part)
        if os.path.islink(at):
            raise UnusableInput(
                path, f"{at} is a symbolic link; import-peer reads only real files in the folder"
            )


def peer_bytes(path: str, limit: int | None = None) -> bytes:
    """The bytes of the real file ``path`` (at most ``limit`` + 1 of them); UnusableInput
    when it is a symlink, under one, or no regular file; OSError when it cannot be read."""
    check_path(path)
    given = os.path.abspath(path) in _GIVEN.get()  # a file named by the user may be a link
    if not stat.S_ISREG((os.stat if given else os.lstat)(path).st_mode):  # a FIFO would block
        raise UnusableInput(path, "not a regular file; import-peer reads only real files")
    fd = os.open(path, os.O_RDONLY | (0 if given else getattr(os, "O_NOFOLLOW", 0)))
    with os.fdopen(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UnusableInput(path, "not a regular file; import-peer reads only real files")
        return fh.read() if limit is None else fh.read(limit + 1)


def peer_text(path: str) -> str:
    """The UTF-8 text of the real file ``path`` (UnicodeDecodeError, OSError as reading does)."""
    return peer_bytes(path).decode("utf-8")


def peer_json(path: str) -> Any:
    """The JSON in the real file ``path``, nested no deeper than the ledger allows.

    ValueError when it is not JSON, OSError when unreadable, UnusableInput as ``peer_bytes``
    or when nested too deep (one line naming the file, before a decoder could overflow).
    """
    data = peer_bytes(path)
    check_depth(data, where=path)
    return json.loads(data.decode("utf-8"))
