"""Registry credentials go only to the registry's own host, a token service the knowledge pairs
with it (data/registry_realms.yaml) or one the user names (--registry-auth-realm HOST): a 401
whose realm names any other host gets an anonymous request, and the image's notes (or the error)
name the realm refused. Against the real token-auth registries of tests/registry.py: `token`,
whose token service is on another port of 127.0.0.1, and `elsewhere`, whose token service is on
127.0.0.2 (another loopback host); both record what each request carried."""

from __future__ import annotations

import json
import shutil
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cli import run_cli
from registry import PASSWORD, REFRESH_TOKEN, Registries

from vllm_triage.errors import InputError, KnowledgeError
from vllm_triage.image import ImageRequest, ResolvedImage, resolve_image
from vllm_triage.image.realms import RealmTrust, parse_realm_host, realm_trust, trusted_realms
from vllm_triage.image.reference import parse_reference
from vllm_triage.image.registry import RegistryAuthError
from vllm_triage.knowledge import DATA_DIR, KnowledgeBase, load_knowledge
from vllm_triage.record.registry import list_tags

LOOKUP = {"VLLM_TRIAGE_IMAGE_LOOKUP": "registry", "PATH": "/nonexistent"}


def resolve(
    reference: str,
    auth: Path | None,
    realms: tuple[str, ...] = (),
    kb: KnowledgeBase | None = None,
) -> ResolvedImage:
    request = ImageRequest(
        reference, registry_auth=auth, lookup=("registry",), registry_auth_realms=realms
    )
    return resolve_image(request, kb=kb)


def asked_since(registries: Registries, before: int) -> list[dict[str, object]]:
    return registries.elsewhere_tokens.requests[before:]


# --- which realms are trusted (the rule, without a network) ------------------------------


@pytest.mark.parametrize(
    ("realm", "registry", "trusted"),
    [
        ("https://auth.docker.io/token", "https://registry-1.docker.io", True),  # the pairing
        ("https://auth.docker.io:443/token", "https://registry-1.docker.io", True),
        ("https://AUTH.docker.io/token", "https://registry-1.docker.io", True),
        ("http://auth.docker.io/token", "https://registry-1.docker.io", False),  # plain HTTP
        ("https://auth.docker.io:8443/token", "https://registry-1.docker.io", False),
        ("https://auth.docker.io.evil.example/token", "https://registry-1.docker.io", False),
        ("https://evil.example/token", "https://registry-1.docker.io", False),
        ("https://auth.docker.io@evil.example/token", "https://registry-1.docker.io", False),
        ("https://registry-1.docker.io/token", "https://registry-1.docker.io", True),  # own host
        ("https://registry-1.docker.io:444/token", "https://registry-1.docker.io", False),
        ("ftp://auth.docker.io/token", "https://registry-1.docker.io", False),
        ("https:///token", "https://registry-1.docker.io", False),
    ],
)
def test_docker_hubs_realms(kb: KnowledgeBase, realm: str, registry: str, trusted: bool) -> None:
    trust = realm_trust(parse_reference("vllm/vllm-openai:v0.32.0"), kb)
    assert trust.trusts(realm, registry) is trusted


def test_a_pairing_is_for_its_registry_only(kb: KnowledgeBase) -> None:
    other = realm_trust(parse_reference("ghcr.io/x/y:1"), kb)
    assert not other.trusts("https://auth.docker.io/token", "https://ghcr.io")
    assert other.trusts("https://ghcr.io/token", "https://ghcr.io")  # its own host, no row
    nvidia = realm_trust(parse_reference("nvcr.io/nvidia/pytorch:25.01-py3"), kb)
    assert nvidia.trusts("https://authn.nvidia.com/token", "https://nvcr.io")
    assert nvidia.trusts("https://nvcr.io/proxy_auth", "https://nvcr.io")


