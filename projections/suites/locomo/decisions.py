"""The locomo suite's decision function: a question's verdicts from its recorded evidence.

One function rules on a unit, live (``harness.suites.locomo``) and re-derived (``replay
--level rederive``), from the unit's events and its item alone (docs/locomo.md):

- ``ingested`` (stage ``ingest``; only in the unit that ingested its sample): True when
  every turn's write answered without an error; the reason says how many of how many
  landed, citing the episode and every failed write.
- ``locomo_f1`` (stage ``ask``): the answer (the line after the last ``FINAL ANSWER:``
  when the reply has one, else the whole reply: ``protocols.grading.final_answer``)
  graded by LoCoMo's rule for the question's category (``grading.score``); the verdict is
  F1 >= 0.5 (a word for the progress line), the score itself is in the reason and is
  recomputed by the card the same way.
- ``evidence_recall`` (stage ``ask``): the share of the question's evidence ids among the
  dialogue ids retrieved (``retrieved``); verdict True when all were, None for a question
  without evidence; it cites the tool calls that returned them.

- ``locomo_j`` (stage ``judge``; only in a run with a judge, docs/locomo.md "The judge"):
  the judge's verdict, read by ``protocols.judges.verdict_of`` from each recorded
  ``model_call`` of the episode ``judge``; True when more than half of the samples said
  CORRECT, None when no sample's reply could be read; it cites the judge's calls.

The dialogue ids retrieved are read off the ask episode's recorded tool results: each
call's hits (``projections.retrieval.hits``, one rule for every platform), each hit's
leading ``[D3:1 | ...]`` (``items.memory_id``), calls in order and hits in rank order,
each id kept at its first place.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Final, NamedTuple

from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    GraderDecisionBody,
    InfraErrorBody,
    ModelCallBody,
    SessionCallBody,
)
from benchledger.projections import retrieval
from benchledger.projections.card import Ruling
from benchledger.projections.suites.locomo import grading
from benchledger.projections.suites.locomo.items import LocomoItem, memory_id
from benchledger.protocols.grading import final_answer
from benchledger.protocols.judges import verdict_of

INGEST: Final = "ingest"  # the episode writing a sample's turns
ASK: Final = "ask"  # the episode asking one question
INGESTED: Final = "ingested"
F1: Final = "locomo_f1"
EVIDENCE: Final = "evidence_recall"
JUDGE: Final = "judge"  # the judge's model calls' episode, and its decision's stage
J: Final = "locomo_j"
PASS_F1: Final = 0.5  # the verdict's cut: F1 at least this reads "right" on the progress line
CATEGORY_NAMES: Final = {
    grading.MULTI_HOP: "multi-hop",
    grading.TEMPORAL: "temporal",
    grading.OPEN_DOMAIN: "open-domain",
    grading.SINGLE_HOP: "single-hop",
    grading.ADVERSARIAL: "adversarial",
}
TOOL_CALL: Final = "tools/call"
OURS: Final = "benchledger"

Events = Sequence[tuple[int, Body]]


class Asked(NamedTuple):
    """What one question's unit recorded and how LoCoMo grades it (``graded``)."""

    prediction: str
    finished: int  # the ask episode's episode_finished seq
    retrieved: tuple[str, ...]  # dialogue ids, rank order
    calls: tuple[int, ...]  # the seqs of the tool calls that returned any of them
    f1: float
    evidence_recall: float | None
    ranks: tuple[int | None, ...]  # each evidence id's rank among ``retrieved``
    latency_ms: float  # the ask episode's tool calls, summed
    depth: int = 0  # how deep its searches reached (``search_depth``; 0: it never searched)


def _calls(events: Events, episode: str) -> list[tuple[int, SessionCallBody]]:
    """The agent's tool calls in the last finished ``episode``: its last ``tool_calls``
    tool calls (a session's own probe, such as ``platform_info``, comes before them)."""
    found = finished(events, episode)
    if found is None or not found[1].tool_calls:
        return []
    seq, done = found
    calls = [(s, b) for s, b in events if isinstance(b, SessionCallBody) and s < seq
             and b.episode == episode and b.method == TOOL_CALL]  # fmt: skip
    return calls[-done.tool_calls :]


