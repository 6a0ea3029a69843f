"""Agents, made from an ``--agent`` spec by ``from_spec``: scripted (no model), fake, model
agents over a transport (Anthropic, OpenAI-compatible), and recorded (a peer run re-enacted).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import urlsplit

from benchledger.harness.agents.base import Agent, Episode, ToolCall, Turn, UnitInfo
from benchledger.harness.agents.fake import FakeModelAgent
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.agents.scripted import ScriptedAgent
from benchledger.harness.models.limiter import RateLimiter
from benchledger.harness.models.transport import ModelTransport
from benchledger.harness.settings import Settings

FAKE_MODEL = "fake-model"
_OPENAI_URL = re.compile(r"^(?P<model>.+)@(?P<url>https?://\S+)$")


def _model_spec(spec: str, base_url: str) -> tuple[str, str, str]:
    """(provider, model, server URL) of ``anthropic:MODEL`` or ``openai:MODEL@URL``."""
    provider, _, rest = spec.partition(":")
    m = _OPENAI_URL.match(rest) if provider == "openai" else None
    model, url = (m["model"], m["url"]) if m else (rest, base_url)
    if not model:
        raise ValueError(f"--agent {spec}: name the model, e.g. {provider}:MODEL")
    parts = urlsplit(url)
    if url and (parts.username or parts.password or parts.query):
        # The spec is recorded in the ledger: a key in it would be a key in the ledger.
        which = "ANTHROPIC_API_KEY" if provider == "anthropic" else "OPENAI_API_KEY"
        raise ValueError(
            f"--agent {provider}:{model}: the server URL must not carry credentials or a "
            f"query; put the key in {which}"
        )
    return provider, model, url


def _model_transport(
    provider: str, model: str, url: str, conf: Settings, rpm: int, tpm: int
) -> ModelTransport:
    """The provider's transport; ValueError naming the variable when its key is missing."""
    # The provider modules are imported here, each when its client is built: the anthropic
    # SDK alone takes about a second to import, and the scripted and fake agents (and
    # replay from the log) never build a provider client.
    limiter = RateLimiter(rpm, tpm) if rpm or tpm else None
    if provider == "anthropic":
        from benchledger.harness.models.anthropic import AnthropicTransport

        if not conf.anthropic_api_key:
            raise ValueError(f"--agent anthropic:{model} needs an API key: set ANTHROPIC_API_KEY")
        return AnthropicTransport(
            model,
            api_key=conf.anthropic_api_key,
            base_url=url or conf.anthropic_base_url or None,
            limiter=limiter,
        )
    if not url:
        raise ValueError(
            f"--agent openai:{model}: name the server, openai:{model}@BASE_URL "
            "(e.g. http://127.0.0.1:8000/v1) or --base-url"
        )
    from benchledger.harness.models.openai import OpenAICompatTransport

    return OpenAICompatTransport(model, base_url=url, api_key=conf.openai_api_key, limiter=limiter)


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
    """The agent a spec names (scripted, fake[:S], anthropic:M, openai:M@URL, recorded:DIR).

    ValueError if none, or if the spec cannot be served (a missing key, an unusable DIR).

    A given ``transport`` replaces the spec's own (replay passes a ``LogTransport``):
    ``fake:*`` then keeps the fake's model name, ``anthropic:M`` / ``openai:M[@URL]`` use M.
    Otherwise a model spec builds its provider's transport with the key from ``settings``
    (the command line's; None: no keys), the server from ``base_url`` (or the spec's
    ``@URL``, or ``ANTHROPIC_BASE_URL``) and a limiter for ``rpm``/``tpm``; Anthropic
    requests get ``max_tokens`` 4096 unless ``params`` set it, so the default is recorded.
    ``recorded:RUN_DIR`` re-enacts a recorded run, its latencies times ``time_scale``.
    """
    if spec == "scripted":
        if params or base_url or rpm or tpm:
            raise ValueError(
                "--agent scripted calls no model: --base-url, --rpm, --tpm and sampling "
                "options need a model agent"
            )
        return ScriptedAgent()
    if spec == "fake" or spec.startswith("fake:"):
        delay = spec.partition(":")[2] or "0.3"
        try:
            delay_s = float(delay)
        except ValueError:
            raise ValueError(f"--agent {spec}: the fake model's delay must be seconds") from None
        if not (math.isfinite(delay_s) and delay_s >= 0):  # nan and inf pass float()
            raise ValueError(f"--agent {spec}: the fake model's delay must be 0 or more seconds")
        if transport is not None:
            return ModelAgent(transport, model=FAKE_MODEL, params=params, name=f"fake:{FAKE_MODEL}")
        return FakeModelAgent(delay_s, params=params)
    if spec.startswith(("anthropic:", "openai:")):
        provider, model, url = _model_spec(spec, base_url)
        if transport is None:
            conf = settings if settings is not None else Settings()
            transport = _model_transport(provider, model, url, conf, rpm, tpm)
            if provider == "anthropic":
                from benchledger.harness.models.anthropic import DEFAULT_MAX_TOKENS

                params = {"max_tokens": DEFAULT_MAX_TOKENS, **(params or {})}
        return ModelAgent(transport, model=model, params=params, name=spec)
    if spec.startswith("recorded:"):
        # Imported here: the recorded agent reads a peer run's files, nothing else needs it.
        from benchledger.harness.agents.recorded import recorded_agent

        if transport is None and (base_url or rpm or tpm):
            raise ValueError(
                f"--agent {spec} plays recorded turns and calls no model: --base-url, --rpm "
                "and --tpm do not apply to it"
            )
        return recorded_agent(spec, transport=transport, params=params, time_scale=time_scale)
    raise ValueError(
        f"--agent {spec!r}: use scripted or fake[:DELAY_S], a model: anthropic:MODEL, "
        "openai:MODEL@BASE_URL, or a recorded run: recorded:RUN_DIR"
    )


async def preflight(agent: Agent) -> None:
    """Check a model agent's endpoint with one minimal request before a run writes anything.

    PreflightFailed (one line, never the key) when it is unreachable, refuses the key or
    has no such model or path; agents that call no real model pass without a request.
    """
    if isinstance(agent, ModelAgent):
        await agent.preflight()


__all__ = [
    "Agent",
    "Episode",
    "FakeModelAgent",
    "ModelAgent",
    "ScriptedAgent",
    "ToolCall",
    "Turn",
    "UnitInfo",
    "from_spec",
    "preflight",
]
