"""benchledger's own model providers, each a ``ModelProvider`` registered by name in
``harness.agents.provider.MODELS``: scripted (no model), fake (a local fake model), the
Anthropic API, any OpenAI-compatible server, and a recorded peer run re-enacted.

The provider SDKs are imported inside each provider, when its client is built: the
anthropic SDK alone takes about a second to import, and the scripted and fake agents (and
replay from the log) never build a provider client.
"""

from __future__ import annotations

import math
import re
from typing import Final
from urllib.parse import urlsplit

from benchledger.harness.agents import answering
from benchledger.harness.agents.base import Agent
from benchledger.harness.agents.fake import FakeModelAgent
from benchledger.harness.agents.model import ModelAgent
from benchledger.harness.agents.provider import AgentRequest, ModelProvider
from benchledger.harness.agents.scripted import ScriptedAgent
from benchledger.harness.models.limiter import RateLimiter
from benchledger.harness.settings import Settings

FAKE_MODEL: Final = "fake-model"
_OPENAI_URL: Final = re.compile(r"^(?P<model>.+)@(?P<url>https?://\S+)$")


def _scripted(r: AgentRequest) -> Agent:
    if r.model:
        raise ValueError(f"--agent {r.spec}: the scripted agent takes no model: --agent scripted")
    if r.params or r.base_url or r.rpm or r.tpm:
        raise ValueError(
            "--agent scripted calls no model: --base-url, --rpm, --tpm and sampling "
            "options need a model agent"
        )
    return ScriptedAgent()


def _retrieval(r: AgentRequest) -> Agent:
    from benchledger.harness.agents.retrieval import RetrievalAgent

    if r.model:
        raise ValueError(
            f"--agent {r.spec}: the retrieval reader takes no model: --agent retrieval"
        )
    if r.params or r.base_url or r.rpm or r.tpm:
        raise ValueError(
            "--agent retrieval calls no model: --base-url, --rpm, --tpm and sampling "
            "options need a model agent"
        )
    return RetrievalAgent()  # a replay's transport, when given, is never used: no model


def _no_memory(r: AgentRequest) -> Agent:
    """``no-memory``: the reader without a search; ``no-memory:SPEC``: SPEC's model
    answering each LoCoMo question from no memories."""
    from benchledger.harness.agents.retrieval import RetrievalAgent

    if not r.model:
        if r.params or r.base_url or r.rpm or r.tpm:
            raise ValueError(
                "--agent no-memory (the reader) calls no model: --base-url, --rpm, --tpm and "
                "sampling options need a model, --agent no-memory:openai:MODEL@URL"
            )
        return RetrievalAgent(search=False, name=r.spec)
    return _control(r, answering.NONE)


def _full_context(r: AgentRequest) -> Agent:
    """``full-context:SPEC``: SPEC's model answering from the whole conversation."""
    if not r.model:
        raise ValueError(
            f"--agent {r.spec}: the full-context control is a model given the conversation: "
            "name it, e.g. --agent full-context:openai:MODEL@URL"
        )
    return _control(r, answering.FULL)


def _control(r: AgentRequest, memory: str) -> Agent:
    """The model agent the spec after the control's name makes, answering as ``memory``."""
    from benchledger.harness import agents

    inner = agents.from_spec(
        r.model, transport=r.transport, params=r.params, settings=r.settings,
        base_url=r.base_url, rpm=r.rpm, tpm=r.tpm,
    )  # fmt: skip
    if not isinstance(inner, ModelAgent) or not inner.answers:
        raise ValueError(
            f"--agent {r.spec}: a control needs a model agent after its name "
            "(anthropic:MODEL, openai:MODEL@URL)"
        )
    inner.memory, inner.name = memory, r.spec
    return inner


def _calibration(r: AgentRequest) -> Agent:
    from benchledger.harness.agents.calibration import CalibrationAgent

    if r.model or r.params or r.base_url or r.rpm or r.tpm:
        raise ValueError(
            f"--agent {r.spec}: the calibration agent plants answers and calls no model: "
            "--agent calibration, with no model options"
        )
    return CalibrationAgent()


def _fake(r: AgentRequest) -> Agent:
    delay = r.model or "0.3"
    try:
        delay_s = float(delay)
    except ValueError:
        raise ValueError(f"--agent {r.spec}: the fake model's delay must be seconds") from None
    if not (math.isfinite(delay_s) and delay_s >= 0):  # nan and inf pass float()
        raise ValueError(f"--agent {r.spec}: the fake model's delay must be 0 or more seconds")
    if r.transport is not None:  # served from the log: the fake's model name, as recorded
        return ModelAgent(r.transport, model=FAKE_MODEL, params=r.params,
                          name=f"fake:{FAKE_MODEL}", answers=False)  # fmt: skip
    return FakeModelAgent(delay_s, params=r.params)


