"""The golden bundles pin the format: any change to encoding or hashing shows up here.

``golden-run.jsonl`` is event format 1 (every run recorded before format 2; it must keep
verifying byte for byte), ``golden-run-v2.jsonl`` the same run in format 2.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from benchledger.ledger import Ledger, open_store
from benchledger.ledger.chain import body_digest, genesis, link_hash, sealed_form
from benchledger.ledger.events import SessionCallBody, StreamHead, UnitFinishedBody, UnitStartedBody
from benchledger.ledger.merkle import leaf_hash
from benchledger.ledger.redaction import Selection
from benchledger.ledger.verified import open_run
from tests.data import make_golden
from tests.sample import counter_clock

GOLDEN_ROOT = "bc42ffc29f1e6d171516d755f157189a198b2837e43356dd1dfb91dd45f0a3dd"
GOLDEN_V2_ROOT = "1da6593f7b9dad2a3e09255d0e0155328aae63ff9061c2edb2caeb429d2f9643"
DOCS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "ledger-format.md"
)


def test_golden_bundle_verifies_with_its_pinned_root():
    run = open_run(make_golden.GOLDEN, require_seal=False, allow_partial=False, root=GOLDEN_ROOT)
    summary, header = run.summary, run.bundle
    assert summary is not None and header is not None
    assert (summary.streams, summary.events) == (4, 26)
    assert header.root == GOLDEN_ROOT


def test_golden_event_hashes_are_pinned():
    lines = Path(make_golden.GOLDEN).read_bytes().split(b"\n")
    assert link_hash(lines[1]) == "333594c4ed4f65a94b4d104a33d36cc5351b8495eae0ac0846b05bd4c9bcd02f"
    assert link_hash(lines[3]) == "bbdd3df2985736851200f30c7a2dc6fc15607482ad81deeb085ee8c54deae266"


@pytest.mark.parametrize(
    ("fmt", "golden", "root"),
    [(1, make_golden.GOLDEN, GOLDEN_ROOT), (2, make_golden.GOLDEN_V2, GOLDEN_V2_ROOT)],
    ids=["format-1", "format-2"],
)
def test_rebuilding_a_golden_bundle_reproduces_it_byte_for_byte(tmp_path, fmt, golden, root):
    out = str(tmp_path / "golden.jsonl")
    assert make_golden.build(out, fmt) == root
    assert Path(out).read_bytes() == Path(golden).read_bytes()


def test_the_format_2_golden_bundle_verifies_with_its_pinned_root():
    run = open_run(make_golden.GOLDEN_V2, require_seal=False, allow_partial=False,
                   root=GOLDEN_V2_ROOT)  # fmt: skip
    summary = run.summary
    assert summary is not None and summary.format == 2
    assert (summary.streams, summary.events) == (4, 26)
    lines = Path(make_golden.GOLDEN_V2).read_bytes().split(b"\n")
    assert link_hash(lines[1]) == "130f4109ba8fc173e1ebf1a298b019b61daaadbaf5879c86de5a6422006a3808"


def _doc_block(marker: str) -> str:
    text = Path(DOCS).read_text(encoding="utf-8")
    m = re.search(re.escape(marker) + r".*?\n```\w+\n(.*?)```", text, re.S)
    assert m, marker
    return m.group(1)


def test_the_docs_worked_example_is_what_the_code_writes():
    led = Ledger(open_store(":memory:"), clock=counter_clock(1780000000000000000, 1000))
    w = led.new_stream("demo/p01/0")
    w.append(UnitStartedBody(protocol_id="p01", attempt=0))
    w.append(
        SessionCallBody(
            episode="teach",
            method="tools/call",
            tool="memory_capture",
            arguments={"content": "Net revenue excludes refunds."},
            result={"id": "ins-1", "status": "pending"},
        ),
        refs=[0],
    )
    w.append(UnitFinishedBody(outcome={"captured": True}), refs=[1])
    expected = []
    for rec in w.staged:
        expected += [rec.data.decode(), link_hash(rec.data)]
    assert _doc_block("example-stream").strip().split("\n") == expected
    assert _doc_block("example-sealed").strip() == sealed_form(w.staged[1].data).decode()
    text = Path(DOCS).read_text(encoding="utf-8")
    assert genesis("demo/p01/0") in text
    head = StreamHead("demo/p01/0", 3, link_hash(w.staged[-1].data))
    assert leaf_hash(head).hex() in text


def _docs_verifier():
    scope: dict[str, object] = {"__name__": "docs_verifier"}
    exec(compile(_doc_block("verifier:"), DOCS, "exec"), scope)
    return scope["verify"]


@pytest.mark.parametrize(
    ("golden", "root"),
    [(make_golden.GOLDEN, GOLDEN_ROOT), (make_golden.GOLDEN_V2, GOLDEN_V2_ROOT)],
    ids=["format-1", "format-2"],
)
def test_the_docs_own_verifier_accepts_a_golden_bundle_and_rejects_tampering(
    tmp_path, golden, root
):
    verify = _docs_verifier()
    assert verify(golden, root) == root  # type: ignore[operator]
    data = Path(golden).read_bytes().replace(b'"tool_calls":1', b'"tool_calls":2', 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    with pytest.raises(AssertionError):
        verify(str(bad))  # type: ignore[operator]


def _lines(path: Path) -> list[bytes]:
    return path.read_bytes().split(b"\n")


def _digest_body(line: bytes) -> bytes:
    """``line`` with its body replaced by its digest, whatever its kind (a forger's edit)."""
    b, t = line.index(b',"body":') + 8, line.rindex(b',"kind":"')
    return line[:b] + b'"' + body_digest(line[b:t]).encode() + b'"' + line[t:]


def _edit(line: bytes, **fields: object) -> bytes:
    obj = json.loads(line)
    obj.update(fields)
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def test_the_docs_own_verifier_checks_a_redacted_bundle_through_its_placeholders(tmp_path):
    verify = _docs_verifier()
    red = tmp_path / "red.jsonl"
    withhold = Selection(frozenset({"model_call", "read_back"}))
    assert make_golden.build(str(red), 2, withhold=withhold) == GOLDEN_V2_ROOT
    assert verify(str(red), GOLDEN_V2_ROOT) == GOLDEN_V2_ROOT  # type: ignore[operator]
    lines = _lines(red)
    i = next(i for i, x in enumerate(lines) if b'"kind":"model_call"' in x)
    assert isinstance(json.loads(lines[i])["body"], str)  # withheld: the digest only
    j = next(i for i, x in enumerate(lines) if b'"kind":"grader_decision"' in x)
    forged = {
        "relabelled": {i: _edit(lines[i], kind="session_call")},
        "retimed": {i: _edit(lines[i], at=1)},
        "decision-withheld": {j: _digest_body(lines[j])},
    }
    for name, edits in forged.items():
        path = tmp_path / f"{name}.jsonl"
        path.write_bytes(b"\n".join(edits.get(k, x) for k, x in enumerate(lines)))
        try:
            verify(str(path))  # type: ignore[operator]
        except AssertionError:
            continue
        pytest.fail(f"the docs' verifier accepted a {name} placeholder")


def test_the_docs_own_verifier_refuses_a_format_1_placeholder_and_an_event_after_the_seal(
    tmp_path,
):
    verify = _docs_verifier()
    red = tmp_path / "red-v1.jsonl"
    make_golden.build(str(red), 1, withhold=Selection(frozenset({"model_call"})))
    with pytest.raises(AssertionError, match="format-1 placeholder"):
        verify(str(red))  # type: ignore[operator]
    lines = _lines(Path(make_golden.GOLDEN_V2))
    seal = json.loads(lines[2])
    extra = dict(json.loads(lines[1]), seq=seal["seq"] + 1, prev=link_hash(lines[2]))
    after = tmp_path / "after-seal.jsonl"
    after.write_bytes(b"\n".join([*lines[:3], _edit(json.dumps(extra).encode()), *lines[3:]]))
    with pytest.raises(AssertionError, match="after the seal"):
        verify(str(after))  # type: ignore[operator]
