"""The library behind `baseline capture --label NAME`: one node's state before (or after) a
change, into the case's baselines/<label>/: baseline.json and the redacted raw outputs under raw/.

It runs collect's own probes for the parts a driver change can disturb (gpu, host, container,
communication), concurrently, each within --timeout, through the same allow-listed command runner
and the same redactor; with --endpoint it then sends one short request to a model already serving
(time and answer recorded). Nothing unredacted is written: the raw outputs go through the bundle
writer, baseline.json through the redactor, and the runner's temporary outputs are removed. A
capture that fails or is interrupted leaves no folder behind, so its label can be used again.
"""

from __future__ import annotations

import os
import re
import shutil
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from vllm_triage.baseline import parsers
from vllm_triage.baseline.endpoint import DEFAULT_DEADLINE_S, short_request
from vllm_triage.baseline.models import (
    RAW_FOLDER,
    Baseline,
    Communication,
    ContainerRuntime,
    DeviceNode,
    EndpointCheck,
    GpuState,
    HostState,
    NodeGpu,
)
from vllm_triage.baseline.texts import CONTAINER_LOG_SOURCE, LOG_SOURCE, SETTINGS_SOURCE
from vllm_triage.bundle.models import (
    CommunicationFacts,
    ContainerFacts,
    GpuFacts,
    HostFacts,
    ProbeState,
    ProbeStatus,
)
from vllm_triage.case import BASELINE_FILE, Case, case_folder, fingerprint
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes import PROBES, CollectOptions
from vllm_triage.collect.probes.base import (
    NotAvailable,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
    ProbeTimedOut,
    SharedResults,
)
from vllm_triage.collect.probes.communication import nccl_from_log
from vllm_triage.collect.runner import CommandRunner
from vllm_triage.collect.writer import BundleWriter
from vllm_triage.errors import InputError
from vllm_triage.inputs import STDIN, open_input
from vllm_triage.interrupts import shielded, stopped_by_signals
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.redact import Redactor

# The probes of collect that see what a driver change can disturb.
PROBE_NAMES = ("gpu", "host", "container", "communication")
_GRACE_SECONDS = 0.5
# Writing the redacted raw outputs: at most this long, and this many bytes in all.
WRITE_SECONDS = 4.0
RAW_BUDGET = 64 * 1024 * 1024
_SMALL_TEXT = 1024 * 1024
# What is read of a log or a raw output to find the NCCL version and transport, or to parse.
_LOG_HEAD = 8 * 1024 * 1024
_RAW_READ = 32 * 1024 * 1024
_DEVICE_FILES = 64
_MAX_ENDPOINT_S = 600.0
_SURROGATE = re.compile("[\ud800-\udfff]")


@dataclass(frozen=True)
class CaptureOptions:
    """What to capture: the label, the existing model's container and logs (NCCL), and the
    endpoint of a model already serving on the node for the short request."""

    label: str
    case: Path = field(default_factory=case_folder)
    container: str | None = None
    logs: tuple[Path, ...] = ()
    endpoint: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    endpoint_timeout: float = DEFAULT_DEADLINE_S
    timeout: float = 10.0
    host_root: Path = Path("/")
    engine: str | None = None


def baseline_capture(
    options: CaptureOptions,
    *,
    runner: CommandRunner | None = None,
    kb: KnowledgeBase | None = None,
) -> Baseline:
    """Capture the node's state into the case's baselines/<label>/ and return it; within
    `timeout` + the endpoint's deadline + a few seconds. `runner` and `kb` replace the real ones
    (tests, a host replayed)."""
    api_key = _validate(options)
    kb = kb or load_knowledge()
    runner = runner or CommandRunner()
    case = Case(options.case)
    folder = case.new_baseline(options.label)
    try:
        with stopped_by_signals():
            return _capture(options, case, folder, runner, kb, api_key)
    except BaseException:
        with shielded():
            shutil.rmtree(folder, ignore_errors=True)
        raise
    finally:
        with shielded():  # no raw output and no process outlives the capture
            runner.cleanup()


