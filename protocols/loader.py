"""Loading and validating protocol files: every problem of a load, each with file and line."""

from __future__ import annotations

import math
import os
from typing import Any

import msgspec

from benchledger.ledger.names import RULE, is_name
from benchledger.protocols.document import Checker, Document, Path, kind_of, read
from benchledger.protocols.errors import InvalidInput, Problem
from benchledger.protocols.schema import GRADING_KINDS, SINKS, Protocol, ProtocolSet

PROTOCOL_SUFFIXES = (".yaml", ".yml", ".json")

_FIELDS: dict[str, tuple[str, ...]] = {
    "protocol": (
        "id", "title", "fact", "entity_urn", "sink", "page", "budget_tool_calls",
        "teach", "recall", "transfer", "update", "abstain",
    ),
    "page": ("slug", "title", "summary", "body"),
    "prompt": ("prompt",),
    "question": ("prompt", "grading", "query"),
    "update": ("prompt", "fact", "recall", "superseded_value"),
    "grading": ("kind", "value", "abs_tolerance", "aliases", "wrong_aliases"),
}  # fmt: skip


class _Checker(Checker):
    """A protocol document's checks: the shared ones (``protocols.document.Checker``) and more."""

    def __init__(self, doc: Document, base: Path) -> None:
        super().__init__(doc, _FIELDS, base)

    def number(self, obj: dict[str, Any], path: Path, key: str) -> float | None:
        value = obj[key]
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.problem((*path, key), f"must be a number, got {kind_of(value)}")
            return None
        if not math.isfinite(value):
            self.problem((*path, key), "must be a finite number")
            return None
        return float(value)

    def texts(self, obj: dict[str, Any], path: Path, key: str) -> list[str]:
        value = obj.get(key, [])
        if not isinstance(value, list):
            self.problem((*path, key), f"must be a list of text, got {kind_of(value)}")
            return []
        out = []
        for i, item in enumerate(value):
            if not isinstance(item, str) or not item.strip():
                self.problem((*path, key, i), "must be non-empty text")
            else:
                out.append(item)
        return out

    def grading(self, value: Any, path: Path) -> str | None:
        g = self.mapping(value, path, "grading")
        if g is None:
            return None
        kind = g.get("kind")
        if kind not in GRADING_KINDS:
            got = "missing" if kind is None else repr(kind)
            self.problem((*path, "kind"), f"must be one of {', '.join(GRADING_KINDS)}, got {got}")
            return None
        if "abs_tolerance" in g:
            tol = self.number(g, path, "abs_tolerance")
            if tol is not None and tol < 0:
                self.problem((*path, "abs_tolerance"), "must be zero or more")
        aliases = self.texts(g, path, "aliases")
        wrong = self.texts(g, path, "wrong_aliases")
        if kind == "numeric":
            if "value" not in g:
                self.problem((*path, "value"), "a numeric grading needs a value")
            else:
                self.number(g, path, "value")
            if aliases or wrong:
                field = "aliases" if aliases else "wrong_aliases"
                self.problem((*path, field), "only an entity grading takes aliases")
        else:
            if "value" in g:
                self.problem((*path, "value"), "an entity grading takes aliases, not a value")
            if not aliases:
                self.problem((*path, "aliases"), "an entity grading needs at least one alias")
            clash = {a.lower() for a in aliases} & {w.lower() for w in wrong}
            if clash:
                both = ", ".join(sorted(clash))
                self.problem((*path, "wrong_aliases"), f"also listed as right aliases: {both}")
        return str(kind)

    def question(self, value: Any, path: Path) -> str | None:
        q = self.mapping(value, path, "question")
        if q is None:
            return None
        self.text(q, path, "prompt")
        self.text(q, path, "query", required=False)
        if "grading" not in q:
            self.problem((*path, "grading"), "is required and missing")
            return None
        return self.grading(q["grading"], (*path, "grading"))

    def protocol(self, value: Any) -> None:
        p = self.mapping(value, (), "protocol")
        if p is None:
            return
        for key in ("id", "title", "fact", "entity_urn"):
            self.text(p, (), key)
        if isinstance(p.get("id"), str) and p["id"] and not is_name(p["id"]):
            self.problem(("id",), f"{p['id']!r} {RULE}: it names the unit's stream")
        sink = p.get("sink")
        if sink not in SINKS:
            got = "missing" if sink is None else repr(sink)
            self.problem(("sink",), f"must be one of {', '.join(SINKS)}, got {got}")
        if sink == "knowledge_page":
            page = self.mapping(p.get("page"), ("page",), "page") if "page" in p else None
            if "page" not in p:
                self.problem(("page",), "the knowledge_page sink needs a page")
            elif page is not None:
                for key in _FIELDS["page"]:
                    # A summary may be absent (the peer's v1.102 pages had none); given, it
                    # is checked like the rest, so an empty one is not a second spelling.
                    if key != "summary" or key in page:
                        self.text(page, ("page",), key)
        elif "page" in p and p["page"] is not None:
            self.mapping(p["page"], ("page",), "page")
        budget = p.get("budget_tool_calls")
        if isinstance(budget, bool) or not isinstance(budget, int) or budget <= 0:
            got = "missing" if budget is None else repr(budget)
            self.problem(("budget_tool_calls",), f"must be a whole number above 0, got {got}")
        if "teach" not in p:
            self.problem(("teach",), "is required and missing")
        else:
            teach = self.mapping(p["teach"], ("teach",), "prompt")
            if teach is not None:
                self.text(teach, ("teach",), "prompt")
        if "recall" not in p:
            self.problem(("recall",), "is required and missing")
        else:
            self.question(p["recall"], ("recall",))
        if p.get("transfer") is not None:
            self.question(p["transfer"], ("transfer",))
        if p.get("update") is not None:
            self.update(p["update"])
            if p.get("transfer") is not None:
                self.problem(
                    ("update",),
                    "transfer and update are mutually exclusive: transfer needs the insight "
                    "applied, and an applied insight can never be superseded",
                )
        if p.get("abstain") is not None:
            abstain = self.mapping(p["abstain"], ("abstain",), "prompt")
            if abstain is not None:
                self.text(abstain, ("abstain",), "prompt")

    def update(self, value: Any) -> None:
        path: Path = ("update",)
        u = self.mapping(value, path, "update")
        if u is None:
            return
        self.text(u, path, "prompt")
        self.text(u, path, "fact")
        if "recall" not in u:
            self.problem((*path, "recall"), "is required and missing")
            return
        kind = self.question(u["recall"], (*path, "recall"))
        if "superseded_value" in u and kind is not None:
            stale = u["superseded_value"]
            if kind == "numeric":
                self.number(u, path, "superseded_value")
            elif not isinstance(stale, str) or not stale.strip():
                self.problem((*path, "superseded_value"), "an entity update's stale value is text")


