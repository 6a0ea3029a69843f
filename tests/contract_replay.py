"""Replaying the peer's k=5 run against refplatform, and comparing result shapes.

The run's transcripts (``bench/results/s5-anthropic-k5/*/lifecycle-a3.json.transcripts``)
record every tool call the model made and the text the live platform answered. A pass
is replayed on one fresh platform over the peer's pack, episode by episode in the run
record's order, each episode in a fresh MCP session as its own identity; between a
protocol's recall and transfer episodes the reviewer's promotion is replayed as the
peer's harness did it (approve over REST, apply over MCP). Ids differ between the two
platforms, so ids the live platform handed out are mapped to ours (by the text they
came with) before a recorded call is sent.

A result's shape is checked against a schema learned from every recorded result of the
same tool: the JSON type at each path (``null`` on either side fits any type: it is Go's
empty slice, map or pointer),
the keys each object may have (seen in some recorded result) and must have (seen in all
of them), block by block (the tool's own block, then the enrichment blocks by kind).
"""

from __future__ import annotations

import glob
import json
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import yaml

from tests.platform_helpers import INSIGHTS, Driver, Reply, blocks

BUDGET_REFUSAL = "tool-call budget exhausted; no further tool calls are executed"
_CODE = re.compile(r"\(code: ([a-z_]+)\)")
_POOL = re.compile(r"bench-agent-(\d{3})@apikey\.local")
# The live Trino held a test schema the peer's pack does not create.
LIVE_ONLY_SCHEMA = re.compile(r"\be2e_test\b")


@dataclass(frozen=True)
class Diff:
    """One way a result differs from the recorded shapes of its tool."""

    tool: str
    kind: str  # "missing key", "extra key", "type", "error", "block", "header"
    path: str
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.tool} {self.kind} {self.path} {self.detail}".strip()


@dataclass(frozen=True)
class RecordedCall:
    name: str
    args: dict[str, Any]
    text: str
    is_error: bool


@dataclass(frozen=True)
class Episode:
    protocol: str
    stage: str
    email: str
    calls: tuple[RecordedCall, ...]

    @property
    def pool_index(self) -> int:
        match = _POOL.fullmatch(self.email)
        assert match, self.email
        return int(match.group(1))


@dataclass(frozen=True)
class Step:
    """An episode to replay, or a promotion (``episode`` None) of ``protocol``."""

    protocol: str
    episode: Episode | None = None


def results_dir(peer: str) -> str:
    return os.path.join(peer, "bench", "results", "s5-anthropic-k5")


def passes(peer: str) -> list[str]:
    """The run's pass folders, in run order."""
    return sorted(glob.glob(os.path.join(results_dir(peer), "lifecycle-a3-*", "")))


def _calls(transcript: list[dict[str, Any]]) -> tuple[RecordedCall, ...]:
    pending: dict[str, dict[str, Any]] = {}
    out = []
    for turn in transcript:
        for call in turn.get("tool_calls") or []:
            pending[call["id"]] = call
        for result in turn.get("tool_results") or []:
            call = pending[result["call_id"]]
            if result["text"] == BUDGET_REFUSAL:
                continue  # refused by the peer's harness: it never reached the platform
            out.append(RecordedCall(call["name"], call["args"], result["text"], result["is_error"]))
    return tuple(out)


def steps(pass_dir: str) -> list[Step]:
    """The pass's episodes and promotions in the order the peer ran them."""
    with open(os.path.join(pass_dir, "lifecycle-a3.json"), encoding="utf-8") as fh:
        record = json.load(fh)
    out = []
    for run in record["runs"]:
        for ep in run["episodes"]:
            if ep["stage"] == "transfer" and run.get("promoted"):
                out.append(Step(run["protocol_id"]))
            name = f"{run['protocol_id']}-{ep['stage']}-{ep['email']}.json"
            with open(os.path.join(pass_dir, "lifecycle-a3.json.transcripts", name)) as fh:
                transcript = json.load(fh)["transcript"]
            out.append(
                Step(
                    run["protocol_id"],
                    Episode(run["protocol_id"], ep["stage"], ep["email"], _calls(transcript)),
                )
            )
    return out


