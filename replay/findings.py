"""What a replay found: the mismatches (each a structured diff), what was compared, and why not.

One ``Report`` for every level, so the command line, ``replay check`` and the pytest
plugin print and judge them the same way. The first mismatch is the one to look at:
later ones are often its consequences.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.verdict import Failure

EXIT_OK, EXIT_MISMATCH = 0, 1
LEVELS: Final = ("rederive", "full")
# Where full replay takes tool results from; here, not in ``replay.full``, so the command
# line can offer the choice without importing the harness.
TOOLS: Final = ("log", "live")
_WIDTH: Final = 200


@dataclass(frozen=True)
class Mismatch:
    """One recorded value and what replay produced instead.

    ``seq`` is the recorded event's (-1: the run as a whole, e.g. a metric); ``what`` the
    check, metric or episode; ``field`` the field within it (a dotted path for traces).
    """

    stream: str
    seq: int
    what: str
    field: str
    recorded: Any
    replayed: Any

    def as_json(self) -> dict[str, Any]:
        return {
            "stream": self.stream,
            "seq": self.seq,
            "what": self.what,
            "field": self.field,
            "recorded": self.recorded,
            "replayed": self.replayed,
        }

    def where(self) -> str:
        at = f" seq {self.seq}" if self.seq >= 0 else ""
        return f"stream {self.stream}{at} {self.what} field {self.field}"


def shown(value: Any, width: int = _WIDTH) -> str:
    """A value on one line, as canonical JSON, cut at ``width`` characters."""
    try:
        text = canonical_json(value).decode()
    except TypeError:
        text = repr(value)
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class Report:
    """The outcome of one replay of one run (or bundle) at one level."""

    level: str  # rederive | full
    target: str  # the run id or bundle path replayed
    run_id: str = ""
    failure: Failure | None = None  # the input did not verify: nothing was replayed
    mismatches: list[Mismatch] = field(default_factory=list)
    first: Mismatch | None = None  # the detailed first divergence (default: mismatches[0])
    compared: dict[str, int] = field(default_factory=dict)  # what was compared, how many
    skipped: dict[str, int] = field(default_factory=dict)  # what could not be, and why
    notes: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.failure is None and not self.mismatches

    @property
    def status(self) -> int:
        return EXIT_OK if self.ok else EXIT_MISMATCH

    @property
    def first_mismatch(self) -> Mismatch | None:
        return self.first or (self.mismatches[0] if self.mismatches else None)

    def labels(self) -> tuple[str, str]:
        """How the two sides of a mismatch are named at this level."""
        return ("expected", "actual") if self.level == "full" else ("recorded", "re-derived")

    def summary(self) -> str:
        """One line: what was compared and how it went."""
        counts = ", ".join(f"{n} {what}" for what, n in self.compared.items() if n) or "nothing"
        skipped = ", ".join(f"{n} {why}" for why, n in self.skipped.items() if n)
        tail = f"; skipped {skipped}" if skipped else ""
        if self.failure is not None:
            return f"FAILED verification of {self.target}: {self.failure}"
        if self.ok:
            return f"ok {self.level} {self.target}: compared {counts}, all equal{tail}"
        n = len(self.mismatches)
        return (
            f"FAILED {self.level} {self.target}: {n} mismatch{'es' if n != 1 else ''} "
            f"(compared {counts}){tail}"
        )

    def lines(self) -> list[str]:
        """The report as text: the summary, the first mismatch as a diff, the notes."""
        out = [self.summary()]
        if self.failure is not None:
            if self.failure.expected or self.failure.found:
                out += [f"  expected: {self.failure.expected}", f"  found:    {self.failure.found}"]
            out.append("  nothing was replayed: the input is not intact (see benchledger verify)")
        first = self.first_mismatch
        if first is not None:
            recorded, replayed = self.labels()
            out += [
                f"first mismatch: {first.where()}",
                f"  {recorded + ':':<11} {shown(first.recorded)}",
                f"  {replayed + ':':<11} {shown(first.replayed)}",
            ]
        out += [f"note: {note}" for note in self.notes]
        return out

    def as_json(self) -> dict[str, Any]:
        first = self.first_mismatch
        return {
            "level": self.level,
            "target": self.target,
            "run": self.run_id,
            "ok": self.ok,
            "verification": None if self.failure is None else str(self.failure),
            "mismatches": len(self.mismatches),
            "first": None if first is None else first.as_json(),
            "all": [m.as_json() for m in self.mismatches],
            "compared": self.compared,
            "skipped": self.skipped,
            "notes": self.notes,
        }


def first_difference(recorded: Any, replayed: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first leaf where two JSON values differ: (dotted path, recorded, replayed)."""
    if isinstance(recorded, dict) and isinstance(replayed, dict):
        for key in sorted(set(recorded) | set(replayed)):
            here = f"{path}.{key}" if path else str(key)
            if key not in recorded or key not in replayed:
                return here, recorded.get(key), replayed.get(key)
            found = first_difference(recorded[key], replayed[key], here)
            if found:
                return found
        return None
    if isinstance(recorded, list) and isinstance(replayed, list):
        for i, (a, b) in enumerate(zip(recorded, replayed, strict=False)):
            found = first_difference(a, b, f"{path}[{i}]")
            if found:
                return found
        if len(recorded) != len(replayed):
            i = min(len(recorded), len(replayed))
            return (
                f"{path}[{i}]",
                recorded[i] if i < len(recorded) else None,
                replayed[i] if i < len(replayed) else None,
            )
        return None
    if recorded != replayed or type(recorded) is not type(replayed):
        return path, recorded, replayed
    return None
