"""The shape of every knowledge file, as msgspec Structs: each fact carries its source and date.

Why msgspec and not pydantic (which the artifacts use): `compat` runs as an init container on
every pod start, and the knowledge base is all it reads, so it must load without importing
pydantic (0.16 s) or building 47 pydantic models (another 0.1 s). msgspec is a small C library
(2 ms to import), and a Struct class costs little more to define than a plain class.

Validation happens in the loader (vllm_triage.knowledge.loader): msgspec.convert checks the types
and the constraints written as `Annotated[..., msgspec.Meta(...)]` (patterns, lengths, bounds),
refuses unknown keys (forbid_unknown_fields), and each class's `_check` (run from __post_init__)
adds the rules a type cannot say; it raises ValueError, which msgspec reports with the path. The
loader also reads the values no JSON-like type holds: DriverVersion and CudaVersion from their
text, and a CSV row's cells (names separated by |, yes/no, empty for None) by the field types.

The cache (vllm_triage.knowledge.cache) pickles the validated knowledge base; unpickling a Struct
builds it again, and `_restore` does that without the checks (the file was validated before it
was cached, and a command that starts from the cache must not compile every pattern again).

Every Struct is frozen: the knowledge base is shared (one per process, cached) and never changed.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import date
from functools import cached_property
from typing import Annotated, Any, Literal

import msgspec

from vllm_triage.knowledge.texts import Text
from vllm_triage.versions import CudaVersion, DriverVersion
from vllm_triage.vocabulary import FactKey, FailureClass, Phase

Certainty = Literal["primary", "secondary", "inferred", "memory"]

# Patterns must run unchanged in RE2 (the scanner), Python re (the classifier) and grep -E (the
# benchmark's reference), so the constructs that differ between them are refused.
_NON_PORTABLE = re.compile(r"\\d|\\D|\(\?|[*+?}]\?|\\A|\\Z|\\z")

# Set while _restore rebuilds a cached Struct (its checks passed when the cache was written); per
# thread, so that a knowledge base validated in another thread meanwhile is still checked.
_restoring = threading.local()


def _restore(cls: type[_Knowledge], values: dict[str, Any]) -> _Knowledge:
    """Unpickle a Struct without running its checks again (see the module docstring)."""
    _restoring.active = True
    try:
        return cls(**values)
    finally:
        _restoring.active = False


class _Knowledge(msgspec.Struct, frozen=True, kw_only=True, forbid_unknown_fields=True):
    """Base of every knowledge class: frozen, keyword-only, unknown keys refused."""

    def __post_init__(self) -> None:
        if not getattr(_restoring, "active", False):
            self._check()

    def _check(self) -> None:
        """Rules beyond the field types; raise ValueError (msgspec adds where it happened)."""

    def __reduce__(self) -> tuple[Any, ...]:
        return (_restore, (type(self), msgspec.structs.asdict(self)))


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


@contextmanager
def _field(name: str) -> Iterator[None]:
    """Name the field in a check's ValueError, as msgspec names it in its own errors."""
    try:
        yield
    except ValueError as exc:
        raise ValueError(f"{name}: {exc}") from None


class Row(_Knowledge, frozen=True, kw_only=True):
    """A fact with its provenance."""

    certainty: Certainty
    source: Annotated[str, msgspec.Meta(min_length=3)]
    as_of: date


class CudaToolkit(Row, frozen=True, kw_only=True):
    """CUDA toolkit release -> the minimum Linux driver it ships with (NVIDIA Table 3); an empty
    driver is a release whose minimum no source read gives (13.5: the notes give none)."""

    cuda_version: CudaVersion
    release: str
    min_linux_driver: DriverVersion | None
    source_note: str = ""


class CudaFamily(Row, frozen=True, kw_only=True):
    """Minor-version compatibility floor of a CUDA major (NVIDIA Table 2)."""

    major: int
    min_linux_driver: DriverVersion
    note: str = ""


class DriverBranch(Row, frozen=True, kw_only=True):
    """A driver branch: its type and the newest CUDA it supports natively."""

    branch: Annotated[str, msgspec.Meta(pattern="^r[0-9]{3}$")]
    type: Literal["ltsb", "production", "new_feature", "developer", "unknown"]
    type_certainty: Annotated[
        Certainty | None,
        msgspec.Meta(description="the certainty of the type alone (the row's when empty)"),
    ] = None
    type_source: str = ""
    cuda_ceiling: CudaVersion | None
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


class Gpu(Row, frozen=True, kw_only=True):
    """A GPU model as nvidia-smi names it, with compute capability and data-center status.

    The pattern is matched against gpu_name_key(name), so it is written with spaces where
    nvidia-smi has hyphens, and one pattern matches the nvidia-smi, torch and GPU Feature
    Discovery forms. `examples` are names that must resolve to this row (knowledge check)."""

    name: str
    nvidia_smi_pattern: str
    examples: list[str] = msgspec.field(default_factory=list)
    compute_capability: Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,2}\.[0-9]$")]
    architecture: str = ""
    memory_gb: str
    datacenter: bool
    forward_compat: Annotated[
        ForwardCompatSupport | None,
        msgspec.Meta(
            description="whether NVIDIA supports forward compatibility on it (as `datacenter` "
            "when empty); uncertain where NVIDIA gives no list (NGC Server Ready RTX SKUs)"
        ),
    ] = None

    def _check(self) -> None:
        value = self.nvidia_smi_pattern
        with _field("nvidia_smi_pattern"):
            _compiled(value)
            if "-" in value or "_" in value:
                raise ValueError(
                    f"pattern {value!r}: write it with spaces for hyphens (it is matched against "
                    "the name with hyphens and underscores read as spaces)"
                )
        for example in self.examples:
            if not self.matches(example):
                raise ValueError(f"{self.name}: example {example!r} does not match its pattern")

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


