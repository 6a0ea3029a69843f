"""A small OpenAI-compatible chat-completions API (``POST /v1/chat/completions``) on loopback.

The same brain, fault menu and request record as the Anthropic fake; a refusal ends with
``finish_reason: content_filter``, a cut-off with ``length``; an unknown model is a 404
``model_not_found``; a system prompt seen before is reported as cached prompt tokens.
"""

from __future__ import annotations

import json
from typing import Any

from starlette.responses import JSONResponse, Response

from tests.fakes.server import FakeProvider, Fault, Reply

_ERRORS = {
    "rate_limited": (429, "rate_limit_exceeded", "Rate limit reached"),
    "overloaded": (503, "server_overloaded", "The server is overloaded"),
    "server_error": (500, "server_error", "The server had an error"),
    "unauthorized": (401, "invalid_api_key", "Incorrect API key provided"),
    "forbidden": (403, "permission_denied", "You are not allowed to use this model"),
    "bad_request": (400, "invalid_request_error", "Invalid 'messages'"),
}
_ENDINGS = {"": None, "refusal": "content_filter", "max_tokens": "length"}


class FakeOpenAI(FakeProvider):
    path = "/v1/chat/completions"

    def __init__(self, *args: Any, **kw: Any) -> None:
        super().__init__(*args, **kw)
        self._seen_systems: set[str] = set()

    def authorized(self, headers: dict[str, str]) -> bool:
        return headers.get("authorization") == f"Bearer {self.key}"

    def conversation(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        system = ""
        out: list[dict[str, Any]] = []
        for m in body["messages"]:
            if m["role"] == "system":
                system = m["content"]
            elif m["role"] == "user":
                out.append({"role": "user", "text": m["content"]})
            elif m["role"] == "assistant":
                calls = [{"id": c["id"], "name": c["function"]["name"],
                          "arguments": json.loads(c["function"]["arguments"])}
                         for c in m.get("tool_calls") or ()]  # fmt: skip
                out.append({"role": "assistant", "text": m.get("content") or "",
                            "tool_calls": calls})  # fmt: skip
            elif m["role"] == "tool":
                out.append({"role": "tool", "call_id": m["tool_call_id"], "text": m["content"]})
        return system, out

    def error(self, fault: Fault) -> Response:
        status, code, message = _ERRORS[fault.kind]
        body = {"error": {"message": message, "type": code, "code": code}}
        return JSONResponse(body, status_code=status, headers=fault.headers)

    def unknown_model(self, model: str) -> Response:
        message = f"The model `{model}` does not exist or you do not have access to it."
        body = {"error": {"message": message, "type": "invalid_request_error",
                          "code": "model_not_found"}}  # fmt: skip
        return JSONResponse(body, status_code=404)

    def reply(self, body: dict[str, Any], turn: Reply, ending: str) -> dict[str, Any]:
        calls = [
            {"id": f"call_{self.answered:04d}_{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}
            for i, (name, args) in enumerate(turn.tool_calls, 1)
        ]  # fmt: skip
        message: dict[str, Any] = {"role": "assistant", "content": turn.text or None}
        finish = "tool_calls" if calls else "stop"
        if calls:
            message["tool_calls"] = calls
        if ending == "max_tokens":
            cut = {"id": "call_cut", "type": "function",
                   "function": {"name": "search", "arguments": '{"inte'}}  # fmt: skip
            message = {"role": "assistant", "content": "FINAL ANSWER: 12", "tool_calls": [cut]}
        finish = _ENDINGS[ending] or finish
        system = next((m["content"] for m in body["messages"] if m["role"] == "system"), "")
        cached = len(system) // 4 if system in self._seen_systems else 0
        self._seen_systems.add(system)
        prompt = len(json.dumps(body)) // 4
        return {
            "id": f"chatcmpl-{self.answered:04d}",
            "object": "chat.completion",
            "model": body["model"],
            "choices": [{"index": 0, "message": message, "finish_reason": finish}],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": 1 + len(json.dumps(message)) // 4,
                "total_tokens": prompt + 1 + len(json.dumps(message)) // 4,
                "prompt_tokens_details": {"cached_tokens": cached},
            },
        }
