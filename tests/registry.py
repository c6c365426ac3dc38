"""Real registries for the image tests: Debian's `docker-registry` (the CNCF distribution
registry) started on 127.0.0.1 on free ports, with test images pushed by `skopeo` from OCI
layouts built here (tiny layers, configs like the CUDA images'):

- `open`: plain HTTP, no authentication (Docker lets localhost registries speak HTTP).
- `basic`: TLS with a certificate made for the run (trusted through the CA file given to the
  client), htpasswd basic authentication (the registry allows htpasswd only over TLS).
- `token`: plain HTTP with token authentication, Docker Hub's flow: the registry answers 401
  with `WWW-Authenticate: Bearer realm=...`, and the token service here (a small HTTP server in
  the test process, on another port of 127.0.0.1) signs JWTs with a key whose certificate the
  registry trusts (x5c header, RS256 signed by openssl). Anonymous callers get pull on
  `public/*`; the test user (password or refresh token) gets pull and push everywhere.
- `elsewhere`: a second registry over the token registry's storage whose realm is a token
  service on another loopback host (127.0.0.2), signing with the same key: the realm a client
  must not trust with the registry's credentials unless told to. Both token services record
  what each request carried.

Registered in tests/conftest.py with `pytest_plugins`. Without `docker-registry`, `skopeo` or
`openssl` the tests that need a registry skip, or fail saying what is missing when
VLLM_TRIAGE_REQUIRE_REGISTRY=1 (`make unit` sets it; `make system-deps` installs them).

It also sets VLLM_TRIAGE_IMAGE_LOOKUP=tag for the whole test session: no test reaches a container
engine or a registry on the network unless it asks (the image tests do, against these)."""

from __future__ import annotations

import base64
import gzip
import hashlib
import io
import json
import os
import secrets
import shutil
import socket
import ssl
import subprocess
import tarfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from deadlines import WATCHDOG_FLOOR_S

REQUIRE_ENV = "VLLM_TRIAGE_REQUIRE_REGISTRY"
TOOLS = ("docker-registry", "skopeo", "openssl")
USER, PASSWORD = "triage", "registry-test-password"
REFRESH_TOKEN = "test-refresh-token-for-triage"
ISSUER, SERVICE = "vllm-triage-test-issuer", "vllm-triage-test-registry"

OCI_INDEX = "application/vnd.oci.image.index.v1+json"
OCI_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
OCI_CONFIG = "application/vnd.oci.image.config.v1+json"
OCI_LAYER = "application/vnd.oci.image.layer.v1.tar+gzip"

# The NVIDIA CUDA base images' NVIDIA_REQUIRE_CUDA (13.0.1 and 12.9.1, Ubuntu 24.04): the
# `cuda>=` clause, or a Tesla / data-center GPU on a branch cuda-compat supports.
REQUIRE_130 = (
    "cuda>=13.0 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 "
    "brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 "
    "brand=unknown,driver>=570,driver<571 brand=tesla,driver>=570,driver<571"
)
REQUIRE_129 = (
    "cuda>=12.9 brand=unknown,driver>=535,driver<536 brand=grid,driver>=535,driver<536 "
    "brand=tesla,driver>=535,driver<536 brand=nvidia,driver>=535,driver<536 "
    "brand=unknown,driver>=550,driver<551 brand=tesla,driver>=550,driver<551 "
    "brand=unknown,driver>=560,driver<561 brand=tesla,driver>=560,driver<561 "
    "brand=unknown,driver>=565,driver<566 brand=tesla,driver>=565,driver<566 "
    "brand=unknown,driver>=570,driver<571 brand=tesla,driver>=570,driver<571"
)
SOURCE_LABELS = {
    "org.opencontainers.image.source": "https://github.com/vllm-project/vllm",
    "org.opencontainers.image.title": "vllm-openai",
}


@pytest.fixture(scope="session", autouse=True)
def _no_image_lookups_by_default() -> Iterator[None]:
    """Every test (and every command it starts) resolves --image by its tag only, unless it asks
    for more: the suite never reaches a container engine or a registry it did not start."""
    previous = os.environ.get("VLLM_TRIAGE_IMAGE_LOOKUP")
    os.environ["VLLM_TRIAGE_IMAGE_LOOKUP"] = "tag"
    yield
    if previous is None:
        del os.environ["VLLM_TRIAGE_IMAGE_LOOKUP"]
    else:
        os.environ["VLLM_TRIAGE_IMAGE_LOOKUP"] = previous


