"""The ledger: events, canonical bytes, the chain checker, Merkle roots, storage, bundles,
the verified door, signed seals and redaction.

Imports nothing else of benchledger.
"""

from ledger.backend import Store
from ledger.chain import Record, genesis, link_hash
from ledger.errors import (
    AppendConflict,
    BundleConflict,
    DamagedEvent,
    LedgerError,
    RunSealed,
    UnknownRun,
    UnusableInput,
)
from ledger.ledger import Ledger, RunInfo, StreamWriter
from ledger.store import open_store
from ledger.verdict import Failure, Fault

__all__ = [
    "AppendConflict",
    "BundleConflict",
    "DamagedEvent",
    "Failure",
    "Fault",
    "Ledger",
    "LedgerError",
    "Record",
    "RunInfo",
    "RunSealed",
    "Store",
    "StreamWriter",
    "UnknownRun",
    "UnusableInput",
    "genesis",
    "link_hash",
    "open_store",
]
