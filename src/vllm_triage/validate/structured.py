"""Structured output as agents and API clients ask for it: `response_format` with a JSON Schema
(`json_schema`: the server enforces the schema while decoding) or `json_object` (any JSON object),
and the check of what comes back: content that parses as JSON, is an object, and (json_schema)
validates against the schema (jsonschema). A format error is counted like a tool-call format
error: per request, with a one-line reason each."""

from __future__ import annotations

from typing import Any, Literal

from jsonschema import Draft202012Validator

from vllm_triage.safejson import JsonError, parse_json
from vllm_triage.validate.client import Answer
from vllm_triage.validate.models import RequestRecord, StructuredOutputSummary

Mode = Literal["json_schema", "json_object"]

# What an incident summary looks like: required fields, enums, bounds and a nested object, the
# features real schemas lean on (and a constrained decoder must honour).
SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "node": {"type": "string", "minLength": 1, "maxLength": 32},
        "severity": {"type": "string", "enum": ["low", "medium", "high", "critical"]},
        "gpus": {"type": "integer", "minimum": 0, "maximum": 1024},
        "driver": {
            "type": "object",
            "properties": {
                "branch": {"type": "string", "enum": ["r535", "r550", "r570", "r575", "r580"]},
                "upgrade_needed": {"type": "boolean"},
            },
            "required": ["branch", "upgrade_needed"],
            "additionalProperties": False,
        },
    },
    "required": ["node", "severity", "gpus", "driver"],
    "additionalProperties": False,
}
SCHEMA_NAME = "incident_summary"
_VALIDATOR = Draft202012Validator(SCHEMA)
PROMPT = (
    "Summarise this incident as JSON with the fields node, severity, gpus and driver "
    "(branch, upgrade_needed): node gpu-07 with 8 GPUs cannot start a CUDA 13 image because its "
    "driver branch is r575; the severity is high."
)
# The answer of one request is a few dozen tokens; this leaves room for a verbose model.
MAX_TOKENS = 200
# Longest piece of an answer quoted in a reason.
_QUOTE = 60


def response_format(mode: Mode) -> dict[str, Any]:
    """The `response_format` of a request in this mode (OpenAI's shape, which vLLM follows)."""
    if mode == "json_object":
        return {"type": "json_object"}
    return {
        "type": "json_schema",
        "json_schema": {"name": SCHEMA_NAME, "schema": SCHEMA, "strict": True},
    }


def check_structured(answer: Answer, record: RequestRecord, mode: Mode) -> list[str]:
    """Format errors of one answer; [] when its content is a JSON object that (json_schema)
    validates against SCHEMA."""
    if record.error:
        return [f"request failed: {record.error}"]
    text = answer.content.strip()
    if not text:
        where = " (text came only as reasoning)" if answer.reasoning.strip() else ""
        return [f"the answer has no content{where}"]
    try:
        document = parse_json(text, "the answer")
    except JsonError as exc:
        problem = str(exc).removeprefix("the answer: ")
        if record.finish_reason == "length":
            problem += ", cut at max_tokens (finish_reason length)"
        return [f"{problem}: {text[:_QUOTE]!r}"]
    if not isinstance(document, dict):
        return [f"a JSON {_json_type(document)}, not an object: {text[:_QUOTE]!r}"]
    if mode == "json_object":
        return []
    return [
        f"{'/'.join(str(p) for p in problem.absolute_path) or 'answer'}: {problem.message[:120]}"
        for problem in _VALIDATOR.iter_errors(document)
    ]


def _json_type(value: object) -> str:
    if isinstance(value, list):
        return "array"
    if isinstance(value, str):
        return "string"
    if isinstance(value, bool):
        return "boolean"
    return "null" if value is None else "number"


def tally(
    summary: StructuredOutputSummary,
    kind: str,
    record: RequestRecord,
    answer: Answer,
    mode: Mode,
) -> list[str]:
    """Count one structured-output request: valid, or a format error (each reason kept)."""
    summary.requests += 1
    errors = check_structured(answer, record, mode)
    if errors:
        summary.format_errors += 1
        summary.errors.extend(f"{kind}: {e}" for e in errors)
    else:
        summary.valid += 1
    return errors
