"""The shape of every knowledge file, as pydantic models: each fact carries its source and date."""

from __future__ import annotations

import re
from datetime import date
from typing import Annotated, Any, Literal

import re2
from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

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
    model_ids: list[str] = Field(default_factory=list, description="hub ids the recipe is for")


class VllmArgument(BaseModel):
    """One vLLM launch flag that triage reads, and the LaunchArgs field it fills."""

    model_config = ConfigDict(extra="forbid")

    flag: str = Field(pattern=r"^--[a-z0-9-]+$")
    aliases: list[str] = Field(default_factory=list)
    field: str
    type: Literal["str", "int", "float", "bool", "size"]


class VllmArgs(Provenance):
    """How a vLLM launch command is read: entry points, mapped flags, switches."""

    entrypoints: list[list[str]]
    arguments: list[VllmArgument]
    environment: dict[str, str]
    switches: list[str]


class FactCheck(Provenance):
    """A check over a bundle's facts: its wording and class (the condition is code, by id)."""

    id: str = Field(pattern=r"^VF[0-9]{3}$")
    name: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    cause: FailureClass
    phase: Phase
    confidence: float = Field(ge=0.0, le=1.0)
    summary: str
    next_steps: list[str] = Field(min_length=1)
    avoid: list[str] = Field(min_length=1)


RedactionKind = Literal["value", "name", "argument", "header", "url"]


_QUANTIFIER = re.compile(r"\{[0-9]*(?:,[0-9]*)?\}")


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class that opens at start."""
    index = start + 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):
        index += 1
    while pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index + 1


def _group_end(pattern: str, start: int) -> int:
    """The index after the group that opens at start."""
    depth, index = 0, start
    while True:
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = _class_end(pattern, index)
            continue
        depth += {"(": 1, ")": -1}.get(char, 0)
        index += 1
        if depth == 0:
            return index


def re2_superset(pattern: str) -> str:
    """The pattern for RE2, matching at least wherever Python's re matches it, at the same start.

    Lookarounds are dropped (they only restrict), possessive quantifiers and atomic groups become
    plain ones, groups become non-capturing, \\Z becomes \\z. Used as the redaction prefilter.
    """
    out: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\":
            out.append("\\z" if pattern.startswith("\\Z", index) else pattern[index : index + 2])
            index += 2
        elif char == "[":
            end = _class_end(pattern, index)
            out.append(pattern[index:end])
            index = end
        elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), index):
            index = _group_end(pattern, index)
        elif pattern.startswith(("(?>", "(?P<"), index):
            out.append("(?:")
            index = pattern.index(">", index) + 1
        elif char == "(" and not pattern.startswith("(?", index):
            out.append("(?:")
            index += 1
        elif quantifier := _QUANTIFIER.match(pattern, index):
            out.append(quantifier.group())
            index = quantifier.end()
            index += pattern.startswith("+", index)
        elif char in "*+?":
            out.append(char)
            index += 1 + pattern.startswith("+", index + 1)
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _compiled(pattern: str) -> re.Pattern[str]:
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"pattern {pattern!r} does not compile: {exc}") from exc


class RedactionRule(Row):
    """A secret the bundle must never contain: its shape or the name that holds it, with tests."""

    id: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    name: str
    kind: RedactionKind
    match: str
    keep_prefix: str | None = None
    exceptions: list[str] = Field(default_factory=list)
    context: str | None = Field(
        default=None,
        description="argument rules: what must come before the option (`docker login` for -p)",
    )
    multiple: bool = Field(
        default=False, description="argument rules: the option takes one or more values"
    )
    explanation: str
    examples: Examples

    @field_validator("id")
    @classmethod
    def _not_reserved(cls, value: str) -> str:
        if value == "omitted":
            raise ValueError("'omitted' is the allow-list's count in the report, not a rule id")
        return value

    @field_validator("exceptions")
    @classmethod
    def _plain_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"exception {name!r} is not a plain name")
        return value

    @field_validator("keep_prefix")
    @classmethod
    def _prefix_groups(cls, value: str | None) -> str | None:
        if value is not None and _compiled(value).groups:
            raise ValueError(f"keep_prefix {value!r} must not define groups")
        return value

    @model_validator(mode="after")
    def _consistent(self) -> RedactionRule:
        compiled = _compiled(self.match)
        if re.search(r"\(\?[aiLmsux]+\)", self.match):
            raise ValueError(f"{self.id}: use scoped flags (?i:...), the rules share one pattern")
        secret_group = list(compiled.groupindex) == ["secret"] and compiled.groups == 1
        if self.kind == "url" and not secret_group:
            raise ValueError(f"{self.id}: a url pattern needs exactly one group, named secret")
        if self.kind == "value" and compiled.groups and not secret_group:
            raise ValueError(f"{self.id}: a value pattern may only define the group secret")
        if self.kind in ("value", "url") and compiled.match(""):
            raise ValueError(f"{self.id}: the pattern matches the empty string")
        try:
            re2.compile(re2_superset(self.match))
        except Exception as exc:
            raise ValueError(f"{self.id}: no RE2 prefilter can be made of it: {exc}") from exc
        if self.kind in ("name", "argument", "header") and compiled.groups:
            raise ValueError(f"{self.id}: a {self.kind} pattern must not define groups")
        if self.exceptions and self.kind != "name":
            raise ValueError(f"{self.id}: only name rules have exceptions")
        if self.keep_prefix is not None and self.kind != "header":
            raise ValueError(f"{self.id}: only header rules have keep_prefix")
        if (self.context is not None or self.multiple) and self.kind != "argument":
            raise ValueError(f"{self.id}: only argument rules have context or multiple")
        if self.context is not None:
            if _compiled(self.context).groups:
                raise ValueError(f"{self.id}: context {self.context!r} must not define groups")
            try:
                re2.compile(re2_superset(self.context))
            except Exception as exc:
                raise ValueError(f"{self.id}: no RE2 prefilter can be made of it: {exc}") from exc
        return self


class EnvAllow(Row):
    """Environment variables a bundle keeps (values still redacted): prefixes and exact names."""

    why: str
    prefixes: list[str] = Field(default_factory=list)
    names: list[str] = Field(default_factory=list)

    @field_validator("prefixes", "names")
    @classmethod
    def _env_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"{name!r} is not an environment variable name or prefix")
        return value

    @model_validator(mode="after")
    def _not_empty(self) -> EnvAllow:
        if not self.prefixes and not self.names:
            raise ValueError("an allow-list entry needs prefixes or names")
        return self


class Redaction(BaseModel):
    """What `collect` redacts (rules, in order of precedence) and which variables it keeps."""

    model_config = ConfigDict(extra="forbid", arbitrary_types_allowed=True)

    as_of: date
    rules: list[RedactionRule] = Field(min_length=1)
    env_allow: list[EnvAllow] = Field(min_length=1)

    def rule(self, rule_id: str) -> RedactionRule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    def allowed(self, name: str) -> bool:
        """Whether the allow-list keeps the variable (secret rules are checked separately)."""
        return any(
            name in entry.names or name.startswith(tuple(entry.prefixes))
            for entry in self.env_allow
        )


class MetricAliases(Provenance):
    """vLLM metric names by what they measure, newest first (names changed between versions)."""

    metrics: dict[str, list[str]] = Field(min_length=1)
