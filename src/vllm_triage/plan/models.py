"""The plan artifact (plan.json): the recovery path chosen under the team's constraints, the paths
not chosen and why not, and the change plan.

Machine fields (path ids, versions, classes) are English; every sentence is stored in English as
the message id it was made from (a knowledge text or a message of the plan domain, with no
fields filled in), so that a renderer shows it in the reader's language with one catalog lookup.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from vllm_triage.models import Artifact, CaseArtifact, DriverRequirement, FailureClass, Phase

PathId = Literal[
    "upgrade_driver", "isolated_env", "custom_build", "forward_compat", "no_driver_change"
]
PATHS: tuple[PathId, ...] = (
    "upgrade_driver",
    "isolated_env",
    "custom_build",
    "forward_compat",
    "no_driver_change",
)


class Recommended(Artifact):
    """The path to take, the decisive reason, every reason for it that holds, and its caveats
    (reasons against it that hold but do not outweigh them)."""

    path: PathId
    name: str
    reason: str
    reasons: list[str] = Field(default_factory=list)
    caveats: list[str] = Field(default_factory=list)
    summary: str = ""


class Alternative(Artifact):
    """A path not chosen: the decisive reason against it, and every other one that holds."""

    path: PathId
    name: str
    why_not: str
    against: list[str] = Field(default_factory=list)


class SequenceStep(Artifact):
    """One step of the order the paths come in (an isolated environment until the window...)."""

    path: PathId
    when: str


class BaselineEntry(Artifact):
    """Something to save before the change, with what the case's bundle already shows of it."""

    id: str
    item: str
    now: str | None = None


class DriverTarget(DriverRequirement):
    """The driver the change goes to: the image's three figures (knowledge/drivers.py) against
    the driver installed."""

    installed: str | None = None
    installed_branch: str | None = None
    meets_min: bool = Field(
        default=False, description="the installed driver already meets the floor (min_driver)"
    )
    meets_toolkit: bool = Field(
        default=False, description="the installed driver already meets the toolkit's driver"
    )

    @model_validator(mode="before")
    @classmethod
    def _renamed(cls, data: Any) -> Any:
        """Read a plan written before issue 20, whose `minimum` was the toolkit's driver and
        whose `release` the recommended one."""
        if not isinstance(data, dict) or not _OLD_TARGET.keys() & data.keys():
            return data
        return {
            _OLD_TARGET.get(key, key): value
            for key, value in data.items()
            if key != "minimum_branch"
        }


_OLD_TARGET = {
    "image_cuda": "cuda",
    "minimum": "toolkit_driver",
    "minimum_source": "toolkit_source",
    "already_met": "meets_toolkit",
    "branch": "recommended_branch",
    "branch_type": "recommended_branch_type",
    "release": "recommended_driver",
    "release_as_of": "recommended_as_of",
    "release_certainty": "recommended_certainty",
    "release_source": "recommended_source",
    "release_note": "recommended_note",
    "eol": "recommended_eol",
}


class ForwardCompatCheck(Artifact):
    """Whether CUDA forward compatibility is open to this host, and by which facts."""

    possible: bool
    package: str | None = None
    installed_branch: str | None = None
    branch_type: str | None = None
    supported_bases: list[str] = Field(default_factory=list)
    gpu: str | None = None
    datacenter: bool | None = None
    source: str


class Flow(Artifact):
    """The flow a diagnosis that is not a driver threshold goes to, with its own next steps."""

    id: str
    name: str
    failure_class: FailureClass
    steps: list[str]
    avoid: list[str]
    rungs: list[str] = Field(default_factory=list, description="validate rungs that prove it")


class Reproducibility(Artifact):
    """What a custom build must pin and how to prove it builds again."""

    pin: list[str]
    check: list[str]


class PathRisks(Artifact):
    """What can go wrong on one path of the sequence."""

    path: PathId
    risks: list[str]


class ChangePlan(Artifact):
    """What to do, in order: the path's own steps, the order of the paths, and for a driver
    change the baseline, staged order, rollback, risks, widening conditions and record."""

    steps: list[str] = Field(default_factory=list)
    sequence: list[SequenceStep] = Field(default_factory=list)
    target: DriverTarget | None = None
    forward_compat: ForwardCompatCheck | None = None
    flow: Flow | None = None
    baseline: list[BaselineEntry] = Field(default_factory=list)
    staged_order: list[str] = Field(default_factory=list)
    rollback: list[str] = Field(default_factory=list)
    # the risks of every path of the sequence, in its order (risks_by_path says whose)
    risks: list[str] = Field(default_factory=list)
    risks_by_path: list[PathRisks] = Field(default_factory=list)
    widen_when: list[str] = Field(default_factory=list)
    change_record: list[str] = Field(default_factory=list)
    reproducibility: Reproducibility | None = None
    recheck: list[str] = Field(default_factory=list)


class Constraints(Artifact):
    """The team's constraints as the plan used them (None: not known, planned conservatively)."""

    maintenance_window: bool | None = None
    cluster_can_change: bool | None = None
    deadline_hours: float | None = None
    can_maintain_build: bool | None = None
    gpu: str | None = None
    gpu_datacenter: bool | None = None
    driver: str | None = None
    nodes: list[str] = Field(default_factory=list)
    exclude: list[str] = Field(default_factory=list)
    asked: list[str] = Field(default_factory=list, description="answered at the prompt")


class DiagnosisRef(Artifact):
    """The diagnosis the plan follows."""

    source: str
    cause: FailureClass
    phase: Phase
    confidence: float
    driver_change_advised: bool
    threshold: bool = Field(description="a driver threshold: the only case a driver path is for")
    threshold_finding: bool = Field(
        default=False, description="a driver threshold stands among the other findings"
    )
    created_at: str | None = None


class HostFacts(Artifact):
    """What the plan knows of the host, and from where."""

    driver: str | None = None
    driver_from: str | None = None
    gpu: str | None = None
    gpu_from: str | None = None
    gpu_count: int | None = None
    image_cuda: str | None = None
    image_cuda_from: str | None = None
    node: str | None = None
    bundle: str | None = None


class Plan(CaseArtifact):
    """The answer of `plan`: the recommended path and why, the alternatives and why not, the
    change plan; the constraints, assumptions and facts it rests on."""

    recommended: Recommended
    alternatives: list[Alternative]
    plan: ChangePlan
    constraints: Constraints
    assumptions: list[str] = Field(default_factory=list)
    diagnosis: DiagnosisRef
    host: HostFacts
    notes: list[str] = Field(default_factory=list)
    knowledge_as_of: str | None = None
