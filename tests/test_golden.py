"""The golden bundle pins the format: any change to encoding or hashing shows up here."""

from __future__ import annotations

import os
import re
from pathlib import Path

from ledger import Ledger, open_store
from ledger.bundle import verify_bundle
from ledger.chain import genesis, link_hash
from ledger.events import SessionCallBody, StreamHead, UnitFinishedBody, UnitStartedBody
from ledger.merkle import leaf_hash
from tests.data import make_golden
from tests.sample import counter_clock

GOLDEN_ROOT = "bc42ffc29f1e6d171516d755f157189a198b2837e43356dd1dfb91dd45f0a3dd"
DOCS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "docs", "ledger-format.md"
)


def test_golden_bundle_verifies_with_its_pinned_root():
    failure, summary, header = verify_bundle(make_golden.GOLDEN, root=GOLDEN_ROOT)
    assert failure is None
    assert (summary.streams, summary.events) == (4, 26)
    assert header.root == GOLDEN_ROOT


def test_golden_event_hashes_are_pinned():
    lines = Path(make_golden.GOLDEN).read_bytes().split(b"\n")
    assert link_hash(lines[1]) == "333594c4ed4f65a94b4d104a33d36cc5351b8495eae0ac0846b05bd4c9bcd02f"
    assert link_hash(lines[3]) == "bbdd3df2985736851200f30c7a2dc6fc15607482ad81deeb085ee8c54deae266"


def test_rebuilding_the_golden_bundle_reproduces_it_byte_for_byte(tmp_path):
    out = str(tmp_path / "golden.jsonl")
    assert make_golden.build(out) == GOLDEN_ROOT
    assert Path(out).read_bytes() == Path(make_golden.GOLDEN).read_bytes()


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
    text = Path(DOCS).read_text(encoding="utf-8")
    assert genesis("demo/p01/0") in text
    head = StreamHead("demo/p01/0", 3, link_hash(w.staged[-1].data))
    assert leaf_hash(head).hex() in text


def test_the_docs_own_verifier_accepts_the_golden_bundle_and_rejects_tampering(tmp_path):
    scope: dict[str, object] = {"__name__": "docs_verifier"}
    exec(compile(_doc_block("verifier:"), DOCS, "exec"), scope)
    verify = scope["verify"]
    assert verify(make_golden.GOLDEN, GOLDEN_ROOT) == GOLDEN_ROOT  # type: ignore[operator]
    data = Path(make_golden.GOLDEN).read_bytes().replace(b'"tool_calls":1', b'"tool_calls":2', 1)
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(data)
    try:
        verify(str(bad))  # type: ignore[operator]
    except AssertionError:
        return
    raise AssertionError("the docs' verifier accepted a tampered bundle")
