"""The artifacts vllm-triage writes and reads: versioned pydantic models, JSON on disk."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

SCHEMA_VERSION = 1

FailureClass = Literal[
    "driver_too_old",
    "unsupported_gpu_arch",
    "driver_library_mismatch",
    "compat_lib_error",
    "no_gpu_visible",
    "oom_at_load",
    "kv_cache_insufficient",
    "oom_under_load",
    "model_path_or_access",
    "nccl_or_network",
    "shm_insufficient",
    "chat_template",
    "tool_call_parser",
    "model_arch_unsupported",
    "dependency_mismatch",
    "bad_cli_argument",
    "fabric_manager_missing",
    "host_memory",
    "cache_dir_not_writable",
    "unknown",
]

Phase = Literal["before_weights", "during_load", "after_start", "unknown"]
PHASE_ORDER: tuple[Phase, ...] = ("before_weights", "during_load", "after_start")

Role = Literal["root", "cascade", "related", "threshold"]

Verdict = Literal["compatible", "conditional", "forward_compat_only", "incompatible"]


class Artifact(BaseModel):
    """Base of every artifact: strict fields, a schema version."""

    model_config = ConfigDict(extra="forbid")


class Evidence(Artifact):
    """One log line that supports a finding, where it was found."""

    file: str
    line: int
    text: str


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


class CompatVerdict(Artifact):
    """Whether a CUDA build can run on a driver, by NVIDIA's rules, with the table rows used."""

    schema_version: int = SCHEMA_VERSION
    verdict: Verdict
    driver: str
    driver_branch: str
    driver_cuda_ceiling: str | None
    cuda: str
    gpu: str | None = None
    min_driver: str | None
    min_branch: str | None
    rule: str
    conditions: list[str]
    source: str
    table_rows: list[str]
    explanation: str


class Diagnosis(Artifact):
    """The answer of `diagnose`: a primary finding, secondary findings, the compat verdict."""

    schema_version: int = SCHEMA_VERSION
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
