"""The library behind `validate`: climb the ladder rung by rung, stop at the first failing rung
(unless keep_going), write each request's record (JSONL) and the summary (JSON) in a new run
folder of the case (runs/<UTC>/). Ctrl-C writes what was measured so far, then propagates.
"""

from __future__ import annotations

import os
import re
import shlex
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path

import httpx

from vllm_triage.case import REQUESTS, Case, fingerprint
from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.launch import LaunchArgs, parse_launch_command
from vllm_triage.models import Artifact
from vllm_triage.validate import reasons
from vllm_triage.validate.client import Client
from vllm_triage.validate.compare import COMPARE_FOLDER, compare_runs
from vllm_triage.validate.context import (
    LadderContext,
    Recorder,
    ValidateOptions,
    gpu_memory_used_mib,
)
from vllm_triage.validate.credentials import public_url
from vllm_triage.validate.models import (
    RUNG_ORDER,
    EndpointComparison,
    RungName,
    RungResult,
    StartSummary,
    ValidationRun,
)
from vllm_triage.validate.node import tie_node
from vllm_triage.validate.rungs import (
    concurrency,
    health,
    image,
    multi_node,
    same_prefix,
    short_text,
    structured_output,
    target_context,
    tool_calls,
)
from vllm_triage.validate.starts import (
    MAX_STARTS,
    Notice,
    StartStability,
    check_start_url,
    parse_start_command,
)

RUNGS: dict[RungName, Callable[[LadderContext], RungResult]] = {
    "health": health.run,
    "short_text": short_text.run,
    "target_context": target_context.run,
    "same_prefix": same_prefix.run,
    "concurrency": concurrency.run,
    "image": image.run,
    "tool_calls": tool_calls.run,
    "structured_output": structured_output.run,
    "multi_node": multi_node.run,
}
# One thread and connection per request in flight: past this, the client would be what is tested.
_MAX_CONCURRENCY = 1024
# The prompt rung 3 builds and sends whole: 2**24 tokens (about 64 MB of text) is above the
# longest context a served model has (10M tokens).
MAX_TARGET_CONTEXT = 2**24
_MEMORY_READ_S = 5.0
# Rung statuses that let the ladder go on.
_FINE = ("passed", "not_supported", "skipped")

ProgressCallback = Callable[[RungName, RungResult | None], None]


class ValidateResult(Artifact):
    """What `validate` did: the run's summary and the run folder it was written into."""

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


# A node or image name as the record shows it: printable ASCII, no spaces.
_NAME = re.compile(r"[\x21-\x7e]+")


def _check_options(options: ValidateOptions, kb: KnowledgeBase) -> None:
    _check_url(options.url)
    if not 1 <= options.max_concurrency <= _MAX_CONCURRENCY:
        raise InputError(f"--max-concurrency must be between 1 and {_MAX_CONCURRENCY}")
    target = options.target_context
    if target is not None and not 16 <= target <= MAX_TARGET_CONTEXT:
        raise InputError(f"--target-context must be between 16 and {MAX_TARGET_CONTEXT:,} tokens")
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
    for flag, value, longest in (("--node", options.node, 253), ("--image", options.image, 512)):
        if value is not None and not (len(value) <= longest and _NAME.fullmatch(value)):
            raise InputError(
                f"{flag}: expected a name of 1 to {longest} printable characters without spaces"
            )
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
        kb.recipe_profile(kb.recipe(options.recipe), options.profile)
    elif options.profile is not None:
        raise InputError("--profile names a profile of a recipe: give --recipe too")
    _check_starts_and_compare(options)


def _check_starts_and_compare(options: ValidateOptions) -> None:
    if options.starts is not None and options.start_cmd is None:
        raise InputError("--starts needs --start-cmd FILE (the command that starts the server)")
    if options.starts is not None and not 1 <= options.starts <= MAX_STARTS:
        raise InputError(f"--starts must be between 1 and {MAX_STARTS}")
    if not options.start_deadline_s > 0 or not options.stop_grace_s >= 0:
        raise InputError("the start deadline must be above 0 s and the stop grace at least 0 s")
    if options.compare_api_key_env and options.compare_url is None:
        raise InputError("--compare-api-key-env needs --compare-endpoint URL")
    if options.compare_url is None:
        return
    _check_url(options.compare_url)
    if public_url(options.compare_url).rstrip("/") == public_url(options.url).rstrip("/"):
        raise InputError("--compare-endpoint is the server itself: give the second endpoint")
    if options.compare_api_key_env:
        key = os.environ.get(options.compare_api_key_env)
        if key is None:
            raise InputError(
                f"--compare-api-key-env {options.compare_api_key_env}: no such environment variable"
            )
        if not (key.isascii() and key.isprintable()):
            raise InputError(
                f"--compare-api-key-env {options.compare_api_key_env}: the key is not printable "
                "ASCII (an HTTP header cannot carry it)"
            )


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
            reason=reasons.INTERNAL_ERROR.format(error=exc.__class__.__name__, detail=detail),
        )