class GpuLimit(Row, frozen=True, kw_only=True):
    """A limit no driver change lifts, for GPUs below a compute capability: the last CUDA major
    that builds for them, or the last driver branch that supports them."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z0-9]+(-[a-z0-9]+)*$")]
    architectures: Annotated[list[str], msgspec.Meta(min_length=1)]
    below_compute_capability: Annotated[str, msgspec.Meta(pattern=r"^[0-9]{1,2}\.[0-9]$")]
    last_cuda_major: int | None = None
    last_driver_branch: Annotated[str, msgspec.Meta(pattern="^r[0-9]{3}$")] | None = None
    summary: Text
    source_note: str = ""

    def _check(self) -> None:
        if (self.last_cuda_major is None) == (self.last_driver_branch is None):
            raise ValueError(f"{self.id}: give exactly one of last_cuda_major, last_driver_branch")

    def applies_to(self, gpu: Gpu) -> bool:
        return gpu.capability < compute_capability_tuple(self.below_compute_capability)

    @property
    def last_branch_number(self) -> int | None:
        return int(self.last_driver_branch[1:]) if self.last_driver_branch else None


# host[:port], lower case: a DNS name or an IPv4 address, as a registry or a realm URL names it.
_HOST_PORT = r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?$"
HostPort = Annotated[str, msgspec.Meta(pattern=_HOST_PORT)]


class RealmPairing(Row, frozen=True, kw_only=True):
    """A registry and the token services on other hosts it sends clients to in its 401 challenge
    (Docker Hub: auth.docker.io): the only hosts besides the registry's own that may receive its
    credentials. A host without a port means the scheme's default one."""

    registry: HostPort
    realm_hosts: Annotated[list[HostPort], msgspec.Meta(min_length=1)]
    source_note: str = ""

    def _check(self) -> None:
        if self.registry in self.realm_hosts:
            raise ValueError(f"{self.registry}: its own host needs no pairing")
        if len(set(self.realm_hosts)) != len(self.realm_hosts):
            raise ValueError(f"{self.registry}: a realm host is named twice")


class Provenance(_Knowledge, frozen=True, kw_only=True):
    """Source, date and certainty of a YAML document (the certainty is always stated)."""

    source: str
    as_of: date
    source_note: str = ""
    certainty: Certainty


class ForwardCompat(Provenance, frozen=True, kw_only=True):
    """Which cuda-compat packages run on which base branches, and on which GPUs at all."""

    gpu_rule: str
    branch_rule: str
    limits: list[Text]
    packages: dict[str, list[str]]

    def _check(self) -> None:
        with _field("packages"):
            for cuda, branches in self.packages.items():
                CudaVersion.parse(cuda)
                for branch in branches:
                    if not re.fullmatch(r"r[0-9]{3}", branch):
                        raise ValueError(f"package {cuda}: {branch!r} is not a branch like r570")


class NamedTag(_Knowledge, frozen=True, kw_only=True):
    tag: str
    cuda: CudaVersion
    note: str
    certainty: Certainty
    source: str


class ReleaseDefault(_Knowledge, frozen=True, kw_only=True):
    since: Annotated[str, msgspec.Meta(pattern=r"^[0-9]+\.[0-9]+\.[0-9]+$")]
    cuda: CudaVersion
    certainty: Certainty
    source: str
    note: str

    @property
    def since_tuple(self) -> tuple[int, ...]:
        return tuple(int(part) for part in self.since.split("."))


class ImageMap(Provenance, frozen=True, kw_only=True):
    """How vLLM image tags map to CUDA builds (a fallback when the image config is not at hand)."""

    repositories: list[str]
    named_tags: list[NamedTag]
    suffix_pattern: str
    default_cuda_by_release: list[ReleaseDefault]


class Milestone(_Knowledge, frozen=True, kw_only=True):
    id: str
    phase: Phase
    patterns: list[str]

    def _check(self) -> None:
        with _field("patterns"):
            for pattern in self.patterns:
                check_portable_pattern(pattern)


class Examples(_Knowledge, frozen=True, kw_only=True):
    positive: Annotated[list[str], msgspec.Meta(min_length=1)]
    negative: Annotated[list[str], msgspec.Meta(min_length=1)]


def _one_group_each(patterns: list[str]) -> list[str]:
    """Portable patterns whose one capturing group holds the value to read."""
    for pattern in patterns:
        check_portable_pattern(pattern)
        if _compiled(pattern).groups != 1:
            raise ValueError(f"pattern {pattern!r} needs exactly one group (the value)")
    return patterns


class LifecycleEvent(_Knowledge, frozen=True, kw_only=True):
    """A line about the server's stop: a stop signal, an orderly shutdown, its end."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z0-9_]+$")]
    kind: Literal["stop_signal", "shutdown", "shutdown_done"]
    patterns: Annotated[list[str], msgspec.Meta(min_length=1)]
    examples: Examples

    def _check(self) -> None:
        with _field("patterns"):
            for pattern in self.patterns:
                check_portable_pattern(pattern)


class RequestLine(_Knowledge, frozen=True, kw_only=True):
    """An access-log line of one request; the pattern's one group is its HTTP status."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z0-9_]+$")]
    patterns: Annotated[list[str], msgspec.Meta(min_length=1)]
    probes: Annotated[
        list[str], msgspec.Meta(description="health and metrics probes: answered, not served")
    ] = msgspec.field(default_factory=list)
    examples: Annotated[
        dict[str, str], msgspec.Meta(min_length=1, description="line -> the status it reads")
    ]

    def _check(self) -> None:
        with _field("patterns"):
            _one_group_each(self.patterns)
        with _field("probes"):
            for pattern in self.probes:
                check_portable_pattern(pattern)


