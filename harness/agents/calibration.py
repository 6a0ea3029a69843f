"""The calibration agent: a judge calibration set's planted answers, no model, no search.

``--agent calibration`` answers each question of the judge's calibration set
(``protocols/locomo_calibration.py``) with the answer planted for it (the gold, a
paraphrase, or a deliberately wrong but on-topic answer, by its sample's kind), so a
judge's false accepts and false rejects can be counted (``benchledger judge calibrate``,
docs/locomo.md "Calibrating a judge"). Deterministic; its episodes make no tool call.
"""

from __future__ import annotations

from typing import Any

from benchledger.harness.agents.base import Agent, Episode, Turn, UnitInfo
from benchledger.harness.models.transport import ModelObserver
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.protocols.locomo_calibration import planted

__all__ = ["CalibrationAgent"]


class CalibrationAgent:
    """Answers a calibration question with its planted answer."""

    name = "calibration"
    model = ""
    records_model_calls = False

    def for_unit(self, unit: UnitInfo) -> Agent:
        return self

    async def next_turn(
        self,
        episode: Episode,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        observer: ModelObserver | None = None,
    ) -> Turn:
        item = episode.protocol
        if not isinstance(item, LocomoItem):
            return Turn("FINAL ANSWER: the calibration agent answers LoCoMo questions only")
        return Turn(f"FINAL ANSWER: {planted(item.sample, item.question)}")