def finished(events: Events, episode: str) -> tuple[int, EpisodeFinishedBody] | None:
    """The last ``episode_finished`` of ``episode`` in ``events`` and its seq (None: none)."""
    found = None
    for seq, body in events:
        if isinstance(body, EpisodeFinishedBody) and body.episode == episode:
            found = (seq, body)
    return found


def _is(evidence: str) -> Callable[[str], bool]:
    wanted = evidence.strip()
    return lambda dia_id: dia_id == wanted


def retrieved(
    events: Events, read: Callable[[str], str | None] = memory_id
) -> tuple[tuple[str, ...], tuple[int, ...]]:
    """The dialogue ids the ask episode's tool calls returned, best first (each once), and
    the seqs of the calls that returned any (read by the hit rule the episode recorded);
    ``read`` finds a hit's id (the longmemeval suite reads its turn ids with its own)."""
    ids: dict[str, None] = {}
    seqs: list[int] = []
    last = finished(events, ASK)
    rule = last[1].hits if last is not None else None  # where the platform's hits are
    for seq, call in _calls(events, ASK):
        if call.is_error:
            continue
        found = [d for hit in retrieval.hits(call.text(), rule) if (d := read(hit))]
        if found:
            seqs.append(seq)
        ids.update(dict.fromkeys(found))
    return tuple(ids), tuple(seqs)


# The arguments the shipped vocabularies ask a search's depth by (harness/platforms/
# vocabulary.py: refplatform's and mem0's ``limit``, basic-memory's ``page_size``).
DEPTH_ARGUMENTS: Final = ("limit", "page_size", "top_k", "k")


def search_depth(events: Events) -> int:
    """How deep the ask episode's searches reached: per search call (a call of a recorded
    search tool, else any tool call), the depth its arguments asked for
    (``DEPTH_ARGUMENTS``) or, without one, the hits it returned; the most of any call
    (0: no search). recall@k beyond it is not measured (projections/measured.py)."""
    ended = finished(events, ASK)
    tools = set(ended[1].search_tools) if ended is not None else set()
    rule = ended[1].hits if ended is not None else None
    deepest = 0
    for _, call in _calls(events, ASK):
        if call.is_error or (tools and call.tool not in tools):
            continue
        asked = [v for a in DEPTH_ARGUMENTS if isinstance(v := call.arguments.get(a), int)
                 and not isinstance(v, bool)]  # fmt: skip
        deepest = max(deepest, asked[0] if asked else len(retrieval.hits(call.text(), rule)))
    return deepest


def graded(item: LocomoItem, events: Events) -> Asked | None:
    """The question's recorded answer, retrieval and LoCoMo grades (None: not asked yet)."""
    found = finished(events, ASK)
    if found is None:
        return None
    seq, done = found
    q = item.question
    prediction = final_answer(done.final_answer)
    ids, calls = retrieved(events)
    ranks = tuple(retrieval.rank(ids, _is(e)) for e in q.evidence)
    latency = sum(b.latency_ms for _, b in _calls(events, ASK))
    return Asked(prediction, seq, ids, calls, grading.score(prediction, q.answer, q.category),
                 grading.evidence_recall(q.evidence, ids), ranks, latency,
                 search_depth(events))  # fmt: skip


class Judged(NamedTuple):
    """What the judge said of one answer: its verdict and each sample's."""

    verdict: bool | None  # more than half of the samples CORRECT; None: none understood
    verdicts: tuple[bool | None, ...]  # each sample's, in call order
    calls: tuple[int, ...]  # the seqs of the judge's model calls

    @property
    def agreement(self) -> float:
        """The share of samples that agree with the verdict (1.0 for one sample)."""
        return sum(v == self.verdict for v in self.verdicts) / len(self.verdicts)


def judge_gold(item: LocomoItem) -> str:
    """The gold answer the judge reads: an adversarial question's is LoCoMo's abstention
    (its recorded ``adversarial_answer`` is the trap, not the answer)."""
    q = item.question
    return grading.ABSTENTIONS[0] if q.category == grading.ADVERSARIAL else q.answer


def _reply(response: object) -> str:
    return str(response.get("text", "")) if isinstance(response, dict) else ""


