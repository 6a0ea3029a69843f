"""A recorded model: one unit's episodes of a real run, served back turn by turn.

``RecordedTransport`` answers a unit's model calls from the transcripts of a recorded
run (the peer's S5 runs record every assistant turn of ``claude-sonnet-5``): turn i of
an episode is the recording's i-th assistant turn, its tool calls with the recorded
platform's ids mapped to the ones the platform under test handed out (``IdMap``), its
share of the episode's recorded wall time spent as an asyncio sleep (scaled) and its
share of the recorded token usage. The episode's stage comes from the ``hint`` (the
``Episode``), the turn number from the request's messages, so a retried episode plays
from its first turn again. The recording itself is read by ``harness.peer``.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Awaitable, Callable, Iterator, Mapping
from typing import Any, Final

from benchledger.harness.models.errors import ModelError
from benchledger.harness.models.request import CanonicalRequest
from benchledger.harness.models.response import ModelResponse, ModelToolCall
from benchledger.harness.models.transport import ModelObserver
from benchledger.harness.peer.transcript import USAGE_KEYS, RecordedEpisode

NO_RECORDING: Final = "FINAL ANSWER: INSUFFICIENT INFORMATION"
# Platform-generated ids in the peer's forms: session handles, created pages' ids
# (``kp_`` + a UUID) and 32-hex record, insight and changeset ids. Pack ids
# (``kp-bench-1``, URNs) are the same on both platforms and never match.
ID_PATTERN: Final = re.compile(
    r"\bdps_[0-9a-f]{8,}\b|\bkp_[0-9a-f]{8}(?:-[0-9a-f]{4}){3}-[0-9a-f]{12}\b|\b[0-9a-f]{32}\b"
)
# The field of a JSON object that says what an id in it stands for (a hit's text, a
# record's content, a page's title): equal anchors pair a recorded id with ours.
_ANCHORS: Final = ("text", "content", "insight_text", "summary", "title", "slug")
_DECODER: Final = json.JSONDecoder()

Sleep = Callable[[float], Awaitable[None]]


def id_kind(value: str) -> str:
    """``dps``, ``kp`` or ``hex``: ids only ever map to ids of their own kind."""
    return value[:3] if value.startswith(("dps_", "kp_")) else "hex"


def _ordered_ids(text: str) -> list[str]:
    """The ids in ``text`` in order of first appearance."""
    return list(dict.fromkeys(ID_PATTERN.findall(text)))


def _json_blocks(text: str) -> Iterator[Any]:
    """The JSON values of a result text (its own block and any enrichment lines)."""
    i = 0
    while i < len(text):
        if text[i] in "{[":
            try:
                value, i = _DECODER.raw_decode(text, i)
            except ValueError:
                i += 1
                continue
            yield value
            continue
        nl = text.find("\n", i)
        i = len(text) if nl < 0 else nl + 1
        while i < len(text) and text[i] in " \t\r\n":
            i += 1


def _anchored(value: Any) -> Iterator[tuple[str, list[str]]]:
    """(anchor text, ids) for each JSON object holding ids beside an anchor field."""
    if isinstance(value, dict):
        anchor = next((value[k] for k in _ANCHORS if isinstance(value.get(k), str)), "")
        own = [i for v in value.values() if isinstance(v, str) for i in ID_PATTERN.findall(v)]
        if anchor.strip() and own:
            yield anchor.strip(), list(dict.fromkeys(own))
        for item in value.values():
            yield from _anchored(item)
    elif isinstance(value, list):
        for item in value:
            yield from _anchored(item)


class IdMap:
    """Recorded platform ids -> ours, learned from pairs of recorded and live tool results.

    For each pair (the recording's k-th tool result and ours, the same call): an id in an
    object whose anchor text is the same on both sides (a search hit's text, a page's
    title) maps to the id in the same place of our object; every other new recorded id
    maps by order of first appearance to our unmapped id of the same kind in the same
    result. A recorded id is mapped once; ids never seen stay as they are.
    """

    def __init__(self) -> None:
        self.ours: dict[str, str] = {}
        self._taken: set[str] = set()

    def _pair(self, theirs: str, mine: str) -> None:
        if theirs in self.ours or mine in self._taken or id_kind(theirs) != id_kind(mine):
            return
        self.ours[theirs] = mine
        self._taken.add(mine)

    def learn(self, recorded: str, live: str) -> None:
        """Map the ids of a recorded tool result to those of our result of the same call."""
        if not ID_PATTERN.search(recorded) or not ID_PATTERN.search(live):
            return
        live_anchors: dict[str, list[str]] = {}
        for block in _json_blocks(live):
            for anchor, ids in _anchored(block):
                live_anchors.setdefault(anchor, ids)
        for block in _json_blocks(recorded):
            for anchor, ids in _anchored(block):
                self._zip(ids, live_anchors.get(anchor, []))
        self._zip(_ordered_ids(recorded), _ordered_ids(live))

    def _zip(self, theirs: list[str], mine: list[str]) -> None:
        """Pair new recorded ids with our free ids of the same kind, in order."""
        free = [i for i in mine if i not in self._taken]
        for recorded in theirs:
            if recorded in self.ours:
                continue
            match = next((i for i in free if id_kind(i) == id_kind(recorded)), None)
            if match is not None:
                free.remove(match)
                self._pair(recorded, match)

    def translate(self, value: Any) -> Any:
        """``value`` (JSON) with every mapped recorded id replaced by ours."""
        if isinstance(value, str):
            return ID_PATTERN.sub(lambda m: self.ours.get(m[0], m[0]), value)
        if isinstance(value, dict):
            return {k: self.translate(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.translate(v) for v in value]
        return value


def share(total: int, parts: int, index: int) -> int:
    """Part ``index`` of ``total`` split into ``parts`` integers that add up to ``total``."""
    if parts <= 0:
        return 0
    return total // parts + (1 if index < total % parts else 0)


class RecordedTransport:
    """Serves one unit's recorded episodes by stage; an unrecorded stage answers with a note.

    ``time_scale`` multiplies the recorded wall time (0: no waiting). The unit's ``IdMap``
    spans its episodes, so an id learned in teach maps in update too.
    """

    name = "recorded"

    def __init__(
        self,
        episodes: Mapping[str, RecordedEpisode],
        *,
        model: str,
        unit: str = "",
        time_scale: float = 1.0,
        sleep: Sleep = asyncio.sleep,
        missing: Mapping[str, str] | None = None,
    ) -> None:
        self.episodes = dict(episodes)
        self.model = model
        self.unit = unit
        self.time_scale = time_scale
        self.sleep = sleep
        self.missing = dict(missing or {})  # stage (or "*": any) -> why it has no recording
        self.ids = IdMap()
        self._learned: dict[str, int] = {}  # stage -> tool results already learned from

    def _note(self, stage: str) -> ModelResponse:
        why = self.missing.get(stage) or self.missing.get("*") or "the recorded attempt has none"
        note = f"[recorded: no {stage} episode for {self.unit or 'this unit'}: {why}]"
        return ModelResponse(text=f"{note} {NO_RECORDING}", stop_reason="end_turn",
                             usage=dict.fromkeys(USAGE_KEYS, 0), model=self.model)  # fmt: skip

    async def complete(
        self,
        request: CanonicalRequest,
        *,
        observer: ModelObserver | None = None,
        hint: Any = None,
    ) -> ModelResponse:
        """The recording's next turn for the episode ``hint``, after its share of wall time."""
        stage = getattr(hint, "stage", None)
        if not isinstance(stage, str):
            raise ModelError(
                f"the recorded model plays episodes by stage, got hint {type(hint).__name__}: "
                "call it through ModelAgent, which passes the episode as hint"
            )
        rec = self.episodes.get(stage)
        if rec is None:
            return self._note(stage)
        turn = sum(1 for m in request.messages if m.get("role") == "assistant")
        live = [str(m.get("text", "")) for m in request.messages if m.get("role") == "tool"]
        # A retried episode starts over with fewer results: learning again is harmless.
        done = self._learned.get(stage, 0) if len(live) >= self._learned.get(stage, 0) else 0
        for recorded, ours in zip(rec.results[done:], live[done:], strict=False):
            self.ids.learn(recorded, ours)
        self._learned[stage] = max(done, min(len(live), len(rec.results)))
        n = len(rec.turns)
        if turn >= n:  # our platform answered differently and the loop went on
            return ModelResponse(text=rec.final_answer, stop_reason="end_turn",
                                 usage=dict.fromkeys(USAGE_KEYS, 0), model=self.model)  # fmt: skip
        delay = rec.wall_ms / 1000 * self.time_scale / n
        if delay > 0:
            await self.sleep(delay)
        played = rec.turns[turn]
        calls = [ModelToolCall(i, name, self.ids.translate(args)) for i, name, args in played.calls]
        return ModelResponse(
            text=played.text if calls else rec.final_answer,
            tool_calls=calls,
            stop_reason="tool_use" if calls else "end_turn",
            usage={k: share(int(rec.usage.get(k, 0)), n, turn) for k in USAGE_KEYS},
            model=self.model,
        )
