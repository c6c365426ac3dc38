"""The shape of every knowledge file, as pydantic models: each fact carries its source and date.

The models build their validators on first use (defer_build): a knowledge base that comes from
the cache (vllm_triage.knowledge.cache) is never validated again, so a command does not pay for
building them. No `from __future__ import annotations`: pydantic reads annotations that Python
has already evaluated faster than strings it must evaluate itself (a quarter of this module's
import time)."""

import re
from datetime import date
from functools import cached_property
from typing import Annotated, Any, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field, field_validator, model_validator

from vllm_triage.knowledge.texts import Text
from vllm_triage.models import FactKey, FailureClass, Phase
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


def _optional_driver(value: Any) -> DriverVersion | None:
    return None if value in (None, "") else _driver(value)


def _empty_none(value: Any) -> Any:
    return None if value == "" else value


def _names(value: Any) -> Any:
    """A CSV cell of names separated by | (a list passes through)."""
    if isinstance(value, str):
        return [name.strip() for name in value.split("|") if name.strip()]
    return value


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
OptionalDriver = Annotated[DriverVersion | None, BeforeValidator(_optional_driver)]
YesNo = Annotated[bool, BeforeValidator(_yes_no)]


def _re2_compile(pattern: str) -> Any:
    """Compile with RE2 (imported here: only validation needs it, not a knowledge base that
    comes from the cache)."""
    import re2

    return re2.compile(pattern)


def check_portable_pattern(pattern: str) -> str:
    """Refuse a pattern that RE2, Python re or grep -E would read differently, or not at all."""
    if _NON_PORTABLE.search(pattern):
        raise ValueError(f"pattern {pattern!r} uses a construct grep -E lacks (\\d, (?...), lazy)")
    try:
        re.compile(pattern)
        _re2_compile(pattern)
    except Exception as exc:
        raise ValueError(f"pattern {pattern!r} does not compile: {exc}") from exc
    return pattern


class Row(BaseModel):
    """A fact with its provenance."""

    model_config = ConfigDict(
        defer_build=True, extra="forbid", arbitrary_types_allowed=True, frozen=True
    )

    certainty: Certainty
    source: str = Field(min_length=3)
    as_of: date


class CudaToolkit(Row):
    """CUDA toolkit release -> the minimum Linux driver it ships with (NVIDIA Table 3); an empty
    driver is a release whose minimum no source read gives (13.5: the notes give none)."""

    cuda_version: Cuda
    release: str
    min_linux_driver: OptionalDriver
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
    type_certainty: Annotated[Certainty | None, BeforeValidator(_empty_none)] = Field(
        default=None, description="the certainty of the type alone (the row's when empty)"
    )
    type_source: str = ""
    cuda_ceiling: OptionalCuda
    first_release: str
    notes: str = ""

    @property
    def number(self) -> int:
        return int(self.branch[1:])

    @property
    def type_certainty_or_row(self) -> Certainty:
        return self.type_certainty or self.certainty


# GPU Feature Discovery writes nvidia.com/gpu.product as the NVML name with spaces as hyphens and
# an optional -SHARED (time-slicing) or -MIG-<profile> suffix (k8s-device-plugin,
# internal/lm/resource.go, productLabel). That form, nvidia-smi's own (NVIDIA A100-SXM4-80GB) and
# torch's all come down to one key: the suffix removed, hyphens and underscores read as spaces.
_GFD_SUFFIX = re.compile(r"(?:-MIG-[0-9][0-9A-Za-z.+_]*)?(?:-SHARED)?$", re.IGNORECASE)
_NAME_SEPARATORS = re.compile(r"[\s_-]+")


def gpu_name_key(name: str) -> str:
    """The GPU name the table's patterns are written against: `NVIDIA-H100-80GB-HBM3-SHARED`,
    `NVIDIA-H100-80GB-HBM3-MIG-1g.10gb` and `NVIDIA H100 80GB HBM3` all read `NVIDIA H100 80GB HBM3`."""
    return _NAME_SEPARATORS.sub(" ", _GFD_SUFFIX.sub("", name.strip(), count=1)).strip()


def compute_capability_tuple(value: str) -> tuple[int, int]:
    major, _, minor = value.partition(".")
    return int(major), int(minor or 0)


