"""Rung 3, target context: a prompt measured with the server's own /tokenize to land near the
target length, accepted and answered; the time to first token is the prompt-processing time."""

from __future__ import annotations

import json
from typing import Any

import httpx

from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RungResult

# Used only when the server has no /tokenize; said in the result.
CHARS_PER_TOKEN_ESTIMATE = 4.0
_UNIT = "Entry {n}: the quarterly ledger lists {n} crates of amber glass, checked twice. "
_SAFETY_TOKENS = 8


def _messages(units: int) -> list[dict[str, Any]]:
    filler = "".join(_UNIT.format(n=n) for n in range(units))
    question = "In one short sentence, what does the ledger list?"
    return [
        {"role": "system", "content": "You read long documents and answer briefly."},
        {"role": "user", "content": filler + "\n\n" + question},
    ]


def _count(ctx: LadderContext, units: int, deadline: float) -> int | None:
    """Prompt tokens as the server counts them (chat template included), None without /tokenize."""
    body = {"model": ctx.model, "messages": _messages(units), "add_generation_prompt": True}
    try:
        response = ctx.client.post("/tokenize", body, deadline)
        return int(response.json()["count"]) if response.status_code == 200 else None
    except (httpx.HTTPError, json.JSONDecodeError, KeyError, TypeError, ValueError):
        return None


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("target_context")
    output = ctx.options.output_tokens
    target = ctx.options.target_context
    if target is None:
        if not ctx.max_model_len:
            return ctx.result(
                "target_context",
                "skipped",
                "no --target-context and /v1/models gives no max_model_len",
            )
        target = ctx.max_model_len - output - _SAFETY_TOKENS
    base = _count(ctx, 0, deadline)
    one_unit = len(_UNIT.format(n=100)) / CHARS_PER_TOKEN_ESTIMATE
    estimated = base is None
    units = max(1, int((target - (base or 40)) / one_unit))
    measured = None
    if not estimated:
        for _ in range(4):  # the count is close to linear in units; a few refinements land it
            measured = _count(ctx, units, deadline)
            if measured is None:
                break
            if target - 2 * one_unit <= measured <= target:
                break
            per_unit = max((measured - (base or 0)) / units, 1.0)
            units = max(1, int((target - (base or 0)) / per_unit))
    body = {
        "model": ctx.model,
        "messages": _messages(units),
        "max_tokens": output,
        "temperature": 0,
    }
    record, answer = ctx.client.stream_chat(body, "target_context", "long_prompt", deadline)
    ctx.recorder.add(record)
    figures = {
        "target_tokens": target,
        "prompt_tokens": record.prompt_tokens or measured,
        "measured_with": "estimate (no /tokenize)" if estimated else "/tokenize",
        "prompt_processing_s": record.ttft_s,
        "e2e_s": record.e2e_s,
    }
    if record.error:
        return ctx.result(
            "target_context", "failed", f"a {target}-token prompt: {record.error}", **figures
        )
    if not (answer.content + answer.reasoning).strip():
        return ctx.result(
            "target_context", "failed", "the long prompt got an empty answer", **figures
        )
    reason = "the length is an estimate: the server has no /tokenize" if estimated else None
    return ctx.result("target_context", "passed", reason, **figures)
