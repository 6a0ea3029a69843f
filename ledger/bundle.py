"""Bundles: a run as portable JSONL (gzip optional) — a header line, then canonical events.

Line 1 is the header ``{"format":"benchledger-bundle/1","root":...,"run":...}``; every
further line is one event's canonical bytes, ordered by stream name then seq. Readers
stream the file, so verifying a bundle takes constant memory.
"""

from __future__ import annotations

import gzip
import io
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from typing import IO, Any

import msgspec

from ledger.chain import Failure, Record, RunChecker, Summary, genesis, link_hash
from ledger.codec import canonical_json, decode_link
from ledger.errors import BundleConflict, LedgerError, UnusableInput
from ledger.events import RunSealed as RunSealedEvent
from ledger.events import StreamHead
from ledger.ledger import Ledger, check_run_id
from ledger.merkle import inclusion_proof, verify_inclusion

FORMAT = "benchledger-bundle/1"
AUDIT_FORMAT = "benchledger-audit/1"
REDACTED_FORMAT = "benchledger-redacted/1"  # some events withheld: ledger/redaction.py
_BATCH = 1000


class BundleHeader(msgspec.Struct, frozen=True, omit_defaults=True):
    format: str
    run: str
    root: str = ""
    proofs: dict[str, Any] = {}
    withheld: list[str] = []  # redacted bundles: the rules that chose the withheld events


def _open_read(path: str) -> IO[bytes]:
    try:
        raw = open(path, "rb")  # noqa: SIM115 - returned to the caller's with-block
    except FileNotFoundError:
        raise UnusableInput(path, "no such file") from None
    except IsADirectoryError:
        raise UnusableInput(path, "is a directory, not a bundle file") from None
    except OSError as exc:
        raise UnusableInput(path, exc.strerror or str(exc)) from None
    magic = raw.peek(2)[:2] if hasattr(raw, "peek") else b""
    if magic == b"\x1f\x8b":
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def read_header(path: str) -> BundleHeader:
    """The bundle's header line; UnusableInput when the file is not a bundle."""
    with _open_read(path) as fh:
        return _header(path, fh)


def _header(path: str, fh: IO[bytes]) -> BundleHeader:
    try:
        first = fh.readline()
    except (OSError, EOFError) as exc:
        what = "not readable gzip data" if isinstance(fh, gzip.GzipFile) else "unreadable"
        raise UnusableInput(path, f"{what} ({exc})", line=1) from None
    if not first.strip():
        raise UnusableInput(path, "empty file, not a benchledger bundle", line=1)
    try:
        header = msgspec.json.decode(first, type=BundleHeader)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UnusableInput(path, f"not a benchledger bundle header: {exc}", line=1) from None
    if header.format not in (FORMAT, AUDIT_FORMAT, REDACTED_FORMAT):
        raise UnusableInput(
            path,
            f"field format: unsupported bundle format {header.format!r} (want {FORMAT})",
            line=1,
        )
    try:
        check_run_id(header.run)
    except ValueError as exc:
        raise UnusableInput(path, f"field run: {exc}", line=1) from None
    return header


def records(path: str) -> Iterator[Record]:
    """The bundle's events as records (stream, seq and kind left to the bytes)."""
    with _open_read(path) as fh:
        _header(path, fh)
        lineno = 1
        try:
            for line in fh:
                lineno += 1
                data = line.rstrip(b"\n")
                if data:
                    yield Record(None, None, None, data)
        except (OSError, EOFError, gzip.BadGzipFile) as exc:
            raise UnusableInput(path, f"unreadable after line {lineno} ({exc})") from None


def verify_bundle(
    path: str, root: str | None = None
) -> tuple[Failure | None, Summary, BundleHeader]:
    """Check every link of a bundle, its sealed root, and ``root`` when given."""
    header = read_header(path)
    if header.format == REDACTED_FORMAT:
        from ledger.redaction import verify_redacted

        return verify_redacted(path, root)[:3]
    checker = RunChecker(header.run, require_seal=bool(root) or bool(header.root))
    failure = checker.check(records(path))
    summary = checker.summary
    if failure is None and header.root and summary.sealed_root != header.root:
        failure = Failure(
            header.run,
            -1,
            "root mismatch",
            "bundle header root differs from the seal",
            expected=header.root,
            found=summary.sealed_root,
        )
    if failure is None and root and root.lower() != summary.sealed_root:
        failure = Failure(
            header.run,
            -1,
            "root mismatch",
            "the run's sealed root is not the root you expected",
            expected=root.lower(),
            found=summary.sealed_root,
        )
    return failure, summary, header


