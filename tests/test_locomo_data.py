"""Loading a LoCoMo file: the published shape becomes typed samples, pinned by hashes; a bad
file is one line per problem naming file, sample and field (exit 2).

The file is written here in LoCoMo's shape: LoCoMo's own data carries no licence and is never
copied into the repository.
"""

from __future__ import annotations

import copy
import hashlib
import json
import os

import pytest

from benchledger.ledger.codec import MAX_DEPTH
from benchledger.protocols.errors import InvalidInput, ProtocolError
from benchledger.protocols.locomo import Session, Turn, load


def _turns(n: int, count: int) -> list[dict]:
    speakers = ("Ada", "Ben")
    return [
        {"speaker": speakers[j % 2], "dia_id": f"D{n}:{j + 1}", "text": f"line {j + 1} of {n}"}
        for j in range(count)
    ]


def _sample() -> dict:
    return {
        "sample_id": "conv-1",
        "conversation": {
            "speaker_a": "Ada",
            "speaker_b": "Ben",
            # numerically session_2 comes before session_10, though not as text
            "session_10_date_time": "1:00 pm on 3 May, 2023",
            "session_10": _turns(10, 2),
            "session_2_date_time": "9:00 am on 1 May, 2023",
            "session_2": [{**_turns(2, 1)[0], "img_url": ["x"], "blip_caption": "a cat"}],
        },
        "qa": [
            {"question": "When?", "answer": 2022, "evidence": ["D2:1"], "category": 2},
            {"question": "What?", "answer": "tea; coffee", "evidence": ["D10:2"], "category": 3},
            {
                "question": "Why?",
                "adversarial_answer": "rain",
                "evidence": ["D10:1"],
                "category": 5,
            },
        ],
        # extra keys LoCoMo ships: ignored, never required
        "event_summary": {"events_session_2": []},
        "observation": {"session_2_observation": {}},
        "session_summary": {"session_2_summary": "..."},
    }


def _write(tmp_path, doc, name: str = "locomo.json") -> str:
    path = os.path.join(tmp_path, name)
    with open(path, "w", encoding="utf-8") as fh:
        json.dump(doc, fh)
    return path


def test_a_locomo_file_loads_into_ordered_typed_samples(tmp_path):
    path = _write(tmp_path, [_sample()])
    got = load(path)
    with open(path, "rb") as fh:
        assert got.sha256 == hashlib.sha256(fh.read()).hexdigest()
    (sample,) = got.samples
    assert (sample.sample_id, sample.speaker_a, sample.speaker_b) == ("conv-1", "Ada", "Ben")
    assert [s.id for s in sample.sessions] == ["S2", "S10"]
    assert sample.sessions[0] == Session(
        2, "9:00 am on 1 May, 2023", (Turn("D2:1", "Ada", "line 1 of 2"),)
    )
    assert [(q.id, q.category, q.answer, q.evidence) for q in sample.questions] == [
        ("conv-1:q1", 2, "2022", ("D2:1",)),
        ("conv-1:q2", 3, "tea; coffee", ("D10:2",)),
        ("conv-1:q3", 5, "rain", ("D10:1",)),
    ]


def test_a_sample_s_hash_follows_its_content_not_the_keys_ignored(tmp_path):
    base = load(_write(tmp_path, [_sample()], "a.json")).samples[0].content_hash
    ignored = _sample()
    ignored["session_summary"] = {"session_2_summary": "changed"}
    assert load(_write(tmp_path, [ignored], "b.json")).samples[0].content_hash == base
    used = _sample()
    used["conversation"]["session_2"][0]["text"] = "changed"
    assert load(_write(tmp_path, [used], "c.json")).samples[0].content_hash != base


def test_a_symlink_the_user_names_is_followed_but_a_fifo_is_refused(tmp_path):
    real = _write(tmp_path, [_sample()])
    link = os.path.join(tmp_path, "link.json")
    os.symlink(real, link)
    assert load(link).sha256 == load(real).sha256
    fifo = os.path.join(tmp_path, "fifo.json")
    os.mkfifo(fifo)
    with pytest.raises(InvalidInput, match="not a regular file"):
        load(fifo)


def _set(path: list, value) -> object:
    def change(doc: list) -> list:
        node = doc
        for key in path[:-1]:
            node = node[key]
        if value is _DELETE:
            del node[path[-1]]
        else:
            node[path[-1]] = value
        return doc

    return change


_DELETE = object()
_S = [0, "conversation"]

