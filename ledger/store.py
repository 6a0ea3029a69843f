"""Opening a ledger: ``open_store`` picks the backend by the path or URL it is given.

An SQLite file (``ledger/sqlite.py``) or a ``postgresql://`` database
(``ledger/postgres.py``, imported only then, so other commands never load its driver).
The contract both meet is ``ledger/backend.py`` ``Store``.
"""

from __future__ import annotations

from benchledger.ledger.backend import Store
from benchledger.ledger.errors import UnusableInput
from benchledger.ledger.sqlite import SqliteStore


def open_store(location: str, *, create: bool = True, read_only: bool = False) -> Store:
    """Open a ledger by path or ``postgresql://`` URL; ``create=False`` refuses a missing one.

    ``read_only`` never writes (an SQLite file is opened ``mode=ro``), so a ledger the user
    cannot write is still readable.
    """
    if location.startswith(("postgresql://", "postgres://")):
        from benchledger.ledger.postgres import PostgresStore

        return PostgresStore(location, create=create and not read_only)
    if "://" in location:
        raise UnusableInput(
            location, "unknown ledger URL scheme (use a file path or postgresql://)"
        )
    return SqliteStore(location, create=create, read_only=read_only)