class LogFactRule(_Knowledge, frozen=True, kw_only=True):
    """A version or name the log states about its own stack; the pattern's group is the value.
    decode: cuda_api turns 12080 into 12.8 (PyTorch's "found version", NCCL's cudaDriverVersion),
    cu_tag turns a wheel tag's 124 into 12.4."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z0-9_]+$")]
    key: FactKey
    decode: Literal["text", "cuda_api", "cu_tag"] = "text"
    patterns: Annotated[list[str], msgspec.Meta(min_length=1)]
    examples: Annotated[
        dict[str, str], msgspec.Meta(min_length=1, description="line -> the value it reads")
    ]

    def _check(self) -> None:
        with _field("patterns"):
            _one_group_each(self.patterns)


class Phases(Provenance, frozen=True, kw_only=True):
    """What a log says about the run besides its errors: vLLM's start-up milestones in order (the
    last one seen before an error gives its phase), the lines of a stop, access-log lines, and
    the versions and names it states."""

    milestones: list[Milestone]
    lifecycle: list[LifecycleEvent] = msgspec.field(default_factory=list)
    requests: list[RequestLine] = msgspec.field(default_factory=list)
    facts: list[LogFactRule] = msgspec.field(default_factory=list)


class Alternative(_Knowledge, frozen=True, kw_only=True):
    """One cause a signature's evidence fits, with how many real reports it was, and the one
    check that tells it from the others."""

    cause: FailureClass
    reports: Annotated[
        int, msgspec.Meta(ge=1, description="labelled real reports with this evidence and cause")
    ]
    check: Text


class Differential(_Knowledge, frozen=True, kw_only=True):
    """The causes a message shared by several causes stands for, counted from real reports: the
    signature's own cause is the most frequent (its base rate decides the primary)."""

    causes: Annotated[list[Alternative], msgspec.Meta(min_length=2)]
    source: Annotated[str, msgspec.Meta(min_length=3)]


class Signature(_Knowledge, frozen=True, kw_only=True):
    """A log signature, in the style of a lint rule: stable id, evidence patterns, advice, tests."""

    id: Annotated[str, msgspec.Meta(pattern="^VT[0-9]{3}$")]
    name: Annotated[str, msgspec.Meta(pattern="^[a-z0-9-]+$")]
    cause: FailureClass
    cause_by_phase: dict[Phase, FailureClass] = msgspec.field(default_factory=dict)
    # request: a request the running server refused (the server itself is fine)
    tier: Literal["root", "symptom", "stall", "request"]
    phase: Phase
    confidence: Annotated[float, msgspec.Meta(gt=0.0, le=1.0)]
    patterns: Annotated[list[str], msgspec.Meta(min_length=1)]
    extract: dict[str, str] = msgspec.field(default_factory=dict)
    outranks: Annotated[
        list[str], msgspec.Meta(description="ids of earlier errors this one explains (it wins)")
    ] = msgspec.field(default_factory=list)
    summary: Text
    explanation: Text
    next_steps: Annotated[list[Text], msgspec.Meta(min_length=1)]
    avoid: Annotated[list[Text], msgspec.Meta(min_length=1)]
    driver_change_advised: bool
    explained_by_driver_threshold: bool = False
    source: str
    certainty: Certainty
    as_of: date
    examples: Examples
    differential: Differential | None = None
    any_level: Annotated[
        bool,
        msgspec.Meta(
            description="its producer logs this evidence at INFO or DEBUG (vLLM's platform "
            "detection): it counts at any level, where an error phrase in a progress line "
            "otherwise does not"
        ),
    ] = False
    requires: Annotated[
        list[str],
        msgspec.Meta(
            description="ids of signatures that must also fire in the same file for this one to "
            "count: a detail that names the cause only of that failure (the reason vLLM gives "
            "for not choosing CUDA counts only when no platform was found)"
        ),
    ] = msgspec.field(default_factory=list)

    def _check(self) -> None:
        if self.differential is not None:
            with _field("differential"):
                counts = {c.cause: c.reports for c in self.differential.causes}
                if len(counts) != len(self.differential.causes):
                    raise ValueError("a cause is listed twice")
                if max(counts, key=lambda cause: counts[cause]) != self.cause or (
                    list(counts.values()).count(counts.get(self.cause, 0)) > 1
                ):
                    raise ValueError(
                        f"the signature's cause {self.cause} must be the most frequent one"
                    )
        with _field("patterns"):
            for pattern in self.patterns:
                check_portable_pattern(pattern)
        with _field("extract"):
            for name, pattern in self.extract.items():
                if _compiled(pattern).groups != 1:
                    raise ValueError(f"extract {name!r} needs exactly one group: {pattern!r}")

    def cause_in(self, phase: Phase) -> FailureClass:
        return self.cause_by_phase.get(phase, self.cause)


class RecipeFlag(_Knowledge, frozen=True, kw_only=True):
    flag: str
    why: Text
    severity: Annotated[
        Literal["error", "warning"],
        msgspec.Meta(
            description="what `preflight` makes of a launch without it: error stops the start "
            "(the server would fail or lose what the profile is for), warning only "
            "says so"
        ),
    ] = "warning"


