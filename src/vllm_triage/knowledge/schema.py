"""The shape of every knowledge file, as pydantic models: each fact carries its source and date."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal

import re2
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator

from vllm_triage.models import FailureClass, Phase
from vllm_triage.versions import CudaVersion, DriverVersion

Certainty = Literal["primary", "secondary", "inferred", "memory"]

# Patterns must run unchanged in RE2 (the scanner), Python re (the classifier) and grep -E (the
# benchmark's reference), so the constructs that differ between them are refused.
_NON_PORTABLE = re.compile(r"\\d|\\D|\(\?|[*+?}]\?|\\A|\\Z|\\z")


def _driver(value: Any) -> DriverVersion:
    return value if isinstance(value, DriverVersion) else DriverVersion.parse(str(value))


def _cuda(value: Any) -> CudaVersion:
    return value if isinstance(value, CudaVersion) else CudaVersion.parse(str(value))


def _optional_cuda(value: Any) -> CudaVersion | None:
    return None if value in (None, "") else _cuda(value)


def _yes_no(value: Any) -> bool:
    text = str(value).strip().lower()
    if text in {"yes", "true"}:
        return True
    if text in {"no", "false"}:
        return False
    raise ValueError(f"expected yes or no, got {value!r}")


Driver = Annotated[DriverVersion, BeforeValidator(_driver)]
Cuda = Annotated[CudaVersion, BeforeValidator(_cuda)]
OptionalCuda = Annotated[CudaVersion | None, BeforeValidator(_optional_cuda)]
YesNo = Annotated[bool, BeforeValidator(_yes_no)]


def check_portable_pattern(pattern: str) -> str:
    """Refuse a pattern that RE2, Python re or grep -E would read differently, or not at all."""
    if _NON_PORTABLE.search(pattern):
        raise ValueError(f"pattern {pattern!r} uses a construct grep -E lacks (\\d, (?...), lazy)")
    try:
        re.compile(pattern)
        re2.compile(pattern)
    except Exception as exc:
        raise ValueError(f"pattern {pattern!r} does not compile: {exc}") from exc
    return pattern


class Row(BaseModel):
    """A fact with its provenance."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True, frozen=True)

    certainty: Certainty
    source: str = Field(min_length=3)
    as_of: date


class CudaToolkit(Row):
    """CUDA toolkit release -> the minimum Linux driver it ships with (NVIDIA Table 3)."""

    cuda_version: Cuda
    release: str
    min_linux_driver: Driver
    source_note: str = ""


class CudaFamily(Row):
    """Minor-version compatibility floor of a CUDA major (NVIDIA Table 2)."""

    major: int
    min_linux_driver: Driver
    note: str = ""


class DriverBranch(Row):
    """A driver branch: its type and the newest CUDA it supports natively."""

    branch: str = Field(pattern=r"^r[0-9]{3}$")
    type: Literal["ltsb", "production", "new_feature", "developer", "unknown"]
    cuda_ceiling: OptionalCuda
    first_release: str
    notes: str = ""

    @property
    def number(self) -> int:
        return int(self.branch[1:])


