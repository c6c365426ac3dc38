"""A registry that misbehaves, in ways the real one in tests/registry.py will not: a local HTTP
server in the test process that answers the distribution API with redirects to another host,
bodies over the caps, a body that drips past the deadline, content that does not match its
digest, a token service over plain HTTP elsewhere, token services that redirect to another host
(127.0.0.2, another loopback address). Credentials never leave the registry's own origin or a
trusted token service, every read is capped, every failure is one line."""

from __future__ import annotations

import base64
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from deadlines import ends_in_time

from vllm_triage.image import ImageError, ImageRequest, ResolvedImage, resolve_image
from vllm_triage.image.registry import RegistryUnavailable

CONFIG = json.dumps(
    {"architecture": "amd64", "os": "linux", "config": {"Env": ["CUDA_VERSION=13.0.1"]}}
).encode()
CONFIG_DIGEST = "sha256:" + hashlib.sha256(CONFIG).hexdigest()
MANIFEST = json.dumps(
    {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {
            "mediaType": "application/vnd.oci.image.config.v1+json",
            "digest": CONFIG_DIGEST,
            "size": len(CONFIG),
        },
        "layers": [],
    }
).encode()
MANIFEST_DIGEST = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
Route = Callable[[BaseHTTPRequestHandler], None]


@dataclass
class Server:
    """A local HTTP server whose answers the test sets per path; it records every request."""

    routes: dict[str, Route] = field(default_factory=dict)
    seen: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    httpd: ThreadingHTTPServer | None = None

    @property
    def host(self) -> str:
        assert self.httpd is not None
        return f"{self.httpd.server_address[0]}:{self.httpd.server_address[1]}"


class _Quiet(ThreadingHTTPServer):
    def handle_error(self, request: object, client_address: object) -> None:
        """A client that hung up mid-answer (the deadline tests do): not worth a traceback."""


@pytest.fixture
def servers() -> Iterator[Callable[..., Server]]:
    started: list[ThreadingHTTPServer] = []

    def start(address: str = "127.0.0.1") -> Server:
        server = Server()

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                path = self.path.split("?")[0]
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length).decode() if length else ""
                server.seen.append((self.path + body, dict(self.headers)))
                route = server.routes.get(path)
                if route is None:
                    self.send_response(404)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                route(self)

            do_POST = do_GET

        server.httpd = _Quiet((address, 0), Handler)
        server.httpd.daemon_threads = True
        threading.Thread(target=server.httpd.serve_forever, args=(0.05,), daemon=True).start()
        started.append(server.httpd)
        return server

    yield start
    for httpd in started:
        httpd.shutdown()
        httpd.server_close()


def send(body: bytes, status: int = 200, headers: dict[str, str] | None = None) -> Route:
    def route(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        handler.wfile.write(body)

    return route


def manifest_route(body: bytes = MANIFEST, headers: dict[str, str] | None = None) -> Route:
    return send(
        body,
        headers={"Content-Type": "application/vnd.oci.image.manifest.v1+json", **(headers or {})},
    )


def redirect(location: str) -> Route:
    return send(b"", 307, {"Location": location})


def needs_basic(route: Route) -> Route:
    expected = "Basic " + base64.b64encode(b"me:pw").decode()

    def guarded(handler: BaseHTTPRequestHandler) -> None:
        if handler.headers.get("Authorization") != expected:
            send(b"", 401, {"WWW-Authenticate": 'Basic realm="test"'})(handler)
            return
        route(handler)

    return guarded


def auth_file(tmp_path: Path, host: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"auths": {host: {"auth": base64.b64encode(b"me:pw").decode()}}}))
    return path


def resolve(
    reference: str,
    *,
    platform: str | None = None,
    registry_auth: Path | None = None,
    ca_file: Path | None = None,
    timeout: float = 20.0,
) -> ResolvedImage:
    """The image through the registry alone (no engine, no tag fallback)."""
    request = ImageRequest(
        reference,
        registry_auth=registry_auth,
        platform=platform,
        ca_file=ca_file,
        lookup=("registry",),
        timeout=timeout,
    )
    return resolve_image(request)


def test_credentials_stay_on_the_registrys_origin(
    servers: Callable[..., Server], tmp_path: Path
) -> None:
    registry, storage = servers(), servers()
    storage.routes["/blob"] = send(CONFIG)
    registry.routes["/v2/x/manifests/t"] = needs_basic(manifest_route())
    registry.routes[f"/v2/x/blobs/{CONFIG_DIGEST}"] = needs_basic(
        redirect(f"http://{storage.host}/blob")
    )
    resolved = resolve(f"{registry.host}/x:t", registry_auth=auth_file(tmp_path, registry.host))
    assert resolved.cuda == "13.0.1" and resolved.digest == MANIFEST_DIGEST
    assert [path for path, _ in storage.seen] == ["/blob"]
    assert "Authorization" not in storage.seen[0][1]
    assert any("Authorization" in headers for _, headers in registry.seen)


