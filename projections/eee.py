"""A verified run as Every Eval Ever records: the aggregate log and its instance sidecar.

Every Eval Ever (the EvalEval coalition's schema, v0.3.0) keeps one evaluation as an
aggregate ``EvaluationLog`` (``data/<collection>/<developer>/<model>/<uuid>.json``) and,
for per-item data, an ``InstanceLevelEvaluationLog`` line per (sample, result) in
``<uuid>_samples.jsonl`` beside it. Built here as plain JSON values from the format's own
field references (docs/eee.md), so the package never imports ``every_eval_ever``.

What maps to what:

- the evaluated system is the memory platform as driven by the agent: ``model_info.id``
  ``<platform>/<agent or model>``, the run's record in its details;
- one ``evaluation_results`` entry per card metric that was measured (a metric with an
  empty denominator is named under ``source_metadata.additional_details.not_measured``,
  never scored 0): score its ``rate`` on ``[0, 1]``, its interval and method as the
  uncertainty, ``lower_is_better`` and its one-line definition from the suite;
- one instance line per element of a metric's denominator that the suite itemises
  (``Metric.values``: a unit, a ranked episode, a protocol), whose ``evaluation.score`` is
  that element's own value, so the mean of a result's instance scores is its score;
- the run id, its root, the bundle's sha256 and the dataset's sha256 as source metadata.
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Mapping, Sequence
from typing import Any, Final, NamedTuple

import msgspec

from benchledger.ledger.events import RunStartedBody
from benchledger.projections.card import CI_LABELS, Metric

SCHEMA_VERSION: Final = "0.3.0"
EVAL_LIBRARY: Final = "benchledger"
_UNSAFE: Final = re.compile(r"[^a-z0-9._-]+")
# How benchledger turns an answer into a verdict: its suite's recorded grader decision.
EXTRACTION: Final = "benchledger grader decision"


class Record(NamedTuple):
    """The two documents and where they go, relative to the output folder."""

    aggregate_path: str  # data/<collection>/<developer>/<model>/<uuid>.json
    aggregate: dict[str, Any]
    samples_path: str  # ... /<uuid>_samples.jsonl
    samples: bytes  # the JSONL bytes (empty: no metric is itemised)
    rows: int


def slug(text: str) -> str:
    """A portable path component (lower case, ``[a-z0-9._-]``; never empty, never ``data``)."""
    out = _UNSAFE.sub("-", text.lower()).strip("-.") or "unknown"
    return "x-data" if out == "data" else out


def record_uuid(run_id: str, root: str) -> str:
    """A UUIDv4-shaped id fixed by the run and its root: the same run exports the same ids."""
    digest = hashlib.sha256(f"benchledger:eee:v1\0{run_id}\0{root}".encode()).digest()
    return str(uuid.UUID(bytes=digest[:16], version=4))


def _whys(metrics: Mapping[str, Metric]) -> dict[str, str] | None:
    """Why each metric the probe found unmeasurable is not measured (None: none)."""
    return {n: m.not_measured for n, m in metrics.items() if m.not_measured} or None


def _details(values: Mapping[str, object]) -> dict[str, str]:
    """``additional_details``: every value a string (JSON for anything but text)."""
    return {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
            for k, v in values.items() if v not in (None, "")}  # fmt: skip


class Source(NamedTuple):
    """Where the run came from, as the record's source metadata states it."""

    run_id: str
    root: str
    bundle_sha256: str
    dataset_sha256: str
    started_ns: int
    retrieved: str  # when the record was made, epoch seconds as text


def _system(body: RunStartedBody) -> tuple[str, str, dict[str, Any]]:
    """(developer, model, model_info) of the evaluated system: platform driven by agent."""
    platform = body.platform or "unknown-platform"
    driver = body.model or body.agent or "unknown-agent"
    developer, model = slug(platform.split(" ")[0]), slug(driver)
    record = msgspec.to_builtins(body.record) if body.record else None
    info = {
        "name": f"{platform} driven by {driver}",
        "id": f"{developer}/{model}",
        "developer": platform,
        "inference_platform": "benchledger",
        "additional_details": _details({
            "deployment_type": "unknown", "model_availability": "unknown",
            "platform": body.platform, "platform_version": body.platform_version,
            "agent": body.agent, "model": body.model, "run_record": record,
        }),
    }  # fmt: skip
    return developer, model, info


