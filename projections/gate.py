"""The gate's verdict: a candidate run judged against a baseline by a bar, and its output.

The bar is the candidate's pre-registered one unless another is given (and, where it had
one, ``override`` allows it); the verdict names what regressed, or what was inconclusive
under ``strict``, or a run that broke its pre-registration. It passes only when every
gated metric resolved; a gate that could not decide says ``undecided`` and the size (k,
or protocols) that would (docs/metrics.md, "The gate"). ``benchledger gate`` and the
library's ``benchledger.gate`` both judge here and print ``text()`` or ``json()``.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Protocol

from benchledger.ledger.redaction import WithheldEvent
from benchledger.ledger.verified import OWN, Origin, RunEvents
from benchledger.projections.card import (
    INCONCLUSIVE,
    OUTCOME_KINDS,
    PASS,
    REGRESS,
    standing_lines,
)
from benchledger.projections.comparability import Incomparable
from benchledger.projections.errors import Refused
from benchledger.projections.passes import refuse
from benchledger.projections.prereg import (
    BadPreregistration,
    Bar,
    item_problems,
    recorded,
    resolve,
    run_started,
)
from benchledger.projections.stats import Interval, Size
from benchledger.projections.suites import ReadSuite, of_run


class GatedRates(Protocol):
    """What the gate reads of one metric compared: both rates and what the size resolves."""

    @property
    def name(self) -> str: ...
    @property
    def a_num(self) -> float: ...
    @property
    def a_den(self) -> int: ...
    @property
    def b_num(self) -> float: ...
    @property
    def b_den(self) -> int: ...
    @property
    def resolution(self) -> float | None: ...


class GatedRow(Protocol):
    """One gated metric's verdict as a suite's gate gives it (``ReadSuite.gate``)."""

    @property
    def row(self) -> GatedRates: ...
    @property
    def verdict(self) -> str: ...
    @property
    def better(self) -> Interval | None: ...
    @property
    def reason(self) -> str: ...


# Undecided has its own code: non-zero, so a CI step fails, yet told apart from a regression.
EXIT_PASSED, EXIT_FAILED, EXIT_UNDECIDED = 0, 1, 3


def baseline_of(candidate: RunEvents, baseline: str | None) -> str:
    """The baseline to gate against: ``baseline``, else the candidate's pre-registered one."""
    try:
        p = recorded(candidate)  # first: a run that shows no run_started cannot be gated at all
    except BadPreregistration as exc:
        raise Refused(f"cannot gate: {exc}") from None
    if baseline:
        return str(baseline)
    if p is None:
        raise Refused(f"gate needs --baseline: run {candidate.run_id} pre-registered no gate")
    return p.baseline_run


def bar_of(
    candidate: RunEvents,
    baseline: RunEvents,
    *,
    tolerance: float | None = None,
    metrics: Sequence[str] | None = None,
    strict: bool = False,
    override: bool = False,
) -> Bar:
    """The bar the gate applies: pre-registered, or given, or overridden (and reported)."""
    for run in (baseline, candidate):
        try:  # its record (k, agent, model...) and its bar live there: unreadable, no gate
            run_started(run)
        except BadPreregistration as exc:
            raise Refused(f"cannot gate: {exc}") from None
        hidden = {
            e.stream
            for e, _ in run.events
            if isinstance(e, WithheldEvent) and e.withheld_kind in OUTCOME_KINDS
        }
        if hidden:
            raise Refused(
                f"cannot gate: run {run.run_id} withholds the decisions of {len(hidden)} units "
                "(a redacted bundle); gate the full run"
            )
    try:
        return resolve(
            recorded(candidate),
            baseline_root=baseline.root,
            tolerance=tolerance,
            metrics=None if metrics is None else list(metrics),
            strict=strict,
            override=override,
            run_id=candidate.run_id,
        )
    except BadPreregistration as exc:
        raise Refused(f"cannot gate: {exc}") from None


