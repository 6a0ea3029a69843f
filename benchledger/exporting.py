"""A verified run as an Every Eval Ever record (``export RUN --format eee -o DIR``).

The run (a ledger run id or a bundle file) is read through the door and scored as
``report`` scores it; ``projections.eee`` lays out the aggregate log and its instance
lines, written under ``DIR`` as the schema's datastore lays them out. The bundle's sha256
is the digest of the file given, or, for a run id, of the bundle ``export RUN`` writes.
docs/eee.md says what maps to what.
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from dataclasses import dataclass

from benchledger.harness.settings import Settings
from benchledger.ledger import UnusableInput
from benchledger.ledger.bundle import atomic_output, file_sha256
from benchledger.ledger.events import RunStartedEvent
from benchledger.ledger.verified import is_bundle
from benchledger.ledgers import LedgerLike, reader
from benchledger.reading import export, read

__all__ = ["EeeExported", "export_eee"]


@dataclass(frozen=True)
class EeeExported:
    """What ``export_eee`` wrote: the aggregate file, the instance file (or ""), its rows."""

    run_id: str
    root: str
    aggregate: str
    samples: str
    rows: int
    results: int
    not_measured: tuple[str, ...]


def _bundle_sha256(run: str, ledger: LedgerLike, settings: Settings | None) -> str:
    if is_bundle(run):
        return file_sha256(run)
    with tempfile.TemporaryDirectory(prefix="benchledger-eee-") as tmp:
        path = os.path.join(tmp, "run.jsonl")
        export(run, path, ledger=ledger, settings=settings)
        return file_sha256(path)


def export_eee(
    run: str,
    directory: str,
    *,
    ledger: LedgerLike = None,
    settings: Settings | None = None,
    now: float | None = None,
) -> EeeExported:
    """Write ``run`` as an Every Eval Ever aggregate record and instance sidecar under
    ``directory`` (``data/<collection>/<developer>/<model>/<uuid>.json`` and
    ``<uuid>_samples.jsonl``). ``now`` is the record's retrieval time (default: the clock).
    Nothing is written unless the run verifies; an existing record is never overwritten."""
    from benchledger.projections import eee
    from benchledger.projections.inspect_log import inspect_log
    from benchledger.projections.suites import of_run
    from benchledger.scoring import scored

    if not os.path.isdir(directory):
        raise UnusableInput(directory, "--format eee writes into a folder: create it first")
    opener = reader(ledger, settings)
    opened = read(run, opener, None)
    header = next((e for e, _ in opened.events if isinstance(e, RunStartedEvent)), None)
    if header is None:
        raise UnusableInput(run, "the run has no run_started event to export")
    body = header.body
    suite = of_run(opened)
    _, card = scored([run], [opened], opener, replay=False)
    config = body.config if isinstance(body.config, dict) else {}
    data = config.get("file_sha256")
    source = eee.Source(
        run_id=opened.run_id,
        root=opened.root,
        bundle_sha256=_bundle_sha256(run, ledger, settings),
        dataset_sha256=data if isinstance(data, str) else "",
        started_ns=header.at,
        retrieved=f"{time.time() if now is None else now:.6f}",
    )
    found = eee.record(body, suite.name, getattr(card, "metrics", {}), suite.lower_is_better,
                       suite.descriptions, inspect_log(opened).samples, source,
                       body.tool_version)  # fmt: skip
    aggregate = os.path.join(directory, found.aggregate_path)
    samples = os.path.join(directory, found.samples_path) if found.rows else ""
    for path in (aggregate, samples):
        if path and os.path.lexists(path):
            raise UnusableInput(path, "already exists; an Every Eval Ever record is never "
                                "overwritten (export into another folder)")  # fmt: skip
    os.makedirs(os.path.dirname(aggregate), exist_ok=True)
    if samples:
        with atomic_output(samples) as out:
            out.write(found.samples)
    with atomic_output(aggregate) as out:
        out.write(json.dumps(found.aggregate, indent=2, sort_keys=True).encode() + b"\n")
    not_measured = tuple(n for n, m in getattr(card, "metrics", {}).items() if m.rate is None)
    return EeeExported(opened.run_id, opened.root, aggregate, samples, found.rows,
                       len(found.aggregate["evaluation_results"]), not_measured)  # fmt: skip
