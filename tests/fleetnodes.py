"""Recorded-shape Kubernetes NodeLists for the fleet tests and bench/bench_fleet.py.

Each node is built the way `kubectl get nodes -o json` prints it (metadata with labels,
annotations, uid and resourceVersion; spec with podCIDRs, providerID and the GPU taint; status
with addresses, capacity/allocatable with nvidia.com/gpu, conditions, daemonEndpoints, images and
nodeInfo), and its labels start from one of the real GPU Feature Discovery label sets in
tests/data/fleet/ (current and deprecated names, deprecated only, a hosted cluster's), with the
driver, CUDA ceiling, product, count and timestamp labels set for the node. Every node's expected
status for a CUDA 13.0.2 image (the Kimi K3 image's config) comes with it, from the rules NVIDIA
publishes, stated here independently of the tool:

- r580 / r590 support CUDA 13.0 natively: ready.
- r570 is a supported base branch of cuda-compat-13-0: forward_compat on a data-center GPU,
  needs_upgrade on a GeForce one (forward compatibility fails there with error 804).
- r575 is a New Feature Branch, not a cuda-compat-13-0 base: needs_upgrade.
- The floor for CUDA 13.0.2 is r580 (CUDA 13.x minor-version compatibility: NVIDIA's Table 2
  lists >= 580); its toolkit (CUDA 13.0 Update 2) shipped with 580.95.05.
- A node with GPUs but no GFD labels: unknown; a node without GPUs is not scanned.
"""

from __future__ import annotations

import json
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DATA = Path(__file__).parent / "data" / "fleet"
RKE2 = DATA / "node-labels-rke2-a30-535.274.02.gpu-worker-02.json"
AWS_DEPRECATED = DATA / "node-labels-aws-g4dn-t4-545.23.08.nvidia-only.json"
LKE = DATA / "node-labels-lke-rtx4000ada-580.95.05.json"

NOW = 1_796_000_000  # 2026-11-30, the scan's "now" in the tests
STALE_SECONDS = 400 * 86_400
MIN_DRIVER_13_0_2 = "580"
TOOLKIT_DRIVER_13_0_2 = "580.95.05"

DRIVERS = {
    570: ["570.133.20", "570.172.08", "570.195.03"],
    575: ["575.57.08", "575.64.03"],
    580: ["580.65.06", "580.95.05", "580.105.08"],
    590: ["590.44.01", "590.48.01"],
}
CEILING = {570: "12.8", 575: "12.9", 580: "13.0", 590: "13.1"}
# (product label as GFD writes it, data-center GPU)
PRODUCTS = [
    ("NVIDIA-H100-80GB-HBM3", True),
    ("NVIDIA-H100-80GB-HBM3-SHARED", True),
    ("NVIDIA-A100-SXM4-80GB-MIG-1g.10gb", True),
    ("NVIDIA-B200", True),
    ("NVIDIA-H200", True),
    ("NVIDIA-L40S-SHARED", True),
    ("Tesla-T4", True),
    ("NVIDIA-A30", True),
    ("NVIDIA-GeForce-RTX-4090", False),
]
_DRIVER_NAMES = [
    "nvidia.com/cuda.driver-version.full",
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
    "nvidia.com/cuda.runtime-version.full",
    "nvidia.com/cuda.runtime-version.major",
    "nvidia.com/cuda.runtime-version.minor",
]
_DEPRECATED_NAMES = [
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
    "nvidia.com/cuda.runtime.major",
    "nvidia.com/cuda.runtime.minor",
]