@pytest.mark.parametrize(
    ("realm", "registry", "named", "trusted"),
    [
        ("http://127.0.0.1:5000/token", "http://127.0.0.1:5000", (), True),  # own origin
        ("http://127.0.0.1:5001/token", "http://127.0.0.1:5000", (), False),  # another port
        ("http://127.0.0.2:5000/token", "http://127.0.0.1:5000", (), False),  # another host
        ("http://127.0.0.2:6000/token", "http://127.0.0.1:5000", ("127.0.0.2:6000",), True),
        ("http://127.0.0.2:6001/token", "http://127.0.0.1:5000", ("127.0.0.2:6000",), False),
        ("http://127.0.0.2:6000/token", "http://127.0.0.1:5000", ("127.0.0.2",), False),
        ("http://127.0.0.2/token", "http://127.0.0.1:5000", ("127.0.0.2",), True),  # port 80
        # plain HTTP only between loopback hosts, and only when the registry speaks it too
        ("http://127.0.0.2:6000/token", "https://127.0.0.1:5000", ("127.0.0.2:6000",), False),
        ("http://auth.example:80/token", "http://127.0.0.1:5000", ("auth.example",), False),
        ("http://10.0.0.5:5000/token", "http://10.0.0.5:5000", (), False),  # own, not loopback
        ("https://auth.example/token", "https://reg.example", ("auth.example",), True),
        ("https://auth.example:8443/token", "https://reg.example", ("auth.example",), False),
        ("https://auth.example:8443/token", "https://reg.example", ("auth.example:8443",), True),
        ("https://[::1]:8443/token", "https://reg.example", ("[::1]:8443",), True),
        ("http://[::1]:5000/token", "http://[::1]:5000", (), True),
        ("http://[::1]:6000/token", "http://[::1]:5000", ("[::1]:6000",), True),
        ("http://localhost:6000/token", "http://127.0.0.1:5000", ("localhost:6000",), True),
    ],
)
def test_named_realms_and_plain_http(
    realm: str, registry: str, named: tuple[str, ...], trusted: bool
) -> None:
    assert RealmTrust(named=frozenset(named)).trusts(realm, registry) is trusted


@pytest.mark.parametrize(
    "text",
    [
        "https://auth.example",
        "auth.example/token",
        "user@auth.example",
        "auth.example:99999",
        "auth.example:0",
        "",
        "auth example",
        "-auth.example",
    ],
)
def test_a_realm_host_that_is_not_one(text: str) -> None:
    with pytest.raises(InputError, match="--registry-auth-realm") as error:
        parse_realm_host(text)
    assert "\n" not in str(error.value)


def test_realm_hosts_are_read_as_host_or_host_and_port() -> None:
    assert parse_realm_host(" Auth.Example:8443 ") == "auth.example:8443"
    assert parse_realm_host("127.0.0.2") == "127.0.0.2"
    assert parse_realm_host("[::1]:5000") == "[::1]:5000"


def test_named_realms_hold_only_inside_their_block(kb: KnowledgeBase) -> None:
    ref = parse_reference("reg.example/x:1")
    with trusted_realms(["auth.example"]):
        assert realm_trust(ref, kb).named == {"auth.example"}
    assert realm_trust(ref, kb).named == frozenset()
    with pytest.raises(InputError), trusted_realms(["https://auth.example"]):
        pass


# --- the knowledge file ---------------------------------------------------------------------


def test_every_pairing_has_its_source_and_date(kb: KnowledgeBase) -> None:
    pairs = {row.registry: row.realm_hosts for row in kb.registry_realms}
    assert pairs["docker.io"] == ["auth.docker.io"]
    assert pairs["nvcr.io"] == ["authn.nvidia.com"]
    for row in kb.registry_realms:
        assert row.source.startswith("https://") and str(row.as_of) == "2026-12-01"
        assert row.certainty in {"primary", "secondary"}


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


def add_pairing(data: Path, row: str) -> None:
    path = data / "registry_realms.yaml"
    path.write_text(path.read_text() + row)