def all_calls(peer: str) -> Iterator[RecordedCall]:
    for pass_dir in passes(peer):
        for step in steps(pass_dir):
            if step.episode:
                yield from step.episode.calls


def protocol(peer: str, protocol_id: str) -> dict[str, Any]:
    with open(os.path.join(peer, "bench", "protocols", f"{protocol_id}.yaml")) as fh:
        loaded: dict[str, Any] = yaml.safe_load(fh)
    return loaded


# ---------------------------------------------------------------------------- learned shapes


def _type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {str: "string", list: "array", dict: "object"}[type(value)]


ENRICHMENT_KINDS = (
    "semantic_context",
    "metadata_reference",
    "query_context",
    "memory_context",
    "knowledge_pages",
    "discovery_note",
)
# Objects whose keys are data (column names, URNs, category names), not a schema.
MAPS = {
    ("trino_query", "$.rows[]"),
    ("datahub_get_entity", "+query_context.query_context"),
    ("datahub_get_schema", "+query_context.query_context"),
    ("datahub_get_queries", "+query_context.query_context"),
    ("apply_knowledge", "$.by_category"),
    ("apply_knowledge", "$.by_confidence"),
}


def block_kind(index: int, value: Any) -> str:
    """``$`` for the tool's own block; an enrichment block by the enrichment it carries."""
    if index == 0:
        return "$"
    if not isinstance(value, dict) or not value:
        return "+raw"
    return "+" + next((k for k in ENRICHMENT_KINDS if k in value), sorted(value)[0])


def header(text: str) -> str:
    """The kind of a markdown result: its first line up to the first backtick."""
    return text.strip().split("\n", 1)[0].split("`", 1)[0].strip()


@dataclass
class PathShape:
    types: set[str] = field(default_factory=set)
    keys_seen: set[str] = field(default_factory=set)
    keys_always: set[str] | None = None
    headers: set[str] = field(default_factory=set)


class Shapes:
    """What the recorded results of each tool looked like, path by path."""

    def __init__(self) -> None:
        self.paths: dict[tuple[str, str], PathShape] = {}
        self.kinds: dict[str, set[str]] = {}

    def learn(self, tool: str, text: str) -> None:
        self.kinds.setdefault(tool, set())
        for i, value in enumerate(blocks(text)):
            kind = block_kind(i, value)
            self.kinds[tool].add(kind)
            if isinstance(value, str):
                self._at(tool, kind).types.add("raw")
                self._at(tool, kind).headers.add(header(value))
            else:
                self._walk(tool, kind, value)

    def _at(self, tool: str, path: str) -> PathShape:
        return self.paths.setdefault((tool, path), PathShape())

    def _walk(self, tool: str, path: str, value: Any) -> None:
        shape = self._at(tool, path)
        shape.types.add(_type(value))
        if isinstance(value, dict) and (tool, path) in MAPS:
            for item in value.values():
                self._walk(tool, path + "{}", item)
        elif isinstance(value, dict):
            keys = set(value)
            shape.keys_seen |= keys
            shape.keys_always = keys if shape.keys_always is None else shape.keys_always & keys
            for key, item in value.items():
                self._walk(tool, _child(path, key, value), item)
        elif isinstance(value, list):
            for item in value:
                self._walk(tool, path + "[]", item)

    def check(self, tool: str, reply: Reply) -> list[Diff]:
        """How a successful result of ours differs from the recorded shapes of ``tool``."""
        diffs: list[Diff] = []
        for i, text in enumerate(reply.texts):
            value = blocks(text)[0] if text.strip() else ""
            kind = block_kind(i, value)
            if kind not in self.kinds.get(tool, set()):
                diffs.append(Diff(tool, "block", kind, "never in a recorded result"))
                continue
            recorded = self.paths[(tool, kind)]
            if isinstance(value, str):
                if "raw" not in recorded.types:
                    diffs.append(Diff(tool, "type", kind, "text, recorded JSON"))
                elif header(value) not in recorded.headers:
                    diffs.append(Diff(tool, "header", kind, header(value)))
            else:
                self._compare(tool, kind, value, diffs)
        return diffs

    def _compare(self, tool: str, path: str, value: Any, diffs: list[Diff]) -> None:
        shape = self.paths.get((tool, path))
        if shape is None:
            return  # below a key the recorded results never had: reported at the key
        kind = _type(value)
        if shape.types == {"null"}:
            return  # the recorded side only ever had Go's empty value: no type to hold us to
        if kind != "null" and kind not in shape.types:
            diffs.append(
                Diff(tool, "type", path, f"{kind}, recorded {'/'.join(sorted(shape.types))}")
            )
            return
        if isinstance(value, dict) and (tool, path) in MAPS:
            for item in value.values():
                self._compare(tool, path + "{}", item, diffs)
        elif isinstance(value, dict):
            for key in sorted(set(value) - shape.keys_seen):
                diffs.append(Diff(tool, "extra key", _child(path, key, value)))
            for key in sorted((shape.keys_always or set()) - set(value)):
                diffs.append(Diff(tool, "missing key", _child(path, key, value)))
            for key, item in value.items():
                if key in shape.keys_seen:
                    self._compare(tool, _child(path, key, value), item, diffs)
        elif isinstance(value, list):
            for item in value:
                self._compare(tool, path + "[]", item, diffs)


