"""What an arm's diagnostics look for, found in the arm's own files (docs/peer-studies.md).

Two needles, never stated per family, arm or treatment:

- the **correct source**: the seeded knowledge page that speaks to the planted claim (the
  page sharing the most words with the claim's text, among the pages the arm's store
  snapshots name, else the seeded pages beside ``results/``), and in it the first value of
  a kind the claim states (a month and day, a date, a number): the fact the claim
  contradicts. A page with no value of the claim's kinds is no correct source (the
  claim's correct source is then the world: the refuting query);
- the **reviewer note**: the ``review_notes`` the planted insight (``planted.json``
  ``insight_id``) carries in the records the arm's episodes were returned. An arm none of
  whose episodes was returned that record has no note to find, and none was read.

And the **disclosure** an episode's exposure is read by (``DISCLOSURE``): what every reviewer
note of the peer's plant begins with, which the peer's ``exposure`` searches each raw
transcript for.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable, Iterator
from typing import Any, Final

from benchledger.harness.peer.files import peer_text
from benchledger.harness.peer.layout import beside_results

_MONTHS: Final = (
    "January|February|March|April|May|June|July|August|September|October|November|December"
)
# A value a claim can state: a month and day, an ISO date, or a number standing alone.
_VALUE: Final = re.compile(
    rf"\b(?:{_MONTHS}) [0-9]{{1,2}}\b|\b[0-9]{{4}}-[0-9]{{2}}-[0-9]{{2}}\b"
    r"|(?<![\w.-])[0-9][0-9,]*(?:\.[0-9]+)?(?![\w-])"
)
_WORD: Final = re.compile(r"[a-z][a-z_]{3,}")  # content words: four letters or more
PAGES_SQL: Final = os.path.join("seed", "postgres", "knowledge_pages.sql")
# One seeded page row: ('id', 'slug', 'title', 'summary', ...  ('' escapes a quote).
_PAGE_ROW: Final = re.compile(
    r"\(\s*'(?:[^']|'')*',\s*'(?P<slug>(?:[^']|'')*)',\s*'(?P<title>(?:[^']|'')*)',"
    r"\s*'(?P<summary>(?:[^']|'')*)',",
)
_NOTE_WINDOW: Final = 8192  # how far after the insight's id its review_notes may be
# The peer's plant writes a planted insight's review_notes as "knowledge-pollution study
# plant: <treatment id>", and its pollution_tables.py counts an episode exposed when its raw
# transcript holds this text, wherever it is: a result, an argument, the model's own words
# (docs/peer-studies.md). A fact of the plant, not of a family, arm or treatment.
DISCLOSURE: Final = "knowledge-pollution study plant"


def _kind(value: str) -> str:
    if re.match(rf"(?:{_MONTHS}) ", value):
        return "month-day"
    return "date" if re.fullmatch(r"[0-9]{4}-[0-9]{2}-[0-9]{2}", value) else "number"


def snapshot_pages(snapshots: Iterable[Any]) -> list[dict[str, str]]:
    """The knowledge pages the store snapshots name (slug, title, summary), first seen first."""
    out: dict[str, dict[str, str]] = {}
    for snap in snapshots:
        pages = snap.get("pages") if isinstance(snap, dict) else None
        for page in pages if isinstance(pages, list) else ():
            if isinstance(page, dict) and all(
                isinstance(page.get(k), str) for k in ("slug", "title", "summary")
            ):
                out.setdefault(page["slug"], {k: page[k] for k in ("slug", "title", "summary")})
    return list(out.values())


def seeded_pages(results: str) -> tuple[list[dict[str, str]], str | None]:
    """The seeded pages beside the ``results`` folder above ``results`` and where they were."""
    found = beside_results(results, PAGES_SQL)
    if found is None or not os.path.isfile(found):
        return [], None
    try:
        text = peer_text(found)
    except (OSError, UnicodeDecodeError):
        return [], None
    pages = [
        {k: m[k].replace("''", "'") for k in ("slug", "title", "summary")}
        for m in _PAGE_ROW.finditer(text)
    ]
    return pages, found


def correct_source(claim: str, pages: list[dict[str, str]]) -> dict[str, str] | None:
    """The claim's correct source: {"needle", "page"}; None when no page states a value of
    a kind the claim states (its correct source is then the world)."""
    words = set(_WORD.findall(claim.lower()))
    if not pages or not words:
        return None

    def shared(page: dict[str, str]) -> int:
        return len(words & set(_WORD.findall(f"{page['title']} {page['summary']}".lower())))

    best = max(pages, key=shared)  # the first of equals: pages keep their recorded order
    if shared(best) == 0:
        return None
    kinds = {_kind(v) for v in _VALUE.findall(claim)}
    needle = next((v for v in _VALUE.findall(best["summary"]) if _kind(v) in kinds), None)
    return None if needle is None else {"needle": needle, "page": best["slug"]}


def _records(value: Any) -> Iterator[dict[str, Any]]:
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _records(v)
    elif isinstance(value, list):
        for v in value:
            yield from _records(v)


def review_note(insight_id: str, texts: Iterable[str]) -> str | None:
    """The ``review_notes`` of the record with id ``insight_id`` in the returned texts."""
    if not insight_id:
        return None
    for text in texts:
        if insight_id not in text:
            continue
        try:
            parsed = json.loads(text)
        except ValueError:
            parsed = None
        for record in _records(parsed):
            note = record.get("review_notes")
            if record.get("id") == insight_id and isinstance(note, str) and note:
                return note
        # a record inside prose: the review_notes after the id, within one record's reach
        at = text.find(insight_id)
        window = text[at : at + _NOTE_WINDOW]
        found = re.search(r'"review_notes"\s*:\s*"((?:[^"\\]|\\.)+)"', window)
        if found:
            try:
                return str(json.loads(f'"{found.group(1)}"'))
            except ValueError:
                continue
    return None
