"""The library behind `validate`: climb the ladder rung by rung, stop at the first failing rung
(unless keep_going), write each request's record (JSONL) and the summary (JSON) in the case
folder. Ctrl-C writes what was measured so far, then propagates.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from vllm_triage.diagnose.api import recipe_for_model, resolve_recipe
from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.launch import parse_launch_command
from vllm_triage.validate.client import Client
from vllm_triage.validate.context import (
    LadderContext,
    Recorder,
    ValidateOptions,
    gpu_memory_used_mib,
)
from vllm_triage.validate.models import RUNG_ORDER, RungName, RungResult, ValidationRun
from vllm_triage.validate.rungs import (
    concurrency,
    health,
    image,
    multi_node,
    same_prefix,
    short_text,
    target_context,
    tool_calls,
)

RUNGS: dict[RungName, Callable[[LadderContext], RungResult]] = {
    "health": health.run,
    "short_text": short_text.run,
    "target_context": target_context.run,
    "same_prefix": same_prefix.run,
    "concurrency": concurrency.run,
    "image": image.run,
    "tool_calls": tool_calls.run,
    "multi_node": multi_node.run,
}
# Rung statuses that let the ladder go on.
_FINE = ("passed", "not_supported", "skipped")

ProgressCallback = Callable[[RungName, RungResult | None], None]


@dataclass(frozen=True)
class ValidateResult:
    run: ValidationRun
    folder: Path

    @property
    def unreachable(self) -> bool:
        """The server could not be reached at all (exit 2, not 1)."""
        health_rung = next((r for r in self.run.rungs if r.name == "health"), None)
        return bool(
            health_rung
            and health_rung.status == "failed"
            and "cannot reach" in (health_rung.reason or "")
        )


def _check_options(options: ValidateOptions, kb: KnowledgeBase) -> None:
    if not options.url.startswith(("http://", "https://")):
        raise InputError(f"{options.url!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
    if options.max_concurrency < 1:
        raise InputError("--max-concurrency must be at least 1")
    if options.target_context is not None and options.target_context < 16:
        raise InputError("--target-context must be at least 16 tokens")
    if options.api_key_env and options.api_key_env not in os.environ:
        raise InputError(f"--api-key-env {options.api_key_env}: no such environment variable")
    if options.transport not in (None, "rdma", "nvlink"):
        raise InputError("--transport must be rdma or nvlink")
    for log in options.logs:
        if not log.is_file():
            raise InputError(f"{log}: no such log file")
    resolve_recipe(kb, options.recipe)


def _memory_figures(ctx: LadderContext, result: RungResult) -> None:
    """GPU memory after the rung, where it can be read: nvidia-smi on this host, KV-cache usage."""
    if (used := gpu_memory_used_mib(ctx.options.url)) is not None:
        result.figures["gpu_memory_used_mib"] = used
    snapshot = ctx.metrics(time.monotonic() + 5)
    if snapshot is not None and (usage := snapshot.value(ctx.kb, "kv_cache_usage")) is not None:
        result.figures["kv_cache_usage_perc"] = round(usage, 4)


def validate(
    options: ValidateOptions,
    kb: KnowledgeBase | None = None,
    progress: ProgressCallback | None = None,
    client: Client | None = None,
) -> ValidateResult:
    """Run the ladder against a server; the summary says which rungs passed, with their figures."""
    kb = kb or load_knowledge()
    _check_options(options, kb)
    launch = parse_launch_command(options.launch_cmd, kb) if options.launch_cmd else None
    api_key = os.environ.get(options.api_key_env) if options.api_key_env else None
    folder = options.case / ("validate-" + datetime.now(UTC).strftime("%Y%m%dT%H%M%S%fZ"))
    try:
        folder.mkdir(parents=True)
    except OSError as exc:
        raise InputError(f"{folder}: cannot create ({exc.strerror})") from None
    client = client or Client(
        options.url, api_key, max_connections=max(8, 2 * options.max_concurrency)
    )
    rungs: list[RungResult] = []
    interrupted = False
    with (folder / "requests.jsonl").open("w", encoding="utf-8") as stream:
        ctx = LadderContext(options, client, kb, Recorder(stream), launch=launch)
        ctx.recipe = resolve_recipe(kb, options.recipe) or recipe_for_model(
            kb, launch.model if launch else None
        )
        stop_reason = None
        try:
            for name in RUNG_ORDER:
                if name == "multi_node" and not options.multi_node:
                    continue
                if stop_reason is not None:
                    rungs.append(RungResult(name=name, status="skipped", reason=stop_reason))
                    continue
                if progress:
                    progress(name, None)
                started = time.monotonic()
                result = RUNGS[name](ctx)
                result.duration_s = round(time.monotonic() - started, 3)
                if name == "health" and ctx.recipe is None:
                    ctx.recipe = recipe_for_model(kb, ctx.model)
                if not ctx.unreachable:
                    _memory_figures(ctx, result)
                rungs.append(result)
                if progress:
                    progress(name, result)
                if result.status not in _FINE and (not options.keep_going or name == "health"):
                    stop_reason = f"the {name} rung failed"
        except KeyboardInterrupt:
            interrupted = True
        finally:
            if client is not None:
                client.close()
    run = ValidationRun(
        passed=not interrupted and all(r.status in _FINE for r in rungs),
        url=options.url,
        model=ctx.model,
        rungs=rungs,
        prefix_cache=ctx.prefix_cache,
        tool_calls=ctx.tool_calls,
        interrupted=interrupted,
        records=str(folder / "requests.jsonl"),
    )
    (folder / "summary.json").write_text(run.model_dump_json(indent=2) + "\n", encoding="utf-8")
    outcome = ValidateResult(run, folder)
    if interrupted:
        raise ValidationInterrupted(outcome)
    return outcome


class ValidationInterrupted(KeyboardInterrupt):
    """Ctrl-C during the ladder; carries what was measured (already written to the case folder)."""

    def __init__(self, result: ValidateResult) -> None:
        super().__init__("interrupted")
        self.result = result