class Gpu(Row):
    """A GPU model as nvidia-smi names it, with compute capability and data-center status."""

    name: str
    nvidia_smi_pattern: str
    compute_capability: str = Field(pattern=r"^[0-9]{1,2}\.[0-9]$")
    memory_gb: str
    datacenter: YesNo

    @field_validator("nvidia_smi_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        re.compile(value)
        return value

    def matches(self, product_name: str) -> bool:
        return re.search(self.nvidia_smi_pattern, product_name.strip(), re.IGNORECASE) is not None


class Provenance(BaseModel):
    """Source and date of a YAML document."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    source: str
    as_of: date
    source_note: str = ""
    certainty: Certainty = "primary"


class ForwardCompat(Provenance):
    """Which cuda-compat packages run on which base branches, and on which GPUs at all."""

    gpu_rule: str
    branch_rule: str
    limits: list[str]
    packages: dict[str, list[str]]

    @field_validator("packages")
    @classmethod
    def _valid_keys(cls, value: dict[str, list[str]]) -> dict[str, list[str]]:
        for cuda, branches in value.items():
            CudaVersion.parse(cuda)
            for branch in branches:
                if not re.fullmatch(r"r[0-9]{3}", branch):
                    raise ValueError(f"package {cuda}: {branch!r} is not a branch like r570")
        return value


class NamedTag(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    tag: str
    cuda: Cuda
    note: str
    certainty: Certainty
    source: str


class ReleaseDefault(BaseModel):
    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    since: str = Field(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")
    cuda: Cuda
    certainty: Certainty
    source: str
    note: str

    @property
    def since_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.since.split("."))


class ImageMap(Provenance):
    """How vLLM image tags map to CUDA builds (a fallback when the image config is not at hand)."""

    repositories: list[str]
    named_tags: list[NamedTag]
    suffix_pattern: str
    default_cuda_by_release: list[ReleaseDefault]


class Milestone(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    phase: Phase
    patterns: list[str]

    @field_validator("patterns")
    @classmethod
    def _portable(cls, value: list[str]) -> list[str]:
        return [check_portable_pattern(p) for p in value]


class Phases(Provenance):
    """vLLM's start-up milestones in order; the last one seen before an error gives its phase."""

    milestones: list[Milestone]


class Examples(BaseModel):
    model_config = ConfigDict(extra="forbid")

    positive: list[str] = Field(min_length=1)
    negative: list[str] = Field(min_length=1)


class Signature(BaseModel):
    """A log signature, in the style of a lint rule: stable id, evidence patterns, advice, tests."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(pattern=r"^VT[0-9]{3}$")
    name: str = Field(pattern=r"^[a-z0-9-]+$")
    cause: FailureClass
    cause_by_phase: dict[Phase, FailureClass] = Field(default_factory=dict)
    tier: Literal["root", "symptom", "stall"]
    phase: Phase
    confidence: float = Field(gt=0.0, le=1.0)
    patterns: list[str] = Field(min_length=1)
    extract: dict[str, str] = Field(default_factory=dict)
    summary: str
    explanation: str
    next_steps: list[str] = Field(min_length=1)
    avoid: list[str] = Field(min_length=1)
    driver_change_advised: bool
    explained_by_driver_threshold: bool = False
    source: str
    as_of: date
    examples: Examples

    @field_validator("patterns")
    @classmethod
    def _portable(cls, value: list[str]) -> list[str]:
        return [check_portable_pattern(p) for p in value]

    @field_validator("extract")
    @classmethod
    def _one_group(cls, value: dict[str, str]) -> dict[str, str]:
        for name, pattern in value.items():
            if re.compile(pattern).groups != 1:
                raise ValueError(f"extract {name!r} needs exactly one group: {pattern!r}")
        return value

    def cause_in(self, phase: Phase) -> FailureClass:
        return self.cause_by_phase.get(phase, self.cause)


class RecipeFlag(BaseModel):
    model_config = ConfigDict(extra="forbid")

    flag: str
    why: str


class RecipeToolCalls(BaseModel):
    model_config = ConfigDict(extra="forbid")

    flags: list[str]
    reasoning_parser: str | None = None
    note: str


class RecipeContext(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_model_len: int
    note: str


class RecipeAll2All(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rdma: str
    nvlink: str
    note: str


class Recipe(Provenance):
    """What a model needs from the stack: vLLM version, image CUDA, driver branch, flags."""

    id: str
    name: str
    architecture: str
    min_vllm_version: str
    image: str
    image_cuda: Cuda
    cuda_variants_available: list[str]
    min_driver_branch: str = Field(pattern=r"^r[0-9]{3}$")
    driver_note: str
    recommended_hardware: str
    startup_note: str
    required_flags: list[RecipeFlag]
    tool_calls: RecipeToolCalls
    context: RecipeContext
    all2all_backends: RecipeAll2All
