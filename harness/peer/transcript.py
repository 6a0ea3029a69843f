"""An episode's transcript (``<protocol>-<stage>-<email>.json``) in the peer's turn format.

Assistant turns carry ``text`` and ``tool_calls`` (``id``, ``name``, ``args``); user turns
carry ``tool_results`` (``call_id``, ``text``, ``is_error``). Read as a ``RecordedEpisode``
to play back, or as the session calls an import records (``walk``: one reading for the
lifecycle transcripts and the tasks bench's, which differ only in their header, tool names
and how a result is recorded).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from benchledger.harness.peer.files import peer_json
from benchledger.harness.peer.results import Fields
from benchledger.ledger import UnusableInput
from benchledger.ledger.events import SessionCallBody

USAGE_KEYS: Final = ("input_tokens", "output_tokens", "cache_read_tokens", "cache_creation_tokens")
# claude-cli names an MCP tool mcp__<server>__<tool>; the platform was called with <tool>.
_CLIENT_PREFIX: Final = re.compile(r"^mcp__[A-Za-z0-9_-]+?__(?=.)")


@dataclass(frozen=True)
class RecordedTurn:
    """One assistant turn of a transcript: its text and tool calls ``(id, name, args)``."""

    text: str
    calls: tuple[tuple[str, str, dict[str, Any]], ...] = ()


@dataclass(frozen=True)
class RecordedEpisode:
    """One recorded episode: its turns, tool results, final answer, wall time and usage."""

    stage: str
    turns: tuple[RecordedTurn, ...]
    results: tuple[str, ...]  # every tool result text, in transcript order
    final_answer: str
    wall_ms: float = 0.0
    usage: Mapping[str, int] = field(default_factory=dict)
    source: str = ""  # the transcript file, for notes

    @classmethod
    def from_transcript(
        cls,
        stage: str,
        transcript: list[dict[str, Any]],
        *,
        final_answer: str | None = None,
        wall_ms: float = 0.0,
        usage: Mapping[str, int] | None = None,
        source: str = "",
    ) -> RecordedEpisode:
        """From the peer's transcript turns (assistant ``tool_calls``, user ``tool_results``).

        ValueError naming ``source`` when a turn is not of that shape.
        """
        if not isinstance(transcript, list):
            raise ValueError(f"{source or 'transcript'}: the transcript is not a list of turns")
        turns, results = [], []
        for n, msg in enumerate(transcript):
            try:
                if msg.get("role") == "assistant":
                    calls = tuple(
                        (str(c["id"]), str(c["name"]), dict(c.get("args") or {}))
                        for c in msg.get("tool_calls") or []
                    )
                    turns.append(RecordedTurn(str(msg.get("text") or ""), calls))
                results += [str(r["text"]) for r in msg.get("tool_results") or []]
            except (AttributeError, KeyError, TypeError, ValueError) as exc:
                raise ValueError(
                    f"{source or 'transcript'}: turn {n} is not a transcript turn ({exc!r})"
                ) from None
        if final_answer is None:
            final_answer = turns[-1].text if turns and not turns[-1].calls else ""
        return cls(stage, tuple(turns), tuple(results), final_answer, wall_ms,
                   dict(usage or {}), source)  # fmt: skip


def session_calls(
    folder: str | None, pid: str, stage: str, email: str
) -> tuple[str, tuple[SessionCallBody, ...]]:
    """The episode's first user prompt and its tool calls; nothing when there is no file."""
    if folder is None:
        return "", ()
    path = os.path.join(folder, f"{pid}-{stage}-{email}.json")
    if not os.path.isfile(path):
        return "", ()
    try:
        data = peer_json(path)
    except (OSError, ValueError) as exc:
        raise UnusableInput(path, f"unreadable transcript ({exc})") from None
    turns, calls = walk(Fields(path, "transcript"), data, stage)
    return _first_user_text(turns), calls


def walk(
    f: Fields,
    data: Any,
    episode: str,
    *,
    belongs: Mapping[str, Any] | None = None,
    whose: str = "",
    client_names: bool = False,
    as_content: bool = False,
) -> tuple[list[dict[str, Any]], tuple[SessionCallBody, ...]]:
    """A transcript file's turns and its tool calls as ``episode``'s session calls, in order.

    Each call carries the text its ``tool_results`` entry (by ``call_id``) returned.
    ``belongs``: header fields the file must carry (it is ``whose``'s, not another's);
    ``client_names``: strip a client's ``mcp__<server>__`` prefix from tool names;
    ``as_content``: the text as an MCP text block (``content``), else as ``result``.
    UnusableInput naming the file and field when it is not of that shape.
    """
    if not isinstance(data, dict):
        raise f.refuse("the top level must be an object with a transcript list")
    if belongs and any(data.get(k) != v for k, v in belongs.items()):
        theirs = " ".join(f"{k} {data.get(k)!r}" for k in belongs)
        ours = " ".join(f"{k} {v!r}" for k, v in belongs.items())
        raise f.refuse(f"it is {theirs}, not {whose}'s {ours}")
    turns = f.items(data, "transcript", "")
    results: dict[str, tuple[str, bool]] = {}
    for t, turn in enumerate(turns):
        for n, res in enumerate(f.items(turn, "tool_results", f"transcript[{t}]")):
            where = f"transcript[{t}].tool_results[{n}]"
            results[f.text(res, "call_id", where)] = (
                f.text(res, "text", where),
                bool(f.flag(res, "is_error", where)),
            )
    calls = []
    for t, turn in enumerate(turns):
        for n, call in enumerate(f.items(turn, "tool_calls", f"transcript[{t}]")):
            where = f"transcript[{t}].tool_calls[{n}]"
            args = call.get("args")
            if args is not None and not isinstance(args, dict):
                raise f.refuse(f"{where}.args must be an object or null")
            text, err = results.get(f.text(call, "id", where), ("", False))
            name = f.text(call, "name", where)
            returned: dict[str, Any] = (
                {"content": [{"type": "text", "text": text}]} if as_content else {"result": text}
            )
            calls.append(
                SessionCallBody(
                    episode=episode,
                    method="tools/call",
                    tool=_CLIENT_PREFIX.sub("", name) if client_names else name,
                    arguments=dict(args or {}),
                    is_error=err,
                    **returned,
                )
            )
    return turns, tuple(calls)


def texts(f: Fields, turns: list[dict[str, Any]]) -> list[str]:
    """What a transcript says beyond its tool calls, in order: each turn's own ``text`` (the
    prompt, the model's prose) and the text of a tool result no call asked for; the rest of
    the peer's ``transcript_text`` (each call's arguments, each result) is in the calls."""
    asked = {
        call.get("id")
        for t, turn in enumerate(turns)
        for call in f.items(turn, "tool_calls", f"transcript[{t}]")
    }
    out = []
    for t, turn in enumerate(turns):
        text = f.text(turn, "text", f"transcript[{t}]")
        if text:
            out.append(text)
        for res in f.items(turn, "tool_results", f"transcript[{t}]"):
            if res.get("call_id") not in asked and isinstance(res.get("text"), str) and res["text"]:
                out.append(res["text"])
    return out


def _first_user_text(turns: list[dict[str, Any]]) -> str:
    for turn in turns:
        if turn.get("role") == "user" and isinstance(turn.get("text"), str):
            return str(turn["text"])
    return ""
