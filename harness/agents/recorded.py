"""The recorded agent: re-enacts a recorded peer run (``--agent recorded:RUN_DIR``).

RUN_DIR is one of the peer's S5 result folders: a merged k-pass run whose
``passes.txt`` lists each pass's ``lifecycle-*.json`` (line j is pass j, which is
attempt j of every protocol), or a single pass (one results file beside its
``.transcripts`` folder; its runs' own attempts count). Each results file holds the
``manifest`` (the model) and ``runs[]`` with their ``episodes[]`` (stage, email,
final answer, wall time, tokens); the transcripts folder holds each episode's turns
as ``<protocol>-<stage>-<email>.json``.

The agent is a ``ModelAgent`` over a ``RecordedTransport``: every turn is a model call
with our canonical request and the recorded response, under the recorded model's
name. ``for_unit`` finds the unit's recorded attempt by protocol and attempt; an
episode is found by its stage (the identity's email differs from ours). Transcripts
are read per unit, so starting costs only the results files.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import glob
import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from harness.agents.base import UnitInfo
from harness.agents.model import ModelAgent
from harness.models.recorded import USAGE_KEYS, RecordedEpisode, RecordedTransport, Sleep
from harness.peer_import import find_pass_file

PASSES = "passes.txt"


def _read_json(path: str, what: str) -> Any:
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise ValueError(f"recorded run: cannot read {what} {path} ({exc})") from None


def _pass_file(listing: str, line: str) -> str:
    """Where a ``passes.txt`` line points; ValueError saying what to copy if nowhere."""
    found = find_pass_file(listing, line)
    if found is None:
        raise ValueError(
            f"recorded run: {listing} names {line!r}, which is not a file beside it or below "
            "any folder above it: copy the whole result folder"
        )
    return found


def results_files(run_dir: str) -> list[str]:
    """The run's per-pass results files in pass order; ValueError naming the path if none."""
    if os.path.isfile(run_dir):
        return [run_dir]
    if not os.path.isdir(run_dir):
        raise ValueError(
            f"--agent recorded:{run_dir}: no such folder; name a recorded run, e.g. "
            "../shared/peers/mcp-data-platform/bench/results/s5-anthropic-k5"
        )
    listing = os.path.join(run_dir, PASSES)
    if os.path.isfile(listing):
        try:
            with open(listing, encoding="utf-8") as fh:
                lines = [raw.strip() for raw in fh if raw.strip()]
        except (OSError, UnicodeDecodeError) as exc:
            raise ValueError(f"recorded run: cannot read {listing} ({exc})") from None
        if not lines:
            raise ValueError(f"recorded run: {listing} lists no passes")
        return [_pass_file(listing, line) for line in lines]
    single = sorted(
        f for f in glob.glob(os.path.join(run_dir, "*.json")) if os.path.isdir(f + ".transcripts")
    )
    if len(single) != 1:
        raise ValueError(
            f"--agent recorded:{run_dir}: expected a {PASSES} or exactly one results file with "
            f"its .transcripts folder, found {len(single)}"
        )
    return single


@dataclass(frozen=True)
class _Attempt:
    """One recorded protocol attempt: its results file and its run record."""

    results: str
    run: dict[str, Any]


class RecordedRun:
    """The index of a recorded run: its model and every protocol's attempts, in order."""

    def __init__(self, run_dir: str) -> None:
        self.path = run_dir
        self.attempts: dict[str, list[_Attempt]] = {}
        self.manifests: list[dict[str, Any]] = []  # one per pass, in pass order
        models = set()
        for results in results_files(run_dir):
            data = _read_json(results, "results file")
            manifest = data.get("manifest") if isinstance(data, dict) else None
            runs = data.get("runs") if isinstance(data, dict) else None
            if not isinstance(manifest, dict) or not isinstance(runs, list):
                raise ValueError(
                    f"recorded run: {results} is not a lifecycle results file "
                    "(no manifest or no runs[])"
                )
            self.manifests.append(manifest)
            models.add(str(manifest.get("model") or ""))
            ordered = sorted(
                (r for r in runs if isinstance(r, dict) and r.get("protocol_id")),
                key=lambda r: int(r.get("attempt") or 1),
            )
            for run in ordered:
                self.attempts.setdefault(str(run["protocol_id"]), []).append(_Attempt(results, run))
        if len(models) != 1 or "" in models:
            raise ValueError(
                f"recorded run: {run_dir}: its passes name the models {sorted(models)}; "
                "one recorded run is one model"
            )
        self.model = models.pop()

    @property
    def protocol_set_hash(self) -> str:
        """The peer's hash of the protocol set the run used ("" if its manifests name none)."""
        return str(self.manifests[0].get("protocol_set_hash") or "")

    @property
    def span_s(self) -> float:
        """Seconds from the first pass's start to the last one's finish (0 if unrecorded)."""
        try:
            start = dt.datetime.fromisoformat(self.manifests[0]["started_at"])
            end = dt.datetime.fromisoformat(self.manifests[-1]["finished_at"])
        except (KeyError, TypeError, ValueError):
            return 0.0
        return max(0.0, (end - start).total_seconds())

    def episode_wall_s(self) -> float:
        """The recorded episodes' wall time, summed: what the agent spends at time scale 1."""
        return sum(
            float(ep.get("wall_ms") or 0) / 1000
            for attempts in self.attempts.values()
            for at in attempts
            for ep in at.run.get("episodes") or []
        )

    def unit(
        self, protocol_id: str, attempt: int
    ) -> tuple[dict[str, RecordedEpisode], dict[str, str]]:
        """The unit's recorded episodes by stage, and why a stage has none (``*``: any stage)."""
        attempts = self.attempts.get(protocol_id, [])
        if not 1 <= attempt <= len(attempts):
            why = (
                f"{self.path} records {len(attempts)} attempts of {protocol_id}"
                if attempts
                else f"{self.path} has no protocol {protocol_id}"
            )
            return {}, {"*": why}
        at = attempts[attempt - 1]
        episodes: dict[str, RecordedEpisode] = {}
        missing: dict[str, str] = {}
        error = " ".join(str(at.run.get("error") or "").split())
        if error:
            missing["*"] = f"the recorded attempt ended early: {error[:160]}"
        for ep in at.run.get("episodes") or []:
            stage = str(ep.get("stage") or "")
            if not stage or stage in episodes:
                continue
            name = f"{protocol_id}-{stage}-{ep.get('email', '')}.json"
            path = os.path.join(at.results + ".transcripts", name)
            try:
                turns = _read_json(path, "transcript")["transcript"]
                usage = {k: int(ep.get(k) or 0) for k in USAGE_KEYS}
                episodes[stage] = RecordedEpisode.from_transcript(
                    stage,
                    turns,
                    final_answer=ep.get("final_answer"),
                    wall_ms=float(ep.get("wall_ms") or 0),
                    usage=usage,
                    source=path,
                )
            except (ValueError, KeyError, TypeError) as exc:
                missing[stage] = str(exc)
        return episodes, missing


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