def _server(r: AgentRequest, provider: str, key_var: str) -> tuple[str, str]:
    """(model, server URL) of ``PROVIDER:MODEL`` (``openai:MODEL@URL`` names its server)."""
    m = _OPENAI_URL.match(r.model) if provider == "openai" else None
    model, url = (m["model"], m["url"]) if m else (r.model, r.base_url)
    if not model:
        raise ValueError(f"--agent {r.spec}: name the model, e.g. {provider}:MODEL")
    parts = urlsplit(url)
    if url and (parts.username or parts.password or parts.query):
        # The spec is recorded in the ledger: a key in it would be a key in the ledger.
        raise ValueError(
            f"--agent {provider}:{model}: the server URL must not carry credentials or a "
            f"query; put the key in {key_var}"
        )
    return model, url


def _limiter(r: AgentRequest) -> RateLimiter | None:
    return RateLimiter(r.rpm, r.tpm) if r.rpm or r.tpm else None


def _anthropic(r: AgentRequest) -> Agent:
    model, url = _server(r, "anthropic", "ANTHROPIC_API_KEY")
    if r.transport is not None:
        return ModelAgent(r.transport, model=model, params=r.params, name=r.spec)
    from benchledger.harness.models.anthropic import DEFAULT_MAX_TOKENS, AnthropicTransport

    conf = r.settings if r.settings is not None else Settings()
    if not conf.anthropic_api_key:
        raise ValueError(f"--agent anthropic:{model} needs an API key: set ANTHROPIC_API_KEY")
    transport = AnthropicTransport(model, api_key=conf.anthropic_api_key,
                                   base_url=url or conf.anthropic_base_url or None,
                                   limiter=_limiter(r))  # fmt: skip
    # The default reply limit is a request parameter: set here, it is recorded.
    params = {"max_tokens": DEFAULT_MAX_TOKENS, **(r.params or {})}
    return ModelAgent(transport, model=model, params=params, name=r.spec)


def _openai(r: AgentRequest) -> Agent:
    model, url = _server(r, "openai", "OPENAI_API_KEY")
    if r.transport is not None:
        return ModelAgent(r.transport, model=model, params=r.params, name=r.spec)
    if not url:
        raise ValueError(
            f"--agent openai:{model}: name the server, openai:{model}@BASE_URL "
            "(e.g. http://127.0.0.1:8000/v1) or --base-url"
        )
    from benchledger.harness.models.openai import OpenAICompatTransport

    conf = r.settings if r.settings is not None else Settings()
    transport = OpenAICompatTransport(model, base_url=url, api_key=conf.openai_api_key,
                                      limiter=_limiter(r))  # fmt: skip
    return ModelAgent(transport, model=model, params=r.params, name=r.spec)


def _recorded(r: AgentRequest) -> Agent:
    # Imported here: the recorded agent reads a peer run's files, nothing else needs it.
    from benchledger.harness.agents.recorded import recorded_agent

    if r.transport is None and (r.base_url or r.rpm or r.tpm):
        raise ValueError(
            f"--agent {r.spec} plays recorded turns and calls no model: --base-url, --rpm "
            "and --tpm do not apply to it"
        )
    return recorded_agent(r.spec, transport=r.transport, params=r.params,
                          time_scale=r.time_scale)  # fmt: skip


SCRIPTED: Final = ModelProvider(_scripted, "scripted", "the scripted agent: no model (default)")
RETRIEVAL: Final = ModelProvider(
    _retrieval, "retrieval", "the retrieval reader: no model, answers from the search's best span"
)
CALIBRATION: Final = ModelProvider(
    _calibration, "calibration", "a judge calibration set's planted answers: no model"
)
FAKE: Final = ModelProvider(_fake, "fake[:DELAY_S]", "a local fake model (no network)")
ANTHROPIC: Final = ModelProvider(
    _anthropic, "anthropic:MODEL", "the Anthropic API (key: $ANTHROPIC_API_KEY)"
)
OPENAI: Final = ModelProvider(
    _openai,
    "openai:MODEL@BASE_URL",
    "an OpenAI-compatible server (key, if it needs one: $OPENAI_API_KEY)",
)
NO_MEMORY: Final = ModelProvider(
    _no_memory,
    "no-memory[:SPEC]",
    "LoCoMo control: the reader without a search, or SPEC's model answering from no memories",
)
FULL_CONTEXT: Final = ModelProvider(
    _full_context,
    "full-context:SPEC",
    "LoCoMo control: SPEC's model answering from the whole conversation (cut to a budget)",
)
RECORDED: Final = ModelProvider(
    _recorded, "recorded:RUN_DIR", "a recorded peer run, re-enacted turn by turn"
)
