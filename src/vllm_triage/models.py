"""The artifacts vllm-triage writes and reads: versioned pydantic models, JSON on disk."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from typing import Literal, Self

from pydantic import BaseModel, ConfigDict, Field

from vllm_triage import __version__
from vllm_triage.vocabulary import PHASE_ORDER as PHASE_ORDER
from vllm_triage.vocabulary import FactKey as FactKey
from vllm_triage.vocabulary import FailureClass as FailureClass
from vllm_triage.vocabulary import Phase as Phase

SCHEMA_VERSION = 1

# request: a request the running server refused (a finding about clients, not a failed server);
# teardown: a message of the shutdown that followed a stop signal.
Role = Literal["root", "cascade", "related", "threshold", "request", "teardown"]

Verdict = Literal["compatible", "conditional", "forward_compat_only", "incompatible"]


class Artifact(BaseModel):
    """Base of every artifact: strict fields, a schema version. Validators are built on first use
    (defer_build): a command pays only for the artifacts it makes, not for every one it imports."""

    model_config = ConfigDict(extra="forbid", defer_build=True)


class InputFile(Artifact):
    """One input file an artifact was made from: its name as given, its content's sha256 and size
    (of what was read, for standard input). Options given as text (a launch command) are not
    listed: a plain digest of a short text that holds a secret would confirm a guess of it (the
    redactor keys its digests for that reason)."""

    name: str
    sha256: str
    size: int


class CaseArtifact(Artifact):
    """Base of the artifacts a case folder holds: every one says which schema it follows, which
    vllm-triage made it, when, and from which inputs (an additive envelope: artifacts written
    before it was added read with the envelope empty)."""

    schema_version: int = SCHEMA_VERSION
    tool_version: str | None = Field(default=None, description="the vllm-triage that made it")
    created_at: str | None = Field(default=None, description="when, UTC, ISO 8601")
    made_from: list[InputFile] = Field(
        default_factory=list, description="the inputs it was made from, with sha256 and size"
    )

    def stamped(self, made_from: Sequence[InputFile] = ()) -> Self:
        """A copy carrying this tool's version, the time now and its inputs."""
        return self.model_copy(
            update={
                "tool_version": __version__,
                "created_at": datetime.now(UTC).isoformat(),
                "made_from": list(made_from),
            }
        )


class Evidence(Artifact):
    """One log line that supports a finding, where it was found (or a fact of a bundle's
    facts.json, named by `fact`: such evidence has no line)."""

    file: str
    line: int
    text: str
    fact: str | None = Field(
        default=None,
        description="the fact's dotted name in `file` (container.shm_size_bytes) for evidence "
        "that is a fact, not a log line (its line is 0)",
    )

    @property
    def where(self) -> str:
        """Where it was found, as people read it: `file:line` for a line of a log, `file: fact`
        for a fact of a bundle, the file alone for what has neither (a compat verdict)."""
        if self.fact:
            return f"{self.file}: {self.fact}"
        return f"{self.file}:{self.line}" if self.line > 0 else self.file


class Said(Artifact):
    """A sentence as the tool composed it, kept so that it can be said in the reader's language:
    its English template (the catalogs' message id, with {fields}) and the values filled in. A
    value is shown as it is (a version, a line number, a log excerpt), or, when it is wording
    itself (a list of Said), translated too and joined with "; "."""

    text: str
    fields: dict[str, str | list[Said]] = Field(default_factory=dict)

    def say(self, tr: Callable[..., str] | None = None) -> str:
        """The sentence through a catalog (`tr`), in English without one."""
        values = {
            name: value if isinstance(value, str) else "; ".join(part.say(tr) for part in value)
            for name, value in self.fields.items()
        }
        if tr is not None:
            return tr(self.text, **values)
        return self.text.format(**values) if values else self.text


def said(text: str, /, **fields: str | int | Said | list[Said]) -> Said:
    """A Said from a template and its values (numbers as text, one Said as a list of one)."""
    return Said(text=text, fields={name: _said_value(value) for name, value in fields.items()})


def _said_value(value: str | int | Said | list[Said]) -> str | list[Said]:
    if isinstance(value, Said):
        return [value]
    return value if isinstance(value, list) else str(value)


def join_sentences(sentences: Sequence[str]) -> str:
    """Sentences one after another: a space between them, none after a full-width stop (。)."""
    text = ""
    for sentence in sentences:
        if not sentence:
            continue
        gap = "" if not text or text.endswith(("\u3002", "\uff01", "\uff1f")) else " "
        text += gap + sentence
    return text


