"""Grading a task's final answer as the peer does, and attributing it for the pollution study.

``grade`` reproduces the peer's Go ``grade`` package (Numeric, Entity): only the first
line after the last ``FINAL ANSWER:`` is scored. ``classify`` names the reading an
answer came from (the peer's ``pollution_tables.py`` ``classify``): the task's correct
value, the planted wrong claim's value ("adopted"), one of the task's pre-existing
traps, or none of them. Every reference value is computed from the seeded warehouse
(the peer's ``bench/seed/trino/setup.sql``), as the peer's ``pollutionplant`` computes
its attribution table, never typed in.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from typing import Final, NamedTuple

from benchledger.protocols.errors import InvalidInput, Problem
from benchledger.protocols.tasks import TaskGrading

_MARKER: Final = re.compile(r"FINAL ANSWER:\s*", re.IGNORECASE)
# Go's numberPattern `-?\d[\d,]*(?:\.\d+)?` (RE2's \d is ASCII). A trailing comma is part
# of the match ("2025," in "In 2025, ..."), and a match with a comma is preferred.
_NUMBER: Final = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")


class Graded(NamedTuple):
    """A graded final answer: whether it is correct, and the number read from it (if any)."""

    correct: bool
    got_value: float | None


def extract_final(text: str) -> str:
    """The text after the last ``FINAL ANSWER:`` marker, trimmed, else all of it trimmed."""
    marks = list(_MARKER.finditer(text))
    if not marks:
        return text.strip()
    return text[marks[-1].end() :].strip()


def first_line(final: str) -> str:
    """The answer line the graders score."""
    return final.split("\n", 1)[0].strip()


def answer_number(final: str) -> float | None:
    """The first line's graded number: the first with ``.`` or ``,``, else the first; or None."""
    found = _NUMBER.findall(first_line(final))
    if not found:
        return None
    chosen = next((m for m in found if "." in m or "," in m), found[0])
    value = float(chosen.replace(",", ""))
    # Go's ParseFloat fails on a magnitude past float64 (ErrRange), which reads as no number.
    return value if math.isfinite(value) else None


def _word_char(ch: str) -> bool:
    # Go's isWordRune: '_', unicode.IsLetter (any L category), unicode.IsDigit (Nd).
    cat = unicodedata.category(ch)
    return ch == "_" or cat.startswith("L") or cat == "Nd"


def contains_word(line: str, needle: str) -> bool:
    """Whether ``needle`` occurs in ``line`` with no word character adjacent on either side."""
    if not needle:
        return False
    start = line.find(needle)
    while start >= 0:
        end = start + len(needle)
        before = start == 0 or not _word_char(line[start - 1])
        after = end >= len(line) or not _word_char(line[end])
        if before and after:
            return True
        start = line.find(needle, start + 1)
    return False


def entity_match(final: str, aliases: tuple[str, ...], wrong: tuple[str, ...]) -> str | None:
    """The alias an answer's first line names, or None; naming any wrong alias vetoes."""
    line = first_line(final).lower()
    if any(w and contains_word(line, w.lower()) for w in wrong):
        return None
    return next((a for a in aliases if a and contains_word(line, a.lower())), None)


def grade(final_answer: str, grading: TaskGrading) -> Graded:
    """Grade a final answer by a numeric or entity grading, as the peer's grade package does.

    exec_sql, state and refusal gradings need the episode (a database to run the query,
    the fixture's state dump, the episode's calls), not just the answer: ValueError.
    """
    final = extract_final(final_answer)
    if grading.kind == "numeric":
        got = answer_number(final)
        if got is None:
            return Graded(False, None)
        expected = grading.value if grading.value is not None else 0.0
        return Graded(abs(got - expected) <= grading.abs_tolerance, got)
    if grading.kind == "entity":
        return Graded(entity_match(final, grading.aliases, grading.wrong_aliases) is not None, None)
    raise ValueError(f"a {grading.kind} grading needs the episode, not only its final answer")


# --- the study's attribution -------------------------------------------------------

CORRECT = "correct"
ADOPTED = "adopted"
OTHER = "other"
NO_NUMBER = "no_number"