class RecipeToolCalls(_Knowledge, frozen=True, kw_only=True):
    flags: list[str]
    reasoning_parser: str | None = None
    note: str


class RecipeContext(_Knowledge, frozen=True, kw_only=True):
    max_model_len: int
    note: str


class RecipeAll2All(_Knowledge, frozen=True, kw_only=True):
    rdma: str
    nvlink: str
    note: str
    source: Annotated[str | None, msgspec.Meta(description="where the backends are named")] = None


class ReviewTrigger(Row, frozen=True, kw_only=True):
    """An event that sends a decision made for the recipe's model back to review (`record` lists
    it, `record check` watches it): an image tag appearing in a registry's tag list. It is met
    when a tag of `repository` is one of `tags`, or matches `tag_pattern` (Python re, whole tag)
    with its `version` group at least `min_version`."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z0-9]+(-[a-z0-9]+)*$")]
    kind: Literal["image_tag"] = "image_tag"
    name: Text
    registry: Annotated[
        str,
        msgspec.Meta(
            pattern=r"^https?://[A-Za-z0-9.\-]+(:[0-9]+)?$",
            description="the OCI distribution API's base URL",
        ),
    ] = "https://registry-1.docker.io"
    repository: Annotated[str, msgspec.Meta(pattern="^[a-z0-9]+([._/-][a-z0-9]+)*$")]
    tags: Annotated[list[str], msgspec.Meta(description="tag names that meet it")] = msgspec.field(
        default_factory=list
    )
    tag_pattern: Annotated[
        str | None, msgspec.Meta(description="tags that meet it (Python re)")
    ] = None
    min_version: Annotated[str, msgspec.Meta(pattern=r"^[0-9]+(\.[0-9]+)*$")] | None = None
    note: Text = ""

    def _check(self) -> None:
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


class RecipeProfile(_Knowledge, frozen=True, kw_only=True):
    """One serving profile of a recipe (aggregated on Blackwell, the decode side of a
    prefill/decode split...) and the flags it sets, on top of the recipe's required_flags."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z0-9]+(-[a-z0-9]+)*$")]
    name: str
    mode: Literal["aggregated", "prefill", "decode"]
    hardware: str
    flags: list[RecipeFlag]
    env: dict[str, str] = msgspec.field(default_factory=dict)
    note: str = ""


class Recipe(Provenance, frozen=True, kw_only=True):
    """What a model needs from the stack: vLLM version, image CUDA, driver branch, flags (those of
    every profile in required_flags, each profile's own in profiles)."""

    id: str
    name: str
    architecture: str
    min_vllm_version: str
    image: str
    image_cuda: CudaVersion
    cuda_variants_available: list[str]
    min_driver_branch: Annotated[str, msgspec.Meta(pattern="^r[0-9]{3}$")]
    driver_note: Text
    recommended_hardware: str
    startup_note: str
    required_flags: list[RecipeFlag]
    tool_calls: RecipeToolCalls
    context: RecipeContext
    all2all_backends: RecipeAll2All
    model_ids: Annotated[list[str], msgspec.Meta(description="hub ids the recipe is for")] = (
        msgspec.field(default_factory=list)
    )
    profiles: Annotated[list[RecipeProfile], msgspec.Meta(min_length=1)]
    default_profile: Annotated[
        str, msgspec.Meta(description="the profile checks use when none is named")
    ]
    review_triggers: Annotated[
        list[ReviewTrigger],
        msgspec.Meta(description="what sends a decision for this model back to review"),
    ] = msgspec.field(default_factory=list)

    def _check(self) -> None:
        ids = [profile.id for profile in self.profiles]
        if len(set(ids)) != len(ids):
            raise ValueError(f"recipe {self.id}: a profile id is defined twice")
        if self.default_profile not in ids:
            raise ValueError(
                f"recipe {self.id}: default_profile {self.default_profile!r} is not one of its "
                f"profiles ({', '.join(ids)})"
            )


class VllmArgument(_Knowledge, frozen=True, kw_only=True):
    """One vLLM launch flag that triage reads, and the LaunchArgs field it fills."""

    flag: Annotated[str, msgspec.Meta(pattern="^--[a-z0-9-]+$")]
    aliases: list[str] = msgspec.field(default_factory=list)
    field: str
    type: Literal["str", "int", "float", "bool", "size"]


class VllmArgs(Provenance, frozen=True, kw_only=True):
    """How a vLLM launch command is read: entry points, mapped flags, switches."""

    entrypoints: list[list[str]]
    arguments: list[VllmArgument]
    environment: dict[str, str]
    switches: list[str]


class FactCheck(Provenance, frozen=True, kw_only=True):
    """A check over a bundle's facts: its wording and class (the condition is code, by id)."""

    id: Annotated[str, msgspec.Meta(pattern="^VF[0-9]{3}$")]
    name: Annotated[str, msgspec.Meta(pattern="^[a-z0-9]+(-[a-z0-9]+)*$")]
    cause: FailureClass
    phase: Phase
    confidence: Annotated[float, msgspec.Meta(ge=0.0, le=1.0)]
    summary: Text
    next_steps: Annotated[list[Text], msgspec.Meta(min_length=1)]
    avoid: Annotated[list[Text], msgspec.Meta(min_length=1)]


RedactionKind = Literal["value", "name", "argument", "header", "url"]


