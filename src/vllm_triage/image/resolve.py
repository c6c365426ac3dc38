"""`resolve_image`: an image's config facts without running it, from the most authoritative
source at hand, in this order:

1. `--image-config FILE` (an OCI image config, or `docker image inspect` output): nothing else
   is asked.
2. The local engine (`docker image inspect`, else `podman image inspect`), when one is installed,
   answers and has the image (for the platform asked, when one is asked).
3. The registry, over the OCI distribution API (see `vllm_triage.image.registry`), the digest
   pinned in the result.
4. The tag, through the knowledge base, with a warning (vLLM's tags changed meaning at v0.20.0):
   only when the registry could not be reached (or the lookup is limited to it), never when the
   registry said the image does not exist or refused the credentials.

`VLLM_TRIAGE_IMAGE_LOOKUP` (a comma list of engine, registry, tag) limits the sources asked by
default: air-gapped hosts set `engine,tag`, the test suite `tag` (its tests never reach out)."""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from vllm_triage.errors import InputError
from vllm_triage.image.config import MAX_CONFIG_BYTES, ImageError, image_cuda_from_reference
from vllm_triage.image.engine import EngineImage, inspect_local
from vllm_triage.image.facts import config_facts
from vllm_triage.image.models import ResolvedImage
from vllm_triage.image.platforms import Platform
from vllm_triage.image.realms import parse_realm_host
from vllm_triage.image.reference import ImageReference, parse_reference
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.safejson import parse_json, read_capped

LOOKUP_ENV = "VLLM_TRIAGE_IMAGE_LOOKUP"
LOOKUPS = ("engine", "registry", "tag")
TAG_WARNING = (
    "CUDA from the tag {tag} through the knowledge base, not from the image config: vLLM's tags "
    "changed meaning at v0.20.0 (cu130 became the default); give --image-config, or let the "
    "tool reach the engine or the registry"
)


@dataclass(frozen=True)
class ImageRequest:
    """Which image, and how it may be looked up.

    reference: an image reference (`vllm/vllm-openai:v0.32.0`, `host:5000/x@sha256:...`).
    config_file: an image config to read instead (wins over everything else).
    registry_auth: a docker config.json with `auths` for private registries.
    registry_auth_realms: token service hosts (host or host:port) trusted with those
        credentials besides the registry's own host and its known pairings
        (--registry-auth-realm; see vllm_triage.image.realms).
    platform: os/arch[/variant] to pick from a multi-arch index (default: this host's, Linux;
        linux/amd64 elsewhere); it also rules out a local image of another platform.
    ca_file: a CA to trust for the registry's TLS (besides the system's, SSL_CERT_FILE's and
        /etc/docker/certs.d/HOST/ca.crt).
    lookup: the sources to ask after the config file, from engine, registry, tag (default:
        $VLLM_TRIAGE_IMAGE_LOOKUP, else all three).
    timeout: seconds for the engine and the registry, each, in all.
    engine_path: the PATH to find docker / podman on (default: $PATH)."""

    reference: str | None = None
    config_file: Path | None = None
    registry_auth: Path | None = None
    platform: str | None = None
    ca_file: Path | None = None
    lookup: tuple[str, ...] | None = None
    timeout: float = 20.0
    engine_path: str | None = None
    registry_auth_realms: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        # A realm host that is not one is refused at once, whichever sources are asked.
        hosts = tuple(parse_realm_host(host) for host in self.registry_auth_realms)
        object.__setattr__(self, "registry_auth_realms", hosts)


def _lookup(request: ImageRequest) -> tuple[str, ...]:
    if request.lookup is not None:
        chosen = request.lookup
    elif text := os.environ.get(LOOKUP_ENV, "").strip():
        chosen = tuple(part.strip() for part in text.split(",") if part.strip())
    else:
        return LOOKUPS
    unknown = [name for name in chosen if name not in LOOKUPS]
    if unknown:
        raise InputError(f"image lookup {','.join(unknown)!r}: choose from {', '.join(LOOKUPS)}")
    return tuple(chosen)


def _resolved(document: Any, where: str, **fields: Any) -> ResolvedImage:
    """A ResolvedImage from a config document and what is known of where it came from."""
    facts = config_facts(document, where)
    return ResolvedImage(
        cuda=facts.cuda,
        cuda_from=facts.cuda_from,
        require_cuda=facts.require_cuda,
        architectures=facts.architectures,
        architectures_from=facts.architectures_from,
        vllm_version=facts.vllm_version,
        vllm_version_from=facts.vllm_version_from,
        created=facts.created,
        user=facts.user,
        labels=facts.labels,
        platform=fields.pop("platform", None) or facts.platform,
        warnings=[*fields.pop("warnings", []), *facts.warnings],
        **fields,
    )


