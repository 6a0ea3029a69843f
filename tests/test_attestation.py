"""Signed in-toto attestations of a sealed run's bundle: written by ``export --format
attestation``, checked by ``verify FILE.intoto.jsonl`` and by the standard DSSE tooling
(securesystemslib), and refused when a byte of what they attest changes."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from securesystemslib.dsse import Envelope
from securesystemslib.exceptions import VerificationError
from securesystemslib.signer import SSlibKey

from benchledger.ledger import open_store
from benchledger.ledger.signing import fingerprint
from tests.conftest import cli, keypair, one_line_exit_2, signed_run, signing_ledger, write_run
from tests.sample import PASSING

TEST_RESULT = "https://in-toto.io/attestation/test-result/v0.1"
EVAL_RESULT = "https://benchledger.dev/attestation/eval-result/v1"


def _standard_key(pub: str) -> SSlibKey:
    """The public key as securesystemslib holds one: no benchledger code involved."""
    raw = bytes.fromhex(Path(pub).read_text().split()[0].removeprefix("ed25519:"))
    return SSlibKey(fingerprint(raw), "ed25519", "ed25519", {"public": raw.hex()})


@pytest.fixture
def attested(tmp_path, capsys):
    """A sealed, signed run exported as a bundle and attested: (folder, key, pub)."""
    key, pub = keypair(tmp_path / "keys")
    led = str(tmp_path / "l.sqlite")
    signed_run(led, key)
    code, _, err = cli(capsys, "export", "r1", "-o", str(tmp_path / "r1.jsonl"), "--ledger", led)
    assert code == 0, err
    code, out, err = cli(capsys, "export", str(tmp_path / "r1.jsonl"), "--format", "attestation",
                         "-o", str(tmp_path / "r1.intoto.jsonl"), "--sign-key", key)  # fmt: skip
    assert code == 0, err
    assert "test-result PASSED" in out
    return tmp_path, key, pub


def _statements(path: Path, pub: str) -> list[dict]:
    """Each line's statement, as the standard DSSE tooling verifies and decodes it."""
    key = _standard_key(pub)
    out = []
    for line in path.read_text().splitlines():
        env = Envelope.from_dict(json.loads(line))
        assert list(env.verify([key], 1)) == [key.keyid]
        out.append(json.loads(env.payload))
    return out


def test_an_attestation_verifies_with_the_standard_dsse_tooling_and_names_the_bundle(
    attested,
):
    folder, _, pub = attested
    statements = _statements(folder / "r1.intoto.jsonl", pub)
    assert [s["predicateType"] for s in statements] == [TEST_RESULT, EVAL_RESULT]
    bundle_sha = hashlib.sha256((folder / "r1.jsonl").read_bytes()).hexdigest()
    for s in statements:
        assert s["_type"] == "https://in-toto.io/Statement/v1"
        names = {x["name"]: x["digest"] for x in s["subject"]}
        assert names["r1.jsonl"] == {"sha256": bundle_sha}
        assert set(names["benchledger-run:r1"]) == {"blake3"}
    result = statements[0]["predicate"]
    assert result["result"] == "PASSED"
    assert len(result["passedTests"]) == 3 and result["failedTests"] == []
    assert any(c["name"] == "protocol-set" for c in result["configuration"])
    metrics = statements[1]["predicate"]["metrics"]
    assert metrics and all({"rate", "ci_low", "ci_high", "ci_method"} <= set(m)
                           for m in metrics.values())  # fmt: skip


def test_benchledger_verify_checks_an_attestation_against_its_bundle(attested, capsys):
    folder, _, pub = attested
    code, out, err = cli(capsys, "verify", str(folder / "r1.intoto.jsonl"), "--pubkey", pub)
    assert code == 0, err
    assert out.startswith("ok attestation") and "run r1" in out and "PASSED" in out


def test_one_changed_byte_of_the_bundle_fails_both_checks(attested, capsys):
    folder, _, pub = attested
    bundle = folder / "r1.jsonl"
    data = bytearray(bundle.read_bytes())
    data[data.index(b'"r1"')] = ord(" ")  # one byte
    bundle.write_bytes(bytes(data))
    code, out, _ = cli(capsys, "verify", str(folder / "r1.intoto.jsonl"), "--pubkey", pub)
    assert code == 1 and "does not have the attested sha256" in out
    # The standard route: the envelope still verifies, its subject's digest no longer matches.
    subject = _statements(folder / "r1.intoto.jsonl", pub)[0]["subject"]
    digest = next(s["digest"]["sha256"] for s in subject if s["name"] == "r1.jsonl")
    assert hashlib.sha256(bundle.read_bytes()).hexdigest() != digest


