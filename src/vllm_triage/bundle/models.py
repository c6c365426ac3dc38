"""The bundle's artifacts: the manifest (what was collected, how, redacted how) and the facts
each probe parsed from its raw outputs. JSON on disk with a schema_version, read by `diagnose`.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vllm_triage.launch import LaunchArgs
from vllm_triage.models import SCHEMA_VERSION, Artifact

ProbeState = Literal["ok", "not_available", "failed", "timed_out"]


class ProbeStatus(Artifact):
    """How one probe went: its state, why (when not ok), how long it took, what it wrote."""

    name: str
    status: ProbeState
    reason: str | None = None
    duration_s: float
    files: list[str] = Field(default_factory=list)
    notes: list[str] = Field(default_factory=list)


class BundleFile(Artifact):
    """One file of the bundle with its checksum and the probe that made it."""

    path: str
    sha256: str
    size: int
    probe: str
    truncated: bool = Field(
        default=False, description="part of the source is not in the file (see note)"
    )
    note: str | None = Field(default=None, description="what was left out of the file, and why")


class Manifest(Artifact):
    """The index of a bundle: provenance, files with checksums, probe states, redaction counts."""

    schema_version: int = SCHEMA_VERSION
    tool_version: str
    created_at: str
    host: str
    options: dict[str, Any]
    files: list[BundleFile]
    probes: list[ProbeStatus]
    redaction: dict[str, int] = Field(description="replacements per redaction rule, never values")


class GpuDevice(Artifact):
    index: int
    name: str
    uuid_sha256: str | None = Field(default=None, description="first 12 hex of sha256(uuid)")
    bus_id: str | None = None
    architecture: str | None = None
    compute_capability: str | None = None
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    mig_mode: str | None = None
    persistence_mode: str | None = None
    ecc_uncorrected_volatile: int | None = None
    retired_pages: int | None = None
    retired_pages_pending: bool | None = None
    remapped_rows_pending: bool | None = None
    processes: int = 0


class GpuFacts(Artifact):
    """The host's driver and GPUs, from nvidia-smi -q -x (and NVML where present)."""

    driver_version: str | None = None
    driver_branch: str | None = None
    cuda_ceiling: str | None = Field(default=None, description="CUDA version the driver supports")
    kernel_module_version: str | None = None
    kernel_module_type: str | None = Field(default=None, description="open or proprietary")
    library_mismatch: bool | None = Field(
        default=None, description="kernel module and user-space driver versions differ"
    )
    nvml_version: str | None = None
    gpus: list[GpuDevice] = Field(default_factory=list)
    nvlink_in_topology: bool | None = None


class HostFacts(Artifact):
    node_name: str | None = Field(
        default=None, description="None: not readable (older bundles: unknown)"
    )
    os_release: str | None = None
    kernel: str | None = Field(default=None, description="None: not readable")
    uptime_s: float | None = None
    shm_bytes: int | None = None
    cgroup_memory_max: str | None = None
    cgroup_cpu_max: str | None = None
    nvidia_modules: list[str] = Field(default_factory=list)


class Mount(Artifact):
    source: str
    destination: str
    read_write: bool
    type: str | None = None


class ContainerFacts(Artifact):
    """The failed container as the engine describes it, and the image config behind it."""

    engine: str
    engine_version: str | None = None
    id: str | None = None
    name: str | None = None
    image: str | None = None
    image_id: str | None = None
    command: list[str] = Field(default_factory=list)
    env: dict[str, str] = Field(default_factory=dict)
    env_omitted: list[str] = Field(default_factory=list)
    user: str | None = None
    mounts: list[Mount] = Field(default_factory=list)
    status: str | None = None
    exit_code: int | None = None
    oom_killed: bool | None = None
    restart_count: int | None = None
    started_at: str | None = None
    finished_at: str | None = None
    runtime: str | None = None
    gpu_requested: bool | None = None
    shm_size_bytes: int | None = None
    ipc_mode: str | None = Field(
        default=None,
        description="HostConfig.IpcMode: host (the host's /dev/shm, ShmSize does not apply), "
        "container:<id> (that container's), private, shareable",
    )
    image_cuda: str | None = None
    image_require_cuda: str | None = None
    image_created: str | None = None
    image_labels: dict[str, str] = Field(default_factory=dict)
    toolkit_version: str | None = None
    container_cli_version: str | None = None
    runtimes: list[str] = Field(default_factory=list)


class PodContainer(Artifact):
    name: str
    image: str | None = None
    ready: bool | None = None
    restart_count: int = 0
    state: str | None = None
    reason: str | None = None
    exit_code: int | None = None
    last_reason: str | None = None
    last_exit_code: int | None = None
    gpu_limit: str | None = None


class PodEvent(Artifact):
    type: str | None = None
    reason: str | None = None
    message: str | None = None
    count: int | None = None


class KubernetesFacts(Artifact):
    pod: str
    namespace: str
    node: str | None = None
    phase: str | None = None
    containers: list[PodContainer] = Field(default_factory=list)
    events: list[PodEvent] = Field(default_factory=list)
    node_gpu_labels: dict[str, str] = Field(default_factory=dict)
    gfd_driver_version: str | None = None
    gfd_cuda_ceiling: str | None = Field(
        default=None, description="nvidia.com/cuda.runtime-version.*: the driver's CUDA ceiling"
    )
    gpu_product: str | None = None
    gpu_count: int | None = None


class ImageProbeFacts(Artifact):
    """What the image itself reports, from a throwaway container (only with --probe-image)."""

    torch_version: str | None = None
    torch_cuda: str | None = None
    vllm_version: str | None = None
    vllm_commit: str | None = None
    nccl_package: str | None = None


class RdmaPort(Artifact):
    device: str
    port: int
    state: str | None = None
    link_layer: str | None = None


class CommunicationFacts(Artifact):
    nccl_version: str | None = None
    nccl_version_source: str | None = None
    settings: dict[str, str] = Field(default_factory=dict)
    rdma_ports: list[RdmaPort] = Field(default_factory=list)
    interfaces: list[str] = Field(default_factory=list)


class ModelFilesFacts(Artifact):
    """The model path of the launch: where it is, whether the container's user can read it."""

    model: str
    kind: Literal["local", "hub_id"]
    container_path: str | None = None
    host_path: str | None = None
    mount_read_write: bool | None = None
    checked_as: str | None = Field(default=None, description="uid:gid the checks used")
    exists: bool | None = None
    readable: bool | None = None
    unreadable: list[str] = Field(default_factory=list)
    config_json: bool | None = None
    index_consistent: bool | None = None
    missing_shards: list[str] = Field(default_factory=list)
    shard_count: int | None = None
    total_bytes: int | None = None
    problems: list[str] = Field(default_factory=list)


class VllmFacts(Artifact):
    version: str | None = None
    origin: str | None = Field(default=None, description="image-bundled, pip, source or unknown")
    commit: str | None = None
    launch_source: str | None = None
    launch: LaunchArgs | None = None


class BundleFacts(Artifact):
    """Everything the probes parsed, one optional section per probe."""

    schema_version: int = SCHEMA_VERSION
    gpu: GpuFacts | None = None
    host: HostFacts | None = None
    container: ContainerFacts | None = None
    kubernetes: KubernetesFacts | None = None
    image: ImageProbeFacts | None = None
    communication: CommunicationFacts | None = None
    model_files: ModelFilesFacts | None = None
    vllm: VllmFacts | None = None
