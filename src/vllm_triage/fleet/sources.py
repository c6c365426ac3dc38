"""Where a fleet's nodes come from, without a Kubernetes API server: `kubectl get nodes -o json`
output (with `kubectl get pods -A -o json` for the GPU work on each node), or an inventory (YAML,
CSV, or an Ansible inventory in INI or YAML with host vars: fleet/inventory.py); and what every
source shares, the API's too (fleet/kube.py): the caps, and a pod counted as GPU work.

Node and pod lists are streamed object by object (fleet/stream.py) into plain dicts, each node
reduced to its facts as it is read; no model is validated per node.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_triage.fleet.errors import FleetInputError
from vllm_triage.fleet.inventory import read_inventory
from vllm_triage.fleet.labels import (
    HOSTNAME,
    NodeFacts,
    count_of,
    is_gpu_node,
    labelled_facts,
    node_facts,
    pod_gpus,
    printable_text,
    timestamp_of,
)
from vllm_triage.fleet.stream import ListFile, stream_items
from vllm_triage.inputs import display_name
from vllm_triage.models import InputFile

# `kubectl get nodes -o json` is 5 to 15 KB a node: 512 MiB holds 35,000 full nodes, and a
# million nodes of labels alone.
MAX_NODE_LIST_BYTES = 512 * 1024**2
MAX_POD_LIST_BYTES = 1024**3
# Objects of one node list, GPU or not, and nodes with GPU work in one pod list: each GPU node
# keeps a record (about 300 bytes with its strings), so a million nodes stay within the few
# hundred MB the scan is designed for; the largest clusters run about 100,000 nodes.
MAX_NODES = 1_000_000


class Restart(enum.Enum):
    """A marker in a stream of nodes or API list items: the list began again (its continue
    token expired), and what came before the marker is dropped."""

    LIST = "the list began again"


@dataclass
class Nodes:
    """The GPU nodes of one source, read as `facts` is consumed; `total` (objects listed) and
    `made_from` (the inputs) are complete once it is exhausted."""

    facts: Iterator[NodeFacts | Restart]
    listed: str
    total: int = 0
    made_from: list[InputFile] = field(default_factory=list)


def _no_items(document: Any, what: str, kind: str) -> list[Any]:
    """The objects of a small document that had no `items` to stream: one object of the kind,
    or an empty list."""
    if isinstance(document, list):
        return document
    if isinstance(document, dict) and isinstance(document.get("items"), list):
        return list(document["items"])
    if isinstance(document, dict) and document.get("kind") == kind:
        return [document]
    if not isinstance(document, dict):
        raise FleetInputError(f"{what}: expected a {kind}List (kubectl get ... -o json)")
    raise FleetInputError(
        f"{what}: no items; expected `kubectl get {kind.lower()}s -o json` output"
    )


def _labels_only(document: Any) -> bool:
    """A node's labels alone (`kubectl get node N -o jsonpath='{.metadata.labels}'`)."""
    return (
        isinstance(document, dict)
        and "items" not in document
        and "kind" not in document
        and all(isinstance(value, str) for value in document.values())
        and any(key.startswith("nvidia.com/") for key in document)
    )


def nodes_from_file(path: Path, gpu_pods: Mapping[str, int] | None) -> Nodes:
    """The GPU nodes of a `kubectl get nodes -o json` file (or one node's labels), streamed."""
    nodes = Nodes(iter(()), "nodes")
    nodes.facts = _file_facts(path, gpu_pods, nodes)
    return nodes


def _file_facts(
    path: Path, gpu_pods: Mapping[str, int] | None, nodes: Nodes
) -> Iterator[NodeFacts]:
    found = ListFile(display_name(path))
    for item in stream_items(path, found, MAX_NODE_LIST_BYTES):
        check_node_count(found.count, found.what)
        facts = node_facts(item, gpu_pods)
        if facts is not None:
            yield facts
    assert found.made_from is not None
    nodes.made_from.insert(0, found.made_from)
    nodes.total = found.count
    if found.has_whole:
        document = found.whole
        if _labels_only(document):
            name = printable_text(str(document.get(HOSTNAME) or path.stem))[:253]
            nodes.total = 1
            yield labelled_facts(name, document, None, gpu_pods)
            return
        items = _no_items(document, found.what, "Node")
        nodes.total = len(items)
        for item in items:
            facts = node_facts(item, gpu_pods)
            if facts is not None:
                yield facts