_QUANTIFIER = re.compile(r"\{[0-9]*(?:,[0-9]*)?\}")


def class_end(pattern: str, start: int) -> int:
    """The index after the character class that opens at start (of a pattern Python's re
    compiles: every class closes)."""
    index = start + 1
    if pattern.startswith("^", index):
        index += 1
    if pattern.startswith("]", index):
        index += 1
    while pattern[index] != "]":
        index += 2 if pattern[index] == "\\" else 1
    return index + 1


def group_end(pattern: str, start: int) -> int:
    """The index after the group that opens at start (of a pattern Python's re compiles)."""
    depth, index = 0, start
    while True:
        char = pattern[index]
        if char == "\\":
            index += 2
            continue
        if char == "[":
            index = class_end(pattern, index)
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
            end = class_end(pattern, index)
            out.append(pattern[index:end])
            index = end
        elif pattern.startswith(("(?=", "(?!", "(?<=", "(?<!"), index):
            index = group_end(pattern, index)
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


class RedactionRule(Row, frozen=True, kw_only=True):
    """A secret the bundle must never contain: its shape or the name that holds it, with tests."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z0-9_]*$")]
    name: str
    kind: RedactionKind
    match: str
    keep_prefix: str | None = None
    exceptions: Annotated[
        list[str],
        msgspec.Meta(
            description="name rules: names that fit but hold no secret; last rules: the words "
            "after which a match is kept (a digest after its algorithm's name)"
        ),
    ] = msgspec.field(default_factory=list)
    context: Annotated[
        str | None,
        msgspec.Meta(
            description="argument rules: what must come before the option (`docker login` for -p)"
        ),
    ] = None
    multiple: Annotated[
        bool, msgspec.Meta(description="argument rules: the option takes one or more values")
    ] = False
    decoded: Annotated[
        Literal["base64"] | None,
        msgspec.Meta(
            description="value rules: replaced only when the match decodes to text that holds "
            "a secret (by the other rules) or to a registry credential document"
        ),
    ] = None
    entropy: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=8)] | None,
        msgspec.Meta(
            description="value rules: the secret's longest alphanumeric run must reach this "
            "many bits per character, mix letters and digits, and not read as words or hex",
        ),
    ] = None
    last: Annotated[
        bool,
        msgspec.Meta(
            description="value rules: run after every other rule, on what they left in clear"
        ),
    ] = False
    word_bigrams: Annotated[
        list[Annotated[str, msgspec.Meta(pattern="^[a-z]{2}$")]],
        msgspec.Meta(
            description="entropy rules: the commonest letter pairs of English; a run whose "
            "letter pairs are often among them reads as words (a class or model name)"
        ),
    ] = msgspec.field(default_factory=list)
    explanation: str
    examples: Examples

    def _check(self) -> None:
        if self.id == "omitted":
            raise ValueError("id: 'omitted' is the allow-list's count in the report, not a rule id")
        with _field("keep_prefix"):
            if self.keep_prefix is not None and _compiled(self.keep_prefix).groups:
                raise ValueError(f"keep_prefix {self.keep_prefix!r} must not define groups")
        for name in self.exceptions:
            if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                raise ValueError(f"exceptions: exception {name!r} is not a plain name")
        compiled = _compiled(self.match)
        if re.search(r"\(\?[aiLmsux]+\)", self.match):
            raise ValueError(f"{self.id}: use scoped flags (?i:...), the rules share one pattern")
        secret_group = list(compiled.groupindex) == ["secret"] and compiled.groups == 1
        if self.kind == "url" and not secret_group:
            raise ValueError(f"{self.id}: a url pattern needs exactly one group, named secret")
        if self.kind == "value" and compiled.groups and not secret_group:
            raise ValueError(f"{self.id}: a value pattern may only define the group secret")
        if self.last and (self.kind != "value" or not secret_group):
            raise ValueError(f"{self.id}: a last rule is a value rule with the group secret")
        if self.entropy is not None and (self.kind != "value" or not secret_group):
            raise ValueError(f"{self.id}: an entropy rule is a value rule with the group secret")
        if self.word_bigrams and self.entropy is None:
            raise ValueError(f"{self.id}: word_bigrams are for an entropy rule")
        if self.decoded is not None and (self.kind != "value" or not secret_group):
            raise ValueError(f"{self.id}: a decoded rule is a value rule with the group secret")
        if self.kind in ("value", "url") and compiled.match(""):
            raise ValueError(f"{self.id}: the pattern matches the empty string")
        try:
            _re2_compile(re2_superset(self.match))
        except Exception as exc:
            raise ValueError(f"{self.id}: no RE2 prefilter can be made of it: {exc}") from exc
        if self.kind in ("name", "argument", "header") and compiled.groups:
            raise ValueError(f"{self.id}: a {self.kind} pattern must not define groups")
        if self.exceptions and self.kind != "name" and not self.last:
            raise ValueError(f"{self.id}: only name rules and last rules have exceptions")
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


class EnvAllow(Row, frozen=True, kw_only=True):
    """Environment variables a bundle keeps (values still redacted): prefixes and exact names."""

    why: str
    prefixes: list[str] = msgspec.field(default_factory=list)
    names: list[str] = msgspec.field(default_factory=list)

    def _check(self) -> None:
        for label, names in (("prefixes", self.prefixes), ("names", self.names)):
            for name in names:
                if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
                    raise ValueError(
                        f"{label}: {name!r} is not an environment variable name or prefix"
                    )
        if not self.prefixes and not self.names:
            raise ValueError("an allow-list entry needs prefixes or names")


class Redaction(_Knowledge, frozen=True, kw_only=True):
    """What `collect` redacts (rules, in order of precedence) and which variables it keeps."""

    as_of: date
    rules: Annotated[list[RedactionRule], msgspec.Meta(min_length=1)]
    env_allow: Annotated[list[EnvAllow], msgspec.Meta(min_length=1)]

    def rule(self, rule_id: str) -> RedactionRule | None:
        return next((r for r in self.rules if r.id == rule_id), None)

    def allowed(self, name: str) -> bool:
        """Whether the allow-list keeps the variable (secret rules are checked separately)."""
        return any(
            name in entry.names or name.startswith(tuple(entry.prefixes))
            for entry in self.env_allow
        )


class SecretAllowlist(_Knowledge, frozen=True, kw_only=True):
    """What makes a scanner rule's finding no secret: regexes over the secret, the whole match or
    the line; stop words in the secret; paths (this tool scans text, never a path, so an allowlist
    of paths alone never applies)."""

    description: str = ""
    regexes: list[str] = msgspec.field(default_factory=list)
    regex_target: Literal["secret", "match", "line"] = msgspec.field(
        default="secret", name="regexTarget"
    )
    stopwords: list[str] = msgspec.field(default_factory=list)
    paths: list[str] = msgspec.field(default_factory=list)
    condition: Literal["OR", "AND"] = "OR"


class SecretRule(_Knowledge, frozen=True, kw_only=True):
    """A rule of a published secret scanner (gitleaks' format): the regex, the group holding the
    secret, the entropy the secret must exceed, the keywords one of which must be in the text."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z0-9][a-z0-9-]*$")]
    description: str
    regex: str | None
    secret_group: Annotated[int, msgspec.Meta(ge=0)] = 0
    entropy: float | None = None
    keywords: list[str] = msgspec.field(default_factory=list)
    allowlists: list[SecretAllowlist] = msgspec.field(default_factory=list)
    path: str | None = None


