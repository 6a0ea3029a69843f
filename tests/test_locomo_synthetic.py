"""The committed LoCoMo-shaped set (protocols/data/locomo/synthetic.json): exactly what its
seeded generator writes, in LoCoMo's format, with all five categories and evidence that
names the turns holding each answer."""

from __future__ import annotations

import os
from collections import Counter

from benchledger.protocols import locomo_synthetic
from benchledger.protocols.locomo import load

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = os.path.join(REPO, "protocols", "data", "locomo", "synthetic.json")


def test_the_committed_set_is_exactly_what_the_generator_writes():
    print(f"seed {locomo_synthetic.SEED}")
    with open(COMMITTED, encoding="utf-8") as fh:
        assert fh.read() == locomo_synthetic.render()


def test_the_generator_writes_the_path_it_is_given(tmp_path):
    out = tmp_path / "set.json"
    assert locomo_synthetic.main([str(out)]) == 0
    assert out.read_text(encoding="utf-8") == locomo_synthetic.render()


def test_the_set_loads_with_every_category_in_a_few_conversations():
    samples = load(COMMITTED).samples
    questions = [q for s in samples for q in s.questions]
    assert 2 <= len(samples) <= 3 and len(questions) < 200
    assert set(Counter(q.category for q in questions)) == {1, 2, 3, 4, 5}


def test_every_evidence_id_names_a_turn_of_its_sample_that_holds_the_answer():
    for sample in load(COMMITTED).samples:
        turns = {t.dia_id: t for s in sample.sessions for t in s.turns}
        for q in sample.questions:
            said = " ".join(turns[e].text for e in q.evidence)
            # category 1's parts, category 3's topic (its second alternative), else the answer
            if q.category == 2:
                continue  # a date relative to the session's, not words in the turn
            parts = [q.answer]
            if q.category == 1:
                parts = q.answer.split(", ")
            elif q.category == 3:
                parts = q.answer.split("; ")[1:]
            assert parts and all(p in said for p in parts), (q.id, said)


def test_an_adversarial_question_asks_one_speaker_what_only_the_other_said():
    for sample in load(COMMITTED).samples:
        turns = {t.dia_id: t for s in sample.sessions for t in s.turns}
        for q in (q for q in sample.questions if q.category == 5):
            (evidence,) = q.evidence
            owner = turns[evidence].speaker
            asked = sample.speaker_b if owner == sample.speaker_a else sample.speaker_a
            assert f"{asked}'s" in q.question
            assert not any(q.answer in t.text for t in turns.values() if t.speaker == asked)