def test_a_redirect_that_carries_credentials_is_refused(servers: Callable[..., Server]) -> None:
    registry = servers()
    registry.routes["/v2/x/manifests/t"] = redirect(f"http://user:pw@{registry.host}/elsewhere")
    with pytest.raises(ImageError, match="refused a URL that carries credentials"):
        resolve(f"{registry.host}/x:t")


def test_a_redirect_loop_ends(servers: Callable[..., Server]) -> None:
    registry = servers()
    registry.routes["/v2/x/manifests/t"] = redirect("/v2/x/manifests/t")
    with pytest.raises(ImageError, match="more than 5 redirects"):
        resolve(f"{registry.host}/x:t")


@pytest.mark.parametrize("scheme", ["http", "HTTP"])
def test_a_token_service_over_plain_http_elsewhere_is_refused(
    servers: Callable[..., Server], tmp_path: Path, scheme: str
) -> None:
    registry = servers()
    challenge = f'Bearer realm="{scheme}://auth.example.invalid/token",service="s"'
    registry.routes["/v2/x/manifests/t"] = send(b"", 401, {"WWW-Authenticate": challenge})
    with pytest.raises(ImageError, match="token service over plain HTTP"):
        resolve(f"{registry.host}/x:t", registry_auth=auth_file(tmp_path, registry.host))


def test_a_manifest_over_the_cap(servers: Callable[..., Server]) -> None:
    registry = servers()
    registry.routes["/v2/x/manifests/t"] = manifest_route(b" " * (4 * 1024**2 + 1))
    with pytest.raises(ImageError, match="over the 4194304 byte limit"):
        resolve(f"{registry.host}/x:t")


def test_a_config_that_announces_a_huge_size(servers: Callable[..., Server]) -> None:
    registry = servers()
    big = json.loads(MANIFEST)
    big["config"]["size"] = 10**12
    registry.routes["/v2/x/manifests/t"] = manifest_route(json.dumps(big).encode())
    with pytest.raises(ImageError, match="image config is 1000000000000 bytes"):
        resolve(f"{registry.host}/x:t")