def judged(events: Events) -> Judged | None:
    """The judge's recorded calls read as verdicts (None: the answer was not judged)."""
    calls = [(s, b) for s, b in events
             if isinstance(b, ModelCallBody) and b.episode == JUDGE and not b.error]  # fmt: skip
    if not calls:
        return None
    verdicts = tuple(verdict_of(_reply(b.response)) for _, b in calls)
    yes = sum(v is True for v in verdicts)
    verdict = None if all(v is None for v in verdicts) else yes * 2 > len(verdicts)
    return Judged(verdict, verdicts, tuple(s for s, _ in calls))


def judge_rulings(item: LocomoItem, events: Events) -> list[Ruling]:
    """``locomo_j`` when the answer was judged ([] otherwise)."""
    found = judged(events)
    asked = graded(item, events)
    if found is None or asked is None:
        return []
    said = ["CORRECT" if v else "WRONG" if v is False else "not understood"
            for v in found.verdicts]  # fmt: skip
    n = len(said)
    why = (
        f"the judge said {said[0]}"
        if n == 1
        else f"the judge's {n} samples said {', '.join(said)} (agreement {found.agreement:.2f})"
    )
    body = GraderDecisionBody(
        stage=JUDGE,
        check=J,
        verdict=found.verdict,
        reason=why,
        answer=asked.prediction,
        expected=judge_gold(item),
        origin=OURS,
    )
    return [Ruling(body, found.calls)]  # fmt: skip


def ingest_ruling(events: Events) -> list[Ruling]:
    """``ingested``, when this unit ingested its sample ([] otherwise)."""
    found = finished(events, INGEST)
    if found is None:
        return []
    seq, _ = found
    writes = _calls(events, INGEST)
    failed = [s for s, b in writes if b.is_error]
    landed = len(writes) - len(failed)
    ok = bool(writes) and not failed
    why = f"{landed} of {len(writes)} turns landed"
    if failed:
        why += f"; failed writes at seq {failed[:10]}" + (" ..." if failed[10:] else "")
    if not writes:
        why = "no turn was written: the session lists no memory tools benchledger can write with"
    body = GraderDecisionBody(stage=INGEST, check=INGESTED, verdict=ok, reason=why,
                              answer=str(landed), expected=len(writes), origin=OURS)  # fmt: skip
    return [Ruling(body, (seq, *failed))]


def decide_unit(item: LocomoItem, events: Events) -> list[Ruling]:
    """The unit's rulings (module docstring): ``ingested`` when it ingested, then the ask's,
    then the judge's."""
    return ingest_ruling(events) + ask_rulings(item, events) + judge_rulings(item, events)


def ask_rulings(item: LocomoItem, events: Events) -> list[Ruling]:
    """``locomo_f1`` and ``evidence_recall``; [] before the answer or after a harness failure
    in the ask."""
    out: list[Ruling] = []
    asked = graded(item, events)
    if asked is None or any(isinstance(b, InfraErrorBody) and b.stage == ASK for _, b in events):
        return out
    q = item.question
    name = CATEGORY_NAMES[q.category]
    why = f"F1 {asked.f1:.4f} by LoCoMo's rule for category {q.category} ({name})"
    out.append(Ruling(GraderDecisionBody(stage=ASK, check=F1, verdict=asked.f1 >= PASS_F1,
                                         reason=why, answer=asked.prediction, expected=q.answer,
                                         origin=OURS), (asked.finished,)))  # fmt: skip
    if asked.evidence_recall is None:
        verdict, why = None, "the question names no evidence"
    else:
        hit = [e for e, r in zip(q.evidence, asked.ranks, strict=True) if r is not None]
        verdict = asked.evidence_recall == 1.0
        shown = ", ".join(asked.retrieved[:10]) + (" ..." if asked.retrieved[10:] else "")
        why = (
            f"{len(hit)} of {len(q.evidence)} evidence ids retrieved (ranks "
            f"{list(asked.ranks)}); retrieved in rank order: {shown or 'none'}"
        )
    out.append(Ruling(GraderDecisionBody(stage=ASK, check=EVIDENCE, verdict=verdict, reason=why,
                                         answer=" ".join(asked.retrieved),
                                         expected=list(q.evidence), origin=OURS),
                      asked.calls or (asked.finished,)))  # fmt: skip
    return out
