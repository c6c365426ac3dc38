"""Which token services may receive a registry's credentials: a 401 names its token service (the
`realm`), and a hostile or mistaken registry can name any host there. Credentials go only to the
registry's own host and port, to a token service the knowledge pairs with the registry
(data/registry_realms.yaml: Docker Hub's auth.docker.io), or to a host the user names with
`--registry-auth-realm HOST`; plain HTTP only between hosts on this machine, when the registry
itself speaks plain HTTP there. Any other realm is asked anonymously, and the image's notes say
which one was not trusted."""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from vllm_triage.errors import InputError
from vllm_triage.image.reference import LOOPBACK, ImageReference

if TYPE_CHECKING:
    from vllm_triage.knowledge import KnowledgeBase

REALM_OPTION = "--registry-auth-realm"
_DEFAULT_PORTS = {"http": 80, "https": 443}
_HOST = re.compile(
    r"(?P<host>[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?(?:\.[a-z0-9](?:[a-z0-9-]{0,61}[a-z0-9])?)*"
    r"|\[[0-9a-f:.]{2,45}\])(?::(?P<port>[0-9]{1,5}))?"
)
# The hosts named on the command line, for the commands whose own options do not carry them
# (preflight, fleet scan): set around the command by the CLI, read when a registry is asked.
_NAMED: ContextVar[tuple[str, ...]] = ContextVar("trusted_realms", default=())


def parse_realm_host(text: str) -> str:
    """A --registry-auth-realm value as host or host:port, lower case; InputError (one line)
    for anything else (a scheme, a path, a user part, a port out of range)."""
    given = text.strip().lower()
    found = _HOST.fullmatch(given)
    port = found["port"] if found else None
    if found is None or (port is not None and not 0 < int(port) < 65536):
        raise InputError(
            f"{REALM_OPTION} {text[:80]!r}: give the token service's host, e.g. "
            "auth.example.com or auth.example.com:8443 (no scheme, no path)"
        )
    return given


@contextmanager
def trusted_realms(hosts: Iterable[str]) -> Iterator[None]:
    """Trust these token service hosts (validated) for the registry lookups made inside."""
    token = _NAMED.set(tuple(parse_realm_host(host) for host in hosts))
    try:
        yield
    finally:
        _NAMED.reset(token)


def _is_loopback(host: str) -> bool:
    """Whether a host as _host_port gives it (IPv6 in brackets) is this machine."""
    return bool(LOOPBACK.match(host))


def _host_port(url: str) -> tuple[str, str, int | None]:
    """The scheme, host (IPv6 in brackets) and port (the scheme's default when none) of a URL."""
    parts = urlsplit(url)
    scheme, host = parts.scheme.lower(), (parts.hostname or "").lower()
    try:
        port = parts.port
    except ValueError:
        return scheme, host, None
    if parts.username is not None or parts.password is not None:
        return scheme, "", None  # a user part: no host to trust (and never sent)
    return scheme, f"[{host}]" if ":" in host else host, port or _DEFAULT_PORTS.get(scheme)


def _names(host: str, port: int | None, scheme: str) -> set[str]:
    """How a trust list may name this host and port: host:port, or the host alone for the
    scheme's default port."""
    names = {f"{host}:{port}"}
    if port == _DEFAULT_PORTS.get(scheme):
        names.add(host)
    return names


@dataclass(frozen=True)
class RealmTrust:
    """The token services, besides the registry's own host, that may have its credentials."""

    paired: frozenset[str] = frozenset()
    named: frozenset[str] = frozenset()

    def trusts(self, realm: str, registry_url: str) -> bool:
        """Whether the realm URL may receive the credentials of the registry at registry_url."""
        scheme, host, port = _host_port(realm)
        registry_scheme, registry_host, registry_port = _host_port(registry_url)
        if not host or port is None or scheme not in _DEFAULT_PORTS:
            return False
        if scheme == "http" and not (
            registry_scheme == "http" and _is_loopback(host) and _is_loopback(registry_host)
        ):
            return False  # never a secret in plain HTTP over a network
        if (host, port) == (registry_host, registry_port):
            return True
        return bool(_names(host, port, scheme) & (self.paired | self.named))


def realm_trust(ref: ImageReference, kb: KnowledgeBase, named: Iterable[str] = ()) -> RealmTrust:
    """The trust for one registry: its pairings in the knowledge (by its name or its endpoint),
    the hosts named in `named` and those of an enclosing `trusted_realms`."""
    names = {ref.registry.lower(), ref.endpoint.lower()}
    paired = frozenset(
        host for row in kb.registry_realms if row.registry in names for host in row.realm_hosts
    )
    hosts = {parse_realm_host(host) for host in (*named, *_NAMED.get())}
    return RealmTrust(paired, frozenset(hosts))


def realm_host(url: str) -> str:
    """The realm's host as --registry-auth-realm takes it (with its port when not the default)."""
    scheme, host, port = _host_port(url)
    return host + (f":{port}" if port is not None and port != _DEFAULT_PORTS.get(scheme) else "")


def origin(url: str) -> str:
    """scheme://host[:port] of a realm, as notes name it (never its path or query: a hostile
    registry writes what it likes there)."""
    return f"{urlsplit(url).scheme.lower()}://{realm_host(url)}"