BAD = [
    pytest.param(
        lambda d: {}, ": must be a non-empty list of samples, got a mapping", id="not-a-list"
    ),
    pytest.param(lambda d: [], "must be a non-empty list of samples", id="no-samples"),
    pytest.param(_set([0, "sample_id"], _DELETE), "[0].sample_id: missing", id="no-sample-id"),
    pytest.param(
        lambda d: d + copy.deepcopy(d), "[1].sample_id: 'conv-1' appears twice", id="dup-sample"
    ),
    pytest.param(
        _set([0, "sample_id"], "a/b"), "must start with a letter or digit", id="slash-in-id"
    ),
    pytest.param(_set(_S, []), "conv-1:conversation: must be an object", id="conversation-list"),
    pytest.param(
        _set([*_S, "speaker_b"], 7),
        "conv-1:conversation.speaker_b: must be text",
        id="speaker-number",
    ),
    pytest.param(
        _set([*_S, "session_2_date_time"], _DELETE),
        "conv-1:conversation.session_2_date_time: missing",
        id="session-without-date",
    ),
    pytest.param(
        lambda d: [{**d[0], "conversation": {"speaker_a": "A", "speaker_b": "B"}}],
        "conv-1:conversation: holds no session_N",
        id="no-sessions",
    ),
    pytest.param(
        _set([*_S, "session_10", 1, "dia_id"], "D2:1"),
        "conv-1:conversation.session_10[1].dia_id: 'D2:1' appears twice",
        id="dup-dia-id",
    ),
    pytest.param(
        _set([*_S, "session_2", 0, "text"], None), "session_2[0].text: missing", id="turn-no-text"
    ),
    pytest.param(_set([0, "qa"], {}), "conv-1:qa: must be a list of questions", id="qa-object"),
    pytest.param(
        _set([0, "qa", 0, "category"], 6),
        "conv-1:qa[0].category: must be one of 1 to 5, got 6",
        id="category-6",
    ),
    pytest.param(
        _set([0, "qa", 0, "category"], True), "must be one of 1 to 5, got True", id="category-bool"
    ),
    pytest.param(
        _set([0, "qa", 1, "answer"], _DELETE), "conv-1:qa[1].answer: missing", id="no-answer"
    ),
    pytest.param(
        _set([0, "qa", 2, "adversarial_answer"], _DELETE),
        "conv-1:qa[2].adversarial_answer: missing",
        id="adversarial-no-answer",
    ),
    pytest.param(
        _set([0, "qa", 0, "evidence"], "D2:1"), "qa[0].evidence: must be a list", id="evidence-text"
    ),
    # Issue 50: each was a traceback (KeyError, exit 1) or, for 1.0, a run whose every
    # metric was n/a.
    pytest.param(
        lambda d: _rename(d, "session_2", "session_02"),
        "conv-1:conversation.session_02: not a session key",
        id="session-leading-zero",
    ),
    pytest.param(
        lambda d: _rename(d, "session_2", "session_\u0662"),  # ARABIC-INDIC DIGIT TWO
        "conv-1:conversation.session_\u0662: not a session key",
        id="session-other-script-digit",
    ),
    pytest.param(
        _set([0, "qa", 0, "category"], 1.0),
        "qa[0].category: must be one of 1 to 5, got 1.0",
        id="category-float",
    ),
]


def _rename(doc: list, old: str, new: str) -> list:
    conv = doc[0]["conversation"]
    conv[new] = conv.pop(old)
    conv[f"{new}_date_time"] = conv.pop(f"{old}_date_time")
    return doc


@pytest.mark.parametrize(("mutate", "says"), BAD)
def test_a_bad_locomo_file_is_one_line_per_problem_naming_sample_and_field(tmp_path, mutate, says):
    path = _write(tmp_path, mutate([_sample()]))
    with pytest.raises(InvalidInput) as err:
        load(path)
    assert isinstance(err.value, ProtocolError) and err.value.exit_code == 2
    lines = [str(p) for p in err.value.problems]
    assert any(line.startswith(f"{path}:") and says in line for line in lines), lines
    assert all("\n" not in line for line in lines)


