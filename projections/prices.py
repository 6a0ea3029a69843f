"""A dated model price table and what a run's recorded tokens cost at it (docs/metrics.md).

The table is TOML: a ``date`` the prices were in effect, a ``source`` naming where they
come from, and one ``[models."ID"]`` row per model with ``input``, ``output``,
``cache_read`` and ``cache_creation`` in USD per million tokens (optional: ``aliases``,
``nominal``, ``note``). The packaged table (``projections/data/prices.toml``) carries the
prices the peer's knowledge-pollution report states. A cost is never recorded: it is the
run's token totals (``projections.usage``) times the row its model matches.

A recorded model id matches a row by its id exactly, else by one of the row's
``aliases``, else by prefix: ``claude-sonnet-5-20260901`` is priced as ``claude-sonnet-5``
when the id starts with the row's id followed by ``-`` (the longest such row wins), as a
dated snapshot of a model is priced as the model.
"""

from __future__ import annotations

import datetime as dt
import functools
import math
import os
import re
import tomllib
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Final, NamedTuple

from benchledger.ledger import UnusableInput
from benchledger.projections.usage import TOKEN_KINDS, Usage

PACKAGED: Final = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data", "prices.toml")
PRICE_FIELDS: Final = TOKEN_KINDS  # input, output, cache_read, cache_creation
ROW_FIELDS: Final = (*PRICE_FIELDS, "aliases", "nominal", "note")
TOP_FIELDS: Final = ("date", "source", "models")
PER: Final = 1_000_000  # prices are per million tokens
# Recorded model names that say no model was called (the scripted agent's runs).
NO_MODEL: Final = frozenset({"", "none", "scripted"})


class Price(NamedTuple):
    """One model's row: USD per million tokens of each kind."""

    model: str
    input: float
    output: float
    cache_read: float
    cache_creation: float
    aliases: tuple[str, ...] = ()
    nominal: bool = False
    note: str = ""

    def per_million(self, kind: str) -> float:
        """The price of one million tokens of ``kind`` (one of ``TOKEN_KINDS``)."""
        return float(getattr(self, kind))


class PriceTable(NamedTuple):
    """A dated price table, the file it was read from and its rows by model id."""

    date: dt.date
    source: str
    path: str
    models: Mapping[str, Price]

    def lookup(self, model: str) -> tuple[Price, str] | None:
        """The row ``model`` is priced by and how it matched (exact, alias, prefix), or None."""
        if model in self.models:
            return self.models[model], "exact"
        for price in self.models.values():
            if model in price.aliases:
                return price, "alias"
        prefixed = [p for m, p in self.models.items() if model.startswith(m + "-")]
        if prefixed:
            return max(prefixed, key=lambda p: len(p.model)), "prefix"
        return None


class Cost(NamedTuple):
    """What a run's recorded tokens cost at a table's row (USD)."""

    usd: float
    parts: dict[str, float]  # USD per token kind
    model: str  # as the run recorded it
    priced_as: str  # the table row's id
    match: str  # exact | alias | prefix
    nominal: bool
    date: dt.date
    source: str


class Unpriced(NamedTuple):
    """No cost: the run's model has no price in the table (``reason`` says why)."""

    model: str
    reason: str
    date: dt.date
    source: str
    brief: str = ""  # the reason in a few words, for a table cell
    usd: None = None


def cost(usage: Usage, table: PriceTable) -> Cost | Unpriced:
    """The cost of ``usage``'s tokens at ``table``; ``Unpriced`` with the reason when none."""
    if len(usage.models) > 1:
        reason = (
            f"the merged runs used different models ({', '.join(usage.models)}); "
            "price each run on its own"
        )
        brief = "the merged runs used different models"
        return Unpriced(usage.model, reason, table.date, table.source, brief)
    if usage.model in NO_MODEL:
        reason = "the run records no model (the scripted agent calls none)"
        return Unpriced(usage.model, reason, table.date, table.source, "no model recorded")
    found = table.lookup(usage.model)
    if found is None:
        reason = (
            f"no price for model {usage.model!r} in the table of {table.date.isoformat()} "
            f"({'packaged' if table.path == PACKAGED else table.path}); "
            "give one with --prices FILE"
        )
        brief = f"model {usage.model!r} is not in the price table"
        return Unpriced(usage.model, reason, table.date, table.source, brief)
    price, match = found
    parts = {k: usage.tokens.get(k, 0) * price.per_million(k) / PER for k in PRICE_FIELDS}
    return Cost(
        math.fsum(parts.values()),
        parts,
        usage.model,
        price.model,
        match,
        price.nominal,
        table.date,
        table.source,
    )


def priced(usage: Usage | None, table: PriceTable | None) -> Cost | Unpriced | None:
    """A card's cost: ``usage`` at ``table`` (the packaged one when None); None without usage."""
    if usage is None:
        return None
    return cost(usage, table or load_prices(None))


def per_pass(priced: Cost | Unpriced | None, passed: int) -> float | None:
    """USD per passed unit (protocol attempt): None when unpriced or nothing passed."""
    if priced is None or priced.usd is None or passed <= 0:
        return None
    return priced.usd / passed


# -- reading a table --------------------------------------------------------------------------