class Wording(Artifact):
    """How a finding's texts were composed, for saying them in another language: the summary's
    sentences, and one Said per next step and per avoid. An empty list: that field's texts are
    the catalogs' message ids as they are (a signature's own advice)."""

    summary: list[Said] = Field(default_factory=list)
    next_steps: list[Said] = Field(default_factory=list)
    avoid: list[Said] = Field(default_factory=list)


class DifferentialCause(Artifact):
    """Another cause the evidence fits: its share of the real reports with this evidence, and
    the one check that tells it from the primary."""

    cause: FailureClass
    weight: float = Field(ge=0.0, le=1.0)
    check: str = Field(description="English; the knowledge base's message id")


class Finding(Artifact):
    """One failure cause with the lines that prove it and what to do (and not do) about it."""

    cause: FailureClass
    phase: Phase
    confidence: float = Field(ge=0.0, le=1.0)
    evidence: list[Evidence]
    summary: str
    next_steps: list[str]
    avoid: list[str]
    driver_change_advised: bool
    rule: str | None = Field(default=None, description="signature id (or compat rule) behind it")
    role: Role = "root"
    facts: dict[str, str] = Field(default_factory=dict)
    count: int | None = Field(
        default=None, description="how many lines showed it (request findings: how many requests)"
    )
    # Added in issue 11 (optional, so findings written before read unchanged).
    wording: Wording | None = Field(
        default=None, description="the composed texts' templates and values (None: as they are)"
    )
    # Added in issue 19 (optional, so findings written before read unchanged).
    count_exact: bool | None = Field(
        default=None,
        description="False: `count` is a lower bound (not every later line was read); None: no count",
    )
    # Added in issue 21: for evidence several causes share, this cause's base rate.
    weight: float | None = Field(
        default=None, description="this cause's share of the real reports with this evidence"
    )


class CompatWording(Artifact):
    """How a verdict's texts were composed, for saying them in another language: the
    explanation's sentences, and one Said per condition, piece of advice and table row cited."""

    explanation: list[Said] = Field(default_factory=list)
    conditions: list[Said] = Field(default_factory=list)
    advice: list[Said] = Field(default_factory=list)
    table_rows: list[Said] = Field(default_factory=list)


class DriverRequirement(Artifact):
    """The three driver figures of one CUDA build (knowledge/drivers.py): the floor that decides
    whether it starts, the driver its toolkit shipped with, and the recommended target."""

    cuda: str | None = Field(default=None, description="the build's CUDA (None: no figures)")
    min_driver: str | None = Field(
        default=None, description="the floor: below it the build cannot start (no compat package)"
    )
    min_branch: str | None = None
    min_rule: Literal["minor_version_compatibility", "toolkit"] | None = Field(
        default=None,
        description="minor_version_compatibility: the CUDA family's floor (cuda_families.csv); "
        "toolkit: the toolkit's own driver, where no family floor is known",
    )
    min_source: str | None = None
    toolkit_driver: str | None = Field(
        default=None,
        description="the driver the build's toolkit update shipped with (cuda_toolkits.csv): "
        "needed to JIT its PTX and for the newest features",
    )
    toolkit_release: str | None = Field(default=None, description="the table row: 13.0 Update 2")
    toolkit_lower_bound: bool = Field(
        default=False,
        description="the table gives no driver for this update: the row of an earlier one, a floor",
    )
    toolkit_source: str | None = None
    recommended_driver: str | None = Field(
        default=None, description="the current release of the recommended long-term branch"
    )
    recommended_branch: str | None = None
    recommended_branch_type: str | None = None
    recommended_as_of: str | None = None
    recommended_certainty: str | None = None
    recommended_source: str | None = None
    recommended_note: str | None = None
    recommended_eol: str | None = None


class CompatVerdict(Artifact):
    """Whether a CUDA build can run on a driver, by NVIDIA's rules, with the table rows used."""

    schema_version: int = SCHEMA_VERSION
    verdict: Verdict
    driver: str
    driver_branch: str
    driver_cuda_ceiling: str | None
    cuda: str
    gpu: str | None = None
    min_driver: str | None = Field(description="the floor that decides the verdict")
    min_branch: str | None
    rule: str
    conditions: list[str]
    source: str
    table_rows: list[str]
    explanation: str
    # Added in issue 11 (optional, so verdicts written before read unchanged).
    cause: FailureClass | None = Field(
        default=None,
        description="what stops the build: driver_too_old (a driver upgrade or cuda-compat lifts "
        "it) or unsupported_gpu_arch (no driver does: the GPU's architecture); none when it runs",
    )
    gpu_model: str | None = Field(default=None, description="the GPU table row --gpu resolved to")
    compute_capability: str | None = None
    advice: list[str] = Field(
        default_factory=list, description="what to do, from the knowledge base; empty when it runs"
    )
    wording: CompatWording | None = Field(
        default=None, description="the texts' templates and values (None: as they are)"
    )
    # Added in issue 20: the build's other two driver figures (DriverRequirement).
    toolkit_driver: str | None = Field(
        default=None, description="the driver the build's toolkit update shipped with"
    )
    recommended_driver: str | None = Field(
        default=None, description="the current release of the recommended long-term branch"
    )
    recommended_branch: str | None = None


