"""What a recorded search returned, in rank order, and the retrieval metrics over it.

One rule for every platform, derived from the result's own shape rather than from a list
of platforms: the hits of a search result are the objects of its innermost arrays of
objects, in document order (refplatform's ``groups[].hits[]``, server-memory's
``entities[]``, basic-memory's ``results[]``); with no array of objects, the strings of the
innermost arrays of strings; JSON with neither holds no hit; an answer that is not JSON
(plain text) is a single hit. Each hit is
kept as its canonical JSON text, so a matcher reads every field the platform returned.

A platform whose answers that rule misreads says where its hits are with a ``HitRule``
(a mapping's ``search.hits``, recorded in the run's ``PlatformRecord.hits`` so every
re-derivation itemises the same hits): the array at a JSON path, or, in a text answer, the
lines a pattern marks as each hit's first, less the marker it matched at the line's start
(or the parts between a separator's matches),
each hit's id the one group of an id pattern. Its patterns run on ``projections.pattern``,
which cannot hang a reader whatever a recorded rule says.

Ranks are 1-based; ``None`` means the thing looked for was not among the hits.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final

from benchledger.ledger.codec import TooDeep, check_depth
from benchledger.ledger.events import HitRule
from benchledger.projections import pattern

ROOT: Final = "$"  # a HitRule path naming the answer itself as the array of hits
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


class NoSuchPath(ValueError):
    """A JSON answer without the array a rule's ``path`` names (the message names its keys)."""


def _generic(value: Any) -> list[Any]:
    found: list[Any] = []
    # Arrays of objects are the hits; arrays of strings only when there are no objects
    # (a hit's own string lists, such as its entity URNs, are fields, not hits).
    if not _innermost(value, found, dict):
        _innermost(value, found, str)
    return found


def _at(value: Any, path: str, strict: bool) -> list[Any]:
    """The items of the array at ``path`` under ``value`` (in each element of a list; a
    text element is itself an item: a text part of a fanned-out ``[own, shared]`` answer)."""
    if isinstance(value, list):
        return [item for v in value for item in _at(v, path, strict)]
    if not isinstance(value, dict):
        return [value] if isinstance(value, str) else []
    head, _, rest = path.partition(".")
    got = value.get(head)
    if rest and isinstance(got, dict | list):
        return _at(got, rest, strict)
    if not rest and isinstance(got, list):
        return list(got)
    if strict:
        keys = ", ".join(sorted(map(str, value))[:12]) or "none"
        raise NoSuchPath(f"the answer has no array at {path!r} (its keys there: {keys})")
    return []


def _texts(text: str, rule: HitRule, budget: pattern.Budget) -> list[str]:
    """A text answer's hits by the rule's line pattern or separator (all of it without)."""
    if rule.line:
        starts = pattern.compile(rule.line)
        found: list[list[str]] = []
        for line in text.split("\n"):
            m = starts.search(line, 0, budget)
            if m is not None:  # a marker leading the line (its number) is not the hit's text
                found.append([line[m.end :] if m.start == 0 else line])
            elif found:  # lines before the first hit are the answer's header
                found[-1].append(line)
        return [t for t in ("\n".join(h).strip() for h in found) if t]
    if rule.separator:
        parts = pattern.compile(rule.separator).split(text, budget)
        return [p for p in parts if p.strip()]
    return [text] if text.strip() else []


def _raw(result_text: str, rule: HitRule | None, budget: pattern.Budget,
         strict: bool = False) -> list[Any]:  # fmt: skip
    value = _parse(result_text)
    if rule is None:
        if value is None:
            return [result_text] if result_text.strip() else []
        return _generic(value)
    textual = bool(rule.line or rule.separator)
    if value is None:  # a text answer: its hits by the rule's patterns (none at a JSON path)
        return [] if rule.path and not textual else list(_texts(result_text, rule, budget))
    if rule.path == ROOT:  # the answer is the array of hits itself
        found = value if isinstance(value, list) else []
    elif rule.path:
        found = _at(value, rule.path, strict)
    elif textual and isinstance(value, list) and any(isinstance(v, str) for v in value):
        found = value  # a fanned-out ``[own, shared]`` answer of texts
    else:
        return _generic(value)
    out: list[Any] = []
    for v in found:
        if isinstance(v, str) and textual:
            out.extend(_texts(v, rule, budget))
        elif isinstance(v, list | dict) and not rule.path:
            out.extend(_generic(v))
        else:
            out.append(v)
    return out


def _canonical(hit: Any) -> str:
    return hit if isinstance(hit, str) else json.dumps(hit, sort_keys=True, ensure_ascii=False)


def hits(result_text: str, rule: HitRule | None = None) -> list[str]:
    """The hits of one recorded search result, best first, each as text (see the module);
    ``rule``: the platform's recorded ``HitRule``, when it has one."""
    return [_canonical(h) for h in _raw(result_text, rule, pattern.Budget())]


def items(result_text: str, rule: HitRule, *, strict: bool = False) -> list[tuple[str, str]]:
    """The hits of one answer as ``(id, text)``, best first: a JSON hit's id is its
    ``id_field``, its text its ``text_field`` (else its canonical JSON); any hit's id is
    else the one group of the rule's ``id`` pattern in that text, else "". ``strict``:
    NoSuchPath when a JSON answer lacks the rule's path (a wrong path, not an empty store)."""
    budget = pattern.Budget()
    ids = pattern.compile(rule.id) if rule.id else None
    out: list[tuple[str, str]] = []
    for hit in _raw(result_text, rule, budget, strict):
        ident, said = "", _canonical(hit)
        if isinstance(hit, dict):
            if rule.id_field and hit.get(rule.id_field) is not None:
                ident = str(hit[rule.id_field])
            if rule.text_field and isinstance(hit.get(rule.text_field), str):
                said = hit[rule.text_field]
        if not ident and ids is not None:
            m = ids.search(said, 0, budget)
            ident = (m.group(1) or "") if m is not None and ids.groups else ""
        out.append((ident, said))
    return out


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


__all__ = ["KS", "NoSuchPath", "hits", "items", "mrr", "rank", "recall_at"]
