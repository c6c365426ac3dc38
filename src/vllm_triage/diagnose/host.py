"""The node's facts resolved once, for every later step: the driver, GPUs and image CUDA from the
facts the diagnosis used (a flag first, then the bundle, then the recipe, then the log: the order
of diagnose/logfacts.py), the rest (node name, kernel, runtime, NCCL, RDMA, ECC) from the bundle.
A value a probe could not read ("unknown") is no fact."""

from __future__ import annotations

from collections.abc import Sequence

from vllm_triage.bundle.models import BundleFacts
from vllm_triage.diagnose.logfacts import source_rank
from vllm_triage.models import Fact, FactKey, HostFact, HostView

# Each view field and the fact keys that give it, the first key preferred.
_FROM_FACTS: dict[str, tuple[FactKey, ...]] = {
    "driver": ("driver_version",),
    "driver_cuda": ("driver_cuda",),
    "gpu": ("gpu",),
    "image_cuda": ("image_cuda", "torch_cuda"),
}
_UNREAD = "unknown"


def host_view(
    facts: Sequence[Fact], bundle: BundleFacts | None = None, bundle_name: str | None = None
) -> HostView:
    """The node as the diagnosis' facts and the bundle describe it."""
    view: dict[str, HostFact | str | None] = {"bundle": bundle_name}
    for name, keys in _FROM_FACTS.items():
        view[name] = _resolved([f for key in keys for f in facts if f.key == key])
    if bundle is not None:
        where = bundle_name
        for name, value in _bundle_values(bundle).items():
            if value and value != _UNREAD:
                view[name] = HostFact(value=value, source="bundle", where=where)
    return HostView.model_validate(view)


def _resolved(found: Sequence[Fact]) -> HostFact | None:
    """The first fact by source (then by key order), with what the others said differently."""
    if not found:
        return None
    ordered = sorted(found, key=lambda fact: source_rank(fact.source))
    first = ordered[0]
    others: dict[str, str] = {}
    for fact in ordered[1:]:
        if fact.value != first.value and fact.source != first.source:
            others.setdefault(fact.source, fact.value)
    where = f"{first.evidence.file}:{first.evidence.line}" if first.evidence else None
    return HostFact(value=first.value, source=first.source, where=where, others=others)


def _bundle_values(facts: BundleFacts) -> dict[str, str | None]:
    """What only the bundle knows, as the plan's baseline shows it (versions and names)."""
    values: dict[str, str | None] = {}
    kube = facts.kubernetes
    values["node"] = (
        facts.host.node_name
        if facts.host and facts.host.node_name != _UNREAD
        else (kube.node if kube else None)
    )
    values["kernel"] = facts.host.kernel if facts.host else None
    gpus = facts.gpu.gpus if facts.gpu else []
    count = len(gpus) or (kube.gpu_count if kube else None)
    values["gpu_count"] = str(count) if count else None
    ecc = [gpu.ecc_uncorrected_volatile for gpu in gpus]
    if any(errors is not None for errors in ecc):
        values["ecc_uncorrected"] = str(sum(errors or 0 for errors in ecc))
    container = facts.container
    if container is not None:
        runtime = [f"{container.engine} {container.engine_version or '?'}"]
        if container.toolkit_version:
            runtime.append(f"nvidia-ctk {container.toolkit_version}")
        if container.container_cli_version:
            runtime.append(f"nvidia-container-cli {container.container_cli_version}")
        if container.runtimes:
            runtime.append(", ".join(container.runtimes))
        values["container_runtime"] = " · ".join(runtime)
    comm = facts.communication
    if comm is not None:
        if comm.nccl_version or comm.settings:
            settings = [f"{k}={v}" for k, v in sorted(comm.settings.items())[:6]]
            values["nccl"] = " · ".join([comm.nccl_version or "?", *settings])
        ports = [
            f"{p.device}/{p.port} {p.state or '?'} {p.link_layer or ''}".strip()
            for p in comm.rdma_ports[:8]
        ]
        if ports or comm.interfaces:
            values["rdma"] = " · ".join([*ports, *comm.interfaces[:8]])
    return values
