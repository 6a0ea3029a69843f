"""Seed packs: the peer's and ours load and hash stably; a bad pack is one line with file:line."""

from __future__ import annotations

import os
import random
import shutil

import pytest

from benchledger.protocols import dataset
from benchledger.refplatform.errors import PackError
from benchledger.refplatform.pack_sql import split_statements, split_tokens
from benchledger.refplatform.packs import (
    DEFAULT_PACK_DIR,
    SETUP_SQL,
    Pack,
    default_pack,
    load_pack,
)
from tests.conftest import peer_dir

ORDERS = "urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.orders,PROD)"


def _peer_seed() -> str:
    return os.path.join(peer_dir(), "bench", "seed")


@pytest.fixture(scope="module")
def peer_pack() -> Pack:
    return load_pack(_peer_seed())


@pytest.fixture
def pack_copy(tmp_path) -> str:
    """A private copy of the peer's pack: tests change bytes there, never in /work/shared."""
    dest = str(tmp_path / "seed")
    shutil.copytree(_peer_seed(), dest)
    return dest


def _edit(pack_dir: str, rel: str, old: str, new: str) -> None:
    path = os.path.join(pack_dir, rel)
    with open(path, encoding="utf-8") as fh:
        text = fh.read()
    assert old in text, (rel, old)
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text.replace(old, new, 1))


def test_the_peers_pack_turns_its_ten_mces_into_four_described_entities(peer_pack):
    assert sum(len(aspects) for aspects in peer_pack.aspects.values()) == 10
    assert [e.name for e in peer_pack.entities] == [
        "orders", "customers", "legacy_orders", "daily_region_revenue",
    ]  # fmt: skip
    assert all(e.description and e.platform == "trino" for e in peer_pack.entities)
    orders = peer_pack.entity(ORDERS)
    assert orders is not None
    assert orders.qualified_name == "memory.bench.orders"
    assert orders.description.startswith("Current order transactions, one row per order.")
    assert dict(orders.custom_properties) == {"team": "bench", "unit": "cents"}
    assert orders.tags == ("urn:li:tag:bench",)
    assert {f.path: f.description for f in orders.fields}["amount"].startswith("Order amount")
    assert not orders.has_schema_metadata  # the peer's DataHub answers "fields": null
    assert orders.source == "datahub/bench_mces.json:2"
    legacy = next(e for e in peer_pack.entities if e.name == "legacy_orders")
    assert legacy.deprecation is not None and legacy.deprecation.deprecated


def test_the_peers_pages_keep_their_dollar_quoted_bodies_intact(peer_pack):
    assert [p.id for p in peer_pack.pages] == [
        "kp-bench-1",
        "kp-bench-2",
        "kp-bench-3",
        "kp-bench-4",
    ]
    page = peer_pack.page("revenue-reporting-policy")
    assert page is not None and page.id == "kp-bench-1"
    assert page.title == "Revenue Reporting Policy"
    assert page.body.startswith("# Revenue Reporting Policy\n\nThis is the authoritative")
    assert "[orders](urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.orders,PROD))" in (
        page.body
    )
    assert page.body.endswith("must\nnot be used for policy revenue figures.")
    assert page.tags == ("finance", "policy", "bench")
    assert (page.created_by, page.current_version) == ("bench-seed@example.com", 1)
    assert page.created_at == page.updated_at == "2026-01-01T00:00:00Z"
    tiers = peer_pack.page("customer-tier-definitions")
    assert tiers is not None and tiers.summary.startswith("A 'key account' is any customer")


def test_the_peers_setup_sql_is_split_into_statements_with_their_lines(peer_pack):
    first = peer_pack.setup_statements[0]
    assert (first.line, first.sql) == (2, "CREATE SCHEMA IF NOT EXISTS memory.bench")
    assert peer_pack.setup_statements[2].sql.startswith("CREATE TABLE memory.bench.customers")
    assert peer_pack.setup_statements[2].line == 5


def test_the_empty_description_variant_is_not_part_of_the_seeded_state(peer_pack, pack_copy):
    assert "datahub/bench_mces_empty.json" not in peer_pack.files
    os.remove(os.path.join(pack_copy, "datahub", "bench_mces_empty.json"))
    assert load_pack(pack_copy).pack_hash == peer_pack.pack_hash


def test_the_hash_is_stable_and_independent_of_where_the_pack_lives(peer_pack, pack_copy):
    assert load_pack(_peer_seed()).pack_hash == peer_pack.pack_hash
    assert load_pack(pack_copy).pack_hash == peer_pack.pack_hash
    assert len(peer_pack.pack_hash) == 64


@pytest.mark.parametrize(
    ("rel", "old", "new"),
    [
        ("trino/setup.sql", "Harper Silva", "Harper Silvb"),
        ("datahub/bench_mces.json", "Current order", "Current ordes"),
        ("postgres/knowledge_pages.sql", "authoritative", "authoritativf"),
    ],
    ids=["setup-sql", "mces", "pages"],
)
def test_changing_one_byte_of_any_file_changes_the_hash(peer_pack, pack_copy, rel, old, new):
    _edit(pack_copy, rel, old, new)
    assert load_pack(pack_copy).pack_hash != peer_pack.pack_hash