def _child(path: str, key: str, parent: dict[str, Any]) -> str:
    # Search groups differ by source: key the hits' path by it.
    if key == "hits" and isinstance(parent.get("source"), str):
        return f"{path}{{{parent['source']}}}.hits"
    return f"{path}.{key}"


def learn_shapes(peer: str) -> Shapes:
    shapes = Shapes()
    for call in all_calls(peer):
        if not call.is_error:
            shapes.learn(call.name, call.text)
    return shapes


# ---------------------------------------------------------------------------- replay


def recorded_code(text: str) -> str:
    match = _CODE.search(text)
    return match.group(1) if match else "tool_error"


class IdMap:
    """Ids the live platform handed out, mapped to the ones refplatform handed out."""

    TEXT_KEYS = ("text", "content", "insight_text", "summary")
    ID_KEYS = ("id", "ref")
    DIRECT = ("id", "superseded", "changeset_id", "page_id")

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}

    def learn(self, tool: str, recorded: str, ours: Reply) -> None:
        theirs = [b for b in blocks(recorded) if not isinstance(b, str)]
        mine = [json.loads(t) for t in ours.texts if t.lstrip().startswith(("{", "["))]
        if not theirs or not mine:
            return
        if tool in ("memory_capture", "apply_knowledge", "memory_manage"):
            for key in self.DIRECT:
                a, b = theirs[0].get(key), mine[0].get(key)
                if isinstance(a, str) and isinstance(b, str):
                    self.ids.setdefault(a, b)
        by_text: dict[str, str] = {}
        for text, ident in self._pairs(mine):
            by_text.setdefault(text, ident)
        for text, ident in self._pairs(theirs):
            if text in by_text:
                self.ids.setdefault(ident, by_text[text])

    def _pairs(self, value: Any) -> Iterator[tuple[str, str]]:
        if isinstance(value, dict):
            text = next((value[k] for k in self.TEXT_KEYS if isinstance(value.get(k), str)), None)
            ident = next((value[k] for k in self.ID_KEYS if isinstance(value.get(k), str)), None)
            if text and ident and not ident.startswith("urn:"):
                yield text.strip(), ident
            for item in value.values():
                yield from self._pairs(item)
        elif isinstance(value, list):
            for item in value:
                yield from self._pairs(item)

    def translate(self, value: Any) -> Any:
        if isinstance(value, str):
            for theirs, ours in self.ids.items():
                if theirs in value:
                    value = value.replace(theirs, ours)
            return value
        if isinstance(value, dict):
            return {k: self.translate(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.translate(v) for v in value]
        return value


@dataclass
class Outcome:
    """What replaying one pass found."""

    calls: Counter[str] = field(default_factory=Counter)
    same_shape: Counter[str] = field(default_factory=Counter)
    diffs: Counter[Diff] = field(default_factory=Counter)


async def replay_episode(
    driver: Driver, episode: Episode, shapes: Shapes, ids: IdMap, outcome: Outcome
) -> None:
    """Send an episode's calls in a fresh session as its identity and compare each result."""
    async with driver.session(episode.pool_index) as session:
        for call in episode.calls:
            reply = await session.call(call.name, ids.translate(call.args))
            outcome.calls[call.name] += 1
            found = compare(call, reply, shapes)
            if LIVE_ONLY_SCHEMA.search(json.dumps(call.args)):
                found = [Diff(d.tool, d.kind, "memory.e2e_test", d.detail) for d in found]
            if not found:
                outcome.same_shape[call.name] += 1
            outcome.diffs.update(found)
            if not call.is_error and not reply.is_error:
                ids.learn(call.name, call.text, reply)


def compare(call: RecordedCall, reply: Reply, shapes: Shapes) -> list[Diff]:
    """The differences of one of our results from its recorded counterpart's shape."""
    if call.is_error and not reply.is_error:
        return [Diff(call.name, "error", "", "succeeded where the live platform failed")]
    if call.is_error:
        code = reply.error["code"]
        want = recorded_code(call.text)
        return (
            [] if code == want else [Diff(call.name, "error", "code", f"{code}, recorded {want}")]
        )
    if reply.is_error:
        return [
            Diff(
                call.name,
                "error",
                "",
                f"failed where the live platform succeeded: {reply.error['code']}",
            )
        ]
    return shapes.check(call.name, reply)


async def promote(driver: Driver, spec: dict[str, Any], email: str) -> None:
    """The peer harness's promotion: approve the newest pending insight, then apply it."""
    listed = await driver.rest(
        "GET",
        INSIGHTS,
        params={
            "captured_by": email,
            "entity_urn": spec["entity_urn"],
            "status": "pending",
            "per_page": 100,
        },
    )
    if listed.status != 200 or not listed.body["data"]:
        return
    newest = max(listed.body["data"], key=lambda i: i["created_at"])
    approved = await driver.rest(
        "PUT",
        f"{INSIGHTS}/{newest['id']}/status",
        body={"status": "approved", "review_notes": "bench lifecycle promote"},
    )
    if approved.status != 200:
        return
    args: dict[str, Any] = {
        "action": "apply",
        "entity_urn": spec["entity_urn"],
        "insight_ids": [newest["id"]],
        "confirm": True,
    }
    if spec["sink"] == "knowledge_page":
        page = spec["page"]
        args.update(
            sink="knowledge_page", page={k: page[k] for k in ("slug", "title", "summary", "body")}
        )
    else:
        args.update(
            sink="datahub",
            changes=[{"change_type": "update_description", "target": "", "detail": spec["fact"]}],
        )
    async with driver.session(None) as admin:
        await admin.call("apply_knowledge", args)


async def replay_pass(driver: Driver, peer: str, pass_dir: str, shapes: Shapes) -> Outcome:
    """Replay one pass on the platform behind ``driver``."""
    outcome, ids = Outcome(), IdMap()
    teacher: dict[str, str] = {}
    for step in steps(pass_dir):
        if step.episode is None:
            await promote(driver, protocol(peer, step.protocol), teacher[step.protocol])
            continue
        if step.episode.stage == "teach":
            teacher[step.protocol] = step.episode.email
        await replay_episode(driver, step.episode, shapes, ids, outcome)
    return outcome
