"""Attacks on the published files by a third party (issue 27, item 9).

The attacker holds what the publisher put out, a full, a redacted and an audit bundle
and ``benchledger.pub``, and wants another number: ``benchledger verify --pubkey`` saying
"authenticated" (exit 0) over edited bytes, or ``report``/``audit`` showing other numbers
of a file that verifies. tests/test_attacks.py forges the chain, the seal and the
placeholders with the documented recipes; this file tries what a lenient reader might
read differently from what was hashed (line order, stream names, JSON spellings, event
format, header fields, seal fields, gzip framing, audit proofs) and the import of a file
that changes between reads. Each test says what stops the attack, or (xfail strict) names
the hole that is still open.
"""

from __future__ import annotations

import gzip
import http.client
import json
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import pytest
from blake3 import blake3

from benchledger.cli import main
from benchledger.ledger import Ledger, UnusableInput, open_store
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    EpisodeStartedBody,
    GraderDecisionBody,
    InfraErrorBody,
    ModelCallBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.keys import load_public_keys, write_key_pair
from benchledger.ledger.ledger import check_run_id
from benchledger.ledger.verified import UNBOUND, open_run
from benchledger.refplatform.auth import Keyring, pool_key
from benchledger.refplatform.server import RunningPlatform
from tests.conftest import planned_run, signing_ledger
from tests.sample import PASSING, counter_clock
from tests.test_attacks import (
    RUN,
    Bundle,
    audit_path,
    canon,
    edit,
    full_lifecycle,
    genesis,
    leaf,
    link,
    mth,
    publish,
    refused,
    verify,
    withhold,
)
from tests.test_runner import subset

# -- helpers -----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def public(tmp_path_factory) -> dict[str, str]:
    """What the publisher published (tests/test_attacks.py's files): full, audit and
    redacted bundles, and the public key."""
    return publish(tmp_path_factory)


def _failing_decision(b: Bundle) -> int:
    """The line of p1's failed abstention (what an attacker wants to read as passed)."""
    return b.index(
        lambda o: o["stream"] == f"{RUN}/p1/1" and o["kind"] == "grader_decision"
        and isinstance(o["body"], dict) and o["body"].get("verdict") is False
    )  # fmt: skip


def _sort(b: Bundle) -> None:
    """Put the lines in bundle order (stream name bytewise, then seq), as a forger would."""
    b.lines.sort(key=lambda x: (json.loads(x)["stream"].encode(), json.loads(x)["seq"]))


def _spell(old: bytes, new: bytes) -> Callable[[Bundle], None]:
    """Respell one stretch of p1's failed-abstention line (its JSON value unchanged or not)."""

    def go(b: Bundle) -> None:
        i = _failing_decision(b)
        assert old in b.lines[i], b.lines[i]
        b.lines[i] = b.lines[i].replace(old, new, 1)

    return go


def _swap_within(b: Bundle) -> None:
    """p1's failed abstention moved one place later (after the decision following it)."""
    i = _failing_decision(b)
    b.lines[i], b.lines[i + 1] = b.lines[i + 1], b.lines[i]


def _stream_moved(b: Bundle) -> None:
    """p1's whole stream moved after p2's."""
    p1 = [x for x in b.lines if json.loads(x)["stream"] == f"{RUN}/p1/1"]
    rest = [x for x in b.lines if json.loads(x)["stream"] != f"{RUN}/p1/1"]
    at = max(i for i, x in enumerate(rest) if json.loads(x)["stream"] == f"{RUN}/p2/1") + 1
    b.lines = rest[:at] + p1 + rest[at:]


def _copied_as(name: str) -> Callable[[Bundle], None]:
    """A passing unit (p0) copied, rechained under ``name``, placed where ``name`` sorts: a
    second passing unit, every link of it intact."""

    def go(b: Bundle) -> None:
        for x in [x for x in b.lines if json.loads(x)["stream"] == f"{RUN}/p0/1"]:
            b.lines.append(edit(x, stream=name))
        _sort(b)
        b.rechain(name)

    return go


def _downgraded_line(b: Bundle) -> None:
    """p1's failed abstention without ``"v":2``: a format-1 event with its own v1 link."""
    i = _failing_decision(b)
    obj = json.loads(b.lines[i])
    del obj["v"]
    b.lines[i] = canon(obj)
    b.rechain(f"{RUN}/p1/1")


def _v3(b: Bundle) -> None:
    i = _failing_decision(b)
    b.lines[i] = b.lines[i].replace(b',"v":2}', b',"v":3}')


def _decision_as_v1_placeholder(b: Bundle) -> None:
    """The downgrade: p1's failed abstention shown as a format-1 placeholder of a withheld
    model call that *states* the decision's true v2 link, so every link still holds, and
    format 1 binds no placeholder's kind."""
    i = _failing_decision(b)
    obj = json.loads(b.lines[i])
    h = link(b.lines[i])
    del obj["body"], obj["v"]
    obj.update(hash=h, withheld=True, kind="model_call")
    b.lines[i] = canon(obj)


EDITS: list[tuple[str, Callable[[Bundle], None]]] = [
    ("lines-swapped-within-a-stream", _swap_within),
    ("stream-moved-after-the-next-one", _stream_moved),
    ("stream-copied-under-a-name-that-sorts-earlier", _copied_as(f"{RUN}/P0/1")),
    ("stream-copied-under-a-name-that-sorts-between", _copied_as(f"{RUN}/p0/2")),
    ("stream-copied-under-a-prefix-sibling", _copied_as(f"{RUN}/p0/10")),
    ("stream-copied-under-a-name-with-a-nul", _copied_as(f"{RUN}/p0/1\x00")),
    ("stream-copied-under-a-unicode-lookalike", _copied_as(f"{RUN}/p\u03bf/1")),
    ("stream-copied-under-a-dot-dot-name", _copied_as(f"{RUN}/../{RUN}/p0/1")),
    ("duplicate-key-verdict", _spell(b'"verdict":false', b'"verdict":false,"verdict":true')),
    ("duplicate-key-seq", _spell(b'"seq":', b'"seq":0,"seq":')),
    ("insignificant-whitespace", _spell(b'"verdict":false', b'"verdict": false')),
    ("unicode-escape-for-a-letter", _spell(b'"stage":"abstain"', b'"stage":"\\u0061bstain"')),
    ("float-for-an-int", _spell(b'"refs":[3]', b'"refs":[3.0]')),
    ("seq-as-a-big-int", _spell(b'"seq":', b'"seq":18446744073709551616')),
    ("v-removed-and-rechained", _downgraded_line),
    ("v-changed-to-3", _v3),
]


def _write(b: Bundle, tmp_path: Path, name: str) -> str:
    return b.write(tmp_path / f"{name}.jsonl")


def _not_the_keys(capsys, path: str, public: dict[str, str]) -> str:
    """``path`` fails verify with the publisher's key and no display given the key shows it;
    one given no key may (its chain is intact), never as authenticated."""
    code, out = verify(capsys, path, "--pubkey", public["pub"])
    assert code == 1 and "authenticated:" not in out, out
    assert main(["report", path, "--pubkey", public["pub"]]) == 1
    assert capsys.readouterr().out == ""
    if main(["report", path, "--format", "json"]) == 0:
        assert json.loads(capsys.readouterr().out)["authentication"]["authenticated"] is False
    capsys.readouterr()
    return out


# -- lines and JSON spellings of a full bundle ---------------------------------------------------


@pytest.mark.parametrize("edit_", [e for _, e in EDITS], ids=[n for n, _ in EDITS])
def test_an_edited_full_bundle_line_is_refused_with_the_publishers_key(
    public, tmp_path, capsys, edit_
):
    b = Bundle(public["full"])
    edit_(b)
    refused(capsys, _write(b, tmp_path, "edited"), public)


@pytest.mark.parametrize("which", ["full", "redacted"], ids=["full", "redacted"])
def test_a_decision_downgraded_to_a_format_1_placeholder_stating_its_own_link_is_refused(
    public, tmp_path, capsys, which
):
    """Every link holds (the placeholder states the decision's true v2 link hash), so only
    the run's one event format stops it: a v2 run takes no v1 placeholder."""
    b = Bundle(public[which])
    _decision_as_v1_placeholder(b)
    out = refused(capsys, _write(b, tmp_path, "downgraded"), public)
    assert "format mismatch" in out or "unexpected placeholder" in out, out


# -- framing: line endings, BOM, blank lines, gzip members --------------------------------------


