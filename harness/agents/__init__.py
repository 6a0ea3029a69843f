"""Agents, made from an ``--agent`` spec by ``from_spec`` through the model providers'
registry (``provider.MODELS``): scripted (no model), fake, model agents over a transport
(Anthropic, OpenAI-compatible), recorded (a peer run re-enacted), and any provider an
installed package registers in the entry-point group ``benchledger.models``.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from benchledger.harness.agents.base import Agent, Episode, ToolCall, Turn, UnitInfo
from benchledger.harness.agents.provider import MODELS, AgentRequest, ModelProvider
from benchledger.harness.models.transport import ModelTransport
from benchledger.harness.settings import Settings
from benchledger.ledger.registry import BrokenPlugin, UnknownName

if TYPE_CHECKING:
    from benchledger.harness.agents.fake import FakeModelAgent
    from benchledger.harness.agents.model import ModelAgent
    from benchledger.harness.agents.scripted import ScriptedAgent

# The agents themselves load on first use: the scripted one brings the MCP stack, and a
# run's options (``--agent`` among them) are checked before that (cli/run.py).
_LAZY = {
    "FakeModelAgent": "benchledger.harness.agents.fake",
    "ModelAgent": "benchledger.harness.agents.model",
    "ScriptedAgent": "benchledger.harness.agents.scripted",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def from_spec(
    spec: str,
    *,
    transport: ModelTransport | None = None,
    params: Mapping[str, Any] | None = None,
    settings: Settings | None = None,
    base_url: str = "",
    rpm: int = 0,
    tpm: int = 0,
    time_scale: float = 1.0,
) -> Agent:
    """The agent a spec ``NAME[:MODEL]`` names, made by the model provider registered as NAME
    (``harness.agents.provider.MODELS``: scripted, fake[:S], anthropic:M, openai:M@URL,
    recorded:DIR, and any an installed package adds).

    ValueError in one line for an unknown provider (listing the known ones), one whose
    plugin cannot be loaded, or a spec the provider cannot serve (a missing key, an
    unusable DIR).

    A given ``transport`` replaces the provider's own (replay passes a ``LogTransport``):
    ``fake:*`` then keeps the fake's model name, ``anthropic:M`` / ``openai:M[@URL]`` use M.
    Otherwise a model spec builds its provider's transport with the key from ``settings``
    (the command line's; None: no keys), the server from ``base_url`` (or the spec's
    ``@URL``, or ``ANTHROPIC_BASE_URL``) and a limiter for ``rpm``/``tpm``; Anthropic
    requests get ``max_tokens`` 4096 unless ``params`` set it, so the default is recorded.
    ``recorded:RUN_DIR`` re-enacts a recorded run, its latencies times ``time_scale``.
    """
    name, _, model = spec.partition(":")
    try:
        provider = MODELS.lookup(name)
    except UnknownName as exc:
        raise ValueError(_unknown(spec, exc.known)) from None
    except BrokenPlugin as exc:
        raise ValueError(f"--agent {spec!r}: {exc}") from None
    request = AgentRequest(spec, model, transport, params, settings, base_url, rpm, tpm,
                           time_scale)  # fmt: skip
    return provider.agent(request)


def check_spec(spec: str) -> None:
    """ValueError in one line when no installed model provider is called as ``spec`` names
    (listing the known ones); loads no provider, so it costs no SDK import."""
    known = MODELS.names()
    if spec.partition(":")[0] not in known:
        raise ValueError(_unknown(spec, known))


def _unknown(spec: str, known: tuple[str, ...]) -> str:
    return f"--agent {spec!r}: no such model provider (known: {', '.join(known)})"


async def preflight(agent: Agent) -> None:
    """Check a model agent's endpoint with one minimal request before a run writes anything.

    PreflightFailed (one line, never the key) when it is unreachable, refuses the key or
    has no such model or path; agents that call no real model pass without a request.
    """
    from benchledger.harness.agents.model import ModelAgent

    if isinstance(agent, ModelAgent):
        await agent.preflight()


__all__ = [
    "MODELS",
    "Agent",
    "AgentRequest",
    "Episode",
    "FakeModelAgent",
    "ModelAgent",
    "ModelProvider",
    "ScriptedAgent",
    "ToolCall",
    "Turn",
    "UnitInfo",
    "check_spec",
    "from_spec",
    "preflight",
]
