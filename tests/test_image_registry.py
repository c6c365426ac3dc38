"""An image's config read from real registries (tests/registry.py: Debian's docker-registry on
127.0.0.1, images pushed by skopeo): OCI and Docker v2 manifests, multi-arch indexes and manifest
lists resolved per platform, digests pinned and checked against what the layouts hold (and what
skopeo reads), basic authentication over TLS, Docker Hub's bearer-token flow (anonymous, user and
password, identity token), and one-line errors for a missing image, an unknown tag, refused
credentials and an unreachable registry. Through the library and through `compat --image`."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli import run_cli
from registry import (
    OCI_INDEX,
    OCI_MANIFEST,
    PASSWORD,
    Registries,
    free_port,
)

from vllm_triage.image import ImageError, ImageRequest, ResolvedImage, resolve_image
from vllm_triage.image.registry import (
    DOCKER_LIST,
    DOCKER_MANIFEST,
    RegistryAuthError,
    RegistryNotFound,
    RegistryUnavailable,
)

SECRET_IN_IMAGE_ENV = "hf_notarealtokenbutitlookslikeone1234"


def resolve(
    reference: str,
    *,
    platform: str | None = None,
    registry_auth: Path | None = None,
    ca_file: Path | None = None,
    timeout: float = 20.0,
    realms: tuple[str, ...] = (),
) -> ResolvedImage:
    """The image through the registry alone (no engine, no tag fallback)."""
    request = ImageRequest(
        reference,
        registry_auth=registry_auth,
        platform=platform,
        ca_file=ca_file,
        lookup=("registry",),
        timeout=timeout,
        registry_auth_realms=realms,
    )
    return resolve_image(request)


def one_line(message: str) -> str:
    assert "\n" not in message
    return message


def test_an_oci_image_from_the_registry(registries: Registries) -> None:
    built = registries.built["cu130"]
    ref = registries.open.ref("vllm/vllm-openai", "cu130")
    resolved = resolve(ref)
    assert resolved.source == "registry"
    assert resolved.source_detail == f"registry http://{registries.open.host}"
    assert resolved.media_type == OCI_MANIFEST
    assert resolved.digest == built.digest == resolved.manifest_digest
    assert resolved.config_digest == built.configs["linux/amd64"]
    assert resolved.pinned == f"{registries.open.host}/vllm/vllm-openai@{built.digest}"
    assert resolved.platform == "linux/amd64"
    assert (resolved.cuda, resolved.cuda_from) == ("13.0.1", "CUDA_VERSION")
    require = resolved.require_cuda
    assert require is not None and require.cuda_min == "13.0"
    assert [rule.branch for rule in require.brands if rule.brand == "tesla"] == ["r535", "r570"]
    assert resolved.architectures == ["8.0", "8.9", "9.0", "10.0", "12.0+PTX"]
    assert resolved.architectures_from == "env TORCH_CUDA_ARCH_LIST"
    assert resolved.vllm_version == "0.32.0"
    assert resolved.vllm_version_from == "label org.opencontainers.image.version"
    assert resolved.created == "2026-11-20T08:00:00Z"
    assert resolved.user is None  # no User: the container runs as root
    assert resolved.warnings == []
    assert SECRET_IN_IMAGE_ENV not in resolved.model_dump_json()


def test_a_docker_v2_image(registries: Registries) -> None:
    resolved = resolve(registries.open.ref("vllm/vllm-openai", "cu129-docker"))
    assert resolved.media_type == DOCKER_MANIFEST
    assert resolved.digest == registries.digests["cu129-docker"]  # what skopeo reads
    assert resolved.cuda == "12.9.1"
    assert resolved.require_cuda is not None and resolved.require_cuda.cuda_min == "12.9"
    assert resolved.vllm_version == "0.19.1" and resolved.vllm_version_from == "env VLLM_VERSION"
    assert resolved.architectures[0] == "7.0"
    assert resolved.user == "1000:1000"


@pytest.mark.parametrize(
    ("platform", "expected", "archs"),
    [
        (None, "linux/amd64", ["8.0", "8.9", "9.0", "10.0", "12.0+PTX"]),
        ("linux/amd64", "linux/amd64", ["8.0", "8.9", "9.0", "10.0", "12.0+PTX"]),
        ("linux/arm64", "linux/arm64/v8", ["9.0", "10.0", "12.0"]),
        ("linux/arm64/v8", "linux/arm64/v8", ["9.0", "10.0", "12.0"]),
    ],
)
def test_a_multi_arch_index_resolved_for_the_platform(
    registries: Registries, platform: str | None, expected: str, archs: list[str]
) -> None:
    built = registries.built["multi"]
    resolved = resolve(registries.open.ref("vllm/vllm-openai", "multi"), platform=platform)
    assert resolved.media_type == OCI_INDEX
    assert resolved.digest == built.digest  # the index: what the tag pins
    assert resolved.manifest_digest == built.manifests[expected]
    assert resolved.config_digest == built.configs[expected]
    assert resolved.platform == expected
    assert resolved.labels["vllm-triage.test"] == expected.split("/")[1]
    assert resolved.architectures == archs


def test_a_docker_manifest_list(registries: Registries) -> None:
    resolved = resolve(
        registries.open.ref("vllm/vllm-openai", "multi-docker"), platform="linux/arm64"
    )
    assert resolved.media_type == DOCKER_LIST
    assert resolved.digest == registries.digests["multi-docker"]
    assert resolved.platform == "linux/arm64/v8"
    assert resolved.labels["vllm-triage.test"] == "arm64"


def test_by_digest(registries: Registries) -> None:
    built = registries.built["multi"]
    resolved = resolve(f"{registries.open.host}/vllm/vllm-openai@{built.digest}")
    assert resolved.digest == built.digest and resolved.tag is None
    assert resolved.manifest_digest == built.manifests["linux/amd64"]


def test_a_platform_the_index_lacks(registries: Registries) -> None:
    with pytest.raises(RegistryNotFound) as error:
        resolve(registries.open.ref("vllm/vllm-openai", "multi"), platform="linux/s390x")
    message = one_line(str(error.value))
    assert "no linux/s390x image" in message
    assert "linux/amd64, linux/arm64/v8" in message


def test_an_unknown_tag_and_an_unknown_repository(registries: Registries) -> None:
    with pytest.raises(RegistryNotFound) as error:
        resolve(registries.open.ref("vllm/vllm-openai", "no-such-tag"))
    assert "no image vllm/" in one_line(str(error.value)) or "no-such-tag" in str(error.value)
    assert "MANIFEST_UNKNOWN" in str(error.value)
    with pytest.raises(RegistryNotFound) as error:
        resolve(registries.open.ref("nobody/nothing", "v1"))
    assert "nobody/nothing" in one_line(str(error.value))


def test_an_unreachable_registry(registries: Registries) -> None:
    port = free_port()  # nothing listens there
    with pytest.raises(RegistryUnavailable) as error:
        resolve(f"127.0.0.1:{port}/vllm/vllm-openai:cu130")
    assert f"127.0.0.1:{port} unreachable" in one_line(str(error.value))


def test_an_unreachable_registry_and_a_tag_that_cannot_stand_in() -> None:
    port = free_port()
    with pytest.raises(ImageError) as error:
        resolve_image(
            ImageRequest(f"127.0.0.1:{port}/vllm/vllm-openai:cu130", lookup=("registry", "tag"))
        )
    message = one_line(str(error.value))
    assert "unreachable" in message and "not a known vLLM repository" in message


@pytest.mark.slow
def test_docker_hub_out_of_reach_falls_back_to_the_tag_with_a_warning(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Docker Hub made unreachable for certain, offline: every request goes to a closed proxy.
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{free_port()}")
    for name in ("NO_PROXY", "no_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    resolved = resolve_image(
        ImageRequest("vllm/vllm-openai:v0.32.0", lookup=("registry", "tag"), timeout=5)
    )
    assert resolved.source == "tag" and resolved.cuda == "13.0"
    assert "changed meaning at v0.20.0" in resolved.warnings[0]
    assert "registry-1.docker.io unreachable" in resolved.warnings[1]


# --- basic authentication over TLS --------------------------------------------------------


def test_basic_auth_without_credentials(registries: Registries) -> None:
    with pytest.raises(RegistryAuthError) as error:
        resolve(registries.basic.ref("private/vllm", "cu130"), ca_file=registries.basic.ca_file)
    message = one_line(str(error.value))
    assert "needs credentials" in message and "--registry-auth" in message


def test_basic_auth_with_credentials(registries: Registries) -> None:
    resolved = resolve(
        registries.basic.ref("private/vllm", "cu130"),
        ca_file=registries.basic.ca_file,
        registry_auth=registries.auth_file,
    )
    assert resolved.source_detail == f"registry https://{registries.basic.host}"
    assert resolved.digest == registries.built["cu130"].digest
    assert resolved.cuda == "13.0.1"


def test_basic_auth_refused(registries: Registries) -> None:
    with pytest.raises(RegistryAuthError) as error:
        resolve(
            registries.basic.ref("private/vllm", "cu130"),
            ca_file=registries.basic.ca_file,
            registry_auth=registries.wrong_auth_file,
        )
    message = one_line(str(error.value))
    assert "refused" in message and "user and password" in message
    assert "not-the-password" not in message and PASSWORD not in message


def test_a_certificate_that_is_not_trusted(registries: Registries) -> None:
    with pytest.raises(ImageError) as error:
        resolve(registries.basic.ref("private/vllm", "cu130"), registry_auth=registries.auth_file)
    message = one_line(str(error.value))
    assert "TLS certificate does not verify" in message and "SSL_CERT_FILE" in message


# --- the bearer-token flow ----------------------------------------------------------------
# The test token service listens on another port than its registry: not the registry's own
# origin, so the tests that give credentials name it as the user would (--registry-auth-realm).


def test_anonymous_token_for_a_public_repository(registries: Registries) -> None:
    before = len(registries.tokens.requests)
    resolved = resolve(registries.token.ref("public/vllm-openai", "multi"))
    assert resolved.digest == registries.built["multi"].digest
    asked = registries.tokens.requests[before:]
    assert asked and all(r["method"] == "GET" and not r["authorization"] for r in asked)
    assert asked[0]["query"]["scope"] == ["repository:public/vllm-openai:pull"]


def test_a_private_repository_needs_credentials(registries: Registries) -> None:
    with pytest.raises(RegistryAuthError) as error:
        resolve(registries.token.ref("private/vllm", "cu129"))
    assert "needs credentials" in one_line(str(error.value))


def test_token_with_user_and_password(registries: Registries) -> None:
    before = len(registries.tokens.requests)
    resolved = resolve(
        registries.token.ref("private/vllm", "cu129"),
        registry_auth=registries.auth_file,
        realms=(registries.tokens.host,),
    )
    assert resolved.cuda == "12.9.1"
    assert resolved.digest == registries.built["cu129"].digest
    assert resolved.warnings == []
    asked = registries.tokens.requests[before:]
    assert asked[0]["authorization"] and asked[0]["query"]["account"] == ["triage"]


def test_token_with_an_identity_token(registries: Registries) -> None:
    before = len(registries.tokens.requests)
    resolved = resolve(
        registries.token.ref("private/vllm", "cu129"),
        registry_auth=registries.identity_auth_file,
        realms=(registries.tokens.host,),
    )
    assert resolved.cuda == "12.9.1"
    asked = registries.tokens.requests[before:]
    assert asked[0]["method"] == "POST"
    assert asked[0]["form"] == ["client_id", "grant_type", "refresh_token", "scope", "service"]


def test_token_service_refuses_wrong_credentials(registries: Registries) -> None:
    with pytest.raises(RegistryAuthError) as error:
        resolve(
            registries.token.ref("private/vllm", "cu129"),
            registry_auth=registries.wrong_auth_file,
            realms=(registries.tokens.host,),
        )
    message = one_line(str(error.value))
    assert "token service refused" in message and "not-the-password" not in message


# --- through the command line -------------------------------------------------------------

LOOKUP = {"VLLM_TRIAGE_IMAGE_LOOKUP": "engine,registry,tag", "PATH": "/nonexistent"}


def test_compat_with_an_image_from_the_registry(registries: Registries) -> None:
    ref = registries.open.ref("vllm/vllm-openai", "multi")
    result = run_cli(
        "compat", "--driver", "575.57.08", "--image", ref, "--format", "json", env=LOOKUP
    )
    assert result.exit_code == 1, result.stderr
    verdict = json.loads(result.stdout)
    assert verdict["verdict"] == "incompatible" and verdict["cuda"] == "13.0.1"
    pinned = f"{registries.open.host}/vllm/vllm-openai@{registries.built['multi'].digest}"
    (line,) = result.stderr.splitlines()
    assert pinned in line and "[linux/amd64]" in line and "CUDA 13.0.1" in line
    assert SECRET_IN_IMAGE_ENV not in result.stdout + result.stderr

    newer = run_cli("compat", "--driver", "580.95.05", "--image", ref, env=LOOKUP)
    assert newer.exit_code == 0, newer.stderr

    arm = run_cli(
        "compat", "--driver", "580.95.05", "--image", ref, "--platform", "linux/arm64", env=LOOKUP
    )
    assert arm.exit_code == 0, arm.stderr
    assert registries.built["multi"].digest in arm.stderr and "[linux/arm64/v8]" in arm.stderr


def test_compat_with_a_private_image(registries: Registries) -> None:
    ref = registries.basic.ref("private/vllm", "cu130")
    env = {**LOOKUP, "SSL_CERT_FILE": str(registries.basic.ca_file)}
    args = ("compat", "--driver", "580.95.05", "--image", ref, "--format", "json")
    refused = run_cli(*args, env=env)
    assert refused.exit_code == 2
    (line,) = refused.stderr.splitlines()
    assert line.startswith("vllm-triage: error: registry") and "needs credentials" in line
    given = run_cli(*args, "--registry-auth", str(registries.auth_file), env=env)
    assert given.exit_code == 0, given.stderr
    assert json.loads(given.stdout)["cuda"] == "13.0.1"
    assert PASSWORD not in given.stdout + given.stderr + refused.stderr


@pytest.mark.parametrize("what", ["missing", "unreachable"])
def test_compat_errors_are_one_line(registries: Registries, what: str) -> None:
    ref = (
        registries.open.ref("vllm/vllm-openai", "no-such-tag")
        if what == "missing"
        else f"127.0.0.1:{free_port()}/vllm/vllm-openai:cu130"
    )
    result = run_cli("compat", "--driver", "580.95.05", "--image", ref, env=LOOKUP)
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("vllm-triage: error: registry 127.0.0.1:")
    assert ("no image" in line) if what == "missing" else ("unreachable" in line)


def test_diagnose_reads_the_image_from_the_registry(registries: Registries, tmp_path: Path) -> None:
    log = Path(__file__).parent.parent / "examples" / "kimi-k3-r575" / "vllm-serve.log"
    ref = registries.open.ref("vllm/vllm-openai", "cu130")
    result = run_cli(
        "diagnose", str(log), "--driver", "575.57.08", "--image", ref, "--format", "json",
        env=LOOKUP,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    diagnosis = json.loads(result.stdout)
    assert diagnosis["compat"]["cuda"] == "13.0.1"
    assert registries.built["cu130"].digest in result.stderr


def test_the_tag_fallback_is_said_on_the_command_line() -> None:
    result = run_cli(
        "compat", "--driver", "580.95.05", "--image", "vllm/vllm-openai:v0.32.0",
        env={"VLLM_TRIAGE_IMAGE_LOOKUP": "tag"},
    )  # fmt: skip
    assert result.exit_code == 0
    assert "changed meaning at v0.20.0" in result.stderr
