"""Bundles: a run as portable JSONL (gzip optional) — a header line, then canonical events.

Line 1 is the header ``{"format":"benchledger-bundle/1","root":...,"run":...}``; every
further line is one event's canonical bytes, ordered by stream name then seq. Readers
stream the file, so verifying a bundle takes constant memory.

Three kinds of bundle, all checked by the one chain checker (ledger/checker.py): a full run
(``benchledger-bundle/1``), an audit bundle holding only some streams with their inclusion
proofs (``benchledger-audit/1``, checked ``partial``), and a redacted bundle whose withheld
events are placeholders (``benchledger-redacted/1``; what a placeholder is and what may be
withheld: ledger/redaction.py).
"""

from __future__ import annotations

import gzip
import hashlib
import io
import os
import sys
import tempfile
import zlib
from collections.abc import Generator, Iterable, Iterator
from contextlib import contextmanager
from typing import IO, Any, Final, cast

import msgspec

from benchledger.ledger.chain import Record, link_hash
from benchledger.ledger.checker import RunChecker
from benchledger.ledger.codec import canonical_json, decode_link
from benchledger.ledger.errors import LedgerError, UnusableInput
from benchledger.ledger.events import NEVER_WITHHELD, WITHHOLDABLE, RunSealedEvent
from benchledger.ledger.ledger import Ledger, check_run_id
from benchledger.ledger.merkle import inclusion_proof, verify_inclusion
from benchledger.ledger.redaction import (
    Copy,
    CopyFinder,
    Placeholder,
    Selection,
    placeholder_bytes,
    read_placeholder,
    rule_of,
)
from benchledger.ledger.verdict import Failure, Fault, Summary

FORMAT = "benchledger-bundle/1"
AUDIT_FORMAT = "benchledger-audit/1"
REDACTED_FORMAT = "benchledger-redacted/1"  # some events withheld: ledger/redaction.py
FORMATS = (FORMAT, AUDIT_FORMAT, REDACTED_FORMAT)

# Reading is bounded (docs/ledger-format.md, "Bundles"), so a crafted file cannot grow a
# reader's memory or time without limit. A line, the header included, holds at most
# MAX_LINE bytes besides its newline: 4x the largest event a run should record (the
# recorder bounds none; a model request of a 1M-token context plus a 4 MiB tool result,
# JSON-escaped), and the inclusion proofs of ~50,000 streams in a header. Lines are read
# with readline(limit), so a longer line is found holding no more than the limit.
MAX_LINE: Final = 64 << 20
# gzip input may expand to GZIP_RATIO times the file's size (real bundles: 3-15x; deflate
# reaches ~1030x), and to GZIP_FLOOR whatever its size, so a bomb costs time in proportion
# to its compressed size. A genuine bundle past it still reads once gunzipped: plain files
# are read as they are (their size is the user's own).
GZIP_RATIO: Final = 200
GZIP_FLOOR: Final = 256 << 20


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
        gz = gzip.GzipFile(fileobj=raw, mode="rb")
        gz.myfileobj = raw  # type: ignore[assignment]  # so closing it closes the file too
        return gz  # type: ignore[return-value]
    return raw


def read_header(path: str) -> BundleHeader:
    """The bundle's header line; UnusableInput when the file is not a bundle."""
    with _open_read(path) as fh:
        return _header(path, fh)


def _header(path: str, fh: IO[bytes]) -> BundleHeader:
    try:
        first = fh.readline(MAX_LINE + 1)
    except (OSError, EOFError, zlib.error) as exc:
        what = "not readable gzip data" if isinstance(fh, gzip.GzipFile) else "unreadable"
        raise UnusableInput(path, f"{what} ({exc})", line=1) from None
    if len(first) > MAX_LINE and first[-1:] != b"\n":
        raise _too_long(path, 1)
    if not first.strip():
        raise UnusableInput(path, "empty file, not a benchledger bundle", line=1)
    try:
        header = msgspec.json.decode(first, type=BundleHeader)
    except (msgspec.DecodeError, msgspec.ValidationError) as exc:
        raise UnusableInput(path, f"not a benchledger bundle header: {exc}", line=1) from None
    if header.format not in FORMATS:
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