@pytest.mark.slow
def test_a_body_that_drips_is_cut_at_the_deadline(servers: Callable[..., Server]) -> None:
    registry = servers()

    def drip(handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/vnd.oci.image.manifest.v1+json")
        handler.end_headers()
        try:
            while True:  # forever: a deadline per read would never end it
                handler.wfile.write(b" ")
                handler.wfile.flush()
                time.sleep(0.2)
        except OSError:
            pass

    registry.routes["/v2/x/manifests/t"] = drip
    with (
        ends_in_time(1.5, "a manifest read that drips forever"),
        pytest.raises(RegistryUnavailable, match="deadline"),
    ):
        resolve(f"{registry.host}/x:t", timeout=1.5)


def test_content_that_does_not_match_its_digest(servers: Callable[..., Server]) -> None:
    registry = servers()
    registry.routes["/v2/x/manifests/t"] = manifest_route(
        headers={"Docker-Content-Digest": "sha256:" + "0" * 64}
    )
    with pytest.raises(ImageError, match="does not match the digest the registry announces"):
        resolve(f"{registry.host}/x:t")
    registry.routes["/v2/x/manifests/t"] = manifest_route()
    registry.routes[f"/v2/x/blobs/{CONFIG_DIGEST}"] = send(CONFIG.replace(b"13.0.1", b"12.9.1"))
    with pytest.raises(ImageError, match="config blob does not match its digest"):
        resolve(f"{registry.host}/x:t")
    registry.routes[f"/v2/x/manifests/sha256:{'1' * 64}"] = manifest_route()
    with pytest.raises(ImageError, match="the content is sha256:"):
        resolve(f"{registry.host}/x@sha256:{'1' * 64}")  # asked by digest, served other bytes


def test_a_schema1_manifest_is_named(servers: Callable[..., Server]) -> None:
    registry = servers()
    registry.routes["/v2/x/manifests/t"] = send(
        json.dumps({"schemaVersion": 1, "name": "x", "tag": "t"}).encode(),
        headers={"Content-Type": "application/vnd.docker.distribution.manifest.v1+prettyjws"},
    )
    with pytest.raises(ImageError, match="schema 1"):
        resolve(f"{registry.host}/x:t")


def test_a_registry_that_fails_is_unavailable(servers: Callable[..., Server]) -> None:
    registry = servers()
    registry.routes["/v2/x/manifests/t"] = send(b"busy", 503)
    with pytest.raises(RegistryUnavailable, match="answered 503"):
        resolve(f"{registry.host}/x:t")


# --- token services that redirect ---------------------------------------------------------


def token_route(handler: BaseHTTPRequestHandler) -> None:
    send(json.dumps({"token": "granted"}).encode(), headers={"Content-Type": "application/json"})(
        handler
    )


def needs_bearer(route: Route, realm: str) -> Route:
    def guarded(handler: BaseHTTPRequestHandler) -> None:
        if handler.headers.get("Authorization") != "Bearer granted":
            challenge = f'Bearer realm="{realm}",service="s"'
            send(b"", 401, {"WWW-Authenticate": challenge})(handler)
            return
        route(handler)

    return guarded


def identity_file(tmp_path: Path, host: str) -> Path:
    path = tmp_path / "identity.json"
    entry = {"auth": base64.b64encode(b"<token>:").decode(), "identitytoken": "refresh-secret"}
    path.write_text(json.dumps({"auths": {host: entry}}))
    return path


def test_a_token_service_that_redirects_elsewhere_loses_the_password(
    servers: Callable[..., Server], tmp_path: Path
) -> None:
    """The registry's own token service (its origin) redirects the GET with the Basic header to
    another host: followed, without the header."""
    registry, other = servers(), servers("127.0.0.2")
    other.routes["/token"] = token_route
    registry.routes["/token"] = redirect(f"http://{other.host}/token")
    registry.routes["/v2/x/manifests/t"] = needs_bearer(
        manifest_route(), f"http://{registry.host}/token"
    )
    registry.routes[f"/v2/x/blobs/{CONFIG_DIGEST}"] = needs_bearer(
        send(CONFIG), f"http://{registry.host}/token"
    )
    resolved = resolve(f"{registry.host}/x:t", registry_auth=auth_file(tmp_path, registry.host))
    assert resolved.cuda == "13.0.1" and resolved.warnings == []
    sent = [headers for path, headers in registry.seen if path.startswith("/token")]
    assert sent and all(h.get("Authorization", "").startswith("Basic ") for h in sent)
    assert [path.split("?")[0] for path, _ in other.seen] == ["/token"]
    assert "Authorization" not in other.seen[0][1]
    assert "me:pw" not in str(other.seen) and base64.b64encode(b"me:pw").decode() not in str(
        other.seen
    )


@pytest.mark.parametrize("status", [301, 302, 307, 308])
def test_a_refresh_token_is_not_redirected_elsewhere(
    servers: Callable[..., Server], tmp_path: Path, status: int
) -> None:
    """An identity token goes in a POST body, which a redirect (but 303) would carry along to
    the other host: such a redirect is refused, and the other host sees nothing."""
    registry, other = servers(), servers("127.0.0.2")
    other.routes["/token"] = token_route
    registry.routes["/token"] = send(b"", status, {"Location": f"http://{other.host}/token"})
    registry.routes["/v2/x/manifests/t"] = needs_bearer(
        manifest_route(), f"http://{registry.host}/token"
    )
    with pytest.raises(ImageError, match="refused a redirect to another host"):
        resolve(f"{registry.host}/x:t", registry_auth=identity_file(tmp_path, registry.host))
    posted = [path for path, _ in registry.seen if path.startswith("/token")]
    assert posted and "refresh-secret" in posted[0]  # the registry's own service had it
    assert other.seen == []


def test_a_refresh_token_redirected_on_its_own_origin_is_followed(
    servers: Callable[..., Server], tmp_path: Path
) -> None:
    registry = servers()
    registry.routes["/token"] = redirect("/v2/token")
    registry.routes["/v2/token"] = token_route
    for path in ("/v2/x/manifests/t", f"/v2/x/blobs/{CONFIG_DIGEST}"):
        body = manifest_route() if "manifests" in path else send(CONFIG)
        registry.routes[path] = needs_bearer(body, f"http://{registry.host}/token")
    resolved = resolve(f"{registry.host}/x:t", registry_auth=identity_file(tmp_path, registry.host))
    assert resolved.cuda == "13.0.1"
    assert any(p.startswith("/v2/token") and "refresh-secret" in p for p, _ in registry.seen)


def test_a_registry_redirect_to_a_realm_elsewhere_gets_no_credentials(
    servers: Callable[..., Server], tmp_path: Path
) -> None:
    """A realm on another host that answers with a token, reached by a registry that sends its
    client there: it is asked anonymously, and the note names it."""
    registry, realm = servers(), servers("127.0.0.2")
    realm.routes["/token"] = token_route
    for path in ("/v2/x/manifests/t", f"/v2/x/blobs/{CONFIG_DIGEST}"):
        body = manifest_route() if "manifests" in path else send(CONFIG)
        registry.routes[path] = needs_bearer(body, f"http://{realm.host}/token?x=1")
    resolved = resolve(f"{registry.host}/x:t", registry_auth=auth_file(tmp_path, registry.host))
    assert resolved.cuda == "13.0.1"
    assert realm.seen and all("Authorization" not in headers for _, headers in realm.seen)
    assert all("account=" not in path for path, _ in realm.seen)
    (note,) = resolved.warnings
    assert f"token service http://{realm.host} " in note and "x=1" not in note
    assert f"--registry-auth-realm {realm.host}" in note
