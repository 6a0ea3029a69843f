"""benchledger's own seeded dataset: customers, 2025 orders, a legacy table, a revenue index.

Deterministic (``random.Random(SEED)``) and self-contained: it reads no file. The
shape makes answers depend on taught definitions: the region with the most gross
revenue is not the one with the most net revenue, tiers and amounts sit on exact
boundaries, and months shift under a fiscal calendar.

``pack_files`` renders it as a seed pack in the peer's layout (Trino setup SQL for
``memory.bench.*``, DataHub MCEs, knowledge-page INSERTs); the protocol generator
commits that pack and computes every expected answer by running SQL on it. The
SQLite helpers (``sql_script``, ``load_into``, ``query``) and ``urn`` serve the
refplatform until it seeds from packs.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import random
import sqlite3
from collections.abc import Sequence
from typing import Any, Final, NamedTuple

SEED: Final = 20251129
YEAR: Final = 2025
INDEX_CUTOFF: Final = dt.date(2025, 11, 30)
REGIONS: Final = ("North", "South", "East", "West", "Central")
TIERS: Final = ("bronze", "silver", "gold", "platinum")
CHANNELS: Final = ("web", "store", "partner")
STATUSES: Final = ("completed", "refunded", "pending")
URN_PREFIX: Final = "urn:li:dataset:(urn:li:dataPlatform:sqlite,benchledger.sales."
PACK_SCHEMA: Final = "memory.bench"
PACK_URN_PREFIX: Final = f"urn:li:dataset:(urn:li:dataPlatform:trino,{PACK_SCHEMA}."
PACK_SETUP: Final = "trino/setup.sql"
PACK_MCES: Final = "datahub/benchledger_mces.json"
PACK_PAGES: Final = "postgres/knowledge_pages.sql"

N_CUSTOMERS: Final = 160
N_ORDERS: Final = 2400
N_LEGACY: Final = 600
NEVER_ORDERED: Final = 14  # customers with no 2025 order at all

_REGION_WEIGHT = {"North": 24, "South": 20, "East": 18, "West": 26, "Central": 12}
_TIER_WEIGHT = {"bronze": 45, "silver": 30, "gold": 17, "platinum": 8}
_TIER_SCALE = {"bronze": 1.0, "silver": 1.5, "gold": 2.3, "platinum": 3.4}
# West discounts deeply, so the gross leader (West) is not the net leader.
_DISCOUNT_RANGE = {"West": (0.30, 0.45), "Central": (0.0, 0.10)}
_DEFAULT_DISCOUNT = (0.0, 0.12)
_SYLLABLES = (
    "al", "bor", "cen", "dra", "el", "fin", "gor", "hal", "ir",
    "jun", "kel", "lor", "mar", "nor", "ost", "pel", "quin", "ros",
)  # fmt: skip


class Column(NamedTuple):
    name: str
    type: str
    description: str


class Table(NamedTuple):
    """One SQL table: its name, columns and rows."""

    name: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]


class Entity(NamedTuple):
    """A catalog entity (a dataset) as the platform's catalog holds it."""

    urn: str
    name: str
    description: str
    columns: tuple[Column, ...]


class KnowledgePage(NamedTuple):
    slug: str
    title: str
    summary: str
    body: str


class Dataset(NamedTuple):
    tables: tuple[Table, ...]
    entities: tuple[Entity, ...]
    pages: tuple[KnowledgePage, ...]

    def table(self, name: str) -> Table:
        return next(t for t in self.tables if t.name == name)


def urn(table: str) -> str:
    """A table's catalog URN in the SQLite-era form (the refplatform's until it seeds packs)."""
    return f"{URN_PREFIX}{table},PROD)"


def pack_urn(table: str) -> str:
    """The catalog URN of a table in the pack, in the peer's form (``...trino,memory.bench.T``)."""
    return f"{PACK_URN_PREFIX}{table},PROD)"


def _company(rng: random.Random, used: set[str]) -> str:
    while True:
        name = "".join(rng.choice(_SYLLABLES) for _ in range(rng.randint(2, 3))).capitalize()
        name += " " + rng.choice(("Labs", "Foods", "Works", "Supply", "Partners", "Retail"))
        if name not in used:
            used.add(name)
            return name


def _weighted(rng: random.Random, weights: dict[str, int]) -> str:
    return rng.choices(list(weights), weights=list(weights.values()))[0]


def _customers(rng: random.Random) -> list[tuple[Any, ...]]:
    used: set[str] = set()
    rows = []
    start = dt.date(2021, 1, 1)
    for cid in range(1, N_CUSTOMERS + 1):
        signup = start + dt.timedelta(days=rng.randrange(0, 4 * 365 + 180))
        rows.append(
            (cid, _company(rng, used), _weighted(rng, _REGION_WEIGHT),
             _weighted(rng, _TIER_WEIGHT), signup.isoformat())
        )  # fmt: skip
    return rows


