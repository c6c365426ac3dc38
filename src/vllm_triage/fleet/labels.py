"""A GPU node's facts from NVIDIA GPU Feature Discovery's node labels, on plain dicts (the hot
path of a 10,000-node scan: no model validation per node).

The label names are GFD's interface (NVIDIA/k8s-device-plugin, docs/gpu-feature-discovery and
internal/lm; checked against real nodes in ../shared/samples/k8s):

- `nvidia.com/cuda.driver-version.{full,major,minor,revision}`: the driver (GFD 0.15+);
  `nvidia.com/cuda.driver.{major,minor,rev}` are the deprecated names older GFDs write alone.
- `nvidia.com/cuda.runtime-version.{full,major,minor}` (deprecated `nvidia.com/cuda.runtime.*`):
  despite the name, the CUDA version the *driver* supports (cuDriverGetVersion), its ceiling.
- `nvidia.com/gpu.product`: the NVML name with spaces as hyphens, `-SHARED` under time-slicing,
  `-MIG-<profile>` under the mixed MIG strategy; `nvidia.com/gpu.count`: physical GPUs.
- `nvidia.com/gfd.timestamp`: Unix seconds of GFD's last labelling; an old one means GFD stopped
  and the driver may have changed since.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, NamedTuple

DRIVER_FULL = "nvidia.com/cuda.driver-version.full"
DRIVER_PARTS = (
    "nvidia.com/cuda.driver-version.major",
    "nvidia.com/cuda.driver-version.minor",
    "nvidia.com/cuda.driver-version.revision",
)
DEPRECATED_DRIVER_PARTS = (
    "nvidia.com/cuda.driver.major",
    "nvidia.com/cuda.driver.minor",
    "nvidia.com/cuda.driver.rev",
)
CEILING_FULL = "nvidia.com/cuda.runtime-version.full"
CEILING_PARTS = ("nvidia.com/cuda.runtime-version.major", "nvidia.com/cuda.runtime-version.minor")
DEPRECATED_CEILING_PARTS = ("nvidia.com/cuda.runtime.major", "nvidia.com/cuda.runtime.minor")
PRODUCT = "nvidia.com/gpu.product"
COUNT = "nvidia.com/gpu.count"
PRESENT = "nvidia.com/gpu.present"
TIMESTAMP = "nvidia.com/gfd.timestamp"
GPU_RESOURCE = "nvidia.com/gpu"
HOSTNAME = "kubernetes.io/hostname"

_FIELD_CAP = 128  # a label value is at most 63 characters; inventories get some slack


class NodeFacts(NamedTuple):
    """What the scan needs of one node; `note` says what was odd about its labels."""

    name: str
    driver: str | None
    gpu: str | None
    gpu_count: int | None
    ceiling: str | None
    timestamp: float | None
    gpu_pods: int | None
    note: str | None = None


# What fleet output must not carry from outside: lone surrogates (not UTF-8) and control
# characters (they would drive a terminal); shown as U+FFFD and as their Unicode pictures.
_UNPRINTABLE = str.maketrans(
    {
        **{code: 0x2400 + code for code in range(32)},
        0x7F: 0x2421,
        **dict.fromkeys(range(0x80, 0xA0), 0xFFFD),
        **dict.fromkeys(range(0xD800, 0xE000), 0xFFFD),
    }
)


def printable_text(text: str) -> str:
    """Text from a node list or an inventory, safe to print and to write as UTF-8 JSON."""
    return text if text.isprintable() else text.translate(_UNPRINTABLE)


def _text(value: Any) -> str | None:
    """A label or inventory value as a short, printable string (None when absent or empty).
    Kubernetes label values are at most 63 characters of [A-Za-z0-9._-]: the first test passes
    them as they are; the slower path is for inventories and anything odd."""
    if (
        type(value) is str
        and 0 < len(value) <= _FIELD_CAP
        and value.isprintable()
        and value[0] != " "
        and value[-1] != " "
    ):
        return value
    if value is None or isinstance(value, dict | list):
        return None
    text = printable_text(str(value).strip())
    return text[:_FIELD_CAP] if text else None


def _joined(labels: Mapping[str, Any], names: tuple[str, ...]) -> str | None:
    """`580`, `95`, `05` -> `580.95.05`; None without the first part."""
    first = _text(labels.get(names[0]))
    if first is None:
        return None
    parts = [first]
    for name in names[1:]:
        part = _text(labels.get(name))
        if part:
            parts.append(part)
    return ".".join(parts)


def driver_of(labels: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """The driver version the labels give, and a note when the current and the deprecated names
    disagree (the current ones win: GFD writes both, the deprecated ones may be left over)."""
    current = _text(labels.get(DRIVER_FULL)) or _joined(labels, DRIVER_PARTS)
    deprecated = _joined(labels, DEPRECATED_DRIVER_PARTS)
    if current and deprecated and current != deprecated:
        return current, (
            f"labels disagree: {DRIVER_FULL} {current}, deprecated nvidia.com/cuda.driver.* "
            f"{deprecated}; the current label is used"
        )
    return current or deprecated, None


def ceiling_of(labels: Mapping[str, Any]) -> str | None:
    """The driver's CUDA ceiling (nvidia.com/cuda.runtime-version.*, or the deprecated names)."""
    return (
        _text(labels.get(CEILING_FULL))
        or _joined(labels, CEILING_PARTS)
        or _joined(labels, DEPRECATED_CEILING_PARTS)
    )