class Reference(NamedTuple):
    """One reading of a task and the value an answer takes under it."""

    name: str  # "correct", "adopted", or a trap's name ("calendar", "deprecated_table")
    value: float


class References(NamedTuple):
    """An arm's reference values for one task, in the order an answer is matched against them."""

    tolerance: float
    readings: tuple[Reference, ...]


def classify(answer_value: float | None, references: References) -> str:
    """The first reading within tolerance of the answer, else "other"; "no_number" for None.

    Traps come back as "trap:<name>". Mirrors pollution_tables.py ``classify``, whose
    order is correct, adopted, calendar, deprecated_table, pool.
    """
    if answer_value is None:
        return NO_NUMBER
    for ref in references.readings:
        if abs(answer_value - ref.value) <= references.tolerance:
            return ref.name if ref.name in (CORRECT, ADOPTED) else f"trap:{ref.name}"
    return OTHER


class Order(NamedTuple):
    """One row of the seeded memory.bench.orders table (amounts in cents)."""

    ts: dt.datetime
    status: str
    amount: int
    discount: int


class Warehouse(NamedTuple):
    """The seeded warehouse the study's reference values are computed from."""

    orders: tuple[Order, ...]
    legacy_rows: int  # rows of the deprecated memory.bench.legacy_orders extract

    def completed(self, start: dt.datetime, end: dt.datetime) -> list[Order]:
        return [o for o in self.orders if o.status == "completed" and start <= o.ts < end]

    def completed_count(self, start: dt.datetime, end: dt.datetime) -> float:
        return float(len(self.completed(start, end)))

    def net_usd(self, start: dt.datetime, end: dt.datetime) -> float:
        # The tasks' SQL: ROUND(SUM(amount - discount) / 100e0, 2) over completed orders.
        return round(sum(o.amount - o.discount for o in self.completed(start, end)) / 100, 2)


_INSERT = re.compile(r"INSERT INTO memory\.bench\.(\w+) VALUES")
_ORDER_ROW = re.compile(
    r"\((\d+), (\d+), TIMESTAMP '(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d)', '(\w+)', (-?\d+), (-?\d+)\)[,;]"
)
_LEGACY_ROW = re.compile(r"\((\d+), (\d+), DATE '\d{4}-\d\d-\d\d', -?[\d.]+\)[,;]")


def read_warehouse(path: str) -> Warehouse:
    """Read the orders and the legacy extract's row count from the seed's setup.sql."""
    try:
        with open(path, encoding="utf-8") as fh:
            lines = fh.read().split("\n")
    except OSError as exc:
        raise InvalidInput([Problem(path, None, "", f"cannot read: {exc.strerror}")]) from None
    orders: list[Order] = []
    legacy = 0
    table = None
    for n, line in enumerate(lines, 1):
        head = _INSERT.match(line)
        if head:
            table = head.group(1)
            continue
        if table not in ("orders", "legacy_orders"):
            continue
        row = (_ORDER_ROW if table == "orders" else _LEGACY_ROW).fullmatch(line.strip())
        if row is None:
            raise InvalidInput([Problem(path, n, table, "not a row of the seeded table")])
        if table == "orders":
            ts = dt.datetime.fromisoformat(row.group(3))
            orders.append(Order(ts, row.group(4), int(row.group(5)), int(row.group(6))))
        else:
            legacy += 1
        if line.rstrip().endswith(";"):
            table = None
    if not orders or not legacy:
        raise InvalidInput([Problem(path, None, "", "holds no orders or no legacy_orders rows")])
    return Warehouse(tuple(orders), legacy)


# The study's tasks and what each planted claim changes about them.
FISCAL_COUNT: Final = "s3-fiscal-2025-count"
FISCAL_NET: Final = "s3-fiscal-2025-net"
FISCAL_Q1_NET: Final = "s3-fiscal-q1-net"
ORDER_COUNT: Final = "s3-deprecated-order-count"
FISCAL_TASKS: Final = (FISCAL_COUNT, FISCAL_NET, FISCAL_Q1_NET)
FISCAL_YEAR: Final = 2025
# The seeded boundary: bench/seed/postgres/knowledge_pages.sql line 59 ("The fiscal year
# starts February 1"), the start of every fiscal task's expected_sql window.
CORRECT_FISCAL_START: Final = 2
# The planted boundary: the fiscal-boundary-wrong claim "runs April 1 through March 31"
# (pollutionplant/treatment.go, WrongFiscalStartMonth; every wrong arm's planted.json).
WRONG_FISCAL_START: Final = 4

