"""What preflight needs to know about the image, through the image package's `resolve_image`
(a config file given with --image-config, else the local engine, the registry, or the tag as a
fallback): its CUDA and NVIDIA_REQUIRE_CUDA, the GPU architectures it says it carries, its vLLM
version (labels or environment, else a release tag), and, from a config file, the user it runs
as. Where the facts came from is kept, and what is only a fallback becomes a warning."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_triage.image.config import MAX_CONFIG_BYTES
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.safejson import read_json_file
from vllm_triage.versions import CudaVersion

if TYPE_CHECKING:
    from vllm_triage.image import ResolvedImage

_RELEASE = re.compile(r"^v?([0-9]{1,6}\.[0-9]{1,6}\.[0-9]{1,6})(?:$|[-+])")


@dataclass
class ImageFacts:
    """The image's facts and where each came from; `notes` say what is only a fallback."""

    reference: str | None = None
    cuda: CudaVersion | None = None
    require: str | None = None
    cuda_from: str | None = None
    archs: list[str] = field(default_factory=list)
    archs_from: str | None = None
    vllm_version: str | None = None
    version_from: str | None = None
    user: str | None = None
    pinned: str | None = None
    notes: list[str] = field(default_factory=list)


def _entry(document: Any) -> dict[str, Any]:
    if isinstance(document, list):
        document = document[0] if document else {}
    return document if isinstance(document, dict) else {}


def _from_file(path: Path, facts: ImageFacts) -> None:
    """What resolve_image does not carry: the config's User, and a RepoTags name for display."""
    entry = _entry(read_json_file(path, display_name(path), max_bytes=MAX_CONFIG_BYTES))
    for key in ("Config", "config"):
        section = entry.get(key)
        if isinstance(section, dict):
            user = section.get("User")
            facts.user = str(user).strip() if isinstance(user, str | int) else None
            break
    tags = entry.get("RepoTags")
    if facts.reference is None and isinstance(tags, list) and tags and isinstance(tags[0], str):
        facts.reference = tags[0]


def _tag(reference: str | None) -> str | None:
    if not reference:
        return None
    last = reference.split("@", 1)[0].rsplit("/", 1)[-1]
    return last.split(":", 1)[1] if ":" in last else "latest"


def image_facts(
    kb: KnowledgeBase,
    reference: str | None,
    config: Path | None,
    *,
    registry_auth: Path | None = None,
    timeout: float = 20.0,
) -> ImageFacts:
    """The image's facts; ImageError (an InputError: exit 2, one line) when the image cannot be
    resolved at all."""
    from vllm_triage.image import ImageRequest, resolve_image

    request = ImageRequest(
        reference=reference.strip() if reference else None,
        config_file=config,
        registry_auth=registry_auth,
        timeout=timeout,
    )
    resolved: ResolvedImage = resolve_image(request, kb=kb)
    facts = ImageFacts(reference=resolved.reference, pinned=resolved.pinned)
    cuda = resolved.image_cuda()
    if cuda is not None:
        facts.cuda, facts.require = cuda.cuda, cuda.require
        facts.cuda_from = (
            resolved.source_detail
            if resolved.source == "tag"
            else f"{resolved.source_detail} ({cuda.how})"
        )
    facts.archs, facts.archs_from = list(resolved.architectures), resolved.architectures_from
    facts.vllm_version, facts.version_from = resolved.vllm_version, resolved.vllm_version_from
    facts.notes = list(resolved.warnings)
    if config is not None:
        _from_file(config, facts)
    tag = _tag(facts.reference)
    if facts.vllm_version is None and tag and (match := _RELEASE.match(tag)):
        facts.vllm_version, facts.version_from = match.group(1), f"tag {tag}"
    return facts
