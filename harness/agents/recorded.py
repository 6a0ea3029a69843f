"""The recorded agent: re-enacts a recorded peer run (``--agent recorded:RUN_DIR``).

RUN_DIR is one of the peer's S5 result folders: a merged k-pass run whose
``passes.txt`` lists each pass's ``lifecycle-*.json`` (line j is pass j, which is
attempt j of every protocol), or a single pass (one results file beside its
``.transcripts`` folder; its runs' own attempts count). ``harness.peer`` reads that
format (``RecordedRun``); this module only plays it.

The agent is a ``ModelAgent`` over a ``RecordedTransport``: every turn is a model call
with our canonical request and the recorded response, under the recorded model's
name. ``for_unit`` finds the unit's recorded attempt by protocol and attempt; an
episode is found by its stage (the identity's email differs from ours). Transcripts
are read per unit, so starting costs only the results files.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence
from typing import Any

from benchledger.harness.agents.base import UnitInfo
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.models.recorded import RecordedTransport, Sleep
from benchledger.harness.peer.layout import find_protocols
from benchledger.harness.peer.recorded_run import RecordedRun
from benchledger.harness.peer.transcript import RecordedEpisode
from benchledger.protocols import load
from benchledger.protocols.errors import InvalidInput
from benchledger.protocols.hashing import benchledger_hash, peer_hash
from benchledger.protocols.schema import Protocol


class RecordedAgent(ModelAgent):
    """A ``ModelAgent`` that re-enacts ``run``; ``for_unit`` gives a unit its recorded turns."""

    def __init__(
        self, run: RecordedRun, *, name: str, time_scale: float = 1.0, sleep: Sleep = asyncio.sleep
    ) -> None:
        if not 0 <= time_scale < float("inf"):  # nan fails every comparison
            raise ValueError(
                f"--time-scale {time_scale:g}: must be a finite number, at least 0 (0 = no waiting)"
            )
        self.run = run
        self.time_scale = time_scale
        self.sleep = sleep
        super().__init__(self._transport("", {}, {}), model=run.model, name=name)

    def _transport(
        self, unit: str, episodes: Mapping[str, RecordedEpisode], missing: Mapping[str, str]
    ) -> RecordedTransport:
        return RecordedTransport(episodes, model=self.run.model, unit=unit,
                                 time_scale=self.time_scale, sleep=self.sleep,
                                 missing=missing)  # fmt: skip

    def check_items(self, items: Sequence[Any], path: str) -> None:
        """ValueError in one line unless ``items`` (the run's protocols, from ``path``) are
        protocols this recording was made with, by content: each id recorded, and each
        protocol the recording's own (the set whose hash its manifests record)."""
        check_recorded_set(self.run, items, path)

    def for_unit(self, unit: UnitInfo) -> ModelAgent:
        """A model agent over the unit's recorded episodes (attempt j = the run's pass j)."""
        episodes, missing = self.run.unit(unit.protocol_id, unit.attempt)
        label = f"{unit.protocol_id} attempt {unit.attempt}"
        transport = self._transport(label, episodes, missing)
        return ModelAgent(transport, model=self.model, params=self.params, name=self.name)


def recorded_agent(
    spec: str,
    *,
    transport: Any = None,
    params: Mapping[str, Any] | None = None,
    time_scale: float = 1.0,
) -> ModelAgent:
    """The agent ``recorded:RUN_DIR`` names; ValueError naming the path if it is unusable.

    With a ``transport`` (replay serves the recorded responses from the ledger) it is a
    plain ``ModelAgent`` under the recorded model's name.
    """
    run_dir = spec.partition(":")[2]
    if not run_dir:
        raise ValueError(f"--agent {spec}: name the recorded run, recorded:RUN_DIR")
    run = RecordedRun(run_dir)
    if transport is not None:
        return ModelAgent(transport, model=run.model, params=params, name=spec)
    if params:
        raise ValueError(
            f"--agent {spec} plays recorded turns: sampling options do not apply to it"
        )
    return RecordedAgent(run, name=spec, time_scale=time_scale)


def _recorded_set(run: RecordedRun) -> dict[str, Any] | None:
    """The protocols the recording was made with, by id: the set the peer's layout puts
    beside its results whose peer hash is the one its manifests record; None if not found."""
    folder = find_protocols(next(iter(run.attempts.values()))[0].results) if run.attempts else None
    if folder is None or not run.protocol_set_hash:
        return None
    try:
        found = load(folder).protocols
    except InvalidInput:
        return None
    return {p.id: p for p in found} if peer_hash(found) == run.protocol_set_hash else None


def check_recorded_set(run: RecordedRun, items: Sequence[Any], path: str) -> None:
    """ValueError naming the first protocol of the run (from ``path``) that the recording
    does not hold, or holds with other content (docs/refplatform.md, re-enacting)."""
    if not all(isinstance(item, Protocol) for item in items):
        raise ValueError(f"--agent recorded:{run.path}: a recording re-enacts lifecycle "
                         "protocols; this run's items are not protocols")  # fmt: skip
    for item in items:
        if item.id not in run.attempts:
            known = sorted(run.attempts)
            has = ", ".join(known[:3]) + (", ..." if len(known) > 3 else "")
            raise ValueError(
                f"--agent recorded:{run.path}: the recording holds no protocol {item.id} of "
                f"{path} (it records {len(known)}: {has}); re-enact it with the protocol set "
                "it was made with"
            )
    if not items or peer_hash(items) == run.protocol_set_hash:
        return  # the very set the recording names
    recorded = _recorded_set(run)
    for item in items:
        theirs = recorded.get(item.id) if recorded is not None else None
        if theirs is not None:
            same = benchledger_hash([theirs]) == benchledger_hash([item])
        else:  # the set is not beside it: what each run record says of its protocol
            first = run.attempts[item.id][0].run
            same = (first.get("title"), first.get("sink")) == (item.title, item.sink)
        if not same:
            raise ValueError(
                f"--agent recorded:{run.path}: protocol {item.id} of {path} differs from the "
                "one the recording was made with (the recording's set has peer hash "
                f"{run.protocol_set_hash[:12] or '(none)'})"
            )
