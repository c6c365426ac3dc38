"""The facts of an image config (an OCI image config, or one entry of `docker image inspect` /
`podman image inspect`): CUDA_VERSION, NVIDIA_REQUIRE_CUDA parsed, the CUDA architectures the
image says it was built for, the vLLM version its labels or environment state, the created date,
the platform. Only the variables named here are read from the environment: an image's
environment can hold anything, and the facts are printed and saved."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from vllm_triage.image.config import ImageError, image_cuda_from_document, image_env
from vllm_triage.image.models import (
    BrandRule,
    RequireClause,
    RequireCondition,
    RequireCuda,
)

# Where images state the CUDA architectures they were compiled for, first found wins: the
# environment the build left behind (PyTorch's and vLLM's builds read TORCH_CUDA_ARCH_LIST, CMake
# builds CMAKE_CUDA_ARCHITECTURES), then labels of the same names.
ARCH_KEYS = ("TORCH_CUDA_ARCH_LIST", "CUDA_ARCH_LIST", "CMAKE_CUDA_ARCHITECTURES")
# Where images state their vLLM version. org.opencontainers.image.version is inherited from base
# images (Ubuntu's says 24.04), so it counts only when the image's source or title names vLLM.
VERSION_ENV = ("VLLM_VERSION",)
VERSION_LABELS = ("ai.vllm.version", "vllm.version", "vllm_version")
OCI_VERSION = "org.opencontainers.image.version"
OCI_NAMING = ("org.opencontainers.image.source", "org.opencontainers.image.title")
MAX_LABELS = 256
MAX_LABEL_TEXT = 1024

_CONDITION = re.compile(r"^([A-Za-z_]+)(>=|<=|==|!=|=|<|>)(\S+)$")
_TORCH_ARCH = re.compile(r"^([0-9]{1,2})\.([0-9])([af]?)(\+PTX)?$", re.IGNORECASE)
_CMAKE_ARCH = re.compile(r"^([0-9]{1,2})([0-9])([af]?)(?:-(real|virtual))?$")


@dataclass
class ConfigFacts:
    """The facts of one image config; `warnings` says what was there but could not be read."""

    cuda: str | None = None
    cuda_from: str | None = None
    require_cuda: RequireCuda | None = None
    architectures: list[str] = field(default_factory=list)
    architectures_from: str | None = None
    vllm_version: str | None = None
    vllm_version_from: str | None = None
    created: str | None = None
    user: str | None = None
    labels: dict[str, str] = field(default_factory=dict)
    platform: str | None = None
    warnings: list[str] = field(default_factory=list)


def parse_require_cuda(raw: str) -> RequireCuda:
    """NVIDIA_REQUIRE_CUDA as clauses (OR) of conditions (AND), the `cuda>=` minimum, and the
    brand clauses with the driver branch each allows (`brand=tesla,driver>=535,driver<536`)."""
    result = RequireCuda(raw=raw)
    for text in raw.split()[:64]:
        conditions = []
        for part in text.split(","):
            match = _CONDITION.match(part)
            if match is None:
                result.unparsed.append(part[:80])
                continue
            key, op, value = match.groups()
            conditions.append(RequireCondition(key=key.lower(), op=op, value=value))
        if not conditions:
            continue
        result.clauses.append(RequireClause(text=text[:200], conditions=conditions))
        if len(conditions) == 1 and conditions[0].key == "cuda" and conditions[0].op == ">=":
            result.cuda_min = result.cuda_min or conditions[0].value
        brands = [c.value for c in conditions if c.key == "brand" and c.op in ("=", "==")]
        if brands:
            result.brands.append(_brand_rule(brands[0], conditions))
    return result


def _brand_rule(brand: str, conditions: list[RequireCondition]) -> BrandRule:
    driver_min = next((c.value for c in conditions if c.key == "driver" and c.op == ">="), None)
    driver_below = next((c.value for c in conditions if c.key == "driver" and c.op == "<"), None)
    branch = None
    numeric = bool(driver_min and driver_below and driver_min.isdigit() and driver_below.isdigit())
    if numeric and int(str(driver_below)) == int(str(driver_min)) + 1:
        branch = f"r{driver_min}"
    return BrandRule(brand=brand, driver_min=driver_min, driver_below=driver_below, branch=branch)


def parse_architectures(text: str) -> list[str] | None:
    """A TORCH_CUDA_ARCH_LIST (`8.0 9.0a 12.0+PTX`, `;` or spaces) or CMAKE_CUDA_ARCHITECTURES
    (`80;90a-real;120-virtual`) as compute capabilities: `9.0`, `9.0a` (arch-specific),
    `10.0f` (family), `12.0+PTX` (also PTX, JIT-compiled for newer GPUs). None if not one."""
    out: list[str] = []
    for item in re.split(r"[\s;,]+", text.strip())[:64]:
        if not item:
            continue
        if match := _TORCH_ARCH.match(item):
            major, minor, suffix, ptx = match.groups()
            out.append(f"{int(major)}.{minor}{suffix.lower()}{'+PTX' if ptx else ''}")
        elif match := _CMAKE_ARCH.match(item):
            major, minor, suffix, kind = match.groups()
            out.append(f"{int(major)}.{minor}{suffix}{'+PTX' if kind != 'real' else ''}")
        else:
            return None
    return out or None


def arch_supports(architectures: list[str], compute_capability: str) -> bool:
    """Whether code built for these architectures runs on a GPU of this compute capability, by
    NVIDIA's rules (CUDA C++ Programming Guide, "Binary Compatibility" and "Feature Set Compiler
    Targets"): a cubin for X.Y runs on X.Z with Z >= Y; an arch-specific X.Ya cubin only on X.Y;
    a family X.Yf cubin on X.Z with Z >= Y; PTX for X.Y is JIT-compiled for any X.Y or newer."""
    match = re.match(r"^([0-9]{1,2})\.([0-9])", compute_capability.strip())
    if match is None:
        return False
    gpu = (int(match.group(1)), int(match.group(2)))
    for arch in architectures:
        parsed = _TORCH_ARCH.match(arch)
        if parsed is None:
            continue
        built = (int(parsed.group(1)), int(parsed.group(2)))
        suffix, ptx = parsed.group(3).lower(), bool(parsed.group(4))
        if ptx and gpu >= built:
            return True
        if suffix == "a" and gpu == built:
            return True
        if suffix != "a" and gpu[0] == built[0] and gpu[1] >= built[1]:
            return True
    return False


def _entry(document: Any) -> dict[str, Any]:
    if isinstance(document, list):
        document = document[0] if document else {}
    return document if isinstance(document, dict) else {}


def _labels(document: Any) -> dict[str, str]:
    entry = _entry(document)
    for key in ("Config", "config", "ContainerConfig"):
        section = entry.get(key)
        if isinstance(section, dict) and isinstance(section.get("Labels"), dict):
            labels = section["Labels"]
            break
    else:
        labels = entry.get("Labels") if isinstance(entry.get("Labels"), dict) else {}
    return {
        str(k)[:MAX_LABEL_TEXT]: str(v)[:MAX_LABEL_TEXT]
        for k, v in list(labels.items())[:MAX_LABELS]
        if isinstance(v, str | int | float)
    }


def _user(entry: dict[str, Any]) -> str | None:
    """The config's User (`1000`, `1000:1000`, `vllm`): who the container runs as by default;
    None when unset (root)."""
    for key in ("Config", "config"):
        section = entry.get(key)
        if isinstance(section, dict):
            user = section.get("User")
            if isinstance(user, str | int) and str(user).strip():
                return str(user).strip()[:64]
            return None
    return None


def _platform(document: Any) -> str | None:
    entry = _entry(document)
    os_name = entry.get("os") or entry.get("Os")
    arch = entry.get("architecture") or entry.get("Architecture")
    variant = entry.get("variant") or entry.get("Variant")
    if not isinstance(os_name, str) or not isinstance(arch, str):
        return None
    return f"{os_name}/{arch}" + (f"/{variant}" if isinstance(variant, str) and variant else "")


def _architectures(env: dict[str, str], labels: dict[str, str], facts: ConfigFacts) -> None:
    for key in ARCH_KEYS:
        for where, values in (("env", env), ("label", labels)):
            if (text := values.get(key)) is None:
                continue
            parsed = parse_architectures(text)
            if parsed is None:
                facts.warnings.append(f"{where} {key}={text[:80]!r}: not a list of architectures")
                continue
            facts.architectures, facts.architectures_from = parsed, f"{where} {key}"
            return


def _vllm_version(env: dict[str, str], labels: dict[str, str], facts: ConfigFacts) -> None:
    for key in VERSION_ENV:
        if env.get(key):
            facts.vllm_version, facts.vllm_version_from = env[key][:80], f"env {key}"
            return
    for key in VERSION_LABELS:
        if labels.get(key):
            facts.vllm_version, facts.vllm_version_from = labels[key][:80], f"label {key}"
            return
    naming = " ".join(labels.get(key, "") for key in OCI_NAMING).lower()
    if labels.get(OCI_VERSION) and "vllm" in naming:
        facts.vllm_version, facts.vllm_version_from = (
            labels[OCI_VERSION][:80],
            f"label {OCI_VERSION}",
        )


def config_facts(document: Any, where: str) -> ConfigFacts:
    """The facts of a parsed image config; `where` names it in errors (ImageError when the
    document is not an image config at all). An image without CUDA_VERSION or
    NVIDIA_REQUIRE_CUDA is not an error here: the facts say so (cuda is None)."""
    env = image_env(_entry(document))
    facts = ConfigFacts(labels=_labels(document), platform=_platform(document))
    try:
        cuda = image_cuda_from_document(_entry(document), where)
    except ImageError as exc:
        facts.warnings.append(str(exc))
    else:
        facts.cuda, facts.cuda_from = str(cuda.cuda), cuda.how
    if require := env.get("NVIDIA_REQUIRE_CUDA"):
        facts.require_cuda = parse_require_cuda(require[:4096])
    entry = _entry(document)
    created = entry.get("created") or entry.get("Created")
    facts.created = created[:64] if isinstance(created, str) else None
    facts.user = _user(entry)
    _architectures(env, facts.labels, facts)
    _vllm_version(env, facts.labels, facts)
    return facts
