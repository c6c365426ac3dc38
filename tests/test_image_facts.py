"""An image's facts without a registry: references, NVIDIA_REQUIRE_CUDA with brand clauses, CUDA
architecture lists and NVIDIA's compatibility rules for them, config files, the local engine
(replayed by recording fakes of docker / podman, tests/fakehost.py), docker config credentials,
and the resolution order down to the tag fallback."""

from __future__ import annotations

import base64
import hashlib
import json
from pathlib import Path

import pytest
from deadlines import ends_in_time
from fakehost import FakeHost
from registry import REQUIRE_130

from vllm_triage.errors import InputError
from vllm_triage.image import (
    ImageError,
    ImageRequest,
    arch_supports,
    parse_require_cuda,
    resolve_image,
)
from vllm_triage.image.auth import AuthFileError, read_registry_auth
from vllm_triage.image.facts import parse_architectures
from vllm_triage.image.platforms import Platform
from vllm_triage.image.reference import ImageReferenceError, parse_reference

DATA = Path(__file__).parent / "data" / "image-configs"
INSPECT = DATA / "vllm-openai-cu130.inspect.json"


@pytest.mark.parametrize(
    ("text", "registry", "repository", "tag", "digest"),
    [
        ("nginx", "docker.io", "library/nginx", "latest", None),
        ("vllm/vllm-openai:v0.32.0", "docker.io", "vllm/vllm-openai", "v0.32.0", None),
        ("docker.io/vllm/vllm-openai:kimi-k3", "docker.io", "vllm/vllm-openai", "kimi-k3", None),
        ("index.docker.io/library/ubuntu:24.04", "docker.io", "library/ubuntu", "24.04", None),
        ("127.0.0.1:5000/a/b:c", "127.0.0.1:5000", "a/b", "c", None),
        ("localhost/x", "localhost", "x", "latest", None),
        ("nvcr.io/nvidia/cuda:13.0.1-base", "nvcr.io", "nvidia/cuda", "13.0.1-base", None),
        ("ghcr.io/a/b@sha256:" + "a" * 64, "ghcr.io", "a/b", None, "sha256:" + "a" * 64),
        ("h:1/a:t@sha256:" + "b" * 64, "h:1", "a", "t", "sha256:" + "b" * 64),
    ],
)
def test_references_as_docker_reads_them(
    text: str, registry: str, repository: str, tag: str | None, digest: str | None
) -> None:
    ref = parse_reference(text)
    assert (ref.registry, ref.repository, ref.tag, ref.digest) == (
        registry,
        repository,
        tag,
        digest,
    )
    assert ref.manifest_reference == (digest or tag)


def test_docker_hub_is_reached_at_its_api_host() -> None:
    assert parse_reference("vllm/vllm-openai").endpoint == "registry-1.docker.io"
    assert parse_reference("vllm/vllm-openai").familiar == "vllm/vllm-openai"
    assert parse_reference("ubuntu").familiar == "ubuntu"


@pytest.mark.parametrize(
    "text",
    [
        "",
        "Nginx:latest",  # repositories are lower case (an upper-case first part is a host)
        "vllm/vllm-openai:" + "x" * 200,
        "vllm/vllm-openai@sha256:short",
        "a//b",
        "a/b:t:u",
        "-a/b",
    ],
)
def test_not_references(text: str) -> None:
    with pytest.raises(ImageReferenceError, match="image"):
        parse_reference(text)


def test_a_hostile_reference_is_refused_at_once() -> None:
    # a pattern that backtracks on these would run for hours, not seconds
    with ends_in_time(what="parsing hostile references"):
        for text in ("a-" * 500 + "!", "a" + "._" * 400 + "!", "a/" * 500 + "!", "x" * 10**6):
            with pytest.raises(ImageReferenceError):
                parse_reference(text)


def test_require_cuda_with_brand_clauses() -> None:
    require = parse_require_cuda(REQUIRE_130)
    assert require.cuda_min == "13.0"
    assert not require.unparsed
    assert len(require.clauses) == 7
    tesla = [rule.branch for rule in require.brands if rule.brand == "tesla"]
    assert tesla == ["r535", "r570"]
    assert {rule.brand for rule in require.brands} == {"unknown", "grid", "tesla", "nvidia"}
    assert [c.model_dump() for c in require.clauses[1].conditions] == [
        {"key": "brand", "op": "=", "value": "unknown"},
        {"key": "driver", "op": ">=", "value": "535"},
        {"key": "driver", "op": "<", "value": "536"},
    ]


