"""The loopback LLM endpoint mem0's fact extraction calls: the operator's model, recorded.

With ``--mem0-llm SPEC`` mem0 stores what its own LLM extracts from each write
(``infer=True``) instead of the text as given (docs/mem0.md). mem0 never holds a key and
never reaches a model itself: its LLM is mem0's ``openai`` provider pointed at this
endpoint, an OpenAI-compatible ``POST /v1/chat/completions`` on 127.0.0.1 (an ephemeral
port) that takes only a per-runtime random bearer token (a secret: the session scrubs it
from everything the server sends). Each request is answered through the harness's own
model transport for SPEC (the same specs ``--agent`` takes) and recorded as a
``model_call`` in the stream and episode of the session call in flight: mem0's server
handles one call at a time, and ``serving`` holds the endpoint to one call at a time too,
so the call that caused a request is always known.

A model that cannot be reached is an infrastructure failure of the call that needed it,
raised there (never a tool error the agent would read).
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any, Final

from benchledger.harness.errors import InfraError
from benchledger.harness.models.errors import PreflightFailed
from benchledger.harness.models.request import (
    CanonicalRequest,
    build_request,
    request_hash,
    request_json,
)
from benchledger.harness.models.response import ModelResponse, response_json
from benchledger.harness.models.transport import ModelTransport
from benchledger.harness.platforms.base import Observer
from benchledger.ledger.events import ModelCallBody

PATH: Final = "/v1/chat/completions"
# The sampling parameters of mem0's requests that decide a reply and that every provider
# takes: carried into the canonical request (so recorded); mem0's others are dropped.
CARRIED: Final = ("temperature", "max_tokens")
MAX_BODY: Final = 8 * 1024 * 1024
PROVIDERS: Final = ("anthropic", "openai")


def canonical(body: Any, model: str, params: dict[str, Any]) -> CanonicalRequest:
    """mem0's chat-completions request as a canonical request to ``model``: its system
    messages joined as the system prompt, the rest as user and assistant turns; ValueError
    when it is not one."""
    if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
        raise ValueError("the request has no messages")
    system: list[str] = []
    turns: list[dict[str, Any]] = []
    for m in body["messages"]:
        role = m.get("role") if isinstance(m, dict) else None
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):  # content parts: their text
            content = "".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
        if role not in ("system", "user", "assistant") or not isinstance(content, str):
            raise ValueError(f"a message with role {role!r} is not a text message")
        if role == "system":
            system.append(content)
        else:
            turns.append({"role": role, "text": content})
    carried = {k: body[k] for k in CARRIED if isinstance(body.get(k), int | float)}
    return build_request(model, "\n\n".join(system), turns, [], params={**params, **carried})


def completion(response: ModelResponse, model: str) -> dict[str, Any]:
    """A response as the chat-completions reply mem0's OpenAI client reads."""
    usage = response.usage
    prompt = int(usage.get("input_tokens", 0)) + int(usage.get("cache_read_tokens", 0))
    done = int(usage.get("output_tokens", 0))
    return {
        "id": "chatcmpl-benchledger",
        "object": "chat.completion",
        "created": 0,
        "model": response.model or model,
        "choices": [{"index": 0, "finish_reason": "stop",
                     "message": {"role": "assistant", "content": response.text}}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": done,
                  "total_tokens": prompt + done},
    }  # fmt: skip


