"""Where the taught fact ranked in what the platform's search returned (docs/metrics.md,
Retrieval).

A projection over recorded search results, never a grader decision: it adds nothing to
the ledger, changes no verdict, and re-derivation recomputes it from the same events.

Per unit and ranked stage (recall, transfer, update_recall; abstain as a diagnostic) the
fold keeps the stage's **first search call** (a call of a tool the episode counted as a
search, ``projections.vocabulary``: the platform's declared vocabulary, in the episode's
last try, that did not return an error): the platform's answer to
the agent's first query. Later calls are left out on purpose: the best rank over every
call would reward an agent for searching more often (more draws) and mix the agent's
query reformulation into a number meant to describe the platform. The rank is that of the
first hit (``projections.retrieval.hits``, where the vocabulary says they are) in which
the stage's fact surfaces by the surfacing rule (``protocols.grading.surfaced``); None when
no hit holds it, when the episode made no search, or when the search failed (a miss: it
counts 0 in recall@k and MRR). The fact looked for: the taught fact (recall, transfer: the
promoted fact is the taught one; abstain), the corrected fact (update_recall).

Abstain asks about something never taught, so no hit is the right one: its rank (of the
taught fact, the nearest distractor) is reported per unit and as ``abstain_leak_at_5``, a
diagnostic of how often the related but non-answering fact is put in front of the agent;
it is in no recall@k or MRR.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    EpisodeStartedEvent,
    Event,
    HitRule,
    SessionCallEvent,
)
from benchledger.projections import vocabulary
from benchledger.projections.card import (
    CI_CLUSTER,
    CI_EPISODES,
    CI_WILSON,
    NOT_MEASURED,
    Decision,
    Metric,
    Ref,
    RunMeta,
)
from benchledger.projections.retrieval import KS, hits, mrr, rank, recall_at
from benchledger.projections.stats import (
    MIN_BOOTSTRAP_GROUPS,
    bootstrap,
    cluster_rate_interval,
    wilson,
)
from benchledger.projections.suites.lifecycle import items
from benchledger.protocols.grading import surfaced

RANKED: Final = ("recall", "transfer", "update_recall")  # the stages recall@k and MRR pool
ABSTAIN: Final = "abstain"  # ranked as a diagnostic only
STAGES: Final = (*RANKED, ABSTAIN)
LEAK_K: Final = 5
LEAK: Final = f"abstain_leak_at_{LEAK_K}"
ORIGIN: Final = "projection"  # an audit's rank lines: computed here, not recorded decisions

# Protocol id -> stage -> the fact its search should return.
Facts = Mapping[str, Mapping[str, str]]


def recall_name(k: int, stage: str = "") -> str:
    """``recall_at_5`` (every ranked stage) or ``recall_at_5.transfer`` (one stage)."""
    return f"recall_at_{k}" + (f".{stage}" if stage else "")


def mrr_name(stage: str = "") -> str:
    """``mrr`` (every ranked stage) or ``mrr.recall`` (one stage)."""
    return "mrr" + (f".{stage}" if stage else "")


OVERALL: Final = (*(recall_name(k) for k in KS), mrr_name())
NAMES: Final = (
    *OVERALL,
    *(n for s in RANKED for n in (*(recall_name(k, s) for k in KS), mrr_name(s))),
    LEAK,
)
DESCRIPTIONS: Final = {
    **{recall_name(k): f"the taught fact among the first search's top {k} hits "
       "(recall, transfer, update_recall episodes)" for k in KS},
    mrr_name(): "mean reciprocal rank of the taught fact in the first search (a miss: 0)",
    **{recall_name(k, s): f"the fact among the first search's top {k} hits, {s} episodes"
       for k in KS for s in RANKED},
    **{mrr_name(s): f"mean reciprocal rank of the fact, {s} episodes" for s in RANKED},
    LEAK: f"abstain episodes whose first search put the taught (non-answering) fact in its "
    f"top {LEAK_K}: a distractor diagnostic, in no recall@k",
}  # fmt: skip


class Searched(NamedTuple):
    """A stage's episode as the ranking reads it: its first search call (seq and result
    text; None: it made none), where its hits are, and its ``episode_finished`` seq (None:
    not finished); ``calls``: its calls that returned no error, until it finished."""

    call: int | None = None
    text: str = ""
    finished: int | None = None
    rule: HitRule | None = None
    calls: tuple[tuple[int, str, str], ...] = ()


def apply(searches: dict[str, Searched], event: Event) -> None:
    """Fold one unit event into ``searches`` (stage -> Searched): a retried episode's last
    try replaces the earlier one, exactly as the lifecycle's decisions read it."""
    if isinstance(event, EpisodeStartedEvent) and event.body.episode in STAGES:
        searches[event.body.episode] = Searched()
    elif isinstance(event, SessionCallEvent):
        b = event.body
        seen = searches.get(b.episode)
        if (
            seen is not None
            and seen.finished is None
            and b.method == "tools/call"
            and (not b.is_error)
        ):
            searches[b.episode] = seen._replace(calls=(*seen.calls, (event.seq, b.tool, b.text())))
    elif isinstance(event, EpisodeFinishedEvent) and event.body.episode in searches:
        seen = searches[event.body.episode]
        tools = vocabulary.search_tools(event.body)
        first = next(((seq, text) for seq, tool, text in seen.calls if tool in tools), None)
        call, text = first if first is not None else (None, "")
        searches[event.body.episode] = Searched(call, text, event.seq, event.body.hits)


