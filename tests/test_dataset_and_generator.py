"""The seeded dataset's shape and the generator of the committed protocol set."""

from __future__ import annotations

import filecmp
import os
import subprocess
import sys

import protocols
from cli import main
from protocols import dataset, generate
from protocols.grading import normalize

REVENUE_BY_REGION = (
    "SELECT c.region, SUM(o.amount_cents), SUM(o.amount_cents - o.discount_cents) "
    "FROM orders o JOIN customers c USING (customer_id) WHERE o.status = 'completed' "
    "GROUP BY c.region"
)


def test_the_dataset_is_built_without_reading_any_file():
    """Run the build in a fresh interpreter with an audit hook on open()."""
    code = (
        "import sys\n"
        "import protocols.dataset as d\n"
        "opened = []\n"
        "sys.addaudithook(lambda e, a: opened.append(a[0]) if e == 'open' else None)\n"
        "d.build(); d.sql_script()\n"
        "print(len(opened), opened[:3])\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.startswith("0 "), out.stdout


def test_the_dataset_is_deterministic_across_processes():
    code = (
        "import blake3, protocols.dataset as d\n"
        "print(blake3.blake3(d.sql_script().encode()).hexdigest())"
    )
    runs = {
        subprocess.run(
            [sys.executable, "-c", code], capture_output=True, text=True, check=True
        ).stdout
        for _ in range(2)
    }
    assert len(runs) == 1


def test_the_gross_revenue_leader_is_not_the_net_revenue_leader():
    rows = dataset.query(REVENUE_BY_REGION)
    gross = max(rows, key=lambda r: r[1])[0]
    net = max(rows, key=lambda r: r[2])[0]
    assert gross != net


def test_order_amounts_sit_on_exact_boundaries():
    for cents in (80000, 120000, 150000):
        (n,) = dataset.query(
            "SELECT COUNT(*) FROM orders WHERE status = 'completed' AND amount_cents = ?", (cents,)
        )[0]
        assert n >= 2, cents


def test_the_dataset_has_statuses_regions_tiers_a_legacy_table_and_an_index_cutoff():
    assert {r[0] for r in dataset.query("SELECT DISTINCT status FROM orders")} == set(
        dataset.STATUSES
    )
    assert {r[0] for r in dataset.query("SELECT DISTINCT region FROM customers")} == set(
        dataset.REGIONS
    )
    assert {r[0] for r in dataset.query("SELECT DISTINCT tier FROM customers")} == set(
        dataset.TIERS
    )
    assert dataset.query("SELECT MAX(day) FROM daily_revenue_index")[0][0] == "2025-11-30"
    assert dataset.query("SELECT MAX(order_date) FROM orders")[0][0] > "2025-11-30"
    legacy = next(e for e in dataset.build().entities if e.name == "legacy_orders")
    assert legacy.description.startswith("DEPRECATED")
    assert all(isinstance(v, int) for r in dataset.build().table("orders").rows for v in r[4:6])


def test_the_sql_export_recreates_the_dataset(tmp_path):
    import sqlite3

    conn = sqlite3.connect(":memory:")
    conn.executescript(dataset.sql_script())
    assert conn.execute(REVENUE_BY_REGION).fetchall() == dataset.query(REVENUE_BY_REGION)


def test_regenerating_reproduces_the_committed_files_byte_for_byte(tmp_path, capsys):
    assert main(["protocols", "generate", "--out", str(tmp_path)]) == 0
    committed = sorted(os.listdir(protocols.LIFECYCLE_DIR))
    assert sorted(os.listdir(tmp_path)) == committed
    _, mismatch, errors = filecmp.cmpfiles(
        protocols.LIFECYCLE_DIR, tmp_path, committed, shallow=False
    )
    assert not mismatch and not errors, mismatch


def test_every_answer_is_what_its_stored_query_returns():
    for p in protocols.load(protocols.LIFECYCLE_DIR).protocols:
        questions = (
            [p.recall]
            + ([p.transfer] if p.transfer else [])
            + ([p.update.recall] if p.update else [])
        )
        for q in questions:
            assert q.query, p.id
            got = generate.answer(q.query)
            if q.grading.kind == "numeric":
                assert abs(float(got) - (q.grading.value or 0)) <= 1e-9, p.id
            else:
                assert q.grading.aliases == (got,), p.id


def test_every_update_really_flips_the_answer():
    for p in protocols.load(protocols.LIFECYCLE_DIR).protocols:
        if p.update is None:
            continue
        old, new = p.recall.grading, p.update.recall.grading
        if old.kind == "numeric":
            assert abs((old.value or 0) - (new.value or 0)) > new.abs_tolerance, p.id
            assert p.update.superseded_value == old.value
        else:
            assert old.aliases != new.aliases and p.update.superseded_value == old.aliases[0]


def _term(fact: str) -> str:
    return fact.split("'")[1]


def test_every_fact_is_novel_to_the_seeded_catalog_and_pages():
    data = dataset.build()
    seeded = normalize(
        " ".join(
            [e.description for e in data.entities]
            + [c.description for e in data.entities for c in e.columns]
            + [f"{pg.title} {pg.summary} {pg.body}" for pg in data.pages]
        )
    )
    for p in protocols.load(protocols.LIFECYCLE_DIR).protocols:
        for fact in [p.fact] + ([p.update.fact] if p.update else []):
            assert normalize(fact) not in seeded, p.id
            assert normalize(_term(fact)) not in seeded, (p.id, _term(fact))


def test_families_of_similar_facts_share_an_entity():
    pset = protocols.load(protocols.LIFECYCLE_DIR).protocols
    region_facts = [p for p in pset if _term(p.fact).endswith(("region", "market", "hotspot"))]
    window_facts = [p for p in pset if _term(p.fact).endswith("window")]
    assert len(region_facts) >= 6 and len({p.entity_urn for p in region_facts}) == 1
    assert len(window_facts) >= 3
    assert len({p.entity_urn for p in window_facts}) == 1
