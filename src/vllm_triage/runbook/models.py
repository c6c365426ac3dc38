"""The artifact of `case show`: each artifact of a case with its verdict at a glance, and the
runbook's next step.

Its top-level fields (schema_version, case, artifacts[kind, path, created_at, verdict],
next_step[step, command, why]) are a contract; fields (and kinds, and steps) may be added. The
`verdict`, `command` and `why` strings are English; the structured fields beside them are what
a rendering in another language is made from (vllm_triage.runbook.verdicts and the reasons of
vllm_triage.runbook.steps), so the JSON reads the same whatever the reader's locale.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field

from vllm_triage.models import SCHEMA_VERSION, Artifact, FailureClass, Phase, Verdict

Step = Literal[
    "collect",
    "diagnose",
    "plan",
    "baseline_capture",
    "validate",
    "baseline_compare",
    "rollback",
    "record",
    "review",
    "report",
    "done",
]
"""The runbook's steps, in its order (rollback and review are the ways back into it; done: every
step has its artifact)."""

ArtifactKind = Literal[
    "bundle",
    "diagnosis",
    "plan",
    "baseline",
    "validation",
    "baseline_comparison",
    "prefix_check",
    "record",
    "report",
    "fleet_scan",
]


class BundleEntry(Artifact):
    """A bundle collect wrote: how its probes went, and whether its files still match."""

    kind: Literal["bundle"] = "bundle"
    path: str
    archive: str | None = Field(description="its .tar.gz, when there is one")
    created_at: str | None
    verdict: str
    probes: dict[str, int] = Field(description="probes per state: ok, failed, timed_out...")
    failed_probes: list[str] = Field(description="the probes that failed or timed out")
    problems: int = Field(description="files that no longer match the manifest, and the like")


class DiagnosisEntry(Artifact):
    """A diagnosis: its primary cause and the driver advice (history: an earlier one)."""

    kind: Literal["diagnosis"] = "diagnosis"
    path: str
    created_at: str | None
    verdict: str
    history: bool = Field(description="an earlier diagnosis, replaced by a later one")
    cause: FailureClass
    phase: Phase
    confidence: float
    driver_change_advised: bool
    compat: Verdict | None = Field(description="the driver / CUDA threshold verdict, if known")


class PlanEntry(Artifact):
    """A plan: the recovery path it recommends and, for a driver change, the driver target."""

    kind: Literal["plan"] = "plan"
    path: str
    created_at: str | None
    verdict: str
    history: bool = Field(description="an earlier plan, replaced by a later one")
    recommended: str = Field(description="the path id: upgrade_driver, isolated_env, ...")
    recommended_name: str = Field(description="the path's name (English; translated when shown)")
    alternatives: list[str] = Field(default_factory=list, description="the paths not chosen")
    cause: FailureClass = Field(description="the cause of the diagnosis the plan follows")
    diagnosis_created_at: str | None = Field(
        default=None, description="when the diagnosis it follows was made"
    )
    min_driver: str | None = Field(
        default=None, description="the floor the image's CUDA needs to start"
    )
    toolkit_driver: str | None = Field(
        default=None, description="the driver the image's toolkit update shipped with"
    )
    recommended_driver: str | None = Field(
        default=None, description="the recommended release (current release of a long-term branch)"
    )
    recommended_branch: str | None = None
    flow: str | None = Field(
        default=None, description="the flow of a diagnosis that is no threshold"
    )


class BaselineCaptureEntry(Artifact):
    """A baseline (baselines/<label>/): the node's driver, GPUs, jobs, and the short request."""

    kind: Literal["baseline"] = "baseline"
    path: str
    created_at: str | None
    verdict: str
    label: str
    complete: bool = Field(description="baseline.json is there (false: the capture did not end)")
    node: str | None = None
    driver: str | None = None
    gpus: int | None = None
    jobs: int | None = Field(default=None, description="processes holding a GPU at the capture")
    endpoint_ok: bool | None = Field(
        default=None, description="the existing model's short request (None: not asked for)"
    )
    endpoint_seconds: float | None = None
    failed_probes: list[str] = Field(default_factory=list)


class StartStability(Artifact):
    """Start stability of a run (`validate --start-cmd FILE --starts N`)."""

    requested: int
    ready: int
    engine_init_s: list[float] = Field(description="engine initialisation time of each ready start")


class EndpointPair(Artifact):
    """The same requests replayed against a second endpoint (`validate --compare-endpoint`)."""

    url: str
    passed: bool = Field(description="the compared endpoint's ladder passed")
    both_passed: bool


