"""The library behind `fleet scan`: one options object in, one artifact out.

The nodes come from one source: the Kubernetes API (`--kube`), a `kubectl get nodes -o json` file
(`--nodes`) or an inventory (`--inventory`, when there is no Kubernetes). Each GPU node gets the
compat verdict of the image's CUDA on its driver and GPU (diagnose/threshold.py, once per
distinct pair), and the nodes a driver change helps are ordered into rollout waves.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from vllm_triage.errors import InputError
from vllm_triage.fleet.classify import Classifier
from vllm_triage.fleet.labels import NodeFacts, printable_text
from vllm_triage.fleet.models import STATUSES, FleetScan, NodeRecord
from vllm_triage.fleet.output import ScannedFleet
from vllm_triage.fleet.waves import plan_waves
from vllm_triage.image.config import ImageCuda
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.models import InputFile

if TYPE_CHECKING:
    from vllm_triage.fleet.sources import Nodes, Restart

DEFAULT_WAVE_SIZE = 10
DEFAULT_STALE_AFTER_HOURS = 24.0


@dataclass(frozen=True)
class FleetScanOptions:
    """The image (a reference, its config file, or its CUDA; registry_auth and platform as for
    every --image), the nodes' one source, and the rollout's wave size.

    `now` (Unix seconds) is the moment label ages are measured from (default: the scan's)."""

    image: str | None = None
    image_config: Path | None = None
    cuda: str | None = None
    registry_auth: Path | None = None
    platform: str | None = None
    kube: bool = False
    kubeconfig: Path | None = None
    context: str | None = None
    selector: str | None = None
    nodes: Path | None = None
    pods: Path | None = None
    inventory: Path | None = None
    wave_size: int = DEFAULT_WAVE_SIZE
    stale_after_hours: float = DEFAULT_STALE_AFTER_HOURS
    page_size: int = 500
    now: float | None = None


def image_cuda(
    kb: KnowledgeBase, options: FleetScanOptions
) -> tuple[ImageCuda, str | None, list[str]]:
    """The image's CUDA (from its config: a file, the local engine or the registry; the tag only
    as a fallback, which the image module warns about), the pinned reference when a registry
    or engine gave a digest, and the notes to show."""
    from vllm_triage.image import ImageRequest, describe, resolve_image
    from vllm_triage.versions import CudaVersion

    if options.cuda is not None:
        return ImageCuda(CudaVersion.parse(options.cuda), None, "given (--cuda)"), None, []
    if options.image is None and options.image_config is None:
        raise InputError("say which image: --image REF, --image-config FILE or --cuda X.Y")
    resolved = resolve_image(
        ImageRequest(
            reference=options.image,
            config_file=options.image_config,
            registry_auth=options.registry_auth,
            platform=options.platform,
        ),
        kb=kb,
    )
    found = resolved.image_cuda()
    if found is None:
        raise InputError(
            f"{describe(resolved)}: the image states no CUDA (no CUDA_VERSION or "
            "NVIDIA_REQUIRE_CUDA); pass --cuda"
        )
    how = f"{resolved.cuda_from or 'config'} from {resolved.source_detail}"
    if resolved.platform:
        how += f" [{resolved.platform}]"
    return ImageCuda(found.cuda, found.require, how), resolved.pinned, list(resolved.warnings)


def _check_sources(options: FleetScanOptions) -> None:
    chosen = [
        name
        for name, given in (
            ("--kube", options.kube),
            ("--nodes", options.nodes is not None),
            ("--inventory", options.inventory is not None),
        )
        if given
    ]
    if len(chosen) != 1:
        both = f" (not {' and '.join(chosen)})" if chosen else ""
        raise InputError(
            "give one source of nodes: --kube, --nodes FILE (kubectl get nodes -o json) or "
            f"--inventory FILE{both}"
        )
    if options.pods is not None and options.nodes is None:
        raise InputError("--pods goes with --nodes (with --kube the pods are listed live)")
    if options.wave_size < 1:
        raise InputError("--wave-size must be at least 1")
    if options.page_size < 1:
        raise InputError("--page-size must be at least 1")
    if options.stale_after_hours <= 0:
        raise InputError("--stale-after must be a positive number of hours")


def _from_kube(
    options: FleetScanOptions, notes: list[str], held: contextlib.ExitStack
) -> tuple[Nodes, str, bool]:
    """The cluster's nodes, streamed: the client stays open in `held` while they are read. The
    running pods are counted first, so that each node is known busy or idle as it is read."""
    from vllm_triage.fleet.kube import KubeTarget, api_client, gpu_pods_from_kube, nodes_from_kube

    client = held.enter_context(api_client(KubeTarget(options.kubeconfig, options.context)))
    busy: dict[str, int] | None
    try:
        busy = gpu_pods_from_kube(client, options.page_size)
    except InputError as exc:  # refused, too slow or too large: the nodes are scanned anyway
        notes.append(f"GPU work on the nodes is not known: {exc}")
        busy = None
    where = f"Kubernetes ({'context ' + options.context if options.context else 'current context'}"
    where += f", selector {options.selector})" if options.selector else ")"
    nodes = nodes_from_kube(client, options.selector, options.page_size, busy)
    return nodes, where, busy is not None


def _classified(classifier: Classifier, facts: Iterator[NodeFacts | Restart]) -> list[NodeRecord]:
    """Each GPU node's record as its facts are read; a list that began again drops those before."""
    from vllm_triage.fleet.sources import Restart

    records: list[NodeRecord] = []
    for fact in facts:
        if fact is Restart.LIST:
            records.clear()
        else:
            records.append(classifier.node(fact))
    return records


@contextlib.contextmanager
def _gc_paused() -> Iterator[None]:
    """No cyclic garbage collection while a large node list is parsed and walked: its millions
    of dicts hold no cycles, and each full collection would walk them all (it tripled the
    scan's time on a 10,000-node list)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def fleet_scan(options: FleetScanOptions, *, kb: KnowledgeBase | None = None) -> FleetScan:
    """Every GPU node's status for the image, and the rollout waves, as the artifact."""
    return scan_fleet(options, kb=kb).artifact()


def scan_fleet(options: FleetScanOptions, *, kb: KnowledgeBase | None = None) -> ScannedFleet:
    """fleet_scan, the nodes kept as records: what the command writes out node by node."""
    _check_sources(options)
    with _gc_paused():
        return _scan(options, kb)


def _source(
    options: FleetScanOptions,
    notes: list[str],
    made_from: list[InputFile],
    held: contextlib.ExitStack,
) -> tuple[Nodes, str, bool]:
    """The nodes of the one source given (read as they are consumed, within `held`), how the
    artifact names the source, and whether the GPU work on the nodes is known."""
    from vllm_triage.fleet import sources

    if options.inventory is not None:
        found = sources.nodes_from_inventory(options.inventory)
        return found, f"inventory {found.made_from[0].name}", True
    if options.nodes is not None:
        busy = None
        if options.pods is not None:
            busy, made = sources.gpu_pods_from_file(options.pods)
            made_from.append(made)
        found = sources.nodes_from_file(options.nodes, busy)
        return found, f"node list {display_name(options.nodes)}", busy is not None
    return _from_kube(options, notes, held)


def _scan(options: FleetScanOptions, kb: KnowledgeBase | None) -> ScannedFleet:
    kb = kb or load_knowledge()
    image, pinned, notes = image_cuda(kb, options)
    made_from: list[InputFile] = []
    classifier = Classifier(
        kb,
        image.cuda,
        image.require,
        options.now if options.now is not None else time.time(),
        options.stale_after_hours,
    )
    with contextlib.ExitStack() as held:
        found, source, known_work = _source(options, notes, made_from, held)
        nodes = _classified(classifier, found.facts)
    made_from[:0] = found.made_from
    total, listed = found.total, found.listed
    if len(nodes) < total:
        notes.append(f"{total - len(nodes)} of {total} {listed} have no NVIDIA GPU: not scanned")
    if not nodes:
        notes.append(f"no GPU node found among {total} {listed}")
    if nodes and (not known_work or all(node.gpu_pods is None for node in nodes)):
        notes.append(
            "which nodes run GPU work is not known (give --pods with kubectl get pods -A -o json, "
            "or gpu_pods in the inventory): the waves cannot keep busy nodes out of the first ones"
        )
    waves, wave_notes = plan_waves(nodes, options.wave_size)
    counted = Counter(node.status for node in nodes)
    stale = sum(1 for node in nodes if node.stale)
    if stale:
        notes.append(
            f"{stale} node(s) have GPU Feature Discovery labels older than "
            f"{options.stale_after_hours:g} hours: their driver may have changed since"
        )
    requirement = classifier.requirement
    header = FleetScan(
        image=printable_text(options.image) if options.image else None,
        image_pinned=pinned,
        cuda=str(image.cuda),
        cuda_source=printable_text(image.how),
        require=printable_text(image.require) if image.require else None,
        min_driver=requirement.min_driver,
        toolkit_driver=requirement.toolkit_driver,
        recommended_driver=requirement.recommended_driver,
        recommended_branch=requirement.recommended_branch,
        source=printable_text(source),
        nodes=[],
        waves=waves,
        wave_size=options.wave_size,
        counts={status: counted.get(status, 0) for status in STATUSES},
        notes=[printable_text(note) for note in notes + wave_notes],
    )
    return ScannedFleet(header.stamped(made_from), nodes)
