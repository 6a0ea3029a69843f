"""A seeded, LoCoMo-shaped set: benchledger's own conversations in LoCoMo's format.

LoCoMo's data carries no licence and is never shipped (docs/locomo.md); this set has its
schema, all five question categories and evidence ids, built from a small vocabulary with a
fixed seed, so the same command always writes the same bytes:

    python -m benchledger.protocols.locomo_synthetic protocols/data/locomo/synthetic.json

A test checks the committed file is exactly what this produces.
"""

from __future__ import annotations

import datetime
import json
import random
import sys
from typing import Any, Final

SEED: Final = 40
CONVERSATIONS: Final = 3
SESSIONS: Final = 4

_NAMES = ("Ada", "Ben", "Cora", "Dev", "Elin", "Farid", "Greta", "Hugo")
_HOBBIES = ("pottery", "rock climbing", "birdwatching", "sourdough baking", "chess", "kayaking")
_PETS = ("cat", "dog", "parrot", "rabbit", "tortoise")
_PET_NAMES = ("Biscuit", "Juniper", "Pepper", "Otis", "Mango", "Clover", "Ziggy")
_CITIES = ("Lisbon", "Oslo", "Kyoto", "Lima", "Nairobi", "Tallinn", "Hobart", "Quebec")
# A topic someone reads about -> what they might study (open-domain: an inference).
_TOPICS = {
    "the stars and planets": "astronomy",
    "old castles and empires": "history",
    "how bridges stay up": "engineering",
    "coral reefs and fish": "marine biology",
    "how the mind works": "psychology",
}
_REPLIES = ("That sounds great!", "Oh nice, tell me more.", "Wow, really?", "I love that.")


def _date(day: datetime.date, rng: random.Random) -> str:
    hour, minute = rng.randrange(1, 13), rng.randrange(0, 60)
    return f"{hour}:{minute:02d} {rng.choice(('am', 'pm'))} on {day.day} {day:%B}, {day.year}"


def _conversation(index: int, rng: random.Random) -> dict[str, Any]:
    """One sample: two speakers, four dated sessions, the facts said in them, the questions."""
    a, b = rng.sample(_NAMES, 2)
    # Drawn without replacement: no fact of one speaker is also true of the other, so an
    # adversarial question (one speaker's fact asked of the other) has no answer.
    hobbies, pets = rng.sample(_HOBBIES, 2), rng.sample(_PETS, 2)
    pet_names, cities = rng.sample(_PET_NAMES, 2), rng.sample(_CITIES, 4)
    topics = rng.sample(sorted(_TOPICS), 2)
    people: dict[str, dict[str, Any]] = {}
    for i, name in enumerate((a, b)):
        people[name] = {
            "hobby": hobbies[i],
            "pet": pets[i],
            "pet_name": pet_names[i],
            "cities": cities[2 * i : 2 * i + 2],
            "topic": topics[i],
        }
    # (owner, fact kind, what they say); fact i is said in session i % SESSIONS + 1, so each
    # person's two cities fall in different sessions (multi-hop across sessions).
    facts = [
        (a, "hobby", f"I started {people[a]['hobby']} last week."),
        (b, "pet", f"My {people[b]['pet']} is named {people[b]['pet_name']}."),
        (a, "city1", f"I just got back from a trip to {people[a]['cities'][0]}."),
        (b, "city1", f"I spent a weekend in {people[b]['cities'][0]}."),
        (a, "pet", f"My {people[a]['pet']} is named {people[a]['pet_name']}."),
        (b, "hobby", f"I started {people[b]['hobby']} last week."),
        (a, "topic", f"Lately I keep reading books about {people[a]['topic']}."),
        (b, "topic", f"Lately I keep reading books about {people[b]['topic']}."),
        (a, "city2", f"I just got back from a trip to {people[a]['cities'][1]}."),
        (b, "city2", f"I spent a weekend in {people[b]['cities'][1]}."),
    ]
    day = datetime.date(2023, 1, 1) + datetime.timedelta(days=rng.randrange(0, 300))
    conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    said: dict[tuple[str, str], tuple[str, str]] = {}  # (owner, kind) -> (dia_id, date said)
    for n in range(1, SESSIONS + 1):
        day += datetime.timedelta(days=rng.randrange(5, 21))
        turns: list[dict[str, str]] = []

        def turn(speaker: str, text: str, n: int = n, turns: list = turns) -> str:
            dia_id = f"D{n}:{len(turns) + 1}"
            turns.append({"speaker": speaker, "dia_id": dia_id, "text": text})
            return dia_id

        turn(a, f"Hi {b}, how have you been?")
        turn(b, f"Good, {a}! Busy weeks.")
        for i, (owner, kind, text) in enumerate(facts):
            if i % SESSIONS + 1 == n:
                said[owner, kind] = (turn(owner, text), f"{day.day} {day:%B} {day.year}")
                turn(b if owner == a else a, rng.choice(_REPLIES))
        conversation[f"session_{n}_date_time"] = _date(day, rng)
        conversation[f"session_{n}"] = turns
    qa: list[dict[str, Any]] = []
    for who, other in ((a, b), (b, a)):
        p = people[who]
        qa += [
            {
                "question": f"Which cities has {who} visited?",
                "answer": ", ".join(p["cities"]),
                "evidence": [said[who, "city1"][0], said[who, "city2"][0]],
                "category": 1,
            },
            {
                "question": f"When did {who} start {p['hobby']}?",
                "answer": f"The week before {said[who, 'hobby'][1]}",
                "evidence": [said[who, "hobby"][0]],
                "category": 2,
            },
            {
                "question": f"What might {who} choose to study at university?",
                "answer": f"{_TOPICS[p['topic']]}; {p['topic']}",
                "evidence": [said[who, "topic"][0]],
                "category": 3,
            },
            {
                "question": f"What hobby did {who} start?",
                "answer": p["hobby"],
                "evidence": [said[who, "hobby"][0]],
                "category": 4,
            },
            {
                "question": f"What is the name of {who}'s {p['pet']}?",
                "answer": p["pet_name"],
                "evidence": [said[who, "pet"][0]],
                "category": 4,
            },
            # Adversarial: asked of the other speaker, who never said it.
            {
                "question": f"What is the name of {other}'s {p['pet']}?",
                "adversarial_answer": p["pet_name"],
                "evidence": [said[who, "pet"][0]],
                "category": 5,
            },
        ]
    return {"sample_id": f"synth-{index + 1}", "conversation": conversation, "qa": qa}