def load_prices(path: str | None = None) -> PriceTable:
    """The price table in ``path`` (None: the packaged one); UnusableInput naming file, line,
    field and what is wrong when it cannot be used."""
    return _packaged() if path is None else _read(path)


@functools.cache
def _packaged() -> PriceTable:
    """The packaged table, read once per process: it ships with the code, so it cannot
    change under a running one (a ``--prices FILE`` is read by path, never from here)."""
    return _read(PACKAGED)


def _read(where: str) -> PriceTable:
    try:
        with open(where, "rb") as fh:
            raw = fh.read()
    except FileNotFoundError:
        raise UnusableInput(where, "no such price table") from None
    except OSError as exc:
        raise UnusableInput(where, f"cannot read the price table ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8")
        data = tomllib.loads(text)
    except UnicodeDecodeError:
        raise UnusableInput(where, "a price table is TOML text in UTF-8; this is not") from None
    except tomllib.TOMLDecodeError as exc:
        m = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        problem = f"not TOML: {str(exc)[: m.start()].strip() if m else exc}"
        raise UnusableInput(where, problem, line=int(m.group(1)) if m else None) from None
    return _table(where, text, data)


def _table(where: str, text: str, data: dict[str, Any]) -> PriceTable:
    def refuse(table: str, key: str, problem: str) -> UnusableInput:
        field = f"{table}.{key}" if table else key
        return UnusableInput(where, f"{field}: {problem}", line=_line_of(text, table, key))

    for key in data:
        if key not in TOP_FIELDS:
            raise refuse("", key, f"unknown field; a price table has {', '.join(TOP_FIELDS)}")
    date = data.get("date")
    if date is None:
        raise refuse("", "date", "missing: the ISO date the prices were in effect (2026-08-06)")
    if isinstance(date, str):
        try:
            date = dt.date.fromisoformat(date)
        except ValueError:
            raise refuse("", "date", f"not an ISO date (YYYY-MM-DD): {date!r}") from None
    if isinstance(date, dt.datetime) or not isinstance(date, dt.date):
        raise refuse("", "date", f"must be an ISO date (YYYY-MM-DD), not {date!r}")
    source = data.get("source")
    if not isinstance(source, str) or not source.strip():
        raise refuse("", "source", "missing: name where the prices come from")
    rows = data.get("models")
    if not isinstance(rows, dict) or not rows:
        raise refuse("", "models", 'missing: give one [models."MODEL-ID"] table per model')
    models: dict[str, Price] = {}
    named: dict[str, str] = {}  # every id and alias -> the row that claims it
    for model, row in rows.items():
        table = f'models."{model}"'
        if not isinstance(row, dict):
            raise refuse("models", model, "must be a table of prices")
        price = _row(model, row, lambda key, problem, t=table: refuse(t, key, problem))
        for name in (model, *price.aliases):
            if name in named:
                raise refuse(table, "aliases", f"{name!r} already names {named[name]!r}")
            named[name] = model
        models[model] = price
    return PriceTable(date, source.strip(), where, MappingProxyType(models))  # shared: read-only


def _row(model: str, row: dict[str, Any], refuse: Any) -> Price:
    for key in row:
        if key not in ROW_FIELDS:
            raise refuse(key, f"unknown field; a model's row has {', '.join(ROW_FIELDS)}")
    prices: list[float] = []
    for key in PRICE_FIELDS:
        value = row.get(key)
        if value is None:
            raise refuse(key, "missing: USD per million tokens (every row needs all four)")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise refuse(key, f"must be a number of USD per million tokens, not {value!r}")
        if not math.isfinite(value) or value < 0:
            raise refuse(key, f"must be a finite number of 0 or more, not {value!r}")
        prices.append(float(value))
    aliases = row.get("aliases", [])
    if not isinstance(aliases, list) or not all(isinstance(a, str) and a for a in aliases):
        raise refuse("aliases", f"must be a list of model ids, not {aliases!r}")
    nominal = row.get("nominal", False)
    if not isinstance(nominal, bool):
        raise refuse("nominal", f"must be true or false, not {nominal!r}")
    note = row.get("note", "")
    if not isinstance(note, str):
        raise refuse("note", f"must be text, not {note!r}")
    inp, out, cache_read, cache_creation = prices
    return Price(model, inp, out, cache_read, cache_creation, tuple(aliases), nominal, note)


_HEADER = re.compile(r"^\s*\[\s*([^\[\]]+?)\s*\]\s*(?:#.*)?$")


def _line_of(text: str, table: str, key: str) -> int | None:
    """The 1-based line where ``key`` is set under ``[table]`` (top level: ``table`` empty),
    else that table's header line; None when the text does not show it (inline tables)."""
    current, header = "", None
    wanted = _norm(table)
    for n, line in enumerate(text.splitlines(), 1):
        m = _HEADER.match(line)
        if m:
            current = _norm(m.group(1))
            if current == wanted:
                header = n
            continue
        if current == wanted and re.match(rf"\s*\"?{re.escape(key)}\"?\s*=", line):
            return n
    return header


def _norm(table: str) -> str:
    """A table header's dotted name without quotes or spaces around the dots."""
    return ".".join(part.strip().strip('"').strip("'") for part in table.split("."))
