"""Grading a task's final answer as the peer does, and attributing it for the pollution study.

``grade`` reproduces the peer's Go ``grade`` package (Numeric, Entity): only the first
line after the last ``FINAL ANSWER:`` is scored. ``classify`` names the reading an
answer came from (the peer's ``pollution_tables.py`` ``classify``): the task's correct
value, the planted wrong claim's value ("adopted"), one of the task's pre-existing
traps, or none of them. Every reference value is computed from the seeded warehouse
(the peer's ``bench/seed/trino/setup.sql``), as the peer's ``pollutionplant`` computes
its attribution table, never typed in: the task's expected_sql evaluated, the planted
claim's reading taken from its own words, the traps its task file names. No task or
treatment is named here.
"""

from __future__ import annotations

import datetime as dt
import math
import re
import unicodedata
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from benchledger.protocols.errors import InvalidInput, Problem
from benchledger.protocols.tasks import Task, TaskGrading

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


# The cross-fixture runner's (pkrun's) answer rule, as the peer's pollution_tables.py
# ``pk_value`` reads an attempt: the first "FINAL ANSWER:" (bold marks allowed) followed by a
# run of digits, commas, points and minus signs, read as a number once the commas are gone;
# UNAVAILABLE, no such marker, or a run that is no number: no number.
FINAL_NUMBER: Final = "final_number"
NUMERIC_KINDS: Final = ("numeric", FINAL_NUMBER)  # gradings read as one number
_FINAL_NUMBER: Final = re.compile(r"FINAL ANSWER:\s*\**\s*([-\d,.]+|UNAVAILABLE)", re.IGNORECASE)


def final_number(final_answer: str) -> float | None:
    """The number pkrun's rule reads from a whole final answer (``FINAL_NUMBER``), or None."""
    found = _FINAL_NUMBER.search(final_answer)
    if found is None or found.group(1).upper() == "UNAVAILABLE":
        return None
    try:
        value = float(found.group(1).replace(",", ""))
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def grade(final_answer: str, grading: TaskGrading) -> Graded:
    """Grade a final answer by a numeric or entity grading, as the peer's grade package does
    (or by pkrun's ``FINAL_NUMBER`` rule, as its recompute script does).

    exec_sql, state and refusal gradings need the episode (a database to run the query,
    the fixture's state dump, the episode's calls), not just the answer: ValueError.
    """
    if grading.kind == FINAL_NUMBER:
        value = final_number(final_answer)
        if value is None:
            return Graded(False, None)
        expected = grading.value if grading.value is not None else 0.0
        return Graded(abs(value - expected) <= grading.abs_tolerance, value)
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


# --- a task's readings: from its expected_sql, the seeded warehouse and the planted claim ---
#
# Nothing below names a task or a treatment. A task's correct value is its expected_sql
# evaluated over the seeded warehouse (the peer's pollutionplant computes its attribution
# table from the same fixture); the planted reading is read from the claim's own words:
#
# - a boundary claim states the start of a period ("runs April 1 through March 31"): a
#   task over a dated window reads it as the same window begun on that month;
# - a count claim states one number about a table ("memory.bench.orders table holds 1140
#   order records"): a task counting that whole table reads it as that number.
#
# A claim whose reading is the task's correct value plants nothing to adopt (the correct
# arms). The traps are the misreadings the task file names (trap_classes) that the seed
# gives a value for (attribution.go): fiscal_calendar, a year-long window read as the
# calendar year (a quarter has none); deprecated_table, a whole-table count read off the
# deprecated extract (its own row count).

_MONTH_NAMES: Final = (
    "January", "February", "March", "April", "May", "June", "July", "August", "September",
    "October", "November", "December",
)  # fmt: skip
# "<Month> <day> through <Month> <day>": a period's boundary, its start month first.
_SPAN: Final = re.compile(
    rf"\b(?P<start>{'|'.join(_MONTH_NAMES)}) [0-9]{{1,2}} through "
    rf"(?:{'|'.join(_MONTH_NAMES)}) [0-9]{{1,2}}\b"
)
_CLAIM_NUMBER: Final = re.compile(r"(?<![\w.-])[0-9][0-9,]*(?:\.[0-9]+)?(?![\w-])")
_TABLE: Final = r"(?P<table>[A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)"
_AS: Final = r"(?:\s+AS\s+\w+)?"
_AGGREGATE: Final = (  # COUNT(*), or the net revenue in USD of the peer's revenue policy
    r"(?P<agg>COUNT\s*\(\s*\*\s*\)"
    r"|ROUND\s*\(\s*SUM\s*\(\s*amount\s*-\s*discount\s*\)\s*/\s*100e0\s*,\s*2\s*\))"
)
# The two shapes of the seeded tasks' expected_sql the warehouse model evaluates: an
# aggregate over a whole table, and one over completed orders in [from, to).
_WHOLE: Final = re.compile(rf"^\s*SELECT\s+{_AGGREGATE}{_AS}\s+FROM\s+{_TABLE}\s*;?\s*$", re.I)
_WINDOWED: Final = re.compile(
    rf"^\s*SELECT\s+{_AGGREGATE}{_AS}\s+FROM\s+{_TABLE}\s+WHERE\s+status\s*=\s*'completed'"
    r"\s+AND\s+(?P<col>\w+)\s*>=\s*TIMESTAMP\s+'(?P<start>[0-9: -]+)'"
    r"\s+AND\s+(?P=col)\s*<\s*TIMESTAMP\s+'(?P<end>[0-9: -]+)'\s*;?\s*$",
    re.I,
)
# The task files' trap classes (trap_classes) the seeded warehouse gives a value for.
_CALENDAR_TRAP: Final = "fiscal_calendar"  # a year-long window read as the calendar year
_EXTRACT_TRAP: Final = "deprecated_table"  # a whole-table count read off the extract
_ORDERS: Final = "memory.bench.orders"  # the seeded table Warehouse models (read_warehouse)


