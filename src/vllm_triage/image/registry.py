"""An image's config from its registry over the OCI distribution API, without pulling a layer:
the manifest for the tag or digest (a multi-arch index resolved for one platform), then the
config blob it names. Manifests in OCI and Docker v2 schema 2 media types.

Authentication as the registries do it: a 401 with `WWW-Authenticate: Bearer realm=...` is
answered from the realm's token service (anonymously, with a user and password, or with an
identity token as an OAuth2 refresh token), a `Basic` challenge with the user and password.

Limits on everything a registry sends: one total deadline for the whole resolution (every
request's timeout is what is left of it, and a body that drips is cut when it runs out), a size
cap on every body read, at most five redirects, never from HTTPS to HTTP. Credentials go only to
the registry's own host (a redirect elsewhere, where registries keep their blobs, is followed
without them, and a token request that carries a secret in its body is not redirected elsewhere)
or to a token service `vllm_triage.image.realms` trusts, and only over HTTPS (plain HTTP only to
this machine, as Docker allows for localhost); a realm it does not trust is asked anonymously,
and the image's notes name it. Every digest is checked: the manifest's against the one asked for
and the one the registry announces, the config's against the manifest's descriptor."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import re
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

import httpx

from vllm_triage import __version__
from vllm_triage.image.auth import Credential
from vllm_triage.image.config import MAX_CONFIG_BYTES, ImageError
from vllm_triage.image.platforms import Platform
from vllm_triage.image.realms import REALM_OPTION, RealmTrust, origin, realm_host
from vllm_triage.image.reference import LOOPBACK, ImageReference
from vllm_triage.safejson import JsonError, parse_json

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
DOCKER_LIST = "application/vnd.docker.distribution.manifest.list.v2+json"
DOCKER_MANIFEST = "application/vnd.docker.distribution.manifest.v2+json"
DOCKER_SCHEMA1 = (
    "application/vnd.docker.distribution.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v1+prettyjws",
)
INDEX_TYPES = (OCI_INDEX, DOCKER_LIST)
MANIFEST_TYPES = (OCI_MANIFEST, DOCKER_MANIFEST)
ACCEPT = ", ".join((*INDEX_TYPES, *MANIFEST_TYPES))
# The distribution registry refuses manifests over 4 MiB; token responses are a few KiB.
MAX_MANIFEST_BYTES = 4 * 1024**2
MAX_TOKEN_BYTES = 256 * 1024
MAX_ERROR_BYTES = 64 * 1024
MAX_REDIRECTS = 5
_CHALLENGE_PARAM = re.compile(r'([A-Za-z_]+)=(?:"((?:[^"\\]|\\.)*)"|([^,\s]*))')


class RegistryError(ImageError):
    """A registry that could not give the image's config; the message is one line, names the
    registry and the image, never a credential."""


class RegistryUnavailable(RegistryError):
    """The registry could not be reached or did not answer in time (or answered 429 / 5xx):
    the tag may stand in, with a warning."""


class RegistryAuthError(RegistryError):
    """The registry wants credentials that were not given, or refused the ones given."""


class RegistryNotFound(RegistryError):
    """The registry has no such repository, tag or digest."""


@dataclass(frozen=True)
class RegistryImage:
    """The config read from the registry and the digests it belongs to."""

    url: str
    digest: str
    manifest_digest: str
    config_digest: str
    media_type: str
    platform: str | None
    config: Any
    notes: tuple[str, ...] = ()


@dataclass(frozen=True)
class _Reply:
    status: int
    headers: httpx.Headers
    body: bytes
    url: str


def _short(text: str, limit: int = 160) -> str:
    text = " ".join("".join(ch if ch.isprintable() else " " for ch in text).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    return (parts.scheme, (parts.hostname or "").lower(), parts.port)


def _is_loopback_url(url: str) -> bool:
    parts = urlsplit(url)
    host = parts.hostname or ""
    return bool(LOOPBACK.match(f"[{host}]" if ":" in host else host))


def _ssl_context(ca_file: Path | None, registry: str) -> ssl.SSLContext:
    """The system's trusted CAs (or SSL_CERT_FILE's), certifi's, Docker's per-registry CA
    (/etc/docker/certs.d/HOST/ca.crt) and the one given, if any."""
    import os

    import certifi

    context = ssl.create_default_context(cafile=os.environ.get("SSL_CERT_FILE") or None)
    with contextlib.suppress(OSError, ssl.SSLError):
        context.load_verify_locations(cafile=certifi.where())
    docker_ca = Path("/etc/docker/certs.d") / registry / "ca.crt"
    for candidate in (docker_ca, ca_file):
        if candidate is None:
            continue
        try:
            context.load_verify_locations(cafile=str(candidate))
        except (OSError, ssl.SSLError) as exc:
            if candidate is ca_file:
                raise ImageError(f"CA file {candidate}: cannot be used ({exc})") from None
    return context


def _cause_chain(exc: BaseException) -> list[BaseException]:
    chain: list[BaseException] = []
    current: BaseException | None = exc
    while current is not None and len(chain) < 10:
        chain.append(current)
        current = current.__cause__ or current.__context__
    return chain


def _challenge(header: str) -> tuple[str, dict[str, str]]:
    """The scheme and parameters of a WWW-Authenticate header (the first challenge)."""
    scheme, _, rest = header.strip().partition(" ")
    params = {}
    for match in _CHALLENGE_PARAM.finditer(rest[:4096]):
        value = match.group(2) if match.group(2) is not None else match.group(3)
        params[match.group(1).lower()] = value.replace('\\"', '"')
    return scheme.lower(), params


def _error_codes(body: bytes) -> str:
    """The registry's error codes and messages (`MANIFEST_UNKNOWN: manifest unknown`)."""
    try:
        document = parse_json(body, "registry error", max_bytes=MAX_ERROR_BYTES)
    except JsonError:
        return ""
    errors = document.get("errors") if isinstance(document, dict) else None
    if not isinstance(errors, list):
        return ""
    parts = []
    for error in errors[:3]:
        if isinstance(error, dict):
            parts.append(f"{error.get('code', '')}: {error.get('message', '')}".strip(": "))
    return _short("; ".join(parts))


