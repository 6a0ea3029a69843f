"""The tools' input schemas, closed to unknown arguments, and the peer's validation errors.

The peer publishes ``"additionalProperties": false`` on its own tools and on the
typed upstream tools, and its MCP SDK refuses a call whose arguments fail the schema
before any handler runs; the error contract turns that into ``invalid_arguments`` /
``client_input`` with the validator's message, e.g. ``validating "arguments":
validating root: unexpected additional properties ["parameters"]``. Nested maps
(``changes`` items, ``page``, ``metadata``) stay open, as the peer's do.
"""

from __future__ import annotations

import functools
import json
from typing import Any, Final

import jsonschema

from benchledger.refplatform.errors import ToolError

ARGUMENT_HINT: Final = (
    "The arguments do not match the tool's input schema. Read the tool's schema, correct or "
    "drop the named property, and retry. This is a problem with the call's arguments, not a "
    "platform fault."
)
SESSION_PROPERTY: Final = {
    "type": "string",
    "description": "Session handle returned by platform_info. Call platform_info first, then "
    "pass the session_id it returns on every subsequent tool call so the platform can associate "
    "your calls, enforce workflow gates, and attribute audit and provenance records.",
}


def _s(description: str) -> dict[str, Any]:
    return {"type": "string", "description": description}


def _closed(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "additionalProperties": False,
        "properties": properties,
    }
    if required:
        schema["required"] = list(required)
    return schema


CONNECTION: Final = _s("Named connection to use (there is one)")
STRINGS: Final = {"type": "array", "items": {"type": "string"}}

SCHEMAS: Final[dict[str, dict[str, Any]]] = {
    "platform_info": _closed({}),
    "memory_capture": _closed(
        {
            "type": _s(
                "personal_preference and episodic_event are live for you immediately; "
                "business_knowledge, schema_entity and operational_rule enter review for "
                "promotion to shared knowledge."
            ),
            "content": _s("The knowledge to record (10-4000 chars)."),
            "category": _s(
                "Optional sub-type: correction, business_context, data_quality, usage_guidance, "
                "relationship, enhancement, general (default business_context)."
            ),
            "entity_urns": {**STRINGS, "description": "DataHub URNs this is about; max 10."},
            "related_columns": {"type": "array", "items": {"type": "object"}},
            "suggested_actions": {"type": "array", "items": {"type": "object"}},
            "confidence": _s("high, medium, or low (default medium)."),
            "source": _s("user (default), agent_discovery, or enrichment_gap."),
            "thread_ids": STRINGS,
            "sources": STRINGS,
            "metadata": {"type": "object"},
        },
        ("type", "content"),
    ),
    "memory_manage": _closed(
        {
            "command": _s(
                "Operation: update, forget, list, review_stale, review_duplicates, consolidate. "
                "To CREATE memory or knowledge, use memory_capture."
            ),
            "content": _s("Replacement content for 'update' (10-4000 characters)."),
            "id": _s("Memory record ID; for 'consolidate' the record to KEEP."),
            "duplicate_id": _s("For 'consolidate': the record the kept one supersedes."),
            "dimension": _s("knowledge, event, entity, relationship, preference."),
            "category": _s("correction, business_context, data_quality, usage_guidance, ..."),
            "confidence": _s("high, medium, low."),
            "metadata": {"type": "object"},
            "filter_dimension": _s("Filter by dimension for 'list'."),
            "filter_category": _s("Filter by category for 'list'."),
            "filter_status": _s("Filter by status for 'list'. Default: 'active'."),
            "filter_entity_urn": _s("Filter by entity URN for 'list'."),
            "limit": {"type": "integer", "description": "Page size (default 20, max 100)."},
            "offset": {"type": "integer", "description": "Offset for 'list'."},
        }
    ),
    "search": _closed(
        {
            "intent": _s(
                "What you are looking for, in natural language. Intent, entity_urns or both."
            ),
            "context": _s("Optional surrounding context folded into the intent."),
            "entity_urns": {**STRINGS, "description": "Return everything linked to these URNs."},
            "status": _s("Optional insight review status filter."),
            "sources": {
                **STRINGS,
                "description": "Narrow to sources (catalog, governance, knowledge_pages, memory, "
                "insights, ...). Exactly one source with no intent browses it.",
            },
            "limit": {
                "type": "integer",
                "description": "Search: total results across sources (default 10, max 50). "
                "Browse: page size (default 50, max 100).",
            },
            "offset": {"type": "integer", "description": "Browse mode only: page start."},
        }
    ),
    "fetch": _closed(
        {"reference": _s("A reference to read in full (a search hit's reference).")},
        ("reference",),
    ),
    "apply_knowledge": _closed(
        {
            "action": _s(
                "bulk_review, review, synthesize, apply, approve, reject, rollback, "
                "list_changesets, bulk_untag."
            ),
            "itemize": {"type": "boolean"},
            "limit": {"type": "integer"},
            "offset": {"type": "integer"},
            "entity_urn": _s("Target entity URN."),
            "changeset_id": _s("Changeset to revert (rollback)."),
            "tag_urn": _s("Tag for bulk_untag."),
            "insight_ids": {**STRINGS, "maxItems": 50},
            "changes": {
                "type": "array",
                "maxItems": 20,
                "items": {
                    "type": "object",
                    "required": ["change_type", "target", "detail"],
                    "properties": {
                        "change_type": {"type": "string"},
                        "target": {"type": "string"},
                        "detail": {"type": "string"},
                        "query_sql": {"type": "string"},
                        "query_description": {"type": "string"},
                    },
                },
            },
            "confirm": {"type": "boolean"},
            "review_notes": _s("Notes for approve/reject."),
            "sink": _s("'datahub' (default) or 'knowledge_page'."),
            "page": {
                "type": "object",
                "description": "Page payload for sink=knowledge_page (found-or-created by slug).",
                "properties": {
                    "slug": {"type": "string"},
                    "title": {"type": "string"},
                    "summary": {"type": "string"},
                    "body": {"type": "string"},
                    "tags": STRINGS,
                    "references": {**STRINGS, "maxItems": 50},
                    "force_new": {"type": "boolean"},
                },
            },
        },
        ("action",),
    ),
    "datahub_get_entity": _closed(
        {"urn": _s("The DataHub URN of the entity"), "connection": CONNECTION}, ("urn",)
    ),
    "datahub_get_schema": _closed(
        {"urn": _s("The DataHub URN of the dataset"), "connection": CONNECTION}, ("urn",)
    ),
    "datahub_get_queries": _closed(
        {"urn": _s("The DataHub URN of the dataset"), "connection": CONNECTION}, ("urn",)
    ),
    "datahub_get_glossary_term": _closed(
        {"urn": _s("The DataHub URN of the glossary term"), "connection": CONNECTION}, ("urn",)
    ),
    "datahub_browse": _closed(
        {
            "what": _s("What to browse: tags, domains, or data_products"),
            "filter": _s("Optional filter string (tags only)"),
            "connection": CONNECTION,
        },
        ("what",),
    ),
    "trino_query": _closed(
        {
            "sql": _s("The SQL query to execute"),
            "limit": {"type": "integer", "description": "Maximum rows (default 1000, max 10000)"},
            "timeout_seconds": {"type": "integer", "description": "Query timeout in seconds"},
            "format": _s("Output format: json (default), csv, or markdown"),
            "unwrap_json": {"type": "boolean"},
            "connection": CONNECTION,
        },
        ("sql",),
    ),
    "trino_describe_table": _closed(
        {
            "catalog": _s("The catalog containing the table"),
            "schema": _s("The schema containing the table"),
            "table": _s("The table name to describe"),
            "include_sample": {"type": "boolean", "description": "Include a 5-row sample"},
            "connection": CONNECTION,
        },
        ("catalog", "schema", "table"),
    ),
    "trino_browse": _closed(
        {
            "catalog": _s("Catalog name. Omit to list all catalogs."),
            "schema": _s("Schema name. Requires catalog. Omit to list schemas."),
            "pattern": _s("LIKE pattern to filter tables (only when listing tables)"),
            "connection": CONNECTION,
        }
    ),
}