@dataclass
class _Climb:
    """One ladder against one endpoint: its rungs, what they learnt, whether Ctrl-C stopped it."""

    ctx: LadderContext
    rungs: list[RungResult] = field(default_factory=list)
    interrupted: bool = False


def _climb_ladder(
    options: ValidateOptions,
    kb: KnowledgeBase,
    client: Client,
    records: Path,
    launch: LaunchArgs | None,
    progress: ProgressCallback | None,
    not_started: str | None = None,
) -> _Climb:
    """The rungs in order against `options.url`, each request recorded in `records`; the client
    is closed at the end. `not_started`: the server never became ready (every rung skipped, the
    health rung failed with this reason)."""
    credentials = client.credentials
    with records.open("w", encoding="utf-8") as stream:
        ctx = LadderContext(options, client, kb, Recorder(stream, credentials), launch=launch)
        climb = _Climb(ctx)
        ctx.recipe = (
            kb.recipe(options.recipe)
            if options.recipe is not None
            else kb.recipe_for_model(launch.model if launch else None)
        )
        stop_reason = None
        if not_started is not None:
            climb.rungs.append(RungResult(name="health", status="failed", reason=not_started))
            stop_reason = reasons.SERVER_NOT_STARTED
        try:
            for name in RUNG_ORDER:
                if name == "multi_node" and not options.multi_node:
                    continue
                if name == "health" and not_started is not None:
                    continue
                if stop_reason is not None:
                    climb.rungs.append(RungResult(name=name, status="skipped", reason=stop_reason))
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
                climb.rungs.append(result)
                if progress:
                    progress(name, result)
                if result.status not in _FINE and (not options.keep_going or name == "health"):
                    stop_reason = reasons.RUNG_FAILED.format(rung=name)
        except KeyboardInterrupt:
            climb.interrupted = True
        finally:
            client.close()
    return climb


def _summary(climb: _Climb, options: ValidateOptions, records: Path) -> ValidationRun:
    ctx = climb.ctx
    run = ValidationRun(
        passed=not climb.interrupted and all(r.status in _FINE for r in climb.rungs),
        url=options.url,
        model=ctx.model,
        rungs=climb.rungs,
        prefix_cache=ctx.prefix_cache,
        tool_calls=ctx.tool_calls,
        structured_output=ctx.structured_output,
        interrupted=climb.interrupted,
        records=str(records),
    )
    return ctx.client.credentials.mask_model(run)  # what is printed is what is written


def _not_ready_reason(starts: StartSummary) -> str:
    last = starts.starts[-1] if starts.starts else None
    if last is None:
        return reasons.NEVER_RAN
    why = last.reason or last.outcome
    if last.diagnosis:
        return reasons.NOT_READY_DIAGNOSED.format(
            number=last.number, reason=why, cause=last.diagnosis.cause
        )
    return reasons.NOT_READY.format(number=last.number, reason=why)


