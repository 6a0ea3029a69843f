"""The retrieval reader (``--agent retrieval``) on fixed inputs: what it searches with, which
span it answers, where its threshold lies, and how it writes and answers lifecycle
episodes; and ``--protocol`` globs, which every suite's plan selects by."""

from __future__ import annotations

import json
from typing import Any

import pytest

from benchledger import protocols
from benchledger.harness.agents import from_spec
from benchledger.harness.agents.base import Episode, Turn
from benchledger.harness.agents.retrieval import THRESHOLD, RetrievalAgent, best_span, stem
from benchledger.harness.plan import _select
from benchledger.harness.platforms.vocabulary import (
    BASIC_MEMORY,
    REFPLATFORM,
    SERVER_MEMORY,
    Vocabulary,
)
from benchledger.harness.record import RunRefused
from benchledger.projections.suites.locomo.items import LocomoItem
from benchledger.protocols.grading import ABSTAIN_ANSWER
from benchledger.protocols.locomo import Question, Sample

REF_TOOLS = REFPLATFORM  # the platforms' declared vocabularies the reader speaks
GRAPH_TOOLS = SERVER_MEMORY


def _decide(episode: Episode, messages: list[dict[str, Any]], vocab: Vocabulary) -> Turn:
    """The reader's turn on a platform declaring ``vocab``."""
    return RetrievalAgent().decide(
        episode._replace(vocabulary=vocab), messages, sorted(vocab.tools)
    )


def _item(question: str, category: int = 4) -> LocomoItem:
    q = Question("c-1:q1", question, category, "gold", ("D1:2",))
    return LocomoItem(q, Sample("c-1", "Mira", "Tom", (), (q,)))


def _refplatform(*texts: str) -> str:
    """A refplatform search result holding ``texts`` as its hits, best first."""
    hits = [{"text": t, "source": "memory", "ref": f"r{i}", "score": 1.0 - i / 10}
            for i, t in enumerate(texts)]  # fmt: skip
    return json.dumps({"groups": [{"source": "memory", "hits": hits}]})


def _tool(text: str, is_error: bool = False) -> dict[str, Any]:
    return {"role": "tool", "call_id": "c", "name": "search", "text": text, "is_error": is_error}


def _answer(question: str, result: str, tools: Vocabulary = REF_TOOLS, category: int = 4) -> str:
    episode = Episode("ask", "", question, _item(question, category), 6)
    turn = _decide(episode, [{"role": "user", "text": question}, _tool(result)],
                                   tools)  # fmt: skip
    assert not turn.tool_calls
    return turn.text


TURNS = (
    "[D1:1 | 9:00 am on 2 May, 2023] Mira: Hi Tom, how was your week?",
    "[D1:2 | 9:00 am on 2 May, 2023] Tom: Busy. I adopted a beagle named Rufus. He snores.",
    "[D1:3 | 9:00 am on 2 May, 2023] Mira: I started pottery last week.",
)


@pytest.mark.parametrize(
    ("tools", "call"),
    [
        pytest.param(REF_TOOLS, ("search", {"intent": "Q?", "sources": ["memory"], "limit": 10}),
                     id="refplatform"),
        pytest.param(GRAPH_TOOLS, ("search_nodes", {"query": "Q?"}), id="server-memory"),
        pytest.param(BASIC_MEMORY,
                     ("search_notes", {"query": "Q?", "page_size": 10, "output_format": "json"}),
                     id="basic-memory"),
    ],
)  # fmt: skip
def test_the_reader_searches_with_the_question_in_the_platforms_declared_vocabulary(tools, call):
    turn = _decide(Episode("ask", "", "Q?", _item("Q?"), 6), [], tools)
    assert [(c.name, c.arguments) for c in turn.tool_calls] == [call]


def test_the_reader_answers_the_sentence_sharing_most_of_the_questions_words():
    # Q = {nam, tom, beagle}: "I adopted a beagle named Rufus." holds beagle, named (nam)
    # and is Tom's turn: 3/3; the hit's other sentences score less.
    answer = _answer("What is the name of Tom's beagle?", _refplatform(*TURNS))
    assert answer == "FINAL ANSWER: I adopted a beagle named Rufus."


def test_on_a_tie_the_better_ranked_hit_wins():
    a = "[D2:1 | d] Tom: My beagle sleeps all day."
    b = "[D2:2 | d] Tom: My beagle eats all day."
    q = "What does Tom's beagle do?"  # Q = {tom, beagle}: both score 2/2
    assert _answer(q, _refplatform(b, a)) == "FINAL ANSWER: My beagle eats all day."
    assert _answer(q, _refplatform(a, b)) == "FINAL ANSWER: My beagle sleeps all day."


def test_a_speakers_name_alone_never_chooses_a_turn():
    # Every word shared with "What hobby did Mira start?" is Mira, in the first turn:
    # only the pottery turn shares a word of its own (started -> start).
    answer = _answer("What hobby did Mira start?", _refplatform(*TURNS))
    assert answer == "FINAL ANSWER: I started pottery last week."
    # With only Mira's greeting retrieved, her name (1/3 of the question) is no answer.
    alone = _answer("What hobby did Mira start?", _refplatform(TURNS[0]))
    assert alone == "FINAL ANSWER: no information available"