def listed_schema(tool: str) -> dict[str, Any]:
    """The schema ``tools/list`` shows: every tool but ``platform_info`` offers ``session_id``."""
    schema = json.loads(json.dumps(SCHEMAS[tool]))
    if tool != "platform_info":
        schema["properties"]["session_id"] = dict(SESSION_PROPERTY)
    return schema


def _pointer(path: Any) -> str:
    return "/" + "/".join(str(p) for p in path) if path else ""


def _describe(error: jsonschema.ValidationError) -> str:
    """One validation error in the wording of the peer's SDK validator."""
    where = "validating root"
    schema_path = list(error.absolute_schema_path)[:-1]
    if schema_path:
        where += f": validating {_pointer(schema_path)}"
    if error.validator == "additionalProperties":
        extra = sorted(set(error.instance) - set(error.schema.get("properties", {})))
        return f"{where}: unexpected additional properties {json.dumps(extra)}"
    if error.validator == "required":
        missing = [p for p in error.validator_value if p not in error.instance]
        return f"{where}: required: missing properties: {json.dumps(missing)}"
    if error.validator == "type":
        value = error.instance if isinstance(error.instance, str) else json.dumps(error.instance)
        kind = {
            str: "string",
            bool: "boolean",
            int: "integer",
            float: "number",
            list: "array",
            dict: "object",
            type(None): "null",
        }.get(type(error.instance), "value")
        return f'{where}: type: {value} has type "{kind}", want "{error.validator_value}"'
    return f"{where}: {error.validator}: {error.message}"


@functools.cache
def _validator(tool: str) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(SCHEMAS[tool])


def validate(tool: str, args: dict[str, Any]) -> None:
    """Refuse arguments that do not match the tool's closed schema (``invalid_arguments``)."""
    validator = _validator(tool)
    errors = sorted(validator.iter_errors(args), key=lambda e: (len(e.path), str(list(e.path))))
    if errors:
        raise ToolError(
            f'validating "arguments": {_describe(errors[0])}',
            code="invalid_arguments",
            category="client_input",
            hint=ARGUMENT_HINT,
        )
