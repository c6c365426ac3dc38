"""Which node a run proves something about: the name given, tied to the driver and GPUs that the
case's newest baseline of that node recorded. A run on a node the case has no baseline of is
tied to nothing but its name, and the record treats its driver as unknown."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, ValidationError

from vllm_triage.case import BASELINE_FILE, Case, CaseError, read_artifact
from vllm_triage.validate.models import RunNode


class _Gpu(BaseModel):
    model_config = ConfigDict(extra="ignore")

    name: str | None = None


class _NodeGpu(BaseModel):
    model_config = ConfigDict(extra="ignore")

    driver_version: str | None = None
    gpus: list[_Gpu] = []


class _BaselineView(BaseModel):
    """What a run reads of a baseline (baseline/ is a sibling layer: only these fields)."""

    model_config = ConfigDict(extra="ignore")

    label: str
    node: str | None = None
    created_at: str | None = None
    gpu: _NodeGpu | None = None


def same_node(one: str, other: str) -> bool:
    """Two names of one node: equal ignoring case, or one the other's short host name."""
    a, b = one.strip().lower(), other.strip().lower()
    if a == b:
        return True
    return ("." not in a or "." not in b) and a.split(".")[0] == b.split(".")[0]


def tie_node(case: Case, name: str | None, named_by: str | None) -> RunNode:
    """The run's node with the driver and GPUs of the case's newest baseline of it."""
    if not name:
        return RunNode()
    node = RunNode(name=name, named_by="flag" if named_by == "flag" else "starts")
    found: list[_BaselineView] = []
    for folder in case.baselines():
        try:
            baseline = read_artifact(folder / BASELINE_FILE, _BaselineView)
        except (CaseError, ValidationError):
            continue  # an unfinished or foreign capture ties nothing
        if baseline.node and same_node(baseline.node, name):
            found.append(baseline)
    if not found:
        return node
    newest = max(found, key=lambda baseline: baseline.created_at or "")
    gpus = newest.gpu.gpus if newest.gpu else []
    return node.model_copy(
        update={
            "baseline": newest.label,
            "baseline_at": newest.created_at,
            "driver": newest.gpu.driver_version if newest.gpu else None,
            "gpus": len(gpus) or None,
            "gpu_model": gpus[0].name if gpus else None,
        }
    )