def count_of(value: Any) -> int | None:
    """A GPU count from a label, an inventory field or a resource quantity ("8")."""
    text = _text(value)
    if text is None or not text.isdigit() or len(text) > 6:
        return None
    return int(text)


def timestamp_of(value: Any) -> float | None:
    """nvidia.com/gfd.timestamp: Unix seconds (GFD writes an integer)."""
    text = _text(value)
    if text is None:
        return None
    try:
        number = float(text)
    except ValueError:
        return None
    return number if 0 < number < 1e11 else None


def is_gpu_node(labels: Mapping[str, Any], capacity: Mapping[str, Any] | None) -> bool:
    """A node with NVIDIA GPUs: GFD's labels, or the device plugin's resource on it."""
    if (
        labels.get(PRESENT) == "true"
        or PRODUCT in labels
        or DRIVER_FULL in labels
        or DEPRECATED_DRIVER_PARTS[0] in labels
        or COUNT in labels
    ):
        return True
    return bool(capacity and (count_of(capacity.get(GPU_RESOURCE)) or 0) > 0)


def node_facts(item: Any, gpu_pods: Mapping[str, int] | None) -> NodeFacts | None:
    """A `kubectl get nodes -o json` item's facts; None for a node without NVIDIA GPUs (or an
    item that is not a node object)."""
    if not isinstance(item, dict):
        return None
    metadata = item.get("metadata")
    if not isinstance(metadata, dict):
        return None
    name = _text(metadata.get("name"))
    labels = metadata.get("labels")
    if not isinstance(labels, dict):
        labels = {}
    status = item.get("status")
    capacity = status.get("capacity") if isinstance(status, dict) else None
    if not isinstance(capacity, dict):
        capacity = None
    if name is None or not is_gpu_node(labels, capacity):
        return None
    return labelled_facts(name, labels, capacity, gpu_pods)


def labelled_facts(
    name: str,
    labels: Mapping[str, Any],
    capacity: Mapping[str, Any] | None,
    gpu_pods: Mapping[str, int] | None,
) -> NodeFacts:
    """A GPU node's facts from its labels (and the device plugin's capacity for the count)."""
    driver, note = driver_of(labels)
    count = count_of(labels.get(COUNT))
    if count is None and capacity:
        count = count_of(capacity.get(GPU_RESOURCE))
    return NodeFacts(
        name=name,
        driver=driver,
        gpu=_text(labels.get(PRODUCT)),
        gpu_count=count,
        ceiling=ceiling_of(labels),
        timestamp=timestamp_of(labels.get(TIMESTAMP)),
        gpu_pods=None if gpu_pods is None else gpu_pods.get(name, 0),
        note=note,
    )


def pod_gpus(pod: Any) -> tuple[str, int] | None:
    """(node, GPUs) of a running pod that requests nvidia.com/gpu; None for any other pod."""
    if not isinstance(pod, dict):
        return None
    status, spec = pod.get("status"), pod.get("spec")
    if not isinstance(status, dict) or not isinstance(spec, dict):
        return None
    if status.get("phase") != "Running":
        return None
    node = _text(spec.get("nodeName"))
    if node is None:
        return None
    gpus = 0
    containers = spec.get("containers")
    for container in containers if isinstance(containers, list) else ():
        resources = container.get("resources") if isinstance(container, dict) else None
        if not isinstance(resources, dict):
            continue
        wanted = 0
        for kind in ("limits", "requests"):
            values = resources.get(kind)
            if isinstance(values, dict):
                wanted = max(wanted, count_of(values.get(GPU_RESOURCE)) or 0)
        gpus += wanted
    return (node, gpus) if gpus else None
