"""Signed seals: who sealed a run, checked against keys the reader trusts.

The forgery tests rebuild a tampered bundle from scratch with only ``json``, ``blake3`` and
``cryptography``, following docs/ledger-format.md: every link, every stream head, the
Merkle root, the seal and the header. Plain ``verify`` passes such a forgery (that is the
point of the issue) and says the root is unauthenticated; ``verify --trusted-key`` refuses it.
"""

from __future__ import annotations

import base64
import json
import os
import pickle
import re
import sqlite3
from collections.abc import Callable
from pathlib import Path

import msgspec
import pytest
from blake3 import blake3
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.serialization import (
    BestAvailableEncryption,
    Encoding,
    NoEncryption,
    PrivateFormat,
    PublicFormat,
)

from benchledger.cli import main
from benchledger.ledger import Ledger, UnusableInput, open_store
from benchledger.ledger.bundle import export_run
from benchledger.ledger.events import RunSealedBody, StreamHead
from benchledger.ledger.keys import load_private_key, load_public_keys
from benchledger.ledger.signing import Signer, authenticate, fingerprint
from tests.conftest import keypair, one_line_exit_2, planned_run, signed_run
from tests.sample import PASSING, counter_clock, lifecycle_run
from tests.test_attacks import H, canon, mth

DOCS = Path(__file__).resolve().parent.parent / "docs" / "ledger-format.md"


# -- helpers ------------------------------------------------------------------------------


def export(ledger_path: str, run_id: str, out: Path) -> str:
    store = open_store(ledger_path)
    export_run(Ledger(store), run_id, str(out))
    store.close()
    return str(out)