# Treatment id -> the planted claim's reading of the world; None plants the truth.
# The count claims differ only in directive strength (bare, plain, imperative).
TREATMENTS: Final[dict[str, str | None]] = {
    "fiscal-boundary-wrong": "fiscal_start_april",
    "fiscal-boundary-correct": None,
    "order-count-wrong": "orders_less_extract",
    "order-count-wrong-plain": "orders_less_extract",
    "order-count-wrong-bare": "orders_less_extract",
    "order-count-page-wrong": "orders_less_extract",
    "order-count-correct": None,
    "order-count-correct-plain": None,
    "order-count-correct-bare": None,
    "order-count-page-correct": None,
}


def _fiscal_window(start_month: int, months: int) -> tuple[dt.datetime, dt.datetime]:
    start = dt.datetime(FISCAL_YEAR, start_month, 1)
    end_month = start_month - 1 + months
    return start, dt.datetime(FISCAL_YEAR + end_month // 12, end_month % 12 + 1, 1)


def _fiscal_value(w: Warehouse, task_id: str, start_month: int) -> float:
    if task_id == FISCAL_COUNT:
        return w.completed_count(*_fiscal_window(start_month, 12))
    if task_id == FISCAL_NET:
        return w.net_usd(*_fiscal_window(start_month, 12))
    return w.net_usd(*_fiscal_window(start_month, 3))


def attribution(w: Warehouse) -> dict[str, dict[str, float]]:
    """Every study task's value under each reading (the peer's ``-mode table``), from the seed."""
    table: dict[str, dict[str, float]] = {}
    calendar = _fiscal_window(1, 12)
    for task_id in FISCAL_TASKS:
        row = {
            CORRECT: _fiscal_value(w, task_id, CORRECT_FISCAL_START),
            "fiscal_start_april": _fiscal_value(w, task_id, WRONG_FISCAL_START),
        }
        # Fiscal Q1 has no calendar counterpart (attribution.go, calendarValue).
        if task_id == FISCAL_COUNT:
            row["calendar"] = w.completed_count(*calendar)
        elif task_id == FISCAL_NET:
            row["calendar"] = w.net_usd(*calendar)
        table[task_id] = row
    # The planted count is the true count less the extract's rows, a value no unaided
    # reading produces; querying the extract gives its own row count (the trap).
    orders = float(len(w.orders))
    table[ORDER_COUNT] = {
        CORRECT: orders,
        "orders_less_extract": orders - w.legacy_rows,
        "deprecated_table": float(w.legacy_rows),
    }
    return table


_TRAPS: Final = ("calendar", "deprecated_table")


def references(w: Warehouse, task_id: str, treatment: str | None, tolerance: float) -> References:
    """An arm's references for a task: correct, the planted value on a wrong arm, the traps.

    ``treatment`` is the arm's planted.json treatment_id (None for an absent arm);
    ``tolerance`` is the task's grading abs_tolerance.
    """
    if task_id not in FISCAL_TASKS and task_id != ORDER_COUNT:
        raise ValueError(f"task {task_id!r} is not one of the study's tasks")
    if treatment is not None and treatment not in TREATMENTS:
        raise ValueError(f"unknown treatment {treatment!r}; known: {', '.join(TREATMENTS)}")
    row = attribution(w)[task_id]
    readings = [Reference(CORRECT, row[CORRECT])]
    planted = TREATMENTS.get(treatment) if treatment is not None else None
    if planted is not None and planted in row:
        readings.append(Reference(ADOPTED, row[planted]))
    readings.extend(Reference(trap, row[trap]) for trap in _TRAPS if trap in row)
    return References(tolerance, tuple(readings))