def missing_tools() -> list[str]:
    return [tool for tool in TOOLS if shutil.which(tool) is None]


def _unavailable(reason: str) -> None:
    if os.environ.get(REQUIRE_ENV):
        pytest.fail(f"{reason} ({REQUIRE_ENV} is set: `make system-deps` installs them)")
    pytest.skip(reason)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def sha256(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


# --- OCI layouts ---------------------------------------------------------------------------


@dataclass
class TestImage:
    """One image of a layout: its config's environment and labels, its platform."""

    env: dict[str, str]
    labels: dict[str, str] = field(default_factory=dict)
    architecture: str = "amd64"
    variant: str | None = None
    created: str = "2026-11-20T08:00:00Z"
    user: str | None = None


@dataclass
class Built:
    """What a layout holds under one name: the digest and media type of its top manifest, and
    each platform's manifest and config digests."""

    digest: str
    media_type: str
    manifests: dict[str, str] = field(default_factory=dict)
    configs: dict[str, str] = field(default_factory=dict)


class Layout:
    """An OCI image layout on disk (oci-layout, index.json, blobs/sha256), built by hand."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.blobs = path / "blobs" / "sha256"
        self.blobs.mkdir(parents=True, exist_ok=True)
        (path / "oci-layout").write_text('{"imageLayoutVersion": "1.0.0"}')
        self.refs: list[dict[str, Any]] = []

    def blob(self, data: bytes) -> dict[str, Any]:
        digest = sha256(data)
        (self.blobs / digest.split(":")[1]).write_bytes(data)
        return {"digest": digest, "size": len(data)}

    def _layer(self, text: str) -> tuple[dict[str, Any], str]:
        raw = io.BytesIO()
        with tarfile.open(fileobj=raw, mode="w") as tar:
            payload = text.encode()
            info = tarfile.TarInfo("etc/vllm-triage-test.txt")
            info.size, info.mtime = len(payload), 0
            tar.addfile(info, io.BytesIO(payload))
        uncompressed = raw.getvalue()
        compressed = gzip.compress(uncompressed, mtime=0)
        return {"mediaType": OCI_LAYER, **self.blob(compressed)}, sha256(uncompressed)

    def _image(self, image: TestImage) -> tuple[dict[str, Any], str]:
        layer, diff_id = self._layer(f"{image.architecture} {sorted(image.env.items())}")
        config: dict[str, Any] = {
            "created": image.created,
            "architecture": image.architecture,
            "os": "linux",
            "config": {
                "Env": [f"{k}={v}" for k, v in image.env.items()],
                "Labels": image.labels,
                "Entrypoint": ["vllm", "serve"],
                **({"User": image.user} if image.user else {}),
            },
            "rootfs": {"type": "layers", "diff_ids": [diff_id]},
            "history": [{"created": image.created, "created_by": "vllm-triage tests"}],
        }
        if image.variant:
            config["variant"] = image.variant
        config_blob = {"mediaType": OCI_CONFIG, **self.blob(json.dumps(config).encode())}
        manifest = {
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": config_blob,
            "layers": [layer],
        }
        return {"mediaType": OCI_MANIFEST, **self.blob(json.dumps(manifest).encode())}, config_blob[
            "digest"
        ]

    def add(self, name: str, *images: TestImage) -> Built:
        """One image (a manifest) or several (an index of them) under `name`."""
        if len(images) == 1:
            descriptor, config = self._image(images[0])
            built = Built(descriptor["digest"], OCI_MANIFEST)
            built.manifests[_platform(images[0])] = descriptor["digest"]
            built.configs[_platform(images[0])] = config
        else:
            entries = []
            built = Built("", OCI_INDEX)
            for image in images:
                descriptor, config = self._image(image)
                platform = {"architecture": image.architecture, "os": "linux"}
                if image.variant:
                    platform["variant"] = image.variant
                entries.append({**descriptor, "platform": platform})
                built.manifests[_platform(image)] = descriptor["digest"]
                built.configs[_platform(image)] = config
            index = {"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": entries}
            descriptor = {"mediaType": OCI_INDEX, **self.blob(json.dumps(index).encode())}
            built.digest = descriptor["digest"]
        self.refs.append({**descriptor, "annotations": {"org.opencontainers.image.ref.name": name}})
        (self.path / "index.json").write_text(
            json.dumps({"schemaVersion": 2, "manifests": self.refs})
        )
        return built


def _platform(image: TestImage) -> str:
    return f"linux/{image.architecture}" + (f"/{image.variant}" if image.variant else "")


def cuda_130(**labels: str) -> TestImage:
    return TestImage(
        env={
            "PATH": "/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin:/bin",
            "NVIDIA_REQUIRE_CUDA": REQUIRE_130,
            "NV_CUDA_CUDART_VERSION": "13.0.96-1",
            "CUDA_VERSION": "13.0.1",
            "NVIDIA_VISIBLE_DEVICES": "all",
            "TORCH_CUDA_ARCH_LIST": "8.0 8.9 9.0 10.0 12.0+PTX",
            "VLLM_USAGE_SOURCE": "production-docker-image",
            "HF_TOKEN": "hf_notarealtokenbutitlookslikeone1234",
        },
        labels={**SOURCE_LABELS, "org.opencontainers.image.version": "0.32.0", **labels},
    )


def cuda_129() -> TestImage:
    return TestImage(
        env={
            "NVIDIA_REQUIRE_CUDA": REQUIRE_129,
            "CUDA_VERSION": "12.9.1",
            "TORCH_CUDA_ARCH_LIST": "7.0 7.5 8.0 8.9 9.0 10.0 12.0+PTX",
            "VLLM_VERSION": "0.19.1",
        },
        labels={"maintainer": "NVIDIA CORPORATION <cudatools@nvidia.com>"},
        created="2026-04-02T10:00:00Z",
        user="1000:1000",
    )


# --- the token service ---------------------------------------------------------------------


def carries_secret(text: str) -> bool:
    """Whether a request's text holds one of the test credentials: the password (as it is, or in
    a Basic header, right or wrong) or the refresh token."""
    secrets_ = (PASSWORD, "not-the-password", REFRESH_TOKEN)
    encoded = [base64.b64encode(f"{USER}:{secret}".encode()).decode() for secret in secrets_]
    return any(secret in text for secret in (*secrets_, *encoded))


def _b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


@dataclass
class TokenService:
    """A Docker token service (the JWT flavour the distribution registry verifies)."""

    key: Path
    cert_der: bytes
    address: str = "127.0.0.1"
    server: ThreadingHTTPServer | None = None
    # Found once: the command-line tests run with PATH=/nonexistent (no container engine), and
    # the service signs in this process meanwhile.
    openssl: str = field(default_factory=lambda: shutil.which("openssl") or "openssl")
    requests: list[dict[str, Any]] = field(default_factory=list)
    cache: dict[tuple[str | None, str], tuple[str, float]] = field(default_factory=dict)

    @property
    def host(self) -> str:
        assert self.server is not None
        return f"{self.address}:{self.server.server_address[1]}"

    @property
    def realm(self) -> str:
        return f"http://{self.host}/token"

    def sign(self, claims: dict[str, Any]) -> str:
        header = {"typ": "JWT", "alg": "RS256", "x5c": [base64.b64encode(self.cert_der).decode()]}
        signing_input = (
            f"{_b64url(json.dumps(header).encode())}.{_b64url(json.dumps(claims).encode())}"
        )
        signature = subprocess.run(
            [self.openssl, "dgst", "-sha256", "-sign", str(self.key)],
            input=signing_input.encode(),
            capture_output=True,
            check=True,
        ).stdout
        return f"{signing_input}.{_b64url(signature)}"

    def grant(self, user: str | None, scope: str) -> str:
        """A token for this user (None: anonymous) and scope; one per pair, reused while it is
        valid (each signature is an openssl run)."""
        key = (user, scope)
        cached = self.cache.get(key)
        if cached and cached[1] > time.time() + 60:
            return cached[0]
        token = self._grant(user, scope)
        self.cache[key] = (token, time.time() + 600)
        return token

    def _grant(self, user: str | None, scope: str) -> str:
        access = []
        for item in scope.split():
            kind, _, rest = item.partition(":")
            name, _, actions = rest.rpartition(":")
            if kind != "repository":
                continue
            allowed = ["pull", "push"] if user else (["pull"] if name.startswith("public/") else [])
            granted = [a for a in actions.split(",") if a in allowed]
            access.append({"type": "repository", "name": name, "actions": granted})
        now = int(time.time())
        return self.sign(
            {
                "iss": ISSUER,
                "sub": user or "",
                "aud": SERVICE,
                "exp": now + 600,
                "nbf": now - 30,
                "iat": now,
                "jti": secrets.token_hex(8),
                "access": access,
            }
        )

    def start(self) -> None:
        service = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def _answer(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _basic_user(self) -> tuple[bool, str | None]:
                """(whether the caller may have a token, the user: None when anonymous)."""
                header = self.headers.get("Authorization", "")
                if not header.startswith("Basic "):
                    return True, None
                user, _, password = base64.b64decode(header[6:]).decode().partition(":")
                return (user, password) == (USER, PASSWORD), user

            def do_GET(self) -> None:
                query = parse_qs(urlsplit(self.path).query)
                allowed, user = self._basic_user()
                service.requests.append(
                    {
                        "method": "GET",
                        "query": query,
                        "authorization": "Authorization" in self.headers,
                        "secret": carries_secret(self.requestline + str(self.headers)),
                    }
                )
                if not allowed:
                    self._answer(401, {"details": "wrong user or password"})
                    return
                token = service.grant(user, " ".join(query.get("scope", [])))
                self._answer(200, {"token": token, "expires_in": 600})

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length).decode()
                form = parse_qs(body)
                service.requests.append(
                    {
                        "method": "POST",
                        "form": sorted(form),
                        "authorization": "Authorization" in self.headers,
                        "secret": carries_secret(self.requestline + str(self.headers) + body),
                    }
                )
                if form.get("grant_type") != ["refresh_token"] or form.get("refresh_token") != [
                    REFRESH_TOKEN
                ]:
                    self._answer(401, {"error": "invalid_grant"})
                    return
                token = service.grant(USER, " ".join(form.get("scope", [])))
                self._answer(200, {"access_token": token, "expires_in": 600})

        self.server = ThreadingHTTPServer((self.address, 0), Handler)
        threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True).start()

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


# --- registries ----------------------------------------------------------------------------


@dataclass
class Registry:
    """A running docker-registry: its host:port, and what the client needs to trust it."""

    name: str
    host: str
    scheme: str
    process: subprocess.Popen[bytes]
    log: Path
    ca_file: Path | None = None
    cert_dir: Path | None = None

    def ref(self, repository: str, tag: str) -> str:
        return f"{self.host}/{repository}:{tag}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def _openssl(*args: str) -> None:
    subprocess.run(["openssl", *args], check=True, capture_output=True, timeout=60)


def make_certificate(folder: Path, name: str, *, rsa: bool = False) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 / localhost, valid two days."""
    key, cert = folder / f"{name}.key", folder / f"{name}.crt"
    algorithm = (
        ["-newkey", "rsa:2048"]
        if rsa
        else ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    )
    _openssl(
        "req", "-x509", *algorithm, "-nodes", "-days", "2", "-subj", f"/CN={name}",
        "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost",
        "-keyout", str(key), "-out", str(cert),
    )  # fmt: skip
    return key, cert