def _protocol_entries(doc: Document) -> list[tuple[Path, Any]] | None:
    """The protocols in one document: an object is one, a list holds several."""
    if isinstance(doc.data, list):
        return [((i,), item) for i, item in enumerate(doc.data)]
    if isinstance(doc.data, dict) and "id" in doc.data:
        return [((), doc.data)]
    return None


def files_of(path: str) -> list[str]:
    """The protocol files named by ``path``: the file itself, or a folder's in filename order."""
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.lower().endswith(PROTOCOL_SUFFIXES))
        return [os.path.join(path, n) for n in names]
    if not os.path.exists(path):
        raise InvalidInput([Problem(path, None, "", "no such file or folder")])
    return [path]


def load(path: str) -> ProtocolSet:
    """Load and validate the protocol set at ``path``; InvalidInput lists every problem."""
    problems: list[Problem] = []
    found: list[tuple[Document, Path, Any]] = []
    skipped: list[str] = []
    folder = os.path.isdir(path)
    files = files_of(path)
    if not folder and path.lower().endswith(".jsonl"):
        raise InvalidInput([Problem(path, None, "", "a JSON-lines file is a provenance case file, "
                                    "not a protocol set (protocols are .yaml or .json files; "
                                    "cases run with --suite provenance --cases)")])  # fmt: skip
    for file in files:
        try:
            doc = read(file)
        except InvalidInput as exc:
            problems.extend(exc.problems)
            continue
        entries = _protocol_entries(doc)
        if entries is None:
            if folder and file.lower().endswith(".json"):
                skipped.append(file)  # e.g. a scripted-agent script kept beside protocols
                continue
            problems.append(
                Problem(file, 1, "", "must hold a protocol (a mapping with an id) or a list")
            )
            continue
        for base, value in entries:
            checker = _Checker(doc, base)
            checker.protocol(value)
            problems.extend(checker.problems)
            found.append((doc, base, value))
    seen: dict[str, str] = {}
    for doc, base, value in found:
        pid = value.get("id") if isinstance(value, dict) else None
        if isinstance(pid, str) and pid:
            where = f"{doc.file}:{doc.line((*base, 'id'))}"
            if pid in seen:
                line = doc.line((*base, "id"))
                problems.append(
                    Problem(doc.file, line, "id", f"{pid!r} is already used at {seen[pid]}")
                )
            else:
                seen[pid] = where
    if not problems and not found:
        problems.append(Problem(path, None, "", "holds no protocols; the set must not be empty"))
    if problems:
        raise InvalidInput(problems)
    protocols = tuple(msgspec.convert(value, Protocol) for _, _, value in found)
    origins = tuple(doc.file for doc, _, _ in found)
    return ProtocolSet(protocols, tuple(files), tuple(skipped), origins)
