"""A pattern from outside (a mapping's, or a recorded run's), matched in bounded time.

Python's ``re`` backtracks: ``(?:a|a)+b`` against forty ``a``s runs for hours and cannot be
interrupted. A mapping names patterns (docs/platforms.md, "Any MCP memory server"), and a
published run carries its mapping to every reader that replays it, so such patterns are
never given to ``re``: they are compiled here, checked when the mapping loads, and run by a
Pike VM, which advances every thread in lockstep and keeps at most one thread per
instruction, so one search costs at most ``len(text) x len(program)`` steps. A whole
reading (a split, every line of an answer) also stops after ``BUDGET`` steps, counted, not
timed, so a reader that gives up gives up the same way on every machine.

The language is the subset of ``re``'s syntax that needs no backtracking: literals and
escapes (``\\.``, ``\\n``, ``\\t``), ``.`` (not a newline), classes (``[a-z_]``, ``[^,]``,
``\\d \\w \\s \\D \\W \\S``), groups (``( )``, ``(?: )``, ``(?P<name> )``), alternation ``|``,
the quantifiers ``* + ? {m} {m,} {m,n}`` (``?`` after one: lazy), and the anchors ``^``
``$`` (of the text, as ``re`` without flags) and ``\\b \\B``. Backreferences, lookaround
and inline flags are refused by name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Final, NamedTuple

BUDGET: Final = 2_000_000  # thread steps per reading: seconds of Python at most
MAX_PROGRAM: Final = 4_000  # instructions (a counted repeat is unrolled)
MAX_REPEAT: Final = 1_000

_CHAR, _MATCH, _JMP, _SPLIT, _SAVE, _ASSERT = range(6)
_SPECIAL: Final = frozenset(".^$*+?{}[]()|\\")


class PatternError(ValueError):
    """The pattern is outside the supported language (the message says where and why)."""


def _word(ch: str) -> bool:
    return ch.isalnum() or ch == "_"


_CLASSES: Final[dict[str, Callable[[str], bool]]] = {
    "d": str.isdecimal,
    "D": lambda c: not c.isdecimal(),
    "w": _word,
    "W": lambda c: not _word(c),
    "s": str.isspace,
    "S": lambda c: not c.isspace(),
}
_ESCAPES: Final = {"n": "\n", "t": "\t", "r": "\r", "f": "\f", "v": "\v", "0": "\0"}


def _between(lo: str, hi: str) -> Callable[[str], bool]:
    return lambda c: lo <= c <= hi


class _Parser:
    """Recursive descent over the pattern, building the AST the compiler walks."""

    def __init__(self, source: str) -> None:
        self.s = source
        self.i = 0
        self.groups = 0

    def fail(self, problem: str) -> PatternError:
        return PatternError(f"{problem} at position {self.i}")

    def peek(self) -> str:
        return self.s[self.i] if self.i < len(self.s) else ""

    def take(self) -> str:
        ch = self.peek()
        self.i += 1
        return ch

    def alternation(self) -> tuple:
        branches = [self.sequence()]
        while self.peek() == "|":
            self.i += 1
            branches.append(self.sequence())
        return ("alt", branches) if len(branches) > 1 else branches[0]

    def sequence(self) -> tuple:
        items: list[tuple] = []
        while self.peek() not in ("", "|", ")"):
            items.append(self.quantified(self.atom()))
        return ("cat", items)

    def atom(self) -> tuple:
        ch = self.take()
        if ch == "(":
            return self.group()
        if ch == "[":
            return ("char", self.klass())
        if ch == ".":
            return ("char", lambda c: c != "\n")
        if ch == "^":
            return ("assert", "^")
        if ch == "$":
            return ("assert", "$")
        if ch == "\\":
            return self.escape(in_class=False)
        if ch in "*+?{":
            raise self.fail(f"nothing to repeat before {ch!r}")
        return ("char", ch.__eq__)

    def group(self) -> tuple:
        index: int | None
        if self.s.startswith("?:", self.i):
            self.i += 2
            index = None
        elif self.s.startswith("?P<", self.i):
            end = self.s.find(">", self.i)
            if end < 0 or not self.s[self.i + 3 : end].isidentifier():
                raise self.fail("a group name must be an identifier")
            self.i = end + 1
            self.groups += 1
            index = self.groups
        elif self.peek() == "?":
            raise self.fail("lookaround, inline flags and other (?...) groups are not supported")
        else:
            self.groups += 1
            index = self.groups
        inner = self.alternation()
        if self.take() != ")":
            raise self.fail("missing )")
        return ("group", index, inner)

    def escape(self, *, in_class: bool) -> tuple:
        ch = self.take()
        if not ch:
            raise self.fail("a pattern cannot end with \\")
        if ch in _CLASSES:
            return ("char", _CLASSES[ch])
        if ch in _ESCAPES:
            return ("char", _ESCAPES[ch].__eq__)
        if not in_class and ch in "bB":
            return ("assert", ch)
        if ch.isdigit():
            raise self.fail("backreferences are not supported")
        if ch.isalnum():
            raise self.fail(f"unknown escape \\{ch}")
        return ("char", ch.__eq__)

    def klass(self) -> Callable[[str], bool]:
        negated = self.peek() == "^"
        self.i += negated
        tests: list[Callable[[str], bool]] = []
        chars: set[str] = set()
        first = True
        while True:
            ch = self.take()
            if not ch:
                raise self.fail("missing ]")
            if ch == "]" and not first:
                break
            first = False
            if ch == "\\":
                _, named = self.escape(in_class=True)
                if self.s[self.i - 1] in _CLASSES:
                    tests.append(named)
                    continue
                ch = self.s[self.i - 1] if self.s[self.i - 1] not in _ESCAPES else \
                    _ESCAPES[self.s[self.i - 1]]  # fmt: skip
            if self.peek() == "-" and self.s[self.i + 1 : self.i + 2] not in ("]", ""):
                self.i += 1
                hi = self.take()
                if hi == "\\":
                    hi = self.take()
                    hi = _ESCAPES.get(hi, hi)
                if hi < ch:
                    raise self.fail(f"bad range {ch}-{hi}")
                tests.append(_between(ch, hi))
            else:
                chars.add(ch)
        frozen = frozenset(chars)

        def test(c: str) -> bool:
            return (c in frozen or any(t(c) for t in tests)) != negated

        return test

    def quantified(self, node: tuple) -> tuple:
        ch = self.peek()
        if ch not in ("*", "+", "?", "{"):
            return node
        if node[0] == "assert":
            raise self.fail("an anchor cannot be repeated")
        self.i += 1
        low, high = {"*": (0, None), "+": (1, None), "?": (0, 1)}.get(ch, (0, 0))
        if ch == "{":
            end = self.s.find("}", self.i)
            body = self.s[self.i : end] if end > 0 else ""
            lo, comma, hi = body.partition(",")
            if not body or not (lo.isdigit() or lo == "") or not (hi.isdigit() or hi == ""):
                raise self.fail("a counted repeat is {m}, {m,}, {,n} or {m,n}")
            low = int(lo) if lo else 0
            high = (int(hi) if hi else None) if comma else low
            if max(low, high or 0) > MAX_REPEAT or (high is not None and high < low):
                raise self.fail(f"a counted repeat is at most {MAX_REPEAT}, its bounds in order")
            self.i = end + 1
        greedy = True
        if self.peek() == "?":
            self.i += 1
            greedy = False
        elif self.peek() == "+":
            raise self.fail("possessive repeats are not supported")
        if self.peek() in ("*", "+", "?", "{"):
            raise self.fail("multiple repeat")
        return ("rep", node, low, high, greedy)


class _Compiler:
    def __init__(self) -> None:
        self.prog: list[list] = []

    def emit(self, op: int, *args: object) -> int:
        if len(self.prog) >= MAX_PROGRAM:
            raise PatternError(f"the pattern is too large (over {MAX_PROGRAM} instructions)")
        self.prog.append([op, *args])
        return len(self.prog) - 1

    def node(self, n: tuple) -> None:
        kind = n[0]
        if kind == "char":
            self.emit(_CHAR, n[1])
        elif kind == "assert":
            self.emit(_ASSERT, n[1])
        elif kind == "cat":
            for item in n[1]:
                self.node(item)
        elif kind == "group":
            if n[1] is not None:
                self.emit(_SAVE, 2 * n[1])
            self.node(n[2])
            if n[1] is not None:
                self.emit(_SAVE, 2 * n[1] + 1)
        elif kind == "alt":
            jumps = []
            for branch in n[1][:-1]:
                split = self.emit(_SPLIT, 0, 0)
                self.prog[split][1] = len(self.prog)
                self.node(branch)
                jumps.append(self.emit(_JMP, 0))
                self.prog[split][2] = len(self.prog)
            self.node(n[1][-1])
            for j in jumps:
                self.prog[j][1] = len(self.prog)
        else:
            self.repeat(*n[1:])

    def optional(self, body: tuple, greedy: bool) -> int:
        split = self.emit(_SPLIT, 0, 0)
        self.node(body)
        here, out = split + 1, len(self.prog)
        self.prog[split][1:] = [here, out] if greedy else [out, here]
        return split

    def repeat(self, body: tuple, low: int, high: int | None, greedy: bool) -> None:
        for _ in range(low):
            self.node(body)
        if high is None:
            loop = self.optional(body, greedy)
            self.emit(_JMP, loop)
            self.prog[loop][2 if greedy else 1] = len(self.prog)
            return
        splits = [self.optional(body, greedy) for _ in range(high - low)]
        for s in splits:  # once one optional copy is skipped, the rest are too
            self.prog[s][2 if greedy else 1] = len(self.prog)


class Match(NamedTuple):
    """Where a match is, and its groups' spans (-1 for a group that took no part)."""

    text: str
    spans: tuple[int, ...]

    @property
    def start(self) -> int:
        return self.spans[0]

    @property
    def end(self) -> int:
        return self.spans[1]

    def group(self, index: int = 0) -> str | None:
        a, b = self.spans[2 * index], self.spans[2 * index + 1]
        return self.text[a:b] if a >= 0 and b >= 0 else None


