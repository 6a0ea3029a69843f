from __future__ import annotations

import random

import msgspec
import pytest

from benchledger.ledger.chain import Record, event_format, genesis, link_hash, sealed_form
from benchledger.ledger.checker import RunChecker
from benchledger.ledger.codec import canonical, decode_event, envelope_bytes
from benchledger.ledger.events import (
    EVENT_TYPES,
    KINDS,
    GraderDecisionBody,
    SessionCallBody,
    make_event,
)
from benchledger.ledger.verdict import Fault
from tests.sample import build_run


def test_writer_bytes_equal_the_canonical_encoding_of_the_event(ledger):
    rng = random.Random(5)
    w = ledger.new_stream("run-x/p/0")
    for i in range(200):
        body = SessionCallBody(
            episode='é"\\</>',
            method="tools/call",
            tool=f"t{i}",
            arguments={"z": rng.random(), "a": [1, None, "x"]},
            result={"ü": i, "nested": {"b": 1, "a": 2}},
        )
        refs = tuple(sorted(rng.sample(range(i), min(i, 3)))) if i else ()
        w.append(body, refs)
    for rec in w.staged:
        event = decode_event(rec.data)
        assert canonical(event) == rec.data
        rebuilt = make_event(event.stream, event.seq, event.prev, event.at, event.body, event.refs)  # type: ignore[attr-defined]
        assert canonical(rebuilt) == rec.data


def test_envelope_bytes_have_sorted_keys_and_no_whitespace():
    data = envelope_bytes(b'"s"', 3, "ab", 7, "session_call", (0, 2), b'{"x":1}')
    assert (
        data == b'{"at":7,"body":{"x":1},"kind":"session_call","prev":"ab","refs":[0,2],'
        b'"seq":3,"stream":"s"}'
    )
    assert list(msgspec.json.decode(data)) == sorted(msgspec.json.decode(data))


def test_every_listed_kind_has_a_typed_event():
    assert len(KINDS) == len(EVENT_TYPES) == 14
    assert {"run_started", "session_call", "grader_decision", "run_sealed",
            "probe_finished"} <= set(KINDS)  # fmt: skip


def test_link_hash_is_domain_separated_blake3():
    import blake3

    assert link_hash(b"{}") == blake3.blake3(b"benchledger:event:v1\x00{}").hexdigest()
    assert genesis("s") == blake3.blake3(b"benchledger:genesis:v1\x00s").hexdigest()


def test_refs_must_point_backwards(ledger):
    w = ledger.new_stream("run-x/p/0")
    w.append(GraderDecisionBody(stage="recall", check="correct", verdict=True))
    with pytest.raises(ValueError, match="not an earlier seq"):
        w.append(GraderDecisionBody(stage="recall", check="correct", verdict=True), refs=[1])


def _lines(ledger) -> list[bytes]:
    return [row[3] for row in ledger.store.scan("run-c")]


def _check(lines, require_seal=True):
    return RunChecker("run-c", require_seal=require_seal).check(
        Record(None, None, None, d) for d in lines
    )


def test_verify_names_first_broken_seq(ledger):
    build_run(ledger, "run-c", units=2)
    lines = _lines(ledger)
    i = 5
    stream, seq = decode_event(lines[i]).stream, decode_event(lines[i]).seq
    lines[i] = lines[i].replace(b'"episode":"', b'"episode":"X', 1)
    failure = _check(lines)
    assert failure is not None
    assert (failure.stream, failure.seq, failure.problem) == (stream, seq, "link hash mismatch")


def test_a_truncated_tail_is_named_against_the_sealed_length(ledger):
    build_run(ledger, "run-c", units=2)
    lines = _lines(ledger)[:-2]
    failure = _check(lines)
    assert failure is not None and failure.problem == "tail truncated"
    assert failure.stream == "run-c/p01/1"


def test_an_unsealed_run_verifies_unless_a_seal_is_required(ledger):
    build_run(ledger, "run-c", units=2, seal=False)
    lines = _lines(ledger)
    assert _check(lines, require_seal=False) is None
    failure = _check(lines, require_seal=True)
    assert failure is not None and failure.problem == "not sealed"