class GateVerdict(NamedTuple):
    """How the candidate fared against the baseline under ``bar``: each gated metric's
    row, the one-line verdict, and whether it passed (the command's exit code)."""

    bar: Bar
    rows: tuple[GatedRow, ...]
    baseline: RunEvents
    candidate: RunEvents
    line: str  # "gate: passed (no regression): ...", "gate: undecided: ..." or "gate: FAILED: ..."
    passed: bool  # every gated metric resolved, none regressed
    broken: tuple[str, ...] = ()  # how the candidate broke its pre-registration
    undecided: bool = False  # nothing failed, but not every gated metric resolved
    allow_undecided: bool = False  # --allow-undecided: undecided exits 0 (still not passed)

    @property
    def outcome(self) -> str:
        """``passed``, ``undecided`` or ``failed``."""
        return "passed" if self.passed else "undecided" if self.undecided else "failed"

    @property
    def exit_code(self) -> int:
        """0 passed (or undecided, allowed), 1 failed, 3 undecided (the command's exit)."""
        if self.passed or (self.undecided and self.allow_undecided):
            return EXIT_PASSED
        return EXIT_UNDECIDED if self.undecided else EXIT_FAILED

    def text(self) -> str:
        """The verdict as ``gate`` prints it: the bar, who vouches for each run, the table."""
        gated = (("baseline", self.baseline), ("candidate", self.candidate))
        lines = [self.bar.describe()]  # the first line: which bar judges (OVERRIDDEN says so)
        lines += standing_lines(
            [(f"{who} {r.run_id}", r.standing, r.origin) for who, r in gated], named=True
        )
        lines += [f"verified {who}: {r.check.line()}" for who, r in gated if r.check is not None]
        table = _suite_gate(self.candidate).gate_text(list(self.rows), self.bar.tolerance)
        return "\n".join(lines) + "\n" + table + self.line + "\n"

    def json(self) -> str:
        """The verdict as JSON: the bar (and any override), every row, the exit code."""
        return json.dumps(
            {
                "candidate": {"run": self.candidate.run_id, "root": self.candidate.root,
                              **_stood(self.candidate)},
                "baseline": {"run": self.baseline.run_id, "root": self.baseline.root,
                             **_stood(self.baseline)},
                "bar": self.bar.as_json(),
                "rows": [
                    {
                        "metric": g.row.name,
                        "verdict": g.verdict,
                        "reason": g.reason,
                        **_sides_json(g),
                        "better_low": None if g.better is None else g.better.low,
                        "better_high": None if g.better is None else g.better.high,
                        "resolution": g.row.resolution,
                        "would_decide": _size_json(_needs(g)),
                    }
                    for g in self.rows
                ],
                "verdict": self.line,
                "outcome": self.outcome,
                "passed": self.passed,
                "exit": self.exit_code,
            },
            indent=2,
        )  # fmt: skip


def verdict(
    candidate: RunEvents, baseline: RunEvents, bar: Bar, *, allow_undecided: bool = False
) -> GateVerdict:
    """Judge ``candidate`` against ``baseline`` (both read through the door) by ``bar``.

    Passed only when every gated metric resolved (pass, or skipped: it does not apply)
    and one passed; undecided when nothing failed but that is not so (exit 3 unless
    ``allow_undecided``). Refused when the runs cannot be gated (unsealed, incomplete,
    all infra errors, coupled, or differing in protocol set, k, agent, platform or model).
    """
    suite = _suite_gate(candidate)
    cards = [of_run(run).card([run]) for run in (baseline, candidate)]
    try:
        judged: Sequence[GatedRow] = suite.gate(cards[0], cards[1], bar.tolerance)
        rows = [g for g in judged if g.row.name in bar.metrics]
    except Incomparable as exc:
        raise Refused(f"cannot gate: {exc}") from None
    by: dict[str, list[str]] = {}
    for g in rows:
        by.setdefault(g.verdict, []).append(g.row.name)
    broken = item_problems(bar.prereg, candidate) if bar.prereg else []
    passed = undecided = False
    counts = ", ".join(f"{len(names)} {v}" for v, names in sorted(by.items()))
    if broken:
        line = f"gate: FAILED: the run broke its pre-registration: {'; '.join(broken)}"
    elif REGRESS in by:
        line = f"gate: FAILED: {', '.join(by[REGRESS])} regressed"
    elif bar.strict and INCONCLUSIVE in by:
        line = f"gate: FAILED (--strict): {', '.join(by[INCONCLUSIVE])} inconclusive"
    elif INCONCLUSIVE in by or PASS not in by:
        undecided = True
        line = f"gate: undecided: {counts or 'no gated metric'}{_deciding(rows, bar.tolerance)}"
        line += (" (allowed by --allow-undecided)" if allow_undecided
                 else "; not a pass (--allow-undecided exits 0)")  # fmt: skip
    else:
        line, passed = f"gate: passed (no regression): {counts}", True
    if bar.note:  # not the candidate's pre-registered bar: overridden, or it had none
        line += f" [{bar.note}]"
    return GateVerdict(bar, tuple(rows), baseline, candidate, line, passed, tuple(broken),
                       undecided, allow_undecided)  # fmt: skip