def build(seed: int = SEED) -> list[dict[str, Any]]:
    """The set for ``seed``: ``CONVERSATIONS`` samples in LoCoMo's format."""
    rng = random.Random(seed)
    return [_conversation(i, rng) for i in range(CONVERSATIONS)]


# The full-size conversation's facts: each (verb, thing) pair is said once, with a colour.
_VERBS = ("bought", "painted", "found", "borrowed", "lost", "repaired", "sold", "wrapped")
_THINGS = (
    "kite", "lamp", "scarf", "bicycle", "teapot", "umbrella", "backpack", "notebook", "vase",
    "guitar", "clock", "jacket", "mug", "rug", "chair", "hat", "kettle", "canoe", "sled", "drum",
    "wallet", "blanket", "mirror", "bench", "basket", "candle", "helmet", "ladder", "radio",
    "tent", "violin", "bucket", "camera", "shovel", "tray", "boot", "glove", "pillow", "fan",
    "clock radio",
)  # fmt: skip
_COLOURS = ("red", "blue", "green", "yellow", "purple", "orange", "black", "white", "grey", "pink")


def full_size(seed: int = SEED, turns: int = 600, questions: int = 200) -> list[dict[str, Any]]:
    """One LoCoMo-sized conversation (``turns`` turns over sessions of 20, ``questions``
    questions, categories 2, 4 and 5), for benchmarks (``benchledger bench locomo``): each
    fact turn says a (verb, thing) pair once, with a colour, and is followed by a reply."""
    rng = random.Random(seed)
    a, b = rng.sample(_NAMES, 2)
    pairs = [(v, t) for t in _THINGS for v in _VERBS]
    rng.shuffle(pairs)
    if turns // 2 > len(pairs):
        raise ValueError(f"at most {2 * len(pairs)} turns")
    conversation: dict[str, Any] = {"speaker_a": a, "speaker_b": b}
    facts: list[tuple[str, str, str, str, str, str]] = []  # who, verb, thing, colour, id, date
    day = datetime.date(2022, 1, 1)
    n = 0
    while 2 * len(facts) < turns:
        n += 1
        day += datetime.timedelta(days=rng.randrange(3, 12))
        session: list[dict[str, str]] = []
        while len(session) < 20 and 2 * len(facts) < turns:
            who = a if len(facts) % 2 == 0 else b
            verb, thing = pairs[len(facts)]
            colour = rng.choice(_COLOURS)
            dia_id = f"D{n}:{len(session) + 1}"
            session.append({"speaker": who, "dia_id": dia_id,
                            "text": f"Today I {verb} a {colour} {thing}."})  # fmt: skip
            session.append({"speaker": b if who == a else a, "dia_id": f"D{n}:{len(session) + 1}",
                            "text": rng.choice(_REPLIES)})  # fmt: skip
            facts.append((who, verb, thing, colour, dia_id, f"{day.day} {day:%B} {day.year}"))
        conversation[f"session_{n}_date_time"] = _date(day, rng)
        conversation[f"session_{n}"] = session
    qa: list[dict[str, Any]] = []
    for i, (who, verb, thing, colour, dia_id, date) in enumerate(facts[:questions]):
        other = b if who == a else a
        if i % 5 == 3:
            qa.append({"question": f"When did {who} say they {verb} a {thing}?", "answer": date,
                       "evidence": [dia_id], "category": 2})  # fmt: skip
        elif i % 5 == 4:
            question = f"What colour was the {thing} {other} {verb}?"
            qa.append({"question": question, "adversarial_answer": colour,
                       "evidence": [dia_id], "category": 5})  # fmt: skip
        else:
            qa.append({"question": f"What colour was the {thing} {who} {verb}?", "answer": colour,
                       "evidence": [dia_id], "category": 4})  # fmt: skip
    return [{"sample_id": "synth-full", "conversation": conversation, "qa": qa}]


def render(seed: int = SEED) -> str:
    """The set as the committed file's text (indented JSON, a final newline)."""
    return json.dumps(build(seed), indent=1, ensure_ascii=False) + "\n"


def main(argv: list[str]) -> int:
    """Write the set to the one path given, printing the seed."""
    if len(argv) != 1:
        print("usage: python -m benchledger.protocols.locomo_synthetic OUT.json", file=sys.stderr)
        return 2
    with open(argv[0], "w", encoding="utf-8") as fh:
        fh.write(render())
    print(f"seed {SEED}: wrote {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
