from __future__ import annotations

import gzip

import pytest

from benchledger.ledger import Ledger, LedgerError, UnusableInput, open_store
from benchledger.ledger.bundle import export_run
from benchledger.ledger.errors import ImportRefused
from benchledger.ledger.events import UnitFinishedBody
from benchledger.ledger.verified import RunUnverified, import_bundle, open_run
from tests.sample import build_run, counter_clock


@pytest.mark.parametrize("suffix", ["jsonl", "jsonl.gz"], ids=["plain", "gzip"])
def test_export_then_verify_with_the_published_root(ledger, tmp_path, suffix):
    root = build_run(ledger, "run-b", units=3)
    path = str(tmp_path / f"run.{suffix}")
    n = export_run(ledger, "run-b", path)
    assert n == ledger.run_info("run-b").events
    run = open_run(path, require_seal=False, allow_partial=False, root=root)
    assert run.bundle is not None and run.summary is not None
    assert run.bundle.root == run.summary.sealed_root == root
    if suffix.endswith("gz"):
        with gzip.open(path) as fh:
            assert fh.readline().startswith(b'{"format":"benchledger-bundle/1"')


def test_exports_are_byte_identical(ledger, tmp_path):
    build_run(ledger, "run-b")
    a, b = tmp_path / "a.jsonl.gz", tmp_path / "b.jsonl.gz"
    export_run(ledger, "run-b", str(a))
    export_run(ledger, "run-b", str(b))
    assert a.read_bytes() == b.read_bytes()


def test_verify_rejects_a_wrong_expected_root(ledger, tmp_path):
    build_run(ledger, "run-b")
    path = str(tmp_path / "run.jsonl")
    export_run(ledger, "run-b", path)
    with pytest.raises(RunUnverified) as err:
        open_run(path, require_seal=False, allow_partial=False, root="00" * 32)
    failure = err.value.failure
    assert failure.problem == "root mismatch"
    assert failure.expected == "00" * 32


def test_import_is_idempotent_and_reproduces_the_run(ledger, tmp_path):
    root = build_run(ledger, "run-b", units=3)
    path = str(tmp_path / "run.jsonl")
    export_run(ledger, "run-b", path)
    other = Ledger(open_store(str(tmp_path / "other.sqlite")))
    added = import_bundle(other, path).added
    assert added == ledger.run_info("run-b").events
    assert import_bundle(other, path).already  # the same sealed whole: nothing to add
    assert other.run_info("run-b").root == root
    assert other.verify("run-b", require_seal=True)[0] is None


def _matching_prefix(ledger: Ledger, other: Ledger) -> None:
    rows = list(ledger.store.scan("run-b"))
    other.store.append([r for r in rows if r[0] == "run-b/p00/0"][:3])  # type: ignore[misc]


def _different_history(ledger: Ledger, other: Ledger) -> None:
    w = other.new_stream("run-b/p01/1")
    w.append(UnitFinishedBody(error="a different history"))
    other.commit(w)


@pytest.mark.parametrize(
    "held", [_matching_prefix, _different_history], ids=["matching-prefix", "different-history"]
)
def test_a_bundle_of_a_run_this_ledger_holds_part_of_is_refused_whole(ledger, tmp_path, held):
    build_run(ledger, "run-b", units=2)
    path = str(tmp_path / "run.jsonl")
    export_run(ledger, "run-b", path)
    other = Ledger(open_store(str(tmp_path / "other.sqlite")), clock=counter_clock(5))
    held(ledger, other)
    before = list(other.store.scan(None))
    with pytest.raises(ImportRefused, match="without its header stream"):
        import_bundle(other, path)
    assert list(other.store.scan(None)) == before  # nothing of the bundle was written


def test_a_tampered_bundle_is_not_imported(ledger, tmp_path):
    build_run(ledger, "run-b", units=2)
    path = tmp_path / "run.jsonl"
    export_run(ledger, "run-b", str(path))
    lines = path.read_bytes().split(b"\n")
    i = next(k for k, line in enumerate(lines) if b'"episode":"teach"' in line)
    lines[i] = lines[i].replace(b'"episode":"teach"', b'"episode":"teacH"')
    path.write_bytes(b"\n".join(lines))
    other = Ledger(open_store(str(tmp_path / "other.sqlite")))
    with pytest.raises(LedgerError, match="failed verification"):
        import_bundle(other, str(path))
    assert other.store.run_ids() == []


@pytest.mark.parametrize(
    ("content", "needle"),
    [
        (b"", "empty file"),
        (b"hello\n", "not a benchledger bundle header"),
        (b'{"format":"other/9","run":"r"}\n', "unsupported bundle format"),
        (b'{"format":"benchledger-bundle/1","run":"a/b"}\n', "field run"),
    ],
    ids=["empty", "not-json", "wrong-format", "bad-run-id"],
)
def test_unusable_bundles_name_file_line_and_field(tmp_path, content, needle):
    path = tmp_path / "x.jsonl"
    path.write_bytes(content)
    with pytest.raises(UnusableInput) as info:
        open_run(str(path), require_seal=False, allow_partial=False)
    assert needle in str(info.value)
    assert str(info.value).startswith(f"{path}:1:")


def test_a_missing_bundle_is_unusable(tmp_path):
    with pytest.raises(UnusableInput, match="no such file"):
        open_run(str(tmp_path / "absent.jsonl"), require_seal=False, allow_partial=False)
