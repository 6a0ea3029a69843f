"""The index of a recorded run: its model and every protocol's attempts, in pass order.

``RecordedRun`` reads only the results files; an attempt's transcripts are read when its
unit asks for them (``unit``), so starting costs only the results files.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from typing import Any

from benchledger.harness.peer.layout import read_json, results_files
from benchledger.harness.peer.transcript import USAGE_KEYS, RecordedEpisode


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
            data = read_json(results, "results file")
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
                turns = read_json(path, "transcript")["transcript"]
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
