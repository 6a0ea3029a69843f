"""The provenance lane's decision function: a case replicate's verdicts from its events.

The live suite calls ``decide_case`` once the scored turn's cited refs are resolved;
re-derivation calls it again on the recorded stream and compares (as the lifecycle's
``projections.suites.lifecycle.decisions``). Everything it reads is in the unit's own stream:

- the scored turn (episode ``answer``): its ``sources`` and the tool results it saw;
- the prime episodes (``prime_1``, ``prime_2``, ...): the ids their ``memory_capture``
  calls got back;
- the resolution read-backs (stage ``provenance``, purpose ``ref``), each observed by
  the platform adapter as ``{ref, kind, record, exists}``.

A cited ref is a source of kind

- ``pack`` when the platform knows it as seeded knowledge (a catalog entity or term, a
  knowledge page not written by the case's own identity);
- ``vault`` when it is a memory or insight the platform reads back and the scored turn's
  tool results surfaced;
- ``teaching`` when it is an insight (a capture submitted for review: knowledge taught
  to the platform) that one of this case's prime episodes captured.

An insight a prime taught and the turn found again is both ``teaching`` and ``vault``.
A ref that is none of these is invalid: made up, never surfaced, or unknown.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger.events import (
    Body,
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    ReadBackBody,
    SessionCallBody,
)
from benchledger.projections.card import Ruling
from benchledger.protocols.cases import SOURCE_KINDS, Case

SCORED: Final = "answer"  # the episode whose provenance is scored
PRIME: Final = "prime"  # prime episodes are prime_1, prime_2, ...
RESOLVE: Final = "provenance"  # the stage the harness resolves cited refs in
REF_PURPOSE: Final = "ref"
VALIDITY: Final = "source_validity"
ATTRIBUTION: Final = "source_attribution"
PRECISION: Final = "source_precision"
CHECKS: Final = (VALIDITY, ATTRIBUTION, PRECISION)
MAX_SOURCES: Final = 20  # refs resolved per answer; more are invalid, never looked up
_REF_PREFIXES: Final = ("mcp:memory:", "mcp:insight:", "mcp:knowledge_page:")
# Tools whose results are the agent's own writes: an id they return was made, not found.
_WRITES: Final = frozenset({"memory_capture", "apply_knowledge"})
_TOKEN: Final = re.compile(r"[A-Za-z0-9_:.\-]+")
_EMAIL: Final = re.compile(r"\S+@\S+")

Events = Sequence[tuple[int, Body]]


class Source(NamedTuple):
    """One cited ref as resolved: its kinds (empty when invalid), why, and its evidence."""

    ref: str
    kinds: tuple[str, ...]
    valid: bool
    why: str
    evidence: tuple[int, ...]


def prime_stage(n: int) -> str:
    """The episode name of the n-th prime prompt (1-based)."""
    return f"{PRIME}_{n}"


def is_prime(stage: str) -> bool:
    """Whether an episode name is one of a case's prime episodes."""
    return stage.startswith(PRIME + "_")


def bare(ref: str) -> str:
    """A memory, insight or page ref without its ``mcp:...:`` prefix."""
    for prefix in _REF_PREFIXES:
        ref = ref.removeprefix(prefix)
    return ref


def scored(events: Events) -> tuple[int, EpisodeFinishedBody] | None:
    """The scored turn as it finished (a retried episode's last, complete try)."""
    found = None
    for seq, body in events:
        if isinstance(body, EpisodeFinishedBody) and body.episode == SCORED:
            found = (seq, body)
    return found


def _first_json(text: str) -> Any:
    try:
        value, _ = json.JSONDecoder().raw_decode(text.lstrip())
    except ValueError:
        return None
    return value


def captures(events: Events) -> dict[str, int]:
    """Ids the case's prime episodes captured, each with its ``memory_capture`` call's seq."""
    out: dict[str, int] = {}
    for seq, body in events:
        if (
            isinstance(body, SessionCallBody)
            and body.tool == "memory_capture"
            and is_prime(body.episode)
            and not body.is_error
        ):
            data = _first_json(body.text())
            if isinstance(data, dict) and isinstance(data.get("id"), str):
                out.setdefault(data["id"], seq)
    return out


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def surfaced(events: Events, finished: int) -> dict[str, int]:
    """Every string a tool result of the scored turn held (ids, refs, words), with its seq.

    Only the attempt that finished counts: its events run from the last ``answer``
    ``episode_started`` before ``finished``.
    """
    starts = [s for s, b in events if isinstance(b, EpisodeStartedBody) and b.episode == SCORED]
    start = max((s for s in starts if s < finished), default=-1)
    out: dict[str, int] = {}
    for seq, body in events:
        if not (start < seq < finished and isinstance(body, SessionCallBody)):
            continue
        if body.method != "tools/call" or body.episode != SCORED or body.tool in _WRITES:
            continue
        for block in body.content or [{"text": body.text()}]:
            text = str(block.get("text", ""))
            parsed = _first_json(text)
            for token in [*_strings(parsed), *_TOKEN.findall(text)]:
                out.setdefault(token, seq)
    return out


def _resolutions(events: Events) -> dict[str, list[tuple[int, dict[str, Any]]]]:
    out: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    for seq, body in events:
        if (
            isinstance(body, ReadBackBody)
            and body.stage == RESOLVE
            and body.purpose == REF_PURPOSE
            and isinstance(body.observed, dict)
        ):
            out.setdefault(str(body.observed.get("ref", "")), []).append((seq, body.observed))
    return out


