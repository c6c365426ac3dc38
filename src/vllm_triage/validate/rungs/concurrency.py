"""Rung 5, concurrency ramp: 1, 2, 4, ... streamed requests at once up to --max-concurrency; per
level p50/p95 of time to first token, inter-token latency and total time, output tokens/s, and
the error count and rate. Failed requests count as errors, never as successes, and are never
dropped: the statistics say how many requests they rest on. Stops at the first level whose error
rate passes the threshold and reports the last good level.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from vllm_triage.validate import reasons
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RequestRecord, RungResult


def levels(maximum: int) -> list[int]:
    """1, 2, 4, ... up to maximum, maximum itself included."""
    found, level = [], 1
    while level < maximum:
        found.append(level)
        level *= 2
    return [*found, maximum]


def percentile(values: Sequence[float], q: float) -> float | None:
    """The q-th percentile (0-100) by linear interpolation; None for no values."""
    if not values:
        return None
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    position = (len(ordered) - 1) * q / 100
    low = int(position)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (position - low)


def level_figures(records: Sequence[RequestRecord], wall_s: float) -> dict[str, Any]:
    """The statistics of one level; latency percentiles over the successful requests only."""
    ok = [r for r in records if r.ok]
    errors = [r for r in records if not r.ok]
    ttft = [r.ttft_s for r in ok if r.ttft_s is not None]
    itl = [gap for r in ok for gap in r.inter_token_s]
    e2e = [r.e2e_s for r in ok if r.e2e_s is not None]
    tokens = sum(r.completion_tokens or 0 for r in ok)

    def rounded(value: float | None) -> float | None:
        return None if value is None else round(value, 4)

    return {
        "requests": len(records),
        "ok": len(ok),
        "errors": len(errors),
        "error_rate": round(len(errors) / len(records), 4) if records else 0.0,
        "error_samples": sorted({r.error or "" for r in errors})[:3],
        "ttft_p50_s": rounded(percentile(ttft, 50)),
        "ttft_p95_s": rounded(percentile(ttft, 95)),
        "itl_p50_s": rounded(percentile(itl, 50)),
        "itl_p95_s": rounded(percentile(itl, 95)),
        "e2e_p50_s": rounded(percentile(e2e, 50)),
        "e2e_p95_s": rounded(percentile(e2e, 95)),
        "output_tokens_per_s": round(tokens / wall_s, 2) if wall_s > 0 else None,
        "wall_s": round(wall_s, 3),
    }


def prompt(index: int) -> str:
    """The user message of the ramp's request number `index` (bench/bench_validate.py sends the
    same ones through `vllm bench serve`)."""
    return f"Request {index}: write a short line about GPUs."


def _body(ctx: LadderContext, index: int) -> dict[str, Any]:
    return {
        "model": ctx.model,
        "messages": [{"role": "user", "content": prompt(index)}],
        "max_tokens": ctx.options.output_tokens,
        "temperature": 0,
        "ignore_eos": True,
    }


def run_level(ctx: LadderContext, level: int, deadline: float) -> tuple[list[RequestRecord], float]:
    """`level` requests in flight at once, `requests_per_slot` rounds of them."""
    count = level * ctx.options.requests_per_slot

    def one(index: int) -> RequestRecord:
        # The record only: the answers' text is not kept while the level runs.
        record, _ = ctx.client.stream_chat(
            _body(ctx, index), "concurrency", f"level_{level}", deadline
        )
        return ctx.recorder.add(record)

    started = time.monotonic()
    with ThreadPoolExecutor(max_workers=level) as pool:
        records = list(pool.map(one, range(count)))
    return records, time.monotonic() - started


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("concurrency")
    threshold = ctx.options.error_rate_threshold
    by_level: dict[str, dict[str, Any]] = {}
    last_good = None
    for level in levels(max(1, ctx.options.max_concurrency)):
        records, wall = run_level(ctx, level, deadline)
        figures = level_figures(records, wall)
        by_level[str(level)] = figures
        if figures["error_rate"] > threshold:
            failed = {
                "level": level,
                "errors": figures["errors"],
                "requests": figures["requests"],
                "rate": f"{figures['error_rate']:.0%}",
                "threshold": f"{threshold:.0%}",
                "sample": figures["error_samples"][0],
            }
            reason = (
                reasons.LEVEL_FAILED_AFTER.format(**failed, last_good=last_good)
                if last_good
                else reasons.LEVEL_FAILED.format(**failed)
            )
            return ctx.result(
                "concurrency", "failed", reason, levels=by_level, last_good_level=last_good
            )
        last_good = level
    return ctx.result("concurrency", "passed", None, levels=by_level, last_good_level=last_good)