FactSource = Literal["flag", "bundle", "log", "recipe"]


class Fact(Artifact):
    """A version or name the inputs state (a driver version, the CUDA PyTorch was built with),
    with where it was read: a log line, a command-line flag or a bundle's facts."""

    key: FactKey
    value: str
    source: FactSource
    evidence: Evidence | None = Field(default=None, description="the log line, for a log fact")


class Requests(Artifact):
    """Requests the log's access lines show, by outcome (counting stops at a cap per file: then
    the counts are lower bounds, and `capped` says so)."""

    ok: int = Field(default=0, description="answered 2xx/3xx, health and metrics probes aside")
    probes: int = Field(default=0, description="health, metrics and model-list probes answered")
    client_errors: int = 0
    server_errors: int = 0
    by_status: dict[str, int] = Field(default_factory=dict)
    first_error: Evidence | None = None
    capped: bool = False


class Serving(Artifact):
    """How the server's life shows in the log: started or not, the requests it answered, and
    whether (and how) it was stopped."""

    started: bool
    started_at: Evidence | None = None
    last_milestone: str | None = Field(default=None, description="the last start-up milestone")
    last_milestone_at: Evidence | None = None
    requests: Requests = Field(default_factory=Requests)
    served: bool = Field(default=False, description="requests were processed (not only probes)")
    stopped_by_signal: bool = False
    stop: Evidence | None = Field(default=None, description="the first line of the stop")
    stop_time: str | None = Field(default=None, description="the stop's time as the log wrote it")
    shutdown_complete: bool = False
    healthy: bool = False


class RuleMatch(Artifact):
    """One rule that matched (or a fact decision), and what the weighing made of it."""

    rule: str
    cause: FailureClass
    tier: str
    phase: Phase
    file: str
    line: int
    confidence: float
    outcome: Literal["primary", "outranked", "teardown", "request", "ignored"]
    why: str
    why_wording: Said | None = Field(default=None, description="`why`'s template and values")


class HostFact(Artifact):
    """One fact of the node, with where it was read and what other sources said of it."""

    value: str
    source: FactSource
    where: str | None = Field(
        default=None, description="the log line (file:line) or the bundle it was read from"
    )
    others: dict[str, str] = Field(
        default_factory=dict, description="a different value another source gave, by source"
    )


class HostView(Artifact):
    """The node as the case knows it, each fact resolved once (diagnose/host.py): a flag first,
    then the bundle, then the recipe, then the log. Later steps read it from diagnosis.json; a
    fact none of them holds is None (unknown), never asked for again."""

    bundle: str | None = Field(default=None, description="the bundle read, when there was one")
    node: HostFact | None = None
    driver: HostFact | None = None
    driver_cuda: HostFact | None = Field(default=None, description="the driver's CUDA ceiling")
    gpu: HostFact | None = None
    gpu_count: HostFact | None = None
    image_cuda: HostFact | None = None
    kernel: HostFact | None = None
    container_runtime: HostFact | None = None
    nccl: HostFact | None = None
    rdma: HostFact | None = None
    ecc_uncorrected: HostFact | None = Field(
        default=None, description="volatile uncorrectable ECC errors over all GPUs"
    )


class Diagnosis(CaseArtifact):
    """The answer of `diagnose`: a primary finding, secondary findings, the compat verdict."""

    primary: Finding
    findings: list[Finding]
    compat: CompatVerdict | None
    inputs: list[str]
    lines_read: int
    phase_reached: Phase
    milestones: dict[str, int] = Field(
        default_factory=dict, description="first line of each start-up milestone seen"
    )
    notes: list[str] = Field(default_factory=list)
    facts: list[Fact] = Field(
        default_factory=list, description="versions and names the inputs state, and where"
    )
    serving: Serving | None = Field(
        default=None, description="how far the server got, the requests it answered, its stop"
    )
    decision: list[RuleMatch] = Field(
        default_factory=list, description="every rule that matched and why the primary won"
    )
    notes_wording: list[Said] = Field(
        default_factory=list,
        description="the notes' templates and values, one per note (empty: as they are)",
    )
    differential: list[DifferentialCause] = Field(
        default_factory=list,
        description="the other causes the primary's evidence fits, by weight, each with the "
        "check that tells it from the primary",
    )
    host: HostView = Field(
        default_factory=HostView, description="the node's facts, each once, with its source"
    )