ROW = """  - registry: {registry}
    realm_hosts: [{realm}]
    certainty: inferred
    source: {source}
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    ("registry", "realm", "source", "problem"),
    [
        ("reg.example", "reg.example", "the test", r"pairing 4: reg\.example: its own host needs"),
        ("Reg.Example", "auth.example", "the test", r"pairing 4: registry: Expected `str` match"),
        ("reg.example", "https://auth.example", "the test", r"pairing 4: realm_hosts\.0: Exp"),
        ("docker.io", "auth.example", "the test", "a registry is paired twice"),
        ("reg.example", "auth.example", "x", r"pairing 4: source: Expected `str` of length >= 3"),
    ],
)
def test_a_pairing_that_is_wrong_is_refused(
    data_copy: Path, registry: str, realm: str, source: str, problem: str
) -> None:
    add_pairing(data_copy, ROW.format(registry=registry, realm=realm, source=source))
    with pytest.raises(KnowledgeError, match=r"data/registry_realms\.yaml.*" + problem):
        load_knowledge(data_copy)


@pytest.mark.slow
def test_a_pairing_without_a_date_is_refused(data_copy: Path) -> None:
    path = data_copy / "registry_realms.yaml"
    path.write_text(path.read_text().replace('as_of: "2026-12-01"\n', "", 1))
    with pytest.raises(KnowledgeError, match=r"registry_realms\.yaml pairing 1.*as_of"):
        load_knowledge(data_copy)


# --- against the real registries ----------------------------------------------------------


def test_a_realm_on_another_host_never_gets_the_password(registries: Registries) -> None:
    before = len(registries.elsewhere_tokens.requests)
    with pytest.raises(RegistryAuthError) as error:
        resolve(registries.elsewhere.ref("private/vllm", "cu129"), registries.auth_file)
    asked = asked_since(registries, before)
    assert asked, "the realm was asked (anonymously)"
    for request in asked:
        assert request["method"] == "GET" and not request["authorization"]
        assert not request["secret"] and "account" not in request["query"]  # type: ignore[operator]
    message = str(error.value)
    realm = registries.elsewhere_tokens.host
    assert "\n" not in message and PASSWORD not in message
    assert f"token service http://{realm}," in message
    assert f"--registry-auth-realm {realm}" in message


def test_a_realm_on_another_host_never_gets_the_refresh_token(registries: Registries) -> None:
    before = len(registries.elsewhere_tokens.requests)
    with pytest.raises(RegistryAuthError, match="not sent to its token service"):
        resolve(registries.elsewhere.ref("private/vllm", "cu129"), registries.identity_auth_file)
    asked = asked_since(registries, before)
    assert asked and all(r["method"] == "GET" and not r["secret"] for r in asked)
    assert REFRESH_TOKEN not in json.dumps(asked)


def test_a_public_image_behind_a_distrusted_realm_resolves_with_a_note(
    registries: Registries,
) -> None:
    before = len(registries.elsewhere_tokens.requests)
    resolved = resolve(
        registries.elsewhere.ref("public/vllm-openai", "multi"), registries.auth_file
    )
    assert resolved.digest == registries.built["multi"].digest
    assert all(not r["authorization"] for r in asked_since(registries, before))
    (note,) = resolved.warnings
    realm = registries.elsewhere_tokens.host
    assert f"not sent to its token service http://{realm} " in note
    assert "user and password" in note and PASSWORD not in note


def test_a_named_realm_gets_the_credentials(registries: Registries) -> None:
    realm = registries.elsewhere_tokens.host
    before = len(registries.elsewhere_tokens.requests)
    resolved = resolve(
        registries.elsewhere.ref("private/vllm", "cu129"), registries.auth_file, (realm,)
    )
    assert resolved.cuda == "12.9.1" and resolved.warnings == []
    asked = asked_since(registries, before)
    assert asked[0]["authorization"] and asked[0]["secret"]
    assert asked[0]["query"]["account"] == ["triage"]  # type: ignore[index]


def test_a_named_realm_gets_the_refresh_token(registries: Registries) -> None:
    realm = registries.elsewhere_tokens.host
    before = len(registries.elsewhere_tokens.requests)
    resolved = resolve(
        registries.elsewhere.ref("private/vllm", "cu129"), registries.identity_auth_file, (realm,)
    )
    assert resolved.cuda == "12.9.1"
    asked = asked_since(registries, before)
    assert asked[0]["method"] == "POST" and asked[0]["secret"]


@pytest.mark.slow
def test_a_known_pairing_gets_the_credentials(registries: Registries, data_copy: Path) -> None:
    """The same registry with its realm paired in the knowledge (a test row in a copy)."""
    add_pairing(
        data_copy,
        ROW.format(
            registry=registries.elsewhere.host,
            realm=registries.elsewhere_tokens.host,
            source="tests/registry.py",
        ),
    )
    kb = load_knowledge(data_copy)
    before = len(registries.elsewhere_tokens.requests)
    resolved = resolve(
        registries.elsewhere.ref("private/vllm", "cu129"), registries.auth_file, kb=kb
    )
    assert resolved.cuda == "12.9.1" and resolved.warnings == []
    assert asked_since(registries, before)[0]["secret"]


def test_a_realm_on_another_port_of_the_same_host_is_not_the_registrys(
    registries: Registries,
) -> None:
    before = len(registries.tokens.requests)
    with pytest.raises(RegistryAuthError, match=f"--registry-auth-realm {registries.tokens.host}"):
        resolve(registries.token.ref("private/vllm", "cu129"), registries.auth_file)
    assert not any(r["secret"] for r in registries.tokens.requests[before:])


# --- on the command line ------------------------------------------------------------------


def test_compat_names_the_realm_it_refused_and_takes_the_one_named(
    registries: Registries,
) -> None:
    ref = registries.elsewhere.ref("private/vllm", "cu129")
    args = ("compat", "--driver", "580.95.05", "--image", ref, "--format", "json")
    auth = ("--registry-auth", str(registries.auth_file))
    refused = run_cli(*args, *auth, env=LOOKUP)
    assert refused.exit_code == 2
    (line,) = refused.stderr.splitlines()
    assert line.startswith("vllm-triage: error: registry") and "needs credentials" in line
    assert f"--registry-auth-realm {registries.elsewhere_tokens.host}" in line
    realm = ("--registry-auth-realm", registries.elsewhere_tokens.host)
    given = run_cli(*args, *auth, *realm, env=LOOKUP)
    assert given.exit_code == 0, given.stderr
    assert json.loads(given.stdout)["cuda"] == "12.9.1"
    assert PASSWORD not in refused.stderr + given.stdout + given.stderr


@pytest.mark.slow
def test_diagnose_prints_the_note_of_a_realm_it_did_not_trust(
    registries: Registries, tmp_path: Path
) -> None:
    log = Path(__file__).parent.parent / "examples" / "kimi-k3-r575" / "vllm-serve.log"
    ref = registries.elsewhere.ref("public/vllm-openai", "multi")
    result = run_cli(
        "diagnose", str(log), "--driver", "575.57.08", "--image", ref,
        "--registry-auth", str(registries.auth_file), "--format", "json",
        "--case", str(tmp_path / "case"), env=LOOKUP,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    notes = [line for line in result.stderr.splitlines() if "not sent to its token" in line]
    assert len(notes) == 1 and registries.elsewhere_tokens.host in notes[0]


@pytest.mark.slow
@pytest.mark.parametrize("command", ["preflight", "fleet scan"])
def test_preflight_and_fleet_scan_take_the_realm_option(
    registries: Registries, tmp_path: Path, command: str
) -> None:
    ref = registries.elsewhere.ref("private/vllm", "cu129")
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"items": []}))
    rest = (
        ("--driver", "580.95.05", "--gpu", "NVIDIA H100 80GB HBM3", "--gpu-count", "8")
        if command == "preflight"
        else ("--nodes", str(nodes))
    )
    args = (*command.split(), "--image", ref, "--registry-auth", str(registries.auth_file), *rest)
    realm = registries.elsewhere_tokens.host
    refused = run_cli(*args, "--format", "json", env=LOOKUP)
    assert refused.exit_code == 2
    (line,) = refused.stderr.splitlines()
    assert f"--registry-auth-realm {realm}" in line
    before = len(registries.elsewhere_tokens.requests)
    given = run_cli(*args, "--registry-auth-realm", realm, "--format", "json", env=LOOKUP)
    assert given.exit_code == 0, given.stderr
    assert registries.built["cu129"].digest in given.stdout
    assert asked_since(registries, before)[0]["secret"]


@pytest.mark.parametrize("command", ["compat", "preflight"])
def test_a_realm_option_that_is_not_a_host(command: str) -> None:
    result = run_cli(
        command, "--driver", "580.95.05", "--image", "vllm/vllm-openai:v0.32.0",
        "--registry-auth-realm", "https://auth.example/token",
        env={"VLLM_TRIAGE_IMAGE_LOOKUP": "tag"},  # refused before any lookup
    )  # fmt: skip
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert "--registry-auth-realm 'https://auth.example/token'" in line


# --- the record check's tag lists: redirects (httpx follows them there) --------------------


@pytest.fixture
def tag_servers() -> Iterator[tuple[str, str, list[dict[str, str]]]]:
    """A registry on 127.0.0.1 that wants a bearer token and redirects the tag list to a server
    on 127.0.0.2, which records the headers it gets."""
    seen: list[dict[str, str]] = []

    class Elsewhere(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            seen.append(dict(self.headers))
            body = json.dumps({"name": "r", "tags": ["v1"]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    other = ThreadingHTTPServer(("127.0.0.2", 0), Elsewhere)
    target = f"http://127.0.0.2:{other.server_address[1]}/v2/r/tags/list"

    class Registry(BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            own = f"http://127.0.0.1:{self.server.server_address[1]}"
            if self.path.startswith("/token"):
                body = json.dumps({"token": "tag-list-token"}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)
            elif self.headers.get("Authorization") != "Bearer tag-list-token":
                self.send_response(401)
                self.send_header("WWW-Authenticate", f'Bearer realm="{own}/token",service="s"')
                self.send_header("Content-Length", "0")
                self.end_headers()
            else:
                self.send_response(307)
                self.send_header("Location", target)
                self.send_header("Content-Length", "0")
                self.end_headers()

    registry = ThreadingHTTPServer(("127.0.0.1", 0), Registry)
    for server in (other, registry):
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
    yield f"http://127.0.0.1:{registry.server_address[1]}", target, seen
    for server in (other, registry):
        server.shutdown()
        server.server_close()


def test_a_tag_list_redirected_elsewhere_loses_the_token(
    tag_servers: tuple[str, str, list[dict[str, str]]],
) -> None:
    registry, _, seen = tag_servers
    assert list_tags(registry, "r") == ["v1"]
    assert len(seen) == 1
    assert "Authorization" not in seen[0] and "tag-list-token" not in str(seen[0])