def records(path: str, header: list[BundleHeader] | None = None) -> Iterator[Record]:
    """The bundle's events as records (stream, seq and kind left to the bytes); the header
    line read on the way goes into ``header`` when given (``read_bundle``)."""
    with _open_read(path) as fh:
        got = _header(path, fh)
        if header is not None:
            header.append(got)
        lineno = 1
        blank = 0  # a blank line's number: allowed only last (a flood of them costs time)
        limit, expanded = _gzip_limit(fh)
        readline, cap = fh.readline, MAX_LINE + 1
        try:
            while line := readline(cap):
                lineno += 1
                expanded += len(line)
                if expanded > limit:
                    raise _too_expanded(path, lineno, limit, fh)
                if len(line) > MAX_LINE and line[-1:] != b"\n":
                    raise _too_long(path, lineno)
                if blank:
                    raise UnusableInput(
                        path, "a blank line; only the last line may be blank", line=blank
                    )
                if line == b"\n":
                    blank = lineno
                    continue
                yield Record(None, None, None, line.rstrip(b"\n"))
        except (OSError, EOFError, zlib.error) as exc:  # BadGzipFile is an OSError
            raise UnusableInput(path, f"unreadable after line {lineno} ({exc})") from None


def _gzip_limit(fh: IO[bytes]) -> tuple[int, int]:
    """(how far ``fh`` may expand, how far it has) in bytes; plain files are not capped."""
    if not isinstance(fh, gzip.GzipFile):
        return sys.maxsize, 0
    return max(GZIP_FLOOR, GZIP_RATIO * os.fstat(fh.fileno()).st_size), fh.tell()


def _too_long(path: str, lineno: int) -> UnusableInput:
    return UnusableInput(
        path,
        f"line {lineno} is longer than the {MAX_LINE}-byte maximum of a bundle line",
        line=lineno,
    )


def _too_expanded(path: str, lineno: int, limit: int, fh: IO[bytes]) -> UnusableInput:
    size = os.fstat(fh.fileno()).st_size
    return UnusableInput(
        path,
        f"the gzip data expands past {limit} bytes, the most a bundle may ({GZIP_RATIO} times "
        f"the file's {size} bytes, at least {GZIP_FLOOR}): a gzip bomb? (gunzip a genuine one)",
        line=lineno,
    )


@contextmanager
def read_bundle(path: str) -> Iterator[tuple[BundleHeader, Iterator[Record]]]:
    """One open of ``path``: its header, then its records, each line read once.

    Every check of a bundle reads it through this, so what is checked is what was read: a
    file that changes between opens (a FIFO, a network mount) is never read twice.
    """
    got: list[BundleHeader] = []
    recs = cast(Generator[Record, None, None], records(path, got))  # closed below
    try:
        first = next(recs, None)  # opens the file and reads the header line
        yield got[0], _then(first, recs)
    finally:
        recs.close()


def _then(first: Record | None, rest: Iterator[Record]) -> Iterator[Record]:
    if first is not None:
        yield first
        yield from rest


def check_records(
    header: BundleHeader,
    recs: Iterable[Record],
    root: str | None = None,
    *,
    require_seal: bool = False,
    whole: bool = False,
) -> tuple[Failure | None, Summary]:
    """Check a bundle's records (its ``header`` already read) as what its format says it is:
    a full run (``check_full``), a redacted one (``check_redacted``) or an audit bundle
    (``check_audit``); with ``whole`` an audit bundle is checked as a full run (and fails:
    streams are missing). The one dispatch on the format, behind ``verified.open_run``."""
    if header.format == AUDIT_FORMAT and not whole:
        return check_audit(header, recs, root)
    if header.format == REDACTED_FORMAT:
        return check_redacted(header, recs, root)
    return check_full(header, recs, root, require_seal=require_seal)


