"""The protocols package's error tree: one root, problems carried as attributes."""

from __future__ import annotations

from typing import ClassVar, NamedTuple

from benchledger.ledger.errors import BenchledgerError


class Problem(NamedTuple):
    """One thing wrong with an input file: where it is and what is wrong."""

    file: str
    line: int | None
    field: str
    message: str

    def __str__(self) -> str:
        loc = f"{self.file}:{self.line}" if self.line is not None else self.file
        field = f" {self.field}:" if self.field else ""
        return f"{loc}:{field} {self.message}"


class ProtocolError(BenchledgerError):
    """Root of every error the protocols package raises."""


class InvalidInput(ProtocolError):
    """A protocol or case file (or set) is unusable; ``problems`` lists every reason found.

    The CLI prints one line per problem and exits 2.
    """

    exit_code: ClassVar[int] = 2

    def __init__(self, problems: list[Problem]) -> None:
        self.problems = problems
        first = str(problems[0]) if problems else "invalid input"
        more = f" (and {len(problems) - 1} more problems)" if len(problems) > 1 else ""
        super().__init__(first + more)