def _orders(rng: random.Random, customers: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    ids = [c[0] for c in customers]
    never = set(rng.sample(ids, NEVER_ORDERED))
    buyers = [c for c in customers if c[0] not in never]
    rows = []
    for n in range(N_ORDERS):
        cust = rng.choice(buyers)
        day = dt.date(YEAR, 1, 1) + dt.timedelta(days=rng.randrange(0, 365))
        status = rng.choices(STATUSES, weights=(78, 10, 12))[0]
        base = rng.lognormvariate(10.4, 0.55) * _TIER_SCALE[cust[3]]
        if cust[2] == "West":
            base *= 1.3
        amount = int(base) // 100 * 100 + rng.choice((0, 0, 50, 99))
        low, high = _DISCOUNT_RANGE.get(cust[2], _DEFAULT_DISCOUNT)
        discount = int(amount * rng.uniform(low, high))
        channel = rng.choices(CHANNELS, weights=(50, 30, 20))[0]
        rows.append([100001 + n, cust[0], day.isoformat(), status, amount, discount, channel])
    # Exact boundary values, so "at least" and "more than" give different answers.
    for i, amount in enumerate((150000, 150000, 150000, 120000, 120000, 80000, 80000, 500000)):
        row = rows[37 + 101 * i]
        row[3], row[4], row[5] = "completed", amount, amount // 5 if i % 2 else 0
    return [tuple(r) for r in rows]


def _legacy(rng: random.Random, customers: list[tuple[Any, ...]]) -> list[tuple[Any, ...]]:
    rows = []
    for n in range(N_LEGACY):
        day = dt.date(YEAR - 1, 1, 1) + dt.timedelta(days=rng.randrange(0, 366))
        total = int(rng.lognormvariate(10.2, 0.6))
        state = rng.choices(("closed", "void"), weights=(9, 1))[0]
        rows.append((90001 + n, rng.choice(customers)[0], day.isoformat(), total, state))
    return rows


def _index(
    customers: list[tuple[Any, ...]], orders: list[tuple[Any, ...]]
) -> list[tuple[Any, ...]]:
    region = {c[0]: c[2] for c in customers}
    totals: dict[tuple[str, str], int] = {}
    for _oid, cid, day, status, amount, _disc, _ch in orders:
        if status == "completed" and day <= INDEX_CUTOFF.isoformat():
            key = (day, region[cid])
            totals[key] = totals.get(key, 0) + amount
    rows = []
    day = dt.date(YEAR, 1, 1)
    while day <= INDEX_CUTOFF:
        for r in REGIONS:
            rows.append((day.isoformat(), r, totals.get((day.isoformat(), r), 0)))
        day += dt.timedelta(days=1)
    return rows


_CUSTOMER_COLUMNS = (
    Column("customer_id", "INTEGER", "Primary key."),
    Column("name", "TEXT", "Customer company name."),
    Column("region", "TEXT", "Sales region: North, South, East, West or Central."),
    Column("tier", "TEXT", "Account tier: bronze, silver, gold or platinum."),
    Column("signup_date", "TEXT", "Date the account was opened (YYYY-MM-DD)."),
)
_ORDER_COLUMNS = (
    Column("order_id", "INTEGER", "Primary key."),
    Column("customer_id", "INTEGER", "The ordering customer (customers.customer_id)."),
    Column("order_date", "TEXT", "Date the order was placed (YYYY-MM-DD), all in 2025."),
    Column("status", "TEXT", "completed, refunded or pending."),
    Column("amount_cents", "INTEGER", "Order amount before discount, in integer US cents."),
    Column("discount_cents", "INTEGER", "Discount granted, in integer US cents."),
    Column("channel", "TEXT", "Sales channel: web, store or partner."),
)
_LEGACY_COLUMNS = (
    Column("order_id", "INTEGER", "Legacy order number."),
    Column("customer_id", "INTEGER", "Customer id at export time."),
    Column("order_date", "TEXT", "Order date (YYYY-MM-DD)."),
    Column("total_cents", "INTEGER", "Order total in integer US cents."),
    Column("state", "TEXT", "closed or void."),
)
_INDEX_COLUMNS = (
    Column("day", "TEXT", "Calendar day (YYYY-MM-DD)."),
    Column("region", "TEXT", "Sales region."),
    Column("gross_cents", "INTEGER", "Gross amount of the region's completed orders that day."),
)

_DESCRIPTIONS = {
    "customers": "Customer accounts, one row per customer, with sales region and account tier.",
    "orders": "Orders placed during 2025, one row per order, with amount and discount in cents.",
    "legacy_orders": "DEPRECATED. Export of the retired billing system's 2024 orders. Kept for "
    "reconciliation only; use orders for current reporting.",
    "daily_revenue_index": "Daily gross revenue per region, rebuilt nightly from completed "
    "orders. The index has a cut-off: days after the last loaded day are not in it yet.",
}

_PAGES = (
    KnowledgePage(
        "revenue-conventions",
        "Revenue Conventions",
        "Money columns are integer US cents; net revenue subtracts the discount.",
        "# Revenue Conventions\n\nAll money columns are integer US cents: divide by 100 for "
        "USD. Gross revenue is the sum of amount_cents; net revenue is amount_cents minus "
        "discount_cents. Revenue counts completed orders only unless a question says otherwise.",
    ),
    KnowledgePage(
        "order-status-guide",
        "Order Status Guide",
        "What completed, refunded and pending orders mean.",
        "# Order Status Guide\n\nA completed order was delivered and paid. A refunded order was "
        "paid and then returned in full. A pending order has been placed but not yet paid.",
    ),
    KnowledgePage(
        "sales-regions",
        "Sales Regions",
        "Every customer belongs to exactly one of five sales regions.",
        "# Sales Regions\n\nCustomers are assigned to North, South, East, West or Central when "
        "their account is opened. An order belongs to its customer's region.",
    ),
)


@functools.cache
def build() -> Dataset:
    """The dataset (built once per process; identical on every machine)."""
    rng = random.Random(SEED)
    customers = _customers(rng)
    orders = _orders(rng, customers)
    legacy = _legacy(rng, customers)
    tables = (
        Table("customers", _CUSTOMER_COLUMNS, tuple(customers)),
        Table("orders", _ORDER_COLUMNS, tuple(orders)),
        Table("legacy_orders", _LEGACY_COLUMNS, tuple(legacy)),
        Table("daily_revenue_index", _INDEX_COLUMNS, tuple(_index(customers, orders))),
    )
    entities = tuple(Entity(urn(t.name), t.name, _DESCRIPTIONS[t.name], t.columns) for t in tables)
    return Dataset(tables, entities, _PAGES)


def _literal(value: Any) -> str:
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    return str(value)


def sql_script() -> str:
    """The whole dataset as SQLite DDL and INSERT statements."""
    out = []
    for t in build().tables:
        cols = ", ".join(f"{c.name} {c.type}" for c in t.columns)
        out.append(f"CREATE TABLE {t.name} ({cols});")
        for i in range(0, len(t.rows), 500):
            values = ",\n".join(
                "(" + ", ".join(_literal(v) for v in row) + ")" for row in t.rows[i : i + 500]
            )
            out.append(f"INSERT INTO {t.name} VALUES\n{values};")
    return "\n".join(out) + "\n"


def load_into(conn: sqlite3.Connection) -> None:
    """Create and fill the dataset's tables in ``conn``."""
    for t in build().tables:
        cols = ", ".join(f"{c.name} {c.type}" for c in t.columns)
        conn.execute(f"CREATE TABLE {t.name} ({cols})")
        marks = ", ".join("?" for _ in t.columns)
        conn.executemany(f"INSERT INTO {t.name} VALUES ({marks})", t.rows)
    conn.commit()


@functools.cache
def _conn() -> sqlite3.Connection:
    conn = sqlite3.connect(":memory:", check_same_thread=False)
    load_into(conn)
    return conn


def query(sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Run ``sql`` against a private in-memory copy of the dataset."""
    return _conn().execute(sql, params).fetchall()


# ---------------------------------------------------------------------------- the seed pack

_PACK_HEADER: Final = (
    "-- Generated by `benchledger protocols generate` from protocols/dataset.py. "
    "Do not edit by hand.\n"
)
_DATE_COLUMNS: Final = frozenset({"signup_date", "order_date", "day"})
_INSERT_ROWS: Final = 250
_PAGE_QUOTE: Final = "$blkp$"
_SEEDED_BY: Final = "benchledger-seed@example.com"
_SEEDED_AT: Final = "2025-12-01T00:00:00Z"
_PAGE_TAGS: Final = {
    "revenue-conventions": ("finance", "policy", "benchledger"),
    "order-status-guide": ("orders", "benchledger"),
    "sales-regions": ("sales", "benchledger"),
}


def pack_type(column: Column) -> str:
    """A column's type in the pack's SQL (Trino spelling, upper case)."""
    if column.name in _DATE_COLUMNS:
        return "DATE"
    return {"TEXT": "VARCHAR"}.get(column.type, column.type)


def pack_files() -> dict[str, str]:
    """The dataset as a seed pack in the peer's layout: path relative to the pack -> text."""
    return {PACK_SETUP: _setup_sql(), PACK_MCES: _mces(), PACK_PAGES: _pages_sql()}


def _pack_literal(column: Column, value: Any) -> str:
    if column.name in _DATE_COLUMNS:
        return f"DATE '{value}'"
    return _literal(value)


def _setup_sql() -> str:
    out = [_PACK_HEADER, f"CREATE SCHEMA IF NOT EXISTS {PACK_SCHEMA};\n"]
    for t in build().tables:
        name = f"{PACK_SCHEMA}.{t.name}"
        columns = ",\n".join(f"    {c.name} {pack_type(c)}" for c in t.columns)
        out.append(f"\nDROP TABLE IF EXISTS {name};\nCREATE TABLE {name} (\n{columns}\n);\n")
        for i in range(0, len(t.rows), _INSERT_ROWS):
            values = ",\n".join(
                "("
                + ", ".join(_pack_literal(c, v) for c, v in zip(t.columns, row, strict=True))
                + ")"
                for row in t.rows[i : i + _INSERT_ROWS]
            )
            out.append(f"INSERT INTO {name} VALUES\n{values};\n")
    return "".join(out)


def _proposal(urn_: str, aspect: str, value: dict[str, Any]) -> dict[str, Any]:
    return {
        "entityUrn": urn_,
        "entityType": "dataset",
        "aspectName": aspect,
        "changeType": "UPSERT",
        "aspect": {"json": value},
    }


def _mces() -> str:
    proposals = []
    for t, e in zip(build().tables, build().entities, strict=True):
        u = pack_urn(t.name)
        custom = {"team": "benchledger"}
        if any(c.name.endswith("_cents") for c in t.columns):
            custom["unit"] = "cents"
        proposals.append(
            _proposal(u, "datasetProperties", {
                "customProperties": custom,
                "description": e.description,
                "name": t.name,
            })
        )  # fmt: skip
        fields = [
            {
                "description": c.description,
                "fieldPath": c.name,
                "nativeDataType": pack_type(c).lower(),
                "nullable": True,
                "recursive": False,
                "type": {"type": {_FIELD_TYPES[pack_type(c)]: {}}},
            }
            for c in t.columns
        ]
        proposals.append(
            _proposal(u, "schemaMetadata", {
                "fields": fields,
                "hash": "",
                "platform": "urn:li:dataPlatform:trino",
                "platformSchema": {"com.linkedin.schema.OtherSchema": {"rawSchema": ""}},
                "schemaName": f"{PACK_SCHEMA}.{t.name}",
                "version": 0,
            })
        )  # fmt: skip
        proposals.append(_proposal(u, "globalTags", {"tags": [{"tag": "urn:li:tag:benchledger"}]}))
        if e.description.startswith("DEPRECATED"):
            proposals.append(
                _proposal(u, "deprecation", {
                    "actor": "urn:li:corpuser:benchledger-seed",
                    "deprecated": True,
                    "note": f"Deprecated. Use {PACK_SCHEMA}.orders instead.",
                })
            )  # fmt: skip
    return json.dumps(proposals, indent=2, sort_keys=True, ensure_ascii=False) + "\n"


_FIELD_TYPES: Final = {
    "INTEGER": "com.linkedin.schema.NumberType",
    "VARCHAR": "com.linkedin.schema.StringType",
    "DATE": "com.linkedin.schema.DateType",
}


def _pages_sql() -> str:
    columns = (
        "id, slug, title, summary, body, tags, created_by, created_email, updated_by, "
        "current_version, created_at, updated_at"
    )
    out = [_PACK_HEADER]
    for n, page in enumerate(build().pages, start=1):
        if _PAGE_QUOTE in page.body:
            raise ValueError(f"page {page.slug} contains {_PAGE_QUOTE}, the body's dollar quote")
        tags = _literal(json.dumps(list(_PAGE_TAGS[page.slug])))
        who = _literal(_SEEDED_BY)
        out.append(
            f"\nINSERT INTO portal_knowledge_pages\n  ({columns})\nVALUES\n"
            f"  ({_literal(f'kp-bl-{n}')}, {_literal(page.slug)}, {_literal(page.title)},\n"
            f"   {_literal(page.summary)},\n"
            f"   {_PAGE_QUOTE}{page.body}{_PAGE_QUOTE},\n"
            f"   {tags}::jsonb, {who}, {who}, {who}, 1, "
            f"{_literal(_SEEDED_AT)}, {_literal(_SEEDED_AT)})\n"
            "ON CONFLICT (id) DO UPDATE SET\n"
            "  slug = EXCLUDED.slug, title = EXCLUDED.title, summary = EXCLUDED.summary,\n"
            "  body = EXCLUDED.body, tags = EXCLUDED.tags, updated_at = EXCLUDED.updated_at;\n"
        )
    return "".join(out)