class SecretRuleSet(_Knowledge, frozen=True, kw_only=True):
    """A published secret-detection rule set, imported as data (scripts/gitleaks_import.py)."""

    source: dict[str, str]
    commit: Annotated[str, msgspec.Meta(pattern="^[0-9a-f]{40}$")]
    as_of: date
    licence: str
    min_gitleaks_version: str = ""
    note: str = ""
    regexes_re2_cannot_compile: list[str] = msgspec.field(default_factory=list)
    global_allowlist: SecretAllowlist
    rules: Annotated[list[SecretRule], msgspec.Meta(min_length=1)]

    def _check(self) -> None:
        ids = [rule.id for rule in self.rules]
        if len(set(ids)) != len(ids):
            raise ValueError("rules: rule ids are not unique")


class MetricAliases(Provenance, frozen=True, kw_only=True):
    """vLLM metric names by what they measure, newest first (names changed between versions)."""

    metrics: Annotated[dict[str, list[str]], msgspec.Meta(min_length=1)]


ShapeKind = Literal["timestamp", "random_id"]


class PrefixShape(Row, dict=True, frozen=True, kw_only=True):
    """A value that changes from request to request (a date, an id): found where two prompts
    first differ, it explains the difference; its kind is the divergence class it is reported as."""

    id: Annotated[str, msgspec.Meta(pattern="^VP[0-9]{3}$")]
    name: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z0-9_]*$")]
    kind: ShapeKind
    patterns: Annotated[
        list[str], msgspec.Meta(min_length=1, description="Python re; alternatives of one shape")
    ]
    explanation: str
    examples: Examples

    def _check(self) -> None:
        with _field("patterns"):
            for pattern in self.patterns:
                if re.search(r"\(\?[aiLmsux]+\)", pattern):
                    raise ValueError(
                        f"{pattern!r}: use scoped flags (?i:...), the patterns are joined"
                    )
                _compiled(pattern)

    @cached_property
    def regex(self) -> re.Pattern[str]:
        """The shape's patterns as one expression (compiled on first use, not when loaded)."""
        return re.compile("|".join(f"(?:{p})" for p in self.patterns))


class PrefixFix(Row, frozen=True, kw_only=True):
    """What to change in the client so that requests share their prefix again, for one class of
    divergence that is a problem."""

    id: Annotated[
        str, msgspec.Meta(pattern="^[a-z][a-z_]*$", description="the divergence class it fixes")
    ]
    explanation: str
    fix: Text  # shown in the report's prefix-check section, in the reader's language


class PrefixShapes(_Knowledge, frozen=True, kw_only=True):
    """prefix-check's knowledge: the volatile-value shapes, in the order they are tried, and the
    fix of each problem class."""

    as_of: date
    source: str
    shapes: Annotated[list[PrefixShape], msgspec.Meta(min_length=1)]
    fixes: Annotated[list[PrefixFix], msgspec.Meta(min_length=1)]

    def _check(self) -> None:
        for label, keys in (
            ("shape id", [s.id for s in self.shapes]),
            ("shape name", [s.name for s in self.shapes]),
            ("fix", [f.id for f in self.fixes]),
        ):
            twice = sorted({key for key in keys if keys.count(key) > 1})
            if twice:
                raise ValueError(f"{label} {', '.join(twice)} defined twice")

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


class RecoveryCondition(_Knowledge, frozen=True, kw_only=True):
    """One reason for or against a path, shown when its condition holds."""

    when: RecoveryWhen
    effect: Literal["for", "against"]
    reason: Text


