"""What the tool knows of an image without running it: the facts of its config and where they
came from (the artifact `resolve_image` returns; preflight and fleet embed it as it is)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from vllm_triage.image.config import ImageCuda
from vllm_triage.versions import CudaVersion, VersionError

Source = Literal["file", "engine", "registry", "tag"]
"""Where an image's facts came from, most authoritative first: a config file given with
--image-config, the local container engine's copy, the registry, and (a fallback that only
knows the CUDA) the tag through the knowledge base."""


class RequireCondition(BaseModel):
    """One condition of NVIDIA_REQUIRE_CUDA: `cuda>=13.0`, `brand=tesla`, `driver<536`."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    key: str
    op: str
    value: str


class RequireClause(BaseModel):
    """Conditions joined by commas: all of them must hold (AND)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    text: str
    conditions: list[RequireCondition]


class BrandRule(BaseModel):
    """A brand clause: GPUs of this brand with a driver in [driver_min, driver_below) may run the
    image although the `cuda>=` clause fails (the branches cuda-compat supports on them)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    brand: str
    driver_min: str | None = None
    driver_below: str | None = None
    branch: str | None = Field(
        default=None, description="r535 when the clause is driver>=535,driver<536"
    )


class RequireCuda(BaseModel):
    """NVIDIA_REQUIRE_CUDA parsed as the NVIDIA container toolkit reads it: clauses separated by
    spaces are alternatives (OR), conditions within a clause separated by commas all hold (AND).
    Source: libnvidia-container, "NVIDIA_REQUIRE_*" in its documentation."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    raw: str
    cuda_min: str | None = None
    clauses: list[RequireClause] = []
    brands: list[BrandRule] = []
    unparsed: list[str] = []


class ResolvedImage(BaseModel):
    """An image's config facts, where they came from, and the digest they belong to.

    `digest` is what the reference resolves to at the registry (the multi-arch index's digest
    when there is one: pin the image with `pinned`); `manifest_digest` the platform's own image
    manifest; `config_digest` the config the facts were read from. A `tag` source knows only the
    CUDA (and says so in `warnings`)."""

    model_config = ConfigDict(extra="forbid", defer_build=True)

    reference: str | None = None
    source: Source
    source_detail: str
    registry: str | None = None
    repository: str | None = None
    tag: str | None = None
    digest: str | None = None
    manifest_digest: str | None = None
    config_digest: str | None = None
    pinned: str | None = None
    media_type: str | None = None
    platform: str | None = None
    cuda: str | None = None
    cuda_from: str | None = None
    require_cuda: RequireCuda | None = None
    architectures: list[str] = []
    architectures_from: str | None = None
    vllm_version: str | None = None
    vllm_version_from: str | None = None
    created: str | None = None
    user: str | None = Field(
        default=None, description="the config's User (None: unset, the container runs as root)"
    )
    labels: dict[str, str] = {}
    warnings: list[str] = []

    def image_cuda(self) -> ImageCuda | None:
        """The CUDA facts in the form the compat check takes (None when the image states none)."""
        if self.cuda is None:
            return None
        try:
            version = CudaVersion.parse(self.cuda)
        except VersionError:
            return None
        require = self.require_cuda.raw if self.require_cuda else None
        return ImageCuda(version, require, self.cuda_from or self.source)
