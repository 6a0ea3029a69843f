"""The pack's DataHub metadata change proposals (``datahub/*.json``) read into entities.

Each file is a JSON array of MCPs; later UPSERTs of an aspect win. Entities overlay
``schemaMetadata`` with ``editableSchemaMetadata`` as the peer's DataHub does; saved
queries and glossary terms are entities of their own.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from benchledger.refplatform.errors import PackError


@dataclass(frozen=True)
class Field:
    """An entity's schema field: ``schemaMetadata`` overlaid by ``editableSchemaMetadata``."""

    path: str
    type: str  # native data type as the MCE gives it; "" when only an editable overlay names it
    description: str
    tags: tuple[str, ...] = ()
    glossary_terms: tuple[str, ...] = ()


@dataclass(frozen=True)
class Owner:
    urn: str
    type: str


@dataclass(frozen=True)
class Deprecation:
    deprecated: bool
    note: str
    actor: str


@dataclass(frozen=True)
class Query:
    """A saved query (a DataHub ``query`` entity) about a dataset."""

    urn: str
    name: str
    statement: str
    language: str
    description: str


@dataclass(frozen=True)
class Entity:
    """A catalog entity as the pack's MCEs describe it; ``aspects`` keeps every aspect raw."""

    urn: str
    entity_type: str
    name: str
    platform: str
    qualified_name: str
    description: str
    fields: tuple[Field, ...]
    has_schema_metadata: bool  # False: the peer's DataHub answers ``"fields": null``
    tags: tuple[str, ...]
    glossary_terms: tuple[str, ...]
    owners: tuple[Owner, ...]
    custom_properties: Mapping[str, str]
    queries: tuple[Query, ...]
    deprecation: Deprecation | None
    aspects: Mapping[str, Any]
    source: str  # "datahub/<file>.json:<line>" of its first MCE


@dataclass(frozen=True)
class GlossaryTerm:
    urn: str
    name: str
    definition: str
    parent: str
    source: str
    aspects: Mapping[str, Any]


Aspects = dict[str, dict[str, Any]]  # urn -> aspect name -> value


def read_mces(texts: Mapping[str, str]) -> tuple[Aspects, dict[str, str], list[str]]:
    """Every aspect by urn (later UPSERTs win), where each urn first appears, and urn order."""
    aspects: Aspects = {}
    origins: dict[str, str] = {}
    for rel, text in texts.items():
        for line, item in _json_items(rel, text):
            urn, name, value = _proposal(rel, line, item)
            aspects.setdefault(urn, {})[name] = value
            origins.setdefault(urn, f"{rel}:{line}")
    return aspects, origins, list(origins)


def _json_items(rel: str, text: str) -> Iterator[tuple[int, Any]]:
    """The items of the file's top-level JSON array, each with the line it starts on."""
    decoder = json.JSONDecoder()

    def skip(i: int) -> int:
        while i < len(text) and text[i].isspace():
            i += 1
        return i

    def decode(i: int) -> tuple[Any, int]:
        try:
            return decoder.raw_decode(text, i)
        except json.JSONDecodeError as exc:
            raise PackError(rel, exc.lineno, f"bad JSON: {exc.msg}") from None

    i = skip(0)
    if i < len(text) and text[i] == "{":  # a single proposal on its own
        item, end = decode(i)
        if text[skip(end) :]:
            raise PackError(
                rel, text.count("\n", 0, end) + 1, "bad JSON: extra data after the object"
            )
        yield text.count("\n", 0, i) + 1, item
        return
    if i >= len(text) or text[i] != "[":
        raise PackError(rel, text.count("\n", 0, i) + 1, "must hold a JSON array of MCEs")
    i = skip(i + 1)
    if i < len(text) and text[i] == "]":
        i = skip(i + 1)
    else:
        while True:
            item, end = decode(i)
            yield text.count("\n", 0, i) + 1, item
            i = skip(end)
            if i < len(text) and text[i] == ",":
                i = skip(i + 1)
                continue
            if i < len(text) and text[i] == "]":
                i = skip(i + 1)
                break
            raise PackError(rel, text.count("\n", 0, i) + 1, "bad JSON: expected ',' or ']'")
    if i < len(text):
        raise PackError(rel, text.count("\n", 0, i) + 1, "bad JSON: extra data after the array")


def _proposal(rel: str, line: int, item: Any) -> tuple[str, str, Any]:
    """(urn, aspect name, aspect value) of one metadata change proposal."""
    if not isinstance(item, dict):
        raise PackError(rel, line, "each MCE must be a JSON object")
    urn, name = item.get("entityUrn"), item.get("aspectName")
    if not isinstance(urn, str) or not urn.startswith("urn:li:"):
        raise PackError(rel, line, "an MCE needs entityUrn (urn:li:...)")
    if not isinstance(name, str) or not name:
        raise PackError(rel, line, f"the MCE for {urn} needs aspectName")
    change = item.get("changeType", "UPSERT")
    if change != "UPSERT":
        raise PackError(rel, line, f"changeType {change!r} is not supported (only UPSERT)")
    aspect = item.get("aspect")
    if not isinstance(aspect, dict):
        raise PackError(rel, line, f"the MCE for {urn} {name} needs an aspect object")
    if "json" in aspect:
        value = aspect["json"]
    elif isinstance(aspect.get("value"), str):  # the REST form: the aspect as a JSON string
        try:
            value = json.loads(aspect["value"])
        except json.JSONDecodeError as exc:
            raise PackError(
                rel, line, f"aspect.value of {urn} {name} is bad JSON: {exc.msg}"
            ) from None
    else:
        raise PackError(rel, line, f"the MCE for {urn} {name} needs aspect.json")
    if not isinstance(value, dict):
        raise PackError(rel, line, f"aspect {name} of {urn} must be a JSON object")
    return urn, name, value