def check_full(
    header: BundleHeader,
    recs: Iterable[Record],
    root: str | None = None,
    *,
    require_seal: bool = False,
) -> tuple[Failure | None, Summary]:
    """Check every link of a whole run's records, its seal, and ``root`` when given (a
    header that names a root must be sealed with it)."""
    checker = RunChecker(header.run, require_seal=require_seal or bool(root) or bool(header.root))
    failure = checker.check(recs)
    return _roots(failure, checker.summary, header, root), checker.summary


def _roots(
    failure: Failure | None, summary: Summary, header: BundleHeader, root: str | None
) -> Failure | None:
    """The first failure, else whether the header's root and ``root`` are the seal's."""
    if failure is not None:
        return failure
    for want, what in ((header.root, "the bundle header's root"), (root, "the root you expected")):
        if want and want.lower() != summary.sealed_root:
            return Failure(
                header.run,
                -1,
                Fault.ROOT_MISMATCH,
                f"the sealed root is not {what}",
                expected=want.lower(),
                found=summary.sealed_root,
            )
    return None


def file_sha256(path: str) -> str:
    """The sha256 of a file's bytes (a bundle's published digest), read in chunks;
    UnusableInput when it cannot be read."""
    digest = hashlib.sha256()
    try:
        with open(path, "rb") as f:
            while chunk := f.read(1 << 20):
                digest.update(chunk)
    except OSError as exc:
        raise UnusableInput(path, f"cannot read: {exc.strerror or exc}") from None
    return digest.hexdigest()


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
    max_line: int = MAX_LINE,
) -> int:
    """Write ``run_id`` (or just ``streams`` of it) as a bundle; return events written.

    A line longer than ``max_line`` (what readers accept) refuses the export, nothing
    written: EventTooLong names the event.
    """
    info = ledger.run_info(run_id)
    header = BundleHeader(
        format=AUDIT_FORMAT if proofs else FORMAT, run=run_id, root=info.root, proofs=proofs or {}
    )
    n = 0
    with atomic_output(path) as out:
        out.write(_bounded(path, run_id, "", -1, canonical_json(header), max_line))
        for stream, seq, _kind, data in ledger.store.scan(run_id):
            if streams is not None and stream not in streams:
                continue
            out.write(_bounded(path, run_id, stream, seq, bytes(data), max_line))
            n += 1
    return n


class EventTooLong(UnusableInput):
    """An event (or header) longer than a bundle line may be: written, no reader could
    read the bundle back (``MAX_LINE``), so the export is refused."""

    def __init__(self, path: str, run_id: str, stream: str, seq: int, size: int, limit: int):
        self.run_id, self.stream, self.seq, self.size, self.limit = run_id, stream, seq, size, limit
        what = f"stream {stream!r} seq {seq}: the event" if stream else "the header line"
        super().__init__(
            path,
            f"run {run_id!r} {what} is {size} bytes, longer than the {limit}-byte maximum of a "
            "bundle line, so no reader could read the bundle back; nothing was written",
        )


def _bounded(path: str, run_id: str, stream: str, seq: int, data: bytes, limit: int) -> bytes:
    """``data`` as a bundle line (with its newline); EventTooLong past ``limit`` bytes."""
    if len(data) > limit:
        raise EventTooLong(path, run_id, stream, seq, len(data), limit)
    return data + b"\n"


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


