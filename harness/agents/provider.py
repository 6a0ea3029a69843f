"""Model providers: what an ``--agent NAME[:MODEL]`` spec names, found in one registry.

Each provider is one registration in ``MODELS`` (entry-point group ``benchledger.models``):
benchledger's own (``scripted``, ``fake``, ``anthropic``, ``openai``, ``recorded``) load
from ``harness.agents.providers`` on first use, so naming one never imports another's SDK.
A provider turns an ``AgentRequest`` (the spec's model part, the sampling params, the keys
and server from the settings, the rate limits) into an ``Agent``. Replay hands every
provider the transport that serves the recorded responses (``AgentRequest.transport``:
the log's, or a tape's); a provider then builds no client of its own.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

from benchledger.ledger.registry import Registry

if TYPE_CHECKING:  # the registry stays light: listing providers imports none of them
    from benchledger.harness.agents.base import Agent
    from benchledger.harness.models.transport import ModelTransport
    from benchledger.harness.settings import Settings


@dataclass(frozen=True)
class AgentRequest:
    """What a run asks of a provider: ``spec`` as given (and recorded), ``model`` the part
    after ``NAME:`` ("" for none), and everything else the agent is made with."""

    spec: str
    model: str
    transport: ModelTransport | None = None  # replay's: serves the recorded responses
    params: Mapping[str, Any] | None = None  # sampling params (recorded with each request)
    settings: Settings | None = None  # the command line's keys and servers (None: no keys)
    base_url: str = ""
    rpm: int = 0
    tpm: int = 0
    time_scale: float = 1.0  # recorded agents: their recorded latencies times this


@dataclass(frozen=True)
class ModelProvider:
    """One provider: ``agent(request)`` makes the agent (ValueError, one line, when the
    spec cannot be served: a missing key, an unusable model or folder); ``usage`` is its
    spec's shape for messages and listings (``anthropic:MODEL``)."""

    agent: Callable[[AgentRequest], Agent]
    usage: str = ""
    summary: str = ""


def _provider(obj: object) -> ModelProvider:
    if not isinstance(obj, ModelProvider):
        raise TypeError(f"is a {type(obj).__name__}, not a ModelProvider")
    return obj


MODELS: Final = Registry[ModelProvider]("model provider", "benchledger.models", check=_provider)

_HERE: Final = "benchledger.harness.agents.providers"


def _builtin(attr: str) -> Callable[[], ModelProvider]:
    """Load one of ours by its path, as an entry point would (the providers' module imports
    this one: a reference by name keeps the two from importing each other)."""

    def load() -> ModelProvider:
        found: ModelProvider = getattr(importlib.import_module(_HERE), attr)
        return found

    return load


for _name in ("scripted", "retrieval", "fake", "anthropic", "openai", "recorded", "no-memory",
              "full-context", "calibration"):  # fmt: skip
    _attr = _name.upper().replace("-", "_")
    MODELS.register(_name, _builtin(_attr), where=f"{_HERE}:{_attr}")
