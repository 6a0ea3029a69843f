"""A platform says its own vocabulary, only real calls count, and a platform is probed first.

The platform here is docs/plugins.md's worked adapter (tiny-memory: ``remember`` and
``lookup``, a top-level JSON list for an answer), read from the docs' marked block and
registered in the test alone, as an installed plugin's entry point would register it.
"""

from __future__ import annotations

import asyncio
import re
import types
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec
import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.harness.agents import ScriptedAgent
from benchledger.harness.agents.base import Episode, ToolCall, Turn
from benchledger.harness.episode import COUNTED, run_episode
from benchledger.harness.platforms.base import Description
from benchledger.harness.platforms.mcp_data_platform import McpDataPlatform
from benchledger.harness.platforms.platform import PLATFORMS
from benchledger.harness.platforms.provision import PlatformSpec, provisioner
from benchledger.harness.platforms.vocabulary import REFPLATFORM
from benchledger.harness.probe import probe
from benchledger.ledger import Ledger, open_store
from benchledger.ledger.events import EpisodeFinishedBody, GraderDecisionBody, RunStartedBody
from benchledger.projections.source import from_ledger
from benchledger.protocols.grading import ABSTAIN_ANSWER

DOC = Path(__file__).resolve().parent.parent / "docs" / "plugins.md"
MODULE = re.compile(r"<!-- example-plugin:module -->\n```python\n(?P<text>.*?)```", re.S)
SEALED = re.compile(r"run (\S+) sealed, root ([0-9a-f]{64})")
NAME = "tiny-vocab"


def _example() -> types.ModuleType:
    """The docs' worked adapter, loaded from its text."""
    found = MODULE.search(DOC.read_text(encoding="utf-8"))
    assert found is not None
    module = types.ModuleType("tiny_memory_vocabulary")
    exec(compile(found["text"], str(DOC), "exec"), module.__dict__)  # our own docs' text
    return module


def _registered(example: types.ModuleType, client: Any = None) -> Iterator[None]:
    """``tiny-vocab``: the docs' platform (its client replaced by ``client``) registered."""

    class Provisioner(example.TinyProvisioner):  # type: ignore[misc, name-defined]
        @asynccontextmanager
        async def runtime(self) -> AsyncIterator[Any]:
            made = (client or example.TinyClient)(self.pool_size)
            try:
                yield made
            finally:
                await made.aclose()

    class Tiny(example.TinyMemory):  # type: ignore[misc, name-defined]
        name = NAME

        def parse(self, text: str) -> Any:
            return example.PlatformSpec(NAME, text) if text == NAME else None

        def provisioner(self, spec: Any, provision: Any) -> Any:
            return Provisioner(spec, pool_size=provision.pool_size)

    PLATFORMS.add(NAME, Tiny(), origin="test")
    try:
        yield
    finally:
        PLATFORMS.unregister(NAME)


@pytest.fixture
def example() -> types.ModuleType:
    return _example()


@pytest.fixture
def tiny(example: types.ModuleType) -> Iterator[types.ModuleType]:
    yield from _registered(example)


def _run(tmp_path: Path, capsys: Any, *extra: str) -> tuple[int, str, str, str]:
    db = str(tmp_path / "l.sqlite")
    code = main(["run", "--platform", NAME, "--ledger", db, "--limit", "6", *extra])
    out, err = capsys.readouterr()
    return code, out, err, db


def _metric(out: str, name: str) -> str:
    line = next(x for x in out.splitlines() if x.startswith(name + " "))
    return line.split()[1]


def _ranked(out: str) -> list[str]:
    """The recall stage's row of the card's retrieval table: episodes, recall@1/5/10, MRR."""
    return next(x for x in out.splitlines() if x.startswith("  recall ")).split()[1:]


def _decisions(db: str, run_id: str, check: str) -> list[GraderDecisionBody]:
    run = from_ledger(Ledger(open_store(db, read_only=True)), run_id)
    return [e.body for e, _ in run.events
            if isinstance(e.body, GraderDecisionBody) and e.body.check == check]  # fmt: skip


def test_a_plugin_speaking_its_own_words_earns_its_scores_from_the_scripted_agent(
    tiny, tmp_path, capsys
):
    code, out, err, db = _run(tmp_path, capsys)
    assert code == 0, err
    run_id = SEALED.search(out)[1]  # type: ignore[index]
    # It wrote with `remember` and found its facts with `lookup` (a top-level list).
    assert _metric(out, "capture_attempt_rate") == "6/6"
    assert _metric(out, "personal_recall") == "6/6"
    assert _metric(out, "abstention_rate") == "6/6"
    reasons = {d.reason for d in _decisions(db, run_id, "capture_attempted")}
    assert reasons == {"remember was called"}
    # Ranked by its own hits (the list lookup answers): the taught fact is the first.
    assert _ranked(out) == ["6", "100.0%", "100.0%", "100.0%", "1.000"]
    started = from_ledger(Ledger(open_store(db, read_only=True)), run_id).events[0][0].body
    assert isinstance(started, RunStartedBody) and started.record is not None
    assert started.record.vocabulary["search"] == "lookup"
    assert started.record.vocabulary["hits"] == {"path": "$", "id_field": "id"}
    assert any(f["what"] == "search" and f["ok"] for f in started.record.probe["findings"])
    # Re-derived from the ledger alone: the episodes recorded what they counted by.
    assert main(["replay", run_id, "--level", "rederive", "--ledger", db]) == 0