def _from_file(path: Path, reference: str | None) -> ResolvedImage:
    where = display_name(path)
    data = read_capped(path, where, MAX_CONFIG_BYTES)
    document = parse_json(data, where, max_bytes=MAX_CONFIG_BYTES)
    entry = document[0] if isinstance(document, list) and document else document
    digest, config_digest = None, None
    if isinstance(entry, dict) and ("Config" in entry or "Id" in entry):  # docker image inspect
        repo_digests = entry.get("RepoDigests")
        if isinstance(repo_digests, list) and repo_digests and isinstance(repo_digests[0], str):
            digest = repo_digests[0].rpartition("@")[2] or None
        config_digest = entry.get("Id") if isinstance(entry.get("Id"), str) else None
    else:  # an OCI config: its digest is the file's
        config_digest = f"sha256:{hashlib.sha256(data).hexdigest()}"
    return _resolved(
        document,
        where,
        reference=reference,
        source="file",
        source_detail=f"image config file {where}",
        digest=digest,
        config_digest=config_digest,
    )


def _engine_digest(entry: dict[str, Any], ref: ImageReference) -> str | None:
    """The registry digest the engine recorded for this repository (RepoDigests), if any."""
    digests = entry.get("RepoDigests")
    if not isinstance(digests, list):
        return None
    for item in digests:
        if not isinstance(item, str):
            continue
        name, _, digest = item.rpartition("@")
        try:
            if parse_reference(f"{name}@{digest}").name == ref.name:
                return digest
        except ImageError:
            continue
    return None


def _from_engine(found: EngineImage, ref: ImageReference) -> ResolvedImage:
    entry = found.document
    digest = _engine_digest(entry, ref)
    identity = entry.get("Id") or entry.get("Digest")
    config_digest = identity if isinstance(identity, str) and identity.startswith("sha") else None
    return _resolved(
        entry,
        f"{found.engine} image inspect {ref.given}",
        reference=ref.given,
        source="engine",
        source_detail=f"local {found.engine} engine (image inspect)",
        registry=ref.registry,
        repository=ref.repository,
        tag=ref.tag,
        digest=digest,
        config_digest=config_digest,
        pinned=ref.pinned(digest) if digest else None,
        warnings=[]
        if digest
        else ["the local image has no registry digest (built or loaded here)"],
    )


def _from_registry(
    ref: ImageReference, request: ImageRequest, wanted: Platform, kb: KnowledgeBase | None
) -> ResolvedImage:
    from vllm_triage.image.realms import realm_trust
    from vllm_triage.image.registry import RegistryClient  # httpx: only when a registry is asked

    credential, helper_note = None, None
    if request.registry_auth is not None:
        from vllm_triage.image.auth import read_registry_auth

        auth = read_registry_auth(request.registry_auth)
        credential = auth.for_registry(ref.registry)
        helper_note = None if credential else auth.helper_note(ref.registry)
    realms = realm_trust(ref, kb or load_knowledge(), request.registry_auth_realms)
    with RegistryClient(
        ref,
        credential=credential,
        timeout=request.timeout,
        ca_file=request.ca_file,
        helper_note=helper_note,
        realms=realms,
    ) as client:
        image = client.fetch(wanted)
    warnings = list(image.notes)
    facts_platform = config_facts(image.config, "registry config").platform
    try:
        stated = Platform.parse(facts_platform) if facts_platform else None
    except ImageError:
        stated = None
    if stated is not None and not wanted.matches(stated):
        warnings.append(f"the image is {facts_platform}, not {wanted}")
    return _resolved(
        image.config,
        f"config of {ref}",
        reference=ref.given,
        source="registry",
        source_detail=f"registry {image.url}",
        registry=ref.registry,
        repository=ref.repository,
        tag=ref.tag,
        digest=image.digest,
        manifest_digest=image.manifest_digest,
        config_digest=image.config_digest,
        pinned=ref.pinned(image.digest),
        media_type=image.media_type,
        platform=image.platform or facts_platform,
        warnings=warnings,
    )


def _from_tag(
    ref: ImageReference | None, reference: str, kb: KnowledgeBase | None, why: list[str]
) -> ResolvedImage:
    cuda = image_cuda_from_reference(kb or load_knowledge(), reference)
    warning = TAG_WARNING.format(tag=ref.tag if ref else reference)
    return ResolvedImage(
        reference=reference,
        source="tag",
        source_detail=f"knowledge base, {cuda.how}",
        registry=ref.registry if ref else None,
        repository=ref.repository if ref else None,
        tag=ref.tag if ref else None,
        cuda=str(cuda.cuda),
        cuda_from=cuda.how,
        warnings=[warning, *why],
    )


def _platform_of(entry: dict[str, Any]) -> Platform | None:
    os_name, arch = entry.get("Os"), entry.get("Architecture")
    if not isinstance(os_name, str) or not isinstance(arch, str):
        return None
    variant = entry.get("Variant")
    return Platform(os_name, arch, variant if isinstance(variant, str) and variant else None)


