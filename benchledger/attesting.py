"""Signed in-toto attestations of a sealed run's bundle: write one, check one.

``attest(BUNDLE, OUT)`` reads the bundle through the door (it must be sealed, and signed by
the key given, the key that signed its seal), scores it as ``report`` does, and writes two
DSSE envelopes to ``OUT`` (``FILE.intoto.jsonl``, one envelope a line): the stable
``test-result/v0.1`` statement and benchledger's ``eval-result`` statement, both about the
bundle's sha256 and the run's root (``projections.attestation``).

``verify_attestation(OUT, pubkey=KEY)`` checks every envelope's signature against the
trusted keys, that both statements name the same subjects, that the bundle's bytes have
the attested sha256, and that the bundle verifies to the attested root, sealed by a
trusted key. The bundle is the subject's file name in the attestation's folder, unless
given; a name that leaves that folder is refused. docs/trust.md, "Attestations".
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import Any, Final

from benchledger.harness.settings import Settings
from benchledger.ledger import UnusableInput
from benchledger.ledger.bundle import atomic_output, file_sha256
from benchledger.ledger.errors import BenchledgerError
from benchledger.ledger.events import RunStartedEvent
from benchledger.ledger.inert import inert
from benchledger.ledger.verified import RunEvents, is_bundle
from benchledger.ledgers import LedgerLike, reader
from benchledger.projections import attestation as stmt
from benchledger.projections.errors import Refused
from benchledger.reading import PubKeys, read, trusted_keys

__all__ = ["AttestationFailed", "Attested", "CheckedAttestation", "attest", "verify_attestation"]

_MAX_ATTESTATION: Final = 8 << 20  # an attestation is a few kilobytes; refuse a flood
_CHUNK: Final = 1 << 20


class AttestationFailed(BenchledgerError):
    """An attestation that does not hold (a signature, a digest, the bundle): exit 1."""

    exit_code = 1

    def __init__(self, path: str, problem: str) -> None:
        self.path = path
        self.problem = problem
        super().__init__(f"FAILED attestation {path}: {problem}")


@dataclass(frozen=True)
class Attested:
    """What ``attest`` wrote: the file, the run, its root, the bundle's sha256, the result."""

    path: str
    run_id: str
    root: str
    bundle_sha256: str
    result: str
    key: str


@dataclass(frozen=True)
class CheckedAttestation:
    """A verified attestation: the bundle it is about, the run, its root, the result."""

    path: str
    bundle: str
    run_id: str
    root: str
    result: str
    key: str
    predicates: tuple[str, ...]


def _bundle_file(path: str) -> str:
    if not is_bundle(path) or not os.path.isfile(path):
        raise UnusableInput(
            path,
            "--format attestation attests a bundle file: export the run first "
            "(benchledger export RUN -o RUN.jsonl), then attest that file",
        )
    return path


def _units(run: RunEvents) -> list[tuple[str, bool]]:
    """Each exported unit's name (protocol#attempt) and whether it passed as a whole: the
    eval log's whole-unit score (``projections.inspect_log``), the one definition of it."""
    from benchledger.projections.inspect_log import inspect_log

    out = []
    for sample in inspect_log(run).samples:
        whole: dict[str, Any] = next(iter(sample["scores"].values()), {})
        out.append((f"{sample['id']}#{sample['epoch']}", whole.get("value") == "C"))
    return out


def _gate(bundle: str, run: RunEvents, ledger: LedgerLike, settings: Settings | None) -> Any:
    """The pre-registered gate's verdict as JSON (None when the run pre-registered none)."""
    from benchledger.projections.prereg import recorded

    prereg = recorded(run)
    if prereg is None:
        return None
    from benchledger.judging import gate

    try:
        return json.loads(gate(bundle, ledger=ledger, settings=settings).json())
    except BenchledgerError as exc:
        raise Refused(
            f"{bundle}: the run pre-registered a gate against run {prereg.baseline_run}; "
            f"its outcome is what the attestation states, and it cannot be judged here ({exc}); "
            "give --ledger holding that baseline"
        ) from None


