"""The paraphrase variant of the committed lifecycle set (docs/protocols.md, The paraphrase
variant): every question shares no content word with the fact it is graded against, the
rest of each protocol is the committed one, and generation is deterministic."""

from __future__ import annotations

import filecmp
import os

import msgspec
import pytest

from benchledger import protocols
from benchledger.cli import main
from benchledger.protocols import dataset, generate, paraphrase

PARAPHRASED = protocols.load(protocols.LIFECYCLE_PARAPHRASE_DIR).protocols
COMMITTED = {p.id: p for p in protocols.load(protocols.LIFECYCLE_DIR).protocols}


def _questions(p):
    """(stage, question, the fact it is graded against) of every paraphrased stage."""
    out = [("recall", p.recall.prompt, p.fact)]
    if p.transfer is not None:
        out.append(("transfer", p.transfer.prompt, p.fact))
    if p.update is not None:
        out.append(("update_recall", p.update.recall.prompt, p.update.fact))
    return out


@pytest.mark.parametrize("p", PARAPHRASED, ids=lambda p: p.id)
def test_every_question_shares_no_content_word_with_its_fact(p):
    for stage, question, fact in _questions(p):
        assert paraphrase.shared(question, fact) == set(), (stage, question)


def test_the_committed_questions_did_share_words_so_the_variant_changed_them():
    before = [q for p in COMMITTED.values() for _, q, f in _questions(p) if paraphrase.shared(q, f)]
    assert len(before) == len([q for p in PARAPHRASED for q in _questions(p)])  # all of them


@pytest.mark.parametrize("p", PARAPHRASED, ids=lambda p: p.id)
def test_only_the_questions_differ_from_the_committed_protocol(p):
    original = COMMITTED[p.id]
    again = paraphrase.variant(original)
    assert again == p
    blank = {"prompt": ""}

    def without_questions(x):
        doc = msgspec.to_builtins(x)
        for key in ("recall", "transfer"):
            if doc.get(key):
                doc[key] |= blank
        if doc.get("update"):
            doc["update"]["recall"] |= blank
        return doc

    assert without_questions(p) == without_questions(original)


def test_generation_is_deterministic_and_reproduces_the_committed_variant(tmp_path, capsys):
    print(f"dataset seed {dataset.SEED}")  # the set's answers come from the seeded dataset
    assert generate.files("paraphrase") == generate.files("paraphrase")
    out = tmp_path / "out"
    assert main(["protocols", "generate", "--out", str(out), "--variant", "paraphrase"]) == 0
    said = capsys.readouterr().out
    assert f"dataset seed {dataset.SEED}" in said
    assert sorted(os.listdir(out)) == ["lifecycle-paraphrase", "pack"]
    committed = protocols.LIFECYCLE_PARAPHRASE_DIR
    names = sorted(os.listdir(committed))
    assert sorted(os.listdir(out / "lifecycle-paraphrase")) == names
    assert "pack-schema.toml" in names
    _, mismatch, errors = filecmp.cmpfiles(committed, out / "lifecycle-paraphrase", names,
                                           shallow=False)  # fmt: skip
    assert not mismatch and not errors, mismatch
    assert main(["protocols", "validate", committed]) == 0


@pytest.mark.parametrize(
    ("question", "fact"),
    [
        ("Which sales channel is the silent channel? Answer with the channel name.",
         "The 'silent channel' is the sales channel with the fewest refunded web orders."),
        ("How many orders of at least 1,500 USD were completed?",
         "A 'big order' is a completed order of at least 1,500 USD."),
    ],
    ids=["an-unknown-term-word-is-dropped", "a-shared-number-is-spelled"],
)  # fmt: skip
def test_a_new_definition_in_the_same_vocabulary_is_paraphrased_by_the_same_rules(question, fact):
    said = paraphrase.paraphrase(question, fact)
    assert paraphrase.shared(said, fact) == set() and said != question
    assert paraphrase.paraphrase(question, fact) == said


def test_words_compare_by_stem_and_stop_words_carry_no_content():
    assert paraphrase.content_words("Orders ordered; the ORDER of it") == {"order"}
    assert paraphrase.stem("purchases") == paraphrase.stem("purchase")
    assert paraphrase.spelled(1500) == "one thousand five hundred"
    assert paraphrase.spelled(2025) == "two thousand twenty-five"
