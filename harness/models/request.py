"""The canonical model request: built in one place, hashed in one way.

A request is provider-neutral (transports translate it to their wire format) and
holds everything that decides a model's reply: model, system prompt, messages, tools
with their schemas, tool choice and every sampling parameter. Its hash is what replay
serves recorded responses by, so nothing volatile and nothing secret may enter it.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import blake3
import msgspec

from benchledger.ledger.codec import canonical_json


class ToolSpec(msgspec.Struct, frozen=True):
    """A tool as the model sees it (the platform session's listing)."""

    name: str
    description: str
    input_schema: dict[str, Any]


# omit_defaults: a field added later with a default leaves every earlier request's
# JSON, and so its hash, unchanged; recorded runs stay replayable.
class CanonicalRequest(msgspec.Struct, frozen=True, omit_defaults=True):
    """One model call's full input, provider-neutral; build it with ``build_request``."""

    model: str
    system: str
    messages: list[dict[str, Any]]
    tools: list[ToolSpec]
    tool_choice: str = "auto"
    params: dict[str, Any] = {}


# Words that mark a parameter as a credential. Matched against the key split on "_"
# (after lower-casing, "-" read as "_"), so "max_tokens" is not a "token".
_SECRET_WORDS: Final = frozenset(
    {"key", "apikey", "token", "authorization", "auth", "bearer", "secret", "password",
     "credential", "credentials", "cookie"}
)  # fmt: skip
_NOT_SECRETS: Final = frozenset({"prompt_cache_key"})  # routing hint, not a credential


def looks_like_credential(key: str) -> bool:
    """Whether a parameter name looks like it carries a secret (api_key, x-api-key, ...)."""
    norm = key.lower().replace("-", "_")
    return norm not in _NOT_SECRETS and not _SECRET_WORDS.isdisjoint(norm.split("_"))


def _credential_paths(value: Any, path: str) -> list[str]:
    """Dotted paths of credential-looking keys anywhere in ``value`` (headers nest)."""
    found: list[str] = []
    if isinstance(value, Mapping):
        for k, v in value.items():
            here = f"{path}.{k}" if path else str(k)
            if looks_like_credential(str(k)):
                found.append(here)
            found += _credential_paths(v, here)
    elif isinstance(value, list | tuple):
        for i, v in enumerate(value):
            found += _credential_paths(v, f"{path}[{i}]")
    return found


def _tool(tool: ToolSpec | Mapping[str, Any]) -> ToolSpec:
    if isinstance(tool, ToolSpec):
        return ToolSpec(tool.name, tool.description, msgspec.to_builtins(tool.input_schema))
    return ToolSpec(
        name=str(tool["name"]),
        description=str(tool.get("description") or ""),
        input_schema=msgspec.to_builtins(tool.get("input_schema") or {}),
    )


def build_request(
    model: str,
    system: str,
    messages: Iterable[Mapping[str, Any]],
    tools: Iterable[ToolSpec | Mapping[str, Any]],
    *,
    params: Mapping[str, Any] | None = None,
    tool_choice: str = "auto",
) -> CanonicalRequest:
    """The one constructor of a request; deep-copies its inputs; ValueError on a credential param.

    ``tools`` are the session's ``{name, description, input_schema}`` dicts (or
    ToolSpecs), kept in the platform's order. Messages and params are copied into
    plain JSON values, so mutating the caller's objects later cannot change the request.
    """
    params = dict(params or {})
    secrets = _credential_paths(params, "")
    if secrets:
        raise ValueError(
            f"model params {', '.join(secrets)} look like credentials; a request is recorded "
            "in the ledger, so pass keys to the transport (environment or client), "
            "never as request params"
        )
    return CanonicalRequest(
        model=model,
        system=system,
        # to_builtins builds new containers all the way down: a deep copy into JSON shapes.
        messages=msgspec.to_builtins([dict(m) for m in messages]),
        tools=[_tool(t) for t in tools],
        tool_choice=tool_choice,
        params=msgspec.to_builtins(params),
    )


def request_json(request: CanonicalRequest) -> dict[str, Any]:
    """The request as the plain dict a ``model_call`` event records in ``request``."""
    out: dict[str, Any] = msgspec.to_builtins(request)
    return out


def request_hash(request: CanonicalRequest) -> str:
    """blake3 hex of the request's canonical JSON; replay serves responses by it."""
    return blake3.blake3(canonical_json(request_json(request))).hexdigest()
