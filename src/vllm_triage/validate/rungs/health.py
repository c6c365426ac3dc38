"""Rung 1, health: /health answers, /v1/models serves the model, /version; /metrics is noted."""

from __future__ import annotations

from vllm_triage.validate import reasons, wire
from vllm_triage.validate.client import ReplyError
from vllm_triage.validate.context import LadderContext, scrape_metrics
from vllm_triage.validate.metrics import MetricsError
from vllm_triage.validate.models import RungResult


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("health")
    url = ctx.options.url
    try:
        ctx.client.fetch("/health", deadline)
    except ReplyError as exc:
        if exc.unreachable:
            ctx.unreachable = True
            return ctx.result("health", "failed", reasons.CANNOT_REACH.format(url=url, error=exc))
        return ctx.result("health", "failed", str(exc))
    try:
        served = ctx.client.fetch_json("/v1/models", wire.ModelList, deadline).data
    except ReplyError as exc:
        return ctx.result("health", "failed", reasons.NO_MODEL_LIST.format(error=exc))
    ids = [model.id for model in served]
    if not ids:
        return ctx.result("health", "failed", reasons.NO_MODEL)
    wanted = ctx.options.model
    if wanted is not None and wanted not in ids:
        shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
        return ctx.result(
            "health", "failed", reasons.NOT_SERVED.format(model=repr(wanted), served=shown)
        )
    ctx.model = wanted or ids[0]
    ctx.max_model_len = next(m for m in served if m.id == ctx.model).max_model_len
    figures: dict[str, object] = {"model": ctx.model, "max_model_len": ctx.max_model_len}
    try:
        figures["version"] = ctx.client.fetch_json("/version", wire.Version, deadline).version
    except ReplyError:
        figures["version"] = None
    result = ctx.result("health", "passed", None, **figures)
    try:
        snapshot = scrape_metrics(ctx.client, deadline)
    except (ReplyError, MetricsError) as exc:
        result.findings.append(
            f"/metrics is not reachable or not usable ({exc}): prefix-cache counts and KV-cache usage are "
            "unknown (vLLM's OpenAI server serves it unless a proxy hides it)"
        )
        ctx.metrics_available = False
    else:
        ctx.metrics_available = True
        ctx.cache_labels = snapshot.labels(ctx.kb, "cache_config_info")
    result.figures["metrics"] = ctx.metrics_available
    return result