def test_the_seal_time_is_the_latest_head_time(ledger):
    build_run(ledger, "run-c", units=2)
    seal = decode_event(ledger.store.head("run-c").data)
    heads = [decode_event(r[3]) for r in ledger.store.heads("run-c")]
    assert seal.at == max(h.at for h in heads if h is not seal and h.stream != "run-c")


def test_sealing_twice_is_refused(ledger):
    from benchledger.ledger import RunSealed

    build_run(ledger, "run-c", units=1)
    with pytest.raises(RunSealed):
        ledger.seal("run-c")


def test_sealing_refuses_an_unfinished_unit(ledger):
    from benchledger.ledger import LedgerError
    from benchledger.ledger.events import RunStartedBody, UnitStartedBody

    ledger.start_run("run-u", RunStartedBody(suite="lifecycle"))
    w = ledger.new_stream("run-u/p/0")
    w.append(UnitStartedBody(protocol_id="p", attempt=0))
    ledger.commit(w)
    with pytest.raises(LedgerError, match="not a finished or abandoned unit"):
        ledger.seal("run-u")


def test_starting_an_existing_run_is_refused(ledger):
    from benchledger.ledger import LedgerError
    from benchledger.ledger.events import RunStartedBody

    build_run(ledger, "run-c", units=1)
    with pytest.raises(LedgerError, match="already exists"):
        ledger.start_run("run-c", RunStartedBody(suite="lifecycle"))


@pytest.mark.parametrize(
    "bad", ["", "a/b", " x", "-x", "x" * 129], ids=["empty", "slash", "space", "dash", "long"]
)
def test_run_ids_are_checked(bad):
    from benchledger.ledger.ledger import check_run_id

    with pytest.raises(ValueError):
        check_run_id(bad)


def _chained(stream: str, events: list[tuple[str, tuple[int, ...]]]) -> list[bytes]:
    """A stream's events re-chained from scratch: every link intact, whatever they say."""
    out, prev = [], genesis(stream)
    for seq, (kind, refs) in enumerate(events):
        data = envelope_bytes(
            msgspec.json.encode(stream), seq, prev, 1000 + seq, kind, refs, b'{"x":1}'
        )
        out.append(data)
        prev = link_hash(data)
    return out


_UNIT = [("unit_started", ()), ("session_call", ()), ("model_call", ()), ("unit_finished", ())]


def _rows(streams: dict[str, list[tuple[str, tuple[int, ...]]]], *, keys: bool) -> list[Record]:
    """Ledger rows (key columns agreeing with the bytes) or bundle lines (no keys)."""
    return [
        Record(s, seq, msgspec.json.decode(d)["kind"], d) if keys else Record(None, None, None, d)
        for s, evs in streams.items()
        for seq, d in enumerate(_chained(s, evs))
    ]


@pytest.mark.parametrize(
    ("kind", "refs", "problem"),
    [
        ("run_sealed", (), "misplaced seal"),
        ("no_such_kind", (), "unknown kind"),
        ("session_call", (3,), "bad ref"),
        ("session_call", (2,), "bad ref"),
    ],
    ids=["seal-in-a-unit", "unknown-kind", "ref-forward", "ref-to-itself"],
)
@pytest.mark.parametrize("keys", [True, False], ids=["ledger-rows", "bundle-lines"])
def test_a_linked_event_mid_stream_is_still_checked_for_what_it_says(kind, refs, problem, keys):
    """Links intact, so only the event's own fields can fail it: in a ledger (rows with
    key columns, the checker's fast path) exactly as in a bundle."""
    unit = list(_UNIT)
    unit[2] = (kind, refs)
    rows = _rows({"run-m": [("run_started", ())], "run-m/p00/0": unit}, keys=keys)
    failure = RunChecker("run-m").check(rows)
    assert failure is not None
    assert (failure.stream, failure.seq, failure.problem) == ("run-m/p00/0", 2, problem)


