"""The library behind `collect`: run every probe concurrently, each with its own deadline, and
write what came back, redacted, into one bundle folder and its .tar.gz. A file system that
refuses the .tar.gz (full, read-only, no permission) leaves the folder whole and no archive, and
the error says where the folder is.

The whole run ends near --timeout plus a fixed margin, whatever the probes print: commands keep at
most a capped head and tail of their output, the probes stop at the deadline, the streamed files
are redacted within WRITE_SECONDS and a total size (what does not fit is noted, never written
unredacted), and the archive holds no more than that. Ctrl-C, SIGTERM or SIGHUP stop it with
every command's processes killed and the raw outputs removed.
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
from vllm_triage.bundle.archive import ArchiveNotWritten, pack
from vllm_triage.bundle.layout import FACTS, MANIFEST
from vllm_triage.bundle.models import BundleFacts, Manifest, ProbeState, ProbeStatus
from vllm_triage.case import ARCHIVE_SUFFIX, BUNDLE_PREFIX, Case, stamp
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.facts import bounded
from vllm_triage.collect.probes import PROBES, CollectOptions, Probe
from vllm_triage.collect.probes.base import (
    NotAvailable,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
    ProbeTimedOut,
    SharedResults,
)
from vllm_triage.collect.runner import CommandRunner
from vllm_triage.collect.writer import BundleWriter, remove_partial
from vllm_triage.errors import FileSystemError, InputError, file_system_reason
from vllm_triage.inputs import STDIN, open_input
from vllm_triage.interrupts import shielded, stopped_by_signals
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.models import Artifact
from vllm_triage.redact import Redactor

# After the deadline, a probe whose commands were all killed gets this long to return.
_GRACE_SECONDS = 0.5
# After the probes: how long redacting the streamed files (logs, raw outputs) may take, and how
# many bytes of them the bundle holds in all (what gzip packs within a few seconds).
WRITE_SECONDS = 4.0
STREAM_BUDGET = 96 * 1024 * 1024
# Texts larger than this are written with the logs (within the deadline and the budget).
_SMALL_TEXT = 1024 * 1024
# The bound a caller can rely on: collect returns within --timeout plus this.
MARGIN_SECONDS = 10.0


class CollectResult(Artifact):
    """What `collect` wrote: the bundle folder, its archive, and the manifest (the bundle's
    envelope: tool version, time, files with their sha256 and size)."""

    case: Path
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
        if str(log) == STDIN:
            raise InputError("--log -: collect reads log files, not standard input; save it first")
        try:  # a regular file only: a FIFO or a device would block the probes and the writer
            with open_input(log, "a log file"):
                pass
        except InputError as exc:
            raise InputError(f"--log {exc}") from None
    if options.pod is not None and not options.namespace:
        raise InputError("--pod needs a namespace (-n)")
    if not options.host_root.is_dir():
        raise InputError(f"{options.host_root}: host root is not a folder")


def _facts(outputs: dict[str, ProbeOutput], redactor: Redactor) -> dict[str, Any]:
    """Every probe's parsed facts, through the same redaction as the raw text they came from."""
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
    document = bounded(document)
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
    *,
    runner: CommandRunner | None = None,
    kb: KnowledgeBase | None = None,
) -> CollectResult:
    """Freeze the evidence once into the case's bundles/: every probe at most `options.timeout`
    seconds, all at once; the whole run within `options.timeout` + MARGIN_SECONDS. `runner` and
    `kb` replace the real ones (tests, a host replayed)."""
    _validate(options)
    kb = kb or load_knowledge()
    runner = runner or CommandRunner()
    try:
        with stopped_by_signals():
            return _collect(options, runner, kb)
    finally:
        with shielded():  # a second Ctrl-C must not leave raw outputs or processes behind
            runner.cleanup()


def _collect(options: CollectOptions, runner: CommandRunner, kb: KnowledgeBase) -> CollectResult:
    redactor = Redactor(kb)
    created = datetime.now(UTC)
    name = BUNDLE_PREFIX + stamp(created)
    bundles = Case(options.case).bundles_folder()
    partial = bundles / f".{name}.partial"
    final = bundles / name

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
    # A late probe must not start a command while the bundle is written; none outlives it.
    runner.stop()
    outcomes = _outcomes(runs, options)
    write_deadline = max(time.monotonic(), deadline + _GRACE_SECONDS) + WRITE_SECONDS

    try:
        partial.mkdir()
        writer = BundleWriter(partial, redactor)
        files: dict[int, str] = {}
        # Documents and small texts first: the secrets they show by name are then known when
        # the facts and the logs are written; the logs last, within the deadline.
        streams = []
        outputs = {o.name: o.output for o in outcomes if o.output is not None}
        for probe, output in outputs.items():
            for captured in output.files:
                if captured.source is None and len(captured.text or "") <= _SMALL_TEXT:
                    files[id(captured)] = writer.add(captured, probe)
                else:
                    streams.append((captured, probe))
        writer.write_json(FACTS, _facts(outputs, redactor), "collect")
        logs = [
            CapturedFile(f"logs/given-{index + 1}-{log.name}", source=log)
            for index, log in enumerate(options.logs)
        ]
        streams += [(log, "logs") for log in logs]
        paths = writer.add_streams(streams, write_deadline, STREAM_BUDGET)
        files.update((id(c), path) for (c, _), path in zip(streams, paths, strict=True))
        statuses = [_status(outcome, files) for outcome in outcomes]
        statuses.append(_logs_status(logs, files))
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
    archive = bundles / f"{name}{ARCHIVE_SUFFIX}"
    try:
        pack(final, archive)
    except ArchiveNotWritten as exc:
        # The folder is whole (its manifest written last, then renamed): evidence taken once,
        # before anyone restarts anything, is kept, and the error says where it is.
        raise FileSystemError(
            f"{archive}: the archive could not be written ({file_system_reason(exc.error)}); "
            f"the bundle is kept, whole, in its folder {final}"
        ) from None
    return CollectResult(case=options.case, folder=final, archive=archive, manifest=manifest)


@dataclass(frozen=True)
class _Outcome:
    """A probe's result, decided once from a snapshot (a late probe may still finish)."""

    name: str
    status: ProbeState
    reason: str | None
    output: ProbeOutput | None
    duration_s: float


def _outcomes(runs: list[_Run], options: CollectOptions) -> list[_Outcome]:
    outcomes = []
    for run in runs:
        finished = run.finished
        if finished is None:
            late = f"no answer within {options.timeout:g} s"
            outcome = _Outcome(run.probe.name, "timed_out", late, None, time.monotonic())
        else:
            outcome = _Outcome(run.probe.name, run.status, run.reason, run.output, finished)
        outcomes.append(
            _Outcome(
                outcome.name,
                outcome.status,
                outcome.reason,
                outcome.output,
                round(outcome.duration_s - run.started, 3),
            )
        )
    return outcomes


def _status(outcome: _Outcome, files: dict[int, str]) -> ProbeStatus:
    output = outcome.output
    return ProbeStatus(
        name=outcome.name,
        status=outcome.status,
        reason=outcome.reason,
        duration_s=outcome.duration_s,
        files=[files[id(f)] for f in output.files] if output is not None else [],
        notes=output.notes if output is not None else [],
    )


def _logs_status(logs: list[CapturedFile], files: dict[int, str]) -> ProbeStatus:
    return ProbeStatus(
        name="logs",
        status="ok" if logs else "not_available",
        reason=None if logs else reasons.NO_LOG,
        duration_s=0.0,
        files=[files[id(log)] for log in logs],
    )
