"""The error tree: benchledger's one root, and the ledger's errors under it.

``BenchledgerError`` lives here, in the package every other one may import, so that every
refusal of every layer (ledger, protocols, harness, the library API, the command line)
derives from it and carries the exit code the command line ends with. Each error carries
its evidence as attributes.
"""

from __future__ import annotations

from typing import ClassVar


class BenchledgerError(Exception):
    """Root of every error benchledger raises on purpose; ``exit_code`` is the command
    line's (1: a check failed, 2: the input cannot be used)."""

    exit_code: ClassVar[int] = 1


class LedgerError(BenchledgerError):
    """Root of every error the ledger package raises."""


class UnusableInput(LedgerError):
    """The input cannot be used at all (missing file, not a ledger, unreachable database).

    The CLI maps this to exit code 2. ``where`` names the file or URL, ``line`` the
    1-based line when the input is a file of lines.
    """

    exit_code: ClassVar[int] = 2

    def __init__(self, where: str, problem: str, *, line: int | None = None) -> None:
        self.where = where
        self.problem = problem
        self.line = line
        loc = f"{where}:{line}" if line is not None else where
        super().__init__(f"{loc}: {problem}")


class AppendConflict(LedgerError):
    """Another writer already appended ``seq`` to ``stream``: re-read the head and retry."""

    def __init__(self, stream: str, seq: int) -> None:
        self.stream = stream
        self.seq = seq
        super().__init__(
            f"stream {stream!r} already has seq {seq}: another writer appended it first; "
            "re-read the stream head before appending again"
        )


class BundleConflict(LedgerError):
    """A bundle disagrees with events already stored; nothing was imported."""

    def __init__(self, stream: str, seq: int, stored_hash: str, bundle_hash: str) -> None:
        self.stream = stream
        self.seq = seq
        self.stored_hash = stored_hash
        self.bundle_hash = bundle_hash
        super().__init__(
            f"stream {stream!r} seq {seq}: stored event {stored_hash[:12]} differs from the "
            f"bundle's {bundle_hash[:12]}; the bundle was refused whole and nothing was written"
        )


class UnknownRun(LedgerError):
    """The ledger holds no run with this id (exit 2: nothing to check)."""

    exit_code: ClassVar[int] = 2

    def __init__(self, run_id: str, known: list[str]) -> None:
        """``known``: the ledger's run ids, the most recently recorded first
        (``Store.recent_run_ids``); the ten newest are named, the rest counted."""
        self.run_id = run_id
        self.known = known
        hint = "; the ledger holds no runs"
        if known:
            more = len(known) - 10
            rest = f" and {more} more (benchledger runs lists them)" if more > 0 else ""
            hint = f"; its runs, newest first: {', '.join(known[:10])}{rest}"
        super().__init__(f"no run {run_id!r} in this ledger{hint}")


class RunSealed(LedgerError):
    """The run is sealed; sealed runs take no more events."""

    def __init__(self, run_id: str) -> None:
        self.run_id = run_id
        super().__init__(f"run {run_id!r} is already sealed and takes no more events")


class DamagedEvent(LedgerError):
    """A stored row is not a valid event: the ledger was altered or corrupted.

    ``stream`` and ``seq`` locate the row, ``reason`` says what is wrong with it.
    Readers stop here; ``benchledger verify`` checks the whole run.
    """

    def __init__(self, stream: str, seq: int, reason: str) -> None:
        self.stream = stream
        self.seq = seq
        self.reason = " ".join(reason.split())  # decoder messages may wrap; keep one line
        self.run_id = stream.split("/", 1)[0]
        super().__init__(
            f"run {self.run_id!r} stream {stream!r} seq {seq}: the stored event is damaged "
            f"and cannot be read ({self.reason}); run `benchledger verify {self.run_id}` "
            "for the full check"
        )


class UnitsMissing(LedgerError):
    """A run cannot be sealed yet: planned units have not finished.

    ``missing`` names them as ``unit/attempt`` (the run record's plan order).
    """

    def __init__(self, run_id: str, missing: list[str]) -> None:
        self.run_id = run_id
        self.missing = list(missing)
        more = f" and {len(missing) - 10} more" if len(missing) > 10 else ""
        shown = ", ".join(missing[:10]) + more
        super().__init__(
            f"run {run_id!r} cannot be sealed: {len(missing)} planned units have not finished "
            f"({shown}); finish them (`benchledger run --resume {run_id}`), then seal again"
        )


class ImportRefused(UnusableInput):
    """``import`` refused a bundle whole, before writing anything: ``reason`` says why
    (its run is already here and not as this sealed whole, or it is not sealed)."""

    def __init__(self, path: str, run_id: str, reason: str) -> None:
        self.run_id = run_id
        self.reason = reason
        super().__init__(path, f"run {run_id!r} {reason}; nothing was imported")


class ImportedRun(UnusableInput):
    """The run arrived by ``import --allow-unsealed``: another ledger wrote its units, so
    this one never resumes, joins or seals it (that would pass them off as its own)."""

    def __init__(self, run_id: str, bundle: str, units: list[str]) -> None:
        self.run_id = run_id
        self.bundle = bundle
        self.units = list(units)
        shown = ", ".join(units[:5]) + (f" and {len(units) - 5} more" if len(units) > 5 else "")
        problem = (
            f"run {run_id!r} arrived by import (from {bundle}): its units ({shown or 'none'}) "
            "were written by another ledger, and this one never resumes, joins or seals them "
            "as its own; finish and seal the run where it ran, or start a new run here"
        )
        self.where, self.problem, self.line = run_id, problem, None
        LedgerError.__init__(self, problem)
