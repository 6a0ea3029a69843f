"""A mapping's patterns run in bounded time and mean what ``re`` says (projections/pattern.py)."""

from __future__ import annotations

import random
import re
import time

import pytest

from benchledger.projections import pattern

SUPPORTED = [
    r"a+b", r"(a|b)*c", r"^\d+\. (.*)$", r"Hash: ([0-9a-f]+)", r"x*?y", r"(?:ab|a)(b?)c",
    r"\bfoo\b", r"[^,]+,", r"a{2,3}", r"a{2}b{,2}", r"(?P<n>\w+)@(\w+)", r"[a\-z]+", r".*?z",
    r"(a|ab)(c|bcd)(d*)", r"\s+$", r"a??b", r"(x)?y",
]  # fmt: skip


@pytest.mark.parametrize("source", SUPPORTED)
def test_a_supported_pattern_finds_what_re_finds_with_the_same_groups(source):
    seed = 7
    print(f"seed {seed}")
    rnd = random.Random(seed)
    ours, theirs = pattern.compile(source), re.compile(source)
    for _ in range(300):
        text = "".join(rnd.choice("abcxyz,@-019 \nfoH:") for _ in range(rnd.randint(0, 14)))
        got, want = ours.search(text), theirs.search(text)
        assert (got is None) == (want is None), text
        if want is not None and got is not None:
            spans = tuple(x for i in range(theirs.groups + 1) for x in want.span(i))
            assert got.spans == spans, text


def test_a_catastrophic_pattern_for_re_takes_linear_time_here():
    hostile = pattern.compile("(?:a|a)+b")
    began = time.monotonic()
    assert hostile.split("a" * 40) == ["a" * 40]
    assert hostile.search("a" * 20_000) is None
    assert time.monotonic() - began < 5


def test_a_reading_stops_at_its_step_budget_the_same_way_every_time():
    slow = pattern.compile("(?:a*c)|a")  # each search rescans the rest: quadratic splits
    text = "a" * 3000
    parts = slow.split(text, pattern.Budget(100_000))
    assert parts == slow.split(text, pattern.Budget(100_000))
    # Each match cut one "a"; the rest, once the budget ran out, is one last part, uncut.
    assert 1 < len(parts) < len(text) and len(parts) - 1 + len(parts[-1]) == len(text)


@pytest.mark.parametrize(
    ("source", "word"),
    [("(?=a)", "lookaround"), (r"(a)\1", "backreference"), ("(?i)a", "flags"),
     ("a**", "multiple repeat"), ("*a", "nothing to repeat"), ("a{5000}", "at most"),
     ("[a", "missing ]"), ("(a", "missing )"), ("a)", "unbalanced"), ("a++", "possessive")],
)  # fmt: skip
def test_a_pattern_outside_the_language_is_refused_saying_why(source, word):
    with pytest.raises(pattern.PatternError) as caught:
        pattern.compile(source)
    assert word in str(caught.value)
