"""The seeded dataset's shape, its seed pack, and the generator of the committed protocol set."""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import subprocess
import sys

import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.protocols import dataset, generate
from benchledger.protocols.grading import normalize
from benchledger.refplatform.packs import DEFAULT_PACK_DIR, default_pack, load_pack
from benchledger.refplatform.toolkits.sql import SqlEngine

REVENUE_BY_REGION = (
    "SELECT c.region, SUM(o.amount_cents), SUM(o.amount_cents - o.discount_cents) "
    "FROM orders o JOIN customers c USING (customer_id) WHERE o.status = 'completed' "
    "GROUP BY c.region"
)


def test_the_dataset_is_built_without_reading_any_file():
    """Run the build in a fresh interpreter with an audit hook on open()."""
    code = (
        "import sys\n"
        "import benchledger.protocols.dataset as d\n"
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


def _files(root: str) -> list[str]:
    return sorted(
        os.path.relpath(os.path.join(d, f), root) for d, _, fs in os.walk(root) for f in fs
    )


def test_regenerating_reproduces_the_committed_protocols_and_pack_byte_for_byte(tmp_path):
    out = tmp_path / "out"
    assert main(["protocols", "generate", "--out", str(out)]) == 0
    for committed, fresh in ((protocols.LIFECYCLE_DIR, out / "lifecycle"),
                             (DEFAULT_PACK_DIR, out / "pack")):  # fmt: skip
        names = _files(committed)
        assert _files(str(fresh)) == names
        _, mismatch, errors = filecmp.cmpfiles(committed, fresh, names, shallow=False)
        assert not mismatch and not errors, mismatch


def test_generate_writes_nothing_outside_out_and_its_output_runs_as_protocols_and_pack(
    tmp_path, capsys
):
    beside = tmp_path / "parent"
    beside.mkdir()
    out = beside / "out"
    assert main(["protocols", "generate", "--out", str(out)]) == 0
    assert os.listdir(beside) == ["out"] and sorted(os.listdir(out)) == ["lifecycle", "pack"]
    assert f"--protocols {out / 'lifecycle'} --pack {out / 'pack'}" in capsys.readouterr().out
    assert main(["protocols", "validate", str(out / "lifecycle")]) == 0
    assert load_pack(str(out / "pack")).pack_hash == default_pack().pack_hash


def test_generate_refuses_a_non_empty_out_without_force_in_one_line_naming_what_is_there(
    tmp_path, capsys
):
    out = tmp_path / "out"
    out.mkdir()
    (out / "notes.txt").write_text("mine")
    assert main(["protocols", "generate", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "is not empty (it holds notes.txt)" in err[0] and "--force" in err[0]
    assert os.listdir(out) == ["notes.txt"]


def test_force_makes_the_two_folders_exactly_the_generated_set_and_says_what_it_replaced(
    tmp_path, capsys
):
    data = tmp_path / "data"  # a copy of protocols/data, provenance cases included
    shutil.copytree(protocols.DATA_DIR, data)
    assert main(["protocols", "generate", "--out", str(data), "--force"]) == 0
    assert "changed files: none; removed (not generated): none" in capsys.readouterr().out
    setup = data / "pack" / "trino" / "setup.sql"
    setup.write_text("-- edited by hand\n")
    (data / "lifecycle" / "bl-stale.yaml").write_text("id: bl-stale\n")
    assert main(["protocols", "generate", "--out", str(data), "--force"]) == 0
    said = capsys.readouterr().out
    assert "changed files: pack/trino/setup.sql; " in said
    assert "removed (not generated): lifecycle/bl-stale.yaml" in said
    assert setup.read_text() != "-- edited by hand\n"
    assert not (data / "lifecycle" / "bl-stale.yaml").exists()
    untouched = filecmp.dircmp(protocols.DATA_DIR, data)
    assert untouched.left_only == untouched.right_only == [] and untouched.diff_files == []
    for sub in untouched.subdirs.values():
        assert sub.left_only == sub.right_only == sub.diff_files == []


@pytest.fixture(scope="module")
def engine():
    eng = SqlEngine(default_pack())
    yield eng
    eng.close()


def _questions(p: protocols.Protocol) -> list[protocols.schema.Question]:
    return (
        [p.recall] + ([p.transfer] if p.transfer else []) + ([p.update.recall] if p.update else [])
    )


def test_every_answer_is_what_its_stored_query_returns_on_refplatforms_sql_engine(engine):
    for p in protocols.load(protocols.LIFECYCLE_DIR).protocols:
        for q in _questions(p):
            assert q.query, p.id
            out = engine.query(q.query)  # refused queries (bad dialect, bad names) raise here
            assert len(out["rows"]) == 1 and len(out["columns"]) == 1, (p.id, out)
            got = out["rows"][0][out["columns"][0]["name"]]
            assert got == generate.answer(q.query), p.id
            if q.grading.kind == "numeric":
                assert abs(float(got) - (q.grading.value or 0)) <= 1e-9, p.id
            else:
                assert q.grading.aliases == (got,), p.id


def test_every_stored_query_names_the_packs_tables_with_catalog_and_schema():
    for p in protocols.load(protocols.LIFECYCLE_DIR).protocols:
        for q in _questions(p):
            for name in re.findall(r"\b(?:FROM|JOIN)\s+([\w.]+)", q.query or ""):
                assert name.startswith("memory.bench."), (p.id, name)


def test_every_protocols_entity_is_an_entity_of_the_pack():
    urns = {e.urn for e in default_pack().entities}
    for p in protocols.load(protocols.LIFECYCLE_DIR).protocols:
        assert p.entity_urn in urns, p.id
        assert p.entity_urn.startswith("urn:li:dataset:(urn:li:dataPlatform:trino,memory.bench.")


def test_the_pack_holds_the_datasets_rows(engine):
    pack_sql = REVENUE_BY_REGION.replace(
        "FROM orders o JOIN customers c", "FROM memory.bench.orders o JOIN memory.bench.customers c"
    )
    rows = engine.query(pack_sql)["rows"]
    names = [c["name"] for c in engine.query(pack_sql)["columns"]]
    got = sorted(tuple(r[n] for n in names) for r in rows)
    assert got == sorted(dataset.query(REVENUE_BY_REGION))
    for t in dataset.build().tables:
        out = engine.query(f"SELECT count(*) AS n FROM memory.bench.{t.name}")
        assert out["rows"] == [{"n": len(t.rows)}], t.name


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
    pack = default_pack()
    seeded = normalize(
        " ".join(
            [e.description for e in pack.entities]
            + [f.description for e in pack.entities for f in e.fields]
            + [f"{pg.title} {pg.summary} {pg.body}" for pg in pack.pages]
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
