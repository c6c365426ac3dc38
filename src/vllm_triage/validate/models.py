"""The artifacts of `validate`: one record per request (JSONL) and the run's summary (JSON).

The summary's top-level fields (schema_version, passed, rungs[name, status, reason, figures],
prefix_cache, tool_calls) are a contract that users' scripts read.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from pydantic import Field

from vllm_triage.models import SCHEMA_VERSION, Artifact

RungName = Literal[
    "health",
    "short_text",
    "target_context",
    "same_prefix",
    "concurrency",
    "image",
    "tool_calls",
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


class ToolCallSummary(Artifact):
    requests: int = 0
    valid: int = 0
    format_errors: int = 0
    errors: list[str] = Field(default_factory=list)


class ValidationRun(Artifact):
    """The summary of a ladder run: which rungs passed, and the figures each measured."""

    schema_version: int = SCHEMA_VERSION
    passed: bool
    url: str
    model: str | None = None
    rungs: list[RungResult]
    prefix_cache: PrefixCacheSummary = Field(default_factory=PrefixCacheSummary)
    tool_calls: ToolCallSummary = Field(default_factory=ToolCallSummary)
    interrupted: bool = False
    records: str | None = Field(default=None, description="path of the requests JSONL")