ForwardCompatSupport = Literal["yes", "no", "uncertain"]


class Gpu(Row):
    """A GPU model as nvidia-smi names it, with compute capability and data-center status.

    The pattern is matched against gpu_name_key(name), so it is written with spaces where
    nvidia-smi has hyphens, and one pattern matches the nvidia-smi, torch and GPU Feature
    Discovery forms. `examples` are names that must resolve to this row (knowledge check)."""

    name: str
    nvidia_smi_pattern: str
    examples: Annotated[list[str], BeforeValidator(_names)] = Field(default_factory=list)
    compute_capability: str = Field(pattern=r"^[0-9]{1,2}\.[0-9]$")
    architecture: str = ""
    memory_gb: str
    datacenter: YesNo
    forward_compat: Annotated[ForwardCompatSupport | None, BeforeValidator(_empty_none)] = Field(
        default=None,
        description="whether NVIDIA supports forward compatibility on it (as `datacenter` when "
        "empty); uncertain where NVIDIA gives no list (NGC Server Ready RTX SKUs)",
    )

    @field_validator("nvidia_smi_pattern")
    @classmethod
    def _compiles(cls, value: str) -> str:
        re.compile(value)
        if "-" in value or "_" in value:
            raise ValueError(
                f"pattern {value!r}: write it with spaces for hyphens (it is matched against the "
                "name with hyphens and underscores read as spaces)"
            )
        return value

    @model_validator(mode="after")
    def _examples_match(self) -> "Gpu":
        for example in self.examples:
            if not self.matches(example):
                raise ValueError(f"{self.name}: example {example!r} does not match its pattern")
        return self

    def matches(self, product_name: str) -> bool:
        key = gpu_name_key(product_name)
        return re.search(self.nvidia_smi_pattern, key, re.IGNORECASE) is not None

    @property
    def forward_compat_support(self) -> ForwardCompatSupport:
        if self.forward_compat is not None:
            return self.forward_compat
        return "yes" if self.datacenter else "no"

    @property
    def capability(self) -> tuple[int, int]:
        return compute_capability_tuple(self.compute_capability)


class GpuLimit(Row):
    """A limit no driver change lifts, for GPUs below a compute capability: the last CUDA major
    that builds for them, or the last driver branch that supports them."""

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    architectures: list[str] = Field(min_length=1)
    below_compute_capability: str = Field(pattern=r"^[0-9]{1,2}\.[0-9]$")
    last_cuda_major: int | None = None
    last_driver_branch: str | None = Field(default=None, pattern=r"^r[0-9]{3}$")
    summary: str
    source_note: str = ""

    @model_validator(mode="after")
    def _one_limit(self) -> "GpuLimit":
        if (self.last_cuda_major is None) == (self.last_driver_branch is None):
            raise ValueError(f"{self.id}: give exactly one of last_cuda_major, last_driver_branch")
        return self

    def applies_to(self, gpu: Gpu) -> bool:
        return gpu.capability < compute_capability_tuple(self.below_compute_capability)

    @property
    def last_branch_number(self) -> int | None:
        return int(self.last_driver_branch[1:]) if self.last_driver_branch else None


class Provenance(BaseModel):
    """Source, date and certainty of a YAML document (the certainty is always stated)."""

    model_config = ConfigDict(defer_build=True, extra="forbid", arbitrary_types_allowed=True)

    source: str
    as_of: date
    source_note: str = ""
    certainty: Certainty


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
    model_config = ConfigDict(defer_build=True, extra="forbid", arbitrary_types_allowed=True)

    tag: str
    cuda: Cuda
    note: str
    certainty: Certainty
    source: str


