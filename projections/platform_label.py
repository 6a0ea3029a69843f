"""What a run measured, named from its record: the platform and what shapes its answers.

Every display names a run's platform with ``platform_label`` (``runs``, ``report`` in
every format, ``compare``, the JSON, the Inspect export), so two runs that measured
different things never show as one platform: the embedded platform's embedder (lexical
unless ``--embedder`` named another: docs/refplatform.md#embedders), a mapped server's
mapping (its own ``name`` and version, and the blake3 hash of its text:
docs/platforms.md), mem0's mode (docs/mem0.md) and any other option the run recorded.
``platform_facts`` is the same as JSON. Pure: the run's ``run_started`` body in, text out.
"""

from __future__ import annotations

import tomllib
from typing import Any, Final

from benchledger.ledger.events import RunStartedBody

# The kinds whose search embeds with ``--embedder``, and what they embed with without it.
_EMBEDDER_DEFAULT: Final = {"embedded": "lexical", "process": "lexical"}
MEM0_KIND: Final = "mem0"
# mem0 as benchledger runs it unless told otherwise: every memory stored as given (no LLM
# extracts facts) and ranked by wordllama's embeddings in a local Qdrant (docs/mem0.md).
MEM0_VECTOR_ONLY: Final = "vector store only: infer=False, wordllama"
# With ``--mem0-llm SPEC``: mem0 stores what its LLM (SPEC) extracts from each write.
MEM0_EXTRACTION: Final = "fact extraction: infer=True, LLM {llm}, wordllama"
MEM0_LLM_OPTION: Final = "mem0_llm"
# What benchledger's mem0 server reports as its version when it runs its dictionary
# backend (``--backend memory``, for tests): no mem0 at all.
MEM0_DICT_VERSION: Final = "memory"
MEM0_DICT: Final = "no mem0: benchledger's dictionary backend, ranked by shared words"
HASH_SHOWN: Final = 12  # hex digits of a mapping's hash shown in a label (the JSON has all)


def _mapping_name(text: str) -> str:
    """The mapping file's own ``name`` and ``version`` ("" when it has none or is unreadable)."""
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError:
        return ""
    name, version = doc.get("name"), doc.get("version")
    return " ".join(str(x) for x in (name, version) if isinstance(x, str) and x)


def mem0_mode(version: str, options: dict[str, str]) -> str:
    """How a mem0 run stored and found memories, from its record."""
    if version == MEM0_DICT_VERSION:
        return MEM0_DICT
    llm = options.get(MEM0_LLM_OPTION, "")
    return MEM0_EXTRACTION.format(llm=llm) if llm else MEM0_VECTOR_ONLY


def platform_facts(started: RunStartedBody) -> dict[str, Any]:
    """What a run's platform was, as JSON: its name and version as it said them, its kind,
    its recorded options, and (where they apply) its embedder, mapping and mem0 mode; and
    ``label``, the one line every display shows."""
    record = started.record
    rec = record.platform if record is not None else None
    name = (rec.name if rec else "") or started.platform
    version = (rec.version if rec else "") or started.platform_version
    options = dict(record.platform_options) if record is not None else {}
    kind = rec.kind if rec else ""
    facts: dict[str, Any] = {"name": name, "version": version, "kind": kind, "options": options}
    quals: list[str] = []
    if kind in _EMBEDDER_DEFAULT or "embedder" in options:
        facts["embedder"] = options.get("embedder") or _EMBEDDER_DEFAULT[kind]
        quals.append(f"embedder {facts['embedder']}")
    if rec is not None and rec.mapping_hash:
        facts["mapping"] = {"name": _mapping_name(rec.mapping), "hash": rec.mapping_hash}
        named = facts["mapping"]["name"] or "(unnamed)"
        quals.append(f"mapping {named}, blake3 {rec.mapping_hash[:HASH_SHOWN]}")
    if kind == MEM0_KIND:
        facts["mode"] = mem0_mode(version, options)
        quals.append(facts["mode"])
    shown = {"embedder", MEM0_LLM_OPTION} if kind == MEM0_KIND else {"embedder"}
    quals += [f"{k}={v}" for k, v in sorted(options.items()) if k not in shown]
    # run_started.platform already names what the embedded platform is ("... (embedded)").
    base = " ".join(x for x in (started.platform or name, version) if x) or "-"
    facts["label"] = " · ".join([base, *quals])  # no bracket: Markdown would escape it
    return facts


def platform_label(started: RunStartedBody) -> str:
    """The run's platform in one line, with what it was run with:
    ``mcp-data-platform (embedded) refplatform-2.0 · embedder wordllama``,
    ``memory 12.4.0 · mapping mcp-memory-service 12.4.0, blake3 0123456789ab``,
    ``mem0 2.2.1 · vector store only: infer=False, wordllama``,
    ``mem0 2.2.1 · fact extraction: infer=True, LLM anthropic:MODEL, wordllama``."""
    return str(platform_facts(started)["label"])
