"""Kubernetes, with --pod: the pod (spec and container statuses), its events, current and previous
logs, and the node's GPU Feature Discovery labels (driver version, the driver's CUDA ceiling).
"""

from __future__ import annotations

from typing import Any

from vllm_triage.bundle.models import KubernetesFacts, PodContainer, PodEvent
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import (
    NotAvailable,
    Probe,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
)

_GPU_LABEL_PREFIXES = ("nvidia.com/", "feature.node.kubernetes.io/pci-10de")


def pod_document(ctx: ProbeContext) -> dict[str, Any] | None:
    """`kubectl get pod -o json` of --pod, shared by the probes that need it."""
    pod = ctx.options.pod
    if pod is None:
        return None

    def ask() -> dict[str, Any]:
        _, document = ctx.json_command("kubectl_pod", pod=pod, namespace=ctx.options.namespace)
        if not isinstance(document, dict) or document.get("kind") != "Pod":
            raise ProbeFailed(reasons.NOT_A_POD.format(pod=pod))
        return document

    return ctx.once("pod", ask)


def pod_for(ctx: ProbeContext, notes: list[str]) -> dict[str, Any] | None:
    """pod_document for a probe that only uses it on the side: when it failed, a note, not the
    probe's failure (the kubernetes probe reports it)."""
    if ctx.options.pod is None:
        return None
    try:
        return pod_document(ctx)
    except (NotAvailable, ProbeFailed, TimeoutError) as exc:
        notes.append(f"pod: {exc}; what it would tell is missing here")
        return None


def _version_label(labels: dict[str, str], prefix: str) -> str | None:
    """GFD's full-version label, else its split labels (major, minor, revision or rev) joined."""
    if full := labels.get(f"{prefix}.full"):
        return full
    major, minor = labels.get(f"{prefix}.major"), labels.get(f"{prefix}.minor")
    if major is None or minor is None:
        return None
    revision = labels.get(f"{prefix}.revision") or labels.get(f"{prefix}.rev")
    return ".".join(part for part in (major, minor, revision) if part)


def gpu_labels(node: dict[str, Any]) -> dict[str, str]:
    labels = (node.get("metadata") or {}).get("labels") or {}
    return {k: str(v) for k, v in labels.items() if k.startswith(_GPU_LABEL_PREFIXES)}


def _container(status: dict[str, Any], limits: dict[str, str | None]) -> PodContainer:
    states: dict[str, Any] = status.get("state") or {"unknown": {}}
    state_name, state = next(iter(states.items()))
    last_states: dict[str, Any] = status.get("lastState") or {}
    last: dict[str, Any] = next(iter(last_states.values()), {}) or {}
    return PodContainer(
        name=status.get("name", "?"),
        image=status.get("image"),
        ready=status.get("ready"),
        restart_count=status.get("restartCount") or 0,
        state=state_name,
        reason=(state or {}).get("reason"),
        exit_code=(state or {}).get("exitCode"),
        last_reason=last.get("reason"),
        last_exit_code=last.get("exitCode"),
        gpu_limit=limits.get(status.get("name", "")),
    )


def parse_pod(
    pod: dict[str, Any], events: dict[str, Any] | None, node: dict[str, Any] | None
) -> KubernetesFacts:
    """The facts of a pod, its EventList and its Node."""
    metadata, spec, status = (
        pod.get("metadata") or {},
        pod.get("spec") or {},
        pod.get("status") or {},
    )
    limits = {
        c.get("name", ""): ((c.get("resources") or {}).get("limits") or {}).get("nvidia.com/gpu")
        for c in spec.get("containers") or []
    }
    statuses = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    labels = gpu_labels(node) if node else {}
    count = labels.get("nvidia.com/gpu.count")
    return KubernetesFacts(
        pod=metadata.get("name", "?"),
        namespace=metadata.get("namespace", "default"),
        node=spec.get("nodeName"),
        phase=status.get("phase"),
        containers=[_container(s, limits) for s in statuses],
        events=[
            PodEvent(
                type=e.get("type"), reason=e.get("reason"), message=e.get("message"),
                count=e.get("count"),
            )
            for e in (events or {}).get("items") or []
        ],
        node_gpu_labels=labels,
        gfd_driver_version=_version_label(labels, "nvidia.com/cuda.driver-version")
        or _version_label(labels, "nvidia.com/cuda.driver"),
        gfd_cuda_ceiling=_version_label(labels, "nvidia.com/cuda.runtime-version")
        or _version_label(labels, "nvidia.com/cuda.runtime"),
        gpu_product=labels.get("nvidia.com/gpu.product"),
        gpu_count=int(count) if count and count.isdigit() else None,
    )  # fmt: skip


def collect(ctx: ProbeContext) -> ProbeOutput:
    if ctx.options.pod is None:
        raise NotAvailable(reasons.NO_POD)
    out = ProbeOutput()
    pod = pod_document(ctx)
    assert pod is not None
    out.files.append(CapturedFile("kubernetes/pod.json", document=pod))
    events = None
    namespace = ctx.options.namespace
    try:
        _, events = ctx.json_command("kubectl_events", pod=ctx.options.pod, namespace=namespace)
        out.files.append(CapturedFile("kubernetes/events.json", document=events))
    except (NotAvailable, ProbeFailed) as exc:
        out.notes.append(f"events: {exc}")
    for name, path in (
        ("kubectl_logs_previous", "logs/pod-previous.log"),
        ("kubectl_logs", "logs/pod-current.log"),
    ):
        result = ctx.run(name, pod=ctx.options.pod, namespace=namespace)
        if result.output_path is not None and (result.ok or result.total_bytes):
            out.files.append(ctx.output_file(path, result))  # a log cut at the deadline too
        if not result.ok:
            out.notes.append(f"{path}: {result.failure()}")
        if result.truncated:
            out.notes.append(f"{path}: {result.cut_note()}")
    node = None
    node_name = (pod.get("spec") or {}).get("nodeName")
    if node_name:
        try:
            _, node = ctx.json_command("kubectl_node", node=node_name)
            labels = {
                "metadata": {
                    "name": node_name,
                    "labels": (node.get("metadata") or {}).get("labels"),
                }
            }
            out.files.append(CapturedFile("kubernetes/node-labels.json", document=labels))
        except (NotAvailable, ProbeFailed) as exc:
            out.notes.append(f"node {node_name}: {exc}")
    out.facts = parse_pod(pod, events, node)
    return out


PROBE = Probe("kubernetes", collect, "pod, container statuses, events, logs, node GPU labels")