@pytest.mark.parametrize(
    ("column", "value", "where", "problem"),
    [
        ("kind", "model_call", ("run-m/p00/0", 1), "kind mismatch"),
        ("kind", "run_sealed", ("run-m/p00/0", 1), "kind mismatch"),
        ("stream", "run-m/p00/0x", ("run-m/p00/0x", 3), "stream mismatch"),
    ],
    ids=["kind-to-another", "kind-to-seal", "last-row-to-a-name-that-sorts-next"],
)
def test_a_row_whose_key_columns_disagree_with_its_bytes_is_named(column, value, where, problem):
    rows = _rows({"run-m": [("run_started", ())], "run-m/p00/0": _UNIT}, keys=True)
    target = 2 if column == "kind" else 4  # session_call at seq 1; the unit's last row
    r = rows[target]
    rows[target] = r._replace(**{column: value})
    failure = RunChecker("run-m").check(rows)
    assert failure is not None
    assert (failure.stream, failure.seq, failure.problem) == (*where, problem)


# -- event formats ------------------------------------------------------------------------


def test_a_format_2_link_hash_covers_the_envelope_and_a_digest_of_the_body():
    import blake3

    data = envelope_bytes(b'"s"', 0, "ab", 7, "session_call", (), b'{"x":1}', v=2)
    assert data.endswith(b',"v":2}')
    digest = blake3.blake3(b"benchledger:body:v2\x00" + b'{"x":1}').hexdigest()
    sealed = data.replace(b'{"x":1}', b'"' + digest.encode() + b'"')
    assert sealed_form(data) == sealed
    assert link_hash(data) == link_hash(sealed)
    assert link_hash(data) == blake3.blake3(b"benchledger:event:v2\x00" + sealed).hexdigest()


def test_new_runs_are_format_2_and_a_format_1_ledger_still_writes_and_verifies_format_1():
    from benchledger.ledger import Ledger, open_store

    for fmt in (1, 2):
        led = Ledger(open_store(":memory:"), event_format=fmt)
        build_run(led, "run-f", units=2)
        rows = [r[3] for r in led.store.scan("run-f")]
        assert all(event_format(d) == fmt for d in rows)
        failure, summary = led.verify("run-f", require_seal=True)
        assert failure is None and summary.format == fmt


def _v2_unit(stream: str, kinds: list[str], *, formats: dict[int, int]) -> list[bytes]:
    out, prev = [], genesis(stream)
    for seq, kind in enumerate(kinds):
        v = formats.get(seq, 2)
        data = envelope_bytes(msgspec.json.encode(stream), seq, prev, 10 + seq, kind, (), b"{}", v)
        out.append(data)
        prev = link_hash(data)
    return out


@pytest.mark.parametrize("keys", [True, False], ids=["ledger-rows", "bundle-lines"])
def test_an_event_of_another_format_than_its_run_is_named(keys):
    header = _v2_unit("run-v", ["run_started"], formats={})
    unit = _v2_unit("run-v/p/0", [k for k, _ in _UNIT], formats={2: 1})
    lines = [("run-v", d) for d in header] + [("run-v/p/0", d) for d in unit]
    rows = [
        Record(s, seq, msgspec.json.decode(d)["kind"], d) if keys else Record(None, None, None, d)
        for (s, d), seq in zip(lines, [0, 0, 1, 2, 3], strict=True)
    ]
    failure = RunChecker("run-v").check(rows)
    assert failure is not None
    assert (failure.stream, failure.seq, failure.problem) == ("run-v/p/0", 2, "format mismatch")


def test_a_placeholder_in_a_ledger_or_a_full_bundle_is_named(ledger):
    build_run(ledger, "run-c", units=1)
    lines = _lines(ledger)
    i = next(i for i, d in enumerate(lines) if b'"kind":"model_call"' in d)
    stream, seq = decode_event(lines[i]).stream, decode_event(lines[i]).seq
    lines[i] = sealed_form(lines[i])  # the chain still checks: only the body is gone
    failure = _check(lines)
    assert failure is not None
    assert (failure.stream, failure.seq, failure.problem) == (
        stream,
        seq,
        Fault.UNEXPECTED_PLACEHOLDER,
    )


