"""The artifact of `preflight`: go or no-go, and each check with its one-line reason.

The fields schema_version, go and checks (each with id, ok, severity and message) are a contract
that init containers, wrappers and users' scripts read; fields may be added, never renamed.

A check's `severity` says what its failure means: `error` makes the whole result a no-go,
`warning` is said but lets the start go on (a check that could not run, a start that works only
under a condition). A passing check keeps the severity its failure would have had.
"""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from vllm_triage.models import SCHEMA_VERSION, Artifact

Severity = Literal["error", "warning"]


class PreflightCheck(Artifact):
    """One check: what it compared, and for a failure what to do."""

    id: str = Field(description="driver, gpu_arch, gpus_visible, shm, model_path, capacity, ...")
    ok: bool
    severity: Severity
    message: str = Field(description="one line: what was found, with the figures")
    fix: str | None = Field(default=None, description="one line: what to do, for a failure")


class HostFacts(Artifact):
    """What preflight knew about the node, and where each fact came from."""

    driver: str | None = None
    driver_from: str | None = None
    cuda_ceiling: str | None = None
    gpu: str | None = None
    gpu_count: int | None = None
    gpu_from: str | None = None
    shm_bytes: int | None = None
    shm_from: str | None = None
    image: str | None = None
    image_pinned: str | None = Field(
        default=None, description="registry/repository@digest the image resolved to"
    )
    image_cuda: str | None = None
    image_cuda_from: str | None = None
    min_driver: str | None = Field(
        default=None, description="the floor the image's CUDA needs to start (knowledge/drivers.py)"
    )
    toolkit_driver: str | None = Field(
        default=None, description="the driver the image's toolkit update shipped with"
    )
    recommended_driver: str | None = Field(
        default=None, description="the current release of the recommended long-term branch"
    )
    recommended_branch: str | None = None
    recipe: str | None = None
    profile: str | None = None
    container_user: str | None = None


class PreflightResult(Artifact):
    """Go (exit 0) or no-go (exit 1): no-go when any check with severity error failed."""

    schema_version: int = SCHEMA_VERSION
    go: bool
    checks: list[PreflightCheck]
    host: HostFacts = Field(default_factory=HostFacts)

    @property
    def failed(self) -> list[PreflightCheck]:
        """The checks that stop the start."""
        return [c for c in self.checks if not c.ok and c.severity == "error"]

    @property
    def warnings(self) -> list[PreflightCheck]:
        return [c for c in self.checks if not c.ok and c.severity == "warning"]