def _entity_type(urn: str) -> str:
    return urn.split(":", 3)[2] if urn.count(":") >= 3 else ""


def _dataset_parts(urn: str) -> tuple[str, str]:
    """(platform, qualified name) of ``urn:li:dataset:(urn:li:dataPlatform:P,NAME,ENV)``."""
    m = re.fullmatch(r"urn:li:dataset:\(urn:li:dataPlatform:([^,]+),(.+),([^,]+)\)", urn)
    return (m.group(1), m.group(2)) if m else ("", "")


def _strs(items: Any, key: str) -> tuple[str, ...]:
    if not isinstance(items, list):
        return ()
    return tuple(str(x[key]) for x in items if isinstance(x, dict) and key in x)


def entities(aspects: Aspects, origins: dict[str, str], order: list[str]) -> tuple[Entity, ...]:
    """The pack's datasets (and other entities) in first-seen order, aspects overlaid."""
    queries = _queries(aspects, order)
    out = []
    for urn in order:
        kind = _entity_type(urn)
        if kind != "dataset":
            continue
        a = aspects[urn]
        props = a.get("datasetProperties", {})
        editable = a.get("editableDatasetProperties", {})
        platform, qualified = _dataset_parts(urn)
        name = props.get("name") or qualified.rsplit(".", 1)[-1] or urn
        description = editable.get("description") or props.get("description") or ""
        dep = a.get("deprecation")
        out.append(
            Entity(
                urn=urn,
                entity_type=kind,
                name=str(name),
                platform=platform,
                qualified_name=qualified,
                description=str(description),
                fields=_fields(a),
                has_schema_metadata="schemaMetadata" in a,
                tags=_strs(a.get("globalTags", {}).get("tags"), "tag"),
                glossary_terms=_strs(a.get("glossaryTerms", {}).get("terms"), "urn"),
                owners=tuple(
                    Owner(str(o.get("owner", "")), str(o.get("type", "")))
                    for o in a.get("ownership", {}).get("owners", [])
                    if isinstance(o, dict)
                ),
                custom_properties=MappingProxyType(
                    {str(k): str(v) for k, v in (props.get("customProperties") or {}).items()}
                ),
                queries=tuple(queries.get(urn, ())),
                deprecation=None
                if dep is None
                else Deprecation(
                    bool(dep.get("deprecated")), str(dep.get("note", "")), str(dep.get("actor", ""))
                ),
                aspects=MappingProxyType(dict(a)),
                source=origins[urn],
            )
        )
    return tuple(out)


def _fields(a: dict[str, Any]) -> tuple[Field, ...]:
    fields: dict[str, Field] = {}
    for f in a.get("schemaMetadata", {}).get("fields", []):
        if isinstance(f, dict) and "fieldPath" in f:
            fields[f["fieldPath"]] = Field(
                path=str(f["fieldPath"]),
                type=str(f.get("nativeDataType", "")),
                description=str(f.get("description") or ""),
                tags=_strs((f.get("globalTags") or {}).get("tags"), "tag"),
                glossary_terms=_strs((f.get("glossaryTerms") or {}).get("terms"), "urn"),
            )
    for e in a.get("editableSchemaMetadata", {}).get("editableSchemaFieldInfo", []):
        if not isinstance(e, dict) or "fieldPath" not in e:
            continue
        base = fields.get(e["fieldPath"]) or Field(str(e["fieldPath"]), "", "")
        fields[base.path] = Field(
            path=base.path,
            type=base.type,
            description=str(e.get("description") or base.description),
            tags=base.tags + _strs((e.get("globalTags") or {}).get("tags"), "tag"),
            glossary_terms=base.glossary_terms
            + _strs((e.get("glossaryTerms") or {}).get("terms"), "urn"),
        )
    return tuple(fields.values())


def _queries(aspects: Aspects, order: list[str]) -> dict[str, list[Query]]:
    by_subject: dict[str, list[Query]] = {}
    for urn in order:
        if _entity_type(urn) != "query":
            continue
        props = aspects[urn].get("queryProperties", {})
        statement = props.get("statement") or {}
        query = Query(
            urn=urn,
            name=str(props.get("name") or ""),
            statement=str(statement.get("value", "")) if isinstance(statement, dict) else "",
            language=str(statement.get("language", "")) if isinstance(statement, dict) else "",
            description=str(props.get("description") or ""),
        )
        for subject in _strs(aspects[urn].get("querySubjects", {}).get("subjects"), "entity"):
            by_subject.setdefault(subject, []).append(query)
    return by_subject


def glossary(aspects: Aspects, order: list[str]) -> tuple[GlossaryTerm, ...]:
    """The pack's glossary terms in first-seen order."""
    out = []
    for urn in order:
        if _entity_type(urn) != "glossaryTerm":
            continue
        a = aspects[urn]
        info = a.get("glossaryTermInfo", {})
        out.append(
            GlossaryTerm(
                urn=urn,
                name=str(info.get("name") or urn.rsplit(":", 1)[-1]),
                definition=str(info.get("definition") or ""),
                parent=str(info.get("parentNode") or ""),
                source=str(info.get("termSource") or ""),
                aspects=MappingProxyType(dict(a)),
            )
        )
    return tuple(out)
