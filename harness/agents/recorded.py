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
from collections.abc import Mapping
from typing import Any

from benchledger.harness.agents.base import UnitInfo
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.models.recorded import RecordedTransport, Sleep
from benchledger.harness.peer.recorded_run import RecordedRun
from benchledger.harness.peer.transcript import RecordedEpisode


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
