"""A small Anthropic Messages API (``POST /v1/messages``) on loopback, for the real SDK to call.

It answers from a scripted brain (or canned replies), can be told to fail (429 with
retry-after, 529 overloaded, 500, 401, 403, a slow reply) or to end a turn with a refusal
or at max_tokens, refuses models it was not told to serve (404 ``not_found_error``),
reports prompt-cache reads and writes for a cached system prompt, and keeps every
request it got (the model preflight's apart, in ``preflights``).
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse, Response

from tests.fakes.server import FakeProvider, Fault, Reply

_ERRORS = {
    "rate_limited": (429, "rate_limit_error", "Number of requests has exceeded your rate limit"),
    "overloaded": (529, "overloaded_error", "Overloaded"),
    "server_error": (500, "api_error", "Internal server error"),
    "unauthorized": (401, "authentication_error", "invalid x-api-key"),
    "forbidden": (403, "permission_error", "Your API key does not have permission to use it"),
    "bad_request": (400, "invalid_request_error", "messages: roles must alternate"),
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    return "".join(b.get("text", "") for b in content if b.get("type") == "text")


class FakeAnthropic(FakeProvider):
    path = "/v1/messages"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._cached: set[str] = set()

    def authorized(self, headers: dict[str, str]) -> bool:
        # The SDK sends the key as a bearer token (older versions: x-api-key).
        given = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        return given == self.key

    def conversation(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        system = body.get("system") or ""
        if isinstance(system, list):
            system = _text(system)
        out: list[dict[str, Any]] = []
        for m in body["messages"]:
            blocks = m["content"]
            if isinstance(blocks, str):
                blocks = [{"type": "text", "text": blocks}]
            if m["role"] == "assistant":
                calls = [{"id": b["id"], "name": b["name"], "arguments": b["input"]}
                         for b in blocks if b["type"] == "tool_use"]  # fmt: skip
                out.append({"role": "assistant", "text": _text(blocks), "tool_calls": calls})
                continue
            for b in blocks:
                if b["type"] == "tool_result":
                    out.append({"role": "tool", "call_id": b["tool_use_id"],
                                "text": _text(b.get("content", "")),
                                "is_error": bool(b.get("is_error"))})  # fmt: skip
                elif b["type"] == "text":
                    out.append({"role": "user", "text": b["text"]})
        return system, out

    def error(self, fault: Fault) -> Response:
        status, kind, message = _ERRORS[fault.kind]
        body = {"type": "error", "error": {"type": kind, "message": message}}
        return JSONResponse(body, status_code=status, headers=fault.headers)

    def _usage(self, body: dict[str, Any], raw_len: int, out_len: int) -> dict[str, int]:
        """Deterministic usage; a cache_control'd system prompt is written once, then read."""
        cached = 0
        created = 0
        system = body.get("system")
        if isinstance(system, list) and system and system[-1].get("cache_control"):
            prefix = json.dumps([body.get("tools"), system], sort_keys=True)
            if prefix in self._cached:
                cached = len(prefix) // 4
            else:
                self._cached.add(prefix)
                created = len(prefix) // 4
        return {
            "input_tokens": max(raw_len // 4 - cached - created, 1),
            "output_tokens": 1 + out_len // 4,
            "cache_read_input_tokens": cached,
            "cache_creation_input_tokens": created,
        }

    def unknown_model(self, model: str) -> Response:
        body = {"type": "error", "error": {"type": "not_found_error", "message": f"model: {model}"}}
        return JSONResponse(body, status_code=404)

    def reply(self, body: dict[str, Any], turn: Reply, ending: str) -> dict[str, Any]:
        content: list[dict[str, Any]] = []
        if turn.text:
            content.append({"type": "text", "text": turn.text})
        for i, (name, args) in enumerate(turn.tool_calls, 1):
            content.append({"type": "tool_use", "id": f"toolu_{self.answered:04d}_{i}",
                            "name": name, "input": args})  # fmt: skip
        stop = "tool_use" if turn.tool_calls else "end_turn"
        if ending == "max_tokens":
            # Cut off mid-way: the text so far and a tool call whose input never finished.
            content = [
                {"type": "text", "text": "FINAL ANSWER: 12"},
                {"type": "tool_use", "id": "toolu_cut", "name": "search", "input": {}},
            ]
            stop = "max_tokens"
        elif ending == "refusal":
            stop = "refusal"
        raw_len = len(json.dumps(body))
        return {
            "id": f"msg_fake_{self.answered:04d}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": self._usage(body, raw_len, len(json.dumps(content))),
        }