class ReleaseDefault(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid", arbitrary_types_allowed=True)

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
    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str
    phase: Phase
    patterns: list[str]

    @field_validator("patterns")
    @classmethod
    def _portable(cls, value: list[str]) -> list[str]:
        return [check_portable_pattern(p) for p in value]


class Examples(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    positive: list[str] = Field(min_length=1)
    negative: list[str] = Field(min_length=1)


def _one_group_each(patterns: list[str]) -> list[str]:
    """Portable patterns whose one capturing group holds the value to read."""
    for pattern in patterns:
        check_portable_pattern(pattern)
        if re.compile(pattern).groups != 1:
            raise ValueError(f"pattern {pattern!r} needs exactly one group (the value)")
    return patterns


class LifecycleEvent(BaseModel):
    """A line about the server's stop: a stop signal, an orderly shutdown, its end."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    kind: Literal["stop_signal", "shutdown", "shutdown_done"]
    patterns: list[str] = Field(min_length=1)
    examples: Examples

    @field_validator("patterns")
    @classmethod
    def _portable(cls, value: list[str]) -> list[str]:
        return [check_portable_pattern(p) for p in value]


class RequestLine(BaseModel):
    """An access-log line of one request; the pattern's one group is its HTTP status."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    patterns: list[str] = Field(min_length=1)
    probes: list[str] = Field(
        default_factory=list, description="health and metrics probes: answered, not served"
    )
    examples: dict[str, str] = Field(min_length=1, description="line -> the status it reads")

    _groups = field_validator("patterns")(_one_group_each)

    @field_validator("probes")
    @classmethod
    def _portable(cls, value: list[str]) -> list[str]:
        return [check_portable_pattern(p) for p in value]


class LogFactRule(BaseModel):
    """A version or name the log states about its own stack; the pattern's group is the value.
    decode: cuda_api turns 12080 into 12.8 (PyTorch's "found version", NCCL's cudaDriverVersion),
    cu_tag turns a wheel tag's 124 into 12.4."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9_]+$")
    key: FactKey
    decode: Literal["text", "cuda_api", "cu_tag"] = "text"
    patterns: list[str] = Field(min_length=1)
    examples: dict[str, str] = Field(min_length=1, description="line -> the value it reads")

    _groups = field_validator("patterns")(_one_group_each)


class Phases(Provenance):
    """What a log says about the run besides its errors: vLLM's start-up milestones in order (the
    last one seen before an error gives its phase), the lines of a stop, access-log lines, and
    the versions and names it states."""

    milestones: list[Milestone]
    lifecycle: list[LifecycleEvent] = Field(default_factory=list)
    requests: list[RequestLine] = Field(default_factory=list)
    facts: list[LogFactRule] = Field(default_factory=list)


class Signature(BaseModel):
    """A log signature, in the style of a lint rule: stable id, evidence patterns, advice, tests."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^VT[0-9]{3}$")
    name: str = Field(pattern=r"^[a-z0-9-]+$")
    cause: FailureClass
    cause_by_phase: dict[Phase, FailureClass] = Field(default_factory=dict)
    # request: a request the running server refused (the server itself is fine)
    tier: Literal["root", "symptom", "stall", "request"]
    phase: Phase
    confidence: float = Field(gt=0.0, le=1.0)
    patterns: list[str] = Field(min_length=1)
    extract: dict[str, str] = Field(default_factory=dict)
    outranks: list[str] = Field(
        default_factory=list, description="ids of earlier errors this one explains (it wins)"
    )
    summary: Text
    explanation: Text
    next_steps: list[Text] = Field(min_length=1)
    avoid: list[Text] = Field(min_length=1)
    driver_change_advised: bool
    explained_by_driver_threshold: bool = False
    source: str
    certainty: Certainty
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
    model_config = ConfigDict(defer_build=True, extra="forbid")

    flag: str
    why: str
    severity: Literal["error", "warning"] = Field(
        default="warning",
        description="what `preflight` makes of a launch without it: error stops the start "
        "(the server would fail or lose what the profile is for), warning only says so",
    )


