"""Rung 2, short text: one chat completion and one streamed; output, a finish reason, usage."""

from __future__ import annotations

from vllm_triage.validate import reasons
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RequestRecord, RungResult

PROMPT = "Name three primary colours, separated by commas."


def _problem(record: RequestRecord, text: str) -> str | None:
    if record.error:
        return record.error
    if not text.strip():
        return "the answer is empty"
    if not record.finish_reason:
        return "no finish_reason"
    if not record.completion_tokens:
        return "usage does not count the completion tokens"
    return None


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("short_text")
    body = {
        "model": ctx.model,
        "messages": [{"role": "user", "content": PROMPT}],
        "max_tokens": ctx.options.output_tokens,
        "temperature": 0,
    }
    plain, answer = ctx.client.chat(body, "short_text", "chat", deadline)
    ctx.recorder.add(plain)
    streamed, streamed_answer = ctx.client.stream_chat(body, "short_text", "chat_stream", deadline)
    ctx.recorder.add(streamed)
    figures = {
        "e2e_s": plain.e2e_s,
        "stream_ttft_s": streamed.ttft_s,
        "stream_e2e_s": streamed.e2e_s,
        "completion_tokens": plain.completion_tokens,
        "finish_reason": plain.finish_reason,
    }
    for kind, record, text in (
        ("chat completion", plain, answer.content + answer.reasoning),
        ("streamed chat completion", streamed, streamed_answer.content + streamed_answer.reasoning),
    ):
        if problem := _problem(record, text):
            return ctx.result(
                "short_text",
                "failed",
                reasons.ANSWER_PROBLEM.format(kind=kind, problem=problem),
                **figures,
            )
    return ctx.result("short_text", "passed", None, **figures)