# A healthy node's status.conditions, as the kubelet (and flannel) report them.
_CONDITIONS = (
    ("NetworkUnavailable", "False", "FlannelIsUp", "Flannel is running on this node"),
    ("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    ("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    ("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
    ("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
)  # fmt: skip


def _load(path: Path) -> dict[str, str]:
    return json.loads(path.read_text())


def label_styles() -> dict[str, dict[str, str]]:
    """The real label sets, each as a template: the driver/CUDA names it uses are kept."""
    rke2 = _load(RKE2)
    current_only = {k: v for k, v in rke2.items() if k not in _DEPRECATED_NAMES}
    aws = {
        "beta.kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "kubernetes.io/os": "linux",
        "node.kubernetes.io/instance-type": "g4dn.4xlarge",
        **_load(AWS_DEPRECATED),
    }
    return {"both": rke2, "current": current_only, "deprecated": aws, "lke": _load(LKE)}


def expected_status(branch: int | None, datacenter: bool) -> tuple[str, str | None]:
    """The status and minimum driver of a CUDA 13.0.2 image (see the module's docstring)."""
    if branch is None:
        return "unknown", None
    if branch in (580, 590):
        return "ready", None
    if branch == 570 and datacenter:
        return "forward_compat", MIN_DRIVER_13_0_2
    return "needs_upgrade", MIN_DRIVER_13_0_2


@dataclass
class Fleet:
    """A NodeList document and what each GPU node must be classified as."""

    document: dict[str, Any]
    expected: dict[str, tuple[str, str | None]] = field(default_factory=dict)
    stale: set[str] = field(default_factory=set)
    cpu_nodes: int = 0

    def write(self, path: Path) -> Path:
        path.write_text(json.dumps(self.document, indent=4))  # kubectl indents by 4
        return path


def _labels(
    style: dict[str, str], name: str, driver: str | None, product: str, count: int, stamp: int
) -> dict[str, str]:
    labels = dict(style)
    labels["kubernetes.io/hostname"] = name
    labels["nvidia.com/gpu.product"] = product
    labels["nvidia.com/gpu.count"] = str(count)
    labels["nvidia.com/gfd.timestamp"] = str(stamp)
    if driver is None:
        return {k: v for k, v in labels.items() if not k.startswith("nvidia.com/")}
    major, minor, *rest = driver.split(".")
    revision = rest[0] if rest else ""
    ceiling = CEILING[int(major)]
    cuda_major, cuda_minor = ceiling.split(".")
    values = {
        "nvidia.com/cuda.driver-version.full": driver,
        "nvidia.com/cuda.driver-version.major": major,
        "nvidia.com/cuda.driver-version.minor": minor,
        "nvidia.com/cuda.driver-version.revision": revision,
        "nvidia.com/cuda.runtime-version.full": ceiling,
        "nvidia.com/cuda.runtime-version.major": cuda_major,
        "nvidia.com/cuda.runtime-version.minor": cuda_minor,
        "nvidia.com/cuda.driver.major": major,
        "nvidia.com/cuda.driver.minor": minor,
        "nvidia.com/cuda.driver.rev": revision,
        "nvidia.com/cuda.runtime.major": cuda_major,
        "nvidia.com/cuda.runtime.minor": cuda_minor,
    }
    for key, value in values.items():
        if key in style:  # the style decides which names are there
            labels[key] = value
    return labels


def node_object(
    name: str, labels: dict[str, str], gpus: int, index: int, rng: random.Random
) -> dict[str, Any]:
    """One item of `kubectl get nodes -o json`."""
    octet_b, octet_c = (index // 250) % 250, index % 250
    created = (
        f"2026-0{1 + index % 9}-{10 + index % 18:02d}T0{index % 10}:1{index % 6}:3{index % 10}Z"
    )
    capacity = {
        "cpu": "96",
        "ephemeral-storage": "3748905984Ki",
        "hugepages-1Gi": "0",
        "hugepages-2Mi": "0",
        "memory": "2113420580Ki",
        "pods": "110",
    }
    allocatable = {**capacity, "cpu": "95500m", "memory": "2102832420Ki"}
    if gpus:
        capacity["nvidia.com/gpu"] = allocatable["nvidia.com/gpu"] = str(gpus)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "annotations": {
                "flannel.alpha.coreos.com/backend-data": "null",
                "flannel.alpha.coreos.com/backend-type": "host-gw",
                "flannel.alpha.coreos.com/kube-subnet-manager": "true",
                "flannel.alpha.coreos.com/public-ip": f"10.{octet_b}.{octet_c}.10",
                "node.alpha.kubernetes.io/ttl": "0",
                "nfd.node.kubernetes.io/feature-labels": "cpu-cpuid.AVX512F,pci-10de.present",
                "nvidia.com/gpu-driver-upgrade-enabled": "true",
                "volumes.kubernetes.io/controller-managed-attach-detach": "true",
            },
            "creationTimestamp": created,
            "labels": labels,
            "name": name,
            "resourceVersion": str(48_000_000 + index * 7),
            "uid": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
        },
        "spec": {
            "podCIDR": f"10.244.{index % 256}.0/24",
            "podCIDRs": [f"10.244.{index % 256}.0/24"],
            "providerID": f"openstack:///{uuid.UUID(int=rng.getrandbits(128), version=4)}",
            "taints": [{"effect": "NoSchedule", "key": "nvidia.com/gpu", "value": "present"}]
            if gpus
            else [],
        },
        "status": {
            "addresses": [
                {"address": f"10.{octet_b}.{octet_c}.10", "type": "InternalIP"},
                {"address": name, "type": "Hostname"},
            ],
            "allocatable": allocatable,
            "capacity": capacity,
            "conditions": [
                {
                    "lastHeartbeatTime": "2026-11-30T08:59:12Z",
                    "lastTransitionTime": created,
                    "message": message,
                    "reason": reason,
                    "status": status,
                    "type": kind,
                }
                for kind, status, reason, message in _CONDITIONS
            ],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
            "images": [
                {
                    "names": [
                        f"nvcr.io/nvidia/{image}@sha256:{rng.getrandbits(256):064x}",
                        f"nvcr.io/nvidia/{image}:{tag}",
                    ],
                    "sizeBytes": size,
                }
                for image, tag, size in (
                    ("k8s/dcgm-exporter", "4.2.3-4.1.3-ubuntu22.04", 419_840_512),
                    ("k8s-device-plugin", "v0.17.1", 195_264_003),
                    ("gpu-operator", "v25.3.0", 168_003_712),
                    ("cloud-native/gpu-operator-validator", "v25.3.0", 212_504_107),
                    ("cuda", "12.8.1-base-ubi9", 163_811_034),
                    ("vllm/vllm-openai", "v0.11.0", 9_801_231_872),
                )
            ],
            "nodeInfo": {
                "architecture": "amd64",
                "bootID": str(uuid.UUID(int=rng.getrandbits(128), version=4)),
                "containerRuntimeVersion": "containerd://1.7.23-k3s2",
                "kernelVersion": "5.15.0-164-generic",
                "kubeProxyVersion": "v1.31.4+rke2r1",
                "kubeletVersion": "v1.31.4+rke2r1",
                "machineID": f"{rng.getrandbits(128):032x}",
                "operatingSystem": "linux",
                "osImage": "Ubuntu 22.04.5 LTS",
                "systemUUID": str(uuid.UUID(int=rng.getrandbits(128), version=4)).upper(),
            },
        },
    }


# The labels a compact node keeps (bench/bench_fleet.py's million-node lists): what the scan
# reads, in the names the node's label style uses.
_COMPACT_LABELS = (
    *_DRIVER_NAMES,
    *_DEPRECATED_NAMES,
    "nvidia.com/gpu.product",
    "nvidia.com/gpu.count",
    "nvidia.com/gfd.timestamp",
    "nvidia.com/gpu.present",
    "kubernetes.io/hostname",
)


def compact_node(name: str, labels: dict[str, str], gpus: int) -> dict[str, Any]:
    """A node as `kubectl get nodes -o json` prints it, less all the scan does not read."""
    kept = {key: value for key, value in labels.items() if key in _COMPACT_LABELS}
    if "nvidia.com/cuda.driver-version.full" in kept:  # the parts say it again
        for part in _DRIVER_NAMES[1:4] + _DRIVER_NAMES[5:]:
            kept.pop(part, None)
    capacity = {"nvidia.com/gpu": str(gpus)} if gpus else {"cpu": "96"}
    return {"metadata": {"labels": kept, "name": name}, "status": {"capacity": capacity}}


@dataclass(frozen=True)
class Made:
    """One node of a made fleet: its object, its expected (status, min driver) when it is a GPU
    node, and whether its labels are stale."""

    node: dict[str, Any]
    expected: tuple[str, str | None] | None
    stale: bool


def fleet_nodes(
    count: int,
    seed: int = 12,
    stale_share: float = 0.05,
    cpu_share: float = 0.02,
    compact: bool = False,
) -> Iterator[Made]:
    """The nodes of make_fleet one at a time (compact: only what the scan reads of each)."""
    rng = random.Random(seed)
    styles = label_styles()
    style_names = sorted(styles)
    branches = sorted(DRIVERS)

    def made(name: str, labels: dict[str, str], gpus: int, index: int) -> dict[str, Any]:
        if compact:
            return compact_node(name, labels, gpus)
        return node_object(name, labels, gpus, index, rng)

    for index in range(count):
        name = f"gpu-{index:05d}"
        roll = rng.random()
        if roll < cpu_share:
            labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
            yield Made(made(name, labels, 0, index), None, False)
            continue
        product, datacenter = PRODUCTS[rng.randrange(len(PRODUCTS))]
        gpus = rng.choice((1, 2, 4, 8, 8, 8))
        stale = rng.random() < stale_share
        stamp = NOW - (STALE_SECONDS if stale else rng.randrange(60, 3_600))
        if roll < cpu_share * 2:  # the device plugin runs, GFD does not
            labels = _labels(styles["both"], name, None, product, gpus, stamp)
            yield Made(made(name, labels, gpus, index), expected_status(None, datacenter), False)
        else:
            branch = branches[index % len(branches)]
            driver = rng.choice(DRIVERS[branch])
            style = styles[style_names[rng.randrange(len(style_names))]]
            labels = _labels(style, name, driver, product, gpus, stamp)
            node = made(name, labels, gpus, index)
            yield Made(node, expected_status(branch, datacenter), stale)


def make_fleet(
    count: int, seed: int = 12, stale_share: float = 0.05, cpu_share: float = 0.02
) -> Fleet:
    """A NodeList of `count` nodes: mixed r570/r575/r580/r590, every label style, hyphenated
    products with -SHARED and -MIG suffixes, some stale timestamps, some nodes with GPUs but no
    GFD labels, and some without GPUs."""
    fleet = Fleet(
        {"apiVersion": "v1", "items": [], "kind": "List", "metadata": {"resourceVersion": ""}}
    )
    for made in fleet_nodes(count, seed, stale_share, cpu_share):
        fleet.document["items"].append(made.node)
        name = made.node["metadata"]["name"]
        if made.expected is None:
            fleet.cpu_nodes += 1
            continue
        fleet.expected[name] = made.expected
        if made.stale:
            fleet.stale.add(name)
    return fleet


def write_compact_fleet(path: Path, count: int) -> dict[str, tuple[str, str | None]]:
    """A compact NodeList of `count` nodes written node by node (a million nodes are never one
    document in memory); every GPU node's expected (status, min driver)."""
    import orjson

    expected: dict[str, tuple[str, str | None]] = {}
    with path.open("wb") as out:
        out.write(b'{"apiVersion":"v1","items":[')
        for index, made in enumerate(fleet_nodes(count, compact=True)):
            out.write((b"," if index else b"") + orjson.dumps(made.node))
            if made.expected is not None:
                expected[made.node["metadata"]["name"]] = made.expected
        out.write(b'],"kind":"List","metadata":{"resourceVersion":""}}\n')
    return expected


def gpu_pod(name: str, node: str, gpus: int, phase: str = "Running") -> dict[str, Any]:
    """One item of `kubectl get pods -A -o json`: a pod on `node` requesting `gpus` GPUs."""
    resources = {"limits": {"nvidia.com/gpu": str(gpus)}, "requests": {"nvidia.com/gpu": str(gpus)}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "serving", "uid": str(uuid.uuid4())},
        "spec": {
            "containers": [
                {"image": "vllm/vllm-openai:v0.11.0", "name": "vllm", "resources": resources}
                if gpus
                else {"image": "busybox", "name": "sidecar", "resources": {}}
            ],
            "nodeName": node,
            "restartPolicy": "Always",
        },
        "status": {"phase": phase, "hostIP": "10.0.0.1", "podIP": "10.244.0.5"},
    }


def pod_list(pods: list[dict[str, Any]]) -> dict[str, Any]:
    return {"apiVersion": "v1", "items": pods, "kind": "List", "metadata": {"resourceVersion": ""}}
