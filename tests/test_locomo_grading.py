"""LoCoMo's grading: every rule against values computed by hand (docs/locomo.md, Grading).

Stems used below are nltk's PorterStemmer's: hiking/hikes -> hike, painting -> paint,
pottery -> potteri; numbers stay themselves.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from benchledger.projections.suites.locomo import grading

pytest.importorskip("nltk")  # the `locomo` extra (and the `test` extra) bring it

# (prediction, gold, category, expected); the arithmetic is in each case's comment.
CASES = [
    # tokens [paris] vs [paris]: 1 shared, P=1 R=1 -> 1
    pytest.param("Paris", "Paris", 4, 1.0, id="exact-single-hop"),
    # "the", "and" dropped, comma dropped: [cat dog] vs [cat dog] -> 1
    pytest.param("The cat and the dog", "cat, dog", 4, 1.0, id="articles-and-commas"),
    # a, an, and dropped: [banana appl] vs [banana appl] -> 1
    pytest.param("a banana and an apple", "banana apple", 2, 1.0, id="a-an-and"),
    # stems [she went hike] vs [hike]: 1 shared, P=1/3 R=1 -> 2*(1/3)/(4/3) = 1/2
    pytest.param("She went hiking", "hikes", 4, 0.5, id="stemming"),
    # punctuation removed: [potteri] vs [potteri] -> 1
    pytest.param("Pottery!", "pottery.", 2, 1.0, id="punctuation"),
    # numbers kept, comma dropped: [7 may 2023] vs [may 7 2023] -> 3 shared of 3 -> 1
    pytest.param("7 May 2023", "May 7, 2023", 2, 1.0, id="numbers-any-order"),
    # [in may 2023] vs [7 may 2023]: 2 shared, P=2/3 R=2/3 -> 2/3
    pytest.param("in May 2023", "7 May 2023", 2, 2 / 3, id="numbers-partial"),
    # a repeated token counts once against one gold token: P=1/2 R=1 -> 2/3
    pytest.param("cat cat", "cat", 4, 2 / 3, id="repeated-token"),
    # no prediction tokens: nothing shared -> 0
    pytest.param("", "Paris", 4, 0.0, id="empty-prediction"),
    # only dropped words: normalises to nothing -> 0
    pytest.param("the and a", "Paris", 4, 0.0, id="prediction-all-dropped-words"),
    # gold parts hike, paint, swim; best predicted part 1, 1, 0 -> (1+1+0)/3 = 2/3
    pytest.param("painting, hiking", "hiking, painting, swimming", 1, 2 / 3, id="multi-hop"),
    # one predicted part [potteri paint] vs each gold part (one token): P=1/2 R=1 -> 2/3 each,
    # mean 2/3 (plain F1 would give 1: the comma split matters)
    pytest.param("pottery and painting", "pottery, painting", 1, 2 / 3, id="multi-hop-unsplit"),
    # first ;-alternative only: [florida] vs [florida] -> 1 (plain F1 against both: 2/3)
    pytest.param("Florida", "Florida; Miami", 3, 1.0, id="open-domain-first-alternative"),
    # [miami] vs [florida] -> 0: later alternatives do not count
    pytest.param("Miami", "Florida; Miami", 3, 0.0, id="open-domain-second-alternative"),
    # the phrase anywhere, any case -> 1
    pytest.param("No information available.", "Paris", 5, 1.0, id="adversarial-no-information"),
    pytest.param("That is NOT MENTIONED here", "", 5, 1.0, id="adversarial-not-mentioned"),
    # naming the (adversarial) answer is wrong: no phrase -> 0
    pytest.param("Paris", "Paris", 5, 0.0, id="adversarial-answered"),
    # only LoCoMo's two phrases count -> 0
    pytest.param("No information", "", 5, 0.0, id="adversarial-other-refusal"),
]


@pytest.mark.parametrize(("prediction", "gold", "category", "expected"), CASES)
def test_a_prediction_scores_as_locomo_grades_it(prediction, gold, category, expected):
    assert grading.score(prediction, gold, category) == pytest.approx(expected, abs=1e-12)


def test_an_unknown_category_is_refused():
    with pytest.raises(ValueError, match="categories are 1 to 5"):
        grading.score("x", "x", 6)


RANKED = ("D4:1", "D1:3", "D9:9", "D9:8", "D9:7", "D2:5")
EVIDENCE = ("D1:3", "D2:5")


@pytest.mark.parametrize(
    ("evidence", "retrieved", "expected"),
    [
        # D1:3 found, D2:5 not -> 1/2
        pytest.param(EVIDENCE, ("D1:3", "D4:1"), 0.5, id="dialogue-level"),
        # sessions S1, S2 hold D1:3 and D2:5, not D3:1 -> 2/3
        pytest.param(("D1:3", "D2:5", "D3:1"), ("S1", "S2"), 2 / 3, id="session-level"),
        # nothing retrieved -> 0/2
        pytest.param(EVIDENCE, (), 0.0, id="nothing-retrieved"),
        # a question without evidence has no recall
        pytest.param((), ("D1:3",), None, id="no-evidence"),
    ],
)
def test_evidence_recall_is_the_share_of_evidence_retrieved(evidence, retrieved, expected):
    assert grading.evidence_recall(evidence, retrieved) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("k", "expected"),
    [
        pytest.param(1, 0.0, id="at-1"),  # top 1 = D4:1: 0 of 2
        pytest.param(5, 0.5, id="at-5"),  # D1:3 at rank 2, D2:5 at rank 6: 1 of 2
        pytest.param(10, 1.0, id="at-10"),  # both within 10: 2 of 2
    ],
)
def test_recall_at_k_counts_evidence_in_the_top_k(k, expected):
    assert grading.recall_at(k, EVIDENCE, RANKED) == expected


def test_reciprocal_rank_is_one_over_the_rank_of_the_first_evidence_retrieved():
    assert grading.reciprocal_rank(EVIDENCE, RANKED) == 0.5  # D1:3 at rank 2
    assert grading.reciprocal_rank(EVIDENCE, ("D7:1",)) == 0.0
    assert grading.reciprocal_rank((), RANKED) is None


def test_grading_module_loads_without_nltk_until_answers_are_graded():
    # The plain install has no nltk: importing and normalising must not need it.
    code = (
        "import sys; sys.modules['nltk'] = None\n"
        "from benchledger.projections.suites.locomo import grading as g\n"
        "assert g.normalise('The Cat, and a Dog!') == 'cat dog'\n"
        "assert g.score('no information available', '', 5) == 1.0\n"
        "print('ok')"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.stdout.strip() == "ok", out.stderr
