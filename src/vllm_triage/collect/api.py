"""The library behind `collect`: run every probe concurrently, each with its own deadline, and
write what came back, redacted, into one bundle folder and its .tar.gz.
"""

from __future__ import annotations

import platform
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from vllm_triage import __version__
from vllm_triage.collect.archive import pack
from vllm_triage.collect.bundle import (
    BUNDLE_PREFIX,
    FACTS,
    MANIFEST,
    BundleWriter,
    remove_partial,
)
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.models import BundleFacts, Manifest, ProbeState, ProbeStatus
from vllm_triage.collect.probes import PROBES, CollectOptions, Probe
from vllm_triage.collect.probes.base import (
    NotAvailable,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
    ProbeTimedOut,
    SharedResults,
)
from vllm_triage.collect.redact import Redactor
from vllm_triage.collect.runner import CommandRunner
from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase, load_knowledge

# After the deadline, a probe whose commands were all killed gets this long to return.
_GRACE_SECONDS = 0.5


@dataclass(frozen=True)
class CollectResult:
    folder: Path
    archive: Path
    manifest: Manifest


@dataclass
class _Run:
    probe: Probe
    started: float
    output: ProbeOutput | None = None
    status: ProbeState = "timed_out"
    reason: str | None = None
    finished: float | None = None


def _run_probe(run: _Run, ctx: ProbeContext) -> None:
    try:
        run.output = run.probe.collect(ctx)
        run.status = "ok"
    except NotAvailable as exc:
        run.status, run.reason = "not_available", str(exc)
    except (ProbeTimedOut, TimeoutError) as exc:
        run.status, run.reason = "timed_out", str(exc)
    except (ProbeFailed, InputError) as exc:
        run.status, run.reason = "failed", str(exc)
    except Exception as exc:  # a probe's bug must not sink the bundle (the sos model)
        run.status, run.reason = "failed", f"{exc.__class__.__name__}: {exc}"
    finally:
        run.finished = time.monotonic()


def _validate(options: CollectOptions) -> None:
    if options.timeout <= 0:
        raise InputError(f"--timeout must be positive, got {options.timeout}")
    for log in options.logs:
        if not log.is_file():
            raise InputError(f"{log}: no such log file")
    if options.pod is not None and not options.namespace:
        raise InputError("--pod needs a namespace (-n)")
    if not options.host_root.is_dir():
        raise InputError(f"{options.host_root}: host root is not a folder")


def _facts(outputs: dict[str, ProbeOutput], redactor: Redactor) -> dict[str, Any]:
    sections: dict[str, Any] = {}
    for name, output in outputs.items():
        if output.facts is not None:
            sections[name] = output.facts.model_dump(mode="json")
    container = sections.get("container")
    if container and container.get("env"):
        env = redactor.env(container["env"])
        container["env"], container["env_omitted"] = env.kept, env.omitted
    launch = (sections.get("vllm") or {}).get("launch")
    if launch and launch.get("env"):
        launch["env"] = redactor.env(launch["env"]).kept
    document = redactor.json(BundleFacts.model_validate(sections).model_dump(mode="json"))
    BundleFacts.model_validate(document)
    return dict(document)


def _options_record(options: CollectOptions) -> dict[str, Any]:
    return {
        "container": options.container,
        "pod": options.pod,
        "namespace": options.namespace if options.pod else None,
        "logs": [log.name for log in options.logs],
        "launch_cmd": options.launch_cmd is not None,
        "image": options.image,
        "model_path": options.model_path,
        "probe_image": options.probe_image,
        "timeout_s": options.timeout,
        "host_root": str(options.host_root),
    }


def collect(
    options: CollectOptions,
    case: Path = Path("triage"),
    runner: CommandRunner | None = None,
    kb: KnowledgeBase | None = None,
) -> CollectResult:
    """Freeze the evidence once: every probe at most `options.timeout` seconds, all at once."""
    _validate(options)
    kb = kb or load_knowledge()
    runner = runner or CommandRunner()
    redactor = Redactor(kb)
    created = datetime.now(UTC)
    name = BUNDLE_PREFIX + created.strftime("%Y%m%dT%H%M%S%fZ")
    try:
        case.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise InputError(f"{case}: cannot create the case folder ({exc.strerror})") from None
    partial = case / f".{name}.partial"
    final = case / name

    shared = SharedResults()
    deadline = time.monotonic() + options.timeout
    runs = [_Run(probe, time.monotonic()) for probe in PROBES]
    threads = [
        threading.Thread(
            target=_run_probe,
            args=(run, ProbeContext(options, runner, kb, deadline, shared)),
            name=f"probe-{run.probe.name}",
            daemon=True,  # a probe stuck in the kernel must not keep the process alive
        )
        for run in runs
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline + _GRACE_SECONDS - time.monotonic()))

    try:
        partial.mkdir()
        writer = BundleWriter(partial, redactor)
        statuses, outputs = [], {}
        for run in runs:
            finished = run.finished  # a late probe may still finish: decide once, from a snapshot
            status: ProbeState = run.status
            reason, output = run.reason, run.output
            if finished is None:
                status, reason, output = (
                    "timed_out",
                    f"no answer within {options.timeout:g} s",
                    None,
                )
            files: list[str] = []
            if output is not None:
                outputs[run.probe.name] = output
                files = [writer.add(f, run.probe.name) for f in output.files]
            end = finished if finished is not None else time.monotonic()
            statuses.append(
                ProbeStatus(
                    name=run.probe.name,
                    status=status,
                    reason=reason,
                    duration_s=round(end - run.started, 3),
                    files=files,
                    notes=output.notes if output is not None else [],
                )
            )
        statuses.append(_user_logs(options, writer))
        writer.write_json(FACTS, _facts(outputs, redactor), "collect")
        manifest = Manifest(
            tool_version=__version__,
            created_at=created.isoformat(),
            host=platform.node(),
            options=_options_record(options),
            files=writer.files,
            probes=statuses,
            redaction={},
        )
        manifest = Manifest.model_validate(redactor.json(manifest.model_dump(mode="json")))
        manifest.redaction = {rule: n for rule, n in redactor.report().items() if n}
        (partial / MANIFEST).write_text(manifest.model_dump_json(indent=2) + "\n", encoding="utf-8")
        partial.rename(final)
    except BaseException:
        remove_partial(partial)
        raise
    finally:
        runner.cleanup()
    archive = case / f"{name}.tar.gz"
    pack(final, archive)
    return CollectResult(final, archive, manifest)


def _user_logs(options: CollectOptions, writer: BundleWriter) -> ProbeStatus:
    started = time.monotonic()
    files = []
    for index, log in enumerate(options.logs):
        name = f"logs/given-{index + 1}-{log.name}"
        files.append(writer.add(CapturedFile(name, source=log), "logs"))
    return ProbeStatus(
        name="logs",
        status="ok" if files else "not_available",
        reason=None if files else "no --log given",
        duration_s=round(time.monotonic() - started, 3),
        files=files,
    )