def test_require_cuda_keeps_what_it_cannot_read() -> None:
    require = parse_require_cuda("cuda>=12.4 arch~9.0 brand=tesla,driver>=470,driver<471")
    assert require.cuda_min == "12.4"
    assert require.unparsed == ["arch~9.0"]
    assert require.brands[0].branch == "r470"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("8.0 8.9 9.0 10.0 12.0+PTX", ["8.0", "8.9", "9.0", "10.0", "12.0+PTX"]),
        ("7.5;8.0;9.0a;10.0f", ["7.5", "8.0", "9.0a", "10.0f"]),
        ("80;90a-real;120-virtual", ["8.0+PTX", "9.0a", "12.0+PTX"]),  # 80: real and virtual
        ("all", None),
        ("", None),
    ],
)
def test_architecture_lists(text: str, expected: list[str] | None) -> None:
    assert parse_architectures(text) == expected


@pytest.mark.parametrize(
    ("archs", "gpu", "runs"),
    [
        (["8.0", "9.0", "10.0", "12.0+PTX"], "8.6", True),  # sm_80 cubin on 8.6: same major
        (["8.0", "9.0", "10.0", "12.0+PTX"], "10.3", True),
        (["8.0", "9.0", "10.0", "12.0+PTX"], "12.1", True),
        (["8.0", "9.0", "10.0", "12.0+PTX"], "7.5", False),
        (["9.0a"], "9.0", True),
        (["9.0a"], "10.0", False),  # arch-specific: that GPU only
        (["10.0a"], "10.3", False),
        (["10.0f"], "10.3", True),  # family: same major, newer minor
        (["9.0"], "10.0", False),  # no PTX: no newer major
        (["9.0+PTX"], "12.0", True),
        (["12.0"], "not a capability", False),
    ],
)
def test_architectures_against_a_gpu(archs: list[str], gpu: str, runs: bool) -> None:
    assert arch_supports(archs, gpu) is runs


def test_config_file_docker_inspect() -> None:
    resolved = resolve_image(ImageRequest(config_file=INSPECT))
    assert resolved.source == "file"
    assert resolved.cuda == "13.0.2"
    assert resolved.cuda_from == "CUDA_VERSION"
    assert resolved.require_cuda is not None and resolved.require_cuda.cuda_min == "13.0"
    assert resolved.platform == "linux/amd64"
    assert resolved.config_digest is not None and resolved.config_digest.startswith("sha256:")
    assert resolved.labels["maintainer"].startswith("NVIDIA")


def test_config_file_oci_config_is_its_own_digest() -> None:
    path = DATA / "require-only.oci-config.json"
    resolved = resolve_image(ImageRequest(config_file=path))
    assert resolved.config_digest == "sha256:" + hashlib.sha256(path.read_bytes()).hexdigest()
    assert resolved.cuda_from == "NVIDIA_REQUIRE_CUDA"


def test_config_file_wins_over_the_reference(tmp_path: Path) -> None:
    resolved = resolve_image(
        ImageRequest("127.0.0.1:1/never/asked:x", config_file=INSPECT, lookup=("registry",))
    )
    assert resolved.source == "file" and resolved.reference == "127.0.0.1:1/never/asked:x"


def _fake_engine(tmp_path: Path, program: str = "docker") -> FakeHost:
    host = FakeHost(tmp_path / "host").install((program,))
    return host


def test_local_engine_answers_first(tmp_path: Path) -> None:
    host = _fake_engine(tmp_path)
    inspect = json.loads(INSPECT.read_text())
    inspect[0]["RepoDigests"] = ["vllm/vllm-openai@sha256:" + "c" * 64]
    (tmp_path / "inspect.json").write_text(json.dumps(inspect))
    host.reply(
        "docker image inspect vllm/vllm-openai:v0.27.1", stdout_file=tmp_path / "inspect.json"
    )
    resolved = resolve_image(
        ImageRequest("vllm/vllm-openai:v0.27.1", lookup=("engine",), engine_path=str(host.bin))
    )
    assert resolved.source == "engine"
    assert resolved.source_detail == "local docker engine (image inspect)"
    assert resolved.cuda == "13.0.2"
    assert resolved.digest == "sha256:" + "c" * 64
    assert resolved.pinned == "docker.io/vllm/vllm-openai@sha256:" + "c" * 64
    assert host.calls() == [["docker", "image", "inspect", "vllm/vllm-openai:v0.27.1"]]


