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
]


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
