"""A peer results file read field by field: ``Fields`` refuses a wrong value by its path.

``shape_of`` tells the shapes apart: the current one and the older v1.102 one (no
intervals, cache tokens or capture split); anything else is refused naming the field.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any

from benchledger.ledger import UnusableInput


def _refuse(path: str, problem: str) -> UnusableInput:
    return Fields(path, "lifecycle results file").refuse(problem)


def _field(where: str, key: str) -> str:
    return f"{where}.{key}" if where else key


@dataclass(frozen=True)
class Fields:
    """Typed reads of one peer JSON file; a wrong value is refused by its JSON path.

    Python's truthiness would read ``"no"`` as true and ``int("x")`` would crash, so
    every field the import uses goes through one of these.
    """

    path: str
    what: str  # "lifecycle results file" or "transcript"

    def refuse(self, problem: str) -> UnusableInput:
        return UnusableInput(self.path, f"not a mcp-data-platform {self.what}: {problem}")

    def _wrong(self, where: str, key: str, want: str, value: Any) -> UnusableInput:
        shown = json.dumps(value)
        shown = shown if len(shown) <= 40 else shown[:39] + "…"
        return self.refuse(f"{_field(where, key)} must be {want}, not {shown}")

    def flag(self, obj: dict[str, Any], key: str, where: str) -> bool | None:
        value = obj.get(key)
        if value is None or isinstance(value, bool):
            return value
        raise self._wrong(where, key, "true, false or null", value)

    def count(self, obj: dict[str, Any], key: str, where: str) -> int:
        value = obj.get(key)
        if value is None:
            return 0
        if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
            return value
        raise self._wrong(where, key, "a whole number, 0 or more", value)

    def positive(self, obj: dict[str, Any], key: str, where: str) -> int | None:
        value = obj.get(key)
        if value is None:
            return None
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
        raise self._wrong(where, key, "a positive whole number", value)

    def text(self, obj: dict[str, Any], key: str, where: str) -> str:
        value = obj.get(key)
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        raise self._wrong(where, key, "text or null", value)

    def items(self, obj: dict[str, Any], key: str, where: str) -> list[dict[str, Any]]:
        """A list of objects; null or absent is empty."""
        value = obj.get(key)
        if value is None:
            return []
        if not isinstance(value, list):
            raise self._wrong(where, key, "a list", value)
        for n, item in enumerate(value):
            if not isinstance(item, dict):
                raise self.refuse(f"{_field(where, key)}[{n}] is not an object")
        return value


def shape_of(data: Any, path: str) -> str:
    """``current`` or ``v1.102``; anything else is refused with the field that is wrong."""
    if not isinstance(data, dict):
        raise _refuse(path, "the top level must be an object with manifest and runs")
    manifest, runs = data.get("manifest"), data.get("runs")
    if not isinstance(manifest, dict):
        raise _refuse(path, "field 'manifest' is missing or not an object")
    if not isinstance(runs, list) or not runs:
        raise _refuse(path, "field 'runs' is missing, empty or not a list")
    for i, run in enumerate(runs):
        if not isinstance(run, dict):
            raise _refuse(path, f"runs[{i}] is not an object")
        if not isinstance(run.get("protocol_id"), str) or not isinstance(run.get("attempt"), int):
            raise _refuse(path, f"runs[{i}] needs a protocol_id (text) and an attempt (number)")
        if not isinstance(run.get("episodes"), list):
            raise _refuse(path, f"runs[{i}].episodes is missing or not a list")
        for j, ep in enumerate(run["episodes"]):
            if not isinstance(ep, dict) or not isinstance(ep.get("stage"), str):
                raise _refuse(path, f"runs[{i}].episodes[{j}] needs a stage")
    metrics = data.get("metrics") or {}
    if not isinstance(metrics, dict):
        raise _refuse(path, "field 'metrics' is not an object")
    rated = [v for v in metrics.values() if isinstance(v, dict) and "num" in v and "den" in v]
    if any("ci_low" in v for v in rated) or "capture_split" in metrics:
        return "current"
    return "v1.102"


def attempt_of(f: Fields, i: int, record: dict[str, Any]) -> int:
    """``runs[i].attempt``, refused unless it is a positive whole number."""
    attempt = f.positive(record, "attempt", f"runs[{i}]")
    if attempt is None:
        raise f.refuse(f"runs[{i}].attempt must be a positive whole number")
    return attempt


def start_ns(f: Fields, manifest: dict[str, Any], *, required: bool = False) -> int:
    """The manifest's ``started_at`` in ns since the epoch (0 when absent, unless
    ``required``): where an import's deterministic timestamps begin."""
    text = f.text(manifest, "started_at", "manifest")
    if not text and not required:
        return 0
    try:
        stamp = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise f.refuse(f"manifest.started_at is not an ISO 8601 time: {text!r}") from None
    if stamp.tzinfo is None:  # the peer writes UTC; a naive stamp cannot be subtracted
        stamp = stamp.replace(tzinfo=dt.UTC)
    epoch = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
    return (stamp - epoch) // dt.timedelta(microseconds=1) * 1000
