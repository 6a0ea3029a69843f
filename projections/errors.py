"""The projections' error tree: one root under ``BenchledgerError``, and the refusal.

A projection refuses to compute what it was asked when the runs do not allow it (runs that
differ where a comparison holds them fixed, a run given twice, a bad pre-registration, a
metric no suite audits). Each refusal is unusable input: exit 2 on the command line.
"""

from __future__ import annotations

from typing import ClassVar

from benchledger.ledger.errors import BenchledgerError


class ProjectionError(BenchledgerError):
    """Root of every error the projections package raises."""


class Refused(ProjectionError):
    """What was asked of a projection cannot be computed from these runs; the message says
    why (exit 2)."""

    exit_code: ClassVar[int] = 2
