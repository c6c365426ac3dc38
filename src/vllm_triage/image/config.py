"""Which CUDA an image was built with: from its config (authoritative) or its tag (a fallback)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.safejson import read_json_file
from vllm_triage.versions import CudaVersion, VersionError

_REQUIRE_CUDA = re.compile(r"cuda>=([0-9]+\.[0-9]+)")
_RELEASE_TAG = re.compile(r"^v?([0-9]{1,6})\.([0-9]{1,6})\.([0-9]{1,6})")
# `docker image inspect` output is a few KiB to tens of KiB (its history and layer list included).
MAX_CONFIG_BYTES = 4 * 1024**2


class ImageError(InputError):
    """An image reference or config the tool cannot read; one-line message."""


@dataclass(frozen=True)
class ImageCuda:
    """The CUDA of an image and how it was found out."""

    cuda: CudaVersion
    require: str | None
    how: str


def _config_section(document: Any) -> dict[str, Any]:
    """Accept `docker image inspect` (a list or one object) and OCI image configs."""
    if isinstance(document, list):
        if not document:
            raise ImageError("image config: the list is empty")
        document = document[0]
    if not isinstance(document, dict):
        raise ImageError("image config: expected a JSON object")
    for key in ("Config", "config", "ContainerConfig"):
        section = document.get(key)
        if isinstance(section, dict) and section.get("Env") is not None:
            return section
    if "Env" in document:
        return document
    raise ImageError("image config: no Config.Env found (expected docker image inspect output)")


def image_cuda_from_config(path: Path) -> ImageCuda:
    """Read CUDA_VERSION / NVIDIA_REQUIRE_CUDA from an image config JSON file."""
    where = display_name(path)
    document = read_json_file(path, where, max_bytes=MAX_CONFIG_BYTES)
    return image_cuda_from_document(document, where)


def image_env(document: Any) -> dict[str, str]:
    """The environment of a parsed image config (docker image inspect or OCI)."""
    items = _config_section(document).get("Env") or []
    if not isinstance(items, list):
        raise ImageError("image config: Env is not a list of NAME=value strings")
    env = {}
    for item in items:
        if isinstance(item, str):
            key, _, value = item.partition("=")
            env[key] = value
    return env


def image_cuda_from_document(document: Any, where: str) -> ImageCuda:
    """CUDA_VERSION / NVIDIA_REQUIRE_CUDA of a parsed image config; `where` names it in errors."""
    env = image_env(document)
    require = env.get("NVIDIA_REQUIRE_CUDA")
    try:
        if env.get("CUDA_VERSION"):
            return ImageCuda(CudaVersion.parse(env["CUDA_VERSION"]), require, "CUDA_VERSION")
        if require and (match := _REQUIRE_CUDA.search(require)):
            return ImageCuda(CudaVersion.parse(match.group(1)), require, "NVIDIA_REQUIRE_CUDA")
    except VersionError as exc:
        raise ImageError(f"{where}: {exc}") from None
    raise ImageError(f"{where}: the image config has neither CUDA_VERSION nor NVIDIA_REQUIRE_CUDA")


def _split_reference(reference: str) -> tuple[str, str]:
    name, _, digest = reference.partition("@")
    if digest and ":" not in name.rsplit("/", 1)[-1]:
        raise ImageError(
            f"image {reference!r}: a digest alone does not tell the CUDA; pass --image-config"
        )
    repository, sep, tag = name.rpartition(":")
    if not sep or "/" in tag:
        return name, "latest"
    return repository, tag


def image_cuda_from_reference(kb: KnowledgeBase, reference: str) -> ImageCuda:
    """Resolve an image reference through the knowledge base (tags only; meaning changed at 0.20)."""
    repository, tag = _split_reference(reference.strip())
    images = kb.images
    if repository not in images.repositories:
        raise ImageError(
            f"image {reference!r}: not a known vLLM repository; pass --image-config or --cuda"
        )
    for named in images.named_tags:
        if named.tag == tag:
            return ImageCuda(named.cuda, None, f"tag {tag} ({named.note})")
    if match := re.search(images.suffix_pattern, tag):
        return ImageCuda(
            CudaVersion(int(match.group(1)), int(match.group(2))),
            None,
            f"tag suffix cu{match.group(1)}{match.group(2)}",
        )
    if match := _RELEASE_TAG.match(tag):
        release = tuple(int(part) for part in match.groups())
        for row in images.default_cuda_by_release:
            if release >= row.since_tuple:
                certainty = "" if row.certainty == "primary" else f" ({row.certainty} source)"
                how = f"default CUDA of vLLM releases since {row.since}{certainty}"
                return ImageCuda(row.cuda, None, how)
    raise ImageError(
        f"image {reference!r}: cannot tell its CUDA from the tag; pass --image-config or --cuda"
    )
