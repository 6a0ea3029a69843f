"""Stage system prompts: the FINAL ANSWER convention and the abstention phrase."""

from __future__ import annotations

from typing import Final

from benchledger.protocols.grading import ABSTAIN_ANSWER

_COMMON: Final = (
    "You are a data analyst working with a memory platform through its tools. "
    "You have a limited number of tool calls in this session."
)
_ANSWER: Final = (
    " Use the platform's memory and knowledge (search) and its SQL tools to answer. "
    "End your reply with a line 'FINAL ANSWER: <answer>'. If nothing you can find "
    f"grounds an answer, reply 'FINAL ANSWER: {ABSTAIN_ANSWER}' rather than guessing."
)
SYSTEM: Final = {
    "teach": _COMMON + " Save what the user asks you to remember with memory_capture, linked "
    "to the dataset it concerns.",
    "update": _COMMON + " The user corrects something saved earlier: save the corrected "
    "definition with memory_capture, linked to the dataset it concerns.",
    "recall": _COMMON + _ANSWER,
    "transfer": _COMMON + _ANSWER,
    "update_recall": _COMMON + _ANSWER,
    "abstain": _COMMON + _ANSWER,
}
BUDGET_MESSAGE: Final = (
    "Tool call refused: the tool-call budget for this session is used up. "
    "Answer now with what you have."
)