def _compare(
    options: ValidateOptions,
    kb: KnowledgeBase,
    first: ValidationRun,
    folder: Path,
    launch: LaunchArgs | None,
    progress: ProgressCallback | None,
    notice: Notice | None,
) -> tuple[EndpointComparison, bool]:
    """The same ladder against the second endpoint, and the two side by side; True if Ctrl-C
    stopped it. The same input set: the options are this run's (the model, the rungs, the
    request counts), the long prompt as long as this run's was."""
    assert options.compare_url is not None
    target = options.target_context
    if target is None:
        measured = next((r for r in first.rungs if r.name == "target_context"), None)
        wanted = measured.figures.get("target_tokens") if measured else None
        target = wanted if isinstance(wanted, int) else None
    key = os.environ.get(options.compare_api_key_env) if options.compare_api_key_env else None
    other_options = replace(
        options,
        url=options.compare_url,
        api_key_env=options.compare_api_key_env,
        target_context=target,
        start_cmd=None,
        compare_url=None,
        compare_api_key_env=None,
    )
    client = Client(options.compare_url, key, max_connections=max(8, 2 * options.max_concurrency))
    other_options = replace(other_options, url=public_url(options.compare_url))
    if notice:
        notice(f"the same requests against {other_options.url}")
    (folder / COMPARE_FOLDER).mkdir()
    records = folder / COMPARE_FOLDER / REQUESTS
    climb = _climb_ladder(other_options, kb, client, records, launch, progress)
    other = _summary(climb, other_options, records).stamped()
    return compare_runs(first, other), climb.interrupted


def validate(
    options: ValidateOptions,
    kb: KnowledgeBase | None = None,
    progress: ProgressCallback | None = None,
    client: Client | None = None,
    notice: Notice | None = None,
) -> ValidateResult:
    """Run the ladder against a server; the summary says which rungs passed, with their figures.

    With `start_cmd`, the server is first started `starts` times on this node (each start timed,
    stopped, a failed one diagnosed) and the ladder runs against the last start. With
    `compare_url`, the same ladder then runs against the second endpoint, and the summary holds
    both side by side. `notice` hears one line per start and per endpoint."""
    kb = kb or load_knowledge()
    _check_options(options, kb)
    command = parse_start_command(options.start_cmd, kb) if options.start_cmd is not None else None
    if command is not None:
        check_start_url(command, options.url)
    launch = (
        parse_launch_command(options.launch_cmd, kb)
        if options.launch_cmd
        else (command.launch if command else None)
    )
    api_key = os.environ.get(options.api_key_env) if options.api_key_env else None
    made_from = [fingerprint(log) for log in options.logs]  # not the launch command: InputFile
    case = Case(options.case)
    folder = case.new_run(datetime.now(UTC))
    client = client or Client(
        options.url, api_key, max_connections=max(8, 2 * options.max_concurrency)
    )
    # From here on the URL is shown and written without its credentials (the client keeps them).
    given_url = options.url
    options = replace(options, url=public_url(options.url))
    interrupted = False
    not_started: str | None = None
    stability: StartStability | None = None
    starts: StartSummary | None = None
    try:
        if command is not None:
            stability = StartStability(
                command, given_url, options.starts or 1, folder, kb,
                deadline_s=options.start_deadline_s, grace_s=options.stop_grace_s,
                api_key=api_key, notice=notice,
            )  # fmt: skip
            try:
                if not stability.run():
                    not_started = _not_ready_reason(stability.summary)
            except KeyboardInterrupt:
                interrupted = True
                not_started = "interrupted while the server started"
        climb = _climb_ladder(options, kb, client, folder / REQUESTS, launch, progress, not_started)
        interrupted = interrupted or climb.interrupted
    finally:
        if stability is not None:
            try:
                starts = stability.close()
            except KeyboardInterrupt:
                interrupted = True
                starts = stability.summary
    run = _summary(climb, options, folder / REQUESTS)
    if starts is not None:
        run = run.model_copy(update={"starts": starts, "passed": run.passed and starts.all_ready})
    if options.compare_url is not None and not interrupted:
        comparison, interrupted = _compare(options, kb, run, folder, launch, progress, notice)
        run = run.model_copy(update={"comparison": comparison})
    named, named_by = (
        (options.node, "flag") if options.node else (starts.node if starts else None, "starts")
    )
    run = run.model_copy(
        update={
            "interrupted": interrupted,
            "passed": run.passed and not interrupted,
            "node": tie_node(case, named, named_by),
            "image": options.image,
        }
    )
    run = run.stamped(made_from)
    case.write_summary(folder, run)
    outcome = ValidateResult(run=run, folder=folder)
    if interrupted:
        raise ValidationInterrupted(outcome)
    return outcome


class ValidationInterrupted(KeyboardInterrupt):
    """Ctrl-C during the ladder; carries what was measured (already written to the case folder)."""

    def __init__(self, result: ValidateResult) -> None:
        super().__init__("interrupted")
        self.result = result
