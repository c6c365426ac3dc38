"""Findings from a bundle's facts rather than its log lines: a model folder the container cannot
read, a container the kernel OOM-killed, a /dev/shm too small for tensor parallelism, a driver
whose kernel module and user-space library differ. The wording of each is data (fact_checks.yaml);
the conditions are the small functions below, one per check id.
"""

from __future__ import annotations

from collections.abc import Callable

from vllm_triage.bundle.models import BundleFacts
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.models import Evidence, Finding

_FACTS_FILE = "facts.json"
_SHM_FLOOR = 1024**3


def _ev(text: str) -> Evidence:
    return Evidence(file=_FACTS_FILE, line=0, text=text)


def _model_missing(facts: BundleFacts) -> list[Evidence]:
    files = facts.model_files
    if files is None or files.exists is not False:
        return []
    return [_ev(f"model {files.model}: host path {files.host_path} does not exist")]


def _model_unreadable(facts: BundleFacts) -> list[Evidence]:
    files = facts.model_files
    if files is None or files.readable is not False:
        return []
    evidence = [_ev(f"model {files.model} ({files.host_path}): {p}") for p in files.problems]
    if files.unreadable:
        evidence.append(_ev("unreadable: " + ", ".join(files.unreadable[:5])))
    return evidence


def _model_incomplete(facts: BundleFacts) -> list[Evidence]:
    files = facts.model_files
    if files is None or files.index_consistent is not False:
        return []
    return [
        _ev(f"model {files.model}: {p}") for p in files.problems if "shard" in p or "index" in p
    ]


def _oom_killed(facts: BundleFacts) -> list[Evidence]:
    container = facts.container
    if container is None or not container.oom_killed:
        return []
    return [
        _ev(f"container {container.name}: State.OOMKilled=true, exit code {container.exit_code}")
    ]


def _shm_small(facts: BundleFacts) -> list[Evidence]:
    launch = facts.vllm.launch if facts.vllm else None
    workers = (
        max((launch.tensor_parallel_size or 1) * (launch.pipeline_parallel_size or 1), 1)
        if launch
        else 1
    )
    if workers < 2:
        return []
    sizes = []
    if facts.container and facts.container.shm_size_bytes:
        sizes.append(("container HostConfig.ShmSize", facts.container.shm_size_bytes))
    elif facts.host and facts.host.shm_bytes:
        sizes.append(("/dev/shm", facts.host.shm_bytes))
    return [
        _ev(f"{where} = {size // 1024**2} MiB with {workers} GPU workers")
        for where, size in sizes
        if size < _SHM_FLOOR
    ]


def _library_mismatch(facts: BundleFacts) -> list[Evidence]:
    gpu = facts.gpu
    if gpu is None or not gpu.library_mismatch:
        return []
    user_space = gpu.nvml_version or gpu.driver_version or "unknown"
    return [
        _ev(
            f"kernel module {gpu.kernel_module_version or 'unknown'} vs user-space driver {user_space}"
        )
    ]


def _no_gpu_requested(facts: BundleFacts) -> list[Evidence]:
    container = facts.container
    if container is None or container.gpu_requested is not False or container.runtime == "nvidia":
        return []
    if any(k.startswith("NVIDIA_VISIBLE_DEVICES") for k in container.env):
        return []
    return [_ev(f"container {container.name}: no GPU device request, runtime {container.runtime}")]


_CHECKS: dict[str, Callable[[BundleFacts], list[Evidence]]] = {
    "VF001": _model_missing,
    "VF002": _model_unreadable,
    "VF003": _model_incomplete,
    "VF004": _oom_killed,
    "VF005": _shm_small,
    "VF006": _library_mismatch,
    "VF007": _no_gpu_requested,
}


def fact_findings(kb: KnowledgeBase, facts: BundleFacts) -> list[Finding]:
    """Every fact check that fires, as a finding with its evidence, most certain first."""
    findings = []
    for check in kb.fact_checks:
        evidence = _CHECKS[check.id](facts)
        if evidence:
            findings.append(
                Finding(
                    cause=check.cause,
                    phase=check.phase,
                    confidence=check.confidence,
                    evidence=evidence,
                    summary=check.summary,
                    next_steps=list(check.next_steps),
                    avoid=list(check.avoid),
                    driver_change_advised=False,
                    rule=f"{check.id} {check.name}",
                    role="related",
                )
            )
    return sorted(findings, key=lambda f: -f.confidence)


def known_check_ids() -> frozenset[str]:
    """The ids that have a condition here; the knowledge check refuses data without one."""
    return frozenset(_CHECKS)
