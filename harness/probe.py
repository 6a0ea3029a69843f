"""The probe: before a platform is measured, can it keep a memory and find it again?

On a runtime of its own (a fresh-state platform's preflight runtime, thrown away after),
under one identity, the probe speaks the platform's declared vocabulary
(harness/platforms/vocabulary.py) as a unit would: it checks the session lists the
vocabulary's tools, writes one known memory, then, in a fresh session, searches for it
with its own words (then, if that finds nothing, with one of them: a substring search
finds no phrase), itemises the answer into ranked hits (where the vocabulary says they
are) and reads their ids. Each step is one ``Finding``. A platform that declares no
vocabulary, or whose write cannot be found again even by its own words, is ``refused``:
nothing it would be measured on could mean anything (docs/plugins.md, "The probe"). It
costs a list and a write, then a list and a search or two: four or five calls.
"""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from benchledger.harness.platforms.base import LifecycleCapability, PlatformClient
from benchledger.harness.platforms.vocabulary import Vocabulary, vocabulary_of
from benchledger.ledger.inert import inert
from benchledger.projections import measured, retrieval
from benchledger.protocols.grading import surfaced

MEMORY: Final = "The probe heron Quillon nests beside the north weir of Lake Ostrava."
QUERY: Final = "heron Quillon north weir"  # the memory's own words
WORD: Final = "Quillon"  # one of them, for a search matching a contiguous substring
TITLE: Final = "benchledger-probe"
K: Final = 10
IDENTITY: Final = 1  # a pool index of the probe's own runtime, thrown away after it


class Finding(NamedTuple):
    """One thing the probe checked: what, whether it works, and what it saw."""

    what: str
    ok: bool
    detail: str


class ProbeReport(NamedTuple):
    """What the probe found on one platform."""

    platform: str
    vocabulary: str  # the declared vocabulary's name ("": none)
    findings: tuple[Finding, ...]

    @property
    def refused(self) -> str:
        """Why the platform cannot be measured ("": it can): no vocabulary, or its memory
        was not found again by its own words."""
        failed = {f.what: f.detail for f in self.findings if not f.ok}
        for what in ("vocabulary", "tools", "write", "search"):
            if what in failed:
                return failed[what]
        return ""

    def record(self) -> dict[str, Any]:
        """The findings as JSON (the run record's ``probe``)."""
        return {"vocabulary": self.vocabulary,
                "findings": [f._asdict() for f in self.findings]}  # fmt: skip

    def lines(self) -> list[str]:
        """One line per finding, for ``platform check`` (every outside string inert); a
        failed one that refuses nothing says what a run on it would not measure."""
        out = []
        for f in self.findings:
            out.append(f"{'ok  ' if f.ok else 'FAIL'} {f.what}: {inert(f.detail)}")
            if not f.ok and (names := measured.affected(f.what)):
                out.append(f"     so a run on it does not measure {names}")
        return out


def not_probed(platform: str, client: PlatformClient) -> ProbeReport:
    """The report of a platform shared by every pass: not probed, since its memory would
    keep what the probe wrote (its vocabulary recorded all the same)."""
    vocab = vocabulary_of(client)
    why = "not probed: a platform shared by every pass would keep the probe's memory"
    return ProbeReport(platform, vocab.name if vocab else "", (Finding("probe", False, why),))


class Probed(NamedTuple):
    """A probed platform's vocabulary and findings, as a new run records them."""

    vocabulary: Vocabulary | None
    report: ProbeReport

    def recorded(self) -> dict[str, Any]:
        """The run record's ``vocabulary`` and ``probe`` fields."""
        said = self.vocabulary.record() if self.vocabulary is not None else {}
        return {"vocabulary": said, "probe": self.report.record()}


async def probe(client: PlatformClient, platform: str) -> ProbeReport:
    """Probe ``client`` (module docstring); InfraError propagates (the platform broke)."""
    vocab = vocabulary_of(client)
    if vocab is None:
        why = (f"{platform} declares no memory vocabulary (its client's `vocabulary`, "
               "docs/plugins.md), so nothing can be written to it or searched on it")  # fmt: skip
        return ProbeReport(platform, "", (Finding("vocabulary", False, why),))
    found: list[Finding] = [Finding("vocabulary", True, vocab.name)]
    async with client.session(IDENTITY) as session:
        listed = {str(t.get("name", "")) for t in await session.list_tools()}
        missing = sorted({vocab.write_tool, vocab.search_tool} - listed)
        if missing:
            why = (f"the session does not list the vocabulary's {', '.join(missing)} "
                   f"(it lists {', '.join(sorted(listed)) or 'no tool'})")  # fmt: skip
            return ProbeReport(platform, vocab.name, (*found, Finding("tools", False, why)))
        found.append(Finding("tools", True, f"{vocab.write_tool}, {vocab.search_tool} listed"))
        call = vocab.write_call("probe-1", MEMORY, TITLE)
        wrote = await session.call_tool(call.name, call.arguments)
        if wrote.is_error:
            why = f"{call.name} answered an error: {wrote.text[:200]}"
            return ProbeReport(platform, vocab.name, (*found, Finding("write", False, why)))
        found.append(Finding("write", True, f"{call.name} stored the probe memory"))
    rule = vocab.hits
    where = (
        f"at {rule.path!r}"
        if rule.path
        else ("by its patterns" if rule.line or rule.separator else "by the generic rule")
    )
    async with client.session(IDENTITY) as session:
        await session.list_tools()
        for n, query in enumerate((QUERY, WORD), 2):
            call = vocab.search_call(f"probe-{n}", query, K)
            answer = await session.call_tool(call.name, call.arguments)
            hits = [] if answer.is_error else retrieval.items(answer.text, rule)
            rank = retrieval.rank([text for _, text in hits], lambda hit: surfaced(MEMORY, hit))
            if rank is not None or answer.is_error:
                break
    asked = f"{call.name} {query!r}"
    if answer.is_error:
        why = f"{asked} answered an error: {answer.text[:200]}"
    elif rank is None:
        why = (f"{call.name} for the memory's own words ({QUERY!r}, then {WORD!r}) returned "
               f"{len(hits)} hits ({where}) and none holds the memory just written")  # fmt: skip
    else:
        only = f" (nothing for {QUERY!r})" if query == WORD else ""
        why = f"{asked} found it at rank {rank} of {len(hits)} hits ({where}){only}"
    found.append(Finding("search", rank is not None, why))
    if rank is not None:
        ident = hits[rank - 1][0]
        named = f"{rule.id_field!r} field" if rule.id_field else "id (its id pattern)"
        found.append(Finding(measured.HIT_IDS, bool(ident), f"its hit's id is {ident}" if ident
                             else f"its hit has no {named}"))  # fmt: skip
    return ProbeReport(platform, vocab.name, (*found, *_lifecycle(client)))


def _lifecycle(client: PlatformClient) -> tuple[Finding, ...]:
    """The lifecycle checks a platform cannot make: without ``LifecycleCapability`` it has
    no capture, update or promotion check, so the metrics needing one are not measured
    (projections/measured.py). A platform with it is not asked here (none found)."""
    if isinstance(client, LifecycleCapability):
        return ()
    why = "the platform offers no {} check: its adapter does not implement LifecycleCapability"
    return tuple(Finding(what, False, why.format(what))
                 for what in (measured.CAPTURE, measured.UPDATE, measured.PROMOTE))  # fmt: skip
