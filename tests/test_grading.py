"""The graders, table-driven, and cross-checked against a real peer run's recorded verdicts."""

from __future__ import annotations

import glob
import json
import os

import pytest

from benchledger import protocols
from benchledger.protocols import grading
from benchledger.protocols.schema import Grading

EXTRACT = [
    ("Thinking...\nFINAL ANSWER: 42", "42"),
    ("final answer: North\nbecause reasons", "North"),
    ("FINAL ANSWER: 1\nFINAL ANSWER: 2", "2"),
    ("FINAL ANSWER:\n  1,234.50\nmore", "1,234.50"),
    ("no marker here", "no marker here"),
    ("   ", ""),
    ("", ""),
]


@pytest.mark.parametrize(
    ("text", "scored"),
    EXTRACT,
    ids=["plain", "lower-case", "last-marker", "second-line", "no-marker", "whitespace", "empty"],
)
def test_final_answer_is_the_first_line_after_the_last_marker(text, scored):
    assert grading.final_answer(text) == scored


NUMERIC = [
    ("FINAL ANSWER: 239,402.08", 239402.08, 0.01, True),
    ("FINAL ANSWER: $239,402.09", 239402.08, 0.01, True),
    ("FINAL ANSWER: 239402.10", 239402.08, 0.01, False),
    ("FINAL ANSWER: In 2025 it was 1,234", 1234, 0.5, True),  # the comma number wins over 2025
    ("FINAL ANSWER: 2025 total 87.5", 87.5, 0.01, True),
    ("FINAL ANSWER: -12.5", -12.5, 0.01, True),
    ("FINAL ANSWER: -12.5", 12.5, 0.01, False),
    ("FINAL ANSWER: 80", 80, 0.5, True),
    ("FINAL ANSWER: about eighty", 80, 0.5, False),
    ("", 0, 0.5, False),
    ("FINAL ANSWER: 10\nFINAL ANSWER: 11", 11, 0.5, True),
    ("The count is\n\nFINAL ANSWER:\n14", 14, 0.5, True),
]


@pytest.mark.parametrize(
    ("text", "value", "tol", "ok"), NUMERIC, ids=[f"n{i}" for i in range(len(NUMERIC))]
)
def test_numeric_grades_the_first_decimal_or_comma_number(text, value, tol, ok):
    verdict = grading.numeric(text, value, tol)
    assert verdict.ok is ok, verdict
    assert verdict.reason


ENTITY = [
    ("FINAL ANSWER: North", ("North",), (), True),
    ("FINAL ANSWER: north", ("North",), (), True),
    ("FINAL ANSWER: Northeast", ("North",), (), False),  # word boundary
    ("FINAL ANSWER: North_East", ("North",), (), False),  # _ is a word character
    ("FINAL ANSWER: North-East", ("North",), ("North-East",), False),  # wrong alias contains right
    ("FINAL ANSWER: North, not South", ("North",), ("South",), False),  # veto
    ("FINAL ANSWER: the bronze tier", ("bronze",), ("silver", "gold"), True),
    ("FINAL ANSWER:", ("North",), (), False),
    ("FINAL ANSWER: West\nNorth was close", ("West",), ("North",), True),
]


@pytest.mark.parametrize(
    ("text", "aliases", "wrong", "ok"), ENTITY, ids=[f"e{i}" for i in range(len(ENTITY))]
)
def test_entity_matches_aliases_on_word_boundaries_and_wrong_aliases_veto(text, aliases, wrong, ok):
    assert grading.entity(text, aliases, wrong).ok is ok


UPDATE = [
    ("FINAL ANSWER: 322,536.20", 322536.2, 239402.08, 0.01, True),
    ("FINAL ANSWER: 239,402.08", 322536.2, 239402.08, 0.01, False),
    ("FINAL ANSWER: 322,536.20 (was 239,402.08)", 322536.2, 239402.08, 0.01, True),  # first number
    ("FINAL ANSWER: 12", 12, 12.3, 0.5, False),  # stale within the same tolerance
]


@pytest.mark.parametrize(
    ("text", "new", "stale", "tol", "ok"), UPDATE, ids=[f"u{i}" for i in range(len(UPDATE))]
)
def test_update_needs_the_new_value_and_never_the_stale_one(text, new, stale, tol, ok):
    assert grading.update(text, Grading("numeric", new, tol), stale).ok is ok


def test_entity_update_refuses_the_stale_entity():
    g = Grading("entity", aliases=("South",))
    assert grading.update("FINAL ANSWER: South", g, "West").ok
    assert not grading.update("FINAL ANSWER: South (formerly West)", g, "West").ok


ABSTAIN = [
    ("FINAL ANSWER: INSUFFICIENT INFORMATION", True),
    ("FINAL ANSWER: I don't know.", True),
    ("FINAL ANSWER: I don’t know.", True),  # typographic apostrophe
    ("FINAL ANSWER: That cannot be determined from the data", True),
    ("FINAL ANSWER: Unknown", True),
    ("FINAL ANSWER: 12,000 USD", False),
    ("", False),
]


@pytest.mark.parametrize(("text", "ok"), ABSTAIN, ids=[f"a{i}" for i in range(len(ABSTAIN))])
def test_abstention_matches_the_refusal_phrases(text, ok):
    assert grading.abstention(text).ok is ok


@pytest.mark.parametrize(
    ("fact", "output", "ok"),
    [
        ("The 'anchor region' is North.", '{"text": "the anchor-region is NORTH!"}', True),
        ("The 'anchor region' is North.", '{"text": "anchor region: South"}', False),
        ("", "anything", False),
    ],
    ids=["punctuation-and-case", "different-fact", "empty-fact"],
)
def test_surfaced_is_a_normalized_substring_match(fact, output, ok):
    assert grading.surfaced(fact, output) is ok


def test_graders_agree_with_every_verdict_of_the_peers_k5_run(peer):
    """Grade every recorded final answer of five real passes and compare with the peer."""
    pset = protocols.load(os.path.join(peer, "bench", "protocols")).by_id()
    files = sorted(
        glob.glob(
            os.path.join(peer, "bench", "results", "s5-anthropic-k5", "*", "lifecycle-a3.json")
        )
    )
    assert len(files) == 5
    agree, disagree = 0, []
    for file in files:
        with open(file) as fh:
            runs = json.load(fh)["runs"]
        for run in runs:
            p = pset[run["protocol_id"]]
            last = {e["stage"]: e["final_answer"] for e in run["episodes"]}
            checks = {
                "recall_correct": ("recall", lambda t, p=p: grading.grade(t, p.recall.grading)),
                "transfer_correct": (
                    "transfer",
                    lambda t, p=p: grading.grade(t, p.transfer.grading),
                ),
                "update_correct": (
                    "update_recall",
                    lambda t, p=p: grading.update(
                        t, p.update.recall.grading, p.update.superseded_value
                    ),
                ),
                "abstain_correct": ("abstain", grading.abstention),
            }
            for key, (stage, grade) in checks.items():
                recorded = run.get(key)
                if recorded is None:
                    continue
                ours = grade(last[stage]).ok
                if ours == recorded:
                    agree += 1
                else:
                    disagree.append((file, run["protocol_id"], stage, recorded, ours))
    print(f"agreement with the peer's recorded verdicts: {agree}/{agree + len(disagree)}")
    assert not disagree, disagree
    assert agree >= 430
