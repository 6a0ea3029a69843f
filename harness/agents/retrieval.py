"""The retrieval reader: a deterministic, model-free agent that answers from what a search
returned, so a score measures the platform's retrieval, not a model (docs/locomo.md,
"Agents").

It speaks the platform's declared vocabulary (``Episode.vocabulary``,
harness/platforms/vocabulary.py), never a list of its own. To answer, it searches once with
the question (k: a LoCoMo run's ``--search-k``, ``Episode.search_k``; else 10) and reads
the hits (``projections.retrieval.hits``, the ledger's own rule, where the vocabulary says
they are) in rank order. Each
hit's text (its string fields; a LoCoMo turn's ``[D3:1 | DATE] Speaker: text`` memory
without the bracket) is cut into sentences; each sentence is scored by

    score = (|Q ∩ W(sentence)| + [the turn's speaker is in Q]) / |Q|
          (0 when Q ∩ W(sentence) is empty)

where Q is the question's content words and W a text's content words: lower-case runs of
letters and digits, less ``STOPWORDS``, each cut by one crude suffix rule (``stem``: the
first of -ing, -ed, -es, -s, -e whose removal leaves three letters or more; not a real
stemmer, so "named" and "name" meet). The speaker counts only beside a word of the
sentence itself, so a turn is never chosen for its speaker's name alone. The best
sentence wins (ties: the better-ranked hit, then the earlier sentence) and is the answer,
without its speaker. A
question starting with "when" is answered with the date of the turn holding it, when the
hit is a LoCoMo turn. Below ``THRESHOLD`` (or with no hit at all) it abstains: "no
information available" on LoCoMo, ``INSUFFICIENT INFORMATION`` on the lifecycle suite.

A LongMemEval question (the longmemeval suite) is read as a LoCoMo one: its memories are
``[SESSION_N | DATE] role: content``, it searches with the question alone (not the date
line of its prompt) and abstains with "no information available".

On the lifecycle suite, teach and update write the (updated) fact as one memory with the
vocabulary's write call; recall, transfer, update_recall and abstain search with the
episode's user prompt and answer ``FINAL ANSWER: <best span>``. Provenance cases and
tasks it does not answer (``INSUFFICIENT INFORMATION``).
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Sequence
from typing import Any, Final

from benchledger.harness.agents.answering import locomo_only
from benchledger.harness.agents.base import Agent, Episode, Turn, UnitInfo
from benchledger.harness.models.transport import ModelObserver
from benchledger.ledger.events import HitRule
from benchledger.projections import retrieval
from benchledger.projections.suites.locomo.grading import ABSTENTIONS
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.projections.suites.longmemeval.items import LongMemEvalItem
from benchledger.protocols.cases import Case
from benchledger.protocols.grading import ABSTAIN_ANSWER
from benchledger.protocols.tasks import Task

SEARCH_K: Final = 10
THRESHOLD: Final = 0.3  # the share of the question's content words a span must hold
LOCOMO_ABSTAIN: Final = ABSTENTIONS[0]  # "no information available"
WRITING: Final = ("teach", "update")
STOPWORDS: Final = frozenset(
    "a about after all also am an and any are as at be been before being but by can could "
    "did do does doing for from had has have he her hers him his how i if in into is it its "
    "just me my no not of on or our ours she so some such than that the their theirs them "
    "then there these they this those to too us was we were what when where which who whom "
    "whose why will with would you your yours s t".split()
)
_WORD: Final = re.compile(r"[a-z0-9]+")
_SENTENCE: Final = re.compile(r"(?<=[.!?])\s+|\n+")
_TURN: Final = re.compile(r"^\[([^|\]]+) \| ([^\]]*)\] (?:([^:\n]{1,80}): )?(.*)$", re.S)


_SUFFIXES: Final = ("ing", "ed", "es", "s", "e")


def stem(word: str) -> str:
    """``word`` less the first suffix of ``_SUFFIXES`` that leaves three letters or more."""
    for suffix in _SUFFIXES:
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[: -len(suffix)]
    return word


def words(text: str) -> set[str]:
    """The content words of ``text`` (module docstring): stems of its lower-case runs of
    letters and digits, less stopwords."""
    return {stem(w) for w in _WORD.findall(text.lower()) if w not in STOPWORDS}


def score(question_words: set[str], span: Span) -> float:
    """How well ``span`` answers a question of ``question_words`` (module docstring)."""
    if not question_words:
        return 0.0
    shared = question_words & words(span.sentence)
    if not shared:
        return 0.0
    speaker = words(span.speaker) & question_words - shared
    return (len(shared) + (1 if speaker else 0)) / len(question_words)


def _strings(value: Any, out: list[str]) -> None:
    if isinstance(value, str):
        out.append(value)
    elif isinstance(value, dict):
        for v in value.values():
            _strings(v, out)
    elif isinstance(value, list):
        for v in value:
            _strings(v, out)


def hit_texts(hit: str) -> list[str]:
    """A hit's texts: its string fields in order (a hit that is not JSON: itself)."""
    try:
        value = json.loads(hit)
    except ValueError:
        return [hit]
    out: list[str] = []
    _strings(value, out)
    return out


