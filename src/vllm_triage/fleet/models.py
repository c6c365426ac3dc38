"""The artifacts of `fleet scan` (which GPU nodes can run an image, and in which order to change
the rest) and `fleet run` (the tool run on many hosts through Kubernetes Jobs or Ansible)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from pydantic import Field

from vllm_triage.models import Artifact, CaseArtifact

NodeStatus = Literal["ready", "forward_compat", "needs_upgrade", "unsupported", "unknown"]
"""ready: the image runs as the node stands (natively, or through minor-version compatibility);
forward_compat: only with the cuda-compat package (or after a driver upgrade); needs_upgrade: a
driver upgrade to min_driver is needed; unsupported: no driver runs the image on this GPU (its
architecture is past the image's CUDA); unknown: the node's labels or inventory do not say."""

STATUSES: tuple[NodeStatus, ...] = (
    "ready",
    "forward_compat",
    "needs_upgrade",
    "unsupported",
    "unknown",
)


class FleetNode(Artifact):
    """One GPU node's verdict for the image. Every string in it is printable (fleet/labels.py
    cleans what it reads), so output needs no pass over 10,000 nodes to make it so."""

    name: str
    status: NodeStatus
    driver: str | None = None
    min_driver: str | None = Field(
        default=None,
        description="the floor the image needs to start (the scan's min_driver), when an upgrade "
        "helps this node",
    )
    reason: str
    gpu: str | None = Field(default=None, description="nvidia.com/gpu.product, as labelled")
    gpu_count: int | None = None
    cuda_ceiling: str | None = Field(
        default=None, description="the driver's CUDA ceiling (nvidia.com/cuda.runtime-version)"
    )
    labels_age_hours: float | None = Field(
        default=None, description="age of nvidia.com/gfd.timestamp at the scan"
    )
    stale: bool = False
    gpu_pods: int | None = Field(
        default=None, description="running pods requesting nvidia.com/gpu (None: not known)"
    )


@dataclass(slots=True)
class NodeRecord:
    """A FleetNode's fields (same names, same order) in a slotted object: what a scan keeps per
    node, a tenth of the model's memory, and written by orjson as it is (fleet/output.py)."""

    name: str
    status: NodeStatus
    driver: str | None
    min_driver: str | None
    reason: str
    gpu: str | None
    gpu_count: int | None
    cuda_ceiling: str | None
    labels_age_hours: float | None
    stale: bool
    gpu_pods: int | None

    def as_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


class NodeView(Protocol):
    """What the waves and the renderings read of a node: a FleetNode or a NodeRecord."""

    @property
    def name(self) -> str: ...
    @property
    def status(self) -> NodeStatus: ...
    @property
    def driver(self) -> str | None: ...
    @property
    def min_driver(self) -> str | None: ...
    @property
    def reason(self) -> str: ...
    @property
    def gpu(self) -> str | None: ...
    @property
    def gpu_count(self) -> int | None: ...
    @property
    def stale(self) -> bool: ...
    @property
    def gpu_pods(self) -> int | None: ...


class ScanView(Protocol):
    """What the renderings read of a scan: a FleetScan, or a streamed scan (fleet/output.py)."""

    @property
    def image(self) -> str | None: ...
    @property
    def image_pinned(self) -> str | None: ...
    @property
    def cuda(self) -> str: ...
    @property
    def cuda_source(self) -> str: ...
    @property
    def min_driver(self) -> str | None: ...
    @property
    def toolkit_driver(self) -> str | None: ...
    @property
    def recommended_driver(self) -> str | None: ...
    @property
    def recommended_branch(self) -> str | None: ...
    @property
    def source(self) -> str: ...
    @property
    def nodes(self) -> Sequence[NodeView]: ...
    @property
    def waves(self) -> list[list[str]]: ...
    @property
    def wave_size(self) -> int: ...
    @property
    def counts(self) -> dict[str, int]: ...
    @property
    def notes(self) -> list[str]: ...


class FleetScan(CaseArtifact):
    """`fleet scan`: every GPU node's status for one image, and the rollout waves for the nodes a
    driver change would make ready (canary first, nodes with GPU work last)."""

    image: str | None = None
    image_pinned: str | None = Field(
        default=None, description="the image pinned to its digest, when a registry gave one"
    )
    cuda: str = Field(description="the image's CUDA")
    cuda_source: str = Field(description="where the image's CUDA was read from")
    require: str | None = Field(default=None, description="the image's NVIDIA_REQUIRE_CUDA")
    min_driver: str | None = Field(
        default=None, description="the floor the image's CUDA needs to start (each node's too)"
    )
    toolkit_driver: str | None = Field(
        default=None, description="the driver the image's toolkit update shipped with"
    )
    recommended_driver: str | None = Field(
        default=None, description="the current release of the recommended long-term branch"
    )
    recommended_branch: str | None = None
    source: str = Field(description="where the nodes came from")
    nodes: list[FleetNode]
    waves: list[list[str]]
    wave_size: int
    counts: dict[str, int] = Field(default_factory=dict, description="nodes per status")
    notes: list[str] = Field(default_factory=list)


HostState = Literal["ok", "failed", "unreachable"]


class FleetHost(Artifact):
    """One host's outcome of `fleet run`: its parsed JSON output, or why there is none."""

    host: str
    state: HostState
    exit_code: int | None = None
    go: bool | None = Field(default=None, description="preflight's verdict, when it gave one")
    result: dict[str, Any] | None = Field(
        default=None, description="the command's JSON output (preflight result, bundle manifest)"
    )
    error: str | None = None
    files: list[str] = Field(
        default_factory=list, description="files fetched into the case, relative to it"
    )


class FleetRun(CaseArtifact):
    """`fleet run`: the tool run on many hosts through an existing engine."""

    kind: Literal["preflight", "collect"]
    engine: Literal["ansible", "kubernetes"]
    arguments: list[str] = Field(default_factory=list, description="the remote command's arguments")
    hosts: list[FleetHost]
    counts: dict[str, int] = Field(default_factory=dict, description="hosts per state")
    notes: list[str] = Field(default_factory=list)
