"""What to run and how to grade it: protocol and case schemas, loaders, hashes, graders."""

from __future__ import annotations

import os

from benchledger.protocols.cases import Case, CaseSet, load_cases
from benchledger.protocols.errors import InvalidInput, Problem, ProtocolError
from benchledger.protocols.hashing import set_hash
from benchledger.protocols.loader import load
from benchledger.protocols.schema import Grading, Protocol, ProtocolSet

DATA_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
LIFECYCLE_DIR = os.path.join(DATA_DIR, "lifecycle")
# The same protocols asked in other words (protocols.paraphrase; docs/protocols.md).
LIFECYCLE_PARAPHRASE_DIR = os.path.join(DATA_DIR, "lifecycle-paraphrase")
PACK_DIR = os.path.join(DATA_DIR, "pack")  # the seed pack the committed set was made on
CASES_DEV = os.path.join(DATA_DIR, "provenance", "dev", "cases.jsonl")
CASES_PUBLIC_V1 = os.path.join(DATA_DIR, "provenance", "public", "v1", "cases.jsonl")

__all__ = [
    "CASES_DEV",
    "CASES_PUBLIC_V1",
    "LIFECYCLE_DIR",
    "LIFECYCLE_PARAPHRASE_DIR",
    "PACK_DIR",
    "Case",
    "CaseSet",
    "Grading",
    "InvalidInput",
    "Problem",
    "Protocol",
    "ProtocolError",
    "ProtocolSet",
    "load",
    "load_cases",
    "set_hash",
]