def _own_email(events: Events) -> str:
    """The email of the identity the case ran as (from its scored turn's identity label)."""
    for _, body in events:
        if isinstance(body, EpisodeStartedBody) and body.episode == SCORED:
            found = _EMAIL.search(body.identity)
            return found.group() if found else ""
    return ""


def _written_by(events: Events, seq: int, email: str) -> bool:
    """Whether the page a resolution read back was created by ``email`` (not seeded)."""
    body = dict(events)[seq]
    page = body.body if isinstance(body, ReadBackBody) and isinstance(body.body, dict) else {}
    return bool(email) and page.get("created_email") == email


def resolve(events: Events) -> list[Source] | None:
    """Every ref the scored turn cited, resolved against the ledger and the read-backs.

    None when the scored turn has not finished.
    """
    fin = scored(events)
    if fin is None:
        return None
    fin_seq, answer = fin
    taught = captures(events)
    seen = surfaced(events, fin_seq)
    reads = _resolutions(events)
    email = _own_email(events)
    out = []
    for i, ref in enumerate(answer.sources):
        if i >= MAX_SOURCES:
            why = f"more than {MAX_SOURCES} sources cited: not looked up"
            out.append(Source(ref, (), False, why, (fin_seq,)))
            continue
        looked = reads.get(ref, [])
        evidence = (fin_seq, *(s for s, _ in looked))
        hit = next(((s, o) for s, o in looked if o.get("exists") is True), None)
        if not looked:
            out.append(Source(ref, (), False, "never looked up on the platform", evidence))
        elif hit is None:
            out.append(Source(ref, (), False, "the platform knows no such source", evidence))
        elif hit[1].get("kind") == "pack":
            if hit[1].get("record") == "page" and _written_by(events, hit[0], email):
                why = "a page the case's own identity wrote, not seeded knowledge"
                out.append(Source(ref, (), False, why, evidence))
            else:
                why = f"{hit[1].get('record')} on the platform"
                out.append(Source(ref, ("pack",), True, why, evidence))
        else:
            out.append(_vault_or_teaching(ref, hit[1], evidence, taught, seen))
    return out


def _vault_or_teaching(
    ref: str,
    observed: dict[str, Any],
    evidence: tuple[int, ...],
    taught: dict[str, int],
    seen: dict[str, int],
) -> Source:
    """A memory or insight the platform read back: surfaced this turn, taught by a prime."""
    record = str(observed.get("record", ""))
    where = seen.get(ref, seen.get(bare(ref)))
    capture = taught.get(bare(ref)) if record == "insight" else None
    kinds: list[str] = []
    found: list[str] = []
    if capture is not None:
        kinds.append("teaching")
        found.append(f"an insight a prime captured (seq {capture})")
    if where is not None:
        kinds.append("vault")
        found.append(f"surfaced in the turn (seq {where})")
    if kinds:
        more = tuple(s for s in (capture, where) if s is not None)
        return Source(ref, tuple(kinds), True, " and ".join(found), evidence + more)
    if record == "insight":
        why = "an insight neither surfaced in the turn nor captured by this case's primes"
    else:
        why = "a memory the turn's tool results never surfaced"
    return Source(ref, (), False, why, evidence)


def _decision(
    check: str, verdict: bool | None, reason: str, refs: Sequence[int], **kw: Any
) -> Ruling:
    body = GraderDecisionBody(stage=RESOLVE, check=check, verdict=verdict, reason=reason, **kw)
    return Ruling(body, tuple(sorted(set(refs))))


def decide_case(case: Case, events: Events) -> list[Ruling]:
    """Source validity, attribution and precision of the scored turn ([] before it finished)."""
    sources = resolve(events)
    fin = scored(events)
    if sources is None or fin is None:
        return []
    refs = [fin[0], *(s for src in sources for s in src.evidence)]
    cited = ", ".join(s.ref for s in sources)
    bad = [s for s in sources if not s.valid]
    if not sources:
        reason = "no sources cited (no SOURCES: line after FINAL ANSWER)"
    elif bad:
        reason = "; ".join(f"{s.ref}: {s.why}" for s in bad)
    else:
        reason = f"all {len(sources)} cited source(s) resolve"
    valid = bool(sources) and not bad
    out = [_decision(VALIDITY, valid, reason, refs, answer=cited)]

    expected = [k for k in SOURCE_KINDS if k in case.expected_sources]
    found = [k for k in SOURCE_KINDS if any(k in s.kinds for s in sources)]
    missing = [k for k in expected if k not in found]
    reason = f"expected {', '.join(expected)}; found {', '.join(found) or 'nothing'}"
    if missing:
        reason += f"; missing {', '.join(missing)}"
    attributed = _decision(
        ATTRIBUTION, not missing, reason, refs, answer=",".join(found), expected=expected
    )
    out.append(attributed)

    resolved = [s for s in sources if s.kinds]
    off = [s for s in resolved if not set(s.kinds) & set(expected)]
    if not resolved:
        verdict, reason = None, "no cited source resolved"
    elif off:
        verdict = False
        reason = "unexpected: " + "; ".join(f"{s.ref} ({', '.join(s.kinds)})" for s in off)
    else:
        verdict, reason = True, f"all {len(resolved)} resolved source(s) of an expected kind"
    out.append(_decision(PRECISION, verdict, reason, refs))
    return out