def _sides_json(g: GatedRow) -> dict[str, Any]:
    """Both runs' num/den of a gated row; none where a run could not measure it."""
    if getattr(g.row, "not_measured", ""):
        return {"baseline": None, "candidate": None, "not_measured": g.reason}
    return {"baseline": {"num": g.row.a_num, "den": g.row.a_den},
            "candidate": {"num": g.row.b_num, "den": g.row.b_den}}  # fmt: skip


def _needs(g: GatedRow) -> Size | None:
    """The size that would resolve ``g`` (a plugin suite's rows may not say: None)."""
    needs = getattr(g, "needs", None)
    return needs if isinstance(needs, Size) else None


def _size_json(size: Size | None) -> dict[str, object] | None:
    if size is None:
        return None
    return {"k": size.k, "attempts": size.attempts, "protocols": size.protocols,
            "icc_assumed": size.icc_assumed}  # fmt: skip


def _deciding(rows: Sequence[GatedRow], tolerance: float) -> str:
    """What would decide the inconclusive metrics: the largest k on these protocols (or
    protocols at this k) any of them needs, and those no size decides."""
    open_rows = [g for g in rows if g.verdict == INCONCLUSIVE]
    sized = [(g.row.name, n) for g in open_rows if (n := _needs(g)) is not None]
    other = [g.row.name for g in open_rows if _needs(g) is None]
    parts = []
    if sized:
        at = (f"{max(n.protocols for _, n in sized)} protocols in each metric's denominator "
              f"at k={sized[0][1].k}")  # fmt: skip
        ks = [n.attempts for _, n in sized if n.attempts is not None]
        stuck = [name for name, n in sized if n.attempts is None]
        if ks:
            guess = " if attempts are independent" if any(n.icc_assumed for _, n in sized) else ""
            but = f" (no k decides {', '.join(stuck)}: more protocols do)" if stuck else ""
            at = f"k={max(ks)} on these protocols{guess}{but}, or {at}"
        parts.append(f"too small to decide {tolerance:g} at this size; would decide: {at}")
    if other:
        parts.append(f"not a matter of size: {', '.join(other)} (see why)")
    if not open_rows and not any(g.verdict == PASS for g in rows):
        parts.append("no gated metric applies to these runs")
    return "".join(f" — {p}" for p in parts)


class _Gating(NamedTuple):
    """A suite's gate and how its verdict table reads."""

    gate: Callable[[object, object, float], Sequence[GatedRow]]
    gate_text: Callable[[list[GatedRow], float], str]


def _suite_gate(run: RunEvents) -> _Gating:
    """The gate of ``run``'s suite; Refused, naming the suites that gate, when it has none."""
    suite: ReadSuite = of_run(run)
    if suite.gate is None or suite.gate_text is None:
        refuse(run.run_id, suite, "gate", lambda s: s.gate is not None, "gate judges")
    assert suite.gate is not None and suite.gate_text is not None
    return _Gating(suite.gate, suite.gate_text)


def _stood(run: RunEvents) -> dict[str, object]:
    """A gated run's JSON ``authentication`` and ``origin`` (``open_run`` set them)."""
    if run.standing is None:
        return {}
    origin = run.origin or Origin(OWN)
    return {"authentication": run.standing.as_json(), "origin": origin.as_json()}
