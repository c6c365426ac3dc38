"""Image references as Docker reads them: `[registry/]repository[:tag][@digest]`, with Docker
Hub's defaults (`docker.io`, `library/` for one-part names, `latest` when neither a tag nor a
digest is given). The grammar is the distribution project's (reference/regexp.go), written without
nested ambiguous repetition so a hostile string cannot make the matcher backtrack for long."""

from __future__ import annotations

import re
from dataclasses import dataclass

from vllm_triage.image.config import ImageError

DOCKER_HUB = "docker.io"
DOCKER_HUB_ENDPOINT = "registry-1.docker.io"
# Names the Docker tools use for Docker Hub in config files and references.
DOCKER_HUB_ALIASES = frozenset(
    {DOCKER_HUB, "index.docker.io", DOCKER_HUB_ENDPOINT, "registry.hub.docker.com"}
)
MAX_REFERENCE = 1024  # a name is at most 255 characters, a tag 128, a digest 71 (sha256) or 135
MAX_NAME = 255
_COMPONENT = r"[a-z0-9]+(?:(?:[._]|__|-+)[a-z0-9]+)*"
_NAME = re.compile(rf"{_COMPONENT}(?:/{_COMPONENT})*")
_DOMAIN = re.compile(
    r"(?:(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]{0,62}[A-Za-z0-9])"
    r"(?:\.(?:[A-Za-z0-9]|[A-Za-z0-9][A-Za-z0-9-]{0,62}[A-Za-z0-9])){0,126}"
    r"|\[[0-9A-Fa-f:.]{2,45}\])(?::[0-9]{1,5})?"
)
_TAG = re.compile(r"[\w][\w.-]{0,127}")
_DIGEST = re.compile(r"(sha256:[0-9a-f]{64}|sha512:[0-9a-f]{128})")
LOOPBACK = re.compile(r"^(?:localhost|127(?:\.[0-9]{1,3}){3}|\[::1\])(?::[0-9]+)?$")


class ImageReferenceError(ImageError):
    """An image reference that is not one; the message is one line."""


@dataclass(frozen=True)
class ImageReference:
    """A parsed image reference: where the registry is, which repository, which tag or digest."""

    registry: str
    repository: str
    tag: str | None
    digest: str | None
    given: str

    @property
    def endpoint(self) -> str:
        """The host (and port) to talk the distribution API to."""
        return DOCKER_HUB_ENDPOINT if self.registry == DOCKER_HUB else self.registry

    @property
    def loopback(self) -> bool:
        """A registry on this machine (Docker lets those speak plain HTTP)."""
        return bool(LOOPBACK.match(self.registry))

    @property
    def manifest_reference(self) -> str:
        """What to ask the registry for: the digest when there is one (it wins), else the tag."""
        return self.digest or self.tag or "latest"

    @property
    def name(self) -> str:
        """registry/repository, as Docker writes a fully qualified name."""
        return f"{self.registry}/{self.repository}"

    @property
    def familiar(self) -> str:
        """The repository as people write it (`vllm/vllm-openai`, `nginx`, `host:5000/x`)."""
        if self.registry != DOCKER_HUB:
            return self.name
        return self.repository.removeprefix("library/")

    def pinned(self, digest: str) -> str:
        """The reference pinned to a digest, fully qualified."""
        return f"{self.name}@{digest}"

    def __str__(self) -> str:
        text = self.name
        if self.tag:
            text += f":{self.tag}"
        if self.digest:
            text += f"@{self.digest}"
        return text


def parse_reference(text: str) -> ImageReference:
    """Parse an image reference the way `docker pull` does, or say in one line why it is not
    one (the reference is quoted, cut to a readable length)."""
    given = text.strip()
    shown = given if len(given) <= 80 else given[:77] + "..."
    if not given or len(given) > MAX_REFERENCE:
        raise ImageReferenceError(f"image {shown!r}: not an image reference (empty or too long)")
    rest, _, digest = given.partition("@")
    if digest and not _DIGEST.fullmatch(digest):
        raise ImageReferenceError(
            f"image {shown!r}: the digest is not sha256:<64 hex> or sha512:<128 hex>"
        )
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, _, tag = rest.rpartition(":")
        if not _TAG.fullmatch(tag):
            raise ImageReferenceError(f"image {shown!r}: {tag[:40]!r} is not a valid tag")
    registry, repository = DOCKER_HUB, rest
    first, slash, remainder = rest.partition("/")
    if slash and ("." in first or ":" in first or first == "localhost" or first != first.lower()):
        if not _DOMAIN.fullmatch(first):
            raise ImageReferenceError(f"image {shown!r}: {first[:40]!r} is not a registry host")
        registry, repository = first, remainder
    if registry in DOCKER_HUB_ALIASES:
        registry = DOCKER_HUB
    if registry == DOCKER_HUB and "/" not in repository:
        repository = f"library/{repository}"
    if len(repository) > MAX_NAME or not _NAME.fullmatch(repository):
        raise ImageReferenceError(
            f"image {shown!r}: not a repository name (lowercase letters, digits, and . _ - / "
            "between them)"
        )
    if tag is None and not digest:
        tag = "latest"
    return ImageReference(registry, repository, tag, digest or None, given)