def _validate(options: CaptureOptions) -> str | None:
    """Refuse what cannot be captured, before anything runs; the API key when one is named."""
    if not options.timeout > 0:
        raise InputError(f"--timeout must be positive, got {options.timeout}")
    if not 0 < options.endpoint_timeout <= _MAX_ENDPOINT_S:
        raise InputError(
            f"--endpoint-timeout must be above 0 and at most {_MAX_ENDPOINT_S:g} s, "
            f"got {options.endpoint_timeout}"
        )
    if not options.host_root.is_dir():
        raise InputError(f"{options.host_root}: host root is not a folder")
    for log in options.logs:
        if str(log) == STDIN:
            raise InputError("--log -: baseline reads log files, not standard input; save it first")
        try:
            with open_input(log, "a log file"):
                pass
        except InputError as exc:
            raise InputError(f"--log {exc}") from None
    if options.endpoint is not None:
        try:
            url = httpx.URL(options.endpoint)
        except httpx.InvalidURL:
            url = None
        if url is None or url.scheme not in ("http", "https") or not url.host:
            raise InputError(
                "--endpoint: give the server's URL, e.g. http://127.0.0.1:8000 (http or https)"
            )
    elif options.model or options.api_key_env:
        raise InputError("--model and --api-key-env go with --endpoint")
    if options.api_key_env is None:
        return None
    key = os.environ.get(options.api_key_env)
    if not key:
        raise InputError(f"--api-key-env {options.api_key_env}: the variable is not set")
    return key


@dataclass
class _Run:
    name: str
    started: float
    output: ProbeOutput | None = None
    status: ProbeState = "timed_out"
    reason: str | None = None
    finished: float | None = None


def _run_probe(run: _Run, probe: Any, ctx: ProbeContext) -> None:
    try:
        run.output = probe.collect(ctx)
        run.status = "ok"
    except NotAvailable as exc:
        run.status, run.reason = "not_available", str(exc)
    except (ProbeTimedOut, TimeoutError) as exc:
        run.status, run.reason = "timed_out", str(exc)
    except (ProbeFailed, InputError) as exc:
        run.status, run.reason = "failed", str(exc)
    except Exception as exc:  # a probe's bug must not sink the baseline
        run.status, run.reason = "failed", f"{exc.__class__.__name__}: {exc}"
    finally:
        run.finished = time.monotonic()


def _probe_outputs(
    options: CaptureOptions, runner: CommandRunner, kb: KnowledgeBase
) -> tuple[dict[str, ProbeOutput], list[_Run]]:
    """collect's probes for a baseline, all at once, each until the shared deadline."""
    collect_options = CollectOptions(
        container=options.container,
        logs=options.logs,
        timeout=options.timeout,
        host_root=options.host_root,
        engine=options.engine,
        case=options.case,
    )
    shared = SharedResults()
    deadline = time.monotonic() + options.timeout
    probes = [probe for probe in PROBES if probe.name in PROBE_NAMES]
    runs = [_Run(probe.name, time.monotonic()) for probe in probes]
    threads = [
        threading.Thread(
            target=_run_probe,
            args=(run, probe, ProbeContext(collect_options, runner, kb, deadline, shared)),
            name=f"baseline-{probe.name}",
            daemon=True,
        )
        for run, probe in zip(runs, probes, strict=True)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(max(0.0, deadline + _GRACE_SECONDS - time.monotonic()))
    runner.stop()  # a late probe starts no command while the outputs are read
    outputs = {}
    for run in runs:
        if run.finished is None:
            run.status, run.reason = (
                "timed_out",
                reasons.NO_ANSWER.format(seconds=f"{options.timeout:g}"),
            )
        elif run.output is not None and run.status == "ok":
            outputs[run.name] = run.output
    return outputs, runs


def _capture(
    options: CaptureOptions,
    case: Case,
    folder: Path,
    runner: CommandRunner,
    kb: KnowledgeBase,
    api_key: str | None,
) -> Baseline:
    outputs, runs = _probe_outputs(options, runner, kb)
    files = {captured.path: captured for output in outputs.values() for captured in output.files}
    gpu = _node_gpu(outputs.get("gpu"), files)
    host = _host(outputs.get("host"))
    container = _container(outputs.get("container"), files, options.host_root)
    communication = _communication(outputs.get("communication"), files, options.logs)
    endpoint = _endpoint(options, api_key) if options.endpoint is not None else None

    redactor = Redactor(kb)
    raw = folder / RAW_FOLDER
    raw.mkdir()
    writer = BundleWriter(raw, redactor)
    written = _write_raw(writer, outputs)
    statuses = [
        ProbeStatus(
            name=run.name,
            status=run.status,
            reason=run.reason,
            duration_s=round((run.finished or time.monotonic()) - run.started, 3),
            files=[written[id(f)] for f in run.output.files if id(f) in written]
            if run.output is not None and run.name in outputs
            else [],
            notes=run.output.notes if run.output is not None and run.name in outputs else [],
        )
        for run in runs
    ]
    baseline = Baseline(
        label=options.label,
        node=host.node_name if host else None,
        gpu=gpu,
        host=host,
        container=container,
        communication=communication,
        endpoint=endpoint,
        probes=statuses,
        files=writer.files,
    )
    document = _no_surrogates(redactor.json(baseline.model_dump(mode="json")))
    baseline = Baseline.model_validate(document)
    baseline.redaction = {rule: n for rule, n in redactor.report().items() if n}
    baseline = baseline.stamped([fingerprint(log, log.name) for log in options.logs])
    data = (baseline.model_dump_json(indent=2) + "\n").encode("utf-8")
    case.write_new(folder / BASELINE_FILE, data)
    return baseline


def _no_surrogates(value: Any) -> Any:
    """Every string with its lone surrogates (undecodable bytes a host printed, kept through
    surrogateescape) replaced by U+FFFD: JSON is UTF-8."""
    if isinstance(value, str):
        return value if value.isascii() else _SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_no_surrogates(k): _no_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_no_surrogates(item) for item in value]
    return value