class RecoveryPath(Row, frozen=True, kw_only=True):
    """A way back to a working server, with the reasons for and against it and its own steps."""

    id: RecoveryPathId
    name: Text
    summary: Text
    lead_time_hours: Annotated[
        float, msgspec.Meta(gt=0, description="at least this long from start to checked")
    ]
    conditions: Annotated[list[RecoveryCondition], msgspec.Meta(min_length=1)]
    instead: Annotated[
        Text, msgspec.Meta(description="why not, when it is possible but another path comes first")
    ]
    steps: Annotated[list[Text], msgspec.Meta(min_length=1)]
    risks: Annotated[
        list[Text], msgspec.Meta(description="what can go wrong on this path, for the approvers")
    ] = msgspec.field(default_factory=list)
    evidence_on: Annotated[
        Literal["plan_nodes", "any_node"],
        msgspec.Meta(
            description="where a validation run counts for the record: on one of the plan's "
            "target nodes (the change happens there), or on any node (an isolated environment "
            "apart from the shared cluster)"
        ),
    ] = "any_node"
    evidence_meets_floor: Annotated[
        bool,
        msgspec.Meta(
            description="the run's driver must meet the image's floor (min_driver): the path "
            "runs the planned image on the node's own driver"
        ),
    ] = False


class LongTermRelease(Row, frozen=True, kw_only=True):
    """The current release of a long-term driver branch: the recommended upgrade target."""

    branch: Annotated[str, msgspec.Meta(pattern="^r[0-9]{3}$")]
    release: DriverVersion
    eol: Annotated[
        str, msgspec.Meta(pattern="^[0-9]{4}-[0-9]{2}$", description="end of life, year and month")
    ]
    note: Text = ""


class BaselineItem(_Knowledge, frozen=True, kw_only=True):
    """Something to save before the change (the id says which bundle facts fill it in)."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z_]*$")]
    item: Text


class ChangePlan(Row, frozen=True, kw_only=True):
    """The driver change on a shared cluster: baseline, staged order, rollback, when to widen,
    the change-record checklist and what to re-check before starting (each path's risks are the
    path's own)."""

    baseline: Annotated[list[BaselineItem], msgspec.Meta(min_length=1)]
    staged_order: Annotated[list[Text], msgspec.Meta(min_length=1)]
    rollback: Annotated[list[Text], msgspec.Meta(min_length=1)]
    widen_when: Annotated[list[Text], msgspec.Meta(min_length=1)]
    change_record: Annotated[list[Text], msgspec.Meta(min_length=1)]
    recheck: Annotated[list[Text], msgspec.Meta(min_length=1)]


class Reproducibility(Row, frozen=True, kw_only=True):
    """What a custom build must pin, and how to prove it can be built again."""

    pin: Annotated[list[Text], msgspec.Meta(min_length=1)]
    check: Annotated[list[Text], msgspec.Meta(min_length=1)]


class RecoveryFlow(Row, frozen=True, kw_only=True):
    """Where a diagnosis that is not a driver threshold goes, with that flow's own next steps."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z_]*$")]
    name: Text
    classes: Annotated[list[FailureClass], msgspec.Meta(min_length=1)]
    steps: Annotated[list[Text], msgspec.Meta(min_length=1)]
    avoid: Annotated[list[Text], msgspec.Meta(min_length=1)]
    rungs: Annotated[list[str], msgspec.Meta(description="validate rungs that prove it")] = (
        msgspec.field(default_factory=list)
    )


class Recovery(Provenance, frozen=True, kw_only=True):
    """recovery.yaml: what `plan` weighs and writes (the choice itself is code, vllm_triage.plan)."""

    threshold_classes: Annotated[list[FailureClass], msgspec.Meta(min_length=1)]
    urgent_deadline_hours: Annotated[float, msgspec.Meta(gt=0)]
    paths: Annotated[list[RecoveryPath], msgspec.Meta(min_length=5, max_length=5)]
    long_term_releases: Annotated[list[LongTermRelease], msgspec.Meta(min_length=1)]
    change_plan: ChangePlan
    custom_build: Reproducibility
    flows: Annotated[list[RecoveryFlow], msgspec.Meta(min_length=1)]

    def _check(self) -> None:
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


class WideningRule(_Knowledge, frozen=True, kw_only=True):
    """A widening condition as recovery.yaml's change plan writes it, and the check that judges
    it in the decision record."""

    check: WideningCheck
    condition: Text


class UnverifiedScope(_Knowledge, frozen=True, kw_only=True):
    """Something no validation run proves, listed as unverified in every decision record."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z_]*$")]
    name: Text
    why: Text


class RollbackRule(_Knowledge, frozen=True, kw_only=True):
    """What sends the driver, the image or the node assignment back, for the paths it concerns."""

    id: Annotated[str, msgspec.Meta(pattern="^[a-z][a-z_]*$")]
    target: RollbackTarget
    paths: Annotated[list[RecoveryPathId], msgspec.Meta(min_length=1)]
    when: Text