def check_audit(
    header: BundleHeader, recs: Iterable[Record], root: str | None = None
) -> tuple[Failure | None, Summary]:
    """Check an audit bundle's records, read ``partial`` by the one chain checker: the
    header stream whole, ending in the run's one seal, and every stream it holds whole,
    each matching the seal's length and head for it. Each stream's head must also be
    proven, by its inclusion proof, in the root of that same seal, which must be the
    header's root and ``root`` when given."""
    checker = RunChecker(header.run, partial=True)
    summary = checker.summary
    failure = _roots(checker.check(recs), summary, header, root)
    if failure is not None:
        return failure, summary
    for head in summary.heads:
        proof = header.proofs.get(head.stream)
        if not isinstance(proof, dict):
            return (
                Failure(head.stream, 0, Fault.NO_PROOF, "the bundle carries no inclusion proof"),
                summary,
            )
        try:
            index, size, steps = int(proof["index"]), int(proof["size"]), list(proof["path"])
            ok = verify_inclusion(head, index, size, steps, summary.sealed_root)
        except (KeyError, TypeError, ValueError):
            ok = False
        if not ok:
            return (
                Failure(
                    head.stream,
                    head.length - 1,
                    Fault.NOT_IN_ROOT,
                    "the stream's head is not included in the sealed root",
                    expected=summary.sealed_root,
                    found=head.head,
                ),
                summary,
            )
    return None, summary


# -- redacted bundles ----------------------------------------------------------------------


def _redactable(ledger: Ledger, run_id: str, selection: Selection) -> str:
    """The sealed root of ``run_id``; UnusableInput if it is unsealed or a glob matches
    none of its streams."""
    info = ledger.run_info(run_id)
    if not info.root:
        raise UnusableInput(
            run_id, "run is not sealed; a redacted bundle is checked against the sealed root"
        )
    names = [h.stream for h in ledger.store.heads(run_id) if h.stream is not None]
    for glob in selection.streams:
        if not any(Selection(streams=(glob,))._stream_matches(run_id, s) for s in names):
            raise UnusableInput(glob, f"--withhold-stream matches no stream of run {run_id}")
    return info.root


def export_redacted(
    ledger: Ledger, run_id: str, path: str, selection: Selection, max_line: int = MAX_LINE
) -> tuple[int, dict[str, int]]:
    """Write sealed ``run_id`` with the selected events as placeholders.

    Returns (lines written, withheld events per kind). Refuses (UnusableInput, nothing
    written) an unsealed run, a stream glob that matches no stream of the run, or a line
    longer than ``max_line`` (EventTooLong). A run in event format 1 gets format-1
    placeholders, whose envelope no hash binds.
    """
    header = BundleHeader(
        format=REDACTED_FORMAT,
        run=run_id,
        root=_redactable(ledger, run_id, selection),
        withheld=selection.rules(),
    )
    n = 0
    withheld: dict[str, int] = {}
    with atomic_output(path) as out:
        out.write(_bounded(path, run_id, "", -1, canonical_json(header), max_line))
        for stream, seq, kind, data in ledger.store.scan(run_id):
            raw = bytes(data)
            if selection.selects(run_id, stream, kind):
                raw = placeholder_bytes(raw)
                withheld[kind] = withheld.get(kind, 0) + 1
            out.write(_bounded(path, run_id, stream, seq, raw, max_line))
            n += 1
    return n, withheld


def find_copies(
    ledger: Ledger, run_id: str, selection: Selection, withhold_copies: bool = False
) -> tuple[Selection, list[Copy]]:
    """The shown events of a redaction of ``run_id`` that hold copies of withheld text.

    Returns (the selection to write, the copies it still shows). With ``withhold_copies``
    the streams of copies in withholdable events are added to the selection, again until
    what they withhold is copied nowhere withholdable; copies in kinds that are never
    withheld (a decision's reason, an episode's final answer) stay, for the caller to name.
    Two reads of the run per round; the memory is the index of the withheld text. Refuses
    what ``export_redacted`` refuses, first.
    """
    _redactable(ledger, run_id, selection)
    while True:
        finder = CopyFinder()
        for stream, _seq, kind, data in ledger.store.scan(run_id):
            if selection.selects(run_id, stream, kind):
                finder.add(msgspec.json.decode(bytes(data)).get("body"))
        copies: list[Copy] = []
        if finder:
            for stream, seq, kind, data in ledger.store.scan(run_id):
                if not selection.selects(run_id, stream, kind):
                    n = finder.count(bytes(data))
                    if n:
                        copies.append(Copy(stream, seq, kind, n))
        more = {c.stream for c in copies if c.kind in WITHHOLDABLE}
        grown = selection.with_streams(more) if withhold_copies else selection
        if grown == selection:  # nothing more to withhold: these copies stay shown
            return selection, copies
        selection = grown


