"""Pre-registration: the gate a run will be judged by, fixed before any unit runs.

A ``Preregistration`` (ledger/events.py) names the baseline by its sealed root, the
metrics that decide, the tolerance, the protocol set hash and the items (protocols) by
their content hashes. ``run --gate-baseline`` (or ``run --prereg FILE``) records it in
``run_started``; the run's root, and its signature if it is signed, then cover it, so it
cannot be swapped after the score is known. ``gate`` judges such a run only by that bar
and refuses another unless told to ``--override``, which it reports.

It lives in projections, not ledger: it names metrics and protocols, which the ledger
knows nothing of; the ledger only carries it as data. Pure functions, no I/O.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final, NamedTuple

import blake3
import msgspec

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import Preregistration, RunStartedEvent, UnitStartedEvent
from benchledger.ledger.redaction import WithheldEvent
from benchledger.projections.errors import Refused
from benchledger.projections.source import RunEvents
from benchledger.projections.suites import gated_metrics, of_run

FORMAT: Final = "benchledger-prereg/1"
DOMAIN: Final = b"benchledger:prereg:v1\x00"
DEFAULT_TOLERANCE: Final = 0.05
# What a gate says, in its bar line, verdict and JSON, when the candidate pre-registered none.
NOT_PREREGISTERED: Final = "no pre-registered bar: judged by the command-line bar"


class BadPreregistration(Refused, ValueError):
    """A pre-registration that cannot be made or used; the message says what to fix."""


class PreregFile(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    """The file ``prereg new`` writes: publish it (or its digest) before the run."""

    format: str
    prereg: Preregistration


def digest(p: Preregistration) -> str:
    """The pre-registration's content hash (what to publish before the run)."""
    return blake3.blake3(DOMAIN + canonical_json(p)).hexdigest()


def to_bytes(p: Preregistration) -> bytes:
    """The pre-registration file's bytes: canonical JSON and a newline."""
    return canonical_json(PreregFile(FORMAT, p)) + b"\n"


def parse(data: bytes, where: str) -> Preregistration:
    """A pre-registration file's content, checked; BadPreregistration says what is wrong."""
    try:
        f = msgspec.json.decode(data, type=PreregFile)
    except msgspec.DecodeError as exc:
        raise BadPreregistration(f"{where}: not a benchledger pre-registration ({exc})") from None
    if f.format != FORMAT:
        raise BadPreregistration(f"{where}: format {f.format!r} is not {FORMAT}")
    check(f.prereg, where)
    return f.prereg


def _check_metrics(metrics: Sequence[str], where: str) -> None:
    gated = gated_metrics()  # what the installed suites' gates judge
    unknown = [m for m in metrics if m not in gated]
    if unknown or not metrics:
        raise BadPreregistration(
            f"{where}: metrics {', '.join(unknown) or '(none)'} cannot decide a gate; "
            f"gated metrics: {', '.join(gated)}"
        )
    if len(set(metrics)) != len(metrics):
        raise BadPreregistration(f"{where}: a metric is named twice")


def _check_tolerance(tolerance: float, where: str) -> None:
    if not 0 < tolerance < 1:
        raise BadPreregistration(f"{where}: tolerance {tolerance:g} must be in (0, 1), e.g. 0.05")


def check(p: Preregistration, where: str = "pre-registration") -> None:
    """Refuse a pre-registration with unknown metrics, a bad tolerance or no baseline root."""
    _check_metrics(p.metrics, where)
    _check_tolerance(p.tolerance, where)
    if len(p.baseline_root) != 64:
        raise BadPreregistration(f"{where}: baseline_root must be a sealed run's 64-hex root")
    if p.items != sorted(set(p.items)):
        raise BadPreregistration(f"{where}: items must be sorted, unique content hashes")