def test_the_retrieval_reader_reads_the_plugins_hits_where_its_vocabulary_says(
    tiny, tmp_path, capsys
):
    code, out, err, db = _run(tmp_path, capsys, "--agent", "retrieval")
    assert code == 0, err
    run_id = SEALED.search(out)[1]  # type: ignore[index]
    assert _metric(out, "capture_attempt_rate") == "6/6"
    assert _ranked(out) == ["6", "100.0%", "100.0%", "100.0%", "1.000"]
    # Its answer is the best sentence of the hits it read (the taught fact's), or, where no
    # sentence shares enough of the question's words, an abstention: never anything else.
    facts = {p.fact for p in protocols.load(protocols.LIFECYCLE_DIR).protocols}
    run = from_ledger(Ledger(open_store(db, read_only=True)), run_id)
    said = [e.body.final_answer.removeprefix("FINAL ANSWER: ") for e, _ in run.events
            if isinstance(e.body, EpisodeFinishedBody) and e.body.episode == "recall"]  # fmt: skip
    read = [a for a in said if a != ABSTAIN_ANSWER]
    assert len(said) == 6 and read and all(any(a in f for f in facts) for a in read), said


def test_a_platform_declaring_no_vocabulary_is_refused_by_the_probe_nothing_written(
    example, tmp_path, capsys
):
    class Silent(example.TinyClient):  # lists remember and lookup, says nothing of them
        vocabulary = None

    for _ in _registered(example, Silent):
        code, out, err, db = _run(tmp_path, capsys)
        assert code == 2
        [line] = err.strip().splitlines()
        assert "refused by the probe" in line and "declares no memory vocabulary" in line
        assert "sealed" not in out
        store = open_store(db, read_only=True) if Path(db).exists() else None
        assert store is None or not list(Ledger(store).runs())


def test_a_platform_whose_memory_is_not_found_by_its_own_words_is_refused(
    example, tmp_path, capsys
):
    forgetful = example.VOCABULARY._replace(search=lambda q, k: {"query": "", "limit": k})

    class Forgetful(example.TinyClient):
        vocabulary = forgetful

    for _ in _registered(example, Forgetful):
        code, _out, err, _db = _run(tmp_path, capsys)
        assert code == 2
        assert "none holds the memory just written" in err


def _episode_on(example: types.ModuleType, vocabulary: Any, tmp_path: Path) -> EpisodeFinishedBody:
    """One scripted teach episode on tiny-memory declaring ``vocabulary``: its outcome."""
    p = protocols.load(protocols.LIFECYCLE_DIR).protocols[0]
    client = example.TinyClient(2)
    client.vocabulary = vocabulary
    ledger = Ledger(open_store(str(tmp_path / "e.sqlite")))
    w = ledger.writer("run/p/0")

    async def go() -> None:
        await run_episode(ScriptedAgent(), client, w, Episode("teach", "", "teach", p, 5), 1,
                          "agent-001", tools=COUNTED)  # fmt: skip

    asyncio.run(go())
    body = msgspec.json.decode(w.staged[-1].data)["body"]
    return msgspec.convert(body, EpisodeFinishedBody)


def test_a_call_of_a_tool_the_session_did_not_list_never_counts_as_a_capture(example, tmp_path):
    # The adapter says it writes with memory_capture; its server lists remember alone.
    wrong = example.VOCABULARY._replace(write_tool="memory_capture")
    e = _episode_on(example, wrong, tmp_path)
    assert e.tool_calls == 1 and not e.capture_attempted
    assert e.not_counted == ["memory_capture was called but the session did not list it"]


def test_a_call_the_server_answered_as_an_error_never_counts_as_a_capture(example, tmp_path):
    broken = example.VOCABULARY._replace(write=lambda text, title: {"txt": text})
    e = _episode_on(example, broken, tmp_path)
    assert e.tool_calls == 1 and e.tool_errors == 1 and not e.capture_attempted
    assert e.not_counted == ["remember was called and the server answered it as an error"]


