"""An image's config without running it, and the CUDA and requirements it states.

Public API (stable; preflight and fleet call it):

    resolve_image(ImageRequest(reference="vllm/vllm-openai:v0.32.0",
                               registry_auth=None, platform=None)) -> ResolvedImage

`ImageRequest` (frozen dataclass): reference, config_file (--image-config: an OCI config or
`docker image inspect` output, wins over everything), registry_auth (a docker config.json for
private registries), platform ("linux/amd64"; default this host's), ca_file, lookup (the
sources after the file: "engine", "registry", "tag"; default $VLLM_TRIAGE_IMAGE_LOOKUP, else all),
timeout (seconds for the engine and for the registry), engine_path (PATH for docker / podman),
registry_auth_realms (token service hosts trusted with the credentials besides the registry's own
host and the known pairings of data/registry_realms.yaml; any other realm is asked anonymously
and a warning names it).

`ResolvedImage` (pydantic, embeddable in JSON output): source ("file" | "engine" | "registry" |
"tag") and source_detail; registry, repository, tag; digest (what the reference resolves to: a
multi-arch index's digest), manifest_digest (the platform's image), config_digest, pinned
(registry/repository@digest); media_type, platform; cuda and cuda_from; require_cuda
(NVIDIA_REQUIRE_CUDA parsed: cuda_min, clauses, brands with their driver branch); architectures
(`9.0`, `10.0a`, `12.0+PTX`) and architectures_from; vllm_version and vllm_version_from; created;
user (the config's User); labels; warnings (the tag fallback says so here).
`ResolvedImage.image_cuda()` gives the `ImageCuda` the compat check takes.

Errors are `ImageError` (an InputError: exit 2, one line): a reference that is not one, a missing
repository, tag or platform, credentials needed or refused, an unreachable registry when the tag
cannot stand in. `arch_supports(architectures, "9.0")` applies NVIDIA's binary compatibility
rules; `describe(resolved)` is the one line for people; `image_inputs(request)` is what the
commands taking --image-config / --image use (a resolved config as a temporary file).
"""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.image.config import ImageCuda, ImageError
    from vllm_triage.image.facts import arch_supports, parse_require_cuda
    from vllm_triage.image.models import RequireCuda, ResolvedImage
    from vllm_triage.image.platforms import Platform
    from vllm_triage.image.resolve import (
        ImageInputs,
        ImageRequest,
        describe,
        image_inputs,
        resolve_image,
    )

_EXPORTS = {
    "ImageCuda": "vllm_triage.image.config",
    "ImageError": "vllm_triage.image.config",
    "arch_supports": "vllm_triage.image.facts",
    "parse_require_cuda": "vllm_triage.image.facts",
    "RequireCuda": "vllm_triage.image.models",
    "ResolvedImage": "vllm_triage.image.models",
    "Platform": "vllm_triage.image.platforms",
    "ImageInputs": "vllm_triage.image.resolve",
    "ImageRequest": "vllm_triage.image.resolve",
    "describe": "vllm_triage.image.resolve",
    "image_inputs": "vllm_triage.image.resolve",
    "resolve_image": "vllm_triage.image.resolve",
}
__all__ = [
    "ImageCuda",
    "ImageError",
    "ImageInputs",
    "ImageRequest",
    "Platform",
    "RequireCuda",
    "ResolvedImage",
    "arch_supports",
    "describe",
    "image_inputs",
    "parse_require_cuda",
    "resolve_image",
]
__getattr__ = lazy_exports(__name__, _EXPORTS)