class Query(NamedTuple):
    """What a task's expected_sql computes over the seeded orders."""

    rows: bool  # COUNT(*), else the net revenue in USD
    table: str
    window: tuple[dt.datetime, dt.datetime] | None  # completed orders in it; None: every row

    def months(self) -> int:
        if self.window is None:
            return 0
        start, end = self.window
        return (end.year - start.year) * 12 + end.month - start.month

    def value(self, w: Warehouse, start_month: int | None = None) -> float:
        """The query's value; ``start_month``: its window begun on that month instead."""
        if self.window is None:
            return float(len(w.orders)) if self.rows else round(
                sum(o.amount - o.discount for o in w.orders) / 100, 2)  # fmt: skip
        start, end = self.window
        if start_month is not None:
            start, end = _shifted(start, start_month, self.months())
        return w.completed_count(start, end) if self.rows else w.net_usd(start, end)


def _shifted(start: dt.datetime, month: int, months: int) -> tuple[dt.datetime, dt.datetime]:
    begin = dt.datetime(start.year, month, 1)
    last = month - 1 + months
    return begin, dt.datetime(start.year + last // 12, last % 12 + 1, 1)


def read_query(expected_sql: str) -> Query:
    """The task's expected_sql as a Query; ValueError for one the warehouse model cannot
    evaluate (another table, another aggregate, a window not on whole months)."""
    whole, windowed = _WHOLE.match(expected_sql), _WINDOWED.match(expected_sql)
    found = whole or windowed
    if found is None or found["table"].lower() != _ORDERS:
        raise ValueError("its expected_sql is not an aggregate the seeded warehouse evaluates")
    count = found["agg"].upper().startswith("COUNT")
    if windowed is None:
        return Query(count, found["table"], None)
    try:
        start, end = (dt.datetime.fromisoformat(windowed[k].strip()) for k in ("start", "end"))
    except ValueError:
        raise ValueError("its expected_sql's window is not two timestamps") from None
    if any((t.day, t.hour, t.minute, t.second) != (1, 0, 0, 0) for t in (start, end)):
        raise ValueError("its expected_sql's window does not run between month starts")
    query = Query(count, found["table"], (start, end))
    if query.months() <= 0:
        raise ValueError("its expected_sql's window is empty")
    return query


class ClaimReading(NamedTuple):
    """What a planted claim says, read from its own words."""

    start_month: int | None = None  # a boundary claim: the month its period starts
    number: float | None = None  # a count claim: the one number it states
    about: str = ""  # the text the number is stated in (its needle)


def claim_reading(planted: Mapping[str, Any] | None) -> ClaimReading | None:
    """The planted claim's reading (its needle first, else its text); None: nothing planted,
    or a claim stating no boundary and not exactly one number."""
    if not planted:
        return None
    for key in ("needle", "text"):
        said = planted.get(key)
        if not isinstance(said, str):
            continue
        span = _SPAN.search(said)
        if span is not None:
            return ClaimReading(start_month=_MONTH_NAMES.index(span["start"]) + 1, about=said)
        numbers = _CLAIM_NUMBER.findall(said)
        if len(numbers) == 1:
            return ClaimReading(number=float(numbers[0].replace(",", "")), about=said)
    return None


def _names(text: str, table: str) -> bool:
    return re.search(rf"(?<![\w.]){re.escape(table)}(?![\w.])", text, re.I) is not None


def references(w: Warehouse, task: Task, planted: Mapping[str, Any] | None) -> References:
    """A task's readings over the seeded warehouse: correct, the planted claim's value where
    it reads on the task and differs from correct, then the traps. ``planted`` is the arm's
    planted.json (None: nothing planted). ValueError for a task whose expected_sql the
    warehouse model does not evaluate."""
    query = read_query(task.expected_sql)
    tolerance = task.grading.abs_tolerance
    correct = query.value(w)
    readings = [Reference(CORRECT, correct)]
    claim = claim_reading(planted)
    adopted = None
    if claim is not None and claim.start_month is not None and query.window is not None:
        adopted = query.value(w, claim.start_month)
    elif claim is not None and claim.number is not None and query.window is None:
        adopted = claim.number if _names(claim.about, query.table) else None
    if adopted is not None and abs(adopted - correct) > tolerance:
        readings.append(Reference(ADOPTED, adopted))
    traps, begins = task.trap_classes, query.window[0].month if query.window else 0
    if _CALENDAR_TRAP in traps and query.months() == 12 and begins != 1:
        readings.append(Reference("calendar", query.value(w, 1)))  # the calendar year
    if _EXTRACT_TRAP in traps and query.window is None and query.rows:
        readings.append(Reference(_EXTRACT_TRAP, float(w.legacy_rows)))
    return References(tolerance, tuple(readings))
