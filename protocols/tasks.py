"""The peer platform's tasks bench: task files, their loader and the peer's task-set hash.

A task is one question an agent answers once per attempt (suites s1-s3 of the peer's
tasks bench), graded deterministically (protocols/task_grading.py). The shape follows
the peer's Go ``task.Task``; the loader refuses what the peer's ``Validate`` refuses and,
unlike the peer's YAML decoder, also refuses unknown fields, so a typo is never a
silently ignored grading rule. Every problem is one line naming file, line and field.

``task_set_hash`` is the SHA-256 the peer records as ``manifest.task_set_hash``: Go's
``encoding/json`` of the tasks sorted by id, fields in struct order, ``omitempty``
fields dropped when empty.
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Iterable
from typing import Any, Final

import msgspec

from benchledger.ledger.names import RULE, is_name
from benchledger.protocols.document import Checker, Document, Path, kind_of, read
from benchledger.protocols.errors import InvalidInput, Problem
from benchledger.protocols.hashing import go_json

GRADING_KINDS: Final = ("numeric", "entity", "exec_sql", "state", "refusal")
TASK_SUFFIX: Final = ".yaml"  # the peer's Load reads only *.yaml in a folder

_FIELDS: dict[str, tuple[str, ...]] = {
    "task": (
        "id", "suite", "prompt", "arms", "trap_classes", "budget_tool_calls",
        "expected_sql", "gold_operations", "grading", "rubric",
    ),
    "grading": ("kind", "value", "abs_tolerance", "aliases", "wrong_aliases", "state_checks"),
    "state_check": ("resource", "id", "fields"),
    "rubric": ("id", "note"),
}  # fmt: skip

# The grading fields each kind takes beyond ``kind`` (the peer's Grading comments).
_KIND_FIELDS: Final = {
    "numeric": ("value", "abs_tolerance"),
    "entity": ("aliases", "wrong_aliases"),
    "exec_sql": (),
    "state": ("state_checks",),
    "refusal": (),
}

# Go's yaml.v3 writes a float64 with strconv's 'g' form, so 1000000 is written
# ``1e+06``: YAML 1.2 reads that as a number, YAML 1.1 (PyYAML) as text.
_YAML12_FLOAT = re.compile(r"[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?")


class _Frozen(msgspec.Struct, frozen=True, forbid_unknown_fields=True):
    pass


class StateCheck(_Frozen, frozen=True):
    """One post-run assertion on the fixture service's state (``state`` grading)."""

    resource: str
    fields: dict[str, Any]
    id: int = 0


class RubricItem(_Frozen, frozen=True):
    """A judgment-call criterion, recorded for review and never auto-scored."""

    id: str
    note: str = ""


class TaskGrading(_Frozen, frozen=True):
    """How a task's final answer is graded; which fields apply depends on ``kind``."""

    kind: str
    value: float | None = None
    abs_tolerance: float = 0.0
    aliases: tuple[str, ...] = ()
    wrong_aliases: tuple[str, ...] = ()
    state_checks: tuple[StateCheck, ...] = ()


class Task(_Frozen, frozen=True):
    """One task of the peer's tasks bench, in the peer's struct field order."""

    id: str
    suite: str
    prompt: str
    arms: tuple[str, ...]
    budget_tool_calls: int
    grading: TaskGrading
    trap_classes: tuple[str, ...] = ()
    expected_sql: str = ""
    gold_operations: tuple[str, ...] = ()
    rubric: tuple[RubricItem, ...] = ()

    def applies_to(self, arm: str) -> bool:
        """Whether the task runs under ``arm`` (the peer's AppliesTo)."""
        return arm in self.arms

    def computable(self) -> bool:
        """Whether the task's answer follows from its own fields: a query, graded by a number.

        The model-free scripted agent answers any other task ``UNAVAILABLE``
        (harness/agents/scripted_tasks.py): for it, such a task is unanswerable by design.
        """
        return bool(self.expected_sql) and self.grading.kind == "numeric"


class TaskSet(msgspec.Struct, frozen=True):
    """A loaded, validated task set in load order, with the files it came from."""

    tasks: tuple[Task, ...]
    files: tuple[str, ...]

    def by_id(self) -> dict[str, Task]:
        return {t.id: t for t in self.tasks}