class Mem0Llm:
    """The endpoint (see the module docstring): ``url`` and ``token`` once started."""

    def __init__(
        self, transport: ModelTransport, *, model: str, params: dict[str, Any] | None = None
    ) -> None:
        self.transport = transport
        self.model = model
        self.params = dict(params or {})
        self.token = secrets.token_urlsafe(32)
        self.url = ""
        self._server: asyncio.Server | None = None
        self._lock = asyncio.Lock()
        self._observer: Observer | None = None
        self._failure: InfraError | None = None
        self._active = False  # a session call is in flight

    @asynccontextmanager
    async def running(self) -> AsyncIterator[Mem0Llm]:
        """Listen on 127.0.0.1 (an ephemeral port) until the context ends."""
        self._server = await asyncio.start_server(self._connection, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/v1"
        try:
            yield self
        finally:
            self._server.close()
            await self._server.wait_closed()

    async def preflight(self) -> None:
        """One minimal request to the model, as ``--agent``'s preflight makes (when its
        transport has one); InfraError ``refused`` naming ``--mem0-llm`` when it cannot
        serve the run, so a run is refused before anything is written."""
        check = getattr(self.transport, "preflight", None)
        if check is None:
            return
        try:
            await check()
        except PreflightFailed as exc:
            raise InfraError("refused", f"--mem0-llm: {exc}", retryable=False) from None

    @asynccontextmanager
    async def serving(self, observer: Observer | None) -> AsyncIterator[None]:
        """One session call in flight: its LLM requests are recorded with ``observer``; a
        model that failed it is raised when it returns."""
        async with self._lock:
            self._observer, self._failure, self._active = observer, None, True
            try:
                yield
            finally:
                self._observer, self._active = None, False
            if self._failure is not None:
                raise self._failure

    async def answer(self, body: Any) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON) for one request of mem0's, answered and recorded."""
        if not self._active:  # no call to record it with: nothing is answered unrecorded
            return 409, {"error": {"message": "no session call is in flight"}}
        try:
            request = canonical(body, self.model, self.params)
        except ValueError as exc:
            return 400, {"error": {"message": f"benchledger cannot serve this request: {exc}"}}
        rec = self._observer
        start = time.perf_counter()
        try:
            response = await self.transport.complete(request, observer=rec)  # type: ignore[arg-type]
        except InfraError as exc:
            # Said to mem0 as a request error (its client does not retry those); the call
            # that needed it fails as infrastructure, recorded where it happened.
            self._failure = exc
            return 400, {"error": {"message": f"the model failed: {exc.kind}"}}
        ms = (time.perf_counter() - start) * 1000
        append = getattr(rec, "append", None)
        if rec is not None and append is not None:
            body_ = ModelCallBody(
                episode=rec.episode,
                request_hash=request_hash(request),
                request=request_json(request),
                response=response_json(response),
                usage=dict(response.usage),
                latency_ms=round(ms, 3),
                stop_reason=response.stop_reason,
            )
            append(body_, rec.seqs[-1:])  # type: ignore[attr-defined]
        return 200, completion(response, self.model)

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """HTTP/1.1 with keep-alive: one request after another until the client closes."""
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, path = [*lines[0].split(" "), "", ""][:2]
                headers = {k.strip().lower(): v.strip()
                           for k, _, v in (h.partition(":") for h in lines[1:] if h)}  # fmt: skip
                size = int(headers.get("content-length") or 0)
                if size > MAX_BODY:
                    await _send(writer, 413, {"error": {"message": "request too large"}})
                    return
                raw = await reader.readexactly(size)
                if headers.get("authorization", "") != f"Bearer {self.token}":
                    status, out = 401, {"error": {"message": "not the endpoint's token"}}
                elif (method, path.split("?")[0]) != ("POST", PATH):
                    status, out = 404, {"error": {"message": f"only POST {PATH} is served"}}
                else:
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        body = None
                    status, out = await self.answer(body)
                await _send(writer, status, out)
        except (asyncio.IncompleteReadError, asyncio.LimitOverrunError, ConnectionError,
                ValueError):  # fmt: skip
            pass  # the client went away (or sent no HTTP): nothing to answer
        finally:
            writer.close()


async def _send(writer: asyncio.StreamWriter, status: int, out: dict[str, Any]) -> None:
    data = json.dumps(out).encode()
    reason = {200: "OK", 400: "Bad Request", 401: "Unauthorized", 404: "Not Found",
              409: "Conflict", 413: "Content Too Large"}.get(status, "")  # fmt: skip
    writer.write(f"HTTP/1.1 {status} {reason}\r\ncontent-type: application/json\r\n"
                 f"content-length: {len(data)}\r\n\r\n".encode() + data)  # fmt: skip
    await writer.drain()
