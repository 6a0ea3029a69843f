"""The ledger: events, canonical bytes, the chain checker, Merkle roots, storage, bundles,
the verified door, signed seals and redaction.

Imports nothing else of benchledger.
"""

from benchledger.ledger.backend import Store
from benchledger.ledger.chain import Record, genesis, link_hash
from benchledger.ledger.errors import (
    AppendConflict,
    BundleConflict,
    DamagedEvent,
    LedgerError,
    RunSealed,
    UnknownRun,
    UnusableInput,
)
from benchledger.ledger.ledger import Ledger, RunInfo, StreamWriter
from benchledger.ledger.store import open_store
from benchledger.ledger.verdict import Failure, Fault

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
