"""Rung 6c, structured output: `response_format` with a JSON Schema (required fields, enums,
bounds, a nested object) and `json_object`, streamed and not. Each answer's content must parse as
a JSON object and, for json_schema, validate against the schema; every format error is counted
and shown, as the tool-call rung does. A server that refuses response_format (400) fails the rung
with its own words: agents that rely on structured output cannot run there."""

from __future__ import annotations

from typing import Any

from vllm_triage.validate import reasons
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RungResult
from vllm_triage.validate.structured import MAX_TOKENS, PROMPT, Mode, response_format, tally

MODES: tuple[Mode, ...] = ("json_schema", "json_object")


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("structured_output")
    summary = ctx.structured_output
    per_request: list[dict[str, Any]] = []
    for mode in MODES:
        for stream in (False, True):
            body = {
                "model": ctx.model,
                "messages": [{"role": "user", "content": PROMPT}],
                "response_format": response_format(mode),
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
            }
            send = ctx.client.stream_chat if stream else ctx.client.chat
            kind = f"{mode}{'_stream' if stream else ''}"
            record, answer = send(body, "structured_output", kind, deadline)
            ctx.recorder.add(record)
            if record.status_code == 400:
                summary.requests += 1  # refused, not answered: no format to count
                return ctx.result(
                    "structured_output", "failed",
                    reasons.FORMAT_REFUSED.format(mode=mode, error=answer.error_body),
                    requests=summary.requests,
                )  # fmt: skip
            errors = tally(summary, kind, record, answer, mode)
            per_request.append({"kind": kind, "e2e_s": record.e2e_s, "errors": errors})
    figures = {
        "requests": summary.requests,
        "valid": summary.valid,
        "format_errors": summary.format_errors,
        "per_request": per_request,
    }
    if summary.format_errors:
        return ctx.result(
            "structured_output", "failed",
            reasons.STRUCTURED_FORMAT_ERRORS.format(
                errors=summary.format_errors, requests=summary.requests, first=summary.errors[0]
            ),
            **figures,
        )  # fmt: skip
    return ctx.result("structured_output", "passed", None, **figures)
