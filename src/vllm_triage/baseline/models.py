"""The artifacts of `baseline`: one node's state before (or after) a change, and the comparison of
two such states. JSON on disk with the case's envelope (schema_version, tool_version, created_at,
made_from); machine fields in English, the sentences people read are rendered (and translated)
from the check ids.
"""

from __future__ import annotations

from typing import Literal

from pydantic import AliasChoices, Field

from vllm_triage.bundle.models import BundleFile, ProbeStatus
from vllm_triage.models import Artifact, CaseArtifact

RAW_FOLDER = "raw"


class GpuState(Artifact):
    """One GPU as nvidia-smi -q -x describes it: what a driver change must leave as it was."""

    index: int
    name: str
    bus_id: str | None = None
    uuid_sha256: str | None = Field(default=None, description="first 12 hex of sha256(uuid)")
    memory_total_mib: int | None = None
    memory_used_mib: int | None = None
    mig_mode: str | None = None
    persistence_mode: str | None = None
    ecc_volatile_uncorrectable: int | None = Field(
        default=None, description="since the driver loaded (resets on reboot)"
    )
    ecc_aggregate_uncorrectable: int | None = Field(
        default=None, description="over the GPU's life (persists across reboots)"
    )
    retired_pages: int | None = None
    remapped_rows_pending: bool | None = None


class GpuProcess(Artifact):
    """A process holding a GPU when the baseline was taken (a job the change will disturb)."""

    bus_id: str | None = None
    pid: int | None = None
    type: str | None = None
    name: str = Field(description="the process name as nvidia-smi shows it, redacted")
    used_memory_mib: int | None = None


class NodeGpu(Artifact):
    """The driver and the GPUs: what the change is meant to move (the driver) and what it is not."""

    driver_version: str | None = None
    driver_branch: str | None = None
    cuda_ceiling: str | None = None
    kernel_module_version: str | None = None
    kernel_module_type: str | None = None
    library_mismatch: bool | None = Field(
        default=None, description="kernel module and user-space driver differ (reboot pending)"
    )
    gpus: list[GpuState] = Field(default_factory=list)
    processes: list[GpuProcess] = Field(default_factory=list)


class HostState(Artifact):
    node_name: str | None = None
    os_release: str | None = None
    kernel: str | None = None
    nvidia_modules: list[str] = Field(default_factory=list)


class DeviceNode(Artifact):
    """A device file GPU containers need (/dev/nvidia*), with its permissions."""

    path: str
    mode: str = Field(description="e.g. crw-rw-rw-")
    owner: str = Field(description="uid:gid")


class ContainerRuntime(Artifact):
    """The container engine, the NVIDIA Container Toolkit, and the permissions GPU containers use."""

    engine: str | None = None
    engine_version: str | None = None
    runtimes: list[str] = Field(default_factory=list)
    default_runtime: str | None = None
    toolkit_version: str | None = None
    container_cli_version: str | None = None
    cdi_specs: list[str] = Field(default_factory=list, description="CDI spec files found")
    device_nodes: list[DeviceNode] = Field(default_factory=list)


class RdmaPortState(Artifact):
    port: int
    state: str | None = None
    physical_state: str | None = None
    link_layer: str | None = None
    rate: str | None = None


class RdmaDevice(Artifact):
    """One RDMA device (HCA) and its ports, as ibv_devinfo or ibstat lists it."""

    name: str
    source: str = Field(description="ibv_devinfo or ibstat")
    ports: list[RdmaPortState] = Field(default_factory=list)


class NetworkInterface(Artifact):
    name: str
    state: str | None = None
    mtu: int | None = None


class Communication(Artifact):
    """NCCL and the fabric under it: what a partial driver change can make look broken."""

    nccl_version: str | None = None
    nccl_version_source: str | None = None
    nccl_transport: str | None = Field(
        default=None, description="socket, infiniband, roce, or None when nothing says"
    )
    nccl_transport_source: str | None = Field(
        default=None, description="an NCCL_DEBUG=INFO log, or the settings and the RDMA ports"
    )
    nccl_settings: dict[str, str] = Field(default_factory=dict)
    rdma_sources: list[str] = Field(
        default_factory=list, description="the tools that answered (ibv_devinfo, ibstat)"
    )
    rdma_devices: list[RdmaDevice] = Field(default_factory=list)
    interfaces: list[NetworkInterface] = Field(default_factory=list)


class EndpointCheck(Artifact):
    """One short request to an existing model: did it answer, how fast, what."""

    url: str = Field(description="the server, without credentials")
    model: str | None = None
    ok: bool
    status_code: int | None = None
    seconds: float | None = Field(default=None, description="the chat request, end to end")
    answer: str | None = Field(default=None, description="the answer's text, capped, redacted")
    finish_reason: str | None = None
    completion_tokens: int | None = None
    error: str | None = None


class Baseline(CaseArtifact):
    """A node's state at one moment (before or after a change), from the collect probes."""

    label: str
    node: str | None = None
    gpu: NodeGpu | None = None
    host: HostState | None = None
    container: ContainerRuntime | None = None
    communication: Communication | None = None
    endpoint: EndpointCheck | None = None
    probes: list[ProbeStatus] = Field(default_factory=list)
    files: list[BundleFile] = Field(
        default_factory=list, description="the redacted raw outputs, under raw/"
    )
    redaction: dict[str, int] = Field(
        default_factory=dict, description="replacements per redaction rule, never values"
    )


ItemKind = Literal["expected", "regression", "changed", "same", "not_compared"]
"""expected: the change meant it (the driver moved to the target); regression: something the
change must not disturb did change; changed: a difference worth a look that gates nothing;
same: checked, equal; not_compared: one of the two has no value for it."""

Verdict = Literal["regression", "no_regression"]


class ComparisonItem(Artifact):
    check: str = Field(description="what was compared: driver, kernel, rdma_device, ...")
    kind: ItemKind
    subject: str | None = Field(default=None, description="the device, GPU or interface")
    before: str | None = None
    after: str | None = None
    summary: str = Field(description="one sentence, English (rendered in the reader's language)")


class BaselineRef(Artifact):
    """Which baseline a side of the comparison is."""

    label: str
    path: str
    created_at: str | None = None
    node: str | None = None
    driver: str | None = None


class BaselineComparison(CaseArtifact):
    """Two baselines compared: the expected change apart from the regressions."""

    before: BaselineRef
    after: BaselineRef
    expect_driver: str | None = None
    driver_expectation: Literal["flag", "plan"] | None = Field(
        default=None,
        description="what the driver was judged against: --expect-driver, the case's plan "
        "(its minimum and recommended target), or nothing (then only a lower driver regresses)",
    )
    min_driver: str | None = Field(
        default=None,
        description="the plan's floor for the image: below it the driver is a regression",
        validation_alias=AliasChoices("min_driver", "driver_minimum"),
    )
    toolkit_driver: str | None = Field(
        default=None, description="the plan's toolkit driver for the image (reported, not judged)"
    )
    recommended_driver: str | None = Field(
        default=None,
        description="the plan's recommended target: below it, meeting the floor is expected",
        validation_alias=AliasChoices("recommended_driver", "driver_recommended"),
    )
    thresholds: dict[str, float] = Field(default_factory=dict)
    items: list[ComparisonItem] = Field(default_factory=list)
    verdict: Verdict
    regressions: int
    expected: int
    changed: int