def resolve_image(request: ImageRequest, *, kb: KnowledgeBase | None = None) -> ResolvedImage:
    """The image's config facts and where they came from (see the module's docstring for the
    order); ImageError (exit 2, one line) for a reference that is not one, an image that does not
    exist, credentials needed or refused, or a registry out of reach with no tag to stand in."""
    if request.config_file is not None:
        return _from_file(request.config_file, request.reference)
    if not request.reference:
        raise InputError("say which image: --image REF or --image-config FILE")
    lookup = _lookup(request)
    wanted = Platform.parse(request.platform) if request.platform else Platform.host()
    try:
        ref = parse_reference(request.reference)
    except ImageError:
        if lookup == ("tag",):
            return _from_tag(None, request.reference, kb, [])
        raise
    why: list[str] = []
    if "engine" in lookup:
        found = inspect_local(ref.given, path=request.engine_path, timeout=request.timeout)
        if isinstance(found, EngineImage):
            local = _platform_of(found.document)
            if request.platform is None or local is None or wanted.matches(local):
                return _from_engine(found, ref)
            why.append(f"the local image is {local}, not {wanted}")
        else:
            why.append("local engine: " + "; ".join(found.reasons))
    if "registry" in lookup:
        from vllm_triage.image.registry import RegistryUnavailable

        try:
            return _from_registry(ref, request, wanted, kb)
        except RegistryUnavailable as exc:
            if "tag" not in lookup:
                raise
            try:
                return _from_tag(ref, request.reference, kb, [str(exc)])
            except ImageError as tag_error:
                raise ImageError(
                    f"{exc}; and the tag does not tell the CUDA: {_after_quote(str(tag_error))}"
                ) from None
    if "tag" in lookup:
        return _from_tag(ref, request.reference, kb, [])
    raise ImageError(f"image {ref.given!r}: not found ({'; '.join(why) or 'no source asked'})")


def _after_quote(message: str) -> str:
    """An image error without its `image 'REF': ` prefix (the reference was named already)."""
    head, sep, rest = message.partition("': ")
    return rest if sep and head.startswith("image '") else message


def describe(resolved: ResolvedImage) -> str:
    """One line for people: which image, pinned to what, from where, and its CUDA."""
    parts = [f"image {resolved.reference or resolved.source_detail}"]
    if resolved.pinned:
        parts.append(f"= {resolved.pinned}")
    elif resolved.digest:
        parts.append(f"({resolved.digest})")
    if resolved.platform:
        parts.append(f"[{resolved.platform}]")
    parts.append(f"from {resolved.source_detail}")
    if resolved.cuda:
        parts.append(f"CUDA {resolved.cuda} ({resolved.cuda_from})")
    return " ".join(parts)


def config_document(resolved: ResolvedImage) -> list[dict[str, Any]]:
    """The resolved facts as a minimal `docker image inspect` document (the CUDA variables, the
    architecture list, labels, created, platform): what the commands that read an image config
    file take. Only the variables the facts came from; never the image's whole environment."""
    env = []
    if resolved.cuda and resolved.cuda_from == "CUDA_VERSION":
        env.append(f"CUDA_VERSION={resolved.cuda}")
    if resolved.require_cuda is not None:
        env.append(f"NVIDIA_REQUIRE_CUDA={resolved.require_cuda.raw}")
    if resolved.architectures_from and resolved.architectures_from.startswith("env "):
        key = resolved.architectures_from.removeprefix("env ")
        env.append(f"{key}={' '.join(resolved.architectures)}")
    os_name, _, arch = (resolved.platform or "/").partition("/")
    entry: dict[str, Any] = {
        "Id": resolved.config_digest,
        "RepoDigests": [resolved.pinned] if resolved.pinned else [],
        "Created": resolved.created,
        "Os": os_name or None,
        "Architecture": arch.split("/")[0] or None,
        "Config": {"Env": env, "Labels": resolved.labels, "User": resolved.user or ""},
    }
    return [entry]


@dataclass(frozen=True)
class ImageInputs:
    """What a command that takes `--image-config` / `--image` passes on after resolution: a
    config file (the one given, or the resolved facts written to a private temporary file) or,
    when only the tag could tell, the reference (resolved by tag as before)."""

    image_config: Path | None
    image: str | None
    resolved: ResolvedImage | None


@contextmanager
def image_inputs(
    request: ImageRequest, *, kb: KnowledgeBase | None = None
) -> Iterator[ImageInputs]:
    """Resolve the image once for a command that reads an image config file: yields the inputs
    to give it; a temporary config file (mode 0600, in a private folder) is removed on exit."""
    if request.config_file is not None or not request.reference:
        yield ImageInputs(request.config_file, request.reference, None)
        return
    resolved = resolve_image(request, kb=kb)
    if resolved.source == "tag":
        yield ImageInputs(None, request.reference, resolved)
        return
    with tempfile.TemporaryDirectory(prefix="vllm-triage-image-") as folder:
        path = Path(folder) / "image-config.json"
        path.write_text(json.dumps(config_document(resolved)), encoding="utf-8")
        path.chmod(0o600)
        yield ImageInputs(path, None, resolved)