def _digest_of(body: bytes, algorithm: str) -> str:
    return f"{algorithm}:{hashlib.new(algorithm, body).hexdigest()}"


class RegistryClient:
    """One resolution's conversation with one registry: its scheme, its token, its deadline."""

    def __init__(
        self,
        ref: ImageReference,
        *,
        credential: Credential | None,
        timeout: float,
        ca_file: Path | None = None,
        helper_note: str | None = None,
        realms: RealmTrust | None = None,
    ) -> None:
        self.ref = ref
        self.credential = credential
        self.helper_note = helper_note
        self.realms = realms or RealmTrust()
        self.withheld_from: str | None = None  # the realm the credentials were not sent to
        self.notes: list[str] = []
        self.deadline = time.monotonic() + timeout
        self.timeout = timeout
        self.authorization: str | None = None
        self.base = f"https://{ref.endpoint}"
        self.settled = False
        self.client = httpx.Client(
            verify=_ssl_context(ca_file, ref.registry),
            follow_redirects=False,
            trust_env=True,
            headers={"User-Agent": f"vllm-triage/{__version__}"},
        )

    def close(self) -> None:
        self.client.close()

    def __enter__(self) -> RegistryClient:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # --- transport ---------------------------------------------------------------------------

    def _left(self) -> float:
        left = self.deadline - time.monotonic()
        if left <= 0:
            raise RegistryUnavailable(
                f"registry {self.ref.registry}: no answer within the {self.timeout:g} s deadline"
            )
        return left

    def _send(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        max_bytes: int,
        what: str,
        data: dict[str, str] | None = None,
    ) -> _Reply:
        """One request, redirects followed by hand (credentials kept only on the same origin,
        never HTTPS to HTTP), the body read up to `max_bytes` within the deadline."""
        origin = _origin(url)
        for _ in range(MAX_REDIRECTS + 1):
            parts = urlsplit(url)
            if parts.username or parts.password:
                raise RegistryError(f"{what}: refused a URL that carries credentials")
            left = self._left()
            request = self.client.build_request(
                method, url, headers=headers, data=data, timeout=httpx.Timeout(left)
            )
            try:
                response = self.client.send(request, stream=True)
            except httpx.TimeoutException:
                raise RegistryUnavailable(
                    f"registry {self.ref.registry}: no answer within the {self.timeout:g} s "
                    "deadline"
                ) from None
            try:
                if response.is_redirect and "location" in response.headers:
                    target = urljoin(url, response.headers["location"])
                    if urlsplit(url).scheme == "https" and urlsplit(target).scheme != "https":
                        raise RegistryError(f"{what}: refused a redirect from HTTPS to HTTP")
                    if _origin(target) != origin:
                        if data is not None and response.status_code != 303:
                            # the body (a refresh token) would go along: not to another host
                            raise RegistryError(f"{what}: refused a redirect to another host")
                        headers = {k: v for k, v in headers.items() if k.lower() != "authorization"}
                    url, method, data = (
                        target,
                        "GET" if response.status_code == 303 else method,
                        (None if response.status_code == 303 else data),
                    )
                    continue
                limit = max_bytes if response.is_success else MAX_ERROR_BYTES
                body = self._read(response, limit, what)
                return _Reply(response.status_code, response.headers, body, url)
            finally:
                response.close()
        raise RegistryError(f"{what}: more than {MAX_REDIRECTS} redirects")

    def _read(self, response: httpx.Response, limit: int, what: str) -> bytes:
        declared = response.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            if not response.is_success:
                return b""
            raise RegistryError(f"{what}: {declared} bytes, over the {limit} byte limit")
        chunks, size = [], 0
        try:
            for chunk in response.iter_bytes():
                size += len(chunk)
                if size > limit:
                    if not response.is_success:
                        break
                    raise RegistryError(f"{what}: over the {limit} byte limit; not read further")
                chunks.append(chunk)
                self._left()
        except httpx.TimeoutException:
            raise RegistryUnavailable(
                f"registry {self.ref.registry}: {what} not read within the {self.timeout:g} s "
                "deadline"
            ) from None
        return b"".join(chunks)

    def _request(
        self,
        method: str,
        url: str,
        headers: dict[str, str],
        max_bytes: int,
        what: str,
        data: dict[str, str] | None = None,
    ) -> _Reply:
        """_send, with transport failures as one-line registry errors (a TLS certificate that
        does not verify is not `unavailable`: it is fixed by trusting the right CA)."""
        try:
            return self._send(method, url, headers, max_bytes, what, data)
        except httpx.TransportError as exc:
            chain = _cause_chain(exc)
            if any(isinstance(e, ssl.SSLCertVerificationError) for e in chain):
                reason = next(
                    (
                        e.verify_message
                        for e in chain
                        if isinstance(e, ssl.SSLCertVerificationError)
                    ),
                    "",
                )
                raise RegistryError(
                    f"registry {urlsplit(url).netloc}: its TLS certificate does not verify "
                    f"({_short(str(reason), 80)}); trust its CA (SSL_CERT_FILE, or "
                    f"/etc/docker/certs.d/{urlsplit(url).netloc}/ca.crt)"
                ) from None
            reason = _short(str(exc) or type(exc).__name__, 100)
            raise RegistryUnavailable(
                f"registry {urlsplit(url).netloc} unreachable ({reason})"
            ) from None

    def _registry_get(self, path: str, accept: str, max_bytes: int, what: str) -> _Reply:
        """GET on the registry itself: the scheme settled on the first call (HTTPS; plain HTTP
        only for a registry on this machine that does not speak TLS), authentication answered
        once when challenged."""
        headers = {"Accept": accept}
        if self.authorization:
            headers["Authorization"] = self.authorization
        try:
            reply = self._request("GET", self.base + path, headers, max_bytes, what)
        except RegistryUnavailable:
            if self.settled or not self.ref.loopback:
                raise
            self.base = f"http://{self.ref.endpoint}"
            reply = self._request("GET", self.base + path, headers, max_bytes, what)
        self.settled = True
        if reply.status == 401 and self.authorization is None:
            self.authorization = self._authenticate(reply)
            headers["Authorization"] = self.authorization
            reply = self._request("GET", self.base + path, headers, max_bytes, what)
        if reply.status in (401, 403):
            raise self._refused(reply)
        return reply

    # --- authentication ----------------------------------------------------------------------

    def _may_send_secret(self, url: str) -> bool:
        return url.startswith("https://") or _is_loopback_url(url)

    def _needs_credentials(self, detail: str = "") -> RegistryAuthError:
        hint = self.helper_note or (
            "give --registry-auth with a docker config.json that has an `auths` entry for "
            f"{self.ref.registry}"
        )
        if self.withheld_from is not None:
            hint = (
                f"the credentials given were not sent to its token service "
                f"{_short(origin(self.withheld_from), 80)}, which is neither the registry's host "
                f"nor a known token service of it: if it is the registry's, name it with "
                f"{REALM_OPTION} {_short(realm_host(self.withheld_from), 80)}"
            )
        return RegistryAuthError(
            f"registry {self.ref.registry}: {self.ref.repository} needs credentials{detail}; {hint}"
        )

    def _refused(self, reply: _Reply) -> RegistryAuthError:
        codes = _error_codes(reply.body)
        detail = f" ({codes})" if codes else ""
        if self.credential is None or self.withheld_from is not None:
            return self._needs_credentials(
                " (or does not exist: registries answer both the same way)" + detail
            )
        return RegistryAuthError(
            f"registry {self.ref.registry} refused access to {self.ref.repository} with the "
            f"{self.credential.kind} given{detail}"
        )

    def _authenticate(self, reply: _Reply) -> str:
        """The Authorization header that answers the registry's challenge."""
        header = reply.headers.get("www-authenticate", "")
        scheme, params = _challenge(header)
        credential = self.credential
        if scheme == "basic":
            if credential is None or not (credential.username and credential.password):
                raise self._needs_credentials()
            if not self._may_send_secret(self.base):
                raise RegistryAuthError(
                    f"registry {self.ref.registry}: refused to send credentials over plain HTTP"
                )
            pair = f"{credential.username}:{credential.password}".encode()
            return "Basic " + base64.b64encode(pair).decode("ascii")
        if scheme != "bearer" or not params.get("realm"):
            raise RegistryError(
                f"registry {self.ref.registry}: answered 401 without a usable challenge "
                f"({_short(header, 60) or 'no WWW-Authenticate'})"
            )
        if credential is not None and credential.registry_token:
            if not self._may_send_secret(self.base):
                raise RegistryAuthError(
                    f"registry {self.ref.registry}: refused to send a token over plain HTTP"
                )
            return f"Bearer {credential.registry_token}"
        return f"Bearer {self._token(params)}"

    def _credential_for(self, realm: str) -> Credential | None:
        """The credential to present to this token service: none when the realm is not trusted
        with it (the note says which realm, and the request goes anonymously)."""
        credential = self.credential
        if credential is None or self.realms.trusts(realm, self.base):
            return credential
        self.withheld_from = realm
        self.notes.append(
            f"registry {self.ref.registry}: the credentials given ({credential.kind}) were not "
            f"sent to its token service {_short(origin(realm), 80)} (neither the registry's host "
            "nor a known token service of it), which was asked anonymously; if it is the "
            f"registry's, name it with {REALM_OPTION} {_short(realm_host(realm), 80)}"
        )
        return None

    def _token(self, params: dict[str, str]) -> str:
        """A bearer token from the realm's token service (Docker's token and OAuth2 flows)."""
        realm = params["realm"]
        scheme = urlsplit(realm).scheme  # lower case, as HTTP:// is http
        if scheme not in ("https", "http"):
            raise RegistryError(f"registry {self.ref.registry}: token realm is not an HTTP URL")
        if scheme == "http" and not (self.ref.loopback and _is_loopback_url(realm)):
            raise RegistryError(
                f"registry {self.ref.registry}: refused a token service over plain HTTP "
                f"({_short(realm, 80)})"
            )
        scope = params.get("scope") or f"repository:{self.ref.repository}:pull"
        query = {"scope": scope}
        if params.get("service"):
            query["service"] = params["service"]
        credential, headers = self._credential_for(realm), {"Accept": "application/json"}
        what = f"token service of {self.ref.registry}"
        if credential is not None and credential.identity_token:
            form = {
                "grant_type": "refresh_token",
                "refresh_token": credential.identity_token,
                "client_id": "vllm-triage",
                **query,
            }
            reply = self._request("POST", realm, headers, MAX_TOKEN_BYTES, what, data=form)
        else:
            if credential is not None and credential.username and credential.password:
                pair = f"{credential.username}:{credential.password}".encode()
                headers["Authorization"] = "Basic " + base64.b64encode(pair).decode("ascii")
                query["account"] = credential.username
            separator = "&" if urlsplit(realm).query else "?"
            reply = self._request(
                "GET", realm + separator + urlencode(query), headers, MAX_TOKEN_BYTES, what
            )
        if reply.status in (401, 403):
            if credential is None:
                raise self._needs_credentials()
            raise RegistryAuthError(
                f"registry {self.ref.registry}: its token service refused the "
                f"{credential.kind} given"
            )
        if reply.status != 200:
            raise RegistryUnavailable(f"{what}: answered {reply.status}")
        try:
            document = parse_json(reply.body, what, max_bytes=MAX_TOKEN_BYTES)
        except JsonError as exc:
            raise RegistryError(str(exc)) from None
        token = None
        if isinstance(document, dict):
            token = document.get("token") or document.get("access_token")
        if not isinstance(token, str) or not token or len(token) > MAX_TOKEN_BYTES:
            raise RegistryError(f"{what}: no token in its answer")
        return token

    # --- the image -------------------------------------------------------------------------

    def _manifest(self, reference: str) -> tuple[bytes, str, str]:
        """A manifest's bytes, media type and digest (checked)."""
        ref = self.ref
        shown = f"{ref.familiar}{'@' if ':' in reference else ':'}{reference}"
        what = f"manifest {shown}"
        reply = self._registry_get(
            f"/v2/{ref.repository}/manifests/{reference}", ACCEPT, MAX_MANIFEST_BYTES, what
        )
        if reply.status == 404:
            codes = _error_codes(reply.body)
            if "NAME_UNKNOWN" in codes:
                raise RegistryNotFound(f"registry {ref.registry}: no repository {ref.repository}")
            raise RegistryNotFound(
                f"registry {ref.registry}: no image {shown}" + (f" ({codes})" if codes else "")
            )
        if reply.status == 429 or reply.status >= 500:
            raise RegistryUnavailable(f"registry {ref.registry}: {what}: answered {reply.status}")
        if reply.status != 200:
            raise RegistryError(f"registry {ref.registry}: {what}: answered {reply.status}")
        algorithm = reference.split(":", 1)[0] if ":" in reference else "sha256"
        digest = _digest_of(
            reply.body, algorithm if algorithm in ("sha256", "sha512") else "sha256"
        )
        if ":" in reference and digest != reference:
            raise RegistryError(f"registry {ref.registry}: {what}: the content is {digest}")
        announced = reply.headers.get("docker-content-digest")
        if announced and announced.startswith(f"{digest.split(':')[0]}:") and announced != digest:
            raise RegistryError(
                f"registry {ref.registry}: {what}: its content does not match the digest the "
                "registry announces"
            )
        media_type = reply.headers.get("content-type", "").split(";")[0].strip()
        return reply.body, media_type, digest

    def _document(self, body: bytes, what: str) -> dict[str, Any]:
        try:
            document = parse_json(body, what, max_bytes=MAX_MANIFEST_BYTES)
        except JsonError as exc:
            raise RegistryError(f"registry {self.ref.registry}: {exc}") from None
        if not isinstance(document, dict):
            raise RegistryError(f"registry {self.ref.registry}: {what} is not a JSON object")
        return document

    def _kind(self, document: dict[str, Any], media_type: str, what: str) -> str:
        declared = document.get("mediaType")
        kind = declared if isinstance(declared, str) and declared else media_type
        if kind in DOCKER_SCHEMA1 or document.get("schemaVersion") == 1:
            raise RegistryError(
                f"registry {self.ref.registry}: {what} is a Docker schema 1 manifest "
                "(deprecated, no image config): use --image-config"
            )
        if kind in INDEX_TYPES or (kind not in MANIFEST_TYPES and "manifests" in document):
            return "index"
        if kind in MANIFEST_TYPES or "config" in document:
            return "manifest"
        raise RegistryError(
            f"registry {self.ref.registry}: {what}: not an image manifest ({_short(kind, 80)})"
        )

    def _choose(self, index: dict[str, Any], wanted: Platform) -> tuple[str, str]:
        """The digest and platform of the index entry for `wanted` (or the list of platforms
        the index has, in the error)."""
        entries = index.get("manifests")
        if not isinstance(entries, list):
            raise RegistryError(f"registry {self.ref.registry}: the index has no manifests list")
        seen = []
        for entry in entries[:1024]:
            if not isinstance(entry, dict) or not isinstance(entry.get("platform"), dict):
                continue
            raw = entry["platform"]
            found = Platform(
                str(raw.get("os", "")), str(raw.get("architecture", "")), raw.get("variant") or None
            )
            if found.os == "unknown":  # build attestations, not images
                continue
            seen.append(str(found))
            digest = entry.get("digest")
            if wanted.matches(found) and isinstance(digest, str):
                return digest, str(found)
        raise RegistryNotFound(
            f"registry {self.ref.registry}: {self.ref.familiar}:{self.ref.manifest_reference} has "
            f"no {wanted} image (it has {', '.join(seen[:12]) or 'none'}); use --platform"
        )

    def fetch(self, wanted: Platform) -> RegistryImage:
        """The image's config, read through its manifest (and index, for multi-arch images)."""
        ref = self.ref
        body, media_type, digest = self._manifest(ref.manifest_reference)
        what = f"manifest of {ref.familiar}"
        document = self._document(body, what)
        manifest_digest, chosen, top_type = digest, None, document.get("mediaType") or media_type
        if self._kind(document, media_type, what) == "index":
            child, chosen = self._choose(document, wanted)
            body, media_type, manifest_digest = self._manifest(child)
            document = self._document(body, f"{what} for {chosen}")
            if self._kind(document, media_type, what) != "manifest":
                raise RegistryError(f"registry {ref.registry}: nested indexes are not followed")
        descriptor = document.get("config")
        if not isinstance(descriptor, dict) or not isinstance(descriptor.get("digest"), str):
            raise RegistryError(f"registry {ref.registry}: {what} names no config")
        config_digest = descriptor["digest"]
        size = descriptor.get("size")
        if isinstance(size, int) and size > MAX_CONFIG_BYTES:
            raise RegistryError(
                f"registry {ref.registry}: the image config is {size} bytes, over the "
                f"{MAX_CONFIG_BYTES} byte limit"
            )
        algorithm = config_digest.split(":", 1)[0]
        if algorithm not in ("sha256", "sha512"):
            raise RegistryError(f"registry {ref.registry}: config digest {config_digest[:20]!r}")
        reply = self._registry_get(
            f"/v2/{ref.repository}/blobs/{config_digest}",
            "application/json, */*",
            MAX_CONFIG_BYTES,
            f"config of {ref.familiar}",
        )
        if reply.status == 429 or reply.status >= 500:
            raise RegistryUnavailable(
                f"registry {ref.registry}: config blob: answered {reply.status}"
            )
        if reply.status != 200:
            raise RegistryNotFound(
                f"registry {ref.registry}: config blob {config_digest[:19]}...: answered "
                f"{reply.status}"
            )
        if _digest_of(reply.body, algorithm) != config_digest:
            raise RegistryError(
                f"registry {ref.registry}: the config blob does not match its digest"
            )
        try:
            config = parse_json(reply.body, f"config of {ref.familiar}", max_bytes=MAX_CONFIG_BYTES)
        except JsonError as exc:
            raise RegistryError(f"registry {ref.registry}: {exc}") from None
        return RegistryImage(
            url=self.base,
            digest=digest,
            manifest_digest=manifest_digest,
            config_digest=config_digest,
            media_type=str(top_type),
            platform=chosen,
            config=config,
            notes=tuple(self.notes),
        )
