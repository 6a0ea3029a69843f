"""The paraphrase variant of a protocol: its questions asked in words the taught fact never
uses (docs/protocols.md, The paraphrase variant).

A search that matches the question's words to the stored fact's finds the fact by string
overlap; asked in other words, only a search that matches meaning does. Each recall,
transfer and update_recall question keeps its sense and its grading; every content word
it shares with the fact it is graded against (the taught fact; the corrected one for
update_recall) is replaced by a word of the same sense from ``THESAURUS`` (the generator's
vocabulary: the dataset's tables, columns and values and the words its definitions are
made of), a number the fact spells out is written in words, and a shared word with no
replacement is dropped. Nothing is chosen per protocol and nothing is random: the same
inputs give the same text, and a new definition in the same vocabulary is paraphrased by
the same rules.

Words are compared as ``content_words`` does: lower-cased runs of letters and digits,
less ``STOP_WORDS``, by a light suffix-stripping stem (``stem``), so ``orders`` and
``ordered`` are the word ``order``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Final

import msgspec

from benchledger.protocols.schema import Protocol, Question

# Function words: shared with a fact, they carry none of its content.
STOP_WORDS: Final = frozenset(
    """a an the and or but nor of in on at to for from by with without as into onto over
    under about after before through during up down out off than then so such that this
    these those there here it its it's is are was were be been being has have had do does
    did doing can could will would shall should may might must i me my we us our you your
    he she they them their his her what which who whom whose when where why how all any
    both each every few more most other some no not only own same too very just also
    given per""".split()
)

# A word of the generator's vocabulary -> a word (or words) of the same sense, none of
# them a form of another key's word, so a replacement never brings a fact's word back.
THESAURUS: Final = {
    # the dataset: tables, columns, values
    "account": "membership", "tier": "level", "tiers": "levels",
    "customer": "client", "customers": "clients",
    "order": "purchase", "orders": "purchases", "ordering": "purchasing",
    "completed": "fulfilled", "refunded": "reimbursed", "refund": "reimbursement",
    "refunds": "reimbursements", "pending": "outstanding",
    "region": "territory", "regions": "territories", "sales": "selling", "sale": "deal",
    "channel": "route", "channels": "routes", "partner": "affiliate",
    "revenue": "takings", "net": "after-deduction", "gross": "pre-deduction",
    "amount": "sum", "amounts": "sums", "discount": "markdown", "discounts": "markdowns",
    "cents": "pennies", "usd": "dollars", "value": "worth", "total": "aggregate",
    "daily": "day-by-day", "index": "ledger", "legacy": "inherited", "closed": "shut",
    "deprecated": "retired", "table": "listing", "opened": "started",
    "day": "date", "days": "dates", "month": "calendar-period", "year": "twelvemonth",
    "quarter": "three-month-span", "q1": "opening three-month-span",
    "q3": "third three-month-span", "fiscal": "financial",
    "january": "jan", "february": "feb", "march": "mar", "april": "apr", "june": "jun",
    "july": "jul", "august": "aug", "september": "sept", "october": "oct",
    "december": "dec",
    "north": "northern", "south": "southern", "east": "eastern", "west": "western",
    "central": "middle", "silver": "argent", "gold": "golden", "store": "shop",
    "web": "online", "bronze": "copper-alloy", "platinum": "top-metal",
    # the words definitions are made of
    "anchor": "mainstay", "crown": "coronet", "keystone": "linchpin",
    "margin": "markup", "quiet": "hushed", "market": "marketplace",
    "hotspot": "epicentre", "engaged": "active", "dormant": "inactive",
    "whale": "jumbo", "deep": "heavy", "peak": "busiest", "season": "stretch",
    "closing": "final", "window": "span", "launch": "debut", "priority": "preferred",
    "core": "nucleus", "cohort": "batch", "exposure": "risk", "drag": "burden",
    "baseline": "benchmark-figure", "high": "large", "accounts": "memberships",
    "focus": "spotlight", "pilot": "trial", "showcase": "flagship", "review": "inspection",
    "benchmark": "yardstick", "audit": "compliance", "steep": "sharp",
    "bulk": "wholesale", "hold": "held", "study": "analysis",
    "corrected": "amended", "definition": "meaning", "placed": "made", "place": "make",
    "highest": "greatest", "lowest": "smallest", "fewest": "least", "least": "minimum",
    "ranked": "positioned", "second": "runner-up", "third": "bronze-position",
    "first": "opening", "last": "final", "including": "counting", "included": "counted",
    "minus": "less", "before": "prior-to", "spent": "paid", "answer": "reply",
    "name": "label",
}  # fmt: skip

_NUMBER = re.compile(r"(?<![A-Za-z0-9])(?:\d{1,3}(?:,\d{3})+|\d+)(?![A-Za-z0-9])")
_WORD = re.compile(r"[A-Za-z0-9]+(?:'[a-z]+)?")
_ONES: Final = (
    "zero one two three four five six seven eight nine ten eleven twelve thirteen "
    "fourteen fifteen sixteen seventeen eighteen nineteen"
).split()
_TENS: Final = "_ _ twenty thirty forty fifty sixty seventy eighty ninety".split()


def stem(word: str) -> str:
    """A word's light stem: lower case, possessive and one inflection suffix stripped."""
    w = word.lower().removesuffix("'s")
    for suffix, keep in (("ies", "y"), ("ing", ""), ("ed", ""), ("es", ""), ("s", "")):
        if w.endswith(suffix) and len(w) - len(suffix) >= 3 and not w.endswith("ss"):
            w = w[: -len(suffix)] + keep
            break
    return w[:-1] if w.endswith("e") and len(w) > 3 else w


