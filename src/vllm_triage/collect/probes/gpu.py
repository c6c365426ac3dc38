"""GPU and driver: `nvidia-smi -q -x` (kept raw) parsed into a summary, the kernel module's version
from /proc (a mismatch is the "Driver/library version mismatch" picture after a driver change
without a reboot), NVML where nvidia-ml-py is installed, and `nvidia-smi topo -m`.
"""

from __future__ import annotations

import hashlib
import re
import xml.etree.ElementTree as ET
from typing import Any

from vllm_triage.bundle.models import GpuDevice, GpuFacts
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import (
    NotAvailable,
    Probe,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
)
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.versions import DriverVersion, VersionError

_KERNEL_MODULE = re.compile(
    r"NVRM version: NVIDIA (?P<kind>.*?)Kernel Module(?: for [a-z0-9_]+)?\s+(?P<version>[0-9]+\.[0-9]+(?:\.[0-9]+)?)"
)
_MISMATCH = re.compile(r"Driver/library version mismatch")
_NVML_LIBRARY = re.compile(r"NVML library version:\s*([0-9][0-9.]*)")
_MIB = re.compile(r"([0-9]+)\s*MiB")
_NVLINK_CELL = re.compile(r"(?<![A-Za-z])NV[0-9]+\b")


def _text(element: ET.Element | None, path: str) -> str | None:
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else value


def _int(value: str | None) -> int | None:
    if value is None:
        return None
    match = re.match(r"-?[0-9]+", value)
    return int(match.group(0)) if match else None


def _mib(value: str | None) -> int | None:
    match = _MIB.search(value or "")
    return int(match.group(1)) if match else None


def _pending(value: str | None) -> bool | None:
    return None if value is None else value.strip().lower() == "yes"


def _uncorrected(gpu: ET.Element) -> int | None:
    """Volatile uncorrectable ECC errors: `*uncorrectable*` counters (DTD v11+), double_bit (older)."""
    volatile = gpu.find("ecc_errors/volatile")
    if volatile is None:
        return None
    counters = [c.text for c in volatile if "uncorrectable" in c.tag]
    counters.append(_text(volatile, "double_bit/total"))
    counts = [n for n in (_int(c.strip()) for c in counters if c) if n is not None]
    return sum(counts) if counts else None


def _retired(gpu: ET.Element) -> int | None:
    counts = [
        _int(_text(gpu, f"retired_pages/{kind}/retired_count"))
        for kind in ("multiple_single_bit_retirement", "double_bit_retirement")
    ]
    known = [c for c in counts if c is not None]
    return sum(known) if known else None


def _uuid_digest(uuid: str | None) -> str | None:
    return hashlib.sha256(uuid.encode()).hexdigest()[:12] if uuid else None


