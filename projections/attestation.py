"""A sealed run as in-toto attestations: the Statements, built from what the door read.

Two Statements (in-toto Attestation Framework v1), each signed on its own line of a
``.intoto.jsonl`` file (``ledger.dsse``), both about the same two subjects:

- the bundle file, by its sha256 (what a third party downloads), and
- the run, by its run root (``benchledger-run:<id>``, digest ``blake3``: the Merkle root
  the seal records; docs/ledger-format.md).

The first has the stable predicate ``test-result/v0.1``: ``result`` (PASSED when every
counted unit passed and none failed in the harness or was left unfinished; with a
pre-registered gate, the gate's outcome), ``configuration`` (the protocol set, the dataset
file, platform, agent and judge as resource descriptors) and the units by outcome. The
second has benchledger's own predicate (``PREDICATE_RESULT``, docs/trust.md): every metric
of the card with its interval and method, the unit counts, the pre-registration and the
gate's verdict. Everything here is a pure function of its arguments.
"""

from __future__ import annotations

import base64
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.ledger.codec import canonical_json
from benchledger.ledger.events import RunStartedBody

STATEMENT_TYPE: Final = "https://in-toto.io/Statement/v1"
PAYLOAD_TYPE: Final = "application/vnd.in-toto+json"
PREDICATE_TEST_RESULT: Final = "https://in-toto.io/attestation/test-result/v0.1"
PREDICATE_RESULT: Final = "https://benchledger.dev/attestation/eval-result/v1"
RUN_SUBJECT: Final = "benchledger-run:"
# The digest names of what benchledger hashes its own way (in-toto allows names of one's
# own): the protocol set's content identity is a domain-separated BLAKE3 (docs/protocols.md),
# not the BLAKE3 of a file, so it is not labelled plain "blake3".
PROTOCOL_SET_DIGEST: Final = "benchledger-protocol-set-v1"
PASSED: Final = "PASSED"
FAILED: Final = "FAILED"
WARNED: Final = "WARNED"


class Subject(NamedTuple):
    """What both statements are about: the bundle file and the run it holds."""

    bundle_name: str
    bundle_sha256: str
    run_id: str
    root: str

    def as_json(self) -> list[dict[str, Any]]:
        return [
            {"name": self.bundle_name, "digest": {"sha256": self.bundle_sha256}},
            {"name": RUN_SUBJECT + self.run_id, "digest": {"blake3": self.root}},
        ]


class Outcome(NamedTuple):
    """The run's outcome as the attestation states it."""

    result: str  # PASSED, WARNED or FAILED
    why: str
    passed: tuple[str, ...]  # unit names (protocol#attempt)
    failed: tuple[str, ...]
    warned: tuple[str, ...] = ()


def outcome(
    units: Sequence[tuple[str, bool]],
    *,
    harness_failures: int,
    incomplete: int,
    gate: Mapping[str, Any] | None = None,
) -> Outcome:
    """PASSED when every unit passed and none failed in the harness or is unfinished;
    with a pre-registered ``gate`` (its verdict's JSON), its outcome decides: passed is
    PASSED, undecided WARNED, failed FAILED."""
    passed = tuple(sorted(n for n, ok in units if ok))
    failed = tuple(sorted(n for n, ok in units if not ok))
    if gate is not None:
        word = str(gate.get("outcome", "failed"))
        result = {"passed": PASSED, "undecided": WARNED}.get(word, FAILED)
        return Outcome(result, str(gate.get("verdict", word)), passed, failed)
    if harness_failures or incomplete:
        why = f"{harness_failures} harness failure(s), {incomplete} unfinished unit(s)"
        return Outcome(FAILED, why, passed, failed)
    if failed:
        return Outcome(FAILED, f"{len(failed)} of {len(units)} units failed", passed, failed)
    return Outcome(PASSED, f"all {len(units)} units passed", passed, failed)


def _content(value: object) -> str:
    return base64.b64encode(canonical_json(value)).decode("ascii")


def configuration(body: RunStartedBody) -> list[dict[str, Any]]:
    """The run's configuration as resource descriptors: the protocol set by its content
    identity, the dataset file by its sha256 (runs that read one), and platform, agent
    and judge as recorded (their recorded description as the descriptor's content)."""
    out: list[dict[str, Any]] = []
    set_id = body.protocol_set_id or body.protocol_set_hash
    if set_id:
        out.append({"name": "protocol-set", "digest": {PROTOCOL_SET_DIGEST: set_id},
                    "annotations": {"suite": body.suite, "items": body.protocols,
                                    "k": body.k}})  # fmt: skip
    config = body.config if isinstance(body.config, dict) else {}
    data = config.get("file_sha256")
    if isinstance(data, str) and data:
        out.append({"name": "dataset", "digest": {"sha256": data}})
    platform = {"platform": body.platform, "version": body.platform_version}
    if body.record is not None:
        platform["record"] = msgspec.to_builtins(body.record)
    out.append(
        {
            "name": "platform",
            "content": _content(platform),
            "annotations": {"platform": body.platform, "version": body.platform_version},
        }
    )
    agent = {"agent": body.agent, "model": body.model}
    out.append({"name": "agent", "content": _content(agent), "annotations": agent})
    judge = config.get("judge")
    if judge:
        out.append({"name": "judge", "content": _content(judge)})
    return out


def test_result(subject: Subject, body: RunStartedBody, result: Outcome) -> dict[str, Any]:
    """The ``test-result/v0.1`` Statement."""
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject.as_json(),
        "predicateType": PREDICATE_TEST_RESULT,
        "predicate": {
            "result": result.result,
            "configuration": configuration(body),
            "passedTests": list(result.passed),
            "warnedTests": list(result.warned),
            "failedTests": list(result.failed),
        },
    }


def eval_result(
    subject: Subject,
    body: RunStartedBody,
    result: Outcome,
    metrics: Mapping[str, Mapping[str, Any]],
    counts: Mapping[str, int],
    gate: Mapping[str, Any] | None,
) -> dict[str, Any]:
    """benchledger's own predicate: the card's metrics with their intervals, the unit
    counts, the pre-registration and the gate (docs/trust.md, "Attestations")."""
    prereg = msgspec.to_builtins(body.prereg) if body.prereg is not None else None
    return {
        "_type": STATEMENT_TYPE,
        "subject": subject.as_json(),
        "predicateType": PREDICATE_RESULT,
        "predicate": {
            "suite": body.suite,
            "run": subject.run_id,
            "root": subject.root,
            "tool_version": body.tool_version,
            "result": result.result,
            "why": result.why,
            "units": dict(counts),
            "metrics": {name: dict(m) for name, m in sorted(metrics.items())},
            "preregistration": prereg,
            "gate": dict(gate) if gate is not None else None,
        },
    }


def statement_bytes(statement: Mapping[str, Any]) -> bytes:
    """A statement as the payload an envelope signs (canonical JSON)."""
    return canonical_json(dict(statement))


__all__ = [
    "FAILED",
    "PASSED",
    "PAYLOAD_TYPE",
    "PREDICATE_RESULT",
    "PREDICATE_TEST_RESULT",
    "RUN_SUBJECT",
    "STATEMENT_TYPE",
    "WARNED",
    "Outcome",
    "Subject",
    "configuration",
    "eval_result",
    "outcome",
    "statement_bytes",
    "test_result",
]
