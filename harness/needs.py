"""What a run needs from outside benchledger, and whether the one running it named it.

A run's record says which platform it ran on (a command that starts it, a URL), which
agent (a model server's URL), which embedder (an Ollama URL) and which model mem0's fact
extraction called (``--mem0-llm``). Whoever can queue a run
or write a ledger writes that record, so a queue worker, or a ``run --resume``, never
takes a command or an endpoint from it: each must be named by its own operator, with the
same option the run was started with, and is compared with the record by content
(docs/scaling.md, "What a worker trusts"). What needs no naming is built in and local: the
embedded platform, the scripted, retrieval, fake and bare no-memory agents, and the
built-in platforms started with benchledger's own default command.

Pure: the record and what was given in, the reasons out.
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final

from benchledger.harness.platforms.platform import resolve
from benchledger.harness.platforms.servers import BASIC_MEMORY_CMD, MEM0_CMD, SERVER_MEMORY_CMD
from benchledger.harness.record import platform_option, redact_command
from benchledger.ledger.events import RunRecord

# Built-in platforms named without options: benchledger chooses what starts them.
_DEFAULT_PLATFORMS: Final = ("embedded", "embedded:process", "server-memory", "basic-memory",
                             "mem0")  # fmt: skip
# Agents that call no model server.
_LOCAL_AGENTS: Final = ("scripted", "retrieval", "fake", "no-memory")  # no-memory: the reader
# Embedders that contact nothing.
_LOCAL_EMBEDDERS: Final = ("", "lexical", "wordllama")


def default_platforms() -> frozenset[str]:
    """The run-record labels of the built-in platforms started with benchledger's own
    default command (a bare ``--platform NAME``)."""
    labels = set()
    for name in _DEFAULT_PLATFORMS:
        try:
            labels.add(resolve(name)[1].label)
        except (LookupError, ValueError):
            continue  # not installed here: then nothing runs it
    return frozenset(labels)


def local_agent(spec: str) -> bool:
    """Whether the agent ``spec`` calls no model server."""
    return spec.partition(":")[0] in _LOCAL_AGENTS and (spec.startswith("fake") or ":" not in spec)


@dataclass(frozen=True)
class Given:
    """What the operator named: platform labels (settled, as a run records them; empty:
    the built-in defaults), agent specs (empty: the local ones) and the embedder."""

    platforms: frozenset[str] = field(default_factory=frozenset)
    agents: frozenset[str] = field(default_factory=frozenset)
    embedder: str = ""
    mem0_llm: str = ""  # the model mem0's fact extraction calls (``--mem0-llm``)


def _same_platform(recorded: str, given: Iterable[str]) -> bool:
    """Whether a given label is the recorded one (a recorded command with its secrets
    redacted matches the given command it was redacted from)."""
    return any(g.rstrip("/") == recorded or redact_command(g) == recorded for g in given)


def unmet(record: RunRecord, given: Given) -> list[str]:
    """What the run needs that ``given`` does not name, each as the option to give."""
    out = []
    label = platform_option(record)
    allowed = given.platforms or default_platforms()
    if not _same_platform(label, allowed):
        out.append(f"its platform {label} (give --platform with the same command or URL: "
                   f"{platform_hint(label)})")  # fmt: skip
    agents = given.agents
    if not (record.agent in agents or (not agents and local_agent(record.agent))):
        out.append(f"its agent {record.agent} (give --agent {record.agent})")
    embedder = record.platform_options.get("embedder", "")
    if embedder not in _LOCAL_EMBEDDERS and embedder != given.embedder:
        out.append(f"its embedder {embedder} (give --embedder {embedder})")
    # A model endpoint like an agent's: only the operator names it (docs/mem0.md).
    llm = record.platform_options.get("mem0_llm", "")
    if llm and llm != given.mem0_llm:
        out.append(f"its mem0 LLM {llm} (give --mem0-llm {llm})")
    return out


def platform_hint(label: str) -> str:
    """The options that name the platform a run recorded as ``label``."""
    return shlex.join(platform_words(label))


def platform_words(label: str) -> list[str]:
    """``platform_hint`` as command-line words."""
    for prefix, option, name in (
        (SERVER_MEMORY_CMD, "--server-memory-cmd", "server-memory"),
        (BASIC_MEMORY_CMD, "--basic-memory-cmd", "basic-memory"),
        (MEM0_CMD, "--mem0-cmd", "mem0"),
    ):
        if label.startswith(prefix):
            return ["--platform", name, option, label.removeprefix(prefix)]
    return ["--platform", label]


def worker_words(record: RunRecord) -> list[str]:
    """The options a worker needs to run the run of ``record`` (none when its needs are
    built in and local): what ``run --queue`` tells the operator to give. A recorded
    command is as recorded, its secrets redacted: the operator gives them."""
    words: list[str] = []
    label = platform_option(record)
    if not _same_platform(label, default_platforms()):
        words += platform_words(label)
    if not local_agent(record.agent):
        words += ["--agent", record.agent]
    embedder = record.platform_options.get("embedder", "")
    if embedder not in _LOCAL_EMBEDDERS:
        words += ["--embedder", embedder]
    return words


def given_labels(texts: Iterable[str], options: Mapping[str, str]) -> frozenset[str]:
    """The labels of the ``--platform`` values given, each settled with the platform
    options given that belong to it; ValueError naming an unusable one."""
    labels = set()
    for text in texts:
        platform, spec = resolve(text)
        own = {o.dest for o in platform.options}
        settled = platform.settle(spec, {k: v for k, v in options.items() if k in own})
        labels.add(settled.label)
    return frozenset(labels)
