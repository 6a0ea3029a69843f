"""``audit RUN METRIC --format json``: the audit's decisions with their evidence, and the
``authentication`` and ``origin`` every display's JSON carries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from benchledger.ledger import Ledger, open_store
from benchledger.ledger.bundle import export_run
from tests.conftest import cli, keypair, signed_run

METRIC = "capture_rate"


@pytest.fixture
def published(tmp_path: Path) -> dict[str, str]:
    """A signed sealed run r1 in a ledger and as a bundle, and its publisher's public key."""
    key, pub = keypair(tmp_path / "k")
    db = str(tmp_path / "l.sqlite")
    root = signed_run(db, key)
    bundle = str(tmp_path / "r1.jsonl")
    with open_store(db) as store:
        export_run(Ledger(store), "r1", bundle)
    return {"db": db, "bundle": bundle, "pub": pub, "root": root}


def test_the_json_audit_carries_each_decision_with_its_evidence_as_the_text_counts_them(
    published, capsys
):
    code, text, _ = cli(capsys, "audit", published["bundle"], METRIC, "--pubkey", published["pub"])
    assert code == 0
    code, out, _ = cli(capsys, "audit", published["bundle"], METRIC, "--format", "json",
                       "--pubkey", published["pub"])  # fmt: skip
    assert code == 0
    doc = json.loads(out)
    m = doc["metric"]
    assert (doc["run"], doc["root"], m["name"]) == ("r1", published["root"], METRIC)
    shown = re.search(rf"{METRIC} = \S+  \((\S+)/(\d+)\)", text)
    assert shown is not None and int(shown[2]) == m["den"], text
    assert f"{len(doc['contributions'])} contributing units" in text
    for c in doc["contributions"]:
        assert c["decision"]["link"] and c["decision"]["check"], c
        assert c["evidence"] and all(e["link"] and e["value"] for e in c["evidence"]), c
    assert sum(c["in_numerator"] for c in doc["contributions"]) == round(m["num"])


def test_the_json_audit_says_whether_a_trusted_key_authenticates_the_run_and_who_wrote_it(
    published, capsys
):
    trusted = json.loads(cli(capsys, "audit", published["bundle"], METRIC, "--format", "json",
                             "--pubkey", published["pub"])[1])  # fmt: skip
    assert trusted["authentication"]["authenticated"] is True
    assert trusted["origin"] == {"kind": "own", "source": "", "rederived": False}
    assert trusted["decisions_are_peer_claims"] is False
    plain = json.loads(cli(capsys, "audit", "r1", METRIC, "--format", "json",
                           "--ledger", published["db"])[1])  # fmt: skip
    assert plain["authentication"]["authenticated"] is False
    assert plain["authentication"]["line"].startswith("UNAUTHENTICATED")
    assert plain["verification"]["source"] == "ledger" and plain["verification"]["sealed"]
    assert plain["completeness"]["sealed"] is True


def test_the_json_audit_of_an_audit_bundle_says_it_is_partial(published, tmp_path, capsys):
    out = str(tmp_path / "audit.jsonl")
    code, _, err = cli(capsys, "audit", "r1", METRIC, "--format", "json", "--bundle", out,
                       "--ledger", published["db"])  # fmt: skip
    assert code == 0 and "wrote audit bundle" in err  # stdout stays one JSON document
    doc = json.loads(cli(capsys, "audit", out, METRIC, "--format", "json")[1])
    assert doc["verification"]["partial"] is True and doc["verification"]["source"] == (
        "audit bundle"
    )