def test_the_probe_finds_the_plugins_memory_by_its_own_words_and_reads_its_id(example):
    async def go() -> Any:
        return await probe(example.TinyClient(2), "tiny-memory")

    found = asyncio.run(go())
    assert found.refused == ""
    said = {f.what: f.detail for f in found.findings if f.ok}
    assert said["search"].startswith("lookup 'heron Quillon north weir' found it at rank 1")
    assert said["hit ids"] == "its hit's id is m1"


def test_platform_check_prints_what_works_and_fails_on_a_silent_platform(example, capsys):
    for _ in _registered(example):
        assert main(["platform", "check", NAME]) == 0
        out = capsys.readouterr().out
        assert "ok   write: remember stored the probe memory" in out and "usable" in out

    class Silent(example.TinyClient):
        vocabulary = None

    for _ in _registered(example, Silent):
        assert main(["platform", "check", NAME]) == 1
        captured = capsys.readouterr()
        assert "FAIL vocabulary" in captured.out and "would be refused" in captured.err


def test_a_platform_without_the_knowledge_page_sink_is_never_asked_to_promote_to_it(
    monkeypatch, tmp_path, capsys
):
    described = McpDataPlatform.describe

    async def datahub_only(self: McpDataPlatform) -> Description:
        return (await described(self))._replace(sinks=("datahub",))

    # The embedded platform, describing itself with one sink (as such a platform would).
    monkeypatch.setattr(McpDataPlatform, "describe", datahub_only)
    db = str(tmp_path / "l.sqlite")
    ids = ["bl-crown-tier", "bl-anchor-tier"]  # a knowledge_page protocol, a datahub one
    argv = ["run", "--ledger", db, *(a for i in ids for a in ("--protocol", i))]
    assert main(argv) == 0, capsys.readouterr().err
    run_id = SEALED.search(capsys.readouterr().out)[1]  # type: ignore[index]
    run = from_ledger(Ledger(open_store(db, read_only=True)), run_id)
    promoted = {
        e.stream.split("/")[1]: e.body
        for e, _ in run.events
        if isinstance(e.body, GraderDecisionBody) and e.body.stage == "promote"
    }
    crown = promoted["bl-crown-tier"]
    assert crown.verdict is None
    assert crown.reason == (
        "not applicable: the platform has no knowledge_page sink (its sinks: datahub)"
    )
    assert promoted["bl-anchor-tier"].verdict is True


def test_locomo_ingests_and_ranks_on_the_plugin_in_its_own_words(tiny, tmp_path, capsys):
    code, out, err, _db = _run(tmp_path, capsys, "--suite", "locomo", "--agent", "retrieval")
    assert code == 0, err
    assert "1 of 1 sample ingestions landed whole" in out
    # The dialogue ids read off its top-level list of hits: retrieval measured, not zero.
    recall = float(next(x for x in out.splitlines() if x.startswith("recall_at_10")).split()[1])
    assert recall > 0.5, out


class _Calls:
    """An agent calling the given tool once, then answering."""

    name, model, records_model_calls = "calls", "", False

    def __init__(self, tool: str, arguments: dict[str, Any]) -> None:
        self.call = ToolCall("c1", tool, arguments)

    def for_unit(self, unit: Any) -> Any:
        return self

    async def next_turn(
        self, episode: Any, messages: Any, tools: Any, observer: Any = None
    ) -> Turn:
        self.offered = [t["name"] for t in tools]
        done = any(m["role"] == "tool" for m in messages)
        return Turn("FINAL ANSWER: done") if done else Turn("", (self.call,))


def test_a_listed_tool_the_platform_does_not_offer_is_neither_shown_nor_sent(tmp_path):
    # refplatform lists trino_query; a vocabulary exposing nothing beyond its own verbs
    # keeps an agent off it (as a mapping keeps an agent off another identity's delete).
    narrow = REFPLATFORM._replace(expose=frozenset())
    agent = _Calls("trino_query", {"sql": "SELECT 1"})
    ledger = Ledger(open_store(str(tmp_path / "e.sqlite")))
    w = ledger.writer("run/p/0")
    p = protocols.load(protocols.LIFECYCLE_DIR).protocols[0]

    async def go() -> Any:
        prov = provisioner(PlatformSpec("embedded"), pool_size=2)
        async with prov.runtime() as client:
            ep = Episode("recall", "", "q", p, 5, narrow)
            return await run_episode(agent, client, w, ep, 1, "agent-001", tools=COUNTED)

    done = asyncio.run(go())
    assert sorted(agent.offered) == ["memory_capture", "search"]
    assert done.tool_calls == 1 and "not offered" in done.tool_results[0]
    sent = [msgspec.json.decode(r.data)["body"] for r in w.staged]
    assert not any(b.get("tool") == "trino_query" for b in sent)
    finished = msgspec.convert(sent[-1], EpisodeFinishedBody)
    assert finished.not_counted == ["trino_query was called but the platform does not offer it"]