def content_words(text: str) -> set[str]:
    """The stems of ``text``'s words that are not stop words."""
    return {stem(w) for w in _WORD.findall(text) if w.lower() not in STOP_WORDS}


def spelled(n: int) -> str:
    """``n`` (0 to 999,999) in English words: 1500 -> ``one thousand five hundred``."""
    if n < 20:
        return _ONES[n]
    if n < 100:
        return _TENS[n // 10] + ("" if n % 10 == 0 else "-" + _ONES[n % 10])
    if n < 1000:
        rest = n % 100
        return _ONES[n // 100] + " hundred" + ("" if rest == 0 else " " + spelled(rest))
    rest = n % 1000
    return spelled(n // 1000) + " thousand" + ("" if rest == 0 else " " + spelled(rest))


def _replacement(word: str, fact: set[str]) -> str:
    """What a question word the fact shares becomes ("": dropped)."""
    found = THESAURUS.get(word.lower(), "")
    if not found or content_words(found) & fact:
        return ""
    title = word[:1].isupper() and word[1:].islower()  # "Region", not "Q1" or "USD"
    return found[:1].upper() + found[1:] if title else found


def _tokens(text: str) -> Iterator[tuple[bool, str]]:
    """``text`` as (is a word, piece), separators kept so the text can be rebuilt."""
    at = 0
    for m in _WORD.finditer(text):
        if m.start() > at:
            yield False, text[at : m.start()]
        yield True, m.group()
        at = m.end()
    if at < len(text):
        yield False, text[at:]


def paraphrase(question: str, fact: str) -> str:
    """``question`` with no content word of ``fact`` in it (see the module)."""
    taught = content_words(fact)

    def number(m: re.Match[str]) -> str:
        text = m.group()
        shared = any(stem(p) in taught for p in text.split(","))
        value = int(text.replace(",", ""))
        return spelled(value) if shared and value < 1_000_000 else text

    text = _NUMBER.sub(number, question)
    out = []
    for is_word, piece in _tokens(text):
        if is_word and piece.lower() not in STOP_WORDS and stem(piece) in taught:
            piece = _replacement(piece, taught)
        out.append(piece)
    said = re.sub(r"\s+", " ", "".join(out))
    said = re.sub(r"\s+([?.,;:!)])", r"\1", said)
    said = re.sub(r"\(\s*\)", "", said)
    return re.sub(r"\b(a|an|the) (a|an|the)\b", r"\2", said).strip()


def shared(question: str, fact: str) -> set[str]:
    """The content words (stems) ``question`` and ``fact`` share (empty for a paraphrase)."""
    return content_words(question) & content_words(fact)


def _asked(q: Question, fact: str) -> Question:
    return msgspec.structs.replace(q, prompt=paraphrase(q.prompt, fact))


def variant(p: Protocol) -> Protocol:
    """``p`` with its recall, transfer and update_recall questions paraphrased."""
    update = p.update
    if update is not None:
        update = msgspec.structs.replace(update, recall=_asked(update.recall, update.fact))
    transfer = _asked(p.transfer, p.fact) if p.transfer is not None else None
    return msgspec.structs.replace(
        p, recall=_asked(p.recall, p.fact), transfer=transfer, update=update
    )