@pytest.mark.parametrize(
    ("data", "says"),
    [
        pytest.param(b"[{\n", "locomo.json:2: not JSON", id="not-json"),
        pytest.param(b"\xff[]", "not UTF-8", id="not-utf8"),
        pytest.param(
            b"[" * (MAX_DEPTH + 1) + b"]" * (MAX_DEPTH + 1), "nested 65 levels", id="deep"
        ),
        pytest.param(  # was a ValueError traceback (Python's int() digit limit)
            b'[{"sample_id": ' + b"9" * 5000 + b"}]",
            "a number of more than 4300 digits",
            id="long-integer",
        ),
    ],
)
def test_an_unreadable_locomo_file_is_one_line(tmp_path, data, says):
    path = os.path.join(tmp_path, "locomo.json")
    with open(path, "wb") as fh:
        fh.write(data)
    with pytest.raises(InvalidInput, match=says.replace(".", r"\.")):
        load(path)


def test_a_missing_file_is_one_line_naming_it(tmp_path):
    path = os.path.join(tmp_path, "absent.json")
    with pytest.raises(InvalidInput, match=r"absent\.json: cannot read"):
        load(path)


# -- LoCoMo data as it really is (issue 49 item 8) -------------------------------------------
# The published file has evidence written several ids to a string ("D8:6; D9:17"), ids with
# no turn number ("D") or one colon too many ("D:11:26"), ids naming no turn, and lone
# surrogate escapes ("\\ud83d" without its pair): each reproduced here.

MALFORMED = ["D2:1; D10:2", "D", "D:10:1", "D7:1", "D10:9"]


def _as_published(tmp_path) -> str:
    doc = [_sample()]
    doc[0]["qa"][0]["evidence"] = MALFORMED[:3]
    doc[0]["qa"][1]["evidence"] = MALFORMED[3:]
    text = json.dumps(doc).replace("line 1 of 2", "line 1 \\ud83d of 2")
    text = text.replace("line 2 of 10", "line 2 \\ud83d\\ude0a of 10")  # a pair: an emoji
    path = os.path.join(tmp_path, "locomo10.json")
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(text)
    return path


def test_validate_counts_malformed_and_dangling_evidence_and_says_how_each_is_graded(
    tmp_path, capsys
):
    from benchledger.cli import main

    path = _as_published(tmp_path)
    assert main(["protocols", "validate", path]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"ok {path}: LoCoMo, 1 samples, 3 questions")
    assert out[1] == "evidence: 5 of 6 evidence strings are kept as written and graded as below"
    several, not_id, no_turn = out[2], out[3], out[4]
    assert several.startswith("  several ids in one string: 1 (conv-1:q1 'D2:1; D10:2');")
    assert "one miss in evidence recall, recall@k and MRR (not one per id it names)" in several
    assert not_id.startswith("  not a dialogue id: 2 (conv-1:q1 'D', conv-1:q1 'D:10:1');")
    assert no_turn.startswith("  names no turn: 2 (conv-1:q2 'D7:1', conv-1:q2 'D10:9');")
    assert out[5].startswith("text: 1 lone surrogate escape(s)")  # the pair is an emoji


def test_list_and_hash_read_a_locomo_file_with_lone_surrogate_escapes(tmp_path, capsys):
    from benchledger.cli import main

    path = _as_published(tmp_path)
    assert main(["protocols", "hash", path]) == 0
    out = capsys.readouterr().out.splitlines()
    with open(path, "rb") as fh:
        assert out == ["LoCoMo, 1 samples, 3 questions, file sha256",
                       hashlib.sha256(fh.read()).hexdigest()]  # fmt: skip
    assert main(["protocols", "list", path]) == 0
    listed = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in listed] == ["id", "conv-1:q1", "conv-1:q2", "conv-1:q3"]
    loaded = load(path)
    assert loaded.surrogates == 1
    texts = [t.text for s in loaded.samples[0].sessions for t in s.turns]
    assert "line 1 \ufffd of 2" in texts and "line 2 \U0001f60a of 10" in texts
    assert all(len(s.content_hash) == 64 for s in loaded.samples)  # the ledger can hold it


def test_a_locomo_file_as_published_runs_to_a_sealed_run_that_rederives(tmp_path, capsys):
    """Its lone surrogate (read as U+FFFD) and malformed evidence (graded as misses) leave
    a run the ledger can hold: sealed, and re-derived to the same numbers."""
    from benchledger.cli import main

    path = _as_published(tmp_path)
    ledger = str(tmp_path / "l.sqlite")
    assert main(["run", "--suite", "locomo", "--data", path, "--ledger", ledger,
                 "--run-id", "lc"]) == 0  # fmt: skip
    assert "run lc sealed" in capsys.readouterr().out
    assert main(["replay", "lc", "--ledger", ledger]) == 0
    assert "all equal" in capsys.readouterr().out