def attest(
    bundle: str,
    output: str,
    *,
    sign_key: str | None = None,
    ledger: LedgerLike = None,
    settings: Settings | None = None,
) -> Attested:
    """Write the signed attestations of ``bundle`` (a sealed run's bundle file) to
    ``output``, signed with ``sign_key`` (else $BENCHLEDGER_SIGNING_KEY), the key that
    signed the run's seal; Refused (exit 2, nothing written) when there is no such key,
    the run is unsealed, or another key sealed it."""
    from benchledger.running import signer_of
    from benchledger.scoring import scored, summary

    conf = settings or Settings()
    signer = signer_of(sign_key, conf)
    if signer is None:
        raise Refused("--format attestation signs: give --sign-key KEY (the key that sealed "
                      "the run) or set BENCHLEDGER_SIGNING_KEY")  # fmt: skip
    _bundle_file(bundle)
    before = file_sha256(bundle)
    opener = reader(ledger, settings)
    run = read(bundle, opener, [signer.public_key], require_seal=True)
    if file_sha256(bundle) != before:
        raise UnusableInput(bundle, "changed while it was read; attest a file nobody writes")
    body = next((e.body for e, _ in run.events if isinstance(e, RunStartedEvent)), None)
    if body is None:  # a sealed, verified run always has its header; kept for the types
        raise UnusableInput(bundle, "the run has no run_started event")
    suite, card = scored([bundle], [run], opener, replay=False)
    card_summary = summary(suite, card)
    gate = _gate(bundle, run, ledger, settings)
    result = stmt.outcome(_units(run), harness_failures=card_summary.harness_failures,
                          incomplete=card_summary.incomplete, gate=gate)  # fmt: skip
    metrics = {n: m.as_json() for n, m in getattr(card, "metrics", {}).items()}
    counts = {"units": card_summary.units, "passed": card_summary.passed,
              "harness_failures": card_summary.harness_failures,
              "incomplete": card_summary.incomplete}  # fmt: skip
    subject = stmt.Subject(os.path.basename(bundle), before, run.run_id, run.root)
    statements = (
        stmt.test_result(subject, body, result),
        stmt.eval_result(subject, body, result, metrics, counts, gate),
    )
    from benchledger.ledger.dsse import encode_line, envelope

    with atomic_output(output) as out:
        for s in statements:
            out.write(encode_line(envelope(stmt.PAYLOAD_TYPE, stmt.statement_bytes(s), signer)))
    return Attested(output, run.run_id, run.root, before, result.result, signer.key_id)


def _lines(path: str) -> list[tuple[int, Any]]:
    try:
        with open(path, "rb") as f:
            data = f.read(_MAX_ATTESTATION + 1)
    except OSError as exc:
        raise UnusableInput(path, f"cannot read: {exc.strerror or exc}") from None
    if len(data) > _MAX_ATTESTATION:
        raise UnusableInput(path, f"larger than {_MAX_ATTESTATION >> 20} MiB: not an attestation")
    out = []
    for n, line in enumerate(data.splitlines(), 1):
        if not line.strip():
            continue
        try:
            out.append((n, json.loads(line)))
        except (ValueError, UnicodeDecodeError):
            raise UnusableInput(path, "not a JSON envelope", line=n) from None
    if not out:
        raise UnusableInput(path, "holds no envelope")
    return out


def _subject_bundle(path: str, subjects: list[Any]) -> tuple[str, str, str, str]:
    """(bundle file name, its sha256, run id, root) the subjects name; AttestationFailed
    when they are not the two benchledger writes."""
    if not isinstance(subjects, list) or len(subjects) != 2:
        raise AttestationFailed(path, "its subjects are not a bundle and a run")
    files = [s for s in subjects if isinstance(s, dict)
             and not str(s.get("name", "")).startswith(stmt.RUN_SUBJECT)]  # fmt: skip
    runs = [s for s in subjects if isinstance(s, dict)
            and str(s.get("name", "")).startswith(stmt.RUN_SUBJECT)]  # fmt: skip
    if len(files) != 1 or len(runs) != 1:
        raise AttestationFailed(path, "its subjects are not a bundle and a run")
    sha = (files[0].get("digest") or {}).get("sha256")
    root = (runs[0].get("digest") or {}).get("blake3")
    if not isinstance(sha, str) or not isinstance(root, str):
        raise AttestationFailed(path, "a subject lacks its digest (sha256 of the bundle, "
                                "blake3 root of the run)")  # fmt: skip
    return str(files[0]["name"]), sha, str(runs[0]["name"])[len(stmt.RUN_SUBJECT) :], root


