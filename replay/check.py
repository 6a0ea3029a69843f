"""``replay check DIR``: every bundle in a folder must verify and re-derive (CI's gate)."""

from __future__ import annotations

import os
from typing import NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.replay.findings import Report, shown
from benchledger.replay.levels import replay

SUFFIXES = (".jsonl", ".jsonl.gz")


class Checked(NamedTuple):
    """One bundle's outcome: its report, or why it could not be used at all."""

    path: str
    report: Report | None
    error: str = ""

    @property
    def ok(self) -> bool:
        return self.report is not None and self.report.ok

    def line(self) -> str:
        """One line for the bundle: ok, or the first problem with where it is."""
        if self.report is None:
            return f"ERROR {self.path}: {self.error}"
        r = self.report
        if r.ok:
            return r.summary()
        first = r.first_mismatch
        if first is None:
            return r.summary()
        recorded, replayed = r.labels()
        return (
            f"{r.summary()}; first: {first.where()}: {recorded} {shown(first.recorded)}, "
            f"{replayed} {shown(first.replayed)}"
        )


def bundles_in(directory: str) -> list[str]:
    """The bundle files of ``directory``, sorted; UnusableInput if it is not a folder of any."""
    if not os.path.isdir(directory):
        raise UnusableInput(directory, "not a folder (replay check takes a folder of bundles)")
    found = sorted(
        os.path.join(directory, name)
        for name in os.listdir(directory)
        if name.endswith(SUFFIXES) and os.path.isfile(os.path.join(directory, name))
    )
    if not found:
        raise UnusableInput(directory, "holds no bundles (*.jsonl or *.jsonl.gz)")
    return found


def check_bundle(path: str, *, level: str = "rederive", protocols: str | None = None) -> Checked:
    """Verify and replay one bundle; an unusable bundle is an error, never an exception."""
    try:
        return Checked(path, replay(path, level=level, protocols=protocols))
    except UnusableInput as exc:
        return Checked(path, None, str(exc))


def check_dir(
    directory: str, *, level: str = "rederive", protocols: str | None = None
) -> list[Checked]:
    """Every bundle of ``directory`` checked, in name order."""
    return [check_bundle(p, level=level, protocols=protocols) for p in bundles_in(directory)]
