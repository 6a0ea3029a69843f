"""What both fake provider servers share: the fault menu, the request record, the loopback."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from benchledger.harness.agents.fake import judge_reply
from benchledger.harness.models import preflight
from benchledger.refplatform.server import LoopbackServer
from tests.fakes.brain import ScriptedBrain

# Faults a fake answers instead of (or before) a normal reply.
ERROR_FAULTS = ("rate_limited", "overloaded", "server_error", "unauthorized", "forbidden",
                "bad_request")  # fmt: skip
REPLY_FAULTS = ("refusal", "max_tokens")
FAULTS = (*ERROR_FAULTS, *REPLY_FAULTS, "slow")


@dataclass
class Fault:
    """One scripted misbehaviour, used once, by the first request ``when`` accepts (any if None).

    ``headers`` go on the error reply (``retry-after``, ``retry-after-ms``); ``slow``
    delays the normal reply by ``delay_s``. A fault is for the run's own requests, or,
    with ``preflight``, for the model preflight's request alone.
    """

    kind: str
    headers: dict[str, str] = field(default_factory=dict)
    when: Callable[[dict[str, Any]], bool] | None = None
    delay_s: float = 1.0
    preflight: bool = False

    def __post_init__(self) -> None:
        assert self.kind in FAULTS, self.kind


@dataclass(frozen=True)
class Seen:
    """A request as the server received it."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    raw: bytes


@dataclass(frozen=True)
class Reply:
    """A canned assistant turn: text and (name, arguments) tool calls."""

    text: str = ""
    tool_calls: tuple[tuple[str, dict[str, Any]], ...] = ()


class FakeProvider:
    """A provider API on a loopback port. Subclasses translate their wire format."""

    path = ""

    def __init__(
        self,
        brain: ScriptedBrain | None = None,
        *,
        replies: list[Reply] | None = None,
        key: str = "",
        models: tuple[str, ...] = (),
    ) -> None:
        self.brain = brain
        self.replies = list(replies or [])
        self.key = key  # when set, requests without it are refused with 401
        self.models = models  # when set, any other model is refused with the provider's 404
        self.faults: list[Fault] = []
        self.seen: list[Seen] = []  # the run's requests
        self.preflights: list[Seen] = []  # model preflight requests, answered apart
        self.answered = 0
        self.judged = 0  # requests answered as a judge
        self._lock = threading.Lock()
        self._server: LoopbackServer | None = None
        self.url = ""

    # -- scripting ---------------------------------------------------------------------------

    def fail(self, *faults: Fault | str) -> None:
        """Queue faults (kinds or Fault objects); each is used by one request."""
        with self._lock:
            self.faults += [f if isinstance(f, Fault) else Fault(f) for f in faults]

    def _take_fault(self, body: dict[str, Any], for_preflight: bool = False) -> Fault | None:
        with self._lock:
            for i, fault in enumerate(self.faults):
                if fault.preflight == for_preflight and (fault.when is None or fault.when(body)):
                    return self.faults.pop(i)
        return None

    def _next_turn(
        self, system: str, messages: list[dict[str, Any]], params: dict[str, Any] | None = None
    ) -> Reply:
        # A judge's request (one user message filled from a judge prompt) is judged by the
        # fake judge's rule (harness/agents/fake.py ``judge_reply``), before any canned reply.
        one = len(messages) == 1 and not system
        said = judge_reply(str(messages[0]["text"]), params) if one else None
        if said is not None:
            with self._lock:
                self.judged += 1
            return Reply(said)
        with self._lock:
            if self.replies:
                return self.replies.pop(0)
        assert self.brain is not None, "the fake has neither canned replies nor a brain"
        turn = self.brain.decide(system, messages)
        return Reply(turn.text, tuple((c.name, dict(c.arguments)) for c in turn.tool_calls))

    # -- wire format (subclasses) --------------------------------------------------------------

    def conversation(self, body: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
        """(system prompt, neutral messages) of a request body."""
        raise NotImplementedError

    def authorized(self, headers: dict[str, str]) -> bool:
        raise NotImplementedError

    def error(self, fault: Fault) -> Response:
        raise NotImplementedError

    def unknown_model(self, model: str) -> Response:
        """The provider's 404 for a model it does not serve."""
        raise NotImplementedError

    def reply(self, body: dict[str, Any], turn: Reply, ending: str) -> dict[str, Any]:
        """The success body for ``turn``; ``ending`` is "", "refusal" or "max_tokens"."""
        raise NotImplementedError

    # -- serving -------------------------------------------------------------------------------

    async def _handle(self, request: Request) -> Response:
        raw = await request.body()
        body = json.loads(raw)
        system, messages = self.conversation(body)
        first = next((m["text"] for m in messages if m["role"] == "user"), None)
        is_preflight = first == preflight.PROMPT and not system
        seen = Seen(request.url.path, dict(request.headers), body, raw)
        (self.preflights if is_preflight else self.seen).append(seen)
        if self.key and not self.authorized(dict(request.headers)):
            return self.error(Fault("unauthorized"))
        if self.models and body.get("model") not in self.models:
            return self.unknown_model(str(body.get("model")))
        if is_preflight:  # answered without a canned reply, the brain or a run's fault
            fault = self._take_fault(body, for_preflight=True)
            if fault is not None and fault.kind in ERROR_FAULTS:
                return self.error(fault)
            return JSONResponse(self.reply(body, Reply("ok"), ""))
        fault = self._take_fault(body)
        ending = ""
        if fault is not None:
            if fault.kind in ERROR_FAULTS:
                return self.error(fault)
            if fault.kind == "slow":
                await asyncio.sleep(fault.delay_s)
            else:
                ending = fault.kind
        turn = Reply("") if ending == "refusal" else self._next_turn(system, messages, body)
        self.answered += 1
        return JSONResponse(self.reply(body, turn, ending))

    def app(self) -> Starlette:
        return Starlette(routes=[Route(self.path, self._handle, methods=["POST"])])

    def start(self) -> FakeProvider:
        self._server = LoopbackServer(self.app())
        self._server.start()
        self.url = self._server.url
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.stop()

    def __enter__(self) -> FakeProvider:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
