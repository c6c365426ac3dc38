"""Findings from a bundle's facts rather than its log lines: a model folder the container cannot
read, a container the kernel OOM-killed, a /dev/shm too small for tensor parallelism, a driver
whose kernel module and user-space library differ. The wording of each is data (fact_checks.yaml);
the conditions are the small functions below, one per check id.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from vllm_triage.models import Evidence, Finding

if TYPE_CHECKING:  # annotations only: a diagnosis of logs alone never loads the bundle models
    from vllm_triage.bundle.models import BundleFacts
    from vllm_triage.knowledge import KnowledgeBase

_FACTS_FILE = "facts.json"
_SHM_FLOOR = 1024**3


def _ev(fact: str, text: str) -> Evidence:
    """Evidence that is a fact of the bundle: facts.json and the fact's dotted name, no line."""
    return Evidence(file=_FACTS_FILE, line=0, text=text, fact=fact)


def _model_missing(facts: BundleFacts) -> list[Evidence]:
    files = facts.model_files
    if files is None or files.exists is not False:
        return []
    return [
        _ev(
            "model_files.exists", f"model {files.model}: host path {files.host_path} does not exist"
        )
    ]


def _model_unreadable(facts: BundleFacts) -> list[Evidence]:
    files = facts.model_files
    if files is None or files.readable is not False:
        return []
    evidence = [
        _ev("model_files.problems", f"model {files.model} ({files.host_path}): {p}")
        for p in files.problems
    ]
    if files.unreadable:
        evidence.append(
            _ev("model_files.unreadable", "unreadable: " + ", ".join(files.unreadable[:5]))
        )
    return evidence


def _model_incomplete(facts: BundleFacts) -> list[Evidence]:
    files = facts.model_files
    if files is None or files.index_consistent is not False:
        return []
    return [
        _ev("model_files.problems", f"model {files.model}: {p}")
        for p in files.problems
        if "shard" in p or "index" in p
    ]


def _oom_killed(facts: BundleFacts) -> list[Evidence]:
    container = facts.container
    if container is None or not container.oom_killed:
        return []
    return [
        _ev(
            "container.oom_killed",
            f"container {container.name}: State.OOMKilled=true, exit code {container.exit_code}",
        )
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
    shm = _shm_size(facts)
    if shm is None or shm[2] >= _SHM_FLOOR:
        return []
    fact, where, size = shm
    return [_ev(fact, f"{where} = {size // 1024**2} MiB with {workers} GPU workers")]


def _shm_size(facts: BundleFacts) -> tuple[str, str, int] | None:
    """The /dev/shm the container had (its fact, how it is named, its size), or None when the
    bundle does not say. HostConfig.ShmSize sizes only a container's own IPC namespace: with
    --ipc=host its /dev/shm is the host's (Docker still reports its 64 MiB default), and with
    --ipc=container:<id> it is the other container's, which the bundle does not describe."""
    container = facts.container
    host = facts.host.shm_bytes if facts.host else None
    mode = container.ipc_mode if container else None
    if mode == "host":
        return ("host.shm_bytes", "host /dev/shm (--ipc=host)", host) if host else None
    if mode is not None and mode.startswith("container:"):
        return None
    if container and container.shm_size_bytes:
        return "container.shm_size_bytes", "container HostConfig.ShmSize", container.shm_size_bytes
    if host:
        return "host.shm_bytes", "/dev/shm", host
    return None


def _library_mismatch(facts: BundleFacts) -> list[Evidence]:
    gpu = facts.gpu
    if gpu is None or not gpu.library_mismatch:
        return []
    user_space = gpu.nvml_version or gpu.driver_version or "unknown"
    return [
        _ev(
            "gpu.library_mismatch",
            f"kernel module {gpu.kernel_module_version or 'unknown'} vs user-space driver "
            f"{user_space}",
        )
    ]


def _no_gpu_requested(facts: BundleFacts) -> list[Evidence]:
    container = facts.container
    if container is None or container.gpu_requested is not False or container.runtime == "nvidia":
        return []
    if any(k.startswith("NVIDIA_VISIBLE_DEVICES") for k in container.env):
        return []
    return [
        _ev(
            "container.gpu_requested",
            f"container {container.name}: no GPU device request, runtime {container.runtime}",
        )
    ]


# The registry: each fact-check id of fact_checks.yaml and its condition. `knowledge check`
# (vllm_triage.ties) fails when the data and this table name different ids.
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
    """Every fact check that fires, as a finding with its evidence, most certain first. A check
    the data names but this module lacks is passed over (`knowledge check` reports it)."""
    findings = []
    for check in kb.fact_checks:
        condition = _CHECKS.get(check.id)
        evidence = condition(facts) if condition is not None else []
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
    """The ids that have a condition here; `knowledge check` holds the data to exactly these."""
    return frozenset(_CHECKS)