class RecipeToolCalls(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    flags: list[str]
    reasoning_parser: str | None = None
    note: str


class RecipeContext(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    max_model_len: int
    note: str


class RecipeAll2All(BaseModel):
    model_config = ConfigDict(defer_build=True, extra="forbid")

    rdma: str
    nvlink: str
    note: str
    source: str | None = Field(default=None, description="where the backends are named")


class ReviewTrigger(Row):
    """An event that sends a decision made for the recipe's model back to review (`record` lists
    it, `record check` watches it): an image tag appearing in a registry's tag list. It is met
    when a tag of `repository` is one of `tags`, or matches `tag_pattern` (Python re, whole tag)
    with its `version` group at least `min_version`."""

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    kind: Literal["image_tag"] = "image_tag"
    name: Text
    registry: str = Field(
        default="https://registry-1.docker.io",
        pattern=r"^https?://[A-Za-z0-9.\-]+(:[0-9]+)?$",
        description="the OCI distribution API's base URL",
    )
    repository: str = Field(pattern=r"^[a-z0-9]+([._/-][a-z0-9]+)*$")
    tags: list[str] = Field(default_factory=list, description="tag names that meet it")
    tag_pattern: str | None = Field(default=None, description="tags that meet it (Python re)")
    min_version: str | None = Field(default=None, pattern=r"^[0-9]+(\.[0-9]+)*$")
    note: Text = ""

    @model_validator(mode="after")
    def _watches_something(self) -> "ReviewTrigger":
        if not self.tags and self.tag_pattern is None:
            raise ValueError(f"review trigger {self.id}: give tags, tag_pattern or both")
        if self.tag_pattern is not None:
            try:
                compiled = re.compile(self.tag_pattern)
            except re.error as exc:
                raise ValueError(f"review trigger {self.id}: tag_pattern: {exc}") from None
            if self.min_version is not None and "version" not in compiled.groupindex:
                raise ValueError(
                    f"review trigger {self.id}: min_version needs a (?P<version>...) group"
                )
        elif self.min_version is not None:
            raise ValueError(f"review trigger {self.id}: min_version needs a tag_pattern")
        return self


class RecipeProfile(BaseModel):
    """One serving profile of a recipe (aggregated on Blackwell, the decode side of a
    prefill/decode split...) and the flags it sets, on top of the recipe's required_flags."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z0-9]+(-[a-z0-9]+)*$")
    name: str
    mode: Literal["aggregated", "prefill", "decode"]
    hardware: str
    flags: list[RecipeFlag]
    env: dict[str, str] = Field(default_factory=dict)
    note: str = ""


class Recipe(Provenance):
    """What a model needs from the stack: vLLM version, image CUDA, driver branch, flags (those of
    every profile in required_flags, each profile's own in profiles)."""

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
    profiles: list[RecipeProfile] = Field(min_length=1)
    default_profile: str = Field(description="the profile checks use when none is named")
    review_triggers: list[ReviewTrigger] = Field(
        default_factory=list, description="what sends a decision for this model back to review"
    )

    @model_validator(mode="after")
    def _profiles_consistent(self) -> "Recipe":
        ids = [profile.id for profile in self.profiles]
        if len(set(ids)) != len(ids):
            raise ValueError(f"recipe {self.id}: a profile id is defined twice")
        if self.default_profile not in ids:
            raise ValueError(
                f"recipe {self.id}: default_profile {self.default_profile!r} is not one of its "
                f"profiles ({', '.join(ids)})"
            )
        return self


class VllmArgument(BaseModel):
    """One vLLM launch flag that triage reads, and the LaunchArgs field it fills."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

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
    summary: Text
    next_steps: list[Text] = Field(min_length=1)
    avoid: list[Text] = Field(min_length=1)


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
    def _consistent(self) -> "RedactionRule":
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
            _re2_compile(re2_superset(self.match))
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
                _re2_compile(re2_superset(self.context))
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
    def _not_empty(self) -> "EnvAllow":
        if not self.prefixes and not self.names:
            raise ValueError("an allow-list entry needs prefixes or names")
        return self


class Redaction(BaseModel):
    """What `collect` redacts (rules, in order of precedence) and which variables it keeps."""

    model_config = ConfigDict(defer_build=True, extra="forbid", arbitrary_types_allowed=True)

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


ShapeKind = Literal["timestamp", "random_id"]


class PrefixShape(Row):
    """A value that changes from request to request (a date, an id): found where two prompts
    first differ, it explains the difference; its kind is the divergence class it is reported as."""

    id: str = Field(pattern=r"^VP[0-9]{3}$")
    name: str = Field(pattern=r"^[a-z][a-z0-9_]*$")
    kind: ShapeKind
    patterns: list[str] = Field(min_length=1, description="Python re; alternatives of one shape")
    explanation: str
    examples: Examples

    @field_validator("patterns")
    @classmethod
    def _joinable(cls, value: list[str]) -> list[str]:
        for pattern in value:
            if re.search(r"\(\?[aiLmsux]+\)", pattern):
                raise ValueError(f"{pattern!r}: use scoped flags (?i:...), the patterns are joined")
            _compiled(pattern)
        return value

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """The shape's patterns as one expression (compiled on first use, not when loaded)."""
        return re.compile("|".join(f"(?:{p})" for p in self.patterns))


class PrefixFix(Row):
    """What to change in the client so that requests share their prefix again, for one class of
    divergence that is a problem."""

    id: str = Field(pattern=r"^[a-z][a-z_]*$", description="the divergence class it fixes")
    explanation: str
    fix: str


class PrefixShapes(BaseModel):
    """prefix-check's knowledge: the volatile-value shapes, in the order they are tried, and the
    fix of each problem class."""

    model_config = ConfigDict(defer_build=True, extra="forbid", arbitrary_types_allowed=True)

    as_of: date
    source: str
    shapes: list[PrefixShape] = Field(min_length=1)
    fixes: list[PrefixFix] = Field(min_length=1)

    @model_validator(mode="after")
    def _unique(self) -> "PrefixShapes":
        for label, keys in (
            ("shape id", [s.id for s in self.shapes]),
            ("shape name", [s.name for s in self.shapes]),
            ("fix", [f.id for f in self.fixes]),
        ):
            twice = sorted({key for key in keys if keys.count(key) > 1})
            if twice:
                raise ValueError(f"{label} {', '.join(twice)} defined twice")
        return self

    def fix(self, kind: str) -> str | None:
        return next((f.fix for f in self.fixes if f.id == kind), None)


# --- recovery.yaml: the recovery paths `plan` weighs, the change plan, the flows ---------------

RecoveryPathId = Literal[
    "upgrade_driver", "isolated_env", "custom_build", "forward_compat", "no_driver_change"
]
RecoveryWhen = Literal[
    "threshold",
    "not_threshold",
    "window",
    "cluster_can_change",
    "no_window_cluster_fixed",
    "driver_change_possible",
    "deadline_urgent",
    "deadline_not_urgent",
    "deadline_too_short",
    "can_maintain_build",
    "cannot_maintain_build",
    "forward_compat_possible",
    "new_feature_branch",
    "unsupported_base",
    "no_compat_package",
    "not_datacenter_gpu",
    "gpu_unknown",
    "driver_unknown",
    "image_cuda_unknown",
]
"""The conditions a path's reasons hang on; each is evaluated by code (vllm_triage.plan), by id,
as the fact checks are."""


class RecoveryCondition(BaseModel):
    """One reason for or against a path, shown when its condition holds."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    when: RecoveryWhen
    effect: Literal["for", "against"]
    reason: Text


class RecoveryPath(Row):
    """A way back to a working server, with the reasons for and against it and its own steps."""

    id: RecoveryPathId
    name: Text
    summary: Text
    lead_time_hours: float = Field(gt=0, description="at least this long from start to checked")
    conditions: list[RecoveryCondition] = Field(min_length=1)
    instead: Text = Field(description="why not, when it is possible but another path comes first")
    steps: list[Text] = Field(min_length=1)


class LongTermRelease(Row):
    """The current release of a long-term driver branch: the recommended upgrade target."""

    branch: str = Field(pattern=r"^r[0-9]{3}$")
    release: Driver
    eol: str = Field(pattern=r"^[0-9]{4}-[0-9]{2}$", description="end of life, year and month")
    note: Text = ""


class BaselineItem(BaseModel):
    """Something to save before the change (the id says which bundle facts fill it in)."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z_]*$")
    item: Text


class ChangePlan(Row):
    """The driver change on a shared cluster: baseline, staged order, rollback, risks, when to
    widen, the change-record checklist and what to re-check before starting."""

    baseline: list[BaselineItem] = Field(min_length=1)
    staged_order: list[Text] = Field(min_length=1)
    rollback: list[Text] = Field(min_length=1)
    risks: list[Text] = Field(min_length=1)
    widen_when: list[Text] = Field(min_length=1)
    change_record: list[Text] = Field(min_length=1)
    recheck: list[Text] = Field(min_length=1)


class Reproducibility(Row):
    """What a custom build must pin, and how to prove it can be built again."""

    pin: list[Text] = Field(min_length=1)
    check: list[Text] = Field(min_length=1)


class RecoveryFlow(Row):
    """Where a diagnosis that is not a driver threshold goes, with that flow's own next steps."""

    id: str = Field(pattern=r"^[a-z][a-z_]*$")
    name: Text
    classes: list[FailureClass] = Field(min_length=1)
    steps: list[Text] = Field(min_length=1)
    avoid: list[Text] = Field(min_length=1)
    rungs: list[str] = Field(default_factory=list, description="validate rungs that prove it")


class Recovery(Provenance):
    """recovery.yaml: what `plan` weighs and writes (the choice itself is code, vllm_triage.plan)."""

    threshold_classes: list[FailureClass] = Field(min_length=1)
    urgent_deadline_hours: float = Field(gt=0)
    paths: list[RecoveryPath] = Field(min_length=5, max_length=5)
    long_term_releases: list[LongTermRelease] = Field(min_length=1)
    change_plan: ChangePlan
    custom_build: Reproducibility
    flows: list[RecoveryFlow] = Field(min_length=1)

    @model_validator(mode="after")
    def _each_once(self) -> "Recovery":
        ids = [path.id for path in self.paths]
        if len(set(ids)) != len(ids):
            raise ValueError("a recovery path is defined twice")
        classes = [c for flow in self.flows for c in flow.classes] + self.threshold_classes
        twice = sorted({c for c in classes if classes.count(c) > 1})
        if twice:
            raise ValueError(f"failure class {', '.join(twice)} is in more than one flow")
        flow_ids = [flow.id for flow in self.flows]
        if len(set(flow_ids)) != len(flow_ids):
            raise ValueError("a flow id is defined twice")
        return self

    def path(self, path_id: str) -> RecoveryPath:
        return next(path for path in self.paths if path.id == path_id)

    def flow(self, cause: str) -> RecoveryFlow | None:
        return next((flow for flow in self.flows if cause in flow.classes), None)


WideningCheck = Literal[
    "engine_init_repeated",
    "regression_passes",
    "requests_succeed",
    "no_communication_error",
    "rollback_and_approval",
]
"""How `record` judges a widening condition, from the case's artifacts (vllm_triage.record)."""
RollbackTarget = Literal["driver", "image", "nodes"]


class WideningRule(BaseModel):
    """A widening condition as recovery.yaml's change plan writes it, and the check that judges
    it in the decision record."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    check: WideningCheck
    condition: Text


class UnverifiedScope(BaseModel):
    """Something no validation run proves, listed as unverified in every decision record."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z_]*$")
    name: Text
    why: Text


class RollbackRule(BaseModel):
    """What sends the driver, the image or the node assignment back, for the paths it concerns."""

    model_config = ConfigDict(defer_build=True, extra="forbid")

    id: str = Field(pattern=r"^[a-z][a-z_]*$")
    target: RollbackTarget
    paths: list[RecoveryPathId] = Field(min_length=1)
    when: Text


class RecordPolicy(Provenance):
    """record.yaml: what `vllm-triage record` writes beyond the case's own evidence (the review
    period, the checks behind the widening conditions, the scope no run proves, the rollback
    conditions of each path)."""

    review_days: int = Field(ge=1, le=3650)
    widening: list[WideningRule] = Field(min_length=1)
    unverified: list[UnverifiedScope] = Field(min_length=1)
    rollback: list[RollbackRule] = Field(min_length=1)

    @model_validator(mode="after")
    def _each_once(self) -> "RecordPolicy":
        groups: list[tuple[str, list[str]]] = [
            ("widening check", [rule.check for rule in self.widening]),
            ("unverified scope", [item.id for item in self.unverified]),
            ("rollback rule", [rule.id for rule in self.rollback]),
        ]
        for label, ids in groups:
            twice = sorted({i for i in ids if ids.count(i) > 1})
            if twice:
                raise ValueError(f"{label} {', '.join(twice)} is defined twice")
        return self

    def widening_rule(self, condition: str) -> WideningRule | None:
        """The rule of a widening condition, by its text as the plan stores it."""
        return next((rule for rule in self.widening if rule.condition == condition), None)
