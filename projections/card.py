"""What every suite's card shares: metric, reference, run meta, interval labels, formatting.

A suite's fold and scorecard (``projections/suites/<name>/``) build these; every display
formats numbers, intervals, who vouches for a run and how complete it is with them.
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple

from benchledger.ledger.completeness import Completeness
from benchledger.ledger.events import GraderDecisionBody, RunRecord, RunStartedBody
from benchledger.ledger.inert import inert
from benchledger.ledger.verified import OWN, Origin, Standing
from benchledger.projections.platform_label import platform_facts, platform_label
from benchledger.projections.stats import BOOTSTRAP_REPS, BOOTSTRAP_SEED, Interval
from benchledger.projections.usage import Usage

Ref = tuple[str, int]

# Withheld in a redacted bundle, these hide a unit's outcome, so no rate can count it.
OUTCOME_KINDS: Final = frozenset(
    {"unit_started", "grader_decision", "infra_error", "unit_finished", "unit_abandoned"}
)

# A gated metric's verdict, in every suite's gate (``ReadSuite.gate``).
PASS: Final = "pass"
REGRESS: Final = "regress"
INCONCLUSIVE: Final = "inconclusive"
SKIPPED: Final = "skipped"


class Ruling(NamedTuple):
    """A grader decision a suite's decide function makes, with the seqs of the evidence it
    cites: what the harness records (and re-derivation recomputes) as a grader_decision."""

    body: GraderDecisionBody
    refs: tuple[int, ...]


class Decision(NamedTuple):
    """One recorded grader decision and where it is in the ledger."""

    stream: str
    seq: int
    link: str
    stage: str
    check: str
    verdict: bool | None
    reason: str
    answer: str
    expected: Any
    origin: str
    refs: tuple[int, ...]


# How a metric's interval was computed (``Metric.ci_method``).
CI_WILSON: Final = "wilson"


CI_CLUSTER: Final = "protocol-cluster bootstrap"


CI_WILSON_PROTOCOLS: Final = "wilson over protocols"


# A mean of scores in [0, 1] that are not shares (MRR): a percentile bootstrap over the
# episodes, none below MIN_BOOTSTRAP_GROUPS of them (Wilson's interval is for a proportion).
CI_EPISODES: Final = "episode bootstrap"


# LoCoMo's means: a percentile bootstrap over questions resampled within their conversation
# (projections/suites/locomo/scorecard.py, docs/locomo.md).
CI_STRATIFIED: Final = "question bootstrap within conversations"


CI_LABELS: Final = {
    CI_WILSON: "Wilson (attempts treated as independent)",
    CI_CLUSTER: f"protocol-cluster bootstrap ({BOOTSTRAP_REPS} resamples, seed {BOOTSTRAP_SEED})",
    CI_WILSON_PROTOCOLS: "Wilson over protocols",
    CI_EPISODES: f"bootstrap over episodes ({BOOTSTRAP_REPS} resamples, seed {BOOTSTRAP_SEED})",
    CI_STRATIFIED: f"bootstrap over questions resampled within conversations ({BOOTSTRAP_REPS} "
    f"resamples, seed {BOOTSTRAP_SEED})",
}


# ``scorecard(ci=...)``: auto clusters by protocol when a protocol has several attempts.
CI_CHOICES: Final = ("auto", "wilson", "cluster")


class Metric(NamedTuple):
    """A rate with its interval and the decisions behind its numerator and denominator."""

    name: str
    num: float
    den: int
    ci: Interval | None  # None when the denominator is empty
    num_refs: tuple[Ref, ...]
    den_refs: tuple[Ref, ...]
    label: str = ""
    units: tuple[str, ...] = ()  # streams in the denominator
    ci_method: str = CI_WILSON
    # Each denominator element's own score, (sample id, value), whose mean is ``rate``:
    # a unit's stream, a ranked episode (``stream@stage``) or a protocol (pass^k). Empty
    # where a suite does not itemise the metric (exports then show the aggregate only).
    values: tuple[tuple[str, float], ...] = ()
    # Why the run could not measure it ("": it did), from what the probe found before any
    # unit (projections/measured.py): then it has no number anywhere, never a 0.
    not_measured: str = ""

    @property
    def rate(self) -> float | None:
        if self.not_measured:
            return None
        return self.num / self.den if self.den else None

    def as_json(self) -> dict[str, Any]:
        if self.not_measured:
            return {"num": None, "den": None, "rate": None, "ci_low": None, "ci_high": None,
                    "ci_method": None, "not_measured": self.not_measured}  # fmt: skip
        ci = self.ci
        return {"num": self.num, "den": self.den, "rate": self.rate,
                "ci_low": ci.low if ci else None, "ci_high": ci.high if ci else None,
                "ci_method": self.ci_method}  # fmt: skip


_NO_RUN_STARTED: Final = RunStartedBody(suite="")


@dataclass
class RunMeta:
    """What ``run_started`` (and ``run_sealed``) say about a run: its ``run_started`` body,
    read through the properties below (the run record's values first, where it has them),
    and what the readers add."""

    run_id: str = ""
    started: RunStartedBody = _NO_RUN_STARTED
    root: str = ""
    verified: str = ""  # what reading it verified, against which root (projections.source)
    withheld: list[str] = field(default_factory=list)  # header-stream kinds withheld
    subset: str = ""  # a subset run's selection (projections.card.subset_label); "" = whole set
    standing: Standing | None = None  # who vouches for its root (set by the reader, open_run)
    origin: Origin | None = None  # who wrote its units (set by the reader, open_run)
    usage: Usage | None = None  # durations, model calls and tokens (projections.usage)
    # Its units' trace hashes and events (projections.determinism.RunTraces), set by
    # ``judging.compare`` only: compare leads with whether the runs' traces agree.
    traces: Any = None

    @property
    def suite(self) -> str:
        return self.started.suite

    @property
    def protocol_set_hash(self) -> str:
        rec = self.started.record
        return (rec.protocol_set_hash if rec else "") or self.started.protocol_set_hash

    @property
    def protocols(self) -> int:
        return self.started.protocols

    @property
    def k(self) -> int:
        rec = self.started.record
        return rec.k if rec else self.started.k

    @property
    def agent(self) -> str:
        return self.started.agent

    @property
    def model(self) -> str:
        return self.started.model

    @property
    def platform(self) -> str:
        return self.started.platform

    @property
    def platform_version(self) -> str:
        return self.started.platform_version

    @property
    def platform_label(self) -> str:
        """The platform with what it ran with, as every display names it."""
        return platform_label(self.started)

    @property
    def platform_facts(self) -> dict[str, Any]:
        """``platform_label``'s facts, as every JSON gives them."""
        return platform_facts(self.started)

    @property
    def coupled(self) -> bool:
        return self.started.coupled

    @property
    def config(self) -> dict[str, Any]:
        return self.started.config

    @property
    def protocol_set_id(self) -> str:
        """The set's content identity when recorded apart from its hash."""
        return self.started.protocol_set_id

    @property
    def planned(self) -> tuple[tuple[str, int], ...]:
        """The run record's planned (unit, attempt) keys."""
        rec = self.started.record
        return tuple((u.unit_id, u.attempt) for u in rec.units) if rec else ()

    @property
    def sampling(self) -> dict[str, Any]:
        """The agent's recorded parameters."""
        rec = self.started.record
        return dict(rec.agent_params) if rec else {}

    @property
    def platform_options(self) -> dict[str, str]:
        """The platform options the run recorded (``--embedder``): those that shape answers."""
        rec = self.started.record
        return dict(rec.platform_options) if rec else {}

    @property
    def protocols_path(self) -> str:
        """The protocol folder the run recorded (an import's, if found)."""
        rec = self.started.record
        return (rec.protocols_path if rec else "") or str(self.config.get("protocols_path") or "")

    @property
    def sealed(self) -> bool:
        return bool(self.root)

    @property
    def planned_units(self) -> int:
        """Units the run set out to finish: its record's plan, else protocols × k."""
        return len(self.planned) if self.planned else self.protocols * self.k


def options_text(options: dict[str, str]) -> str:
    """A run's recorded platform options as one value: ``embedder=wordllama``, or that it
    recorded none (the platform's defaults; docs/refplatform.md)."""
    return ", ".join(f"{k}={v}" for k, v in sorted(options.items())) or "none (defaults)"


def _unsigned_zero(text: str) -> str:
    """``-0.000`` (a tiny negative rounded away) reads as a real negative: print it as 0."""
    if text.startswith("-") and not any(c in "123456789" for c in text):
        return text[1:]
    return text


# The formats every suite's card renders in (``render_card``).
FORMATS: Final = ("table", "markdown", "json", "html")


def render_card(
    card: Any,
    fmt: str,
    *,
    table: Callable[[Any], str],
    markdown: Callable[[Any], str],
    as_json: Callable[[Any], Any],
    page: Callable[[Any], str],
) -> str:
    """``card`` in ``fmt`` by the suite's own renderers; ValueError for another format."""
    if fmt == "table":
        return table(card)
    if fmt == "markdown":
        return markdown(card)
    if fmt == "json":
        return json.dumps(as_json(card), indent=2, sort_keys=True) + "\n"
    if fmt == "html":
        return page(card)
    raise ValueError(f"unknown format {fmt!r}; use {', '.join(FORMATS)}")


def fmt_num(x: float, digits: int = 2) -> str:
    """A count as an integer; a fractional numerator (pass^k) with ``digits`` decimals.

    Rounded first, so float noise (29.999999999999996 for 30) prints as the count it is.
    """
    r = round(float(x), digits)
    return str(int(r)) if r.is_integer() else _unsigned_zero(f"{r:.{digits}f}")


def fmt_pct(x: float | None) -> str:
    """A rate or an interval bound for display: a percentage with one decimal (JSON keeps all)."""
    return "n/a" if x is None else _unsigned_zero(f"{x:.1%}")


NOT_MEASURED: Final = "not measured"


def fmt_rate(m: Metric) -> str:
    """A metric's rate as every display shows it: ``not measured`` (its ``why`` beside it,
    ``fmt_why``) where the run could not measure it, else ``fmt_pct``."""
    return NOT_MEASURED if m.not_measured else fmt_pct(m.rate)


def fmt_frac(m: Metric) -> str:
    """A metric's ``num/den``; none for a metric not measured (never a 0)."""
    return "-" if m.not_measured else f"{fmt_num(m.num)}/{m.den}"


def fmt_why(m: Metric) -> str:
    """``not measured: <why>`` for a metric the run could not measure, else ""."""
    return f"{NOT_MEASURED}: {inert(m.not_measured)}" if m.not_measured else ""


def fmt_signed(x: float, digits: int = 3) -> str:
    """A difference for display, signed, never ``-0.000``."""
    text = f"{x:+.{digits}f}"
    return f"{0:+.{digits}f}" if float(text) == 0 else text


def fmt_interval(low: float, high: float) -> str:
    """A rate's 95% interval in the rate's own notation: ``[88.6%, 100.0%]``."""
    return f"[{fmt_pct(low)}, {fmt_pct(high)}]"


def standing_lines(
    runs: Sequence[tuple[str, Standing | None, Origin | None]], *, named: bool = False
) -> list[str]:
    """Who vouches for each (name, standing, origin), then where its units came from.

    Every display prints these right after its partial-run banners; ``named`` prefixes
    each line with its name (``run X`` of merged or paired runs).
    """
    out = []
    for name, stood, origin in runs:
        who = f"{name}: " if named else ""
        if stood is not None:
            out.append(who + stood.line())
        if origin is not None and origin.line():
            out.append(who + origin.line())
    return out


def card_standing(runs: Sequence[RunMeta]) -> list[str]:
    """``standing_lines`` of a card's runs (named when several were merged)."""
    return standing_lines(card_runs(runs), named=len(runs) > 1)


def standing_json(runs: Sequence[RunMeta]) -> dict[str, Any]:
    """The JSON ``authentication`` and ``origin`` fields of a card's runs ({} if unread).

    One run: its ``Standing.as_json()`` and ``Origin.as_json()``. Several merged: whether
    all are authenticated, their lines joined, and each run's own under ``runs``.
    """
    stood = {r.run_id: r.standing for r in runs if r.standing is not None}
    origins = {r.run_id: (r.origin or Origin(OWN)).as_json() for r in runs if r.run_id in stood}
    if not stood:
        return {}
    if len(stood) == 1:
        [(run_id, only)] = stood.items()
        return {"authentication": only.as_json(), "origin": origins[run_id]}
    kinds = {o["kind"] for o in origins.values()}
    return {
        "authentication": {
            "authenticated": all(s.authenticated for s in stood.values()),
            "line": " | ".join(f"run {r}: {s.line()}" for r, s in stood.items()),
            "runs": {r: s.as_json() for r, s in stood.items()},
        },
        "origin": {"kind": kinds.pop() if len(kinds) == 1 else "mixed", "runs": origins},
    }


# The HTML banner of a run whose standing no reader set (a card built without the door).
UNREAD_STANDING: Final = "UNAUTHENTICATED: who vouches for this run's root was not checked"


def html_standing(
    runs: Sequence[tuple[str, Standing | None, Origin | None]], *, named: bool = False
) -> str:
    """``standing_lines`` as banner elements near the top of an HTML page (green if trusted).

    A run whose standing was never read (``None``: nothing checked who vouches for its
    root) is unauthenticated, and its page says so like any other.
    """
    out = []
    for name, stood, origin in runs:
        lines = standing_lines([(name, stood, origin)], named=named)
        if stood is None:
            who = f"{name}: " if named else ""
            lines.insert(0, who + UNREAD_STANDING)
        for line in lines:
            trusted = stood is not None and stood.authenticated and line.endswith(stood.line())
            style = (
                "background:#e6f4ea;border:2px solid #1a7f37;color:#14532d"
                if trusted
                else "background:#fff3cd;border:2px solid #c00;color:#800"
            )
            role = "" if trusted else ' role="alert"'
            out.append(
                f'<p class="standing"{role} style="{style};padding:8px 12px;font-weight:bold">'
                f"{html.escape(line)}</p>\n"
            )
    return "".join(out)


def html_top(runs: Sequence[RunMeta], partial: Sequence[str]) -> str:
    """An HTML page's first elements: the partial-run banners, then the runs' standing."""
    return html_banner(partial) + html_standing(card_runs(runs), named=len(runs) > 1)


def html_top_combined(runs: Sequence[RunMeta], partial: Sequence[str]) -> str:
    """``html_top`` as one banner for several runs (a compare page): their partial-run
    lines and standing lines together, green only when every run is whole and trusted."""
    named = card_runs(runs)
    lines = list(partial)
    for name, stood, origin in named:
        if stood is None:
            lines.append(f"{name}: {UNREAD_STANDING}")
        lines += standing_lines([(name, stood, origin)], named=True)
    trusted = not partial and all(s is not None and s.authenticated for _, s, _ in named)
    style = ("background:#e6f4ea;border:2px solid #1a7f37;color:#14532d" if trusted
             else "background:#fff3cd;border:2px solid #c00;color:#800")  # fmt: skip
    role = "" if trusted else ' role="alert"'
    shown = "<br>\n".join(html.escape(line) for line in lines)
    return (f'<div class="standing"{role} style="{style};padding:8px 12px;font-weight:bold">'
            f"{shown}</div>\n")  # fmt: skip


def card_runs(runs: Sequence[RunMeta]) -> list[tuple[str, Standing | None, Origin | None]]:
    """A card's runs as ``standing_lines`` takes them, each named ``run ID``."""
    return [(f"run {r.run_id}", r.standing, r.origin) for r in runs]


def failed_text(found: Sequence[Completeness]) -> str:
    """``1 infra-failed, 0 harness-failed``: the runs' failed units as every display counts
    them (``Completeness``, which the JSON and ``run --retry-infra`` read too)."""
    infra = sum(len(c.infra_failed) for c in found)
    ours = sum(len(c.harness_failed) for c in found)
    return f"{infra} infra-failed, {ours} harness-failed"


def completeness_json(found: Sequence[Completeness]) -> dict[str, Any]:
    """The top-level JSON ``completeness`` (and ``warning`` when partial) of runs."""
    if len(found) == 1:
        body = found[0].as_json()
    else:
        body = {
            "sealed": all(c.sealed for c in found),
            "planned_units": sum(c.planned for c in found),
            "finished_units": sum(c.finished for c in found),
            "missing_units": [f"{c.run_id}: {m}" for c in found for m in c.missing],
            "infra_failed_units": [f"{c.run_id}: {u}" for c in found for u in c.infra_failed],
            "harness_failed_units": [f"{c.run_id}: {u}" for c in found for u in c.harness_failed],
        }
    warning = " | ".join(b for b in (c.banner() for c in found) if b)
    return {"completeness": body, **({"warning": warning} if warning else {})}


def html_banner(lines: Sequence[str]) -> str:
    """A partial run's banner at the top of an HTML page ("" for whole runs)."""
    return "".join(
        f'<p class="banner" role="alert" style="background:#fff3cd;border:2px solid #c00;'
        f'padding:8px 12px;font-weight:bold;color:#800">{html.escape(b)}</p>\n'
        for b in lines
    )


_SHOWN_IDS: Final = 5  # --protocol ids a subset label names before "..."


def subset_label(record: RunRecord | None, noun: str) -> str:
    """A subset run's ``N of M <noun> (--protocol A, B; --limit L)``; "" for a whole set.

    ``noun`` is what the run's suite calls its items (``ReadSuite.noun``).
    """
    if record is None or not (record.only or record.limit):
        return ""
    ran = len({u.unit_id for u in record.units})
    asked = []
    if record.only:
        ids = ", ".join(record.only[:_SHOWN_IDS])
        asked.append(f"--protocol {ids}{', ...' if len(record.only) > _SHOWN_IDS else ''}")
    if record.limit:
        asked.append(f"--limit {record.limit}")
    of = f" of {record.set_items}" if record.set_items else ""
    return f"{ran}{of} {noun} ({'; '.join(asked)})"