def facts_of(protocols: Iterable[Any]) -> dict[str, dict[str, str]]:
    """Each protocol's fact per ranked stage (the corrected fact for update_recall)."""
    out: dict[str, dict[str, str]] = {}
    for p in protocols:
        update = p.update.fact if p.update is not None else ""
        out[p.id] = {"recall": p.fact, "transfer": p.fact, ABSTAIN: p.fact,
                     "update_recall": update}  # fmt: skip
    return out


def known_facts(metas: Sequence[RunMeta]) -> tuple[dict[str, dict[str, str]] | None, str]:
    """The runs' facts per protocol and stage, found as every reader finds a run's
    protocols (``items.items``); (None, why) when they are not on this machine."""
    out: dict[str, dict[str, str]] = {}
    for meta in metas:
        record = meta.started.record
        if record is not None and record.platform.mapping and not record.vocabulary:
            # Recorded before episodes named their search tools and hit rule: the mapping's
            # are not in its episodes, so not measured, rather than a 0 that looks like one.
            return None, (
                f"run {meta.run_id} is on a mapped MCP server (mcp:FILE) and was recorded "
                "before episodes named their search tool and hits, so its retrieval is not "
                "measured"
            )
        try:
            found = items.items(meta.started)
        except UnusableInput as exc:
            return None, str(exc)
        out |= facts_of(found.by_id.values())
    return out, ""


def rank_of(searched: Searched, fact: str) -> int | None:
    """The 1-based rank of the first hit of the search in which ``fact`` surfaces."""
    if searched.call is None or not fact:
        return None
    return rank(hits(searched.text, searched.rule), lambda hit: surfaced(fact, hit))


def ranks(searches: Mapping[str, Searched], facts: Mapping[str, str]) -> dict[str, int | None]:
    """Stage -> rank for every finished ranked (or abstain) episode of one unit."""
    return {
        stage: rank_of(s, facts.get(stage, ""))
        for stage, s in searches.items()
        if s.finished is not None and stage in STAGES
    }


class Ranked(NamedTuple):
    """One finished episode's rank, for the metrics and the audit."""

    stream: str
    protocol_id: str
    attempt: int
    stage: str
    rank: int | None
    searched: Searched


def _interval(values: Sequence[Ranked], score: Any, clustered: bool) -> tuple[Any, str]:
    scores = [score(r) for r in values]
    if not clustered and all(x in (0, 1) for x in scores):
        return wilson(int(sum(scores)), len(values)), CI_WILSON
    if not clustered:  # reciprocal ranks: a mean, not a share
        interval = bootstrap(scores, _mean, min_groups=MIN_BOOTSTRAP_GROUPS)
        return interval, CI_EPISODES
    clusters: dict[str, list[float]] = {}
    for r in values:
        cell = clusters.setdefault(r.protocol_id, [0.0, 0])
        cell[0] += score(r)
        cell[1] += 1
    return cluster_rate_interval([(x, int(d)) for x, d in clusters.values()]), CI_CLUSTER


