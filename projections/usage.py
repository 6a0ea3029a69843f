"""What a run used: its durations, model-call latencies and tokens, as a fold (docs/metrics.md).

Nothing here is recorded as a fact: every number is a projection of what the run's events
already hold, their ``at`` timestamps (nanoseconds, stamped as each event is appended),
``model_call`` latencies and ``episode_finished`` token counts. A run imported from the
peer (``run_started.config["origin"]``) has synthetic timestamps, one nanosecond apart,
so its wall time comes from the peer's manifest and it has no per-unit timing.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Final, NamedTuple

from benchledger.ledger.events import (
    EpisodeFinishedEvent,
    Event,
    ModelCallEvent,
    RunSealedEvent,
    RunStartedEvent,
    SessionCallEvent,
    UnitAbandonedEvent,
    UnitFinishedEvent,
    UnitStartedEvent,
)
from benchledger.ledger.redaction import WithheldEvent

TOKEN_KINDS: Final = ("input", "output", "cache_read", "cache_creation")
# run_started.config["origin"] of a run written by the peer importer (harness/peer/importer.py,
# whose timestamps are the manifest's start plus one nanosecond per event).
PEER_ORIGIN: Final = "mcp-data-platform"
PERCENTILE_METHOD: Final = (
    "linear interpolation between closest ranks (numpy's default; Hyndman & Fan type 7)"
)
NS: Final = 1e9


def percentile(values: Sequence[float], q: float) -> float | None:
    """The ``q``-th percentile (0-100) of ``values`` by linear interpolation between closest
    ranks, as numpy's default: the sorted values x[0..n-1] read at rank h = (n-1)q/100,
    x[floor h] + (h - floor h)(x[floor h + 1] - x[floor h]). None for no values."""
    if not 0 <= q <= 100 or math.isnan(q):
        raise ValueError(f"percentile q must be between 0 and 100, not {q!r}")
    if not values:
        return None
    xs = sorted(values)
    h = (len(xs) - 1) * q / 100
    lo = math.floor(h)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (h - lo) * (xs[hi] - xs[lo])


class Usage(NamedTuple):
    """Durations, model calls and tokens of one run (or of several merged as passes)."""

    wall_s: float | None  # run_started to the run's last event (the seal); None: not known
    unit_s: tuple[float, ...]  # unit_started -> unit_finished per finished unit stream
    latencies_ms: tuple[float, ...]  # model_call latency_ms of every answered call
    model_calls: int  # model_call events without an error (answered)
    failed_calls: int  # model_call events recording an error (no response)
    retries: int  # answered calls that needed a retry (retry > 0)
    withheld_calls: int  # model_call events a redacted bundle withholds: not timed here
    tokens: Mapping[str, int]  # input, output, cache_read, cache_creation (episode_finished)
    model: str  # run_started.model ('' when merged runs used different models)
    models: tuple[str, ...]  # every model the runs name
    runs: int
    source: str  # where the timings came from, in words
    # session_call latency_ms of every tools/call: how fast the platform answered a tool
    # call (the agents' and the harness's alike); none for an import, which has no timings.
    tool_latencies_ms: tuple[float, ...] = ()

    @property
    def calls_recorded(self) -> bool:
        """Whether the run records its model calls: not when it holds tokens but no
        model_call event at all (a peer import records the peer's tokens only), where a
        count of 0 would be false."""
        calls = self.model_calls or self.failed_calls or self.withheld_calls
        return bool(calls) or not any(self.tokens.values())


class UsageFold:
    """Folds a run's events into its ``Usage`` (a ``Fold`` of ``Usage``)."""

    def __init__(self) -> None:
        self.started_at: int | None = None
        self.sealed_at: int | None = None
        self.last_at: int | None = None
        self.model = ""
        self.config: dict[str, Any] = {}
        self.unit_start: dict[str, int] = {}
        self.unit_end: dict[str, int] = {}
        self.latencies: list[float] = []
        self.tool_latencies: list[float] = []
        self.failed = self.retries = self.withheld = 0
        self.abandoned = False
        # Tokens are added here only, per stream: a unit's are its stream's, the run's their sum.
        self.by_stream: dict[str, dict[str, int]] = {}

    def apply(self, event: Event, link: str) -> None:
        self.last_at = event.at if self.last_at is None else max(self.last_at, event.at)
        if isinstance(event, RunStartedEvent):
            self.started_at = event.at
            self.model = event.body.model
            self.config = dict(event.body.config)
        elif isinstance(event, RunSealedEvent):
            self.sealed_at = event.at
        elif isinstance(event, UnitStartedEvent):
            self.unit_start[event.stream] = event.at
        elif isinstance(event, UnitFinishedEvent):
            self.unit_end[event.stream] = event.at
        elif isinstance(event, UnitAbandonedEvent):
            self.abandoned = True
        elif isinstance(event, ModelCallEvent):
            mc = event.body
            if mc.error:  # a failed attempt: no answer, so no latency of one
                self.failed += 1
            else:  # answered; its latency includes any failed attempts and waits before it
                self.latencies.append(float(mc.latency_ms))
                self.retries += mc.retry > 0
        elif isinstance(event, SessionCallEvent) and event.body.method == "tools/call":
            self.tool_latencies.append(float(event.body.latency_ms))
        elif isinstance(event, EpisodeFinishedEvent):
            ef = event.body
            tokens = self.by_stream.setdefault(event.stream, dict.fromkeys(TOKEN_KINDS, 0))
            for key, value in zip(
                TOKEN_KINDS,
                (ef.input_tokens, ef.output_tokens, ef.cache_read_tokens, ef.cache_creation_tokens),
                strict=True,
            ):
                tokens[key] += value
        elif isinstance(event, WithheldEvent) and event.withheld_kind == "model_call":
            self.withheld += 1

    def result(self) -> Usage:
        if self.config.get("origin") == PEER_ORIGIN:
            wall, source = _manifest_wall(self.config.get("manifest"))
            units: tuple[float, ...] = ()
            self.tool_latencies = []  # the import's calls carry no timing of their own
        else:
            wall, source = self._wall()
            units = tuple(
                (end - self.unit_start[s]) / NS
                for s, end in sorted(self.unit_end.items())
                if s in self.unit_start
            )
            source += f"; per unit: unit_started to unit_finished ({len(units)} finished)"
        if self.withheld:
            source += f"; {self.withheld} model call(s) withheld by redaction, not timed"
        return Usage(
            wall,
            units,
            tuple(self.latencies),
            len(self.latencies),
            self.failed,
            self.retries,
            self.withheld,
            dict.fromkeys(TOKEN_KINDS, 0) | sum_tokens(self.by_stream.values()),
            self.model,
            (self.model,) if self.model else (),
            1,
            source,
            tuple(self.tool_latencies),
        )

    def _wall(self) -> tuple[float | None, str]:
        if self.started_at is None:
            return None, "wall: not known (no run_started)"
        if self.sealed_at is not None:
            end, said = max(self.sealed_at, self.last_at or 0), "run_started to run_sealed"
        else:
            end, said = self.last_at or self.started_at, "run_started to its last event, unsealed"
        if self.abandoned:
            said += ", including the time it stood interrupted before a resume"
        return (end - self.started_at) / NS, f"recorded event times: wall {said}"


def _manifest_wall(manifest: object) -> tuple[float | None, str]:
    """An imported run's wall from the peer manifest's started_at/finished_at (ISO 8601)."""
    lacks = "imported from mcp-data-platform: per-unit timing and model-call latency are not "
    lacks += "recorded by the import"
    if not isinstance(manifest, dict):
        return None, f"wall: not known (no manifest); {lacks}"
    start, end = _iso(manifest.get("started_at")), _iso(manifest.get("finished_at"))
    if start is None or end is None or end < start:  # the peer writes 0001-01-01 when cut off
        said = f"the manifest's finished_at {manifest.get('finished_at')!r} is not a finish time"
        return None, f"wall: not known ({said}); {lacks}"
    wall = (end - start).total_seconds()
    return wall, f"wall: the peer manifest's started_at to finished_at; {lacks}"


def _iso(text: object) -> dt.datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return stamp if stamp.tzinfo else stamp.replace(tzinfo=dt.UTC)


def sum_tokens(parts: Iterable[Mapping[str, int]]) -> dict[str, int]:
    """Token counts summed kind by kind (only the kinds that appear in ``parts``)."""
    out: dict[str, int] = {}
    for part in parts:
        for key, value in part.items():
            out[key] = out.get(key, 0) + value
    return out


def merge(usages: Iterable[Usage]) -> Usage:
    """Several runs merged as passes: walls summed (None if any pass lacks one), unit times
    and latencies concatenated, counts and tokens summed."""
    runs = list(usages)
    if not runs:
        raise ValueError("no runs to merge")
    if len(runs) == 1:
        return runs[0]
    walls = [u.wall_s for u in runs]
    wall = None if any(w is None for w in walls) else math.fsum(w for w in walls if w is not None)
    models = tuple(sorted({m for u in runs for m in u.models}))
    tokens = dict.fromkeys(TOKEN_KINDS, 0) | sum_tokens(u.tokens for u in runs)
    sources = list(dict.fromkeys(u.source for u in runs))
    said = (
        f"{len(runs)} runs merged as passes: wall is the sum of their walls"
        if wall is not None
        else f"{len(runs)} runs merged as passes: wall not known for every pass"
    )
    return Usage(
        wall,
        tuple(s for u in runs for s in u.unit_s),
        tuple(ms for u in runs for ms in u.latencies_ms),
        sum(u.model_calls for u in runs),
        sum(u.failed_calls for u in runs),
        sum(u.retries for u in runs),
        sum(u.withheld_calls for u in runs),
        tokens,
        models[0] if len(models) == 1 else "",
        models,
        sum(u.runs for u in runs),
        "; ".join([said, *sources]),
        tuple(ms for u in runs for ms in u.tool_latencies_ms),
    )