def _resolve(path: str, name: str) -> str:
    """The bundle a subject names, in the attestation's own folder: a plain file name
    that stays there (no separator, no parent, no link out of it)."""
    shown = inert(name, value=True)
    bad = (not name or name in (".", "..") or "/" in name or "\\" in name
           or any(ord(c) < 32 or ord(c) == 127 for c in name))  # fmt: skip
    if bad:
        raise AttestationFailed(path, f"its bundle subject {shown} is not a plain file name; "
                                "give the bundle with --bundle")  # fmt: skip
    folder = os.path.dirname(os.path.abspath(path))
    target = os.path.join(folder, name)
    if os.path.dirname(os.path.realpath(target)) != os.path.realpath(folder):
        raise AttestationFailed(path, f"its bundle subject {shown} leads out of its folder; "
                                "give the bundle with --bundle")  # fmt: skip
    if not os.path.isfile(target):
        raise UnusableInput(path, f"its bundle {shown} is not beside it; give --bundle FILE")
    return target


def verify_attestation(
    path: str,
    *,
    pubkey: PubKeys,
    bundle: str | None = None,
    settings: Settings | None = None,
) -> CheckedAttestation:
    """Check ``path`` (an ``.intoto.jsonl`` file benchledger wrote) against ``bundle``
    (default: the subject's file beside it) with the trusted keys ``pubkey`` names.
    AttestationFailed (exit 1) naming the first thing that does not hold."""
    from benchledger.ledger.dsse import EnvelopeProblem, open_envelope

    keys = trusted_keys(pubkey)
    if not keys:
        raise Refused("verifying an attestation needs the signer's public key: --pubkey KEY.pub")
    statements: list[dict[str, Any]] = []
    signer = ""
    for n, document in _lines(path):
        try:
            opened = open_envelope(document, keys)
        except EnvelopeProblem as exc:
            raise AttestationFailed(path, f"line {n}: {exc}") from None
        if opened.payload_type != stmt.PAYLOAD_TYPE:
            raise AttestationFailed(path, f"line {n}: payload type is not {stmt.PAYLOAD_TYPE}")
        try:
            statement = json.loads(opened.payload)
        except (ValueError, UnicodeDecodeError):
            raise AttestationFailed(path, f"line {n}: the signed payload is not JSON") from None
        if not isinstance(statement, dict) or statement.get("_type") != stmt.STATEMENT_TYPE:
            raise AttestationFailed(path, f"line {n}: not an in-toto Statement v1")
        statements.append(statement)
        signer = opened.key
    subjects = {json.dumps(s.get("subject"), sort_keys=True) for s in statements}
    if len(subjects) != 1:
        raise AttestationFailed(path, "its statements are about different subjects")
    name, sha, run_id, root = _subject_bundle(path, statements[0]["subject"])
    target = bundle or _resolve(path, name)
    if file_sha256(target) != sha:
        raise AttestationFailed(path, f"the bundle {target} does not have the attested sha256")
    try:
        run = read(target, reader(None, settings), keys, require_seal=True)
    except BenchledgerError as exc:
        raise AttestationFailed(path, f"the bundle {target} does not verify: {exc}") from None
    if run.run_id != run_id or run.root != root:
        raise AttestationFailed(path, f"the bundle {target} holds run {run.run_id} root "
                                f"{run.root}, not the attested run and root")  # fmt: skip
    kinds = tuple(str(s.get("predicateType", "")) for s in statements)
    results = [s.get("predicate", {}).get("result") for s in statements
               if s.get("predicateType") == stmt.PREDICATE_TEST_RESULT]  # fmt: skip
    result = str(results[0]) if results else ""
    return CheckedAttestation(path, target, run_id, root, result, signer, kinds)
