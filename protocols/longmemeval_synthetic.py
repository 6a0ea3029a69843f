"""A seeded, LongMemEval-shaped set: benchledger's own chat histories in LongMemEval's format.

LongMemEval's data is published separately and supplied by the user (docs/longmemeval.md);
this set has its format, every question type and an abstention question, each question
with its own small haystack (evidence sessions named ``answer_*`` as LongMemEval names
them, filler sessions ``sharegpt_*`` / ``ultrachat_*``), built from a small vocabulary with
a fixed seed, so the same command always writes the same bytes:

    python -m benchledger.protocols.longmemeval_synthetic protocols/data/longmemeval/synthetic.json

A test checks the committed file is exactly what this produces. ``full_size`` builds the
``_s``-shaped set ``benchledger bench longmemeval`` times (500 questions, ~40 sessions each).
"""

from __future__ import annotations

import datetime
import json
import random
import sys
from typing import Any, Final

SEED: Final = 52
FILLERS: Final = 2  # filler sessions per question in the shipped set

_PETS = ("beagle", "tabby cat", "parrot", "rabbit", "tortoise", "hamster")
_PET_NAMES = ("Waffles", "Juniper", "Pepper", "Otis", "Mango", "Clover", "Ziggy", "Biscuit")
_CITIES = ("Lisbon", "Oslo", "Kyoto", "Lima", "Nairobi", "Tallinn", "Hobart", "Quebec")
_HOBBIES = ("pottery", "rock climbing", "birdwatching", "sourdough baking", "kayaking")
_BOOKS = ("The Glaze Handbook", "Clay and Fire", "Wheel Throwing Basics", "Kiln Secrets")
_FILLER = (
    ("Can you explain how photosynthesis works?",
     "Plants turn light, water and carbon dioxide into sugar and oxygen."),
    ("What is a good way to learn a new language?",
     "Practise a little every day and speak with native speakers when you can."),
    ("How do I make a simple tomato sauce?",
     "Simmer crushed tomatoes with garlic, olive oil and a pinch of salt."),
    ("Why is the sky blue?", "Air scatters blue sunlight more than red light."),
    ("Give me tips for a job interview.",
     "Research the company, prepare examples and ask questions at the end."),
    ("What is the capital of Australia?", "The capital of Australia is Canberra."),
)  # fmt: skip


def _stamp(when: datetime.datetime) -> str:
    """A date as LongMemEval writes it: ``2023/05/20 (Sat) 02:21``."""
    return when.strftime("%Y/%m/%d (%a) %H:%M")


def _hex(rng: random.Random) -> str:
    return "".join(rng.choice("0123456789abcdef") for _ in range(8))


def _filler(rng: random.Random, turns: int) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    while len(out) < turns:
        q, a = rng.choice(_FILLER)
        out += [{"role": "user", "content": q}, {"role": "assistant", "content": a}]
    return out[:turns]


def _evidence(said: str, reply: str, *, assistant: bool = False) -> list[dict[str, Any]]:
    """An evidence session: a greeting, then the turn holding the answer (``has_answer``)."""
    user = {"role": "user", "content": said, "has_answer": not assistant}
    answer = {"role": "assistant", "content": reply, "has_answer": assistant}
    return [{"role": "user", "content": "Hi! Quick question for you today.", "has_answer": False},
            {"role": "assistant", "content": "Of course, go ahead.", "has_answer": False},
            user, answer]  # fmt: skip