def verify(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(["verify", *argv])
    out = capsys.readouterr()
    return code, out.out, out.err


# -- a forger who follows docs/ledger-format.md -------------------------------------------


def link(e: dict) -> str:
    """An event's link hash: format 1 over its bytes; format 2 over its sealed form (for a
    withholdable kind the bytes with the body replaced by the body's digest)."""
    if e.get("v") != 2:
        return blake3(b"benchledger:event:v1\x00" + canon(e)).hexdigest()
    if e["kind"] in ("session_call", "model_call", "read_back"):  # the withholdable kinds
        digest = blake3(b"benchledger:body:v2\x00" + canon(e["body"])).hexdigest()
        e = {**e, "body": digest}
    return blake3(b"benchledger:event:v2\x00" + canon(e)).hexdigest()


Resign = Callable[[str, dict], dict]


def forge(src: str, dst: Path, *, signature: str = "drop", resign: Resign | None = None) -> str:
    """Flip a recorded verdict, then rebuild every link, head, root, the seal and the header.

    ``signature``: "drop" removes the seal's signature, "keep" leaves the original one,
    "resign" replaces it with ``resign(run, body)``. Returns the forged root.
    """
    lines = Path(src).read_bytes().split(b"\n")
    header = json.loads(lines[0])
    events = [json.loads(x) for x in lines[1:] if x]
    target = next(
        e for e in events if e["kind"] == "grader_decision" and e["body"]["verdict"] is True
    )
    target["body"]["verdict"] = False
    run = header["run"]
    heads: list[list] = []
    seal = None
    prev, cur = "", None
    for e in events:
        if e["stream"] != cur:
            cur = e["stream"]
            prev = blake3(b"benchledger:genesis:v1\x00" + cur.encode()).hexdigest()
            heads.append([])
        e["prev"] = prev
        if e["kind"] == "run_sealed":
            seal = e
            continue
        prev = link(e)
        heads[-1] = [cur, e["seq"] + 1, prev]
    assert seal is not None
    root = mth([H(b"\x00" + canon(leaf)) for leaf in heads]).hex()
    body = seal["body"]
    body["heads"], body["root"] = heads, root
    if signature == "drop":
        body.pop("signature", None)
    elif signature == "resign":
        assert resign is not None
        body["signature"] = resign(run, body)
    header["root"] = root
    dst.write_bytes(b"\n".join([canon(header), *(canon(e) for e in events)]) + b"\n")
    return root


def resign_with(private: Ed25519PrivateKey) -> Resign:
    """A re-signer that builds the statement as docs/ledger-format.md describes."""
    raw = private.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    key = blake3(b"benchledger:key:v1\x00" + raw).hexdigest()

    def sign(run: str, body: dict) -> dict:
        statement = {
            "events": body["events"],
            "key": key,
            "root": body["root"],
            "run": run,
            "signed_at": 1,
            "streams": body["streams"],
            "tool_version": "forger 1.0",
        }
        sig = private.sign(b"benchledger:seal:v1\x00" + canon(statement))
        return {
            "key": key,
            "public_key": raw.hex(),
            "signature": sig.hex(),
            "signed_at": 1,
            "tool_version": "forger 1.0",
        }

    return sign


@pytest.fixture
def published(tmp_path) -> dict[str, str]:
    """A genuine signed bundle, its publisher's public key, and another party's key pair."""
    key, pub = keypair(tmp_path / "publisher")
    other_key, other_pub = keypair(tmp_path / "forger")
    db = str(tmp_path / "l.sqlite")
    root = signed_run(db, key)
    bundle = export(db, "r1", tmp_path / "genuine.jsonl")
    return {
        "bundle": bundle,
        "pub": pub,
        "root": root,
        "other_key": other_key,
        "other_pub": other_pub,
        "dir": str(tmp_path),
    }


# -- keys ---------------------------------------------------------------------------------


def test_keys_new_writes_a_private_key_only_its_owner_can_read_and_a_public_key(tmp_path, capsys):
    assert main(["keys", "new", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    key, pub = tmp_path / "benchledger.key", tmp_path / "benchledger.pub"
    assert os.stat(key).st_mode & 0o777 == 0o600
    assert key.read_text().startswith("-----BEGIN PRIVATE KEY-----")
    assert re.fullmatch(r"ed25519:[0-9a-f]{64}\n", pub.read_text())
    [raw] = load_public_keys([str(pub)])
    assert fingerprint(raw) in out
    assert key.read_text() not in out


def test_keys_new_refuses_to_overwrite_a_key_and_changes_nothing(tmp_path, capsys):
    keypair(tmp_path)
    before = (tmp_path / "benchledger.key").read_bytes()
    code = main(["keys", "new", "--out", str(tmp_path)])
    one_line_exit_2(code, capsys.readouterr().err, "refusing to overwrite")
    assert (tmp_path / "benchledger.key").read_bytes() == before


def test_keys_show_prints_the_same_fingerprint_for_the_key_and_its_public_half(tmp_path, capsys):
    key, pub = keypair(tmp_path)
    assert main(["keys", "show", key]) == 0
    from_key = capsys.readouterr().out
    assert main(["keys", "show", pub]) == 0
    assert capsys.readouterr().out == from_key


# -- signing, pure --------------------------------------------------------------------------


def _body(root: str = "ab" * 32) -> RunSealedBody:
    return RunSealedBody(root=root, streams=1, events=2, heads=[StreamHead("r", 2, "cd" * 32)])


def _sealed(signer: Signer, run: str = "r", root: str = "ab" * 32) -> RunSealedBody:
    body = _body(root)
    return msgspec.structs.replace(body, signature=signer.sign(run, body, 5))


def _root_changed_after_signing(signer: Signer) -> RunSealedBody:
    return msgspec.structs.replace(_sealed(signer), root="00" * 32)


_KEY = Ed25519PrivateKey.generate()
_OTHER = Ed25519PrivateKey.generate()


@pytest.mark.parametrize(
    ("seal", "trusted", "signed", "valid", "authenticated"),
    [
        (_sealed, [_KEY], True, True, True),
        (_sealed, [_OTHER], True, True, False),
        (_sealed, None, True, True, False),
        (lambda s: _body(), [_KEY], False, False, False),
        (lambda s: _sealed(s, run="another-run"), [_KEY], True, False, False),
        (_root_changed_after_signing, [_KEY], True, False, False),
    ],
    ids=[
        "trusted-key",
        "untrusted-key",
        "no-trusted-keys",
        "unsigned",
        "copied-from-another-run",
        "root-changed-after-signing",
    ],
)
def test_authenticate_accepts_only_a_valid_signature_by_a_trusted_key(
    seal, trusted, signed, valid, authenticated
):
    signer = Signer(_KEY, "t")
    keys = None if trusted is None else [Signer(k).public_key for k in trusted]
    auth = authenticate("r", seal(signer), keys)
    assert (auth.signed, auth.valid, auth.authenticated) == (signed, valid, authenticated)
    assert authenticated or auth.problem


def test_a_signer_never_shows_or_serializes_its_private_key():
    signer = Signer(_KEY, "t")
    raw = _KEY.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    assert raw.hex() not in repr(signer) and signer.key_id[:16] in repr(signer)
    with pytest.raises(TypeError):
        pickle.dumps(signer)


def test_an_unsigned_seal_has_the_same_bytes_as_before_signatures_existed(tmp_path):
    db = str(tmp_path / "l.sqlite")
    signed_run(db, None)
    bundle = export(db, "r1", tmp_path / "b.jsonl")
    seal_line = Path(bundle).read_text().splitlines()[2]
    assert '"kind":"run_sealed"' in seal_line and "signature" not in seal_line


# -- verify: the forgery ------------------------------------------------------------


def test_the_genuine_bundle_is_authenticated_by_its_publishers_key(published, capsys):
    code, out, _ = verify(capsys, published["bundle"], "--trusted-key", published["pub"])
    assert code == 0 and "authenticated:" in out


def test_a_forgery_rebuilt_from_scratch_passes_plain_verify_but_says_unauthenticated(
    published, tmp_path, capsys
):
    forged = tmp_path / "forged.jsonl"
    root = forge(published["bundle"], forged)
    assert root != published["root"]
    code, out, _ = verify(capsys, str(forged))
    assert code == 0, out  # the chain, heads and root are all consistent: this is the gap
    assert f"root {root}" in out and "UNAUTHENTICATED: the seal is not signed" in out
    code, out, _ = verify(capsys, str(forged), "--trusted-key", published["pub"])
    assert code == 1 and "not authenticated: the seal carries no signature" in out


def test_a_forgery_that_keeps_the_original_signature_fails_even_plain_verify(
    published, tmp_path, capsys
):
    forged = tmp_path / "forged.jsonl"
    forge(published["bundle"], forged, signature="keep")
    code, out, _ = verify(capsys, str(forged))
    assert code == 1 and "bad seal signature" in out


def test_a_forgery_resigned_with_another_key_fails_against_the_publishers_key(
    published, tmp_path, capsys
):
    forged = tmp_path / "forged.jsonl"
    forger = load_private_key(published["other_key"])
    forge(published["bundle"], forged, signature="resign", resign=resign_with(forger))
    code, out, _ = verify(capsys, str(forged))
    assert code == 0 and "UNAUTHENTICATED" in out and "no key was named as trusted" in out
    code, out, _ = verify(capsys, str(forged), "--pubkey", published["pub"])
    assert code == 1 and "not among the trusted keys" in out
    # ...and the forger's own key does authenticate it: trust is in the key, not the file.
    assert verify(capsys, str(forged), "--pubkey", published["other_pub"])[0] == 0


def test_a_trusted_keys_file_may_list_several_keys(published, tmp_path, capsys):
    trusted = tmp_path / "trusted"
    lines = [Path(published["other_pub"]).read_text(), Path(published["pub"]).read_text()]
    trusted.write_text("# our keys\n" + "".join(lines))
    assert verify(capsys, published["bundle"], "--pubkey", str(trusted))[0] == 0


def test_verify_of_a_run_in_a_ledger_checks_the_signature_too(tmp_path, capsys):
    key, pub = keypair(tmp_path / "k")
    _, other = keypair(tmp_path / "o")
    db = str(tmp_path / "l.sqlite")
    signed_run(db, key)
    assert verify(capsys, "r1", "--ledger", db, "--pubkey", pub)[0] == 0
    code, out, _ = verify(capsys, "r1", "--ledger", db, "--pubkey", other)
    assert code == 1 and "not among the trusted keys" in out


def test_the_docs_signature_check_accepts_a_signed_seal_and_rejects_a_resigned_forgery(
    published, tmp_path
):
    text = DOCS.read_text(encoding="utf-8")
    block = re.search(r"signature-check:.*?\n```python\n(.*?)```", text, re.S)
    assert block
    scope: dict[str, object] = {}
    exec(compile(block.group(1), str(DOCS), "exec"), scope)
    check = scope["check_seal_signature"]
    trusted = [Path(published["pub"]).read_text().strip().removeprefix("ed25519:")]

    def seal_of(path: str) -> dict:
        return next(
            json.loads(x)
            for x in Path(path).read_text().splitlines()[1:]
            if '"kind":"run_sealed"' in x
        )

    assert check(seal_of(published["bundle"]), trusted)  # type: ignore[operator]
    forged = tmp_path / "forged.jsonl"
    forge(
        published["bundle"],
        forged,
        signature="resign",
        resign=resign_with(load_private_key(published["other_key"])),
    )
    with pytest.raises(AssertionError, match="do not trust"):
        check(seal_of(str(forged)), trusted)  # type: ignore[operator]


# -- bad key files: one line, exit 2, nothing written ----------------------------------------


def _bad_keys(tmp_path: Path) -> dict[str, tuple[Path, str]]:
    key, pub = keypair(tmp_path / "good")
    loose = tmp_path / "loose.key"
    loose.write_bytes(Path(key).read_bytes())
    loose.chmod(0o644)
    garbage = tmp_path / "garbage.key"
    garbage.write_text("not a key\n")
    garbage.chmod(0o600)
    enc = tmp_path / "enc.key"
    enc.write_bytes(
        Ed25519PrivateKey.generate().private_bytes(
            Encoding.PEM, PrivateFormat.PKCS8, BestAvailableEncryption(b"pw")
        )
    )
    enc.chmod(0o600)
    return {
        "missing": (tmp_path / "nope.key", "no such private key file"),
        "readable-by-others": (loose, "chmod 600"),
        "garbage": (garbage, "not a PEM private key"),
        "public-key-given": (Path(pub), "this is a public key"),
        "encrypted": (enc, "encrypted"),
        "a-directory": (tmp_path, "not a regular file"),
    }


BAD_KEYS = [
    "missing",
    "readable-by-others",
    "garbage",
    "public-key-given",
    "encrypted",
    "a-directory",
]


@pytest.mark.parametrize("case", BAD_KEYS, ids=BAD_KEYS)
def test_seal_with_a_bad_key_file_is_one_line_exit_2_and_leaves_the_run_unsealed(
    tmp_path, capsys, case
):
    path, needle = _bad_keys(tmp_path)[case]
    db = str(tmp_path / "l.sqlite")
    store = open_store(db)
    ledger = Ledger(store, clock=counter_clock())
    lifecycle_run(ledger, "r1", {("p1", 1): dict(PASSING)})
    store.close()
    # lifecycle_run seals; make a second, unsealed run to seal.
    store = open_store(db)
    planned_run(Ledger(store, clock=counter_clock(1_790_000_000_000_000_000)), "r2", ["p1"], ["p1"])
    store.close()
    code = main(["seal", "r2", "--sign-key", str(path), "--ledger", db])
    one_line_exit_2(code, capsys.readouterr().err, needle)
    store = open_store(db)
    assert Ledger(store).run_info("r2").root == ""
    store.close()


@pytest.mark.parametrize("case", ["missing", "garbage"], ids=["missing", "garbage"])
def test_run_with_a_bad_key_file_writes_nothing(tmp_path, capsys, case, monkeypatch):
    path, needle = _bad_keys(tmp_path)[case]
    db = tmp_path / "run.sqlite"
    monkeypatch.setenv("BENCHLEDGER_SIGNING_KEY", str(path))
    code = main(["run", "--ledger", str(db), "--run-id", "x"])
    one_line_exit_2(code, capsys.readouterr().err, needle)
    assert not db.exists()


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        ("ed25519:abcd\n", "64 hex digits"),
        ("", "holds no public key"),
        ("-----BEGIN PRIVATE KEY-----\nxx\n-----END PRIVATE KEY-----\n", "this is a private key"),
    ],
    ids=["short-hex", "empty", "private-key-given"],
)
def test_verify_with_a_bad_public_key_file_is_one_line_exit_2(
    published, tmp_path, capsys, content, needle
):
    bad = tmp_path / "bad.pub"
    bad.write_text(content)
    code, out, err = verify(capsys, published["bundle"], "--pubkey", str(bad))
    one_line_exit_2(code, err, needle)
    assert out == ""


def test_load_private_key_names_the_file_never_its_content(tmp_path):
    garbage = tmp_path / "k"
    garbage.write_text("SECRET-MATERIAL\n")
    garbage.chmod(0o600)
    with pytest.raises(UnusableInput) as exc:
        load_private_key(str(garbage))
    assert str(garbage) in str(exc.value) and "SECRET" not in str(exc.value)


# -- the seal command and the environment ----------------------------------------------------


def test_seal_signs_with_the_key_named_in_the_environment(tmp_path, capsys, monkeypatch):
    key, pub = keypair(tmp_path / "k")
    db = str(tmp_path / "l.sqlite")
    store = open_store(db)
    planned_run(Ledger(store, clock=counter_clock()), "r2", ["p1"], ["p1"])
    store.close()
    monkeypatch.setenv("BENCHLEDGER_SIGNING_KEY", key)
    assert main(["seal", "r2", "--ledger", db]) == 0
    assert "signed by key" in capsys.readouterr().out
    assert verify(capsys, "r2", "--ledger", db, "--pubkey", pub)[0] == 0
    code = main(["seal", "r2", "--ledger", db])
    one_line_exit_2(code, capsys.readouterr().err, "already sealed")


# -- the private key goes nowhere -------------------------------------------------------------


def test_a_planted_private_key_never_reaches_the_ledger_a_bundle_a_report_or_the_output(
    tmp_path, capsys, monkeypatch
):
    key, pub = keypair(tmp_path / "k")
    private = load_private_key(key)
    raw = private.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())
    pem_body = "".join(Path(key).read_text().splitlines()[1:-1])
    secrets = [raw.hex(), base64.b64encode(raw).decode(), pem_body, raw.hex().upper()]
    db = str(tmp_path / "l.sqlite")
    monkeypatch.setenv("BENCHLEDGER_SIGNING_KEY", key)
    signed_run(db, key)
    outputs = []
    for argv in (
        ["verify", "r1", "--pubkey", pub],
        ["log", "r1"],
        ["report", "r1", "--format", "json"],
        ["audit", "r1", "capture_rate"],
        ["export", "r1", "-o", str(tmp_path / "b.jsonl")],
        ["export", "r1", "-o", str(tmp_path / "red.jsonl"), "--withhold", "model_call"],
        ["keys", "show", key],
        ["keys", "new", "--out", str(tmp_path / "k")],
    ):
        main([*argv, "--ledger", db] if argv[0] != "keys" else argv)
        out = capsys.readouterr()
        outputs.append(out.out + out.err)
    con = sqlite3.connect(db)
    stored: list[bytes] = []
    for (table,) in con.execute("select name from sqlite_master where type='table'").fetchall():
        for row in con.execute(f'select * from "{table}"'):
            stored += [v if isinstance(v, bytes) else str(v).encode() for v in row]
    con.close()
    everything = [
        Path(db).read_bytes(),
        *stored,
        (tmp_path / "b.jsonl").read_bytes(),
        (tmp_path / "red.jsonl").read_bytes(),
        *(o.encode() for o in outputs),
    ]
    for secret in secrets:
        for blob in everything:
            assert secret.encode() not in blob