def _bcrypt(password: str) -> str:
    """A bcrypt hash for htpasswd (the registry accepts bcrypt only; the lowest cost, 4, as the
    registry checks it on every request): Apache's `htpasswd -B`
    where it is installed, else Python's crypt module (glibc's libxcrypt does bcrypt; the module
    is gone from Python 3.13)."""
    if shutil.which("htpasswd"):
        line = subprocess.run(
            ["htpasswd", "-nbB", "-C", "4", "x", password],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return line.strip().partition(":")[2]
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        import crypt

    hashed = crypt.crypt(password, crypt.mksalt(crypt.METHOD_BLOWFISH, rounds=16))
    if not hashed or not hashed.startswith("$2"):
        raise RuntimeError("no bcrypt in this Python's crypt module")
    return hashed


def start_registry(
    base: Path,
    name: str,
    *,
    tls: tuple[Path, Path] | None = None,
    auth: dict[str, Any] | None = None,
    storage: Path | None = None,
) -> Registry:
    """A docker-registry named `name` under base, over its own storage or the one given (two
    registries may serve one storage: the registry keeps no state of its own)."""
    folder = base / name
    (folder / "storage").mkdir(parents=True)
    storage = storage or folder / "storage"
    for attempt in range(3):
        port = free_port()
        http: dict[str, Any] = {"addr": f"127.0.0.1:{port}", "secret": secrets.token_hex(16)}
        if tls:
            http["tls"] = {"certificate": str(tls[1]), "key": str(tls[0])}
        config = {
            "version": 0.1,
            "log": {"level": "warn", "accesslog": {"disabled": True}},
            "storage": {"filesystem": {"rootdirectory": str(storage)}},
            "http": http,
            **({"auth": auth} if auth else {}),
        }
        config_path = folder / "config.yml"
        config_path.write_text(json.dumps(config))  # YAML is a superset of JSON
        log = folder / f"registry-{attempt}.log"
        with log.open("wb") as out:
            process = subprocess.Popen(
                ["docker-registry", "serve", str(config_path)],
                stdout=out,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
            )
        scheme = "https" if tls else "http"
        registry = Registry(name, f"127.0.0.1:{port}", scheme, process, log)
        if tls:
            registry.ca_file = tls[1]
            registry.cert_dir = folder / "certs"
            registry.cert_dir.mkdir()
            shutil.copy(tls[1], registry.cert_dir / "ca.crt")
        if _wait_ready(registry):
            return registry
        registry.stop()
    raise RuntimeError(f"docker-registry {name} did not start: {log.read_text()[-2000:]}")


def _wait_ready(registry: Registry) -> bool:
    deadline = time.monotonic() + WATCHDOG_FLOOR_S  # a failure detector: it starts in a second
    verify = ssl.create_default_context(cafile=str(registry.ca_file)) if registry.ca_file else True
    while time.monotonic() < deadline:
        if registry.process.poll() is not None:
            return False
        try:
            httpx.get(f"{registry.scheme}://{registry.host}/v2/", verify=verify, timeout=1)
            return True
        except httpx.HTTPError:
            time.sleep(0.05)
    return False


def skopeo_copy(layout: Path, name: str, registry: Registry, destination: str, *extra: str) -> None:
    """Push one name of a layout to the registry (every platform of an index)."""
    argv = [
        "skopeo", "--insecure-policy", "copy", "--all", "--quiet", "--retry-times", "2",
        *extra, f"oci:{layout}:{name}", f"docker://{registry.host}/{destination}",
    ]  # fmt: skip
    if registry.cert_dir:
        argv[3:3] = ["--dest-cert-dir", str(registry.cert_dir)]
    else:
        argv[3:3] = ["--dest-tls-verify=false"]
    result = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    if result.returncode != 0:
        raise RuntimeError(f"skopeo copy {name} -> {destination}: {result.stderr[-2000:]}")


def skopeo_digest(registry: Registry, reference: str) -> str:
    """The digest the registry serves for a reference, as skopeo reads it (independently)."""
    argv = ["skopeo", "inspect", "--raw", f"docker://{registry.host}/{reference}"]
    argv[2:2] = (
        ["--cert-dir", str(registry.cert_dir)] if registry.cert_dir else ["--tls-verify=false"]
    )
    if registry.name != "open":
        argv[2:2] = ["--creds", f"{USER}:{PASSWORD}"]
    raw = subprocess.run(argv, capture_output=True, check=True, timeout=60).stdout
    return sha256(raw)


@dataclass
class Registries:
    """The three registries, the images pushed to them, and what the tests compare with."""

    open: Registry
    basic: Registry
    token: Registry
    tokens: TokenService
    elsewhere: Registry
    elsewhere_tokens: TokenService
    built: dict[str, Built]
    digests: dict[str, str]
    auth_file: Path
    identity_auth_file: Path
    wrong_auth_file: Path
    folder: Path


def _auth_files(
    folder: Path, basic: Registry, token: Registry, elsewhere: Registry
) -> tuple[Path, Path, Path]:
    def write(name: str, auths: dict[str, Any]) -> Path:
        path = folder / name
        path.write_text(json.dumps({"auths": auths}))
        path.chmod(0o600)
        return path

    pair = base64.b64encode(f"{USER}:{PASSWORD}".encode()).decode()
    wrong = base64.b64encode(f"{USER}:not-the-password".encode()).decode()
    good = write(
        "config.json",
        {
            basic.host: {"auth": pair},
            f"http://{token.host}": {"auth": pair},
            elsewhere.host: {"auth": pair},
            "https://index.docker.io/v1/": {"auth": base64.b64encode(b"someone:else").decode()},
        },
    )
    identity = write(
        "identity.json",
        {
            host: {
                "auth": base64.b64encode(b"<token>:").decode(),
                "identitytoken": REFRESH_TOKEN,
            }
            for host in (token.host, elsewhere.host)
        },
    )
    bad = write("wrong.json", {basic.host: {"auth": wrong}, token.host: {"auth": wrong}})
    return good, identity, bad


@pytest.fixture(scope="session")
def registries(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Registries]:
    """The four registries with the test images (about two seconds to set up)."""
    missing = missing_tools()
    if missing:
        _unavailable(f"no {', '.join(missing)} here: the image tests need a real registry")
    base = tmp_path_factory.mktemp("registries")
    try:
        htpasswd = f"{USER}:{_bcrypt(PASSWORD)}\n"
    except (ImportError, RuntimeError) as exc:
        _unavailable(f"cannot make a bcrypt hash for htpasswd: {exc}")
    (base / "htpasswd").write_text(htpasswd)
    tls = make_certificate(base, "registry")
    token_key, token_cert = make_certificate(base, "token-signer", rsa=True)
    der = subprocess.run(
        ["openssl", "x509", "-in", str(token_cert), "-outform", "DER"],
        capture_output=True,
        check=True,
    ).stdout
    tokens = TokenService(token_key, der)
    tokens.start()
    elsewhere_tokens = TokenService(token_key, der, address="127.0.0.2")
    elsewhere_tokens.start()
    started: list[Registry] = []
    try:
        started.append(open_ := start_registry(base, "open"))
        started.append(
            basic := start_registry(
                base,
                "basic",
                tls=tls,
                auth={"htpasswd": {"realm": "vllm-triage-test", "path": str(base / "htpasswd")}},
            )
        )
        started.append(
            token := start_registry(
                base,
                "token",
                auth={
                    "token": {
                        "realm": tokens.realm,
                        "service": SERVICE,
                        "issuer": ISSUER,
                        "rootcertbundle": str(token_cert),
                    }
                },
            )
        )
        layout = Layout(base / "layout")
        built = {
            "cu130": layout.add("cu130", cuda_130()),
            "cu129": layout.add("cu129", cuda_129()),
            "multi": layout.add(
                "multi",
                cuda_130(**{"vllm-triage.test": "amd64"}),
                TestImage(
                    env={
                        "CUDA_VERSION": "13.0.1",
                        "NVIDIA_REQUIRE_CUDA": REQUIRE_130,
                        "TORCH_CUDA_ARCH_LIST": "9.0 10.0 12.0",
                    },
                    labels={
                        **SOURCE_LABELS,
                        "org.opencontainers.image.version": "0.32.0",
                        "vllm-triage.test": "arm64",
                    },
                    architecture="arm64",
                    variant="v8",
                ),
            ),
        }
        creds = ["--dest-creds", f"{USER}:{PASSWORD}"]
        skopeo_copy(layout.path, "cu130", open_, "vllm/vllm-openai:cu130", "--preserve-digests")
        skopeo_copy(
            layout.path, "cu129", open_, "vllm/vllm-openai:cu129-docker", "--format", "v2s2"
        )
        skopeo_copy(layout.path, "multi", open_, "vllm/vllm-openai:multi", "--preserve-digests")
        skopeo_copy(
            layout.path, "multi", open_, "vllm/vllm-openai:multi-docker", "--format", "v2s2"
        )
        skopeo_copy(layout.path, "cu130", basic, "private/vllm:cu130", "--preserve-digests", *creds)
        skopeo_copy(
            layout.path, "multi", token, "public/vllm-openai:multi", "--preserve-digests", *creds
        )
        skopeo_copy(layout.path, "cu129", token, "private/vllm:cu129", "--preserve-digests", *creds)
        digests = {
            "cu129-docker": skopeo_digest(open_, "vllm/vllm-openai:cu129-docker"),
            "multi-docker": skopeo_digest(open_, "vllm/vllm-openai:multi-docker"),
        }
        started.append(
            elsewhere := start_registry(
                base,
                "elsewhere",
                auth={
                    "token": {
                        "realm": elsewhere_tokens.realm,
                        "service": SERVICE,
                        "issuer": ISSUER,
                        "rootcertbundle": str(token_cert),
                    }
                },
                storage=base / "token" / "storage",
            )
        )
        good, identity, wrong = _auth_files(base, basic, token, elsewhere)
        yield Registries(
            open_,
            basic,
            token,
            tokens,
            elsewhere,
            elsewhere_tokens,
            built,
            digests,
            good,
            identity,
            wrong,
            base,
        )
    finally:
        for registry in started:
            registry.stop()
        tokens.stop()
        elsewhere_tokens.stop()