def check_redacted(
    header: BundleHeader, recs: Iterable[Record], root: str | None = None
) -> tuple[Failure | None, Summary]:
    """Check a redacted bundle's records: the chain through every placeholder, the heads,
    the root, and that its placeholders are exactly what its header's rules withhold. In
    event format 2 every placeholder's envelope is proven; ``summary.unbound`` counts
    format-1 ones, ``summary.withheld`` the placeholders seen."""
    try:
        rule = rule_of(header.run, header.withheld)
    except ValueError as exc:
        never = any(r.removeprefix("kind:") in NEVER_WITHHELD for r in header.withheld)
        problem = Fault.NOT_WITHHOLDABLE if never else Fault.BAD_RULE
        return Failure(header.run, -1, problem, f"bundle header: {exc}"), Summary()
    checker = RunChecker(header.run, require_seal=True, redacted=True, rule=rule)
    failure = _roots(checker.check(recs), checker.summary, header, root)
    return failure, checker.summary


def verify_revealing(
    redacted: Iterable[bytes], full: str, root: str
) -> tuple[Failure | None, BundleHeader, Failure | None, int]:
    """Check ``full`` against ``root`` and reveal the ``redacted`` lines with it, in one read.

    Returns (the full bundle's first failure, its header, the first reveal mismatch, the
    placeholders matched); the reveal counts only when the full bundle verified.
    """
    lines = Revealing(redacted)
    with read_bundle(full) as (header, recs):
        failure, _ = check_records(header, lines.feed(recs), root, whole=True)
    mismatch, matched = lines.result()
    return failure, header, mismatch, matched


class Revealing:
    """Redacted lines compared, in step, with a full bundle's records as they are read."""

    def __init__(self, redacted: Iterable[bytes]) -> None:
        self._redacted = iter(redacted)
        self._failure: Failure | None = None
        self._matched = 0

    def feed(self, full: Iterable[Record]) -> Iterator[Record]:
        """Pass ``full``'s records on unchanged, comparing each with the next redacted line."""
        for rec in full:
            if self._failure is None:
                self._failure = self._compare(next(self._redacted, None), rec.data)
            yield rec

    def _compare(self, data: bytes | None, full: bytes) -> Failure | None:
        if data is None:
            return Failure("", -1, Fault.REVEAL_MISMATCH, "the full bundle has more lines")
        ph = read_placeholder(data)
        at = located(data, ph)
        if ph is None:
            if data != full:
                return Failure(*at, Fault.REVEAL_MISMATCH, "a shown event differs")
            return None
        if read_placeholder(full) is not None:
            detail = "the full bundle withholds this event too"
            return Failure(*at, Fault.REVEAL_MISMATCH, detail)
        if placeholder_bytes(full) != data:
            return Failure(
                *at,
                Fault.REVEAL_MISMATCH,
                "the full event does not match its placeholder",
                expected=ph.hash,
                found=link_hash(full),
            )
        self._matched += 1
        return None

    def result(self) -> tuple[Failure | None, int]:
        """(first mismatch or None, placeholders matched), once the full bundle was read."""
        if self._failure is None:
            rest = next(self._redacted, None)
            if rest is not None:
                at = located(rest, read_placeholder(rest))
                self._failure = Failure(*at, Fault.REVEAL_MISMATCH, "the full bundle ends early")
        return self._failure, self._matched


def located(data: bytes, ph: Placeholder | None = None) -> tuple[str, int]:
    """Where a bundle line is (stream, seq): its placeholder's, else its envelope's, else
    ``("?", -1)`` when not even the envelope decodes."""
    if ph is not None:
        return ph.stream, ph.seq
    try:
        link = decode_link(data)
    except msgspec.DecodeError:
        return "?", -1
    return link.stream, link.seq