BAD_PACKS = [
    ("missing-setup-sql", "trino/setup.sql", None, None, "trino/setup.sql: missing"),
    ("missing-pages", "postgres/knowledge_pages.sql", None, None,
     "postgres/knowledge_pages.sql: missing"),
    ("unclosed-string", "postgres/knowledge_pages.sql", "'Revenue Reporting Policy',",
     "'Revenue Reporting Policy,",
     "postgres/knowledge_pages.sql:7: a string literal runs from this line to line 8"),
    ("unclosed-dollar-quote", "postgres/knowledge_pages.sql", "not be used for policy revenue "
     "figures.$benchkp$", "not be used",
     "postgres/knowledge_pages.sql:100: the dollar-quoted text opened with $benchkp$"),
    ("bad-jsonb", "postgres/knowledge_pages.sql", """'["finance","policy","bench"]'::jsonb""",
     """'["finance",'::jsonb""", "postgres/knowledge_pages.sql:25: bad JSON in ::jsonb"),
    ("too-few-values", "postgres/knowledge_pages.sql", "'kp-bench-2', ", "",
     "postgres/knowledge_pages.sql:33: a row has 11 values for 12 columns"),
    ("unknown-column", "postgres/knowledge_pages.sql", "(id, slug, title", "(id, slugg, title",
     "postgres/knowledge_pages.sql:5: unknown column 'slugg'"),
    ("other-table", "postgres/knowledge_pages.sql", "INSERT INTO portal_knowledge_pages",
     "INSERT INTO users", "postgres/knowledge_pages.sql:4: inserts into 'users'"),
    ("bad-json", "datahub/bench_mces.json", '"changeType": "UPSERT",', '"changeType": "UPSERT"',
     "datahub/bench_mces.json:7: bad JSON"),
    ("mce-without-urn", "datahub/bench_mces.json", '"entityUrn"', '"entityUrl"',
     "datahub/bench_mces.json:2: an MCE needs entityUrn"),
    ("unclosed-setup-string", "trino/setup.sql", "'Harper Silva'", "'Harper Silva",
     "trino/setup.sql:13: a string literal runs from this line to line 14: a quote is missing"),
]  # fmt: skip


@pytest.mark.parametrize(
    ("rel", "old", "new", "expected"), [b[1:] for b in BAD_PACKS], ids=[b[0] for b in BAD_PACKS]
)
def test_a_bad_pack_is_one_line_naming_file_line_and_what_is_wrong(
    pack_copy, rel, old, new, expected
):
    if old is None:
        os.remove(os.path.join(pack_copy, rel))
    else:
        _edit(pack_copy, rel, old, new)
    with pytest.raises(PackError) as caught:
        load_pack(pack_copy)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(expected), message


def test_a_folder_that_is_not_there_is_a_pack_error(tmp_path):
    with pytest.raises(PackError, match="not a folder"):
        load_pack(tmp_path / "nope")


def test_benchledgers_own_pack_is_the_committed_one_and_describes_every_table():
    pack = default_pack()
    assert pack.path == os.path.abspath(DEFAULT_PACK_DIR)
    tables = [t.name for t in dataset.build().tables]
    assert [e.urn for e in pack.entities] == [dataset.pack_urn(t) for t in tables]
    for entity, table in zip(pack.entities, dataset.build().tables, strict=True):
        assert entity.has_schema_metadata
        assert [f.path for f in entity.fields] == [c.name for c in table.columns]
        assert all(f.description and f.type for f in entity.fields)
        assert entity.description
    assert [p.slug for p in pack.pages] == [p.slug for p in dataset.build().pages]
    assert [p.body for p in pack.pages] == [p.body for p in dataset.build().pages]


def test_the_committed_pack_is_exactly_what_the_dataset_renders():
    for rel, text in dataset.pack_files().items():
        with open(os.path.join(DEFAULT_PACK_DIR, rel), encoding="utf-8", newline="") as fh:
            assert fh.read() == text, f"{rel} differs: run `benchledger protocols generate`"


_SQL_ATOMS = ("a", "b1", "x$y$", "$t$", "$$", "'", "''", '"', "--", "/*", "*/", ";", " ",
              "\n", "1", "1.5e-3", "-", "/", "$", "é", "\t", "::", "(", ",", "$a$ b; $a$",
              "'x;y'", "/* ; */", "-- ;\n", "\u00a0", "1$a$", "_q")  # fmt: skip


def _split(split, text):
    try:
        return "ok", list(split(SETUP_SQL, text))
    except PackError as exc:
        return "error", str(exc)


def test_the_setup_sql_splitter_agrees_with_the_tokenizer_on_packs_and_random_sql():
    seed = 20261201
    print(f"seed {seed}")
    rnd = random.Random(seed)
    texts = [default_pack().setup_sql, *("".join(rnd.choice(_SQL_ATOMS) for _ in range(
        rnd.randint(0, 14))) for _ in range(20_000))]  # fmt: skip
    for text in texts:
        assert _split(split_statements, text) == _split(split_tokens, text), repr(text[:200])
