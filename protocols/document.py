"""Reading YAML and JSON documents together with the line of every field.

Validation errors must name the line of the offending field, so a document is
read once as a node tree (which knows its lines) and once as plain values.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final, NamedTuple

import yaml

from benchledger.protocols.errors import InvalidInput, Problem

Path = tuple[str | int, ...]

# libyaml's parser when PyYAML was built with it (7 times faster on the suite's files; the
# same nodes and marks), else the pure-Python one. Construction stays pure Python: safe.
_COMPOSER: Final = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class Document(NamedTuple):
    """A parsed file: its plain value and the 1-based line of every field path."""

    file: str
    data: Any
    lines: dict[Path, int]

    def line(self, path: Path) -> int | None:
        """The line of ``path``, or of its nearest present ancestor."""
        while path:
            if path in self.lines:
                return self.lines[path]
            path = path[:-1]
        return self.lines.get((), None)


def _walk(node: yaml.Node, path: Path, lines: dict[Path, int], dups: list[Path]) -> None:
    lines.setdefault(path, node.start_mark.line + 1)
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            name = str(key.value)
            child = (*path, name)
            if name in seen:
                dups.append(child)
            seen.add(name)
            lines[child] = key.start_mark.line + 1
            _walk(value, child, lines, dups)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            _walk(item, (*path, i), lines, dups)


def parse(text: str, file: str, *, as_json: bool) -> Document:
    """Parse ``text`` (YAML, or JSON when ``as_json``) into a Document; InvalidInput if broken."""
    if as_json:
        try:
            json.loads(text)
        except json.JSONDecodeError as exc:
            raise InvalidInput(
                [Problem(file, exc.lineno, "", f"not valid JSON: {exc.msg}")]
            ) from None
    try:
        node = yaml.compose(text, Loader=_COMPOSER)
        if node is None:
            return Document(file, None, {})
        data = yaml.SafeLoader("").construct_document(node)
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark is not None else None
        kind = "JSON" if as_json else "YAML"
        raise InvalidInput([Problem(file, line, "", f"not valid {kind}: {exc.problem}")]) from None
    except yaml.YAMLError as exc:
        raise InvalidInput([Problem(file, None, "", f"not valid YAML: {exc}")]) from None
    lines: dict[Path, int] = {}
    dups: list[Path] = []
    _walk(node, (), lines, dups)
    if dups:
        raise InvalidInput(
            [Problem(file, lines[p], dotted(p), "field appears twice in one mapping") for p in dups]
        )
    return Document(file, data, lines)


def read(file: str) -> Document:
    """Read and parse one file, choosing JSON or YAML by its extension."""
    try:
        with open(file, encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        raise InvalidInput([Problem(file, None, "", "no such file")]) from None
    except IsADirectoryError:
        raise InvalidInput([Problem(file, None, "", "is a directory, expected a file")]) from None
    except UnicodeDecodeError as exc:
        raise InvalidInput([Problem(file, None, "", f"not UTF-8 text ({exc.reason})")]) from None
    except OSError as exc:
        raise InvalidInput([Problem(file, None, "", f"cannot read: {exc.strerror}")]) from None
    return parse(text, file, as_json=file.lower().endswith(".json"))


def dotted(path: Path) -> str:
    """``("recall", "grading", "value")`` -> ``recall.grading.value``; list items as ``[i]``."""
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def kind_of(value: Any) -> str:
    """A YAML/JSON value's kind in a problem's words: ``a mapping``, ``text``, ``nothing``."""
    if value is None:
        return "nothing"
    return {dict: "a mapping", list: "a list", str: "text", bool: "true/false"}.get(
        type(value), type(value).__name__
    )


class FieldCheck:
    """Walks a decoded JSON data file (LoCoMo's, LongMemEval's), collecting one ``Problem``
    per thing wrong (``FILE: WHERE.field: problem``) rather than stopping at the first; a
    format's checker adds its own walk."""

    def __init__(self, file: str) -> None:
        self.file = file
        self.problems: list[Problem] = []

    def problem(self, where: str, message: str) -> None:
        self.problems.append(Problem(self.file, None, where, message))

    def text(self, obj: dict[str, Any], where: str, key: str, *, empty: bool = False) -> str:
        """``obj[key]`` as text ("" and a problem when it is missing, not text, or blank
        unless ``empty``)."""
        value = obj.get(key)
        if value is None:
            self.problem(f"{where}.{key}", "missing")
        elif not isinstance(value, str):
            self.problem(f"{where}.{key}", f"must be text, got {kind_of(value)}")
        elif not empty and not value.strip():
            self.problem(f"{where}.{key}", "must not be empty")
        else:
            return value
        return ""


class Checker:
    """Collects the problems of one document; each check reports and moves on.

    ``fields`` names the fields each shape allows; ``base`` is where the checked object
    sits in the document (problems name paths below it, lines are looked up in full).
    """

    def __init__(
        self, doc: Document, fields: Mapping[str, tuple[str, ...]], base: Path = ()
    ) -> None:
        self.doc = doc
        self.fields = fields
        self.base = base
        self.problems: list[Problem] = []

    def problem(self, path: Path, message: str) -> None:
        full = (*self.base, *path)
        self.problems.append(Problem(self.doc.file, self.doc.line(full), dotted(path), message))

    def mapping(self, value: Any, path: Path, shape: str) -> dict[str, Any] | None:
        known = ", ".join(self.fields[shape])
        if not isinstance(value, dict):
            self.problem(path, f"must be a mapping with fields {known}")
            return None
        for key in value:
            if key not in self.fields[shape]:
                self.problem((*path, str(key)), f"unknown field (known here: {known})")
        return value

    def text(self, obj: dict[str, Any], path: Path, key: str, *, required: bool = True) -> None:
        if key not in obj:
            if required:
                self.problem((*path, key), "is required and missing")
            return
        value = obj[key]
        if not isinstance(value, str):
            self.problem((*path, key), f"must be text, got {kind_of(value)}")
        elif required and not value.strip():
            self.problem((*path, key), "must not be empty")