def _metric(name: str, ranked: Sequence[Ranked], score: Any, clustered: bool, label: str) -> Metric:
    refs = {r: _refs(r) for r in ranked}
    num = sum(score(r) for r in ranked)
    interval, method = _interval(ranked, score, clustered) if ranked else (None, CI_WILSON)
    return Metric(
        name, num, len(ranked), interval,
        tuple(x for r in ranked if score(r) for x in refs[r]),
        tuple(x for r in ranked for x in refs[r]),
        label, tuple(dict.fromkeys(r.stream for r in ranked)), method,
        tuple((f"{r.stream}@{r.stage}", float(score(r))) for r in ranked),
    )  # fmt: skip


def _refs(r: Ranked) -> list[Ref]:
    seq = r.searched.call if r.searched.call is not None else r.searched.finished
    return [] if seq is None else [(r.stream, seq)]


def metrics(ranked: Sequence[Ranked], clustered: bool, label: str = "") -> dict[str, Metric]:
    """recall@k and MRR over every ranked stage and per stage, and the abstain leak rate.

    Each metric's numerator is a count (recall@k) or the sum of reciprocal ranks (MRR),
    its denominator the episodes, so ``rate`` is the value; ``label`` says why ranks are
    missing when the run's facts could not be found."""
    out: dict[str, Metric] = {}
    groups = {"": [r for r in ranked if r.stage in RANKED]}
    groups |= {s: [r for r in ranked if r.stage == s] for s in RANKED}
    for stage, group in groups.items():
        for k in KS:

            def hit(r: Ranked, k: int = k) -> int:
                return int(r.rank is not None and r.rank <= k)

            out[recall_name(k, stage)] = _metric(recall_name(k, stage), group, hit, clustered,
                                                 label)  # fmt: skip
        out[mrr_name(stage)] = _metric(mrr_name(stage), group, _reciprocal, clustered, label)
    leak = [r for r in ranked if r.stage == ABSTAIN]

    def leaked(r: Ranked) -> int:
        return int(r.rank is not None and r.rank <= LEAK_K)

    out[LEAK] = _metric(LEAK, leak, leaked, clustered, label)
    assert all(m.den == 0 or m.rate is not None for m in out.values())
    # The shared definitions agree with the counts above (projections.retrieval).
    every = [r.rank for r in groups[""]]
    assert not every or abs((mrr(every) or 0) - out["mrr"].num / out["mrr"].den) < 1e-9
    assert not every or recall_at(every, 5) == out["recall_at_5"].num / out["recall_at_5"].den
    return out


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def _reciprocal(r: Ranked) -> float:
    return 0.0 if r.rank is None else 1.0 / r.rank


def decision(r: Ranked, link: str, name: str, in_num: bool) -> Decision:
    """An audit's line for one ranked episode: where its first search put the fact.

    Marked with origin ``projection``: computed from the recorded search, never recorded."""
    where = (
        "no search call in the episode"
        if r.searched.call is None
        else f"first search call seq {r.searched.call}: "
        + ("the fact in no hit" if r.rank is None else f"the fact at rank {r.rank}")
    )
    seq = r.searched.call if r.searched.call is not None else (r.searched.finished or -1)
    refs = tuple(x for x in (r.searched.call, r.searched.finished) if x is not None)
    return Decision(r.stream, seq, link, r.stage, name, in_num, where, "", None, ORIGIN, refs)


def is_retrieval(name: str) -> bool:
    """Whether ``name`` is one of the retrieval metrics here."""
    return name in NAMES


def display(m: Metric) -> str:
    """A retrieval metric's value as shown: MRR as a number, recall@k as a percentage."""
    if m.not_measured:
        return NOT_MEASURED
    if m.rate is None:
        return "n/a"
    if m.name.startswith("mrr"):
        return f"{m.rate:.3f}"
    return f"{m.rate:.1%}"