def test_a_changed_statement_breaks_its_signature_for_both_checkers(attested, capsys):
    folder, _, pub = attested
    path = folder / "r1.intoto.jsonl"
    lines = path.read_text().splitlines()
    env = json.loads(lines[0])
    statement = json.loads(base64.b64decode(env["payload"]))
    statement["predicate"]["result"] = "FAILED"
    env["payload"] = base64.b64encode(json.dumps(statement).encode()).decode()
    path.write_text("\n".join([json.dumps(env), *lines[1:]]) + "\n")
    code, out, _ = cli(capsys, "verify", str(path), "--pubkey", pub)
    assert code == 1 and "line 1: no signature verifies" in out
    with pytest.raises(VerificationError):
        Envelope.from_dict(env).verify([_standard_key(pub)], 1)


def test_an_attestation_signed_by_another_key_is_not_trusted(attested, tmp_path, capsys):
    folder, _, _ = attested
    _, other = keypair(tmp_path / "other")
    code, out, _ = cli(capsys, "verify", str(folder / "r1.intoto.jsonl"), "--pubkey", other)
    assert code == 1 and "no signature verifies with a trusted key" in out


def test_a_bundle_subject_that_leaves_the_attestations_folder_is_never_read(tmp_path, capsys):
    """Whoever holds the key may still write a hostile name: it is refused, not followed."""
    from benchledger.ledger.dsse import encode_line, envelope
    from benchledger.ledger.keys import load_private_key
    from benchledger.ledger.signing import Signer

    key, pub = keypair(tmp_path / "keys")
    statement = {"_type": "https://in-toto.io/Statement/v1", "predicateType": TEST_RESULT,
                 "subject": [{"name": "../../etc/passwd", "digest": {"sha256": "0" * 64}},
                             {"name": "benchledger-run:r1", "digest": {"blake3": "0" * 64}}],
                 "predicate": {"result": "PASSED", "configuration": []}}  # fmt: skip
    signer = Signer(load_private_key(key))
    env = envelope("application/vnd.in-toto+json", json.dumps(statement).encode(), signer)
    (tmp_path / "evil.intoto.jsonl").write_bytes(encode_line(env))
    code, out, _ = cli(capsys, "verify", str(tmp_path / "evil.intoto.jsonl"), "--pubkey", pub)
    assert code == 1 and "is not a plain file name" in out


def test_attesting_a_run_sealed_by_another_key_writes_nothing(tmp_path, capsys):
    key, _ = keypair(tmp_path / "a")
    other, _ = keypair(tmp_path / "b")
    led = str(tmp_path / "l.sqlite")
    signed_run(led, key)
    assert cli(capsys, "export", "r1", "-o", str(tmp_path / "r1.jsonl"), "--ledger", led)[0] == 0
    out = tmp_path / "r1.intoto.jsonl"
    code, _, err = cli(capsys, "export", str(tmp_path / "r1.jsonl"), "--format", "attestation",
                       "-o", str(out), "--sign-key", other)  # fmt: skip
    assert code != 0 and not out.exists(), err


def test_a_run_with_a_failed_unit_is_attested_as_failed(tmp_path, capsys):
    key, pub = keypair(tmp_path / "keys")
    with open_store(str(tmp_path / "l.sqlite")) as store:
        failing = {**PASSING, "recall_correct": False}
        write_run(signing_ledger(store, key), "r2",
                  {("p000", 1): dict(PASSING), ("p001", 1): failing})  # fmt: skip
    led = str(tmp_path / "l.sqlite")
    assert cli(capsys, "export", "r2", "-o", str(tmp_path / "r2.jsonl"), "--ledger", led)[0] == 0
    code, _, err = cli(capsys, "export", str(tmp_path / "r2.jsonl"), "--format", "attestation",
                         "-o", str(tmp_path / "r2.intoto.jsonl"), "--sign-key", key)  # fmt: skip
    assert code == 0, err
    result = _statements(tmp_path / "r2.intoto.jsonl", pub)[0]["predicate"]
    assert result["result"] == "FAILED"
    assert result["failedTests"] == ["p001#1"] and result["passedTests"] == ["p000#1"]


def test_an_attestation_is_only_of_a_bundle_file(tmp_path, capsys):
    key, _ = keypair(tmp_path / "keys")
    led = str(tmp_path / "l.sqlite")
    signed_run(led, key)
    out = str(tmp_path / "x.intoto.jsonl")
    code, _, err = cli(capsys, "export", "r1", "--format", "attestation", "-o", out,
                       "--sign-key", key, "--ledger", led)  # fmt: skip
    one_line_exit_2(code, err, "attests a bundle file", "benchledger export RUN -o RUN.jsonl")