class RecordPolicy(Provenance, frozen=True, kw_only=True):
    """record.yaml: what `vllm-triage record` writes beyond the case's own evidence (the review
    period, the checks behind the widening conditions, the scope no run proves, the rollback
    conditions of each path)."""

    review_days: Annotated[int, msgspec.Meta(ge=1, le=3650)]
    widening: Annotated[list[WideningRule], msgspec.Meta(min_length=1)]
    unverified: Annotated[list[UnverifiedScope], msgspec.Meta(min_length=1)]
    rollback: Annotated[list[RollbackRule], msgspec.Meta(min_length=1)]

    def _check(self) -> None:
        groups: list[tuple[str, list[str]]] = [
            ("widening check", [rule.check for rule in self.widening]),
            ("unverified scope", [item.id for item in self.unverified]),
            ("rollback rule", [rule.id for rule in self.rollback]),
        ]
        for label, ids in groups:
            twice = sorted({i for i in ids if ids.count(i) > 1})
            if twice:
                raise ValueError(f"{label} {', '.join(twice)} is defined twice")

    def widening_rule(self, condition: str) -> WideningRule | None:
        """The rule of a widening condition, by its text as the plan stores it."""
        return next((rule for rule in self.widening if rule.condition == condition), None)


# The failure families the message catalogue keeps (scripts/message_catalogue.py, RULES): CUDA and
# driver initialisation, devices and platform detection, GPU and host memory, NCCL and other
# collectives, model files and Hub access, arguments and configuration, chat templates, tool-call
# parsing, and imports, versions and ABIs.
MessageFamily = Literal[
    "cuda_init",
    "platform",
    "gpu_memory",
    "host_memory",
    "distributed",
    "model_loading",
    "config",
    "chat_template",
    "tool_parsing",
    "dependency",
]
# A catalogued message's cause: a failure class where its family's rule decides it, not_a_cause
# for advice (a deprecation, a hint), empty where the message alone does not decide it.
MessageCause = FailureClass | Literal["not_a_cause", ""]
MessageKind = Literal["raise", "log", "native"]
_RELEASE_URL = r"^https://pypi\.org/project/[A-Za-z0-9._-]+/[A-Za-z0-9._+-]+/$"
# a repository producer's source: its GitHub tree at one commit
_TREE_URL = r"^https://github\.com/[A-Za-z0-9._-]+/[A-Za-z0-9._-]+/tree/[0-9a-f]{40}$"
_SOURCE_URL = f"{_RELEASE_URL}|{_TREE_URL}"


class CatalogueMessage(_Knowledge, frozen=True, kw_only=True):
    """One failure message a producer's released code prints (each runtime value as `{}`)."""

    message: Annotated[str, msgspec.Meta(min_length=15, max_length=400)]
    kind: Annotated[
        MessageKind,
        msgspec.Meta(
            description="raise: an exception raised (or a C/C++ throw, abort or check); log: a "
            "logger or warnings call (or a C/C++ log macro); native: a printable string of a "
            "compiled library that reads as an error message"
        ),
    ]
    exception: Annotated[
        str, msgspec.Meta(description="the class raised; a warning's category for warnings.warn")
    ] = ""
    level: Literal["critical", "error", "exception", "warning"] | None = None
    file: Annotated[str, msgspec.Meta(min_length=1, description="the file inside the release")]
    versions: Annotated[list[str], msgspec.Meta(min_length=1)]
    family: MessageFamily
    cause: MessageCause

    def _check(self) -> None:
        if self.kind == "raise" and (not self.exception or self.level is not None):
            raise ValueError(f"{self.message!r}: a raise names its exception and no level")
        if self.kind == "log" and self.level is None:
            raise ValueError(f"{self.message!r}: a log call names its level")
        if self.kind == "native" and (self.exception or self.level is not None):
            raise ValueError(f"{self.message!r}: a native string has no exception or level")
        if not self.message.replace("{}", "").strip():
            raise ValueError(f"{self.message!r}: only placeholders")

    @property
    def is_error(self) -> bool:
        """Whether it is evidence of a failure: not advice, and not a warning."""
        return self.cause != "not_a_cause" and self.level != "warning"


class MessageCatalogue(_Knowledge, frozen=True, kw_only=True):
    """messages/<producer>.yaml: the failure messages of one PyPI project's releases (or of one
    GitHub repository's commits, for a producer not on PyPI), one entry per distinct message
    (versions merged), written by scripts/message_catalogue.py."""

    producer: Annotated[str, msgspec.Meta(pattern="^[A-Za-z0-9][A-Za-z0-9._-]*$")]
    source: Annotated[
        list[Annotated[str, msgspec.Meta(pattern=_SOURCE_URL)]],
        msgspec.Meta(
            min_length=1,
            description="the PyPI release pages of the releases read, or the repository's "
            "GitHub tree at each commit read (the commit then is the version)",
        ),
    ]
    as_of: date
    certainty: Certainty
    versions: Annotated[list[str], msgspec.Meta(min_length=1, description="oldest first")]
    method: Annotated[str, msgspec.Meta(min_length=3, description="what was read, and how")]
    messages: list[CatalogueMessage]

    def _check(self) -> None:
        known = set(self.versions)
        with _field("source"):
            for url in self.source:
                if re.match(_TREE_URL, url):
                    name, _, commit = url.split("/")[-3:]
                    if name.lower() != self.producer.lower() or commit not in known:
                        raise ValueError(f"{url}: not a commit of {self.producer} in versions")
                    continue
                if url.rstrip("/").rsplit("/", 2)[-2:] not in (
                    [self.producer, version] for version in self.versions
                ):
                    raise ValueError(f"{url}: not a release of {self.producer} listed in versions")
        with _field("messages"):
            seen: set[str] = set()
            for entry in self.messages:
                if entry.message in seen:
                    raise ValueError(f"{entry.message!r} is catalogued twice")
                seen.add(entry.message)
                if unknown := sorted(set(entry.versions) - known):
                    raise ValueError(f"{entry.message!r}: unknown version(s) {', '.join(unknown)}")
