"""Rung 1, health: /health answers, /v1/models serves the model, /version; /metrics is noted."""

from __future__ import annotations

import json
from typing import Any

import httpx

from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.metrics import MetricsError, parse_metrics
from vllm_triage.validate.models import RungResult


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("health")
    url = ctx.options.url
    try:
        health = ctx.client.get("/health", deadline)
    except httpx.HTTPError as exc:
        ctx.unreachable = True
        return ctx.result(
            "health", "failed", f"cannot reach {url}/health: {exc.__class__.__name__}: {exc}"
        )
    if health.status_code != 200:
        return ctx.result("health", "failed", f"/health answered HTTP {health.status_code}")
    try:
        models = ctx.client.get("/v1/models", deadline)
        served: list[dict[str, Any]] = list(models.json().get("data") or [])
    except (httpx.HTTPError, json.JSONDecodeError, AttributeError):
        return ctx.result("health", "failed", "/v1/models did not answer with a model list")
    ids = [str(m.get("id")) for m in served if isinstance(m, dict)]
    if not ids:
        return ctx.result("health", "failed", "/v1/models lists no model")
    wanted = ctx.options.model
    if wanted is not None and wanted not in ids:
        return ctx.result(
            "health", "failed", f"model {wanted!r} is not served here (served: {', '.join(ids)})"
        )
    ctx.model = wanted or ids[0]
    entry = next(m for m in served if str(m.get("id")) == ctx.model)
    ctx.max_model_len = entry.get("max_model_len")
    figures: dict[str, object] = {"model": ctx.model, "max_model_len": ctx.max_model_len}
    try:
        version = ctx.client.get("/version", deadline)
        figures["version"] = version.json().get("version") if version.status_code == 200 else None
    except (httpx.HTTPError, json.JSONDecodeError, AttributeError):
        figures["version"] = None
    result = ctx.result("health", "passed", None, **figures)
    try:
        metrics = ctx.client.get("/metrics", deadline)
        snapshot = parse_metrics(metrics.text) if metrics.status_code == 200 else None
    except (httpx.HTTPError, MetricsError):
        snapshot = None
    ctx.metrics_available = snapshot is not None
    result.figures["metrics"] = ctx.metrics_available
    if snapshot is None:
        result.findings.append(
            "/metrics is not reachable: prefix-cache counts and KV-cache usage cannot be read "
            "(it is served by vLLM's OpenAI server unless a proxy hides it)"
        )
    else:
        ctx.cache_labels = snapshot.labels(ctx.kb, "cache_config_info")
    return result