class Budget:
    """Thread steps left for one reading; at zero every search finds nothing more."""

    def __init__(self, steps: int = BUDGET) -> None:
        self.left = steps


class Pattern:
    """A compiled pattern (``compile``); ``source`` is what the mapping said."""

    def __init__(self, source: str) -> None:
        parser = _Parser(source)
        tree = parser.alternation()
        if parser.i < len(source):
            raise parser.fail("unbalanced )")
        c = _Compiler()
        c.emit(_SAVE, 0)
        c.node(tree)
        c.emit(_SAVE, 1)
        c.emit(_MATCH)
        self.source = source
        self.groups = parser.groups
        self._prog = [tuple(i) for i in c.prog]

    def _assert(self, kind: str, text: str, pos: int) -> bool:
        if kind == "^":
            return pos == 0
        if kind == "$":
            return pos == len(text) or (pos == len(text) - 1 and text[-1] == "\n")
        before = pos > 0 and _word(text[pos - 1])
        after = pos < len(text) and _word(text[pos])
        return (before != after) == (kind == "b")

    def _add(self, out: list, seen: set[int], pc: int, caps: tuple[int, ...], text: str,
             pos: int) -> None:  # fmt: skip
        stack = [(pc, caps)]
        prog = self._prog
        while stack:
            pc, caps = stack.pop()
            if pc in seen:
                continue
            seen.add(pc)
            op = prog[pc]
            if op[0] == _JMP:
                stack.append((op[1], caps))
            elif op[0] == _SPLIT:
                stack.append((op[2], caps))
                stack.append((op[1], caps))
            elif op[0] == _SAVE:
                stack.append((pc + 1, (*caps[: op[1]], pos, *caps[op[1] + 1 :])))
            elif op[0] == _ASSERT:
                if self._assert(op[1], text, pos):
                    stack.append((pc + 1, caps))
            else:
                out.append((pc, caps))

    def search(self, text: str, pos: int = 0, budget: Budget | None = None) -> Match | None:
        """The leftmost match at or after ``pos`` (``re.search``'s), None when there is none
        or the budget ran out."""
        budget = budget or Budget()
        empty = (-1,) * (2 * self.groups + 2)
        prog, n = self._prog, len(text)
        found: tuple[int, ...] | None = None
        clist: list = []
        self._add(clist, set(), 0, empty, text, pos)
        while True:
            budget.left -= len(clist) + 1
            if budget.left < 0:
                return None
            nlist: list = []
            seen: set[int] = set()
            ch = text[pos] if pos < n else ""
            for pc, caps in clist:
                op = prog[pc]
                if op[0] == _MATCH:
                    found = caps
                    break  # the threads after this one have lower priority
                if pos < n and op[1](ch):
                    self._add(nlist, seen, pc + 1, caps, text, pos + 1)
            if pos >= n:
                break
            pos += 1
            if found is None:
                self._add(nlist, seen, 0, empty, text, pos)
            clist = nlist
            if not clist:
                break
        return Match(text, found) if found is not None else None

    def split(self, text: str, budget: Budget | None = None) -> list[str]:
        """``text`` cut at each non-empty match (groups are not kept, unlike ``re.split``)."""
        budget = budget or Budget()
        parts: list[str] = []
        start = pos = 0
        while pos <= len(text):
            m = self.search(text, pos, budget)
            if m is None:
                break
            if m.end == m.start:
                pos = m.start + 1
                continue
            parts.append(text[start : m.start])
            start = pos = m.end
        parts.append(text[start:])
        return parts


def compile(source: str) -> Pattern:  # the name every reader expects
    """``source`` compiled (PatternError saying what is not supported, and where)."""
    if not isinstance(source, str):
        raise PatternError("a pattern must be a string")
    return Pattern(source)


__all__ = ["BUDGET", "Budget", "Match", "Pattern", "PatternError", "compile"]
