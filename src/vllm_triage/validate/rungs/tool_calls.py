"""Rung 6b, tool calls: declared JSON Schemas, tool_choice auto, required and named, streamed
and not. Each request's calls must come back as tool_calls (not raw text in content) with
arguments that parse and validate; every format error is counted and shown. A server without a
tool-call parser answers 400: that is a configuration finding, with the flags to add. The tools
go `strict` (the schema enforced while decoding) unless --loose-tools sends them as most agents do."""

from __future__ import annotations

from typing import Any

from vllm_triage.validate import reasons
from vllm_triage.validate.client import Answer
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RequestRecord, RungResult, ToolCallSummary
from vllm_triage.validate.toolcalls import check_answer

_PARSER_MISSING = ("tool-call-parser", "enable-auto-tool-choice", "tool_call_parser")
_PROMPT = "What is the weather in Lisbon right now? Use the tools."
_CHOICES: list[tuple[str, Any, str | None]] = [
    ("auto", "auto", None),
    ("required", "required", None),
    ("named", {"type": "function", "function": {"name": "get_weather"}}, "get_weather"),
]


def tally(
    summary: ToolCallSummary,
    kind: str,
    record: RequestRecord,
    answer: Answer,
    required: bool,
    name: str | None = None,
) -> list[str]:
    """Count one tool-call request: valid (every call well formed), or a format error (shown)."""
    summary.requests += 1
    errors = (
        [f"request failed: {record.error}"]
        if record.error
        else check_answer(answer, required, name)
    )
    if errors:
        summary.format_errors += 1
        summary.errors.extend(f"{kind}: {e}" for e in errors)
    elif answer.tool_calls:
        summary.valid += 1
    return errors


def _flags(ctx: LadderContext) -> str:
    if ctx.recipe is not None:
        return " ".join(ctx.recipe.tool_calls.flags)
    return "--enable-auto-tool-choice --tool-call-parser <the parser for this model, e.g. hermes>"


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("tool_calls")
    summary = ctx.tool_calls
    per_request: list[dict[str, Any]] = []
    for label, choice, name in _CHOICES:
        for stream in (False, True):
            body = {
                "model": ctx.model,
                "messages": [{"role": "user", "content": _PROMPT}],
                "tools": ctx.tools,
                "tool_choice": choice,
                "max_tokens": 96,
                "temperature": 0,
            }
            send = ctx.client.stream_chat if stream else ctx.client.chat
            kind = f"{label}{'_stream' if stream else ''}"
            record, answer = send(body, "tool_calls", kind, deadline)
            ctx.recorder.add(record)
            if record.status_code == 400 and any(m in answer.error_body for m in _PARSER_MISSING):
                result = ctx.result(
                    "tool_calls", "failed",
                    reasons.NO_TOOL_PARSER.format(error=answer.error_body),
                    requests=summary.requests,
                )  # fmt: skip
                result.findings.append(f"start the server with {_flags(ctx)}")
                return result
            errors = tally(summary, kind, record, answer, required=label != "auto", name=name)
            per_request.append(
                {"kind": kind, "tool_calls": len(answer.tool_calls), "errors": errors}
            )
    figures = {
        "tools": summary.mode,
        "requests": summary.requests,
        "valid": summary.valid,
        "format_errors": summary.format_errors,
        "per_request": per_request,
    }
    if summary.format_errors:
        return ctx.result(
            "tool_calls", "failed",
            reasons.TOOL_FORMAT_ERRORS.format(
                errors=summary.format_errors, requests=summary.requests, first=summary.errors[0]
            ),
            **figures,
        )  # fmt: skip
    return ctx.result("tool_calls", "passed", None, **figures)
