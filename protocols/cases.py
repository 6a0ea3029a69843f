"""Provenance-lane cases: schema, loader and validator for JSONL case files.

The format is docs/protocols.md, "Provenance cases".

A case is one JSON object per line: ``{id, category, prime[], prompt, expected_sources[]}``.
Every problem is reported with its file and line, all in one pass.
"""

from __future__ import annotations

import os
import re
from typing import Any, Final

import blake3
import msgspec

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.names import RULE, is_name
from benchledger.protocols.errors import InvalidInput, Problem

CATEGORIES: Final = ("pack_axiom", "vault_recall", "teaching", "mixed")
SOURCE_KINDS: Final = ("pack", "vault", "teaching")
CASES_FILE: Final = "cases.jsonl"
_FIELDS: Final = ("id", "category", "prime", "prompt", "expected_sources")
# The source kind a category is about must be among its expected sources.
_CATEGORY_KIND: Final = {"pack_axiom": "pack", "vault_recall": "vault", "teaching": "teaching"}
SET_DOMAIN: Final = b"benchledger:case-set:v1\x00"
# The answer convention: after ``FINAL ANSWER:``, a ``SOURCES:`` line lists the refs relied on.
_SOURCES_LINE: Final = re.compile(r"(?im)^[\s*_>#-]*sources\s*:[*_]*\s*(.*)$")
_NO_SOURCES: Final = frozenset({"", "none", "n/a", "-", "nothing"})


class Case(msgspec.Struct, frozen=True, omit_defaults=True, forbid_unknown_fields=True):
    """One provenance case: prime prompts, then the scored prompt and the sources it needs."""

    id: str
    category: str
    prompt: str
    expected_sources: tuple[str, ...]
    prime: tuple[str, ...] = ()


class CaseSet(msgspec.Struct, frozen=True):
    cases: tuple[Case, ...]
    file: str


def _check(row: Any, file: str, line: int) -> list[Problem]:
    def bad(field: str, message: str) -> Problem:
        return Problem(file, line, field, message)

    if not isinstance(row, dict):
        return [bad("", "each line must be a JSON object")]
    problems = [
        bad(k, f"unknown field (known: {', '.join(_FIELDS)})") for k in row if k not in _FIELDS
    ]
    for key in ("id", "prompt"):
        value = row.get(key)
        if not isinstance(value, str) or not value.strip():
            problems.append(bad(key, "is required and must be non-empty text"))
    cid = row.get("id")
    if isinstance(cid, str) and cid.strip() and not is_name(cid):
        problems.append(bad("id", f"{cid!r} {RULE}: it names the unit's stream"))
    category = row.get("category")
    if category not in CATEGORIES:
        problems.append(
            bad("category", f"must be one of {', '.join(CATEGORIES)}, got {category!r}")
        )
    prime = row.get("prime", [])
    if not isinstance(prime, list) or not all(isinstance(p, str) and p.strip() for p in prime):
        problems.append(bad("prime", "must be a list of non-empty prompts"))
        prime = []
    kinds = row.get("expected_sources")
    if not isinstance(kinds, list) or not kinds:
        problems.append(bad("expected_sources", "must be a non-empty list of source kinds"))
        return problems
    unknown = [k for k in kinds if k not in SOURCE_KINDS]
    if unknown:
        problems.append(
            bad(
                "expected_sources",
                f"unknown kind {unknown[0]!r} (known: {', '.join(SOURCE_KINDS)})",
            )
        )
    if len(set(map(str, kinds))) != len(kinds):
        problems.append(bad("expected_sources", "lists a kind twice"))
    want = _CATEGORY_KIND.get(str(category))
    if want and want not in kinds:
        problems.append(bad("expected_sources", f"a {category} case must expect {want!r}"))
    if category == "mixed" and len(set(map(str, kinds))) < 2:
        problems.append(bad("expected_sources", "a mixed case must expect at least two kinds"))
    if ("vault" in kinds or "teaching" in kinds) and not prime:
        problems.append(
            bad("prime", "vault and teaching sources need prime prompts to create them")
        )
    return problems


def case_set_hash(cases: tuple[Case, ...] | list[Case]) -> str:
    """blake3 of the canonical JSON of the cases sorted by id, domain-separated, hex."""
    data = canonical_json(msgspec.to_builtins(sorted(cases, key=lambda c: c.id)))
    return blake3.blake3(SET_DOMAIN + data).hexdigest()


def _split_refs(text: str) -> list[str]:
    # Commas and semicolons separate refs, except inside brackets: a dataset URN is
    # ``urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.orders,PROD)``.
    parts, depth, start = [], 0, 0
    for i, ch in enumerate(text):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth = max(0, depth - 1)
        elif ch in ",;" and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip().rstrip(".").strip().strip("`'\"<>").strip() for p in parts]


def cited_sources(answer: str) -> list[str]:
    """The refs on the last ``SOURCES:`` line of an answer, in order, each once ([] if none)."""
    lines = _SOURCES_LINE.findall(answer)
    if not lines:
        return []
    refs = [r for r in _split_refs(lines[-1]) if r.lower() not in _NO_SOURCES]
    return list(dict.fromkeys(refs))


def resolve(path: str) -> str:
    """A cases file path: the file itself, or ``cases.jsonl`` inside a folder."""
    return os.path.join(path, CASES_FILE) if os.path.isdir(path) else path


def load_cases(path: str) -> CaseSet:
    """Load and validate a JSONL case file (or a folder holding ``cases.jsonl``)."""
    file = resolve(path)
    try:
        with open(file, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except FileNotFoundError:
        raise InvalidInput([Problem(file, None, "", "no such file")]) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise InvalidInput([Problem(file, None, "", f"cannot read: {exc}")]) from None
    problems: list[Problem] = []
    cases: list[Case] = []
    seen: dict[str, int] = {}
    for n, text in enumerate(lines, 1):
        if not text.strip():
            continue
        try:
            row = msgspec.json.decode(text)
        except msgspec.DecodeError as exc:
            problems.append(Problem(file, n, "", f"not valid JSON: {exc}"))
            continue
        found = _check(row, file, n)
        problems.extend(found)
        if found:
            continue
        if row["id"] in seen:
            problems.append(
                Problem(file, n, "id", f"{row['id']!r} is already used on line {seen[row['id']]}")
            )
            continue
        seen[row["id"]] = n
        cases.append(msgspec.convert(row, Case))
    if not problems and not cases:
        problems.append(Problem(file, None, "", "holds no cases; a case set must not be empty"))
    if problems:
        raise InvalidInput(problems)
    return CaseSet(tuple(cases), file)
