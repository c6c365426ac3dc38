"""The artifacts of `record`: the decision record (record.json) and the review `record check` makes
of it.

Machine fields are English (path ids, scope ids, statuses, the artifacts' paths in the case, the
figures as measured). Each judgement carries a `basis`: the key of the sentence
(vllm_triage.record.messages.BASIS) that explains it, and `fields`: the values that sentence is
filled with, already formatted; a renderer shows it in the reader's language with one catalog
lookup. Sentences that come from the knowledge base or the plan are stored as their English text,
which is the message id.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from vllm_triage.models import Artifact, CaseArtifact, FailureClass, Phase
from vllm_triage.plan.models import Constraints, PathId

ScopeId = Literal[
    "model_load",
    "short_text",
    "long_context",
    "image",
    "tool_calls",
    "structured_output",
    "concurrency",
    "multi_node",
]
SCOPES: tuple[ScopeId, ...] = (
    "model_load",
    "short_text",
    "long_context",
    "image",
    "tool_calls",
    "structured_output",
    "concurrency",
    "multi_node",
)
ScopeStatus = Literal["verified", "failed", "not_verified"]
ComparisonId = Literal[
    "start_failure_recurs", "prefix_cache_hits", "tool_calls_correct", "maintenance_acceptable"
]
Answer = Literal["yes", "no", "unknown"]
WideningStatus = Literal["met", "not_met", "unknown"]
TriggerStatus = Literal["met", "not_met", "unknown"]
RollbackTarget = Literal["driver", "image", "nodes"]


class Compared(Artifact):
    """The same rung replayed against a second endpoint (validate --compare-endpoint)."""

    url: str
    status: str | None = Field(description="the rung's status there (None: not climbed)")
    both_passed: bool
    figures: dict[str, list[Any]] = Field(
        default_factory=dict, description="figure -> [this endpoint, the compared endpoint]"
    )


class Proof(Artifact):
    """An artifact of the case behind a judgement, and the figures read from it."""

    artifact: str = Field(description="the file in the case: runs/<UTC>/summary.json, ...")
    created_at: str | None = None
    url: str | None = Field(default=None, description="the endpoint a run validated")
    model: str | None = None
    rung: str | None = None
    status: str | None = Field(default=None, description="the rung's (or the artifact's) status")
    figures: dict[str, Any] = Field(default_factory=dict)
    compared: Compared | None = None


class Judgement(Artifact):
    """Why a judgement came out as it did: a sentence key and its fields."""

    basis: str = Field(description="key of vllm_triage.record.messages.BASIS")
    fields: dict[str, str] = Field(default_factory=dict)


class ScopeItem(Judgement):
    """One part of the verified scope: whether a run proved it, and which run with which figures."""

    id: ScopeId
    status: ScopeStatus
    proof: Proof | None = None
    runs: int = Field(default=0, description="how many runs climbed this rung")


class Unverified(Artifact):
    """Something the record does not prove: a rung no run passed, or what no run can prove."""

    id: str
    name: str = Field(description="English; the message id of its name")
    why: str = Field(description="English; the message id of why it is not verified")
    fields: dict[str, str] = Field(default_factory=dict)
    scope: ScopeId | None = Field(default=None, description="the verified-scope item it is")


class Comparison(Judgement):
    """One of the four comparisons the record answers."""

    id: ComparisonId
    answer: Answer
    good: bool | None = Field(
        default=None, description="whether the answer speaks for the adopted path (None: unknown)"
    )
    proof: list[Proof] = Field(default_factory=list)
    answered_by: str | None = Field(default=None, description="for a question asked: who answered")
    answered_at: str | None = None


class Widening(Judgement):
    """A widening condition of the plan: met, not met or unknown, with the artifact behind it."""

    condition: str = Field(description="English, as the plan stores it (the message id)")
    check: str | None = Field(default=None, description="record.yaml's check for it")
    status: WideningStatus
    proof: list[Proof] = Field(default_factory=list)
    answered_by: str | None = None


class RollbackCondition(Artifact):
    """What sends the driver, the image or the node assignment back (record.yaml)."""

    id: str
    target: RollbackTarget
    when: str = Field(description="English; the message id")


class Trigger(Artifact):
    """A re-evaluation trigger as the record writes it: the review date, or an image tag to watch
    (from the recipe's review_triggers, with their source)."""

    id: str
    kind: Literal["date", "image_tag"]
    name: str = Field(description="English; the message id")
    date: str | None = Field(default=None, description="for the date: the day, ISO 8601")
    registry: str | None = None
    repository: str | None = None
    tags: list[str] = Field(default_factory=list)
    tag_pattern: str | None = None
    min_version: str | None = None
    note: str = ""
    source: str | None = None
    as_of: str | None = None
    certainty: str | None = None


class Review(Artifact):
    """When the decision is looked at again, and what brings that day forward."""

    days: int
    date: str = Field(description="the re-evaluation date, ISO 8601")
    triggers: list[Trigger]


class Adopted(Artifact):
    """The path the team took, and whether it is the plan's recommendation."""

    path: PathId
    name: str = Field(description="English; the message id (knowledge)")
    recommended: PathId
    follows_plan: bool


class Reason(Artifact):
    """Why: the plan's reason for (or against) the adopted path, and the constraints it rests on
    (time available, recovery deadline, ability to maintain dependencies)."""

    plan_reason: str = Field(description="English; the message id")
    other_reasons: list[str] = Field(default_factory=list)
    constraints: Constraints
    given: str | None = Field(default=None, description="the team's own words (--reason)")


class DiagnosisRef(Artifact):
    """The diagnosis the decision follows."""

    artifact: str
    cause: FailureClass
    phase: Phase
    created_at: str | None = None


class DriverChange(Artifact):
    """The driver the decision moves: from the installed one to the plan's recommended target,
    the image's floor and toolkit driver beside it (plan.json's target), and the way back."""

    installed: str | None = None
    min_driver: str | None = Field(default=None, description="the floor the image needs to start")
    toolkit_driver: str | None = None
    recommended_driver: str | None = None
    recommended_branch: str | None = None
    rollback_driver: str | None = Field(default=None, description="the driver to go back to")


class ValidatedOn(Judgement):
    """What the record's evidence was validated on: the newest run tied to the plan's node (the
    node, the driver and GPUs of its baseline, the image served), or why no run is."""

    tied: bool = Field(description="a run counts for the plan's node (judge.Bound)")
    run: str | None = None
    node: str | None = None
    driver: str | None = None
    baseline: str | None = Field(default=None, description="the baseline that gives the driver")
    gpus: int | None = None
    gpu_model: str | None = None
    image: str | None = Field(default=None, description="validate --image; None: not named")
    min_driver: str | None = Field(default=None, description="the floor the driver was held to")


class DecisionRecord(CaseArtifact):
    """The decision after the observation period: what was adopted and why, what is proven and
    what is not, when to roll back, when to look again; with the case's artifacts behind each."""

    adopted: Adopted
    reason: Reason
    verified: list[ScopeItem]
    unverified: list[Unverified]
    rollback: list[RollbackCondition]
    rollback_procedure: list[str] = Field(
        default_factory=list, description="English; the plan's rollback steps"
    )
    review: Review
    comparisons: list[Comparison]
    widening: list[Widening]
    driver: DriverChange | None = Field(
        default=None, description="the driver change decided (None: the plan names no driver)"
    )
    validated_on: ValidatedOn | None = Field(
        default=None, description="the node, driver and image the evidence was validated on"
    )
    diagnosis: DiagnosisRef
    plan: str = Field(description="the plan's file in the case")
    plan_created_at: str | None = None
    recipe: str | None = Field(default=None, description="the recipe whose triggers are watched")
    runs: list[str] = Field(default_factory=list, description="the validation runs read")
    notes: list[Judgement] = Field(default_factory=list)


class TriggerResult(Judgement):
    """One trigger as `record check` saw it."""

    id: str
    kind: Literal["date", "image_tag"]
    name: str
    status: TriggerStatus
    registry: str | None = None
    repository: str | None = None
    found: list[str] = Field(default_factory=list, description="tags that meet it (the first 20)")
    tags_read: int | None = Field(default=None, description="tags the registry listed")


class RecordReview(CaseArtifact):
    """The answer of `record check`: is the decision due for review, and why."""

    record: str
    record_created_at: str | None = None
    adopted: PathId
    review_date: str
    today: str
    due: bool
    triggers: list[TriggerResult]
    # the ids of the triggers that could not be checked (status unknown)
    unchecked: list[str] = Field(default_factory=list)