class Span:
    """One candidate answer: a sentence, the speaker and date of the turn it is in."""

    __slots__ = ("date", "rank", "sentence", "speaker")

    def __init__(self, sentence: str, speaker: str, date: str, rank: int) -> None:
        self.sentence, self.speaker, self.date, self.rank = sentence, speaker, date, rank


def spans(results: Sequence[str], rule: HitRule | None = None) -> list[Span]:
    """Every sentence of every hit of ``results`` (tool result texts), in rank order
    (``rule``: where the platform's vocabulary says its answers hold their hits)."""
    out: list[Span] = []
    rank = 0
    for result in results:
        for hit in retrieval.hits(result, rule):
            rank += 1
            for text in hit_texts(hit):
                m = _TURN.match(text.strip())
                speaker, date, body = (m[3] or "", m[2], m[4]) if m else ("", "", text)
                for sentence in _SENTENCE.split(body.strip()):
                    if sentence.strip():
                        out.append(Span(sentence.strip(), speaker, date, rank))
    return out


def best_span(question: str, results: Sequence[str], rule: HitRule | None = None
              ) -> tuple[Span, float] | None:  # fmt: skip
    """The best-scoring span for ``question`` among ``results`` and its score (module
    docstring), None when none reaches ``THRESHOLD``."""
    wanted = words(question)
    if not wanted:
        return None
    best: tuple[Span, float] | None = None
    for span in spans(results, rule):
        got = score(wanted, span)
        if got > 0 and (best is None or got > best[1]):  # ties keep the earlier span
            best = (span, got)
    return best if best is not None and best[1] >= THRESHOLD else None


def answer(question: str, results: Sequence[str], abstain: str,
           rule: HitRule | None = None) -> str:  # fmt: skip
    """The reader's answer text to ``question`` from ``results`` (``abstain`` below the
    threshold)."""
    found = best_span(question, results, rule)
    if found is None:
        return abstain
    span = found[0]
    if span.date and question.strip().lower().startswith("when"):
        return span.date
    return span.sentence


class RetrievalAgent:
    """The retrieval reader (module docstring); ``search`` False is the ``no-memory``
    control's reader, which answers every LoCoMo question without searching (it abstains)."""

    model = ""
    records_model_calls = False

    def __init__(self, search: bool = True, name: str = "retrieval") -> None:
        self.search = search
        self.name = name

    def for_unit(self, unit: UnitInfo) -> Agent:
        """Stateless: one reader serves every unit."""
        return self

    def check_items(self, items: Sequence[Any], path: str) -> None:
        """ValueError when the no-memory reader is asked anything but LoCoMo's questions."""
        if not self.search:
            locomo_only(self.name, items)

    async def next_turn(
        self,
        episode: Episode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        observer: ModelObserver | None = None,
    ) -> Turn:
        return self.decide(episode, messages, [t["name"] for t in tools])

    def decide(self, episode: Episode, messages: list[dict[str, Any]],
               tools: Collection[str]) -> Turn:  # fmt: skip
        """The next turn from the episode, the tool results so far and the tools (pure)."""
        p = episode.protocol
        results = [m for m in messages if m["role"] == "tool"]
        vocab = episode.vocabulary
        if isinstance(p, Case | Task):
            return Turn(f"FINAL ANSWER: {ABSTAIN_ANSWER}")
        locomo = isinstance(p, LocomoItem | LongMemEvalItem)  # a question over a history
        abstain = LOCOMO_ABSTAIN if locomo else ABSTAIN_ANSWER
        if not locomo and episode.stage in WRITING:
            if results:
                ok = not results[0].get("is_error")
                return Turn("Saved." if ok else "I could not save it.")
            if vocab is None:
                return Turn("I cannot write to this platform's memory.")
            update = episode.stage == "update" and getattr(p, "update", None) is not None
            fact = p.update.fact if update and p.update is not None else p.fact  # type: ignore[union-attr]
            title = f"{getattr(p, 'id', 'memory')}-{episode.stage}"
            return Turn("", (vocab.write_call("call-1", fact, title),))
        question = (
            p.question.question
            if isinstance(p, LocomoItem | LongMemEvalItem)
            else episode.user_prompt
        )  # a LongMemEval question: never its date line
        if not results:
            if vocab is None or not self.search:
                return Turn(f"FINAL ANSWER: {abstain}")
            k = episode.search_k or SEARCH_K  # the run's --search-k (LoCoMo), else 10
            return Turn("", (vocab.search_call("call-1", question, k),))
        texts = [str(r.get("text", "")) for r in results if not r.get("is_error")]
        rule = vocab.hits if vocab is not None else None  # where the platform's hits are
        return Turn(f"FINAL ANSWER: {answer(question, texts, abstain, rule)}")
