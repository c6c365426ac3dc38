"""Fact checks over a bundle's facts: each fires on its picture and stays quiet otherwise, and
the analyzer puts them beside (or, without a log cause, in place of) the log's findings."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from vllm_triage.bundle.models import (
    BundleFacts,
    ContainerFacts,
    GpuFacts,
    HostFacts,
    ModelFilesFacts,
    VllmFacts,
)
from vllm_triage.collect.probes.container import parse_container_inspect
from vllm_triage.diagnose.analyzer import analyze
from vllm_triage.diagnose.facts import fact_findings
from vllm_triage.launch import LaunchArgs
from vllm_triage.models import Finding

TP8 = VllmFacts(launch=LaunchArgs(model="m", tensor_parallel_size=8))
HOST = HostFacts(node_name="n", kernel="6.8")

CASES = {
    "VF001": (
        BundleFacts(model_files=ModelFilesFacts(model="/m", kind="local", exists=False)),
        BundleFacts(model_files=ModelFilesFacts(model="/m", kind="local", exists=True)),
    ),
    "VF002": (
        BundleFacts(model_files=ModelFilesFacts(model="/m", kind="local", exists=True,
                                                readable=False, unreadable=["config.json"])),
        BundleFacts(model_files=ModelFilesFacts(model="/m", kind="local", exists=True, readable=True)),
    ),
    "VF003": (
        BundleFacts(model_files=ModelFilesFacts(model="/m", kind="local", index_consistent=False,
                                                problems=["2 shard(s) listed in the index are missing"])),
        BundleFacts(model_files=ModelFilesFacts(model="/m", kind="local", index_consistent=True)),
    ),
    "VF004": (
        BundleFacts(container=ContainerFacts(engine="docker", name="v", oom_killed=True, exit_code=137)),
        BundleFacts(container=ContainerFacts(engine="docker", name="v", oom_killed=False, exit_code=1)),
    ),
    "VF005": (
        BundleFacts(container=ContainerFacts(engine="docker", shm_size_bytes=64 * 1024**2), vllm=TP8),
        BundleFacts(container=ContainerFacts(engine="docker", shm_size_bytes=64 * 1024**2),
                    vllm=VllmFacts(launch=LaunchArgs(model="m"))),
    ),
    "VF006": (
        BundleFacts(gpu=GpuFacts(library_mismatch=True, kernel_module_version="580.173.02",
                                 nvml_version="580.178")),
        BundleFacts(gpu=GpuFacts(library_mismatch=False, driver_version="580.159.04")),
    ),
    "VF007": (
        BundleFacts(container=ContainerFacts(engine="docker", gpu_requested=False, runtime="runc")),
        BundleFacts(container=ContainerFacts(engine="docker", gpu_requested=False, runtime="runc",
                                             env={"NVIDIA_VISIBLE_DEVICES": "all"})),
    ),
}  # fmt: skip


@pytest.mark.parametrize("check_id", sorted(CASES))
def test_check_fires_on_its_picture_only(check_id: str, kb) -> None:
    positive, negative = CASES[check_id]
    fired = {f.rule.split()[0] for f in fact_findings(kb, positive) if f.rule}
    assert check_id in fired
    assert check_id not in {f.rule.split()[0] for f in fact_findings(kb, negative) if f.rule}
    finding = next(f for f in fact_findings(kb, positive) if f.rule and f.rule.startswith(check_id))
    assert finding.evidence and all(e.file == "facts.json" for e in finding.evidence)
    assert not finding.driver_change_advised


def test_host_shm_counts_when_the_container_does_not_say(kb) -> None:
    facts = BundleFacts(host=HOST.model_copy(update={"shm_bytes": 64 * 1024**2}), vllm=TP8)
    assert [f.rule for f in fact_findings(kb, facts)] == ["VF005 shm-too-small"]


def test_without_a_log_cause_the_fact_is_primary(kb) -> None:
    facts = CASES["VF004"][0]
    diagnosis = analyze(kb, [], None, None, fact_findings(kb, facts))
    assert diagnosis.primary.cause == "host_memory" and diagnosis.primary.role == "root"


def test_a_fact_of_the_same_cause_joins_the_log_root(kb, diagnose_text) -> None:
    import io

    from vllm_triage.diagnose.analyzer import analyze as run
    from vllm_triage.diagnose.scan import scan_log

    text = "PermissionError: [Errno 13] Permission denied: '/models/llama/config.json'\n"
    scan = scan_log(io.BytesIO(text.encode()), "case.log", kb)
    facts = fact_findings(kb, CASES["VF002"][0])
    diagnosis = run(kb, [scan], None, None, facts)
    assert diagnosis.primary.cause == "model_path_or_access"
    files = {e.file for e in diagnosis.primary.evidence}
    assert files == {"case.log", "facts.json"}


COLLECT = Path(__file__).parent / "data" / "collect"
GIB = 1024**3


def _inspected(name: str, **changes: str) -> ContainerFacts:
    """A real `docker inspect` document (HostConfig changed as given), parsed as collect does."""
    (document,) = json.loads((COLLECT / name).read_text(encoding="utf-8"))
    document["HostConfig"].update(changes)
    return parse_container_inspect(document, "docker")


def _shm_findings(kb, container: ContainerFacts, host_shm: int | None) -> list[Finding]:
    host = HOST.model_copy(update={"shm_bytes": host_shm})
    facts = BundleFacts(container=container, host=host, vllm=TP8)
    return [f for f in fact_findings(kb, facts) if f.cause == "shm_insufficient"]


def test_ipc_host_uses_the_hosts_dev_shm_not_dockers_shm_size(kb) -> None:
    """`docker run --ipc=host` (the Kimi K3 container): Docker still reports its 64 MiB ShmSize,
    which does not apply; the host's /dev/shm does, when the bundle has it."""
    container = _inspected("scenarios/kimi-k3-docker-inspect.json")
    assert (container.ipc_mode, container.shm_size_bytes) == ("host", 64 * 1024**2)
    assert _shm_findings(kb, container, None) == []
    assert _shm_findings(kb, container, 256 * GIB) == []
    (small,) = _shm_findings(kb, container, 64 * 1024**2)
    (evidence,) = small.evidence
    assert (evidence.fact, evidence.where) == ("host.shm_bytes", "facts.json: host.shm_bytes")
    assert "--ipc=host" in evidence.text


def test_a_private_ipc_namespace_keeps_its_shm_size_and_a_shared_one_is_unknown(kb) -> None:
    rhel = "real/docker-inspect-container-running-rhel-docker.json"
    private = _inspected(rhel)
    assert (private.ipc_mode, private.shm_size_bytes) == (None, 64 * 1024**2)  # "IpcMode": ""
    (small,) = _shm_findings(kb, private, 256 * GIB)
    assert small.evidence[0].where == "facts.json: container.shm_size_bytes"
    shared = _inspected(rhel, IpcMode="container:7d3c5e0b9a1f")
    assert _shm_findings(kb, shared, None) == []
    assert _shm_findings(kb, shared, 64 * 1024**2) == [], "the other container's size applies"