@contextmanager
def atomic_output(path: str) -> Iterator[IO[bytes]]:
    """Write ``path`` through a temp file renamed into place; nothing partial is left.

    The file gets the mode a plain ``open`` would give it (0666 less the umask), and an
    unwritable place (a folder, no permission, a full disk) is UnusableInput, one line.
    """
    directory = os.path.dirname(os.path.abspath(path))
    if os.path.isdir(path):
        raise UnusableInput(path, "is a directory; give the name of a file to write")
    if not os.path.isdir(directory):
        raise UnusableInput(path, f"directory {directory} does not exist")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".benchledger-", dir=directory)
    except OSError as exc:
        raise UnusableInput(path, f"cannot write in {directory}: {exc.strerror or exc}") from None
    try:
        with os.fdopen(fd, "wb") as raw:
            if path.endswith(".gz"):
                # mtime=0 keeps gzip output byte-identical between exports.
                with gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as gz:
                    yield gz  # type: ignore[misc]
            else:
                buf = io.BufferedWriter(raw, buffer_size=1 << 20)
                yield buf
                buf.flush()
        os.chmod(tmp, 0o666 & ~_umask())  # mkstemp's 0600 is for the temp file only
        os.replace(tmp, path)
    except BaseException as exc:
        if os.path.exists(tmp):
            os.unlink(tmp)
        if isinstance(exc, OSError):
            raise UnusableInput(path, f"cannot write: {exc.strerror or exc}") from None
        raise


def _umask() -> int:
    """The process umask (read by setting it, then putting it back)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def export_run(
    ledger: Ledger,
    run_id: str,
    path: str,
    *,
    proofs: dict[str, Any] | None = None,
    streams: set[str] | None = None,
) -> int:
    """Write ``run_id`` (or just ``streams`` of it) as a bundle; return events written."""
    info = ledger.run_info(run_id)
    header = BundleHeader(
        format=AUDIT_FORMAT if proofs else FORMAT, run=run_id, root=info.root, proofs=proofs or {}
    )
    n = 0
    with atomic_output(path) as out:
        out.write(canonical_json(header) + b"\n")
        for stream, _seq, _kind, data in ledger.store.scan(run_id):
            if streams is not None and stream not in streams:
                continue
            out.write(bytes(data) + b"\n")
            n += 1
    return n


def export_audit(ledger: Ledger, run_id: str, streams: set[str], path: str) -> int:
    """Write the cited ``streams`` (and the header stream) whole, with inclusion proofs."""
    info = ledger.run_info(run_id)
    if not info.root:
        raise LedgerError(f"run {run_id!r} is not sealed; audit bundles prove against a root")
    sealed = next(e for e, _ in ledger.events(run_id, run_id) if isinstance(e, RunSealedEvent))
    heads = list(sealed.body.heads)
    index = {h.stream: i for i, h in enumerate(heads)}
    wanted = set(streams) | {run_id}
    proofs = {
        s: {"index": index[s], "size": len(heads), "path": inclusion_proof(heads, index[s])}
        for s in sorted(wanted)
    }
    return export_run(ledger, run_id, path, proofs=proofs, streams=wanted)


def import_bundle(ledger: Ledger, path: str) -> int:
    """Add a verified bundle's events that the ledger lacks; return how many were added.

    Idempotent. A bundle that fails verification or disagrees with stored events is
    refused whole: nothing is written.
    """
    if read_header(path).format == REDACTED_FORMAT:
        raise UnusableInput(path, "a redacted bundle withholds events; it cannot be imported")
    failure, summary, header = verify_bundle(path)
    if failure is not None:
        raise LedgerError(f"{path}: bundle failed verification: {failure}; nothing was imported")
    if header.format == AUDIT_FORMAT:
        raise UnusableInput(path, "an audit bundle holds only some streams; it cannot be imported")
    sealed_len = {h.stream: h.length for h in summary.heads}
    stored = {r.stream: (r.seq or 0) + 1 for r in ledger.store.heads(header.run)}
    # Pass 1: compare the overlap with what is stored, before writing anything.
    current: str | None = None
    stored_rows: list[Record] = []
    for rec in records(path):
        link = decode_link(rec.data)
        if link.stream != current:
            current = link.stream
            have = stored.get(current, 0)
            if have > sealed_len.get(current, have) + (1 if current == header.run else 0):
                raise BundleConflict(
                    current, sealed_len[current], "(stored events past the seal)", "(sealed end)"
                )
            stored_rows = ledger.store.read_stream(current) if have else []
        if link.seq < len(stored_rows):
            mine = bytes(stored_rows[link.seq].data)
            if mine != rec.data:
                raise BundleConflict(link.stream, link.seq, link_hash(mine), link_hash(rec.data))

    def batches() -> Iterator[list[Record]]:
        batch: list[Record] = []
        for rec in records(path):
            link = decode_link(rec.data)
            if link.seq >= stored.get(link.stream, 0):
                batch.append(Record(link.stream, link.seq, link.kind, rec.data))
                if len(batch) >= _BATCH:
                    yield batch
                    batch = []
        if batch:
            yield batch

    return ledger.store.append_all(batches())


def _check_stream(stream: str, rows: list[bytes]) -> StreamHead:
    """One stream's chain on its own (dense seqs from 0, prev links, refs); its Merkle leaf."""
    prev = genesis(stream)
    for seq, data in enumerate(rows):
        try:
            ev = decode_link(data)
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            raise _Bad(Failure(stream, seq, "undecodable event", str(exc))) from None
        if ev.stream != stream or ev.seq != seq:
            raise _Bad(Failure(stream, seq, "gap", f"expected seq {seq}, found seq {ev.seq}"))
        if ev.prev != prev:
            detail = "prev is not the hash of the event before"
            raise _Bad(Failure(stream, seq, "broken link", detail, expected=prev, found=ev.prev))
        if any(not 0 <= r < seq for r in ev.refs):
            raise _Bad(Failure(stream, seq, "bad ref", "a ref is not an earlier seq"))
        prev = link_hash(data)
    if not rows:
        raise _Bad(Failure(stream, 0, "empty stream", "the bundle holds no events of it"))
    return StreamHead(stream, len(rows), prev)