def _write_raw(writer: BundleWriter, outputs: dict[str, ProbeOutput]) -> dict[int, str]:
    """Every probe's files, redacted, into raw/: small texts first (the secrets they name are
    then known when the command outputs stream through), within WRITE_SECONDS and RAW_BUDGET."""
    written: dict[int, str] = {}
    streams = []
    for probe, output in outputs.items():
        for captured in output.files:
            if captured.source is None and len(captured.text or "") <= _SMALL_TEXT:
                written[id(captured)] = writer.add(captured, probe)
            else:
                streams.append((captured, probe))
    paths = writer.add_streams(streams, time.monotonic() + WRITE_SECONDS, RAW_BUDGET)
    written.update((id(c), path) for (c, _), path in zip(streams, paths, strict=True))
    return written


def _raw_text(captured: CapturedFile | None) -> str:
    """A probe file's unredacted text, from memory or the runner's output (read capped): parsed
    here, never written as it is."""
    if captured is None:
        return ""
    if captured.source is None:
        return captured.text or ""
    try:
        with captured.source.open("rb") as handle:
            return handle.read(_RAW_READ).decode("utf-8", "replace")
    except OSError:
        return ""


def _node_gpu(output: ProbeOutput | None, files: dict[str, CapturedFile]) -> NodeGpu | None:
    facts = output.facts if output is not None else None
    if not isinstance(facts, GpuFacts):
        return None
    root = parsers.smi_root(_raw_text(files.get("gpu/nvidia-smi-q.xml")))
    aggregate = parsers.aggregate_uncorrectable(root) if root is not None else {}
    gpus = [
        GpuState(
            index=gpu.index,
            name=gpu.name,
            bus_id=gpu.bus_id,
            uuid_sha256=gpu.uuid_sha256,
            memory_total_mib=gpu.memory_total_mib,
            memory_used_mib=gpu.memory_used_mib,
            mig_mode=gpu.mig_mode,
            persistence_mode=gpu.persistence_mode,
            ecc_volatile_uncorrectable=gpu.ecc_uncorrected_volatile,
            ecc_aggregate_uncorrectable=aggregate.get(gpu.bus_id or ""),
            retired_pages=gpu.retired_pages,
            remapped_rows_pending=gpu.remapped_rows_pending,
        )
        for gpu in facts.gpus
    ]
    return NodeGpu(
        driver_version=facts.driver_version,
        driver_branch=facts.driver_branch,
        cuda_ceiling=facts.cuda_ceiling,
        kernel_module_version=facts.kernel_module_version,
        kernel_module_type=facts.kernel_module_type,
        library_mismatch=facts.library_mismatch,
        gpus=gpus,
        processes=parsers.gpu_processes(root) if root is not None else [],
    )