class _Checker(Checker):
    """A task file's checks: the shared ones (``protocols.document.Checker``) and more."""

    def __init__(self, doc: Document) -> None:
        super().__init__(doc, _FIELDS)

    def texts(self, obj: dict[str, Any], path: Path, key: str, *, required: bool = False) -> int:
        value = obj.get(key, [])
        if not isinstance(value, list):
            self.problem((*path, key), f"must be a list of text, got {kind_of(value)}")
            return 0
        if required and not value:
            self.problem((*path, key), "must list at least one entry")
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.problem((*path, key, i), "must be non-empty text")
        return len(value)

    def number(self, obj: dict[str, Any], path: Path, key: str) -> float | None:
        value = obj[key]
        if isinstance(value, str) and _YAML12_FLOAT.fullmatch(value.strip()):
            value = float(value)
            obj[key] = value  # so the Struct holds the number Go's decoder would
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problem((*path, key), f"must be a number, got {kind_of(value)}")
            return None
        if not math.isfinite(value):
            self.problem((*path, key), "must be a finite number")
            return None
        return float(value)

    def task(self, value: Any) -> None:
        t = self.mapping(value, (), "task")
        if t is None:
            return
        for key in ("id", "suite", "prompt"):
            self.text(t, (), key)
        if isinstance(t.get("id"), str) and t["id"] and not is_name(t["id"]):
            self.problem(("id",), f"{t['id']!r} {RULE}: it names the unit's stream")
        if "arms" not in t:
            self.problem(("arms",), "is required and missing")
        else:
            self.texts(t, (), "arms", required=True)
        self.texts(t, (), "trap_classes")
        self.texts(t, (), "gold_operations")
        self.text(t, (), "expected_sql", required=False)
        budget = t.get("budget_tool_calls")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            got = "missing" if budget is None else repr(budget)
            self.problem(("budget_tool_calls",), f"must be a whole number above 0, got {got}")
        if "grading" not in t:
            self.problem(("grading",), "is required and missing")
        else:
            self.grading(t["grading"], bool(t.get("expected_sql")))
        if "rubric" in t:
            self.rubric(t["rubric"])

    def grading(self, value: Any, has_sql: bool) -> None:
        path: Path = ("grading",)
        g = self.mapping(value, path, "grading")
        if g is None:
            return
        kind = g.get("kind")
        if kind not in GRADING_KINDS:
            got = "missing" if kind is None else repr(kind)
            self.problem((*path, "kind"), f"must be one of {', '.join(GRADING_KINDS)}, got {got}")
            return
        for key in g:
            if key != "kind" and key in _FIELDS["grading"] and key not in _KIND_FIELDS[kind]:
                self.problem((*path, key), f"a {kind} grading takes no {key}")
        if kind == "numeric":
            if "value" not in g:
                self.problem((*path, "value"), "a numeric grading needs a value")
            else:
                self.number(g, path, "value")
            if "abs_tolerance" in g:
                tol = self.number(g, path, "abs_tolerance")
                if tol is not None and tol < 0:
                    self.problem((*path, "abs_tolerance"), "must be zero or more")
        elif kind == "entity":
            self.entity(g, path)
        elif kind == "exec_sql" and not has_sql:
            self.problem(("expected_sql",), "an exec_sql grading needs the task's expected_sql")
        elif kind == "state":
            self.state_checks(g, path)

    def entity(self, g: dict[str, Any], path: Path) -> None:
        self.texts(g, path, "aliases", required=True)
        self.texts(g, path, "wrong_aliases")
        aliases, wrong = g.get("aliases"), g.get("wrong_aliases")
        if not isinstance(aliases, list) or not isinstance(wrong, list):
            return
        # Naming the truth would always name the trap: the answer could never pass.
        for a in aliases:
            for w in wrong:
                if isinstance(a, str) and isinstance(w, str) and w and w.lower() in a.lower():
                    self.problem(
                        (*path, "wrong_aliases"), f"alias {a!r} contains wrong alias {w!r}"
                    )

    def state_checks(self, g: dict[str, Any], path: Path) -> None:
        checks = g.get("state_checks")
        if not isinstance(checks, list) or not checks:
            self.problem((*path, "state_checks"), "a state grading needs at least one state check")
            return
        for i, check in enumerate(checks):
            here = (*path, "state_checks", i)
            c = self.mapping(check, here, "state_check")
            if c is None:
                continue
            self.text(c, here, "resource")
            cid = c.get("id", 0)
            if isinstance(cid, bool) or not isinstance(cid, int):
                self.problem((*here, "id"), f"must be a whole number, got {kind_of(cid)}")
            fields = c.get("fields")
            if not isinstance(fields, dict) or not fields:
                self.problem((*here, "fields"), "must be a mapping with at least one field")

    def rubric(self, value: Any) -> None:
        if not isinstance(value, list):
            self.problem(("rubric",), f"must be a list of {{id, note}} items, got {kind_of(value)}")
            return
        for i, item in enumerate(value):
            r = self.mapping(item, ("rubric", i), "rubric")
            if r is not None:
                self.text(r, ("rubric", i), "id")
                self.text(r, ("rubric", i), "note", required=False)


