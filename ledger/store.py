"""Opening a ledger: ``open_store`` picks the backend by the path or URL it is given.

Backends are registered by name in ``LEDGERS`` (entry-point group ``benchledger.ledgers``):
a path (no ``://``) opens the ``sqlite`` backend (``ledger/sqlite.py``), a URL the backend
registered under its scheme (``postgresql://`` and ``postgres://``: ``ledger/postgres.py``,
imported only then, so other commands never load its driver). A backend is one callable,
``open(location, create=, read_only=)`` returning a ``Store``; the contract every backend
meets is ``ledger/backend.py`` ``Store`` (tests/test_store_contract.py checks ours).
"""

from __future__ import annotations

from typing import Final, Protocol, cast

from benchledger.ledger.backend import Store
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.registry import Registry, UnknownName


class Backend(Protocol):
    """Opens a ledger at ``location`` (``create=False`` refuses a missing one; ``read_only``
    never writes); UnusableInput, in one line, when it cannot."""

    def __call__(self, location: str, *, create: bool, read_only: bool) -> Store: ...


def _backend(obj: object) -> Backend:
    if not callable(obj):
        raise TypeError(f"is a {type(obj).__name__}, not a callable that opens a Store")
    return cast(Backend, obj)


LEDGERS: Final = Registry[Backend]("ledger backend", "benchledger.ledgers", check=_backend)
FILE: Final = "sqlite"  # the backend of a location that is a path, not a URL


def open_sqlite(location: str, *, create: bool, read_only: bool) -> Store:
    """An SQLite ledger file (:memory: for one in memory)."""
    from benchledger.ledger.sqlite import SqliteStore

    return SqliteStore(location, create=create, read_only=read_only)


def open_postgres(location: str, *, create: bool, read_only: bool) -> Store:
    """A ledger in a PostgreSQL database: postgresql://user@host/db[?schema=NAME]."""
    from benchledger.ledger.postgres import PostgresStore

    return PostgresStore(location, create=create and not read_only)


def _ours(name: str, backend: Backend, attr: str) -> None:
    LEDGERS.register(name, lambda: backend, where=f"{__name__}:{attr}")


_ours(FILE, open_sqlite, "open_sqlite")
_ours("postgresql", open_postgres, "open_postgres")
_ours("postgres", open_postgres, "open_postgres")


def open_store(location: str, *, create: bool = True, read_only: bool = False) -> Store:
    """Open a ledger by path or URL (``postgresql://``, or a scheme a plugin registers);
    ``create=False`` refuses a missing one.

    ``read_only`` never writes (an SQLite file is opened ``mode=ro``), so a ledger the user
    cannot write is still readable.
    """
    scheme, sep, _ = location.partition("://")
    name = scheme if sep else FILE
    try:
        backend = LEDGERS.lookup(name)
    except UnknownName as exc:  # only the scheme: the rest of a URL may carry a password
        known = ", ".join(f"{n}://" for n in exc.known if n != FILE)
        raise UnusableInput(
            f"ledger {scheme}://...",
            f"unknown ledger URL scheme (use a file path or one of: {known})",
        ) from None
    return backend(location, create=create, read_only=read_only)