def test_a_when_question_is_answered_with_the_date_of_the_turn_that_answers_it():
    answer = _answer("When did Mira start pottery?", _refplatform(*TURNS), category=2)
    assert answer == "FINAL ANSWER: 9:00 am on 2 May, 2023"


@pytest.mark.parametrize(
    "result",
    [
        pytest.param(_refplatform(*TURNS), id="below-threshold"),
        pytest.param(_refplatform(), id="no-hits"),
        pytest.param("[]", id="server-memory-empty-list"),
        pytest.param(json.dumps({"entities": [], "relations": []}), id="server-memory-empty-graph"),
        pytest.param("", id="empty-text"),
    ],
)
def test_below_the_threshold_or_with_nothing_found_it_answers_no_information_available(result):
    # "Which city did Ada visit?" shares no content word with any turn.
    assert _answer("Which city did Ada visit?", result, GRAPH_TOOLS) == (
        "FINAL ANSWER: no information available"
    )


def test_the_threshold_is_a_share_of_the_questions_content_words():
    # Q = {favourite, colour, beagle, collar}: "beagle" alone is 1/4 < THRESHOLD; asked of
    # Tom, Q = {favourite, colour, tom, beagle, collar} and Tom's turn scores 2/5 >= it.
    assert 1 / 4 < THRESHOLD <= 2 / 5
    q = "What favourite colour is the beagle collar?"
    assert best_span(q, [_refplatform(*TURNS)]) is None
    found = best_span("What favourite colour is Tom's beagle collar?", [_refplatform(*TURNS)])
    assert found is not None and found[1] == pytest.approx(2 / 5)


def test_an_error_result_is_no_evidence():
    episode = Episode("ask", "", "What is the name of Tom's beagle?", _item("x"), 6)
    turn = _decide(episode, [_tool(_refplatform(*TURNS), is_error=True)],
                                   REF_TOOLS)  # fmt: skip
    assert turn.text == "FINAL ANSWER: no information available"


def test_the_suffix_rule_lets_inflected_words_meet():
    assert stem("named") == stem("name") and stem("started") == stem("start")
    assert stem("cats") == "cat" and stem("is") == "is"


# -- the lifecycle suite ----------------------------------------------------------------------


def _protocol() -> Any:
    return next(p for p in protocols.load(protocols.LIFECYCLE_DIR).protocols
                if p.update is not None)  # fmt: skip


@pytest.mark.parametrize("stage", ["teach", "update"])
def test_on_the_lifecycle_teach_and_update_write_the_fact_as_one_memory(stage):
    p = _protocol()
    fact = p.update.fact if stage == "update" else p.fact
    turn = _decide(Episode(stage, "", "teach", p, 5), [], GRAPH_TOOLS)
    [call] = turn.tool_calls
    assert call.name == "create_entities"
    assert call.arguments["entities"][0]["observations"] == [fact]
    done = _decide(Episode(stage, "", "teach", p, 5), [_tool("[]")], GRAPH_TOOLS)
    assert done.text == "Saved." and not done.tool_calls


def test_on_the_lifecycle_a_recall_searches_with_the_prompt_and_answers_the_best_span():
    p = _protocol()
    prompt = "Which channel is the audit channel for this study?"
    ep = Episode("recall", "", prompt, p, 5)
    [call] = _decide(ep, [], REF_TOOLS).tool_calls
    assert call.arguments["intent"] == prompt
    result = _refplatform(p.fact, "Refunds are reported monthly.")
    assert _decide(ep, [_tool(result)], REF_TOOLS).text == (f"FINAL ANSWER: {p.fact}")
    unrelated = _refplatform("Refunds are reported monthly.")
    assert _decide(ep, [_tool(unrelated)], REF_TOOLS).text == (f"FINAL ANSWER: {ABSTAIN_ANSWER}")


def test_the_reader_is_an_agent_spec_that_takes_no_model():
    assert from_spec("retrieval").name == "retrieval"
    with pytest.raises(ValueError, match="takes no model"):
        from_spec("retrieval:gpt")


# -- --protocol globs, for every suite ---------------------------------------------------------


class _Item:
    def __init__(self, id: str) -> None:
        self.id = id


IDS = ["conv-26:q1", "conv-26:q2", "conv-30:q1", "bl-a"]


@pytest.mark.parametrize(
    ("only", "chosen"),
    [
        pytest.param(["conv-26:*"], ["conv-26:q1", "conv-26:q2"], id="glob"),
        pytest.param(["*:q1", "bl-a"], ["conv-26:q1", "conv-30:q1", "bl-a"], id="glob-and-id"),
        pytest.param(["conv-2?:q[2-9]"], ["conv-26:q2"], id="glob-classes"),
        pytest.param(["conv-30:q1"], ["conv-30:q1"], id="plain-id"),
    ],
)
def test_protocol_takes_ids_and_shell_globs_in_set_order(only, chosen):
    items = [_Item(i) for i in IDS]
    assert [i.id for i in _select(items, only, 0, "question", "f")] == chosen


def test_a_glob_matching_nothing_is_refused_naming_it():
    with pytest.raises(RunRefused, match=r"--protocol conv-9\*: no question matching that pattern"):
        _select([_Item(i) for i in IDS], ["conv-9*"], 0, "question", "f")