def files_of(path: str) -> list[str]:
    """The task files named by ``path``: the file itself, or a folder's ``*.yaml`` by name."""
    if os.path.isdir(path):
        names = sorted(
            n
            for n in os.listdir(path)
            if n.endswith(TASK_SUFFIX) and not os.path.isdir(os.path.join(path, n))
        )
        return [os.path.join(path, n) for n in names]
    if not os.path.exists(path):
        raise InvalidInput([Problem(path, None, "", "no such file or folder")])
    return [path]


def load(path: str) -> TaskSet:
    """Load and validate the task file or folder at ``path``; InvalidInput lists every problem."""
    problems: list[Problem] = []
    found: list[tuple[Document, dict[str, Any]]] = []
    files = files_of(path)
    for file in files:
        try:
            doc = read(file)
        except InvalidInput as exc:
            problems.extend(exc.problems)
            continue
        checker = _Checker(doc)
        checker.task(doc.data)
        problems.extend(checker.problems)
        if not checker.problems:
            found.append((doc, doc.data))
    seen: dict[str, str] = {}
    for doc, data in found:
        tid = data["id"]
        line = doc.line(("id",))
        if tid in seen:
            problems.append(
                Problem(doc.file, line, "id", f"{tid!r} is already used at {seen[tid]}")
            )
        else:
            seen[tid] = f"{doc.file}:{line}"
    if not problems and not found:
        problems.append(Problem(path, None, "", f"holds no tasks (no *{TASK_SUFFIX} files)"))
    if problems:
        raise InvalidInput(problems)
    tasks = tuple(msgspec.convert(data, Task) for _, data in found)
    return TaskSet(tasks, tuple(files))


# The peer's Go structs, field by field in declaration order: (name, omitempty).
_GO_TASK: Final = (
    ("id", False), ("suite", False), ("prompt", False), ("arms", False),
    ("trap_classes", True), ("budget_tool_calls", False), ("expected_sql", True),
    ("gold_operations", True), ("grading", False), ("rubric", True),
)  # fmt: skip
_GO_GRADING: Final = (
    ("kind", False), ("value", True), ("abs_tolerance", True), ("aliases", True),
    ("wrong_aliases", True), ("state_checks", True),
)  # fmt: skip
_GO_STATE_CHECK: Final = (("resource", False), ("id", True), ("fields", False))
_GO_RUBRIC: Final = (("id", False), ("note", False))
_GO_SHAPES: Final = {
    Task: _GO_TASK,
    TaskGrading: _GO_GRADING,
    StateCheck: _GO_STATE_CHECK,
    RubricItem: _GO_RUBRIC,
}


def _go_empty(name: str, value: Any) -> bool:
    # ``value`` is a *float64 in Go: omitempty drops only nil, so a value of 0 is written.
    if name == "value":
        return value is None
    return value in (None, "", 0, ()) and not isinstance(value, bool)


def _task_fields(value: msgspec.Struct) -> Iterable[tuple[str, Any]]:
    """A task Struct's fields as the peer's Go task structs encode them (``omitempty``)."""
    for name, omitempty in _GO_SHAPES[type(value)]:
        item = getattr(value, name)
        if not (omitempty and _go_empty(name, item)):
            yield name, item


def task_set_hash(tasks: Iterable[Task]) -> str:
    """The peer's ``manifest.task_set_hash``: SHA-256 hex of Go JSON of the tasks by id."""
    ordered = sorted(tasks, key=lambda t: t.id)
    return hashlib.sha256(go_json(ordered, _task_fields).encode()).hexdigest()