def build(
    baseline: RunEvents,
    *,
    protocol_set_hash: str,
    items: Sequence[str],
    metrics: Sequence[str] | None = None,
    tolerance: float | None = None,
    strict: bool = False,
) -> Preregistration:
    """The bar for a run of ``items`` (protocol content hashes) against ``baseline``."""
    where = f"--gate-baseline {baseline.run_id}"
    if not baseline.root:
        raise BadPreregistration(
            f"{where}: the baseline is not sealed; pre-register against a sealed run"
        )
    base_set = _set_hash(baseline)
    if base_set and protocol_set_hash and base_set != protocol_set_hash:
        raise BadPreregistration(
            f"{where}: the baseline ran protocol set {base_set[:12]}, this run would run "
            f"{protocol_set_hash[:12]}; the gate could never compare them"
        )
    p = Preregistration(
        baseline_run=baseline.run_id,
        baseline_root=baseline.root,
        metrics=list(metrics) if metrics else list(of_run(baseline).gated),
        tolerance=DEFAULT_TOLERANCE if tolerance is None else tolerance,
        protocol_set_hash=protocol_set_hash,
        items=sorted(set(items)),
        strict=strict,
    )
    check(p, where)
    return p


def matches_run(p: Preregistration, protocol_set_hash: str, items: Sequence[str]) -> None:
    """Refuse a run whose protocols are not the pre-registered ones (checked by content)."""
    if p.protocol_set_hash and p.protocol_set_hash != protocol_set_hash:
        raise BadPreregistration(
            f"the pre-registration names protocol set {p.protocol_set_hash[:12]}, but the "
            f"protocols to run hash to {protocol_set_hash[:12]}"
        )
    if p.items and p.items != sorted(set(items)):
        raise BadPreregistration(
            "the protocols to run are not the pre-registered items (compared by content hash)"
        )


# -- reading a run's pre-registration and judging by it --------------------------------------


def _set_hash(run: RunEvents) -> str:
    for event, _ in run.events:
        if isinstance(event, RunStartedEvent):
            rec = event.body.record
            return (rec.protocol_set_hash if rec else "") or event.body.protocol_set_hash
    return ""


def run_started(run: RunEvents) -> RunStartedEvent:
    """The run's ``run_started``; BadPreregistration when the run shows none.

    Without it nobody can tell whether the run pre-registered a bar: a withheld one (a
    format-1 placeholder can claim to be any withholdable kind) or an absent one is refused,
    never read as "pre-registered none".
    """
    for event, _ in run.events:
        if isinstance(event, RunStartedEvent):
            return event
    hidden = next(
        (
            e
            for e, _ in run.events
            if isinstance(e, WithheldEvent) and e.stream == run.run_id and e.seq == 0
        ),
        None,
    )
    how = (
        f"its first event is withheld (as a {hidden.withheld_kind} placeholder)"
        if hidden is not None
        else "it is absent"
    )
    raise BadPreregistration(
        f"run {run.run_id} shows no run_started event ({how}), so whether it pre-registered "
        "a bar cannot be read; gate the full run"
    )


def recorded(run: RunEvents) -> Preregistration | None:
    """The pre-registration in the run's ``run_started`` (None if it has none).

    Raises BadPreregistration when the run shows no ``run_started`` (``run_started``).
    """
    return run_started(run).body.prereg


def item_problems(p: Preregistration, run: RunEvents) -> list[str]:
    """How the run's units differ from the pre-registered items, by content hash."""
    problems = []
    ran = {e.body.protocol_hash for e, _ in run.events if isinstance(e, UnitStartedEvent)}
    if p.protocol_set_hash and _set_hash(run) != p.protocol_set_hash:
        problems.append(
            f"protocol set {_set_hash(run)[:12] or '(none)'} is not the pre-registered "
            f"{p.protocol_set_hash[:12]}"
        )
    if p.items:
        missing = sorted(set(p.items) - ran)
        extra = sorted(ran - set(p.items))
        if missing:
            problems.append(f"{len(missing)} pre-registered items never ran ({missing[0][:12]}…)")
        if extra:
            problems.append(
                f"{len(extra)} items ran that were not pre-registered ({extra[0][:12]}…)"
            )
    return problems


