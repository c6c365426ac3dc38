"""Rung 3, target context: a prompt measured with the server's own /tokenize to land near the
target length, accepted and answered; the time to first token is the prompt-processing time."""

from __future__ import annotations

from typing import Any

from vllm_triage.validate import reasons, wire
from vllm_triage.validate.client import ReplyError
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RungResult

# Used only when the server has no /tokenize; said in the result.
CHARS_PER_TOKEN_ESTIMATE = 4.0
_UNIT = "Entry {n}: the quarterly ledger lists {n} crates of amber glass, checked twice. "
_SAFETY_TOKENS = 8
_MIN_TARGET = 16  # as --target-context requires


def _messages(units: int) -> list[dict[str, Any]]:
    filler = "".join(_UNIT.format(n=n) for n in range(units))
    question = "In one short sentence, what does the ledger list?"
    return [
        {"role": "system", "content": "You read long documents and answer briefly."},
        {"role": "user", "content": filler + "\n\n" + question},
    ]


def _count(ctx: LadderContext, units: int, deadline: float) -> int:
    """Prompt tokens as the server counts them (chat template included); ReplyError without."""
    body = {"model": ctx.model, "messages": _messages(units), "add_generation_prompt": True}
    return ctx.client.fetch_json("/tokenize", wire.TokenCount, deadline, body).count


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("target_context")
    output = ctx.options.output_tokens
    target = ctx.options.target_context
    if target is None:
        if not ctx.max_model_len:
            return ctx.result(
                "target_context",
                "skipped",
                reasons.NO_TARGET,
            )
        target = ctx.max_model_len - output - _SAFETY_TOKENS
    if target < _MIN_TARGET:
        return ctx.result(
            "target_context", "skipped",
            reasons.NO_ROOM.format(length=ctx.max_model_len),
        )  # fmt: skip
    one_unit = len(_UNIT.format(n=100)) / CHARS_PER_TOKEN_ESTIMATE
    try:
        base: int | None = _count(ctx, 0, deadline)
        unmeasured = None
    except ReplyError as exc:
        base, unmeasured = None, str(exc)
    units = max(1, int((target - (base or 40)) / one_unit))
    measured = None
    if base is not None:
        for _ in range(4):  # the count is close to linear in units; a few refinements land it
            try:
                measured = _count(ctx, units, deadline)
            except ReplyError:
                break
            if target - 2 * one_unit <= measured <= target:
                break
            # Within a factor of the estimate: a count that says a unit is ~0 tokens must not
            # grow the prompt past any size.
            per_unit = (measured - base) / units
            per_unit = min(max(per_unit, one_unit / 2), 4 * one_unit)
            units = max(1, int((target - base) / per_unit))
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
        "measured_with": "/tokenize" if unmeasured is None else "estimate (no /tokenize)",
        "prompt_processing_s": record.ttft_s,
        "e2e_s": record.e2e_s,
    }
    if record.error:
        return ctx.result(
            "target_context",
            "failed",
            reasons.LONG_PROMPT_FAILED.format(target=target, error=record.error),
            **figures,
        )
    if not (answer.content + answer.reasoning).strip():
        return ctx.result("target_context", "failed", reasons.LONG_PROMPT_EMPTY, **figures)
    reason = None if unmeasured is None else reasons.LENGTH_ESTIMATED.format(why=unmeasured)
    return ctx.result("target_context", "passed", reason, **figures)
