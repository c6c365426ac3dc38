"""The library behind `validate`: climb the ladder rung by rung, stop at the first failing rung
(unless keep_going), write each request's record (JSONL) and the summary (JSON) in the case
folder. Ctrl-C writes what was measured so far, then propagates.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

import httpx

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
from vllm_triage.validate.credentials import public_url
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
# One thread and connection per request in flight: past this, the client would be what is tested.
_MAX_CONCURRENCY = 1024
_MEMORY_READ_S = 5.0
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


def _check_url(url: str) -> None:
    """An http(s) URL with a host; the messages never repeat its user part (a password)."""
    shown = public_url(url)
    if not url.startswith(("http://", "https://")):
        raise InputError(f"{shown!r} is not an http(s) URL, e.g. http://127.0.0.1:8000")
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        raise InputError(f"{shown!r} is not a valid URL") from None
    if not parsed.host:
        raise InputError(f"{shown!r} has no host, e.g. http://127.0.0.1:8000")
    if parsed.port is not None and not 0 < parsed.port < 65536:
        raise InputError(f"{shown!r}: the port must be between 1 and 65535")
    if parsed.query or parsed.fragment:
        raise InputError("the server URL cannot have a query (?...) or a fragment (#...)")


def _check_options(options: ValidateOptions, kb: KnowledgeBase) -> None:
    _check_url(options.url)
    if not 1 <= options.max_concurrency <= _MAX_CONCURRENCY:
        raise InputError(f"--max-concurrency must be between 1 and {_MAX_CONCURRENCY}")
    if options.target_context is not None and options.target_context < 16:
        raise InputError("--target-context must be at least 16 tokens")
    if options.api_key_env:
        api_key = os.environ.get(options.api_key_env)
        if api_key is None:
            raise InputError(f"--api-key-env {options.api_key_env}: no such environment variable")
        if not (api_key.isascii() and api_key.isprintable()):
            raise InputError(
                f"--api-key-env {options.api_key_env}: the key is not printable ASCII "
                "(an HTTP header cannot carry it)"
            )
    if options.api_key_env and httpx.URL(options.url).userinfo:
        raise InputError(
            "give either credentials in the URL (user:password@) or --api-key-env, not both: "
            "each is sent as the Authorization header"
        )
    if options.transport not in (None, "rdma", "nvlink"):
        raise InputError("--transport must be rdma or nvlink")
    if options.nccl_test is not None:
        try:
            words = shlex.split(options.nccl_test)
        except ValueError as exc:
            raise InputError(f"--nccl-test: cannot split the command ({exc})") from None
        if not words:
            raise InputError("--nccl-test: the command is empty")
    for log in options.logs:
        if not log.is_file():
            raise InputError(f"{log}: no such log file")
    if options.recipe is not None:
        kb.recipe(options.recipe)


def _memory_figures(ctx: LadderContext, result: RungResult, deadline: float) -> None:
    """GPU memory after the rung, where it can be read: nvidia-smi on this host, KV-cache usage;
    within what is left of the rung's deadline, 5 s at most."""
    deadline = min(deadline, time.monotonic() + _MEMORY_READ_S)
    if (used := gpu_memory_used_mib(ctx.options.url, deadline)) is not None:
        result.figures["gpu_memory_used_mib"] = used
    if deadline <= time.monotonic():
        return
    snapshot = ctx.metrics(deadline)
    if snapshot is not None and (usage := snapshot.value(ctx.kb, "kv_cache_usage")) is not None:
        result.figures["kv_cache_usage_perc"] = round(usage, 4)


def _climb(name: RungName, ctx: LadderContext) -> RungResult:
    """One rung. Every answer a server can give ends in a reason the rung gives itself; an
    exception that escapes it anyway is a bug of the tool, shown as such in a failed rung
    rather than a traceback that loses the run."""
    try:
        return RUNGS[name](ctx)
    except Exception as exc:
        detail = " ".join(str(exc).split())[:200]
        return RungResult(
            name=name,
            status="failed",
            reason=f"internal error of vllm-triage ({exc.__class__.__name__}: {detail}); "
            "please report it with requests.jsonl",
        )


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
    # From here on the URL is shown and written without its credentials (the client keeps them).
    options = replace(options, url=public_url(options.url))
    credentials = client.credentials
    rungs: list[RungResult] = []
    interrupted = False
    with (folder / "requests.jsonl").open("w", encoding="utf-8") as stream:
        ctx = LadderContext(options, client, kb, Recorder(stream, credentials), launch=launch)
        ctx.recipe = (
            kb.recipe(options.recipe)
            if options.recipe is not None
            else kb.recipe_for_model(launch.model if launch else None)
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
                result = _climb(name, ctx)
                if name == "health" and ctx.recipe is None:
                    ctx.recipe = kb.recipe_for_model(ctx.model)
                if not ctx.unreachable:
                    _memory_figures(ctx, result, started + options.deadlines[name])
                result.duration_s = round(time.monotonic() - started, 3)
                # A reason may quote the server (a model id, an error page): never a credential.
                result = credentials.mask_model(result)
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
    run = credentials.mask_model(run)  # what is printed is what is written
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
