"""Attacks by a third party who holds only a public bundle and the publisher's public key.

The attacker here has no private key and no ledger: only the files the publisher put out
(a full, an audit or a redacted bundle, and ``benchledger.pub``), ``json`` and ``blake3``,
and docs/ledger-format.md. Every forgery below must fail ``benchledger verify --pubkey``
(exit 1), and a report must refuse it; none may change a number.

The forger's helpers follow the documented recipes for both event formats (v1: the link
hash of the line; v2: the link hash of the line with its body replaced by its digest), so
the same attacks ran against the code before event format v2, where each one that says so
passed as "authenticated".
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from blake3 import blake3

from benchledger.cli import main
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import (
    EpisodeFinishedBody,
    GraderDecisionBody,
    ModelCallBody,
    RunStartedBody,
    SessionCallBody,
    UnitFinishedBody,
    UnitStartedBody,
)
from benchledger.ledger.keys import write_key_pair
from tests.conftest import signing_ledger
from tests.sample import PASSING, counter_clock

RUN = "pub"
# p1 answers an untaught question, p4 fails to capture: 3 of 5 pass the full lifecycle.
FAILING = {"p1": {"abstain_correct": False}, "p4": {"captured": False}}


# -- the publisher (holds the private key) ----------------------------------------------------


@pytest.fixture(scope="module")
def public(tmp_path_factory) -> dict[str, str]:
    """What the publisher published: full, audit and redacted bundles, and the public key."""
    return publish(tmp_path_factory)


def publish(tmp_path_factory) -> dict[str, str]:
    """The ``public`` fixture's files, made afresh (tests/test_attacks_public.py's too)."""
    d = tmp_path_factory.mktemp("publisher")
    key, pub, _ = write_key_pair(str(d))
    db = str(d / "l.sqlite")
    store = open_store(db)
    ledger = signing_ledger(store, key, "t")
    ledger.start_run(RUN, RunStartedBody(suite="lifecycle", protocol_set_hash="set-1", k=1))
    for i in range(5):
        pid = f"p{i}"
        w = ledger.new_stream(f"{RUN}/{pid}/1")
        w.append(UnitStartedBody(protocol_id=pid, attempt=1))
        m = w.append(ModelCallBody(episode="teach", request_hash=f"{i:016x}", response={"t": i}))
        c = w.append(SessionCallBody(episode="teach", method="tools/call", tool="search"), refs=[m])
        fin = w.append(EpisodeFinishedBody(episode="recall", final_answer="1"), refs=[m, c])
        checks = dict(PASSING, **FAILING.get(pid, {}))
        for check, verdict in checks.items():
            w.append(
                GraderDecisionBody(stage=check.split("_")[0], check=check, verdict=verdict),
                refs=[fin],
            )
        w.append(UnitFinishedBody(outcome=dict(checks)))
        ledger.commit(w)
    ledger.seal(RUN)
    store.close()
    out = {"db": db, "pub": pub, "dir": str(d)}
    for name, extra in (
        ("full", []),
        ("redacted", ["--withhold", "model_call"]),
        ("redacted2", ["--withhold", "model_call,session_call"]),
    ):
        out[name] = str(d / f"{name}.jsonl")
        assert main(["export", RUN, "-o", out[name], "--ledger", db, *extra]) == 0
    for name, metric in (("audit", "capture_rate"), ("audit-captured", "recall_surfaced")):
        out[name] = str(d / f"{name}.jsonl")
        assert main(["audit", RUN, metric, "--bundle", out[name], "--ledger", db]) == 0
    return out


# -- the attacker's tools: json, blake3 and docs/ledger-format.md -------------------------------


def canon(v: object) -> bytes:
    return json.dumps(v, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode()


def H(b: bytes) -> bytes:
    return blake3(b).digest()


def mth(leaves: list[bytes]) -> bytes:
    if len(leaves) == 1:
        return leaves[0]
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    return H(b"\x01" + mth(leaves[:k]) + mth(leaves[k:]))


def audit_path(i: int, leaves: list[bytes]) -> list[str]:
    if len(leaves) == 1:
        return []
    k = 1
    while k * 2 < len(leaves):
        k *= 2
    if i < k:
        return [*audit_path(i, leaves[:k]), mth(leaves[k:]).hex()]
    return [*audit_path(i - k, leaves[k:]), mth(leaves[:k]).hex()]


def leaf(head: list[Any]) -> bytes:
    return H(b"\x00" + canon(head))


def genesis(stream: str) -> str:
    return blake3(b"benchledger:genesis:v1\x00" + stream.encode()).hexdigest()


def _split(line: bytes) -> tuple[bytes, bytes, bytes]:
    """A v2 line as (envelope before the body, the body's bytes, envelope after it)."""
    b = line.index(b',"body":') + len(b',"body":')
    t = line.rindex(b',"kind":"')
    return line[:b], line[b:t], line[t:]


WITHHOLDABLE = {"session_call", "model_call", "read_back"}


def link(line: bytes) -> str:
    """A bundle line's link hash: v1 hashes the line (a v1 placeholder states its hash);
    v2 hashes its sealed form: for a withholdable kind the line with its body replaced by
    the body's digest (a placeholder already is), for any other kind the line itself."""
    if line.endswith(b',"v":2}'):
        head, body, tail = _split(line)
        if not body.startswith(b'"') and json.loads(line)["kind"] in WITHHOLDABLE:
            digest = blake3(b"benchledger:body:v2\x00" + body).hexdigest()
            line = head + b'"' + digest.encode() + b'"' + tail
        return blake3(b"benchledger:event:v2\x00" + line).hexdigest()
    obj = json.loads(line)
    if obj.get("withheld") is True:
        return str(obj["hash"])
    return blake3(b"benchledger:event:v1\x00" + line).hexdigest()


def withhold(line: bytes, **claims: Any) -> bytes:
    """The placeholder standing for the full event ``line``, its envelope edited by ``claims``."""
    if line.endswith(b',"v":2}'):
        head, body, tail = _split(line)
        digest = blake3(b"benchledger:body:v2\x00" + body).hexdigest()
        obj = json.loads(head + b'"' + digest.encode() + b'"' + tail)
        obj.update(claims)
        return canon(obj)
    obj = json.loads(line)
    del obj["body"]
    obj.update(hash=link(line), withheld=True, **claims)
    return canon(obj)


def edit(line: bytes, **claims: Any) -> bytes:
    obj = json.loads(line)
    obj.update(claims)
    return canon(obj)


class Bundle:
    """A bundle file as lines the attacker edits, then writes back."""

    def __init__(self, path: str) -> None:
        raw = Path(path).read_bytes().split(b"\n")
        self.header: dict[str, Any] = json.loads(raw[0])
        self.lines: list[bytes] = [x for x in raw[1:] if x]

    def objs(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.lines]

    def index(self, pred: Callable[[dict[str, Any]], bool], nth: int = 0) -> int:
        return [i for i, o in enumerate(self.objs()) if pred(o)][nth]

    def write(self, path: Path) -> str:
        path.write_bytes(b"\n".join([canon(self.header), *self.lines]) + b"\n")
        return str(path)

    def rechain(self, stream: str) -> None:
        """Rebuild ``stream``'s links after an edit (a forger can always do this)."""
        prev = genesis(stream)
        for i, o in enumerate(self.objs()):
            if o["stream"] != stream:
                continue
            o["prev"] = prev
            self.lines[i] = canon(o)
            prev = link(self.lines[i])

    def heads(self) -> dict[str, list[Any]]:
        out: dict[str, list[Any]] = {}
        for line, o in zip(self.lines, self.objs(), strict=True):
            out[o["stream"]] = [o["stream"], o["seq"] + 1, link(line)]
        return out

    def seal(self) -> dict[str, Any]:
        return next(o for o in self.objs() if o["kind"] == "run_sealed")


def verify(capsys, path: str, *options: str) -> tuple[int, str]:
    code = main(["verify", path, *options])
    out = capsys.readouterr()
    return code, out.out + out.err


def refused(capsys, path: str, public: dict[str, str]) -> str:
    """The forged file fails verify with the publisher's key, and no report is made of it."""
    code, out = verify(capsys, path, "--pubkey", public["pub"])
    assert code == 1, out
    assert not any(x.startswith("authenticated:") for x in out.splitlines()), out
    assert main(["report", path, "--format", "json"]) != 0
    capsys.readouterr()
    return out


def full_lifecycle(path: str, capsys) -> tuple[int, int]:
    assert main(["report", path, "--format", "json"]) == 0
    metric = json.loads(capsys.readouterr().out)["metrics"]["full_lifecycle"]
    return metric["num"], metric["den"]


# -- the genuine files pass -----------------------------------------------------------------


@pytest.mark.parametrize("name", ["full", "redacted", "redacted2", "audit", "audit-captured"])
def test_the_genuine_published_files_are_authenticated(public, capsys, name):
    code, out = verify(capsys, public[name], "--pubkey", public["pub"])
    assert code == 0 and "authenticated:" in out, out


def test_the_genuine_redacted_bundle_reports_what_the_full_run_does(public, capsys):
    assert full_lifecycle(public["redacted"], capsys) == full_lifecycle(public["full"], capsys)
    assert full_lifecycle(public["full"], capsys) == (3, 5)


# -- forged audit bundles ------------------------------------------------------------------


def _forge_cited_stream(b: Bundle) -> str:
    """Flip p1's failed abstention to passed and rebuild its chain; return the stream."""
    i = b.index(
        lambda o: o["stream"].endswith("/p1/1") and o["body"].get("check") == "abstain_correct"
    )
    obj = json.loads(b.lines[i])
    obj["body"]["verdict"] = True
    b.lines[i] = canon(obj)
    stream = obj["stream"]
    b.rechain(stream)
    return stream


def _reprove(b: Bundle, heads: list[list[Any]]) -> str:
    """Point the header and every proof at the root of ``heads``; return that root."""
    leaves = [leaf(h) for h in heads]
    root = mth(leaves).hex()
    b.header["root"] = root
    index = {h[0]: i for i, h in enumerate(heads)}
    b.header["proofs"] = {
        s: {"index": index[s], "path": audit_path(index[s], leaves), "size": len(heads)}
        for s in b.header["proofs"]
    }
    return root


def _forged_heads(b: Bundle, header_head: list[Any]) -> list[list[Any]]:
    mine = b.heads()
    return [header_head if h[0] == RUN else mine.get(h[0], h) for h in b.seal()["body"]["heads"]]


def _after_the_seal(b: Bundle, obj: dict[str, Any]) -> None:
    """Append ``obj`` to the header stream, after the genuine seal."""
    seal_at = b.index(lambda o: o["kind"] == "run_sealed")
    genuine = b.lines[seal_at]
    obj.update(prev=link(genuine), seq=json.loads(genuine)["seq"] + 1, stream=RUN)
    if genuine.endswith(b',"v":2}'):
        obj["v"] = 2
    b.lines.insert(seal_at + 1, canon(obj))


def test_an_audit_bundle_with_a_second_seal_over_a_forged_root_is_refused(public, tmp_path, capsys):
    b = Bundle(public["audit"])
    _forge_cited_stream(b)
    genuine = b.seal()
    second = json.loads(canon(genuine))
    second["body"].pop("signature", None)
    _after_the_seal(b, second)
    seal_line = b.lines[b.index(lambda o: o["kind"] == "run_sealed")]
    heads = _forged_heads(b, [RUN, genuine["seq"] + 1, link(seal_line)])
    second["body"]["heads"], second["body"]["root"] = heads, _reprove(b, heads)
    b.lines[b.index(lambda o: o["kind"] == "run_sealed", nth=1)] = canon(second)
    out = refused(capsys, b.write(tmp_path / "second-seal.jsonl"), public)
    assert "event after seal" in out


def test_an_audit_bundle_with_an_event_after_the_genuine_seal_is_refused(public, tmp_path, capsys):
    b = Bundle(public["audit"])
    _forge_cited_stream(b)
    extra = {"at": 1, "body": {"suite": "lifecycle"}, "kind": "run_started", "refs": []}
    _after_the_seal(b, extra)
    last = b.lines[b.index(lambda o: o["stream"] == RUN, nth=2)]
    _reprove(b, _forged_heads(b, [RUN, json.loads(last)["seq"] + 1, link(last)]))
    out = refused(capsys, b.write(tmp_path / "after-seal.jsonl"), public)
    assert "event after seal" in out


def test_an_audit_bundle_whose_seal_names_a_forged_root_is_refused(public, tmp_path, capsys):
    """Caught before event format v2 too (the signature covers the root): a guard."""
    b = Bundle(public["audit"])
    _forge_cited_stream(b)
    i = b.index(lambda o: o["kind"] == "run_sealed")
    seal = json.loads(b.lines[i])
    heads = _forged_heads(b, seal["body"]["heads"][0])
    seal["body"]["heads"], seal["body"]["root"] = heads, _reprove(b, heads)
    b.lines[i] = canon(seal)
    refused(capsys, b.write(tmp_path / "root-swapped.jsonl"), public)


@pytest.mark.parametrize("which", ["cited", "not-cited"], ids=["cited", "not-cited"])
def test_an_audit_bundle_whose_seal_lists_another_head_is_refused(public, tmp_path, capsys, which):
    b = Bundle(public["audit" if which == "cited" else "audit-captured"])
    cited = set(b.header["proofs"])
    i = b.index(lambda o: o["kind"] == "run_sealed")
    seal = json.loads(b.lines[i])
    j = next(
        k
        for k, h in enumerate(seal["body"]["heads"])
        if h[0] != RUN and (h[0] in cited) == (which == "cited")
    )
    seal["body"]["heads"][j][2] = "0" * 64
    b.lines[i] = canon(seal)
    out = refused(capsys, b.write(tmp_path / f"head-{which}.jsonl"), public)
    assert "root mismatch" in out


# -- forged redacted bundles -------------------------------------------------------------------


def _placeholders(b: Bundle) -> list[int]:
    return [
        i for i, o in enumerate(b.objs()) if o.get("withheld") is True or isinstance(o["body"], str)
    ]


@pytest.mark.parametrize(
    ("claims", "rule"),
    [
        ({"kind": "session_call"}, "kind:session_call"),
        ({"at": 1}, None),
        ({"refs": [0]}, None),
        ({"prev": "0" * 64}, None),
    ],
    ids=["kind", "at", "refs", "prev"],
)
def test_a_relabelled_placeholder_is_refused(public, tmp_path, capsys, claims, rule):
    """``prev`` was caught before event format v2 too (the chain checks it): a guard."""
    b = Bundle(public["redacted"])
    i = _placeholders(b)[2]
    b.lines[i] = edit(b.lines[i], **claims)
    if rule:  # the header is not signed: the forger makes the rules match the new label
        b.header["withheld"] = sorted({*b.header["withheld"], rule})
    refused(capsys, b.write(tmp_path / "relabelled.jsonl"), public)


def test_placeholders_that_trade_their_claims_are_refused(public, tmp_path, capsys):
    b = Bundle(public["redacted2"])
    objs = b.objs()
    i = next(i for i in _placeholders(b) if objs[i + 1]["stream"] == objs[i]["stream"])
    a, c = objs[i], objs[i + 1]
    assert a["kind"] != c["kind"]
    b.lines[i] = edit(b.lines[i], kind=c["kind"], at=c["at"])
    b.lines[i + 1] = edit(b.lines[i + 1], kind=a["kind"], at=a["at"])
    refused(capsys, b.write(tmp_path / "traded.jsonl"), public)


def test_failing_decisions_relabelled_as_withheld_model_calls_are_refused(public, tmp_path, capsys):
    """The issue's attack: p1's failed abstention vanishes from the fold, so the stage reads
    as not applicable and p1 passes the full lifecycle (3/5 -> 4/5, "authenticated")."""
    b = Bundle(public["redacted"])
    for i, o in enumerate(b.objs()):
        if o["kind"] == "grader_decision" and o["body"].get("verdict") is False:
            b.lines[i] = withhold(b.lines[i], kind="model_call")
    refused(capsys, b.write(tmp_path / "relabelled-decisions.jsonl"), public)


@pytest.mark.parametrize("rule", ["kind:grader_decision", "stream:p1/*"], ids=["kind", "stream"])
def test_a_withheld_decision_is_refused(public, tmp_path, capsys, rule):
    b = Bundle(public["redacted"])
    for i, o in enumerate(b.objs()):
        if not o["stream"].endswith("/p1/1") or not isinstance(o.get("body"), dict):
            continue  # another unit, or already withheld
        if o["kind"] == "grader_decision" or rule.startswith("stream"):
            b.lines[i] = withhold(b.lines[i])  # a stream rule: the whole unit, as it once did
    b.header["withheld"] = sorted({*b.header["withheld"], rule})
    out = refused(capsys, b.write(tmp_path / "decision.jsonl"), public)
    assert "not withholdable" in out


@pytest.mark.parametrize(
    "case", ["placeholder-without-rule", "shown-despite-rule", "no-rules"], ids=lambda c: c
)
def test_withheld_rules_that_do_not_match_the_placeholders_are_refused(
    public, tmp_path, capsys, case
):
    b = Bundle(public["redacted"])
    objs = b.objs()
    if case == "placeholder-without-rule":  # one session_call hidden, no rule says so
        i = next(i for i, o in enumerate(objs) if o["kind"] == "session_call")
        b.lines[i] = withhold(b.lines[i])
    elif case == "shown-despite-rule":  # the rules claim every session_call is withheld
        b.header["withheld"] = sorted({*b.header["withheld"], "kind:session_call"})
    else:
        b.header["withheld"] = []
    out = refused(capsys, b.write(tmp_path / f"{case}.jsonl"), public)
    assert "rule" in out


def test_a_second_seal_in_a_redacted_bundle_is_refused(public, tmp_path, capsys):
    """Caught before event format v2 too: a guard."""
    b = Bundle(public["redacted"])
    second = json.loads(canon(b.seal()))
    _after_the_seal(b, second)
    out = refused(capsys, b.write(tmp_path / "second-seal.jsonl"), public)
    assert "event after seal" in out


def test_a_seal_moved_into_a_unit_stream_is_refused(public, tmp_path, capsys):
    """Caught before event format v2 too: a guard."""
    b = Bundle(public["redacted"])
    i = b.index(lambda o: o["kind"] == "unit_finished")
    obj = json.loads(b.lines[i])
    seal = b.seal()
    b.lines[i] = canon(dict(seal, stream=obj["stream"], seq=obj["seq"], prev=obj["prev"]))
    refused(capsys, b.write(tmp_path / "moved-seal.jsonl"), public)


# -- a gate judged by a bar the attacker chose -------------------------------------------------


@pytest.fixture(scope="module")
def prereg_v1(tmp_path_factory) -> dict[str, str]:
    """An event-format-1 baseline and a candidate that pre-registered personal_recall at 0.05
    and regressed on it (25/30 against 30/30), published as bundles withholding model calls."""
    from tests.test_prereg import bar, outcomes, write

    d = tmp_path_factory.mktemp("prereg-v1")
    db = str(d / "l.sqlite")
    store = open_store(db)
    ledger = Ledger(store, clock=counter_clock(), event_format=1)
    root = write(ledger, "base", outcomes(30))
    write(ledger, "cand", outcomes(30, flip=5), prereg=bar(root))
    store.close()
    out = {}
    for run in ("base", "cand"):
        out[run] = str(d / f"{run}.jsonl")
        assert (
            main(["export", run, "-o", out[run], "--ledger", db, "--withhold", "model_call"]) == 0
        )
    return out


def _run_started_as_a_withheld_model_call(path: str, tmp_path: Path) -> str:
    """Format 1 binds no placeholder's kind: run_started (and its prereg) becomes a
    "withheld model call" under the bundle's own kind:model_call rule, every link intact."""
    b = Bundle(path)
    i = b.index(lambda o: o["kind"] == "run_started")
    b.lines[i] = withhold(b.lines[i], kind="model_call")
    return b.write(tmp_path / Path(path).name)


@pytest.mark.parametrize("which", ["both", "candidate", "baseline"], ids=lambda w: w)
def test_a_gate_refuses_runs_whose_run_started_was_turned_into_a_withheld_model_call(
    prereg_v1, tmp_path, capsys, which
):
    """The issue's attack: with no run_started to read, the gate took --tolerance 0.5 as a
    bar of its own ("given on the command line") and passed the regressed candidate."""
    cand, base = prereg_v1["cand"], prereg_v1["base"]
    honest = main(["gate", cand, "--baseline", base, "--tolerance", "0.5"])
    assert honest == 2 and "pre-registered its gate" in capsys.readouterr().err
    if which in ("both", "candidate"):
        cand = _run_started_as_a_withheld_model_call(cand, tmp_path)
    if which in ("both", "baseline"):
        base = _run_started_as_a_withheld_model_call(base, tmp_path)
    for forged in {cand, base} - {prereg_v1["cand"], prereg_v1["base"]}:
        code, out = verify(capsys, forged)
        assert code == 0 and "UNBOUND" in out, out  # the forgery still verifies: format 1
    code = main(["gate", cand, "--baseline", base, "--tolerance", "0.5", "--format", "json"])
    got = capsys.readouterr()
    lines = got.err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and got.out == "", got
    assert "cannot gate" in lines[0] and "shows no run_started" in lines[0], lines[0]
