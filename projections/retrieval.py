"""What a recorded search returned, in rank order, and the retrieval metrics over it.

One rule for every platform, derived from the result's own shape rather than from a list
of platforms: the hits of a search result are the objects of its innermost arrays of
objects, in document order (refplatform's ``groups[].hits[]``, server-memory's
``entities[]``, basic-memory's ``results[]``); with no array of objects, the strings of the
innermost arrays of strings; JSON with neither holds no hit; an answer that is not JSON
(plain text) is a single hit. Each hit is
kept as its canonical JSON text, so a matcher reads every field the platform returned.

Ranks are 1-based; ``None`` means the thing looked for was not among the hits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from benchledger.ledger.codec import TooDeep, check_depth

KS: Final = (1, 5, 10)  # the recall@k cut-offs every suite reports


def _innermost(value: Any, out: list[Any], kind: type) -> bool:
    """Append to ``out`` the ``kind`` elements of the innermost arrays holding any under
    ``value``; whether any were found (so an enclosing array is not innermost)."""
    children = value.values() if isinstance(value, dict) else value
    if not isinstance(value, dict | list):
        return False
    deeper: list[Any] = []
    found = False
    for v in children:
        found = _innermost(v, deeper, kind) or found
    if found:
        out.extend(deeper)
        return True
    if isinstance(value, list) and any(isinstance(v, kind) for v in value):
        out.extend(v for v in value if isinstance(v, kind))
        return True
    return False


def _parse(text: str) -> Any:
    """The first JSON value of ``text`` (enrichment may follow it), or None."""
    stripped = text.lstrip()
    if not stripped or stripped[0] not in "[{":
        return None
    try:
        check_depth(stripped.encode(), "a search result")
        value, _ = json.JSONDecoder().raw_decode(stripped)
    except (ValueError, TooDeep):
        return None
    return value


def _at(value: Any, path: str) -> list[Any] | None:
    """The array at the dot-separated ``path`` of ``value`` (``$``: ``value`` itself)."""
    for key in [] if path == "$" else path.split("."):
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, list) else None


def hits(result_text: str, at: str = "") -> list[str]:
    """The hits of one recorded search result, best first, each as text (see the module).

    ``at``: where the platform's vocabulary says its hits are, a dot-separated JSON path to
    the array of them (``$``: the answer is that array); "" reads them by the rule above.
    An answer with no array there holds no hit."""
    value = _parse(result_text)
    if value is None:
        return [result_text] if result_text.strip() and not at else []
    found: list[Any] = []
    if at:
        return [_hit_text(h) for h in _at(value, at) or []]
    # Arrays of objects are the hits; arrays of strings only when there are no objects
    # (a hit's own string lists, such as its entity URNs, are fields, not hits).
    if not _innermost(value, found, dict):
        _innermost(value, found, str)
    return [_hit_text(h) for h in found]


def _hit_text(hit: Any) -> str:
    return hit if isinstance(hit, str) else json.dumps(hit, sort_keys=True, ensure_ascii=False)


def rank(ranked: Sequence[str], match: Callable[[str], bool]) -> int | None:
    """The 1-based rank of the first hit ``match`` accepts, None when none does."""
    for i, hit in enumerate(ranked, 1):
        if match(hit):
            return i
    return None


def recall_at(ranks: Iterable[int | None], k: int) -> float | None:
    """The share of ranks at or above ``k`` (None for no ranks at all)."""
    seen = list(ranks)
    if not seen:
        return None
    return sum(1 for r in seen if r is not None and r <= k) / len(seen)


def mrr(ranks: Iterable[int | None]) -> float | None:
    """The mean reciprocal rank (a miss counts 0; None for no ranks at all)."""
    seen = list(ranks)
    if not seen:
        return None
    return sum(1.0 / r for r in seen if r is not None) / len(seen)


__all__ = ["KS", "hits", "mrr", "rank", "recall_at"]
