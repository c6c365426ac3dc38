"""The artifacts of `validate`: one record per request (JSONL) and the run's summary (JSON).

The summary's top-level fields (schema_version, passed, rungs[name, status, reason, figures],
prefix_cache, tool_calls) are a contract that users' scripts read; later fields are additions
(structured_output, tool_calls.mode, starts, comparison), absent or empty in older summaries.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from vllm_triage.models import Artifact, CaseArtifact, Finding, Phase

RungName = Literal[
    "health",
    "short_text",
    "target_context",
    "same_prefix",
    "concurrency",
    "image",
    "tool_calls",
    "structured_output",
    "multi_node",
]
RUNG_ORDER: tuple[RungName, ...] = get_args(RungName)
RungStatus = Literal["passed", "failed", "skipped", "not_supported"]


class RequestRecord(Artifact):
    """One HTTP request of the ladder, as measured by the client (a line of requests.jsonl)."""

    rung: str
    kind: str
    started_at: float = Field(description="seconds since the run started")
    stream: bool
    status_code: int | None = None
    ok: bool = False
    error: str | None = None
    ttft_s: float | None = Field(default=None, description="first content-bearing SSE event")
    first_chunk_s: float | None = Field(
        default=None,
        description="first SSE event with a choice, content or not (`vllm bench serve`'s TTFT)",
    )
    e2e_s: float | None = None
    inter_token_s: list[float] = Field(
        default_factory=list, description="gaps between content-bearing events (the first 4096)"
    )
    content_events: int = 0
    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    cached_tokens: int | None = None
    finish_reason: str | None = None
    content_chars: int = 0
    tool_calls: int = 0


class RungResult(Artifact):
    name: RungName
    status: RungStatus
    reason: str | None = None
    duration_s: float = 0.0
    figures: dict[str, Any] = Field(default_factory=dict)
    findings: list[str] = Field(default_factory=list, description="configuration findings")


class PrefixCacheSummary(Artifact):
    enabled: bool | None = None
    queries: int = 0
    hits: int = 0


ToolsMode = Literal["strict", "loose"]


class ToolCallSummary(Artifact):
    requests: int = 0
    valid: int = 0
    format_errors: int = 0
    errors: list[str] = Field(default_factory=list)
    mode: ToolsMode = Field(
        default="strict",
        description="strict: tools sent with `strict: true` (the schema enforced while decoding); "
        "loose: without it, as most agents send them (--loose-tools)",
    )


class StructuredOutputSummary(Artifact):
    """The structured-output rung's tally: answers valid, and format errors with their reasons."""

    requests: int = 0
    valid: int = 0
    format_errors: int = 0
    errors: list[str] = Field(default_factory=list)


StartOutcome = Literal["ready", "exited", "timed_out", "not_started", "interrupted"]


class StartRecord(Artifact):
    """One start of the server by `--start-cmd`: its outcome and how long it took."""

    number: int = Field(description="1 for the first start")
    outcome: StartOutcome = Field(
        description="ready: /health answered 200; exited: the process ended first; timed_out: "
        "no 200 within the start deadline; not_started: the command could not be run"
    )
    ready_s: float | None = Field(
        default=None, description="from the process start until /health answered 200"
    )
    engine_init_s: float | None = Field(
        default=None,
        description="from the process start until the log's own server_start milestone (the "
        "engine initialised, the API server starting); None when the log never said so",
    )
    milestones: dict[str, float] = Field(
        default_factory=dict,
        description="seconds from the process start until each start-up milestone (knowledge "
        "phases) first appeared in the log, as it was read while the server started",
    )
    exit_code: int | None = Field(default=None, description="when the process ended by itself")
    stopped_by: Literal["sigterm", "sigkill"] | None = Field(
        default=None, description="how the process group was stopped after this start"
    )
    reason: str | None = None
    log: str | None = Field(default=None, description="the start's log in the run folder, redacted")
    log_bytes: int = 0
    diagnosis: Finding | None = Field(
        default=None, description="a failed start's primary finding, diagnosed from its log"
    )
    phase_reached: Phase | None = None


class StartSummary(Artifact):
    """Start stability (`--start-cmd FILE --starts N`): N starts on a node the user named as
    isolated, each timed and stopped, the ladder run against the last one."""

    command: list[str] = Field(description="the command as run, redacted")
    node: str = Field(description="the host that ran the starts")
    requested: int
    ready: int = Field(default=0, description="starts that reached /health 200")
    engine_init_s: list[float] = Field(
        default_factory=list, description="engine initialisation time of each ready start"
    )
    ready_s: list[float] = Field(
        default_factory=list, description="time to /health 200 of each ready start"
    )
    starts: list[StartRecord] = Field(default_factory=list)

    @property
    def all_ready(self) -> bool:
        return self.ready == self.requested and len(self.starts) == self.requested


class RunNode(Artifact):
    """Where a run ran: the node named (`validate --node`, else the host that ran --start-cmd)
    and, from the case's newest baseline of that node, the driver and GPUs there. Each part is
    None when nothing ties it: a name alone proves no driver."""

    name: str | None = None
    named_by: Literal["flag", "starts"] | None = None
    baseline: str | None = Field(
        default=None, description="the label of the case's baseline of this node that ties it"
    )
    baseline_at: str | None = Field(default=None, description="when that baseline was captured")
    driver: str | None = None
    gpus: int | None = None
    gpu_model: str | None = None


class ValidationRun(CaseArtifact):
    """The summary of a ladder run: which rungs passed, and the figures each measured."""

    passed: bool
    url: str
    model: str | None = None
    rungs: list[RungResult]
    prefix_cache: PrefixCacheSummary = Field(default_factory=PrefixCacheSummary)
    tool_calls: ToolCallSummary = Field(default_factory=ToolCallSummary)
    interrupted: bool = False
    records: str | None = Field(default=None, description="path of the requests JSONL")
    structured_output: StructuredOutputSummary = Field(default_factory=StructuredOutputSummary)
    starts: StartSummary | None = Field(
        default=None, description="start stability, when --start-cmd started the server"
    )
    comparison: EndpointComparison | None = Field(
        default=None, description="the same ladder replayed against a second endpoint"
    )
    # Added in issue 20: which node, driver, GPUs and image the run proves something about.
    node: RunNode = Field(default_factory=RunNode)
    image: str | None = Field(default=None, description="the image served (validate --image)")


class RungComparison(Artifact):
    """One rung on both endpoints: statuses, whether both passed, figures side by side."""

    name: RungName
    this: RungStatus | None = Field(description="on this run's endpoint (None: not climbed)")
    other: RungStatus | None = Field(description="on the compared endpoint")
    both_passed: bool
    same_status: bool = Field(description="the same status on both (e.g. both not_supported)")
    figures: dict[str, list[Any]] = Field(
        default_factory=dict,
        description="each scalar figure either side measured: [this endpoint, compared endpoint]",
    )


class EndpointComparison(Artifact):
    """The same requests against a second endpoint (e.g. the isolated environment and the
    upgraded node): that side's whole run, and the two side by side, rung by rung."""

    url: str = Field(description="the compared endpoint, without credentials")
    model: str | None = None
    passed: bool = Field(description="the compared endpoint's ladder passed")
    both_passed: bool = Field(description="both ladders passed")
    rungs: list[RungComparison]
    records: str | None = Field(default=None, description="the compared side's requests JSONL")
    run: ValidationRun = Field(description="the compared endpoint's run, as its own summary")