class Bar(NamedTuple):
    """The bar a gate applies, and where it came from."""

    metrics: tuple[str, ...]
    tolerance: float
    strict: bool
    source: str  # "given" (no pre-registration), "pre-registered", "overridden"
    prereg: Preregistration | None = None
    overrides: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return digest(self.prereg) if self.prereg else ""

    @property
    def note(self) -> str:
        """What the verdict must add when this is not the candidate's pre-registered bar."""
        if self.source == "given":
            return NOT_PREREGISTERED
        if self.source == "overridden":
            return "judged by an OVERRIDDEN bar, not the pre-registered one"
        return ""

    def describe(self) -> str:
        """One line naming the bar and its origin."""
        what = f"metrics {', '.join(self.metrics)}; tolerance {self.tolerance:g}" + (
            "; strict" if self.strict else ""
        )
        if self.source == "given":
            return f"bar: {NOT_PREREGISTERED}: {what} (the run pre-registered none)"
        p = self.prereg
        assert p is not None
        origin = (
            f"pre-registered in run_started (digest {self.digest[:16]}, baseline "
            f"{p.baseline_run} root {p.baseline_root[:16]})"
        )
        if self.source == "pre-registered":
            return f"bar: {what}: {origin}"
        return (
            f"bar: OVERRIDDEN with --override: {'; '.join(self.overrides)}; used {what} "
            f"instead of the bar {origin}"
        )

    def as_json(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "metrics": list(self.metrics),
            "tolerance": self.tolerance,
            "strict": self.strict,
            "prereg_digest": self.digest,
            "prereg": msgspec.to_builtins(self.prereg) if self.prereg else None,
            "overrides": list(self.overrides),
            "note": self.note,
        }


def resolve(
    prereg: Preregistration | None,
    *,
    baseline_root: str,
    tolerance: float | None,
    metrics: Sequence[str] | None,
    strict: bool,
    override: bool,
    run_id: str = "",
) -> Bar:
    """The bar to gate by: the pre-registered one, unless ``override`` allows the asked one.

    Raises BadPreregistration when what was asked differs from the pre-registered bar
    and ``override`` is not set.
    """
    if metrics is not None:
        _check_metrics(metrics, "--gate-metrics")
    if tolerance is not None:
        _check_tolerance(tolerance, "--tolerance")
    if prereg is None:
        return Bar(
            tuple(metrics or gated_metrics()),
            DEFAULT_TOLERANCE if tolerance is None else tolerance,
            strict,
            "given",
        )
    diffs = []
    if tolerance is not None and tolerance != prereg.tolerance:
        diffs.append(f"tolerance {prereg.tolerance:g} -> {tolerance:g}")
    if metrics is not None and sorted(metrics) != sorted(prereg.metrics):
        diffs.append(f"metrics {','.join(prereg.metrics)} -> {','.join(metrics)}")
    if strict and not prereg.strict:
        diffs.append("strict off -> on")
    if baseline_root != prereg.baseline_root:
        diffs.append(f"baseline root {prereg.baseline_root[:12]} -> {baseline_root[:12]}")
    if not diffs:
        return Bar(tuple(prereg.metrics), prereg.tolerance, prereg.strict, "pre-registered", prereg)
    if not override:
        raise BadPreregistration(
            f"run {run_id} pre-registered its gate (digest {digest(prereg)[:16]}); this gate "
            f"differs: {'; '.join(diffs)}. Drop those options to use the pre-registered bar, "
            "or pass --override to use yours (the output and JSON will say so)"
        )
    return Bar(
        tuple(metrics or prereg.metrics),
        prereg.tolerance if tolerance is None else tolerance,
        strict or prereg.strict,
        "overridden",
        prereg,
        tuple(diffs),
    )