def _host(output: ProbeOutput | None) -> HostState | None:
    facts = output.facts if output is not None else None
    if not isinstance(facts, HostFacts):
        return None
    return HostState(
        node_name=facts.node_name,
        os_release=facts.os_release,
        kernel=facts.kernel,
        nvidia_modules=facts.nvidia_modules,
    )


def _container(
    output: ProbeOutput | None, files: dict[str, CapturedFile], host_root: Path
) -> ContainerRuntime | None:
    facts = output.facts if output is not None else None
    nodes = _device_nodes(host_root)
    if not isinstance(facts, ContainerFacts):
        return ContainerRuntime(device_nodes=nodes) if nodes else None
    return ContainerRuntime(
        engine=facts.engine,
        engine_version=facts.engine_version,
        runtimes=facts.runtimes,
        default_runtime=parsers.default_runtime(_raw_text(files.get("container/info.json"))),
        toolkit_version=facts.toolkit_version,
        container_cli_version=facts.container_cli_version,
        cdi_specs=sorted(
            path.removeprefix("container/cdi")
            for path in files
            if path.startswith("container/cdi/")
        ),
        device_nodes=nodes,
    )


def _device_nodes(host_root: Path) -> list[DeviceNode]:
    """The /dev/nvidia* files under the host root with their mode and owner (never followed)."""
    folder = host_root / "dev"
    try:
        with os.scandir(folder) as entries:
            names = sorted(e.name for e in entries if e.name.startswith("nvidia"))
    except OSError:
        return []
    nodes = []
    for name in names[:_DEVICE_FILES]:
        try:
            info = os.lstat(folder / name)
        except OSError:
            continue
        nodes.append(
            DeviceNode(
                path=f"/dev/{name}",
                mode=stat.filemode(info.st_mode),
                owner=f"{info.st_uid}:{info.st_gid}",
            )
        )
    return nodes


def _communication(
    output: ProbeOutput | None, files: dict[str, CapturedFile], logs: tuple[Path, ...]
) -> Communication | None:
    facts = output.facts if output is not None else None
    if not isinstance(facts, CommunicationFacts):
        return None
    sources = [name for name in ("ibv_devinfo", "ibstat") if f"communication/{name}.txt" in files]
    devices = parsers.merge_devices(
        parsers.devices_from_ports(facts.rdma_ports),
        parsers.parse_ibstat(_raw_text(files.get("communication/ibstat.txt"))),
    )
    version, version_source = facts.nccl_version, facts.nccl_version_source
    transport = source = None
    heads = [(LOG_SOURCE.format(name=log.name), _log_head(log)) for log in logs]
    container_log = files.get("logs/container.log")
    if container_log is not None:
        heads.append((CONTAINER_LOG_SOURCE, _raw_text(container_log)[:_LOG_HEAD]))
    for where, head in heads:
        if version is None and (found := nccl_from_log(head)):
            version, version_source = found, where
        if transport is None and (used := parsers.nccl_transport_from_log(head)):
            transport, source = used, where
    if transport is None:
        transport = parsers.nccl_transport(facts.settings, devices if sources else [])
        source = SETTINGS_SOURCE if transport is not None else None
    interfaces = parsers.interfaces(_raw_text(files.get("communication/ip-address.json")))
    return Communication(
        nccl_version=version,
        nccl_version_source=version_source,
        nccl_transport=transport,
        nccl_transport_source=source,
        nccl_settings=facts.settings,
        rdma_sources=sources,
        rdma_devices=devices,
        interfaces=interfaces,
    )


def _log_head(log: Path) -> str:
    try:
        with open_input(log, "a log file") as (handle, _):
            return handle.read(_LOG_HEAD).decode("utf-8", "replace")
    except InputError:
        return ""


def _endpoint(options: CaptureOptions, api_key: str | None) -> EndpointCheck:
    assert options.endpoint is not None
    return short_request(options.endpoint, options.model, api_key, options.endpoint_timeout)


def previous_label(case: Path, label: str) -> str | None:
    """The label of the case's latest finished baseline other than `label` (the one a new
    capture is compared with), or None."""
    found = []
    for folder in Case(case).baselines():
        path = folder / BASELINE_FILE
        if folder.name != label and path.is_file() and not path.is_symlink():
            found.append((path.stat().st_mtime, folder.name))
    return max(found)[1] if found else None