def test_podman_when_docker_has_no_daemon(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host").install(("docker", "podman"))
    host.reply(
        "docker image inspect vllm/vllm-openai:v0.27.1",
        stderr="Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n",
        exit=1,
    )
    host.reply("podman image inspect vllm/vllm-openai:v0.27.1", stdout_file=INSPECT)
    resolved = resolve_image(
        ImageRequest("vllm/vllm-openai:v0.27.1", lookup=("engine",), engine_path=str(host.bin))
    )
    assert resolved.source == "engine" and "podman" in resolved.source_detail
    assert resolved.warnings[0].startswith("the local image has no registry digest")


def test_no_engine_and_no_registry_falls_back_to_the_tag_with_a_warning(tmp_path: Path) -> None:
    resolved = resolve_image(
        ImageRequest(
            "vllm/vllm-openai:v0.32.0", lookup=("engine", "tag"), engine_path=str(tmp_path)
        )
    )
    assert resolved.source == "tag"
    assert resolved.cuda == "13.0"
    assert "v0.20.0" in resolved.warnings[0]
    assert resolved.digest is None and resolved.pinned is None


@pytest.mark.slow
def test_an_engine_that_hangs_is_cut_at_the_deadline(tmp_path: Path) -> None:
    host = _fake_engine(tmp_path)
    host.reply("docker image inspect vllm/vllm-openai:v0.32.0", behaviour="hang")
    with ends_in_time(1.0, "an image lookup with the engine hanging forever"):
        resolved = resolve_image(
            ImageRequest(
                "vllm/vllm-openai:v0.32.0",
                lookup=("engine", "tag"),
                engine_path=str(host.bin),
                timeout=1.0,
            )
        )
    assert resolved.source == "tag"
    assert host.alive() == []


def test_a_local_image_of_another_platform_is_not_used(tmp_path: Path) -> None:
    host = _fake_engine(tmp_path)
    host.reply("docker image inspect vllm/vllm-openai:v0.32.0", stdout_file=INSPECT)
    resolved = resolve_image(
        ImageRequest(
            "vllm/vllm-openai:v0.32.0",
            lookup=("engine", "tag"),
            platform="linux/arm64",
            engine_path=str(host.bin),
        )
    )
    assert resolved.source == "tag"


def test_the_lookup_is_limited_by_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_TRIAGE_IMAGE_LOOKUP", "tag")
    assert resolve_image(ImageRequest("vllm/vllm-openai:kimi-k3")).source == "tag"
    monkeypatch.setenv("VLLM_TRIAGE_IMAGE_LOOKUP", "tag,everything")
    with pytest.raises(InputError, match="everything"):
        resolve_image(ImageRequest("vllm/vllm-openai:kimi-k3"))


def test_platforms() -> None:
    assert str(Platform.parse("linux/arm64/v8")) == "linux/arm64/v8"
    assert Platform.parse("linux/arm64").matches(Platform("linux", "arm64", "v8"))
    assert Platform.parse("linux/arm64/v8").matches(Platform("linux", "arm64"))
    assert not Platform.parse("linux/amd64").matches(Platform("linux", "arm64"))
    with pytest.raises(ImageError, match="os/architecture"):
        Platform.parse("amd64")


# --- docker config credentials ------------------------------------------------------------


def _config(tmp_path: Path, document: object) -> Path:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(document))
    return path


def test_docker_config_credentials(tmp_path: Path) -> None:
    pair = base64.b64encode(b"me:s3cret-pass").decode()
    auth = read_registry_auth(
        _config(
            tmp_path,
            {
                "auths": {
                    "https://index.docker.io/v1/": {"auth": pair},
                    "https://registry.example.com:5000/v2/": {
                        "auth": base64.b64encode(b"<token>:").decode(),
                        "identitytoken": "refresh-me",
                    },
                    "quay.io": {"registrytoken": "bearer-me"},
                    "ghcr.io": {},
                },
                "credHelpers": {"123.dkr.ecr.us-east-1.amazonaws.com": "ecr-login"},
            },
        )
    )
    hub = auth.for_registry("docker.io")
    assert hub is not None and (hub.username, hub.password) == ("me", "s3cret-pass")
    example = auth.for_registry("registry.example.com:5000")
    assert example is not None and example.identity_token == "refresh-me"
    quay = auth.for_registry("quay.io")
    assert quay is not None and quay.kind == "registry token"
    assert auth.for_registry("ghcr.io") is None
    note = auth.helper_note("123.dkr.ecr.us-east-1.amazonaws.com")
    assert note is not None and "docker-credential-ecr-login" in note
    assert "s3cret" not in repr(auth) + repr(hub)


def test_a_malformed_auth_is_named_not_quoted(tmp_path: Path) -> None:
    path = _config(tmp_path, {"auths": {"r.example": {"auth": "not base64 s3cret!"}}})
    with pytest.raises(AuthFileError) as error:
        read_registry_auth(path)
    assert "r.example" in str(error.value) and "s3cret" not in str(error.value)


def test_a_credential_store_is_named_when_the_registry_wants_credentials(tmp_path: Path) -> None:
    auth = read_registry_auth(_config(tmp_path, {"auths": {}, "credsStore": "desktop"}))
    note = auth.helper_note("nvcr.io")
    assert note is not None and "docker-credential-desktop" in note