class ValidationEntry(Artifact):
    """A validation run: passed or not, and the rung it failed at."""

    kind: Literal["validation"] = "validation"
    path: str
    created_at: str | None
    verdict: str
    passed: bool | None = Field(description="null when the run has no summary (it was killed)")
    failed_rung: str | None = None
    interrupted: bool = False
    url: str | None = None
    model: str | None = None
    rungs: int = Field(default=0, description="rungs climbed (passed, failed or not supported)")
    starts: StartStability | None = None
    comparison: EndpointPair | None = None

    @property
    def succeeded(self) -> bool:
        """The run passed, every start it asked for became ready, and so did the compared side."""
        return (
            self.passed is True
            and (self.starts is None or self.starts.ready == self.starts.requested)
            and (self.comparison is None or self.comparison.both_passed)
        )


class ComparisonEntry(Artifact):
    """The comparison of two baselines: regressions apart from the expected change."""

    kind: Literal["baseline_comparison"] = "baseline_comparison"
    path: str
    created_at: str | None
    verdict: str
    history: bool = Field(description="an earlier comparison, replaced by a later one")
    before: str = Field(description="the label of the baseline before")
    after: str = Field(description="the label of the baseline after")
    result: Literal["regression", "no_regression"]
    regressions: int
    expected: int
    changed: int
    regression_checks: list[str] = Field(default_factory=list)
    expected_checks: list[str] = Field(default_factory=list)


class PrefixCheckEntry(Artifact):
    """A prefix-check report: the share of the prompts the cache could reuse."""

    kind: Literal["prefix_check"] = "prefix_check"
    path: str
    created_at: str | None
    verdict: str
    reusable_share: float
    reusable_share_if_fixed: float | None
    problems: list[str] = Field(description="the divergence classes that are problems")


class RecordEntry(Artifact):
    """The decision record: the adopted path, the review date, and whether the review is due."""

    kind: Literal["record"] = "record"
    path: str
    created_at: str | None
    verdict: str
    history: bool = Field(description="an earlier record, replaced by a later one")
    adopted: str | None = Field(default=None, description="the adopted path id, when it says")
    review_on: str | None = Field(default=None, description="the re-evaluation date (ISO)")
    due: bool | None = Field(default=None, description="the review date has come (None: no date)")


class FleetScanEntry(Artifact):
    """A fleet scan (`fleet scan --case`): its nodes per status and the rollout waves."""

    kind: Literal["fleet_scan"] = "fleet_scan"
    path: str
    created_at: str | None
    verdict: str
    history: bool = Field(description="an earlier scan, replaced by a later one")
    image: str | None = None
    cuda: str = Field(description="the image's CUDA")
    nodes: int
    counts: dict[str, int] = Field(description="nodes per status: ready, needs_upgrade, ...")
    min_driver: str | None = Field(
        default=None, description="the driver the nodes that need an upgrade need (the highest)"
    )
    waves: int = Field(description="rollout waves")


class ReportEntry(Artifact):
    """The report page (report.html, and report.pdf when printed)."""

    kind: Literal["report"] = "report"
    path: str
    created_at: str | None = Field(description="when the page was written (the file's time)")
    verdict: str
    pdf: str | None = None
    stale: bool = Field(description="an artifact of the case is newer than the page")


class UnreadableEntry(Artifact):
    """An artifact that could not be read (corrupt, or written by a newer vllm-triage): listed
    with the one-line reason, so that the rest of the case is still shown."""

    kind: Literal["unreadable"] = "unreadable"
    artifact: ArtifactKind = Field(description="what kind of artifact it is")
    path: str
    created_at: None = None
    verdict: str
    error: str = Field(description="the one-line reason it could not be read")
    history: bool = False


CaseEntry = Annotated[
    BundleEntry
    | DiagnosisEntry
    | PlanEntry
    | BaselineCaptureEntry
    | ValidationEntry
    | ComparisonEntry
    | PrefixCheckEntry
    | RecordEntry
    | FleetScanEntry
    | ReportEntry
    | UnreadableEntry,
    Field(discriminator="kind"),
]


class Said(Artifact):
    """A sentence of the runbook by its id (vllm_triage.runbook.steps.REASONS, NOTES) and the
    fields it is filled with, so a rendering can say it in the reader's language."""

    id: str
    fields: dict[str, str] = Field(default_factory=dict)
    text: str = Field(description="the sentence in English")


class NextStep(Artifact):
    """What the runbook says to do next for this case, and why."""

    step: Step
    command: str = Field(description="the command to run, or what to do where no command does it")
    why: str
    reason: str = Field(default="", description="the reason's id (vllm_triage.runbook.steps)")
    fields: dict[str, str] = Field(default_factory=dict, description="what the reason names")
    notes: list[Said] = Field(default_factory=list, description="said after the reason")


class CaseSummary(Artifact):
    """The answer of `case show`."""

    schema_version: int = SCHEMA_VERSION
    case: str
    artifacts: list[CaseEntry] = Field(description="in the runbook's order, oldest first per kind")
    next_step: NextStep