def check_node_count(count: int, what: str) -> None:
    """Refuses a node list past MAX_NODES objects, before it keeps a record more."""
    if count > MAX_NODES:
        raise FleetInputError(
            f"{what}: more than {MAX_NODES:,} nodes; scan the fleet in parts (--selector, or "
            "smaller lists)"
        )


def gpu_pods_from_file(path: Path) -> tuple[dict[str, int], InputFile]:
    """Running pods requesting nvidia.com/gpu per node, from `kubectl get pods -A -o json`."""
    found = ListFile(display_name(path))
    busy: dict[str, int] = {}
    for pod in stream_items(path, found, MAX_POD_LIST_BYTES):
        count_pod(busy, pod, found.what)
    if found.has_whole:
        for pod in _no_items(found.whole, found.what, "Pod"):
            count_pod(busy, pod, found.what)
    assert found.made_from is not None
    return busy, found.made_from


def count_pod(busy: dict[str, int], pod: Any, what: str) -> None:
    """A running pod requesting nvidia.com/gpu counted on its node; past MAX_NODES busy nodes
    the pod list is refused (the counts are kept per node)."""
    gpus = pod_gpus(pod)
    if not gpus:
        return
    if gpus[0] not in busy and len(busy) >= MAX_NODES:
        raise FleetInputError(f"{what}: GPU pods on more than {MAX_NODES:,} nodes; not read")
    busy[gpus[0]] = busy.get(gpus[0], 0) + 1


# --- inventories --------------------------------------------------------------------------------

# Host var or column names an inventory may use for each fact (GFD's label names work too).
_DRIVER_KEYS = ("nvidia_driver_version", "nvidia_driver", "driver_version", "driver")
_GPU_KEYS = ("nvidia_gpu_product", "gpu_product", "gpu_model", "gpu")
_COUNT_KEYS = ("nvidia_gpu_count", "gpu_count")
_CEILING_KEYS = ("nvidia_cuda_version", "cuda_ceiling", "driver_cuda")
_PODS_KEYS = ("gpu_pods", "gpu_jobs", "gpu_work")
_STAMP_KEYS = ("facts_timestamp", "gfd_timestamp")


def _scalar(values: Mapping[str, Any], keys: tuple[str, ...]) -> Any:
    """The first of the keys with a scalar value: a list or mapping (a YAML alias can make one
    of any size) is no driver version."""
    for key in keys:
        value = values.get(key)
        if value not in (None, "") and isinstance(value, str | int | float | bool):
            return value
    return None


def _busy(value: Any) -> int | None:
    """GPU work from an inventory: a count, or yes/no."""
    if value is None:
        return None
    if isinstance(value, bool):
        return int(value)
    text = str(value).strip().lower()
    if text in ("true", "yes", "busy"):
        return 1
    if text in ("false", "no", "idle", ""):
        return 0
    return count_of(text)


def _short(value: Any, cap: int) -> str:
    return printable_text(str(value)[: cap * 2].strip())[:cap]


def inventory_facts(name: str, values: Mapping[str, Any]) -> NodeFacts | None:
    """One inventory host's facts (host vars, a CSV row or a YAML entry); None for a host that
    says nothing about GPUs."""
    labels = values.get("labels")
    merged: dict[str, Any] = dict(labels) if isinstance(labels, dict) else {}
    merged.update(values)
    facts = labelled_facts(name, merged, None, None)
    driver = _scalar(merged, _DRIVER_KEYS)
    gpu = _scalar(merged, _GPU_KEYS)
    ceiling = _scalar(merged, _CEILING_KEYS)
    count = _scalar(merged, _COUNT_KEYS)
    stamp = _scalar(merged, _STAMP_KEYS)
    if not (driver or gpu or facts.driver or facts.gpu or is_gpu_node(merged, None)):
        return None
    return facts._replace(
        name=printable_text(name)[:253],
        driver=_short(driver, 128) if driver is not None else facts.driver,
        gpu=_short(gpu, 128) if gpu is not None else facts.gpu,
        gpu_count=count_of(count) if count is not None else facts.gpu_count,
        ceiling=_short(ceiling, 32) if ceiling is not None else facts.ceiling,
        timestamp=timestamp_of(stamp) if stamp is not None else facts.timestamp,
        gpu_pods=_busy(_scalar(merged, _PODS_KEYS)),
    )


def nodes_from_inventory(path: Path) -> Nodes:
    """The GPU hosts of an inventory file (see fleet/inventory.py for the formats)."""
    hosts, made_from = read_inventory(path)
    found = (facts for name, values in hosts.items() if (facts := inventory_facts(name, values)))
    return Nodes(found, "hosts", len(hosts), [made_from])