def _gz(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _framed(public: dict[str, str], how: str) -> bytes:
    raw = Path(public["full"]).read_bytes()
    extra = Bundle(public["full"]).lines[1]  # an event again, after the seal
    return {
        "crlf": raw.replace(b"\n", b"\r\n"),
        "crlf-on-event-lines-only": raw.replace(b"\n", b"\r\n").replace(b"\r\n", b"\n", 1),
        "gzip-second-member-adds-an-event": _gz(raw) + _gz(extra + b"\n"),
    }[how]


@pytest.mark.parametrize(
    "how", ["crlf", "crlf-on-event-lines-only", "gzip-second-member-adds-an-event"]
)
def test_a_bundle_reframed_to_change_its_lines_is_refused(public, tmp_path, capsys, how):
    path = tmp_path / "framed.jsonl"
    path.write_bytes(_framed(public, how))
    refused(capsys, str(path), public)


@pytest.mark.parametrize(
    ("how", "says"),
    [
        ("utf-8-bom", "not a benchledger bundle header"),
        ("blank-line-in-the-middle", "blank line"),
        ("garbage-after-the-gzip-data", "unreadable"),
    ],
    ids=["utf-8-bom", "blank-line-in-the-middle", "garbage-after-the-gzip-data"],
)
def test_a_bundle_with_broken_framing_is_one_line_exit_2(public, tmp_path, capsys, how, says):
    raw = Path(public["full"]).read_bytes()
    mid = raw.index(b"\n", len(raw) // 2) + 1
    data = {
        "utf-8-bom": b"\xef\xbb\xbf" + raw,
        "blank-line-in-the-middle": raw[:mid] + b"\n" + raw[mid:],
        "garbage-after-the-gzip-data": _gz(raw) + b"PK\x03\x04 not gzip",
    }[how]
    path = tmp_path / "framed.jsonl"
    path.write_bytes(data)
    code, out = verify(capsys, str(path), "--pubkey", public["pub"])
    lines = out.strip().splitlines()
    assert code == 2 and len(lines) == 1 and says in lines[0], out
    assert "authenticated:" not in out


@pytest.mark.parametrize(
    "how", ["gzip-split-inside-a-line", "gzip-empty-second-member", "no-final-newline"]
)
def test_a_bundle_reframed_without_changing_its_lines_shows_the_signed_numbers(
    public, tmp_path, capsys, how
):
    """Framing is not signed, the lines are: two gzip members read as one stream, and a
    missing final newline reads as the same last line."""
    raw = Path(public["full"]).read_bytes()
    cut = raw.index(b"\n", len(raw) // 2) - 40
    data = {
        "gzip-split-inside-a-line": _gz(raw[:cut]) + _gz(raw[cut:]),
        "gzip-empty-second-member": _gz(raw) + _gz(b""),
        "no-final-newline": raw.rstrip(b"\n"),
    }[how]
    path = tmp_path / "framed.jsonl"
    path.write_bytes(data)
    code, out = verify(capsys, str(path), "--pubkey", public["pub"])
    assert code == 0 and "authenticated:" in out, out
    assert full_lifecycle(str(path), capsys) == full_lifecycle(public["full"], capsys) == (3, 5)


# -- the header line: nothing signs it, so it may only ever say what the lines prove ---------------


def _proofs_for_all(b: Bundle) -> dict[str, Any]:
    heads = b.seal()["body"]["heads"]
    leaves = [leaf(h) for h in heads]
    return {
        h[0]: {"index": i, "path": audit_path(i, leaves), "size": len(heads)}
        for i, h in enumerate(heads)
    }


HEADERS: list[tuple[str, str, Callable[[Bundle], dict[str, Any]]]] = [
    ("root-upper-case", "full", lambda b: dict(b.header, root=b.header["root"].upper())),
    ("an-extra-field", "full", lambda b: dict(b.header, signed=True, verdicts="all passed")),
    ("root-emptied", "full", lambda b: dict(b.header, root="")),
    ("rules-on-a-full-bundle", "full", lambda b: dict(b.header, withheld=["kind:model_call"])),
    ("full-relabelled-redacted", "full",
     lambda b: dict(b.header, format="benchledger-redacted/1", withheld=[])),
    ("full-relabelled-audit-with-proofs", "full",
     lambda b: dict(b.header, format="benchledger-audit/1", proofs=_proofs_for_all(b))),
]  # fmt: skip


@pytest.mark.parametrize(
    ("source", "header"), [(s, h) for _, s, h in HEADERS], ids=[n for n, _, _ in HEADERS]
)
def test_a_header_edit_that_the_lines_still_prove_shows_the_signed_numbers(
    public, tmp_path, capsys, source, header
):
    b = Bundle(public[source])
    b.header = header(b)
    path = _write(b, tmp_path, "header")
    code, out = verify(capsys, path, "--pubkey", public["pub"])
    assert code == 0 and "authenticated:" in out, out
    assert b.seal()["body"]["root"] in out  # the sealed root, lower-case, whatever the header
    if b.header["format"] == "benchledger-audit/1":  # a report needs the whole run
        assert main(["report", path, "--format", "json"]) == 1
        capsys.readouterr()
    else:
        assert full_lifecycle(path, capsys) == (3, 5)


REFUSED_HEADERS: list[tuple[str, str, Callable[[Bundle], dict[str, Any]]]] = [
    ("run-id-in-upper-case", "full", lambda b: dict(b.header, run=RUN.upper())),
    ("root-of-nothing", "full", lambda b: dict(b.header, root="0" * 64)),
    ("full-relabelled-audit-without-proofs", "full",
     lambda b: dict(b.header, format="benchledger-audit/1")),
    ("full-relabelled-redacted-with-a-rule", "full",
     lambda b: dict(b.header, format="benchledger-redacted/1", withheld=["kind:model_call"])),
    ("audit-relabelled-full", "audit-captured",  # it lacks the streams recall_surfaced skips
     lambda b: {"format": "benchledger-bundle/1", "root": b.header["root"], "run": RUN}),
    ("redacted-relabelled-full", "redacted",
     lambda b: {"format": "benchledger-bundle/1", "root": b.header["root"], "run": RUN}),
    ("audit-relabelled-redacted", "audit-captured",
     lambda b: {"format": "benchledger-redacted/1", "root": b.header["root"], "run": RUN}),
    ("redacted-relabelled-audit-with-proofs", "redacted",
     lambda b: {"format": "benchledger-audit/1", "proofs": _proofs_for_all(b),
                "root": b.header["root"], "run": RUN}),
]  # fmt: skip


@pytest.mark.parametrize(
    ("source", "header"),
    [(s, h) for _, s, h in REFUSED_HEADERS],
    ids=[n for n, _, _ in REFUSED_HEADERS],
)
def test_a_header_edit_the_lines_do_not_prove_is_refused(public, tmp_path, capsys, source, header):
    b = Bundle(public[source])
    b.header = header(b)
    refused(capsys, _write(b, tmp_path, "header"), public)


@pytest.mark.parametrize(
    "run",
    [f"{RUN}/p1/1", f"../{RUN}", f"{RUN}\x00", "", "p\u03bfb"],
    ids=["a-stream-name", "dot-dot", "nul", "empty", "unicode"],
)
def test_a_header_run_id_with_path_or_odd_characters_is_one_line_exit_2(
    public, tmp_path, capsys, run
):
    b = Bundle(public["full"])
    b.header = dict(b.header, run=run)
    path = _write(b, tmp_path, "run-id")
    for argv in (["verify", path, "--pubkey", public["pub"]],
                 ["import", path, "--ledger", str(tmp_path / "l.sqlite")]):  # fmt: skip
        code = main(argv)
        err = capsys.readouterr().err.strip().splitlines()
        assert code == 2 and len(err) == 1 and "field run" in err[0], err
    assert not (tmp_path / "l.sqlite").exists()


@pytest.mark.parametrize(
    "cut", [[], [f"{RUN}/p1/1", f"{RUN}/p4/1"]], ids=["seal-only", "seal-and-failing-units"]
)
def test_a_signed_bundle_cut_down_to_an_unsealed_one_is_refused_by_every_display_given_the_key(
    public, tmp_path, capsys, cut
):
    """Without the seal nothing says which streams the run had: the failing units can go
    too, and the rest still chains. So nothing unsealed is shown as the publisher's."""
    b = Bundle(public["full"])
    b.lines = [
        x for x in b.lines
        if json.loads(x)["kind"] != "run_sealed" and json.loads(x)["stream"] not in cut
    ]  # fmt: skip
    b.header["root"] = ""
    path = _write(b, tmp_path, "unsealed")
    code, out = verify(capsys, path, "--pubkey", public["pub"], "--allow-unsealed")
    assert code == 1 and "authenticated:" not in out, out
    for argv in (["report", path], ["audit", path, "capture_rate"]):
        assert main([*argv, "--pubkey", public["pub"]]) == 1
        assert capsys.readouterr().out == ""


# -- the seal: every byte checked, the signature over run, root and counts ------------------------


def _seal_edit(change: Callable[[dict[str, Any]], None]) -> Callable[[Bundle], None]:
    def go(b: Bundle) -> None:
        i = b.index(lambda o: o["kind"] == "run_sealed")
        seal = json.loads(b.lines[i])
        change(seal)
        b.lines[i] = canon(seal)

    return go


def _bump(*keys: str) -> Callable[[dict[str, Any]], None]:
    def go(seal: dict[str, Any]) -> None:
        target = seal
        for k in keys[:-1]:
            target = target[k]
        target[keys[-1]] += 1

    return go


def _sig(seal: dict[str, Any]) -> dict[str, Any]:
    return seal["body"]["signature"]


_L = 2**252 + 27742317777372353535851937790883648493  # the Ed25519 group order


def _plus_l(s_hex: str) -> str:
    """The signature's S + L: the same point, a second encoding a lax verifier accepts."""
    return (int.from_bytes(bytes.fromhex(s_hex), "little") + _L).to_bytes(32, "little").hex()


SEALS = [
    ("events-count", _seal_edit(_bump("body", "events"))),
    ("streams-count", _seal_edit(_bump("body", "streams"))),
    ("time", _seal_edit(_bump("at"))),
    ("signed-at", _seal_edit(_bump("body", "signature", "signed_at"))),
    ("tool-version", _seal_edit(lambda s: s["body"]["signature"].update(tool_version="x"))),
    ("root-upper-case", _seal_edit(lambda s: s["body"].update(root=s["body"]["root"].upper()))),
    ("refs", _seal_edit(lambda s: s.update(refs=[0]))),
    ("signature-hex-upper-case", _seal_edit(lambda s: _sig(s).update(
        signature=_sig(s)["signature"].upper()))),
    ("public-key-hex-upper-case", _seal_edit(lambda s: _sig(s).update(
        public_key=_sig(s)["public_key"].upper()))),
    ("signature-s-plus-the-group-order", _seal_edit(lambda s: _sig(s).update(
        signature=_sig(s)["signature"][:64] + _plus_l(_sig(s)["signature"][64:])))),
    ("algorithm-none", _seal_edit(lambda s: _sig(s).update(algorithm="none"))),
    ("a-second-root-key", lambda b: b.lines.__setitem__(
        b.index(lambda o: o["kind"] == "run_sealed"),
        b.lines[b.index(lambda o: o["kind"] == "run_sealed")].replace(
            b'"root":', b'"root":"' + b"0" * 64 + b'","root":'),
    )),
    ("non-canonical-spacing", lambda b: b.lines.__setitem__(
        b.index(lambda o: o["kind"] == "run_sealed"),
        b.lines[b.index(lambda o: o["kind"] == "run_sealed")].replace(b'"events":', b'"events": '),
    )),
]  # fmt: skip


@pytest.mark.parametrize("change", [c for _, c in SEALS], ids=[n for n, _ in SEALS])
def test_a_seal_with_any_field_changed_is_refused(public, tmp_path, capsys, change):
    b = Bundle(public["full"])
    change(b)
    _not_the_keys(capsys, _write(b, tmp_path, "seal"), public)


def test_a_seal_spelling_out_its_default_algorithm_is_refused_as_non_canonical(
    public, tmp_path, capsys
):
    b = Bundle(public["full"])
    _seal_edit(lambda s: _sig(s).update(algorithm="ed25519"))(b)
    out = _not_the_keys(capsys, _write(b, tmp_path, "algorithm"), public)
    assert "non-canonical" in out, out


@pytest.fixture(scope="module")
def rerun(public, tmp_path_factory) -> dict[str, str]:
    """The publisher ran ``pub`` again elsewhere (p1 passing now), sealed with the same key."""
    d = tmp_path_factory.mktemp("rerun")
    key = os.path.join(public["dir"], "benchledger.key")
    db = str(d / "l.sqlite")
    with open_store(db) as store:
        ledger = signing_ledger(store, key, "t")
        ledger.start_run(RUN, RunStartedBody(suite="lifecycle", protocol_set_hash="set-1", k=1))
        w = ledger.new_stream(f"{RUN}/p1/1")
        w.append(UnitStartedBody(protocol_id="p1", attempt=1))
        w.append(UnitFinishedBody(outcome={"captured": True}))
        ledger.commit(w)
        ledger.seal(RUN)
    out = str(d / "rerun.jsonl")
    assert main(["export", RUN, "-o", out, "--ledger", db]) == 0
    return {"full": out}


def test_a_signature_copied_from_the_publishers_rerun_of_the_same_run_id_is_refused(
    public, rerun, tmp_path, capsys
):
    """p1's failure flipped, every link and the seal's heads and root rebuilt, and the seal
    given the signature the same key made over the same run id in another run."""
    b = Bundle(public["full"])
    i = _failing_decision(b)
    b.lines[i] = edit(b.lines[i], body=dict(json.loads(b.lines[i])["body"], verdict=True))
    b.rechain(f"{RUN}/p1/1")
    s = b.index(lambda o: o["kind"] == "run_sealed")
    seal = json.loads(b.lines[s])
    mine = b.heads()
    heads = [seal["body"]["heads"][0], *(mine[h[0]] for h in seal["body"]["heads"][1:])]
    root = mth([leaf(h) for h in heads]).hex()
    other = Bundle(rerun["full"]).seal()["body"]["signature"]
    seal["body"].update(heads=heads, root=root, signature=other)
    b.lines[s] = canon(seal)
    b.header["root"] = root
    out = _not_the_keys(capsys, _write(b, tmp_path, "copied-signature"), public)
    assert "signature" in out, out


# -- redacted bundles: placeholders and the unsigned rules ---------------------------------------


def _placeholder_extra(b: Bundle) -> None:
    i = b.index(lambda o: isinstance(o["body"], str))
    b.lines[i] = edit(b.lines[i], verdict=True)


def _placeholder_body_upper(b: Bundle) -> None:
    i = b.index(lambda o: isinstance(o["body"], str))
    b.lines[i] = edit(b.lines[i], body=json.loads(b.lines[i])["body"].upper())


def _placeholder_shown_with_a_fake_body(b: Bundle) -> None:
    """A withheld model call shown with a body of the attacker's: its digest is not the
    one the chain committed to."""
    i = b.index(lambda o: isinstance(o["body"], str))
    obj = json.loads(b.lines[i])
    obj["body"] = {"episode": "teach", "request_hash": "0" * 16, "response": {"t": "forged"}}
    b.lines[i] = canon(obj)


PLACEHOLDERS = [
    ("extra-field", _placeholder_extra),
    ("digest-upper-case", _placeholder_body_upper),
    ("shown-with-a-body-of-the-attackers", _placeholder_shown_with_a_fake_body),
]


@pytest.mark.parametrize("change", [c for _, c in PLACEHOLDERS], ids=[n for n, _ in PLACEHOLDERS])
def test_an_edited_placeholder_is_refused(public, tmp_path, capsys, change):
    b = Bundle(public["redacted"])
    change(b)
    refused(capsys, _write(b, tmp_path, "placeholder"), public)


def test_withholding_more_evidence_than_the_publisher_did_changes_no_number(
    public, tmp_path, capsys
):
    """The rules are not signed (trust.md says so): anyone may withhold more evidence of a
    bundle they hold, and it still verifies; never a decision, so the numbers stay."""
    b = Bundle(public["redacted"])
    for i, o in enumerate(b.objs()):
        if o["kind"] == "session_call":
            b.lines[i] = withhold(b.lines[i])
    b.header["withheld"] = sorted({*b.header["withheld"], "kind:session_call"})
    path = _write(b, tmp_path, "more-withheld")
    code, out = verify(capsys, path, "--pubkey", public["pub"])
    assert code == 0 and "authenticated:" in out, out
    assert full_lifecycle(path, capsys) == full_lifecycle(public["full"], capsys) == (3, 5)


# -- audit bundles: the proofs and the streams they hold ------------------------------------------


def _proof_index(b: Bundle) -> None:
    b.header["proofs"][f"{RUN}/p1/1"]["index"] += 1


def _proof_path(b: Bundle) -> None:
    path = b.header["proofs"][f"{RUN}/p1/1"]["path"]
    path[0], path[1] = path[1], path[0]


@pytest.mark.parametrize(
    "change", [_proof_index, _proof_path], ids=["index-of-another-leaf", "path-reordered"]
)
def test_an_audit_bundle_whose_proof_lies_about_where_its_stream_is_is_refused(
    public, tmp_path, capsys, change
):
    b = Bundle(public["audit"])
    change(b)
    out = refused(capsys, _write(b, tmp_path, "proof"), public)
    assert "not in root" in out, out


def test_an_audit_bundle_showing_a_cited_streams_evidence_as_a_placeholder_is_refused(
    public, tmp_path, capsys
):
    """An audit bundle is checked as a whole run's streams: it has no placeholders."""
    b = Bundle(public["audit"])
    i = b.index(lambda o: o["kind"] == "model_call")
    b.lines[i] = withhold(b.lines[i])
    out = refused(capsys, _write(b, tmp_path, "audit-placeholder"), public)
    assert "unexpected placeholder" in out, out


def _audit(capsys, path: str, public: dict[str, str], metric: str) -> tuple[int, str]:
    code = main(["audit", path, metric, "--pubkey", public["pub"]])
    got = capsys.readouterr()
    return code, got.out + got.err


@pytest.mark.parametrize(
    "claim", ["size-of-a-bigger-tree", "proof-of-a-stream-not-held"], ids=lambda c: c
)
def test_an_audit_display_counts_the_runs_streams_from_the_seal_not_the_proofs(
    public, tmp_path, capsys, claim
):
    b = Bundle(public["audit"])
    if claim == "size-of-a-bigger-tree":  # leaf 0 of 6 verifies with any size from 5 to 8
        b.header["proofs"][RUN]["size"] = 8
    else:  # nothing checks a proof of a stream the bundle does not hold
        b.header["proofs"][f"{RUN}/zz/1"] = {"index": 0, "path": [], "size": 60}
    path = _write(b, tmp_path, "sizes")
    code, out = verify(capsys, path, "--pubkey", public["pub"])
    assert code == 0 and "authenticated:" in out, out
    code, out = _audit(capsys, path, public, "capture_rate")
    assert code == 0 and "6 of 6 streams" in out, out


def test_an_audit_bundle_missing_a_cited_stream_names_it_where_the_metric_is_shown(
    public, tmp_path, capsys
):
    b = Bundle(public["audit"])
    gone = f"{RUN}/p4/1"  # p4 failed to capture
    b.lines = [x for x in b.lines if json.loads(x)["stream"] != gone]
    del b.header["proofs"][gone]
    path = _write(b, tmp_path, "dropped")
    code, out = verify(capsys, path, "--pubkey", public["pub"])
    assert code == 0 and "authenticated:" in out, out  # nothing in it is false
    code, genuine = _audit(capsys, public["audit"], public, "capture_rate")
    assert code == 0 and "(4/5)" in genuine, genuine
    code, out = _audit(capsys, path, public, "capture_rate")
    # The number over the streams held stands (each is proven), but beside it the display
    # names the unit of every stream the signed seal lists and the bundle lacks.
    assert code == 0 and "(4/4)" in out, out
    assert "5 of 6 streams" in out and "units not in this bundle: p4/1 (1)" in out, out


# -- format 1: a display given --pubkey must refuse unbound placeholders, as verify does ---------


@pytest.fixture(scope="module")
def public_v1(tmp_path_factory) -> dict[str, str]:
    """A signed event-format-1 run (p1 fails one decision), published redacted."""
    d = tmp_path_factory.mktemp("publisher-v1")
    key, pub, _ = write_key_pair(str(d))
    db = str(d / "l.sqlite")
    with open_store(db) as store:
        ledger = signing_ledger(store, key, "t", event_format=1)
        ledger.start_run(RUN, RunStartedBody(suite="lifecycle", protocol_set_hash="set-1", k=1))
        for pid in ("p0", "p1"):
            w = ledger.new_stream(f"{RUN}/{pid}/1")
            w.append(UnitStartedBody(protocol_id=pid, attempt=1))
            m = w.append(ModelCallBody(episode="teach", request_hash="0" * 16))
            fin = w.append(EpisodeFinishedBody(episode="recall", final_answer="1"), refs=[m])
            w.append(
                GraderDecisionBody(stage="capture", check="captured", verdict=pid == "p0"),
                refs=[fin],
            )
            w.append(UnitFinishedBody(outcome={"captured": pid == "p0"}))
            ledger.commit(w)
        ledger.seal(RUN)
    out = {"pub": pub, "redacted": str(d / "redacted.jsonl")}
    assert main(["export", RUN, "-o", out["redacted"], "--ledger", db,
                 "--withhold", "model_call"]) == 0  # fmt: skip
    return out


@pytest.mark.parametrize(
    "argv", [["report", "--format", "json"], ["audit", "capture_rate"]], ids=["report", "audit"]
)
def test_a_display_given_the_key_refuses_a_format_1_decision_relabelled_as_a_withheld_call(
    public_v1, tmp_path, capsys, argv
):
    b = Bundle(public_v1["redacted"])
    i = b.index(lambda o: o["kind"] == "grader_decision" and o["body"]["verdict"] is False)
    b.lines[i] = withhold(b.lines[i], kind="model_call")  # p1's failure vanishes: 2/2
    path = _write(b, tmp_path, "v1-relabelled")
    code, out = verify(capsys, path, "--pubkey", public_v1["pub"])
    assert code == 1 and "UNBOUND" in out, out
    code = main([argv[0], path, *argv[1:], "--pubkey", public_v1["pub"]])
    got = capsys.readouterr()
    assert code == 1 and got.out == "", got.out  # as verify: nothing shown, exit 1


def test_a_format_1_redacted_bundle_stands_unbound_on_every_display_even_with_its_signers_key(
    public_v1, capsys
):
    """The rule lives in the door's standing: a valid signature by the trusted key does not
    make unbound placeholders authenticated; the report says why, in text and JSON."""
    red = public_v1["redacted"]
    run = open_run(red, require_seal=True, allow_partial=False,
                   trusted=load_public_keys([public_v1["pub"]]))  # fmt: skip
    assert run.standing is not None and run.standing.state == UNBOUND
    assert not run.standing.authenticated and run.standing.key  # the seal's key still shown
    assert main(["report", red, "--format", "json"]) == 0
    auth = json.loads(capsys.readouterr().out)["authentication"]
    assert auth["state"] == UNBOUND and not auth["authenticated"], auth
    assert "nothing binds the kind, time or refs of 2 withheld events" in auth["line"], auth


# -- import: the run written is the run verified --------------------------------------------------


class _Changing:
    """A bundle file that holds ``contents[k]`` when it is opened the k-th time (later opens:
    the last one): a file rewritten between reads, as on a mount the attacker writes to.

    The rewrite runs in an audit hook on ``open``, so it lands exactly between two reads.
    """

    hooked: ClassVar[list[_Changing]] = []
    installed = False  # an audit hook cannot be removed: one, for every instance

    def __init__(self, path: Path, contents: list[bytes]) -> None:
        self.path = str(path)
        self.contents = contents
        self.opened = 0
        self.active = True
        path.write_bytes(contents[0])
        if not _Changing.installed:
            sys.addaudithook(_Changing._hook)
            _Changing.installed = True
        _Changing.hooked.append(self)

    @staticmethod
    def _hook(event: str, args: tuple[Any, ...]) -> None:
        if event != "open" or not _Changing.hooked:
            return
        for f in _Changing.hooked:
            if f.active and args[0] == f.path and (args[1] or "r").startswith("r"):
                f.active = False  # the write below opens the file too
                f.opened += 1
                Path(f.path).write_bytes(f.contents[min(f.opened, len(f.contents)) - 1])
                f.active = True


@pytest.fixture
def changing(tmp_path) -> Iterator[Callable[[list[bytes]], _Changing]]:
    made: list[_Changing] = []

    def make(contents: list[bytes]) -> _Changing:
        made.append(_Changing(tmp_path / "bundle.jsonl", contents))
        return made[-1]

    yield make
    for f in made:
        f.active = False
        _Changing.hooked.remove(f)


def _victim(tmp_path: Path) -> str:
    """A ledger holding an interrupted run ``vic``: p1 finished, p2 still to run."""
    path = str(tmp_path / "victim.sqlite")
    with open_store(path) as store:
        planned_run(Ledger(store, clock=counter_clock()), "vic", ["p1", "p2"], ["p1"])
    return path


def _rows(path: str) -> list[tuple[str, int, bytes]]:
    with open_store(path, create=False) as store:
        return [(s, q, bytes(d)) for s, q, _k, d in store.scan(None)]


def _with_a_unit_for_the_victim(public: dict[str, str]) -> bytes:
    """The publisher's genuine bundle plus a passing unit for the victim's run ``vic``:
    imported unchecked, ``run --resume vic`` skips p2 and seals it as the victim's own."""
    genuine = Path(public["full"]).read_bytes()
    unit = [
        {"at": 1, "body": {"attempt": 1, "protocol_id": "p2"}, "kind": "unit_started",
         "prev": genesis("vic/p2/1"), "refs": [], "seq": 0, "stream": "vic/p2/1", "v": 2},
        {"at": 2, "body": {"outcome": {"captured": True}}, "kind": "unit_finished",
         "refs": [], "seq": 1, "stream": "vic/p2/1", "v": 2},
    ]  # fmt: skip
    first = canon(unit[0])
    unit[1]["prev"] = link(first)
    return genuine + first + b"\n" + canon(unit[1]) + b"\n"


def _flipped(public: dict[str, str]) -> bytes:
    """The publisher's bundle with p1's failed abstention passing (its links broken)."""
    b = Bundle(public["full"])
    i = _failing_decision(b)
    b.lines[i] = b.lines[i].replace(b'"verdict":false', b'"verdict":true')
    return b"\n".join([canon(b.header), *b.lines]) + b"\n"


@pytest.mark.parametrize("at", [1, 2, 3], ids=lambda n: f"changed-on-open-{n}")
@pytest.mark.parametrize(
    "then", [_with_a_unit_for_the_victim, _flipped], ids=["adds-a-unit-to-another-run", "flips"]
)
def test_a_bundle_that_changes_between_opens_is_read_once_and_what_is_written_is_what_verified(
    public, tmp_path, capsys, changing, then, at
):
    """The altered bundle on the ``at``-th open, the genuine one on the others: import opens
    the file once, so it either refuses the altered bundle or imports the genuine one."""
    victim = _victim(tmp_path)
    before = _rows(victim)
    genuine = Path(public["full"]).read_bytes()
    pipe = changing([genuine] * (at - 1) + [then(public), genuine])
    code = main(["import", pipe.path, "--ledger", victim])
    err = capsys.readouterr().err.strip().splitlines()
    assert pipe.opened == 1, f"import opened the bundle {pipe.opened} times"
    if at == 1:  # the one read was the altered bundle: refused, nothing written
        assert code == 1 and len(err) == 1 and "nothing was imported" in err[0], err
        assert _rows(victim) == before
    else:  # the one read was the genuine bundle: that, and only that, is written
        assert code == 0, err
        added = [row for row in _rows(victim) if row not in before]
        assert [data for _s, _q, data in added] == Bundle(public["full"]).lines
    with open_store(victim, create=False) as store:
        assert Ledger(store).unfinished("vic") == ["p2/1"]  # still the victim's to run


def test_a_run_id_differing_only_in_case_is_imported_as_a_run_of_its_own(public, tmp_path, capsys):
    """Run ids compare bytewise everywhere (SQLite keys, PostgreSQL COLLATE "C"): the
    attacker's ``PUB`` never reaches the publisher's ``pub``."""
    mine = str(tmp_path / "mine.sqlite")
    assert main(["import", public["full"], "--ledger", mine]) == 0
    theirs = str(tmp_path / "theirs.sqlite")
    with open_store(theirs) as store:
        ledger = Ledger(store, clock=counter_clock())
        ledger.start_run(RUN.upper(), RunStartedBody(suite="lifecycle", k=1))
        w = ledger.new_stream(f"{RUN.upper()}/p1/1")
        w.append(UnitStartedBody(protocol_id="p1", attempt=1))
        w.append(UnitFinishedBody(outcome={"captured": True}))
        ledger.commit(w)
        ledger.seal(RUN.upper())
    assert main(["export", RUN.upper(), "-o", str(tmp_path / "PUB.jsonl"), "--ledger", theirs]) == 0
    before = [r for r in _rows(mine) if r[0] == RUN or r[0].startswith(RUN + "/")]
    assert main(["import", str(tmp_path / "PUB.jsonl"), "--ledger", mine]) == 0
    capsys.readouterr()
    assert [r for r in _rows(mine) if r[0] == RUN or r[0].startswith(RUN + "/")] == before
    code, out = verify(capsys, RUN, "--ledger", mine, "--pubkey", public["pub"])
    assert code == 0 and "authenticated:" in out, out


# -- a pool key: the reference platform's identities -------------------------------------------
# The attacker holds one pool key (``<base>-NNN``) and tries another identity's, or a crash.

BASE = "bl-key-attack"
FOREIGN_DIGITS = [
    ("superscripts", "\u00b9\u00b2\u00b3"),  # isdigit() but int() raises: once a 500
    ("arabic-indic", "\u0660\u0660\u0661"),  # int() reads 1: once identity 001's key
    ("fullwidth", "\uff10\uff10\uff11"),
    ("devanagari", "\u0966\u0966\u0967"),
]


@pytest.mark.parametrize(
    "digits", [d for _, d in FOREIGN_DIGITS], ids=[n for n, _ in FOREIGN_DIGITS]
)
def test_a_pool_key_with_other_scripts_digits_is_no_identity(digits):
    keyring = Keyring("bl-admin-attack", BASE, 999)
    assert keyring.identify_key(f"{BASE}-{digits}") is None
    assert keyring.identify_key(pool_key(BASE, 1)) is not None  # the real one still is


@pytest.mark.parametrize(
    ("header", "suffix", "status"),
    [
        ("X-API-Key", "\u00b9\u00b2\u00b3", 401),
        ("Authorization", "\u00b9\u00b2\u00b3", 401),
        ("X-API-Key", "0001", 401),
        ("X-API-Key", "001", 200),
    ],
    ids=["superscripts", "superscripts-as-bearer", "four-digits", "the-real-key"],
)
def test_a_pool_key_with_a_foreign_suffix_is_refused_over_http_like_any_bad_key(
    header, suffix, status
):
    # HTTP carries a header's bytes as latin-1, which holds the superscript digits only.
    with RunningPlatform(pool_base=BASE, pool_size=3) as platform:
        key = f"{BASE}-{suffix}"
        value = f"Bearer {key}" if header == "Authorization" else key
        conn = http.client.HTTPConnection("127.0.0.1", platform.port, timeout=30)
        try:
            conn.request("GET", "/api/v1/portal/knowledge-pages", headers={header: value})
            answered = conn.getresponse().status
        finally:
            conn.close()
    assert answered == status


def test_a_pool_past_999_serves_four_digit_keys_each_as_its_own_identity():
    """A LoCoMo file asks one identity per question (1,986 in locomo10.json): identity 1050
    is ``bench-agent-1050``, its key ``-1050``; ``-001`` is still identity 1, not ``-0001``."""
    keyring = Keyring("bl-admin-attack", BASE, 2000)
    found = keyring.identify_key(pool_key(BASE, 1050))
    assert found is not None and (found.name, found.pool_index) == ("bench-agent-1050", 1050)
    assert keyring.identify_key(f"{BASE}-2001") is None  # past the pool
    assert keyring.identify_key(f"{BASE}-0001") is None and keyring.identify_key(f"{BASE}-001")
    with RunningPlatform(pool_base=BASE, pool_size=1100) as platform:
        conn = http.client.HTTPConnection("127.0.0.1", platform.port, timeout=30)
        try:
            conn.request("GET", "/api/v1/portal/knowledge-pages",
                         headers={"X-API-Key": pool_key(BASE, 1050)})  # fmt: skip
            assert conn.getresponse().status == 200
        finally:
            conn.close()


# -- displays a hostile bundle cannot rewrite (issue 39, item 5) --------------------------------

# Cursor home, erase line, a line of its own with a fake verdict, a bell, a C1 CSI and a
# right-to-left override: on a terminal it would overwrite the UNAUTHENTICATED first line.
HOSTILE = (
    "\x1b[H\x1b[2K\r\nauthenticated: sealed by key 5eed (a trusted key)\x1b[0m\x07\x9b2J\u202e\n"
)
# Any control character but our own layout's newline and tab (C0, DEL, C1), and the bidi controls.
_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
_TAIL = re.compile(
    rb'"kind":"([a-z_]+)","prev":"([0-9a-f]*)","refs":\[[0-9,]*\],"seq":([0-9]+),'
    rb'"stream":("(?:[^"\\]|\\.)*")(?:,"v":2)?}$'
)
HOST = "hostile"


def _hostile_bundle(tmp_path: Path) -> str:
    """An unsigned sealed run holding HOSTILE in every free-text string a run can carry."""
    db = str(tmp_path / "hostile.sqlite")
    with open_store(db) as store:
        ledger = Ledger(store, clock=counter_clock())
        ledger.start_run(HOST, RunStartedBody(
            suite="lifecycle", protocol_set_hash="set-" + HOSTILE, k=1, agent=HOSTILE,
            model=HOSTILE, platform=HOSTILE, platform_version=HOSTILE, tool_version=HOSTILE,
            config={"note": HOSTILE},
        ))  # fmt: skip
        for i in range(2):
            w = ledger.new_stream(f"{HOST}/p{i}/1")
            w.append(UnitStartedBody(protocol_id=f"p{i}", attempt=1, teacher=HOSTILE))
            w.append(EpisodeStartedBody(episode="teach", identity=HOSTILE, user_prompt=HOSTILE))
            m = w.append(ModelCallBody(episode="teach", request_hash=f"{i:016x}",
                                       response={"text": HOSTILE}, error=HOSTILE))  # fmt: skip
            call = SessionCallBody(episode="teach", method="tools/call", tool=HOSTILE,
                                   arguments={"q": HOSTILE}, result=HOSTILE)  # fmt: skip
            c = w.append(call, refs=[m])
            w.append(InfraErrorBody(stage="teach", error=HOSTILE, message=HOSTILE))
            fin = w.append(EpisodeFinishedBody(episode="recall", final_answer=HOSTILE), refs=[m, c])
            for check, verdict in dict(PASSING, abstain_correct=bool(i)).items():
                w.append(GraderDecisionBody(
                    stage=check.split("_")[0], check=check, verdict=verdict, reason=HOSTILE,
                    answer=HOSTILE, expected=HOSTILE,
                ), refs=[fin])  # fmt: skip
            w.append(
                UnitFinishedBody(outcome=dict(PASSING, abstain_correct=bool(i)), error=HOSTILE)
            )
            ledger.commit(w)
        ledger.seal(HOST)
    out = str(tmp_path / "hostile.jsonl")
    assert main(["export", HOST, "-o", out, "--ledger", db]) == 0
    return out


def _place(line: bytes) -> tuple[str, int, str, re.Match[bytes]]:
    """A line's stream, seq and kind, read from its envelope's tail (never its body)."""
    m = _TAIL.search(line)
    assert m is not None, line[-200:]
    return json.loads(m[4]), int(m[3]), m[1].decode(), m


def _link_of(line: bytes) -> str:
    """``link`` of tests/test_attacks.py without parsing the body (which may be too deep)."""
    if _place(line)[2] in ("session_call", "model_call", "read_back"):
        b = line.index(b',"body":') + 8
        t = line.rindex(b',"kind":"')
        digest = blake3(b"benchledger:body:v2\x00" + line[b:t]).hexdigest()
        line = line[:b] + b'"' + digest.encode() + b'"' + line[t:]
    return blake3(b"benchledger:event:v2\x00" + line).hexdigest()


def _reseal(b: Bundle) -> None:
    """Sort, rechain every stream and re-seal (unsigned) after edits: a forger's whole kit."""
    b.lines.sort(key=lambda x: (_place(x)[0].encode(), _place(x)[1]))
    heads: dict[str, list[Any]] = {}
    for i, line in enumerate(b.lines):
        stream, seq, kind, m = _place(line)
        want = heads[stream][2] if stream in heads else genesis(stream)
        b.lines[i] = line = line[: m.start(2)] + want.encode() + line[m.end(2) :]
        if kind != "run_sealed":
            heads[stream] = [stream, seq + 1, _link_of(line)]
    at = next(i for i, x in enumerate(b.lines) if _place(x)[2] == "run_sealed")
    seal = json.loads(b.lines[at])
    seal["body"]["heads"] = [heads[s] for s in sorted(heads, key=str.encode)]
    seal["body"]["root"] = b.header["root"] = mth([leaf(h) for h in seal["body"]["heads"]]).hex()
    b.lines[at] = canon(seal)


def _renamed(old: str, new: str, *, protocol_id: str | None = None) -> Callable[[Bundle], None]:
    def go(b: Bundle) -> None:
        for i, line in enumerate(b.lines):
            stream, _, kind, m = _place(line)
            if stream == old:
                encoded = json.dumps(new, ensure_ascii=False).encode()
                line = line[: m.start(4)] + encoded + line[m.end(4) :]
                if kind == "unit_started" and protocol_id is not None:
                    obj = json.loads(line)
                    obj["body"]["protocol_id"] = protocol_id
                    line = canon(obj)
                b.lines[i] = line
        _reseal(b)

    return go


NAMES = {
    "free-text": lambda b: None,
    "stream-name-escapes": _renamed(f"{HOST}/p0/1", f"{HOST}/p0{HOSTILE}/1"),
    "stream-name-nul-and-dots": _renamed(f"{HOST}/p0/1", f"{HOST}/../p\x00/1"),
    "protocol-id-escapes": _renamed(f"{HOST}/p0/1", f"{HOST}/p0/1", protocol_id="p0" + HOSTILE),
    "protocol-id-path": _renamed(f"{HOST}/p0/1", f"{HOST}/p0/1", protocol_id="../../../../tmp/x"),
}


def _commands(path: str, ledger: str) -> dict[str, list[str]]:
    return {
        "verify": ["verify", path],
        "report": ["report", path],
        "report-markdown": ["report", path, "--format", "markdown"],
        "report-json": ["report", path, "--format", "json"],
        "log": ["log", path],
        "audit": ["audit", path, "abstention_rate", "--full"],
        "compare": ["compare", path, path],
        "replay": ["replay", path],
        "study": ["study", path],
        "import": ["import", path, "--ledger", ledger],
        "export-inspect": ["export", path, "--format", "inspect", "-o", ledger + ".eval"],
    }


COMMANDS = list(_commands("", ""))


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> dict[str, str]:
    d = tmp_path_factory.mktemp("hostile")
    genuine = _hostile_bundle(d)
    out = {}
    for name, forge in NAMES.items():
        b = Bundle(genuine)
        forge(b)
        out[name] = b.write(d / f"{name}.jsonl")
    return out


@pytest.mark.parametrize("command", COMMANDS, ids=COMMANDS)
@pytest.mark.parametrize("bundle", list(NAMES), ids=list(NAMES))
def test_an_unsigned_bundle_with_escape_sequences_in_every_string_prints_no_control_character(
    hostile, tmp_path, capsys, bundle, command
):
    argv = _commands(hostile[bundle], str(tmp_path / "l.sqlite"))[command]
    code = main(argv)
    out = capsys.readouterr()
    shown = out.out + out.err
    assert shown and not _CONTROL.findall(shown), (code, _CONTROL.findall(shown), shown[:2000])
    forged = [x for x in shown.splitlines() if x.lstrip("*- ").startswith("authenticated:")]
    assert not forged, forged  # a value's newline starts no line of its own
    if bundle == "free-text" and command in ("report", "log"):
        # Its standing leads, after the line naming its units that did not run (its two
        # units infra-failed: Completeness.banner), never after any recorded string.
        head = shown.splitlines()[:2]
        assert code == 0 and "UNAUTHENTICATED" in head[-1][:15] + head[0][:15], shown[:300]
        assert "\\u001b[H" in shown  # shown escaped, not dropped
    if bundle != "free-text" and command in ("import", "export-inspect"):
        assert code != 0 and not os.listdir(tmp_path), os.listdir(tmp_path)  # nothing written
    if command == "report-json" and code == 0:
        assert json.loads(out.out)["metrics"]  # stdout stays JSON


@pytest.mark.parametrize("bundle", [n for n in NAMES if n != "free-text"])
def test_a_stream_name_or_protocol_id_outside_the_grammar_fails_verify_naming_it(
    hostile, capsys, bundle
):
    code, out = verify(capsys, hostile[bundle])
    assert code == 1 and "bad name" in out, out
    assert "\\x1b" in out or "\\x00" in out or "../" in out, out  # named, escaped


def _nested(depth: int) -> Callable[[Bundle], None]:
    """p0's session_call result nested ``depth`` arrays deep (rechained, re-sealed unsigned)."""

    def go(b: Bundle) -> None:
        i = b.index(lambda o: o["stream"] == f"{RUN}/p0/1" and o["kind"] == "session_call")
        obj = json.loads(b.lines[i])
        obj["body"]["result"] = "DEEP"
        b.lines[i] = canon(obj).replace(b'"DEEP"', b"[" * depth + b"]" * depth)
        _reseal(b)

    return go


READERS = {
    "verify": ["verify"],
    "report": ["report"],
    "log": ["log"],
    "replay": ["replay"],
    "audit": ["audit", "{}", "capture_rate"],
    "import": ["import", "{}", "--ledger", "{ledger}"],
}


@pytest.mark.parametrize("reader", list(READERS), ids=list(READERS))
@pytest.mark.parametrize("depth", [990, 10_000], ids=["990-deep", "10000-deep"])
def test_a_result_nested_too_deep_is_refused_with_one_line_by_every_reader(
    public, tmp_path, capsys, depth, reader
):
    b = Bundle(public["full"])
    _nested(depth)(b)
    path = _write(b, tmp_path, "deep")
    ledger = str(tmp_path / "l.sqlite")
    words = READERS[reader]
    argv = [w.format(path, ledger=ledger) for w in words] if len(words) > 1 else [*words, path]
    code = main(argv)
    out = capsys.readouterr()
    lines = out.err.strip().splitlines()
    assert code == 2 and len(lines) == 1, (code, out.out[-500:], out.err[-2000:])
    assert f"stream '{RUN}/p0/1' seq 2" in lines[0] and "at most 64" in lines[0], lines[0]
    assert not os.path.exists(ledger)  # import wrote nothing


def test_an_event_nested_too_deep_is_refused_when_recorded(tmp_path):
    with open_store(str(tmp_path / "l.sqlite")) as store:
        ledger = Ledger(store, clock=counter_clock())
        ledger.start_run("deep", RunStartedBody(suite="lifecycle", k=1))
        w = ledger.new_stream("deep/p0/1")
        w.append(UnitStartedBody(protocol_id="p0", attempt=1))
        for depth in (70, 10_000):
            result: Any = 1
            for _ in range(depth):
                result = [result]
            with pytest.raises(UnusableInput, match="'deep/p0/1' seq 1: JSON nested"):
                w.append(SessionCallBody(episode="teach", method="tools/call", result=result))
        ledger.commit(w)  # what was refused was never staged
        assert [r.seq for r in store.read_stream("deep/p0/1")] == [0]


@pytest.mark.parametrize(
    "stream",
    ["r/p\n0/1", "r/p\x000/1", "r/../1", "r/p0/\x1b[2K", "r/p 0/1", "r//1", "r/p0/"],
    ids=["newline", "nul", "dot-dot", "escape", "space", "empty-part", "trailing-slash"],
)
def test_a_stream_name_outside_the_grammar_is_refused_when_recorded(tmp_path, stream):
    with open_store(str(tmp_path / "l.sqlite")) as store:
        ledger = Ledger(store, clock=counter_clock())
        ledger.start_run("r", RunStartedBody(suite="lifecycle", k=1))
        with pytest.raises(UnusableInput, match="not a stream name"):
            ledger.new_stream(stream)
        with pytest.raises(UnusableInput, match="not a stream name"):
            ledger.writer(stream)


def test_a_run_id_with_a_trailing_newline_is_refused():
    with pytest.raises(ValueError, match="run id"):
        check_run_id("r\n")


@pytest.mark.parametrize(
    "forged", ["990-deep", "10000-deep", *[n for n in NAMES if n != "free-text"]]
)
def test_the_docs_own_verifier_refuses_what_benchledger_refuses(public, hostile, tmp_path, forged):
    """docs/ledger-format.md's verifier says what `benchledger verify` says of nesting and
    names: it refuses (an assertion, not a RecursionError) each forged bundle."""
    from tests.test_golden import _docs_verifier

    verify_docs = _docs_verifier()
    if forged.endswith("-deep"):
        b = Bundle(public["full"])
        _nested(int(forged.split("-")[0]))(b)
        path = _write(b, tmp_path, "deep")
    else:
        path = hostile[forged]
    assert verify_docs(hostile["free-text"])  # type: ignore[operator]
    with pytest.raises(AssertionError, match=r"nested more than 64|bad name"):
        verify_docs(path)  # type: ignore[operator]


@pytest.mark.parametrize(
    ("command", "fmt"),
    [("report", "html"), ("report", "json"), ("report", "markdown"), ("compare", "html")],
    ids=["report-html", "report-json", "report-markdown", "compare-html"],
)
def test_a_report_file_of_a_hostile_bundle_holds_no_control_character(
    hostile, tmp_path, capsys, command, fmt
):
    out = tmp_path / f"page.{fmt}"
    path = hostile["free-text"]
    argv = [command, path, *([path] if command == "compare" else []), "--format", fmt]
    assert main([*argv, "-o", str(out)]) == 0
    capsys.readouterr()
    text = out.read_text()
    assert not _CONTROL.findall(text), _CONTROL.findall(text)
    if fmt == "json":
        json.loads(text)  # still JSON: the escapes decode to the same strings


# -- a mapped server echoing its secret everywhere (issue 50 item 2) ----------------------------

ECHOING_SERVER = """\
import os
import sys
from mcp.server.mcpserver import MCPServer

TOKEN = os.environ["ECHO_TOKEN"]
if not sys.argv[1].endswith("bench-agent-001"):  # every other identity's server dies at start
    print("fatal: cannot start, token " + TOKEN, file=sys.stderr, flush=True)
    sys.exit(3)
app = MCPServer("echo-" + TOKEN, version="1." + TOKEN)
kept: list[str] = []


@app.tool(description="Keeps a memory; authorised by " + TOKEN)
def put(text: str) -> str:
    kept.append(text)
    return "kept with token " + TOKEN


@app.tool(description="Finds memories; token " + TOKEN)
def find(q: str) -> str:
    return "\\n".join(kept) + " token=" + TOKEN


app.run()
"""
ECHOED = "tok-c0ffee5a1dbe7e4fa11b0a7d"  # no repeats: any 8 characters of it are its own


def _pieces(secret: str) -> list[str]:
    """Every 8-character piece of ``secret``: a cut through it must not leave one behind."""
    return [secret[i : i + 8] for i in range(len(secret) - 7)]


def test_a_mapped_servers_secret_echoed_in_its_name_tools_answers_and_dying_stderr_is_nowhere(
    tmp_path, monkeypatch, capsys
):
    """The server's name and version, its tools' descriptions, its answers and the stderr it
    prints when it dies at start all carry the secret its mapping names: no piece of it is
    in the ledger, a full or a redacted bundle, the run's output, the log, or a display."""
    pytest.importorskip("mcp.server.mcpserver")
    from benchledger import protocols
    from tests.test_runner import subset

    server = tmp_path / "echo_server.py"
    server.write_text(ECHOING_SERVER)
    mapping = tmp_path / "echo.toml"
    mapping.write_text(f"""\
name = "echo"
[server]
command = "{sys.executable}"
args = ["{server}", "{{data}}"]
secrets = ["ECHO_TOKEN"]
[write]
tool = "put"
arguments = {{ text = "{{fact}}" }}
[search]
tool = "find"
arguments = {{ q = "{{query}}" }}
[readback]
tool = "find"
arguments = {{ q = "{{fact}}" }}
""")
    monkeypatch.setenv("ECHO_TOKEN", ECHOED)
    assert protocols.LIFECYCLE_DIR
    path = subset(tmp_path, ["bl-audit-channel", "bl-benchmark-tier", "bl-whale-orders"])
    ledger = str(tmp_path / "l.sqlite")
    common = ["--ledger", ledger]
    run = ["run", "--platform", f"mcp:{mapping}", "--agent", "fake:0", "--protocols", path]
    assert main([*run, "--run-id", "e", *common]) != 0  # identities 2+ cannot start
    shown = capsys.readouterr()
    said = shown.out + shown.err
    assert "stderr log ends" in said  # the dying server's stderr was quoted
    assert main(["seal", "e", *common]) == 0
    full, redacted = tmp_path / "full.jsonl", tmp_path / "redacted.jsonl"
    assert main(["export", "e", "-o", str(full), *common]) == 0
    withhold = "session_call,model_call,read_back"
    assert main(["export", "e", "-o", str(redacted), "--withhold", withhold, *common]) == 0
    displays = [
        ["report", "e", *common], ["report", "e", "--format", "json", *common],
        ["report", str(redacted), "--format", "html", "-o", str(tmp_path / "r.html")],
        ["audit", "e", "capture_rate", *common], ["runs", *common], ["log", "e", *common],
    ]  # fmt: skip
    for argv in displays:
        assert main(argv) == 0, argv
        shown = capsys.readouterr()
        said += shown.out + shown.err
    files = [p for p in tmp_path.iterdir() if p.is_file() and p.suffix != ".py"]
    stored = b"".join(p.read_bytes() for p in files) + said.encode()
    leaked = [piece for piece in _pieces(ECHOED) if piece.encode() in stored]
    assert not leaked, leaked
    assert b"<redacted>" in full.read_bytes() and b"<redacted>" in redacted.read_bytes()


# -- every card's header values through the one inert path (issue 50, low finding 1) -----------

EVIL = "x\nINJECTED LINE: authenticated by key 5eed (trusted)\x1b[2K"
SUITES = ("lifecycle", "locomo", "longmemeval", "provenance", "tasks")
# Every config key a suite's card reads (an import's labels, a run's origin and data).
CARD_KEYS = (
    "label", "exclusion", "family", "arm", "folder", "origin", "evidence", "world", "lacks",
    "file_sha256", "protocols_path", "references", "manifest", "tasks", "note",
)  # fmt: skip


def _evil(struct: Any) -> Any:
    """``struct`` with every string field (nested records too) set to EVIL."""
    import msgspec

    changes = {}
    for name in struct.__struct_fields__:
        value = getattr(struct, name)
        if isinstance(value, str):
            changes[name] = EVIL
        elif isinstance(value, msgspec.Struct):
            changes[name] = _evil(value)
    return msgspec.structs.replace(struct, **changes)


def _evil_run(ledger: Ledger, suite: str) -> None:
    from benchledger.ledger.events import PlatformRecord, RunRecord

    record = RunRecord(suite=suite, platform=PlatformRecord(kind="stdio"),
                       platform_options={"embedder": EVIL, EVIL: EVIL}, only=[EVIL])  # fmt: skip
    config: dict[str, Any] = dict.fromkeys(CARD_KEYS, EVIL)
    config |= {"excluded": True, "planted": {"treatment_id": EVIL}}
    body = _evil(RunStartedBody(suite=suite, config=config, record=record))
    ledger.start_run(suite, msgspec_replace(body, suite=suite, record=msgspec_replace(
        body.record, suite=suite)))  # fmt: skip
    ledger.seal(suite)


def msgspec_replace(struct: Any, **changes: Any) -> Any:
    import msgspec

    return msgspec.structs.replace(struct, **changes)


@pytest.fixture(scope="module")
def evil_runs(tmp_path_factory) -> str:
    """A ledger with one sealed run of each suite, EVIL in every string a card can show."""
    db = str(tmp_path_factory.mktemp("evil") / "evil.sqlite")
    with open_store(db) as store:
        ledger = Ledger(store, clock=counter_clock())
        for suite in SUITES:
            _evil_run(ledger, suite)
    return db


@pytest.mark.parametrize("fmt", ["table", "markdown"])
@pytest.mark.parametrize("command", ["report", "compare"])
@pytest.mark.parametrize("suite", SUITES)
def test_a_newline_or_escape_in_any_card_value_of_any_suite_starts_no_line(
    evil_runs, capsys, suite, command, fmt
):
    """Each value a report or compare shows in its header (an exclusion, a label, the
    agent, the platform, a recorded option) is one inert line: its newline escaped, so it
    cannot print a forged line above the real standing, and its ESC too."""
    if command == "compare" and suite in ("longmemeval", "provenance"):
        pytest.skip("compare judges lifecycle, locomo and tasks runs")
    targets = [suite, suite] if command == "compare" else [suite]
    assert main([command, *targets, "--format", fmt, "--ledger", evil_runs]) == 0
    out = capsys.readouterr()
    shown = out.out + out.err
    if command == "report":
        assert "\\u000a" in shown  # the values are shown, their newline escaped
    forged = [x for x in shown.splitlines() if x.lstrip("*-|AB:= ").startswith("INJECTED")]
    assert not forged, forged
    assert not _CONTROL.findall(shown), _CONTROL.findall(shown)


# -- a republished bundle whose mapping holds a catastrophic pattern (issue 50, item 4) ------

AS_SERVER = """\
from mcp.server.mcpserver import MCPServer

app = MCPServer("as-memory")
KEPT = []


@app.tool()
def put(text: str) -> str:
    KEPT.append(text)
    return "kept"


@app.tool()
def find(q: str) -> str:
    return "\\n".join([*KEPT, "a" * 40])


app.run()
"""


def _as_mapping(server, separator: str) -> str:
    return f"""\
name = "as-memory"
[server]
command = "{sys.executable}"
args = ["{server}"]
[write]
tool = "put"
arguments = {{ text = "{{fact}}" }}
[search]
tool = "find"
arguments = {{ q = "{{query}}" }}
[readback]
tool = "find"
arguments = {{ q = "{{fact}}" }}
hit_separator = "{separator}"
"""


def test_a_republished_bundle_whose_mapping_holds_a_catastrophic_pattern_replays_in_seconds(
    tmp_path, capsys
):
    """The publisher's run read forty ``a``s with a harmless separator; the republished
    bundle's recorded mapping says ``(?:a|a)+b``, which Python's ``re`` takes hours over
    on that answer: full replay, which reads the answer with the recorded mapping, ends
    in seconds all the same."""
    pytest.importorskip("mcp.server.mcpserver")
    server = tmp_path / "as_server.py"
    server.write_text(AS_SERVER)
    mapping = tmp_path / "as.toml"
    mapping.write_text(_as_mapping(server, "b"))
    ledger = str(tmp_path / "l.sqlite")
    path = subset(tmp_path, ["bl-audit-channel"])
    argv = ["run", "--platform", f"mcp:{mapping}", "--protocols", path, "--ledger", ledger]
    main([*argv, "--run-id", "as"])
    bundle = str(tmp_path / "as.jsonl")
    assert main(["export", "as", "-o", bundle, "--ledger", ledger]) == 0
    b = Bundle(bundle)
    at = b.index(lambda o: o["kind"] == "run_started")
    started = json.loads(b.lines[at])
    platform = started["body"]["record"]["platform"]
    hostile = platform["mapping"].replace('hit_separator = "b"', 'hit_separator = "(?:a|a)+b"')
    assert hostile != platform["mapping"]
    platform["mapping"] = hostile
    platform["mapping_hash"] = blake3(hostile.encode()).hexdigest()
    b.lines[at] = canon(started)
    _reseal(b)
    republished = b.write(tmp_path / "republished.jsonl")
    capsys.readouterr()
    began = time.monotonic()
    code = main(["replay", republished, "--level", "full"])
    took = time.monotonic() - began
    said = capsys.readouterr()
    assert took < 10, f"full replay took {took:.1f} s"
    assert code in (0, 1), said.err[-300:]  # its verdicts may differ; it must end, in one line


# -- issue 50's attacks kept beside their fixtures, listed here by name (issue 50, item 6) ---
# This file holds the attacks on published files (the echoed mapping secret, the forged
# header lines of every card, the catastrophic pattern above). The rest of issue 50 needs
# the fixtures of another file (a PostgreSQL queue and a stub worker, a real memory server
# installed once per session, a plugin site): each is listed here, run where it lives, and
# checked to exist and be collected, so this is the one place a reader finds them all.
ISSUE_50_ELSEWHERE: dict[str, str] = {
    # High: a queued run makes every worker run its command and send the worker's keys.
    "tests/test_worker_trust.py::test_a_default_worker_never_runs_a_server_command_only_the_queued_run_names":
        "a queued --server-memory-cmd runs on no worker that was not given it",
    "tests/test_worker_trust.py::test_a_default_worker_never_sends_its_key_to_a_model_server_only_the_queued_run_names":
        "a queued model endpoint gets no worker's key",
    "tests/test_worker_trust.py::test_a_resume_runs_no_recorded_command_and_contacts_no_recorded_model_server_unless_given":
        "run --resume of another's record runs and contacts nothing it names",
    # Medium: a mapping's secret, one identity against another, a recorded pattern.
    "tests/test_mcp_mapping.py::test_a_secret_the_server_echoes_never_reaches_the_ledger":
        "a mapped server echoing its secret in its answers",
    "tests/test_mcp_mapping.py::test_a_second_identity_cannot_read_change_or_delete_the_firsts_memories_on_mcp_memory_service":
        "identity 2 against identity 1 on the shipped mcp-memory-service mapping",
    "tests/test_server_memory.py::test_a_second_identity_cannot_read_change_or_delete_the_firsts_graph_with_any_tool_it_sees":
        "identity 2 against identity 1 with every tool of server-memory",
    "tests/test_basic_memory.py::test_a_second_identity_cannot_read_change_or_delete_the_firsts_note_with_any_tool_it_sees":
        "identity 2 against identity 1 with every tool of basic-memory",
    "tests/test_mem0.py::test_a_second_identity_can_neither_find_nor_touch_the_first_identitys_memories":
        "identity 2 against identity 1 with every tool of mem0",
    "tests/test_refplatform.py::test_a_second_identity_cannot_read_change_or_delete_the_firsts_memory_with_any_tool_it_sees":
        "identity 2 against identity 1 with every tool of the reference platform",
    "tests/test_mcp_mapping.py::test_a_mapping_pattern_outside_the_linear_time_language_is_refused_at_load":
        "a mapping's pattern outside the linear-time language",
    # Low: plugins, the queue, the worker's output.
    "tests/test_extensions.py::test_broken_plugins_of_every_kind_are_refused_only_where_they_are_named":
        "one broken installed plugin stops no command that does not name it",
    "tests/test_extensions.py::test_a_plugin_named_like_a_built_in_is_listed_as_shadowed":
        "a plugin named like a built-in is listed as shadowed",
    "tests/test_extensions.py::test_a_run_that_chooses_a_shadowed_name_warns_once_for_each_and_uses_the_built_in":
        "a shadowed name chosen warns and runs the built-in",
    "tests/test_worker_trust.py::test_a_job_no_worker_can_run_is_marked_with_its_reason_and_never_stops_a_worker":
        "one unrunnable job row stops no worker",
    "tests/test_worker_trust.py::test_a_worker_that_went_silent_and_woke_after_another_took_its_unit_prints_no_traceback":
        "a stalled worker prints no traceback",
}  # fmt: skip
# Low: the LoCoMo and pkrun files, in the bad-input corpus (tests/data/bad/cases.yaml).
ISSUE_50_BAD_INPUTS: tuple[str, ...] = (
    "validate-locomo-session-leading-zero",
    "validate-locomo-session-other-script-digit",
    "hash-locomo-session-leading-zero",
    "validate-locomo-long-integer",
    "validate-locomo-category-float",
    "run-locomo-category-float",
    "import-peer-pkrun-world-pool-of-400-digits",
    "import-peer-pkrun-world-count-of-400-digits",
    "import-peer-pkrun-planted-number-of-400-digits",
)


def test_every_issue_50_attack_listed_here_exists_and_is_collected_where_it_lives():
    """Each listed test is collected by pytest (a renamed or deleted one fails here), and
    each listed bad input is a case of the bad-input corpus."""
    import subprocess

    from benchledger.benchmarks.reliability import load_cases

    root = Path(__file__).resolve().parent.parent
    names = list(ISSUE_50_ELSEWHERE)
    got = subprocess.run(
        [sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider", *names],
        cwd=root, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    collected = {line.split("[", 1)[0] for line in got.stdout.splitlines() if "::" in line}
    missing = [name for name in names if name not in collected]
    assert not missing, (missing, got.stdout[-2000:], got.stderr[-2000:])
    assert set(ISSUE_50_BAD_INPUTS) <= {c.id for c in load_cases()}
