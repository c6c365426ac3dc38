"""Rung 4, same prefix: K requests that share system prompt, tools and history and differ only in
the last user message. The prefix-cache counters are read before and after (deltas of this run,
not totals since start), with the time to first token of the first request against the repeats.
"""

from __future__ import annotations

import statistics
from typing import Any

from vllm_triage.validate import reasons, wire
from vllm_triage.validate.client import ReplyError
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.metrics import MetricsSnapshot, flag, positive_int
from vllm_triage.validate.models import RungResult

_POLICY = (
    "Policy {n}: an operator keeps the runbook current, records each change with its ticket, "
    "and checks the dashboards after every deployment window. "
)
_DEFAULT_BLOCK = 16


def _shared(units: int) -> list[dict[str, Any]]:
    system = "You are the on-call assistant of a GPU cluster.\n" + "".join(
        _POLICY.format(n=n) for n in range(units)
    )
    return [
        {"role": "system", "content": system},
        {"role": "user", "content": "Which nodes were drained last night?"},
        {"role": "assistant", "content": "Nodes gpu-07 and gpu-11 were drained for maintenance."},
    ]


def _tokens(ctx: LadderContext, messages: list[dict[str, Any]], deadline: float) -> int | None:
    body = {
        "model": ctx.model,
        "messages": messages,
        "tools": ctx.tools,
        "add_generation_prompt": False,
    }
    try:
        return ctx.client.fetch_json("/tokenize", wire.TokenCount, deadline, body).count
    except ReplyError:
        return None


def _enabled(ctx: LadderContext) -> tuple[bool | None, str]:
    labels_flag = flag(ctx.cache_labels, "enable_prefix_caching")
    if labels_flag is not None:
        return labels_flag, "vllm:cache_config_info"
    if ctx.launch is not None and ctx.launch.enable_prefix_caching is not None:
        return ctx.launch.enable_prefix_caching, "the launch command"
    return None, "unknown"


def _turned_off_by_profile(ctx: LadderContext) -> str | None:
    """Why a disabled prefix cache is intended: the recipe's profile turns it off (the decode side
    of a prefill/decode split); None when it does not."""
    recipe = ctx.recipe
    if recipe is None:
        return None
    flags = ctx.kb.recipe_flags(recipe, ctx.options.profile)
    if not any(f.flag == "--no-enable-prefix-caching" for f in flags):
        return None
    chosen = ctx.kb.recipe_profile(recipe, ctx.options.profile)
    return reasons.CACHE_OFF_BY_PROFILE.format(recipe=recipe.name, profile=chosen.id)


def _delta(
    ctx: LadderContext, before: MetricsSnapshot | None, after: MetricsSnapshot | None, logical: str
) -> int | None:
    """How far a counter moved during the rung; None when unknown or it went back (a restart)."""
    if before is None or after is None:
        return None
    first, last = before.value(ctx.kb, logical), after.value(ctx.kb, logical)
    return None if first is None or last is None or last < first else int(last - first)


def _no_hit_reasons(ctx: LadderContext, shared_tokens: int | None, block: int) -> list[str]:
    found = []
    if shared_tokens is not None and shared_tokens < block:
        found.append(reasons.PREFIX_TOO_SHORT.format(tokens=shared_tokens, block=block))
    recipe = ctx.recipe
    flags = ctx.kb.recipe_flags(recipe, ctx.options.profile) if recipe is not None else []
    if recipe is not None and "--prefix-match-unit" in " ".join(f.why for f in flags):
        launch_other = ctx.launch.other if ctx.launch else {}
        if "--prefix-match-unit" not in launch_other:
            found.append(reasons.BLOCK_ALIGNMENT.format(recipe=recipe.name))
    found.append(reasons.EVICTED)
    return found


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("same_prefix")
    block = positive_int(ctx.cache_labels, "block_size") or _DEFAULT_BLOCK
    budget = ((ctx.max_model_len or 4096) - ctx.options.output_tokens) // 2
    wanted = min(max(4 * block, 512), budget)
    units = max(1, wanted // 30)
    shared = _shared(units)
    shared_tokens = _tokens(ctx, shared, deadline)
    if shared_tokens is not None and shared_tokens > budget:
        units = max(1, int(units * budget / shared_tokens))
        shared = _shared(units)
        shared_tokens = _tokens(ctx, shared, deadline)
    enabled, source = _enabled(ctx)
    ctx.prefix_cache.enabled = enabled
    before = ctx.metrics(deadline)
    records = []
    for index in range(ctx.options.same_prefix_requests):
        body = {
            "model": ctx.model,
            "messages": [
                *shared,
                {"role": "user", "content": f"Question {index}: which runbook step comes first?"},
            ],
            "tools": ctx.tools,
            "tool_choice": "none",
            "max_tokens": 8,
            "temperature": 0,
        }
        record, _ = ctx.client.stream_chat(body, "same_prefix", f"shared_prefix_{index}", deadline)
        records.append(ctx.recorder.add(record))
    after = ctx.metrics(deadline)
    queries = _delta(ctx, before, after, "prefix_cache_queries")
    hits = _delta(ctx, before, after, "prefix_cache_hits")
    cached = [r.cached_tokens for r in records if r.cached_tokens is not None]
    ctx.prefix_cache.queries = queries or 0
    ctx.prefix_cache.hits = hits or 0
    repeats = [r.ttft_s for r in records[1:] if r.ttft_s is not None]
    figures = {
        "requests": len(records),
        "shared_prefix_tokens": shared_tokens,
        "block_size": block,
        "queries": queries,
        "hits": hits,
        "hit_rate": round(hits / queries, 3) if queries and hits is not None else None,
        "cached_tokens_reported": sum(cached) if cached else None,
        "ttft_first_s": records[0].ttft_s if records else None,
        "ttft_repeats_p50_s": statistics.median(repeats) if repeats else None,
        "enabled": enabled,
        "enabled_from": source,
    }
    if failed := [r for r in records if r.error]:
        return ctx.result(
            "same_prefix",
            "failed",
            reasons.REQUESTS_FAILED.format(count=len(failed), error=failed[0].error),
            **figures,
        )
    if enabled is False and (off := _turned_off_by_profile(ctx)):
        return ctx.result("same_prefix", "skipped", off, **figures)
    if enabled is False:
        result = ctx.result(
            "same_prefix", "failed", reasons.CACHE_DISABLED.format(source=source), **figures
        )
        result.findings.append("start the server with --enable-prefix-caching")
        return result
    evidence_hits = hits if hits is not None else (sum(cached) if cached else None)
    if evidence_hits is None:
        return ctx.result(
            "same_prefix", "skipped",
            reasons.CANNOT_COUNT_HITS,
            **figures,
        )  # fmt: skip
    if evidence_hits > 0:
        return ctx.result(
            "same_prefix",
            "passed",
            reasons.CACHE_WORKS.format(hits=evidence_hits),
            **figures,
        )
    found = _no_hit_reasons(ctx, shared_tokens, block)
    return ctx.result(
        "same_prefix", "failed", reasons.NO_HITS.format(reasons="; ".join(found)), **figures
    )
