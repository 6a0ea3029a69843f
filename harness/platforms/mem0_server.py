"""benchledger's MCP server in front of the mem0 library: run in mem0's own virtual environment.

mem0 (PyPI ``mem0ai``) is a library, not a server, so ``--platform mem0`` runs this script
(``python mem0_server.py --folder F``) with the interpreter of the venv mem0 was installed
into, over stdio, and speaks MCP to it like to any other server (docs/mem0.md). It imports
nothing of benchledger: only the standard library, the MCP SDK, and (``--backend mem0``,
the default) mem0 and wordllama.

Every tool takes ``user_ids``, the mem0 user ids the call may touch: the first is the
caller's own (writes go there), the rest are only read (the shared user). The adapter
(``harness/platforms/mem0.py``) fills it in and never lets an agent name it; the server
checks it again, so a memory of another user is never read, changed or deleted.

Offline by construction: a local on-disk Qdrant under ``F/qdrant``, mem0's history in
``F/history.db``, wordllama's shipped 256-dimensional embeddings (no download), and
``infer=False`` (every memory is stored as given: no LLM is ever called). With ``--llm-url
URL`` an agent's writes go through mem0's own fact extraction (``infer=True``), its LLM
mem0's ``openai`` provider on that loopback URL, the harness's endpoint, with the bearer
token from ``$BENCHLEDGER_MEM0_LLM_TOKEN`` (``harness/platforms/mem0_llm.py``): the only
model mem0 reaches, holding no key of the operator's. ``--backend memory`` keeps memories
in a dict and ranks by shared words: the same tools without mem0, for fast tests of the
adapter.
"""

from __future__ import annotations

import argparse
import datetime as dt
import functools
import importlib
import json
import os
import re
import sys
import uuid
from typing import Any, Protocol

MAX_LIMIT = 100
WORDLLAMA_DIM = 256
COLLECTION = "benchledger"
TOKEN_VAR = "BENCHLEDGER_MEM0_LLM_TOKEN"
# mem0 reads its LLM's model name to decide which sampling parameters to send; the model
# the harness answers with is the operator's, whatever mem0 names.
LLM_MODEL = "benchledger-mem0-llm"


class Store(Protocol):
    """Memories kept per mem0 user id: what the tools need of a backend."""

    def add(self, user_id: str, text: str, infer: bool) -> list[dict[str, Any]]: ...

    def search(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]: ...

    def get(self, memory_id: str) -> dict[str, Any] | None: ...

    def update(self, memory_id: str, text: str) -> None: ...

    def delete(self, memory_id: str) -> None: ...

    def all(self, user_id: str) -> list[dict[str, Any]]: ...

    def close(self) -> None: ...


def _row(item: Any) -> dict[str, Any]:
    """One mem0 memory (a dict, as mem0 2.x answers) as the tools show it."""
    d = dict(item) if isinstance(item, dict) else {}
    row: dict[str, Any] = {"id": str(d.get("id", "")),
                           "memory": str(d.get("memory") or d.get("data") or "")}  # fmt: skip
    if d.get("user_id"):
        row["user_id"] = str(d["user_id"])
    if d.get("score") is not None:
        row["score"] = round(float(d["score"]), 6)
    for key in ("created_at", "updated_at"):
        if d.get(key):
            row[key] = str(d[key])
    return row


def _results(said: Any) -> list[Any]:
    """mem0's answers are ``{"results": [...]}`` (older releases: a bare list)."""
    if isinstance(said, dict):
        return list(said.get("results") or [])
    return list(said or [])