def _source_data(body: RunStartedBody, source: Source) -> dict[str, Any]:
    return {
        "dataset_name": f"benchledger {body.suite}",
        "source_type": "other",
        "additional_details": _details({
            "file_sha256": source.dataset_sha256,
            "protocol_set": body.protocol_set_id or body.protocol_set_hash,
            "items": body.protocols,
        }),
    }  # fmt: skip


def _result(
    suite: str,
    metric: Metric,
    description: str,
    lower: bool,
    body: RunStartedBody,
    source: Source,
) -> dict[str, Any]:
    rate = metric.rate
    assert rate is not None
    score: dict[str, Any] = {"score": rate, "details": _details(
        {"num": metric.num, "den": metric.den, "label": metric.label})}  # fmt: skip
    uncertainty: dict[str, Any] = {"num_samples": metric.den}
    if metric.ci is not None:
        uncertainty["confidence_interval"] = {
            "lower": metric.ci.low, "upper": metric.ci.high, "confidence_level": 0.95,
            "method": CI_LABELS.get(metric.ci_method, metric.ci_method),
        }  # fmt: skip
    score["uncertainty"] = uncertainty
    return {
        "evaluation_result_id": f"{suite}.{metric.name}",
        "evaluation_name": f"benchledger.{suite}.{metric.name}",
        "source_data": _source_data(body, source),
        "evaluation_timestamp": str(source.started_ns // 1_000_000_000),
        "metric_config": {
            "evaluation_description": description or metric.label or metric.name,
            "metric_id": f"benchledger.{metric.name}",
            "metric_name": metric.name,
            "metric_unit": "proportion",
            "lower_is_better": lower,
            "score_type": "continuous",
            "min_score": 0.0,
            "max_score": 1.0,
        },
        "score_details": score,
    }


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # Inspect content parts
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def messages(sample: Mapping[str, Any]) -> list[dict[str, Any]]:
    """An exported unit's turns (Inspect messages) as Every Eval Ever messages."""
    out: list[dict[str, Any]] = []
    for i, m in enumerate(sample.get("messages") or ()):
        calls = [
            {"id": str(c.get("id", "")), "name": str(c.get("function", "")),
             "arguments": {k: v if isinstance(v, str) else json.dumps(v, sort_keys=True)
                           for k, v in (c.get("arguments") or {}).items()}}
            for c in m.get("tool_calls") or () if isinstance(c, dict)
        ]  # fmt: skip
        turn: dict[str, Any] = {"turn_idx": i, "role": str(m.get("role", "")),
                                "content": _text(m.get("content"))}  # fmt: skip
        if calls:
            turn["tool_calls"] = calls
        if m.get("tool_call_id"):
            turn["tool_call_id"] = [str(m["tool_call_id"])]
        out.append(turn)
    if not out:  # a unit with no recorded turn still has its input
        out.append({"turn_idx": 0, "role": "user", "content": str(sample.get("input", ""))})
    return out


def _instance(
    head: Mapping[str, Any],
    result_id: str,
    sample_id: str,
    value: float,
    sample: Mapping[str, Any] | None,
) -> dict[str, Any]:
    turns: list[dict[str, Any]] = messages(sample) if sample is not None else [
        {"turn_idx": 0, "role": "user", "content": sample_id}]  # fmt: skip
    target = sample.get("target") if sample is not None else None
    reference = [target] if isinstance(target, str) else [str(t) for t in target or ()]
    last = max((t["turn_idx"] for t in turns if t["role"] == "assistant"), default=0)
    answer = next((str(s.get("answer")) for s in (sample or {}).get("scores", {}).values()
                   if isinstance(s, dict) and s.get("answer")), "")  # fmt: skip
    meta = (sample or {}).get("metadata", {})
    return {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": head["evaluation_id"],
        "model_id": head["model_info"]["id"],
        "evaluation_name": f"benchledger.{result_id}",
        "evaluation_result_id": result_id,
        "sample_id": sample_id,
        "interaction_type": "agentic",
        "input": {"raw": str((sample or {}).get("input", sample_id)), "reference": reference},
        "output": None,
        "messages": turns,
        "answer_attribution": [
            {
                "turn_idx": last,
                "source": f"messages[{last}].content",
                "extracted_value": answer,
                "extraction_method": EXTRACTION,
                "is_terminal": True,
            }
        ],
        "evaluation": {
            "score": value,
            "is_correct": value >= 1.0,
            "num_turns": len(turns),
            "tool_calls_count": sum(len(t.get("tool_calls", ())) for t in turns),
        },
        "metadata": _details(
            {
                "stream": meta.get("stream"),
                "stream_head": meta.get("stream_head"),
                "root": meta.get("root"),
            }
        ),
    }


def record(
    body: RunStartedBody,
    suite: str,
    metrics: Mapping[str, Metric],
    lower_is_better: frozenset[str],
    descriptions: Mapping[str, str],
    samples: Sequence[Mapping[str, Any]],
    source: Source,
    tool_version: str,
) -> Record:
    """The run's aggregate log and instance lines (``samples``: its Inspect samples, whose
    turns the instance lines carry, keyed by their stream)."""
    developer, model, info = _system(body)
    file_id = record_uuid(source.run_id, source.root)
    folder = f"data/{slug('benchledger-' + suite)}/{developer}/{model}"
    measured = {n: m for n, m in metrics.items() if m.rate is not None}
    not_measured = sorted(n for n, m in metrics.items() if m.rate is None)
    head: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        "evaluation_id": f"benchledger/{suite}/{source.run_id}",
        "evaluation_timestamp": str(source.started_ns // 1_000_000_000),
        "retrieved_timestamp": source.retrieved,
        "source_metadata": {
            "source_name": "benchledger",
            "source_type": "evaluation_run",
            "source_organization_name": "benchledger",
            "evaluator_relationship": "third_party",
            "additional_details": _details(
                {
                    "run_id": source.run_id,
                    "run_root": source.root,
                    "bundle_sha256": source.bundle_sha256,
                    "dataset_sha256": source.dataset_sha256,
                    "not_measured": not_measured or None,
                    # Why, for a metric the probe found the platform could not be measured
                    # on (projections/measured.py); an empty denominator says nothing.
                    "not_measured_why": _whys(metrics),
                }
            ),
        },
        "eval_library": {
            "name": EVAL_LIBRARY,
            "version": tool_version.removeprefix("benchledger ") or "unknown",
        },
        "model_info": info,
        "evaluation_results": [
            _result(suite, m, descriptions.get(n, ""), n in lower_is_better, body, source)
            for n, m in sorted(measured.items())
        ],
    }
    by_stream = {str(s.get("metadata", {}).get("stream", "")): s for s in samples}
    lines: list[bytes] = []
    for n, m in sorted(measured.items()):
        for sample_id, value in m.values:
            stream = sample_id.split("@", 1)[0]
            line = _instance(head, f"{suite}.{n}", sample_id, value, by_stream.get(stream))
            lines.append(json.dumps(line, sort_keys=True, separators=(",", ":")).encode() + b"\n")
    data = b"".join(lines)
    samples_path = f"{folder}/{file_id}_samples.jsonl"
    if lines:
        head["detailed_evaluation_results"] = {
            "format": "jsonl", "file_path": samples_path, "hash_algorithm": "sha256",
            "checksum": hashlib.sha256(data).hexdigest(), "total_rows": len(lines),
        }  # fmt: skip
    return Record(f"{folder}/{file_id}.json", head, samples_path, data, len(lines))


__all__ = ["SCHEMA_VERSION", "Record", "Source", "messages", "record", "record_uuid", "slug"]
