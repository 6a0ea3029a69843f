"""What a locomo run's answers were given, read off the run: whether it is a control, how
deep the harness searched and how many of its searches returned nothing, how much of a
conversation the depth covers, and, when a model answered, its context tokens, answer
tokens and latency per question (docs/locomo.md, "A model answers" and "Controls").

Each is a fact of the recorded run (the run record and each question's ask episode), never
a metric with an interval: the card shows them beside the metrics so a reader sees what the
numbers stand on ("searches that returned nothing: 12 of 304").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    ModelCallBody,
    RunRecord,
    SessionCallBody,
)
from benchledger.projections import retrieval
from benchledger.projections.suites.locomo.controls import FULL_CONTEXT, conversation
from benchledger.projections.suites.locomo.decisions import ASK, TOOL_CALL
from benchledger.protocols.locomo import Sample

Events = Sequence[tuple[int, Body]]
_NONE: Final = "-"


class Asked(NamedTuple):
    """One question's ask episode as these facts read it."""

    searched: bool  # it made a search call the platform answered
    hits: int  # the hits its searches returned
    model_calls: int  # its model calls that answered (no failed attempt)
    context_tokens: int  # their input tokens
    answer_tokens: int  # their output tokens
    model_ms: float  # their latency


def asked(events: Events) -> Asked:
    """The facts of the last ask episode among one unit's ``events``."""
    finished: EpisodeFinishedBody | None = None
    seq = -1
    for s, b in events:
        if isinstance(b, EpisodeFinishedBody) and b.episode == ASK:
            seq, finished = s, b
    searching = frozenset(finished.search_tools) if finished is not None else frozenset()
    rule = finished.hits if finished is not None else None
    searched, hits, models, inputs, outputs, ms = False, 0, 0, 0, 0, 0.0
    for s, b in events:
        if s > seq or getattr(b, "episode", "") != ASK:
            continue
        if isinstance(b, SessionCallBody) and b.method == TOOL_CALL and b.tool in searching:
            if not b.is_error:
                searched = True
                hits += len(retrieval.hits(b.text(), rule))
        elif isinstance(b, ModelCallBody) and not b.error:
            models += 1
            inputs += int(b.usage.get("input_tokens", 0))
            outputs += int(b.usage.get("output_tokens", 0))
            ms += b.latency_ms
    return Asked(searched, hits, models, inputs, outputs, ms)


class Conditions(NamedTuple):
    """A run's answering conditions (module docstring)."""

    control: str  # "" | no-memory | full-context
    search_k: int  # the recorded depth (0: no search, or a run recorded before it)
    searched: int  # questions whose ask searched
    empty: int  # of those, the ones whose searches returned no hit
    coverage: tuple[tuple[str, int, int], ...]  # (sample, sessions, turns) of those asked
    answered: tuple[Asked, ...]  # the questions a model answered
    prompt_hash: str
    budget: int  # full-context: the token budget
    truncated: int  # full-context: questions whose conversation was cut to it
    questions: int

    def covers(self) -> str:
        """ "top-k covers X% of the conversation ..." when the depth reaches a conversation's
        sessions or turns ("" otherwise: retrieval is measured)."""
        k = self.search_k
        reach = [(sid, s, t) for sid, s, t in self.coverage if t and (k >= s or k >= t)]
        if not k or not reach:
            return ""
        shares = sorted(round(100 * min(k, t) / t) for _, _, t in reach)
        pct = f"{shares[0]}%" if shares[0] == shares[-1] else f"{shares[0]}% to {shares[-1]}%"
        turns = sum(1 for _, _, t in reach if k >= t)
        return (
            f"top-k covers {pct} of the conversation (k={k}: at least its sessions in "
            f"{len(reach)} of {len(self.coverage)} conversations, at least its turns in "
            f"{turns}): where it covers all, retrieval is not measured"
        )

    def lines(self) -> list[tuple[str, str]]:
        """The card's lines: (label, value)."""
        out = []
        if self.control:
            what = (
                "a model given the whole conversation"
                if self.control == FULL_CONTEXT
                else "answers with no search"
            )
            out.append(("control", f"{self.control}: {what}"))
        if self.search_k:
            empty = f"searches that returned nothing: {self.empty} of {self.searched}"
            line = f"asked for {self.search_k} hits each (--search-k); {empty}"
            out.append(("searches", line))  # the depth reached: report's "search depth"
        if covers := self.covers():
            out.append(("coverage", covers))
        if self.budget:
            out.append(
                (
                    "context budget",
                    f"{self.budget} tokens (estimated); "
                    f"{self.truncated} of {self.questions} questions' conversations cut "
                    "to it, earliest turns first",
                )
            )
        if self.answered:
            n = len(self.answered)
            ctx = sum(a.context_tokens for a in self.answered) / n
            ans = sum(a.answer_tokens for a in self.answered) / n
            ms = sum(a.model_ms for a in self.answered) / n
            out.append(
                (
                    "model answers",
                    f"{n} questions; mean per question: context tokens "
                    f"{ctx:.1f}, answer tokens {ans:.1f}, latency {ms:.1f} ms",
                )
            )
        if self.prompt_hash:
            out.append(("answer prompt", f"blake3 {self.prompt_hash}"))
        return out

    def as_json(self) -> dict[str, Any]:
        n = len(self.answered)
        return {
            "control": self.control or None,
            "search_k": self.search_k or None,
            "searches": self.searched,
            "searches_empty": self.empty,
            "coverage": self.covers() or None,
            "context_budget": self.budget or None,
            "context_truncated": self.truncated if self.budget else None,
            "answer_prompt_hash": self.prompt_hash or None,
            "model_answers": n,
            "mean_context_tokens": sum(a.context_tokens for a in self.answered) / n if n else None,
            "mean_answer_tokens": sum(a.answer_tokens for a in self.answered) / n if n else None,
            "mean_model_latency_ms": sum(a.model_ms for a in self.answered) / n if n else None,
        }


def conditions(record: RunRecord | None, asked_in: Sequence[tuple[Sample, Events]]) -> Conditions:
    """The conditions of a run of ``record`` over its graded questions: each one's sample
    and its unit's events."""
    facts = [(sample, asked(events)) for sample, events in asked_in]
    budget = record.context_budget if record is not None else 0
    samples: dict[str, Sample] = {s.sample_id: s for s, _ in facts}
    truncated = 0
    if budget:
        cut = {sid: conversation(s, budget).truncated for sid, s in samples.items()}
        truncated = sum(1 for s, _ in facts if cut[s.sample_id])
    return Conditions(
        control=record.control if record is not None else "",
        search_k=record.search_k if record is not None else 0,
        searched=sum(1 for _, a in facts if a.searched),
        empty=sum(1 for _, a in facts if a.searched and not a.hits),
        coverage=tuple(
            (sid, len(s.sessions), sum(len(x.turns) for x in s.sessions))
            for sid, s in samples.items()
        ),
        answered=tuple(a for _, a in facts if a.model_calls),
        prompt_hash=record.answer_prompt_hash if record is not None else "",
        budget=budget,
        truncated=truncated,
        questions=len(facts),
    )


def of_card(card: Any, events: Mapping[str, Events]) -> Conditions:
    """``conditions`` of a card's graded questions (``scorecard.Card``), their unit streams'
    events from the fold."""
    pairs = [(r.item.sample, events.get(r.unit.stream, ())) for r in card.rows]
    return conditions(card.meta.started.record, pairs)


__all__ = ["Asked", "Conditions", "asked", "conditions", "of_card"]