def test_a_second_seal_is_an_event_after_the_seal(ledger):
    build_run(ledger, "run-c", units=1)
    lines = _lines(ledger)
    seal = decode_event(lines[1])
    again = make_event("run-c", seal.seq + 1, link_hash(lines[1]), seal.at, seal.body)  # type: ignore[attr-defined]
    lines.insert(2, canonical(again))
    failure = _check(lines)
    assert failure is not None
    assert (failure.stream, failure.seq, failure.problem) == ("run-c", 2, "event after seal")


def test_every_fault_is_named_in_the_format_documentation():
    from pathlib import Path

    doc = (Path(__file__).resolve().parent.parent / "docs" / "ledger-format.md").read_text()
    table = doc[doc.index("## Faults") : doc.index("## A verifier of your own")]
    assert [f.value for f in Fault if f"`{f.value}`" not in table] == []


def test_a_kind_never_withheld_is_hashed_whole_so_it_has_no_placeholder():
    import blake3

    data = envelope_bytes(b'"s"', 0, "ab", 7, "grader_decision", (), b'{"verdict":false}', v=2)
    assert sealed_form(data) == data
    assert link_hash(data) == blake3.blake3(b"benchledger:event:v2\x00" + data).hexdigest()
    digest = blake3.blake3(b"benchledger:body:v2\x00" + b'{"verdict":false}').hexdigest()
    forged = data.replace(b'{"verdict":false}', b'"' + digest.encode() + b'"')
    assert link_hash(forged) != link_hash(data)


def _kind_twice(stream: str, link: str) -> list[bytes]:
    """A format-2 unit whose session_call names its kind again after the body (the JSON
    decoder keeps the last), the next event linked to the ``link`` hash of it: the spec's
    (its body read up to the last kind key) or one over the decoded body alone."""
    import blake3

    body = b'{"x":1}'
    out, prev = [], genesis(stream)
    for seq, kind in enumerate(k for k, _ in _UNIT):
        data = envelope_bytes(msgspec.json.encode(stream), seq, prev, 10 + seq, kind, (), body, 2)
        h = link_hash(data)
        if kind == "session_call":
            data = data.replace(b',"prev":', b',"kind":"session_call","prev":', 1)
            assert msgspec.json.decode(data)["kind"] == "session_call"  # still decodable
            h = link_hash(data)
            if link == "decoded-body":
                b, t = data.index(b',"body":') + 8, data.index(b',"kind":"')
                digest = blake3.blake3(b"benchledger:body:v2\x00" + body).hexdigest()
                sealed = data[:b] + b'"' + digest.encode() + b'"' + data[t:]
                h = blake3.blake3(b"benchledger:event:v2\x00" + sealed).hexdigest()
        out.append(data)
        prev = h
    return out


@pytest.mark.parametrize("link", ["spec", "decoded-body"], ids=["spec-link", "decoded-body-link"])
@pytest.mark.parametrize("keys", [True, False], ids=["ledger-rows", "bundle-lines"])
def test_a_withheld_kind_naming_its_kind_twice_is_non_canonical_on_every_path(link, keys):
    """The fast path reads a body's span as the spec does, up to the last kind key: an
    event whose decoded body ends elsewhere is named, whichever hash the next one links."""
    header = _v2_unit("run-k", ["run_started"], formats={})
    unit = _kind_twice("run-k/p/0", link)
    lines = [("run-k", 0, header[0])] + [("run-k/p/0", i, d) for i, d in enumerate(unit)]
    rows = [
        Record(s, seq, msgspec.json.decode(d)["kind"], d) if keys else Record(None, None, None, d)
        for s, seq, d in lines
    ]
    failure = RunChecker("run-k").check(rows)
    assert failure is not None
    assert (failure.stream, failure.seq, failure.problem) == ("run-k/p/0", 1, "non-canonical event")
