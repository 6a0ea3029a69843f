"""The canonical model response: what a transport returns and a ``model_call`` records."""

from __future__ import annotations

from typing import Any

import msgspec


class ModelToolCall(msgspec.Struct, frozen=True):
    """A tool call the model asked for."""

    id: str
    name: str
    arguments: dict[str, Any]


# omit_defaults: a field added later leaves earlier responses' recorded JSON (and so
# replayed trace hashes) unchanged.
class ModelResponse(msgspec.Struct, frozen=True, omit_defaults=True):
    """A model's reply, provider-neutral.

    ``stop_reason``: end_turn | tool_use | max_tokens | refusal | ... ; ``usage`` keys:
    input_tokens, output_tokens, cache_read_tokens, cache_creation_tokens.
    """

    text: str = ""
    tool_calls: list[ModelToolCall] = []
    stop_reason: str = "end_turn"
    usage: dict[str, int] = {}
    model: str = ""


def response_json(response: ModelResponse) -> dict[str, Any]:
    """The response as the plain dict a ``model_call`` event records in ``response``."""
    out: dict[str, Any] = msgspec.to_builtins(response)
    return out


def response_from_json(data: Any) -> ModelResponse:
    """A recorded ``response`` dict as a ModelResponse; msgspec.ValidationError if malformed."""
    return msgspec.convert(data, ModelResponse)