class _Bad(Exception):
    def __init__(self, failure: Failure) -> None:
        self.failure = failure


def _prove(name: str, rows: list[bytes], proof: Any, run: str, root: str) -> None:
    if not isinstance(proof, dict):
        raise _Bad(Failure(name, 0, "no proof", "the bundle carries no inclusion proof for it"))
    if name == run and decode_link(rows[-1]).kind == "run_sealed":
        _check_stream(name, rows)
        sealed = msgspec.json.decode(rows[-1], type=RunSealedEvent)
        if sealed.body.root != root:
            detail = "run_sealed names another root"
            raise _Bad(Failure(name, len(rows) - 1, "root mismatch", detail,
                               expected=root, found=sealed.body.root))  # fmt: skip
        rows = rows[:-1]  # the header's leaf is its head just before run_sealed
    head = _check_stream(name, rows)
    try:
        ok = verify_inclusion(head, int(proof["index"]), int(proof["size"]), list(proof["path"]),
                              root)  # fmt: skip
    except (KeyError, TypeError, ValueError):
        ok = False
    if not ok:
        detail = "the stream's head is not included in the run root"
        raise _Bad(Failure(name, head.length - 1, "not in root", detail,
                           expected=root, found=head.head))  # fmt: skip


def verify_audit_bundle(
    path: str, root: str | None = None
) -> tuple[Failure | None, int, BundleHeader]:
    """Check an audit bundle offline: each cited stream's chain and its inclusion proof.

    Returns (first failure or None, streams proven, header).
    """
    header = read_header(path)
    if header.format != AUDIT_FORMAT:
        raise UnusableInput(path, "field format: not an audit bundle", line=1)
    want = (root or header.root).lower()
    streams: dict[str, list[bytes]] = {}
    for n, rec in enumerate(records(path), start=2):
        try:
            name = decode_link(rec.data).stream
        except (msgspec.DecodeError, msgspec.ValidationError) as exc:
            return Failure(header.run, -1, "undecodable event", f"line {n}: {exc}"), 0, header
        streams.setdefault(name, []).append(bytes(rec.data))
    proven = 0
    try:
        if root and header.root and want != header.root:
            detail = "the bundle names another root"
            raise _Bad(Failure(header.run, -1, "root mismatch", detail,
                               expected=want, found=header.root))  # fmt: skip
        if header.run not in streams:
            raise _Bad(Failure(header.run, 0, "missing header stream", "no run_sealed to check"))
        for name, rows in sorted(streams.items()):
            _prove(name, rows, header.proofs.get(name), header.run, want)
            proven += 1
    except _Bad as bad:
        return bad.failure, proven, header
    return None, proven, header