def parse_nvidia_smi_xml(text: str, kb: KnowledgeBase) -> GpuFacts:
    """The summary of `nvidia-smi -q -x`: driver, its CUDA ceiling, each GPU (UUIDs hashed)."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError as exc:
        raise ProbeFailed(reasons.XML_UNREADABLE.format(error=exc)) from None
    if root.tag != "nvidia_smi_log":
        raise ProbeFailed(reasons.XML_NOT_SMI.format(tag=root.tag))
    driver = _text(root, "driver_version") or _text(root, "kmd_version")
    gpus = []
    for index, gpu in enumerate(root.findall("gpu")):
        name = _text(gpu, "product_name") or "unknown"
        known = kb.gpu(name)
        processes = gpu.find("processes")
        gpus.append(
            GpuDevice(
                index=index,
                name=name,
                uuid_sha256=_uuid_digest(_text(gpu, "uuid")),
                bus_id=gpu.get("id") or _text(gpu, "pci/pci_bus_id"),
                architecture=_text(gpu, "product_architecture"),
                compute_capability=known.compute_capability if known else None,
                memory_total_mib=_mib(_text(gpu, "fb_memory_usage/total")),
                memory_used_mib=_mib(_text(gpu, "fb_memory_usage/used")),
                mig_mode=_text(gpu, "mig_mode/current_mig"),
                persistence_mode=_text(gpu, "persistence_mode"),
                ecc_uncorrected_volatile=_uncorrected(gpu),
                retired_pages=_retired(gpu),
                retired_pages_pending=_pending(_text(gpu, "retired_pages/pending_retirement")),
                remapped_rows_pending=_pending(_text(gpu, "remapped_rows/remapped_row_pending")),
                processes=len(processes.findall("process_info")) if processes is not None else 0,
            )
        )
    return GpuFacts(
        driver_version=driver,
        driver_branch=_branch(driver),
        cuda_ceiling=_text(root, "cuda_version") or _text(root, "cuda_umd_version"),
        gpus=gpus,
    )


def _branch(driver: str | None) -> str | None:
    if driver is None:
        return None
    try:
        return DriverVersion.parse(driver).branch
    except VersionError:
        return None


def parse_kernel_module(text: str) -> tuple[str, str] | None:
    """(version, "open"|"proprietary") from /proc/driver/nvidia/version, or None."""
    match = _KERNEL_MODULE.search(text)
    if not match:
        return None
    kind = "open" if "Open" in match.group("kind") else "proprietary"
    return match.group("version"), kind


def topology_has_nvlink(text: str) -> bool:
    """Whether any GPU pair in `nvidia-smi topo -m` is joined by NVLink (an NV# cell)."""
    matrix = text.split("Legend:", 1)[0]
    return bool(_NVLINK_CELL.search(matrix))


def _nvml_summary() -> dict[str, Any] | None:
    """Driver and CUDA versions through NVML, when nvidia-ml-py and libnvidia-ml are present."""
    try:
        import pynvml  # type: ignore[import-not-found]
    except ImportError:
        return None
    try:
        pynvml.nvmlInit()
    except Exception as exc:  # NVMLError subclasses vary by version
        return {"error": str(exc)}
    try:
        cuda = pynvml.nvmlSystemGetCudaDriverVersion_v2()
        return {
            "driver_version": _decoded(pynvml.nvmlSystemGetDriverVersion()),
            "nvml_version": _decoded(pynvml.nvmlSystemGetNVMLVersion()),
            "cuda_driver_version": f"{cuda // 1000}.{cuda % 1000 // 10}",
            "device_count": pynvml.nvmlDeviceGetCount(),
        }
    except Exception as exc:
        return {"error": str(exc)}
    finally:
        pynvml.nvmlShutdown()


def _decoded(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


def collect(ctx: ProbeContext) -> ProbeOutput:
    out = ProbeOutput()
    module_text = ctx.read_host_text("/proc/driver/nvidia/version")
    module = parse_kernel_module(module_text) if module_text else None
    if module_text:
        out.files.append(CapturedFile("gpu/proc-driver-nvidia-version.txt", text=module_text))

    result = ctx.run("nvidia_smi_xml")
    if result.missing and module is None:
        raise NotAvailable(reasons.NO_NVIDIA_SMI)
    output = result.text()
    if output:
        out.files.append(ctx.output_file("gpu/nvidia-smi-q.xml", result))
    if result.ok:
        facts = parse_nvidia_smi_xml(output, ctx.kb)
    elif _MISMATCH.search(output + result.stderr):
        facts = GpuFacts(library_mismatch=True)
        library = _NVML_LIBRARY.search(output + result.stderr)
        facts.nvml_version = library.group(1) if library else None
        out.notes.append("nvidia-smi: Failed to initialize NVML: Driver/library version mismatch")
    elif module is not None:
        facts = GpuFacts()
        out.notes.append(result.failure())
    else:
        raise ProbeFailed.of(result)

    if module is not None:
        facts.kernel_module_version, facts.kernel_module_type = module
        if facts.driver_version is None:
            facts.driver_version = module[0]
            facts.driver_branch = _branch(module[0])
        user_space = facts.nvml_version or facts.driver_version
        if facts.library_mismatch is None and user_space is not None:
            facts.library_mismatch = user_space != module[0]

    nvml = _nvml_summary()
    if nvml is not None:
        out.files.append(CapturedFile("gpu/nvml.json", document=nvml))
        if nvml.get("nvml_version"):
            facts.nvml_version = str(nvml["nvml_version"])

    topology = ctx.run("nvidia_smi_topo")
    if topology.ok:
        out.files.append(ctx.output_file("gpu/topo-m.txt", topology))
        facts.nvlink_in_topology = topology_has_nvlink(topology.text())
    elif not topology.missing:
        out.notes.append(topology.failure())
    out.facts = facts
    return out


PROBE = Probe("gpu", collect, "driver, GPUs, kernel module, NVML, topology")
