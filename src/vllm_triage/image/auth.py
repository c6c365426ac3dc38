"""Registry credentials from a Docker client config file (`~/.docker/config.json` format, given
with --registry-auth): its `auths` entries, `auth` (base64 `user:password`), `username` /
`password`, `identitytoken` (an OAuth2 refresh token for the registry's token service) and
`registrytoken` (a bearer token as it is).

Credentials are only ever held in memory: never written, never in a message, never in a repr.
Credential helpers (`credsStore`, `credHelpers`) are programs the tool does not run; a registry
whose credentials live there is named in the error, with what to do instead."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_triage.errors import InputError
from vllm_triage.image.reference import DOCKER_HUB, DOCKER_HUB_ALIASES
from vllm_triage.inputs import display_name
from vllm_triage.safejson import read_json_file

MAX_AUTH_FILE = 1024**2  # a config.json with hundreds of registries is tens of KiB


class AuthFileError(InputError):
    """A --registry-auth file the tool cannot use; the message never quotes a credential."""


@dataclass(frozen=True)
class Credential:
    """What to present to one registry. Exactly one of: username and password, an identity
    token (with its username, if any), a registry token. The values never appear in a repr."""

    username: str | None = field(default=None, repr=False)
    password: str | None = field(default=None, repr=False)
    identity_token: str | None = field(default=None, repr=False)
    registry_token: str | None = field(default=None, repr=False)

    @property
    def kind(self) -> str:
        """Which kind of credential, for messages (never the value)."""
        if self.registry_token:
            return "registry token"
        if self.identity_token:
            return "identity token"
        return "user and password"


@dataclass(frozen=True)
class RegistryAuth:
    """The credentials of a docker config file, by registry host; helpers named, not run."""

    source: str
    credentials: dict[str, Credential] = field(default_factory=dict, repr=False)
    helpers: dict[str, str] = field(default_factory=dict)
    store: str | None = None

    def for_registry(self, registry: str) -> Credential | None:
        """The credential for a registry host (Docker Hub under any of its names)."""
        return self.credentials.get(_host_key(registry))

    def helper_note(self, registry: str) -> str | None:
        """Where this registry's credentials are instead, when a helper keeps them."""
        helper = self.helpers.get(_host_key(registry)) or self.store
        if helper is None:
            return None
        return (
            f"{self.source} keeps credentials in the credential helper docker-credential-{helper}"
            ", which vllm-triage does not run: give a config file with an `auths` entry for "
            f"{registry} (docker login --config DIR writes one)"
        )


def _host_key(registry: str) -> str:
    """A config key or registry name reduced to the host[:port] it names: Docker Hub's several
    names (https://index.docker.io/v1/, docker.io, ...) become one."""
    host = registry.strip().lower()
    host = host.removeprefix("https://").removeprefix("http://")
    host = host.split("/", 1)[0]
    return DOCKER_HUB if host in DOCKER_HUB_ALIASES else host


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _credential(entry: dict[str, Any], key: str, source: str) -> Credential | None:
    """One `auths` entry as a credential; None when it holds none (an empty entry is usual
    when a helper keeps the secret)."""
    username, password = _text(entry.get("username")), _text(entry.get("password"))
    if encoded := _text(entry.get("auth")):
        try:
            decoded = base64.b64decode(encoded, validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise AuthFileError(
                f"{source}: the auth of {key!r} is not base64 of user:password"
            ) from None
        username, sep, password = decoded.partition(":")
        if not sep:
            raise AuthFileError(f"{source}: the auth of {key!r} is not base64 of user:password")
    if registry_token := _text(entry.get("registrytoken")):
        return Credential(registry_token=registry_token)
    if identity_token := _text(entry.get("identitytoken")):
        return Credential(username=username, identity_token=identity_token)
    if username and password:
        return Credential(username=username, password=password)
    return None


def read_registry_auth(path: Path) -> RegistryAuth:
    """The credentials of a docker config.json (read at most 1 MiB; JSON limits as everywhere)."""
    source = display_name(path)
    document = read_json_file(path, source, max_bytes=MAX_AUTH_FILE)
    if not isinstance(document, dict):
        raise AuthFileError(f"{source}: not a docker config file (expected a JSON object)")
    auths = document.get("auths") or {}
    if not isinstance(auths, dict):
        raise AuthFileError(f"{source}: `auths` is not an object of registries")
    credentials = {}
    for key, entry in auths.items():
        if not isinstance(entry, dict):
            raise AuthFileError(f"{source}: the entry of {str(key)[:80]!r} is not an object")
        if (credential := _credential(entry, str(key)[:80], source)) is not None:
            credentials[_host_key(str(key))] = credential
    raw_helpers = document.get("credHelpers")
    helpers = (
        {_host_key(str(k)): str(v) for k, v in raw_helpers.items() if isinstance(v, str)}
        if isinstance(raw_helpers, dict)
        else {}
    )
    return RegistryAuth(source, credentials, helpers, _text(document.get("credsStore")))