class Mem0Store:
    """The mem0 library, fully offline (see the module docstring)."""

    def __init__(self, folder: str, llm_url: str = "", llm_token: str = "") -> None:
        import wordllama
        from wordllama import WordLlama

        # mem0 is imported by name: it exists only in mem0's own venv, where this script runs
        # (docs/mem0.md), never in benchledger's, so it is no dependency of benchledger.
        memory_class: Any = importlib.import_module("mem0").Memory
        base: Any = importlib.import_module("mem0.embeddings.base").EmbeddingBase

        # The wheel ships its weights; loading from the package's own folder with downloads
        # disabled is what keeps it offline (the default looks elsewhere, then downloads).
        model = WordLlama.load(cache_dir=os.path.dirname(os.path.abspath(wordllama.__file__)),
                               disable_download=True, dim=WORDLLAMA_DIM)  # fmt: skip

        class WordLlamaEmbedding(base):
            def __init__(self) -> None:  # no config, no client: nothing to reach
                self.config = None

            def embed(self, text: Any, memory_action: Any = None) -> list[float]:
                return [float(x) for x in model.embed([str(text)], norm=True)[0]]

        config = {
            "vector_store": {
                "provider": "qdrant",
                "config": {
                    "collection_name": COLLECTION,
                    "path": os.path.join(folder, "qdrant"),
                    "embedding_model_dims": WORDLLAMA_DIM,
                    "on_disk": True,
                },
            },
            "history_db_path": os.path.join(folder, "history.db"),
            # mem0 builds an embedder and an LLM client as it starts, OpenAI's by default,
            # which refuse to start without a key. LM Studio's are OpenAI clients on a
            # loopback URL with a fixed placeholder key: built without any request, and
            # never used (the embedder is replaced below, and infer=False calls no LLM).
            "embedder": {"provider": "lmstudio", "config": {"embedding_dims": WORDLLAMA_DIM}},
            "llm": {"provider": "lmstudio", "config": {}},
        }
        if llm_url:  # fact extraction through the harness's loopback endpoint, never a key
            config["llm"] = {"provider": "openai", "config": {
                "openai_base_url": llm_url, "api_key": llm_token,
                "model": LLM_MODEL}}  # fmt: skip
        self.memory = memory_class.from_config(config)
        self.memory.embedding_model = WordLlamaEmbedding()

    def add(self, user_id: str, text: str, infer: bool) -> list[dict[str, Any]]:
        said = _results(self.memory.add(text, user_id=user_id, infer=infer))
        return [_row(r) for r in said]

    def search(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        said = self.memory.search(query, filters={"user_id": user_id}, top_k=limit)
        return [_row(r) for r in _results(said)]

    def get(self, memory_id: str) -> dict[str, Any] | None:
        got = self.memory.get(memory_id)
        return _row(got) if got else None

    def update(self, memory_id: str, text: str) -> None:
        self.memory.update(memory_id, text)

    def delete(self, memory_id: str) -> None:
        self.memory.delete(memory_id)

    def all(self, user_id: str) -> list[dict[str, Any]]:
        said = self.memory.get_all(filters={"user_id": user_id}, top_k=10_000)
        return [_row(r) for r in _results(said)]

    def close(self) -> None:
        # The local Qdrant client's destructor raises at interpreter exit unless closed.
        client = getattr(getattr(self.memory, "vector_store", None), "client", None)
        if client is not None:
            client.close()


_WORD = re.compile(r"[a-z0-9]+")


class DictStore:
    """Memories in a dict, ranked by the share of the query's words a memory holds."""

    def __init__(self) -> None:
        self.rows: dict[str, dict[str, Any]] = {}

    def add(self, user_id: str, text: str, infer: bool) -> list[dict[str, Any]]:
        now = dt.datetime.now(dt.UTC).isoformat()
        row = {"id": str(uuid.uuid4()), "memory": text, "user_id": user_id, "created_at": now}
        self.rows[row["id"]] = row
        return [dict(row)]

    def search(self, user_id: str, query: str, limit: int) -> list[dict[str, Any]]:
        words = set(_WORD.findall(query.lower()))
        scored = []
        for row in self.rows.values():
            if row["user_id"] != user_id:
                continue
            held = set(_WORD.findall(row["memory"].lower()))
            score = len(words & held) / len(words) if words else 0.0
            if score > 0:
                scored.append({**row, "score": score})
        return sorted(scored, key=lambda r: -r["score"])[:limit]

    def get(self, memory_id: str) -> dict[str, Any] | None:
        row = self.rows.get(memory_id)
        return dict(row) if row else None

    def update(self, memory_id: str, text: str) -> None:
        self.rows[memory_id]["memory"] = text

    def delete(self, memory_id: str) -> None:
        del self.rows[memory_id]

    def all(self, user_id: str) -> list[dict[str, Any]]:
        return [dict(r) for r in self.rows.values() if r["user_id"] == user_id]

    def close(self) -> None:
        pass


class Refused(ValueError):
    """A call the server will not make: said to the caller as a tool error."""


def _users(user_ids: Any) -> list[str]:
    if (
        not isinstance(user_ids, list)
        or not user_ids
        or not all(isinstance(u, str) and u for u in user_ids)
    ):
        raise Refused("user_ids must be a non-empty list of user ids (the first is your own)")
    return list(user_ids)


def _owned(store: Store, memory_id: str, users: list[str], *, write: bool) -> dict[str, Any]:
    """The memory ``memory_id`` when the caller may touch it (write: only its own)."""
    row = store.get(str(memory_id)) if memory_id else None
    allowed = users[:1] if write else users
    if row is None or row.get("user_id") not in allowed:
        # Another user's memory is reported as absent: its existence is not for this caller.
        raise Refused(f"no memory {memory_id!r} of yours")
    return row


def tools(
    store: Store, refused: type[Exception] = Refused, *, infer: bool = False
) -> dict[str, Any]:
    """The server's tools over ``store``: name -> function(**arguments) -> JSON text;
    a refusal raises ``refused`` (the SDK's ``ToolError``: a tool error saying why).
    ``infer``: whether every write goes through mem0's fact extraction (the memories
    stored are then what its LLM extracted: none, one or several)."""

    def add_memory(text: str, user_ids: list[str]) -> Any:
        """Store ``text`` as one memory of your own."""
        users = _users(user_ids)
        if not str(text).strip():
            raise Refused("text is empty")
        return {"results": store.add(users[0], str(text), infer)}

    def search_memories(query: str, user_ids: list[str], limit: int = 10) -> Any:
        """The memories most like ``query`` (yours and the shared ones), best first."""
        users = _users(user_ids)
        k = max(1, min(int(limit), MAX_LIMIT))
        found = [r for u in users for r in store.search(u, str(query), k)]
        found.sort(key=lambda r: -float(r.get("score") or 0.0))
        return {"results": found[:k]}

    def get_memory(memory_id: str, user_ids: list[str]) -> Any:
        """One memory by its id."""
        return _owned(store, memory_id, _users(user_ids), write=False)

    def update_memory(memory_id: str, text: str, user_ids: list[str]) -> Any:
        """Replace the text of one of your memories."""
        users = _users(user_ids)
        _owned(store, memory_id, users, write=True)
        store.update(memory_id, str(text))
        return _owned(store, memory_id, users, write=True)

    def delete_memory(memory_id: str, user_ids: list[str]) -> Any:
        """Delete one of your memories."""
        _owned(store, memory_id, _users(user_ids), write=True)
        store.delete(memory_id)
        return {"deleted": memory_id}

    def list_memories(user_ids: list[str]) -> Any:
        """Every memory you may read, oldest first."""
        users = _users(user_ids)
        rows = [r for u in users for r in store.all(u)]
        return {"results": sorted(rows, key=lambda r: (str(r.get("created_at", "")), r["id"]))}

    def as_text(fn: Any) -> Any:
        # JSON text, the same for every tool: what the agent reads and the ledger keeps.
        @functools.wraps(fn)
        def answer(*args: Any, **kwargs: Any) -> str:
            try:
                said = fn(*args, **kwargs)
            except Refused as exc:
                raise refused(str(exc)) from None
            return json.dumps(said, sort_keys=True, ensure_ascii=False)

        return answer

    return {f.__name__: as_text(f) for f in (add_memory, search_memories, get_memory, update_memory,
                                    delete_memory, list_memories)}  # fmt: skip


def main(argv: list[str] | None = None) -> int:
    """Serve the tools over stdio until the client goes away."""
    parser = argparse.ArgumentParser(description="benchledger's MCP server over mem0")
    parser.add_argument("--folder", required=True, help="every write of mem0 goes here")
    parser.add_argument("--backend", choices=("mem0", "memory"), default="mem0")
    parser.add_argument("--llm-url", default="", help="mem0's LLM: the harness's endpoint")
    args = parser.parse_args(argv)
    if args.llm_url and args.backend != "mem0":
        parser.error("--llm-url: the dictionary backend has no fact extraction")
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError

    # The endpoint's token comes in the environment, never on the command line.
    token = os.environ.get(TOKEN_VAR, "")
    store: Store = (Mem0Store(args.folder, args.llm_url, token) if args.backend == "mem0"
                    else DictStore())  # fmt: skip
    version = "memory"
    if args.backend == "mem0":
        from importlib.metadata import version as installed

        version = installed("mem0ai")
    app = MCPServer("mem0", version=version)
    for name, fn in tools(store, ToolError, infer=bool(args.llm_url)).items():
        app.add_tool(fn, name=name, description=fn.__doc__, structured_output=False)
    try:
        app.run()
    finally:
        store.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