def _cases(rng: random.Random) -> list[dict[str, Any]]:
    """One question per type, and an abstention question: each (type, question, answer,
    evidence sessions as (text said, reply, said by the assistant), days between them)."""
    pet, name = rng.choice(_PETS), rng.choice(_PET_NAMES)
    old, new = rng.sample(_CITIES, 2)
    hobby, book = rng.choice(_HOBBIES), rng.choice(_BOOKS)
    pets = rng.sample(_PET_NAMES, 3)
    return [
        {"type": "single-session-user", "q": f"What is the name of my {pet}?", "a": name,
         "ev": [(f"I adopted a {pet} named {name} last month.", "What a lovely name!", False)]},
        {"type": "single-session-assistant",
         "q": f"You recommended a book about {hobby} glazes earlier; what was its title?",
         "a": book,
         "ev": [(f"Can you recommend a book about {hobby} glazes?",
                 f"I recommend the book {book}, a clear guide to {hobby} glazes.", True)]},
        {"type": "single-session-preference", "q": "Can you suggest a weekend activity for me?",
         "a": f"The user would prefer suggestions involving {hobby}, which they enjoy.",
         "ev": [(f"I really enjoy {hobby} on weekends, it relaxes me.", "That sounds fun.",
                 False)]},
        {"type": "temporal-reasoning",
         "q": f"How many days passed between my trip to {old} and my trip to {new}?",
         "a": "{days} days",
         "ev": [(f"I just got back from a trip to {old}.", "Welcome back!", False),
                (f"I just got back from a trip to {new}.", "How was it?", False)]},
        {"type": "knowledge-update", "q": "Which city do I live in now?", "a": new,
         "ev": [(f"I live in {old} and I love the food here.", "Sounds great.", False),
                (f"I moved from {old} to {new}, so I live in {new} now.", "Congratulations!",
                 False)]},
        {"type": "multi-session", "q": "How many pets have I adopted in total?", "a": "3",
         "ev": [(f"I adopted a puppy named {pets[0]} today.", "Adorable!", False),
                (f"I adopted a kitten named {pets[1]} as well.", "Lovely!", False),
                (f"I adopted a rabbit named {pets[2]} this week too.", "Wow, a full house!",
                 False)]},
        {"type": "single-session-user", "abs": True, "q": "What is the name of my goldfish?",
         "a": f"You did not mention a goldfish; you mentioned a {pet} named {name}.",
         "ev": [(f"I adopted a {pet} named {name} last month.", "What a lovely name!", False)]},
    ]  # fmt: skip


def _question(rng: random.Random, case: dict[str, Any], fillers: int, turns: int) -> dict[str, Any]:
    """One question with its own haystack: its evidence sessions among ``fillers`` filler
    sessions, dated in order, ``turns`` turns per filler session."""
    qid = _hex(rng) + ("_abs" if case.get("abs") else "")
    sessions: list[tuple[str, list[dict[str, Any]]]] = []
    evidence = [(f"answer_{_hex(rng)}_{i + 1}", _evidence(s, r, assistant=a))
                for i, (s, r, a) in enumerate(case["ev"])]  # fmt: skip
    for _ in range(fillers):
        source = rng.choice(("sharegpt", "ultrachat"))
        sessions.append((f"{source}_{_hex(rng)}_{rng.randrange(10)}", _filler(rng, turns)))
    # The evidence sessions keep their order among the fillers (an update comes after).
    slots = sorted(rng.sample(range(fillers + len(evidence)), len(evidence)))
    for slot, ev in zip(slots, evidence, strict=True):
        sessions.insert(slot, ev)
    start = datetime.datetime(2023, 1, 1) + datetime.timedelta(days=rng.randrange(0, 200))
    dates, when, days = [], start, {}
    for sid, _ in sessions:
        when += datetime.timedelta(days=rng.randrange(2, 15), minutes=rng.randrange(0, 600))
        dates.append(_stamp(when))
        days[sid] = when
    ev_days = [days[sid] for sid, _ in evidence]
    answer = case["a"].format(days=(ev_days[-1].date() - ev_days[0].date()).days)
    asked = when + datetime.timedelta(days=rng.randrange(1, 10))
    return {
        "question_id": qid,
        "question_type": case["type"],
        "question": case["q"],
        "answer": answer,
        "question_date": _stamp(asked),
        "haystack_session_ids": [sid for sid, _ in sessions],
        "haystack_dates": dates,
        "haystack_sessions": [s for _, s in sessions],
        "answer_session_ids": [sid for sid, _ in evidence],
    }


def build(seed: int = SEED) -> list[dict[str, Any]]:
    """The shipped set for ``seed``: one question per type and an abstention question."""
    rng = random.Random(seed)
    return [_question(rng, c, FILLERS, 4) for c in _cases(rng)]


def full_size(questions: int = 500, sessions: int = 40, turns: int = 10,
              seed: int = SEED) -> list[dict[str, Any]]:  # fmt: skip
    """An ``_s``-shaped set for benchmarks: ``questions`` questions (the shipped cases in
    turn), each with ``sessions`` sessions in its haystack, ``turns`` turns per filler."""
    rng = random.Random(seed)
    out: list[dict[str, Any]] = []
    while len(out) < questions:
        for case in _cases(rng):
            if len(out) < questions:
                fillers = max(0, sessions - len(case["ev"]))
                out.append(_question(rng, case, fillers, turns))
    return out


def render(seed: int = SEED) -> str:
    """The set as the committed file's text (indented JSON, a final newline)."""
    return json.dumps(build(seed), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """Write the set to the one path given, printing the seed."""
    if len(argv) != 1:
        print("usage: python -m benchledger.protocols.longmemeval_synthetic OUT.json",
              file=sys.stderr)  # fmt: skip
        return 2
    with open(argv[0], "w", encoding="utf-8") as fh:
        fh.write(render())
    print(f"seed {SEED}: wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
