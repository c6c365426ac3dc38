"""deploy/: the Kubernetes manifest loaded into the official Kubernetes Python client's models
(strictly: every key must be a field of the API object, every value of its type) and its launch
command checked by preflight itself; the tool's Dockerfile checked by parsing it (slim Python
base, non-root user, no CUDA or GPU package, the project's wheel); the `docker run` wrapper run
with a fake `docker` and a fake (then the real) `vllm-triage` on PATH."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from cli import run_cli

REPO = Path(__file__).parent.parent
DEPLOY = REPO / "deploy"
MANIFEST = DEPLOY / "kubernetes" / "vllm-kimi-k3-with-preflight.yaml"
DOCKERFILE = DEPLOY / "Dockerfile"
WRAPPER = DEPLOY / "docker-run-preflight.sh"
K3_IMAGE = Path(__file__).parent / "data" / "image-configs" / "vllm-openai-cu130.inspect.json"
GPU_PACKAGES = re.compile(
    r"\b(cuda|cudnn|cublas|nccl|tensorrt|torch|nvidia-[a-z0-9-]+|libnvidia[a-z0-9-]*|"
    r"nvidia-ml-py|pynvml)\b",
    re.IGNORECASE,
)


@pytest.fixture(autouse=True)
def _no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_TRIAGE_IMAGE_LOOKUP", "tag")


# --- Kubernetes -------------------------------------------------------------------------------

_PRIMITIVES: dict[str, tuple[type, ...]] = {
    "str": (str,),
    "int": (int,),
    "bool": (bool,),
    "float": (int, float),
    "object": (str, int, float, bool, dict, list),
    "datetime": (str,),
}


def _strict(data: Any, kind: str, where: str) -> list[str]:
    """Problems of `data` as the API type `kind` (the client's openapi_types names): an unknown
    key (which the client's from_dict would drop silently), a value of the wrong type."""
    # The client names containers `List[X]` / `Dict[str, X]` (older releases `list[X]` and
    # `dict(str, X)`).
    if match := re.fullmatch(r"[Ll]ist\[(.+)\]", kind):
        if not isinstance(data, list):
            return [f"{where}: expected a list"]
        inner = match.group(1)
        return [p for i, item in enumerate(data) for p in _strict(item, inner, f"{where}[{i}]")]
    if match := re.fullmatch(r"(?:Dict\[|dict\()str, (.+)[\])]", kind):
        if not isinstance(data, dict):
            return [f"{where}: expected a mapping"]
        inner = match.group(1)
        return [p for key, value in data.items() for p in _strict(value, inner, f"{where}.{key}")]
    if kind in _PRIMITIVES:
        ok = isinstance(data, _PRIMITIVES[kind]) and not (kind == "int" and isinstance(data, bool))
        return [] if ok else [f"{where}: {data!r} is not a {kind}"]
    model = getattr(kubernetes.client.models, kind)
    if not isinstance(data, dict):
        return [f"{where}: expected a {kind} mapping"]
    keys = {json_key: attr for attr, json_key in model.attribute_map.items()}
    problems = [f"{where}.{key}: not a field of {kind}" for key in data if key not in keys]
    for key, value in data.items():
        if key in keys and value is not None:
            problems += _strict(value, model.openapi_types[keys[key]], f"{where}.{key}")
    return problems


def _documents() -> dict[str, dict[str, Any]]:
    return {doc["kind"]: doc for doc in yaml.safe_load_all(MANIFEST.read_text())}


def _load(document: dict[str, Any]) -> Any:
    kind = f"V1{document['kind']}"
    assert _strict(document, kind, document["kind"]) == []
    client = kubernetes.client.ApiClient()
    text = json.dumps(document)
    try:  # the client's own reading of an API response (its text, in current clients)
        return client.deserialize(text, kind, "application/json")
    except TypeError:  # older clients take the response object

        class _Response:
            data = text

        return client.deserialize(_Response(), kind)


def test_the_manifest_loads_into_the_kubernetes_client_models() -> None:
    documents = _documents()
    assert set(documents) == {"ConfigMap", "Deployment"}
    config_map = _load(documents["ConfigMap"])
    deployment = _load(documents["Deployment"])
    assert isinstance(config_map, kubernetes.client.V1ConfigMap)
    assert isinstance(deployment, kubernetes.client.V1Deployment)
    # The strict reading refuses what the client would drop silently, and a wrong type.
    broken = json.loads(json.dumps(documents["Deployment"]))
    pod = broken["spec"]["template"]["spec"]
    pod["initContainers"][0]["imagePullPolicyy"] = "Always"
    pod["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = 8
    assert _strict(broken, "V1Deployment", "Deployment") == [
        "Deployment.spec.template.spec.initContainers[0].imagePullPolicyy: not a field of "
        "V1Container",
        "Deployment.spec.template.spec.containers[0].resources.limits.nvidia.com/gpu: 8 is not a "
        "str",
    ]


def test_preflight_runs_first_with_the_servers_gpus_volumes_and_shm() -> None:
    documents = _documents()
    pod = _load(documents["Deployment"]).spec.template.spec
    [init] = pod.init_containers
    [server] = pod.containers
    assert init.args[0] == "preflight" and "vllm-triage" in init.image
    assert server.image == "vllm/vllm-openai:kimi-k3"
    assert f"--image={server.image}" in init.args
    assert init.resources.limits["nvidia.com/gpu"] == server.resources.limits["nvidia.com/gpu"]
    mounts = {m.name: m for m in init.volume_mounts}
    server_mounts = {m.name: m for m in server.volume_mounts}
    for name in ("model", "launch", "dshm"):
        assert mounts[name].mount_path == server_mounts[name].mount_path
    assert mounts["dshm"].mount_path == "/dev/shm"
    volumes = {v.name: v for v in pod.volumes}
    assert volumes["dshm"].empty_dir.medium == "Memory"
    assert volumes["launch"].config_map.name == documents["ConfigMap"]["metadata"]["name"]
    # The init container's user is not root, writes nothing, and may not gain privileges.
    context = init.security_context
    assert context.run_as_user not in (None, 0) and context.read_only_root_filesystem
    assert context.allow_privilege_escalation is False and context.capabilities.drop == ["ALL"]
    assert pod.security_context.run_as_non_root is True
    user = next(a for a in init.args if a.startswith("--container-user="))
    assert (
        user
        == f"--container-user={pod.security_context.run_as_user}:{pod.security_context.run_as_group}"
    )
    # The server runs the launch command preflight reads.
    launch = next(a for a in init.args if a.startswith("--launch-cmd=")).split("=", 1)[1]
    assert server.command == ["/bin/sh", launch]


def test_the_manifests_own_launch_command_is_a_go_on_r580_and_no_go_on_r575(
    tmp_path: Path,
) -> None:
    """The init container's arguments as the command line reads them, on given host facts."""
    documents = _documents()
    pod = documents["Deployment"]["spec"]["template"]["spec"]
    args = pod["initContainers"][0]["args"]
    serve = tmp_path / "serve.sh"
    serve.write_text(documents["ConfigMap"]["data"]["serve.sh"])
    given = [
        a.replace("/etc/vllm/serve.sh", str(serve))
        for a in args
        if not a.startswith("--model-path=")
    ]
    size = pod["volumes"][-2]["emptyDir"]["sizeLimit"].removesuffix("i")
    facts = [
        "--gpu",
        "NVIDIA B200",
        "--gpu-count",
        "8",
        "--shm-size",
        size,
        "--host-root",
        str(tmp_path),
    ]
    go = run_cli(*given, *facts, "--driver", "580.95.05", "--format", "json")
    assert go.exit_code == 0, go.stdout + go.stderr
    result = json.loads(go.stdout)
    assert result["go"] and result["host"]["profile"] == "blackwell"
    assert all(c["ok"] for c in result["checks"] if c["id"].startswith("recipe_flag"))
    no_go = run_cli(*given, *facts, "--driver", "575.57.08")
    assert no_go.exit_code == 1 and "FAIL driver: Driver 575.57.08 (r575)" in no_go.stdout


# --- the Dockerfile --------------------------------------------------------------------------


def _instructions(text: str) -> list[tuple[str, str]]:
    """(INSTRUCTION, arguments) with continuation lines joined and comments dropped."""
    logical, current = [], ""
    for line in text.splitlines():
        stripped = line.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        logical.append(current + stripped)
        current = ""
    assert current == "", "a continuation line ends the file"
    out = []
    for line in logical:
        word, _, rest = line.partition(" ")
        out.append((word.upper(), rest.strip()))
    return out


def _final_stage(instructions: list[tuple[str, str]]) -> tuple[str, list[tuple[str, str]]]:
    args = {}
    stages: list[tuple[str, list[tuple[str, str]]]] = []
    for word, rest in instructions:
        if word == "ARG" and not stages:
            name, _, default = rest.partition("=")
            args[name] = default
        elif word == "FROM":
            base = rest.split()[0]
            base = re.sub(r"\$\{(\w+)\}", lambda m: args[m.group(1)], base)
            stages.append((base, []))
        elif stages:
            stages[-1][1].append((word, rest))
    return stages[-1]


def test_the_dockerfile_is_small_non_root_and_without_gpu_libraries() -> None:
    instructions = _instructions(DOCKERFILE.read_text())
    base, final = _final_stage(instructions)
    assert re.fullmatch(r"python:3\.[0-9]+-slim(-[a-z]+)?", base), base
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the final stage sets no USER"
    user = users[-1].split(":")[0]
    assert user not in ("root", "0") and (not user.isdigit() or int(user) >= 1000)
    assert [word for word, _ in final].index("USER") > max(
        i for i, (word, rest) in enumerate(final) if word == "RUN" and "pip install" in rest
    ), "the packages are installed as root, the tool runs as the user"
    for word, rest in instructions:
        if word == "FROM":
            assert not re.search(r"nvidia|cuda", rest.split()[0], re.IGNORECASE), rest
        if word == "RUN":
            assert not re.search(r"\b(apt-get|apt|yum|dnf|apk|conda)\b", rest), "no system packages"
            for command in re.split(r"&&|;|\|\|", rest):
                words = shlex.split(command)
                if "install" in words and "pip" in words:
                    packages = [
                        w for w in words[words.index("install") + 1 :] if not w.startswith("-")
                    ]
                    assert not [p for p in packages if GPU_PACKAGES.search(p)], command
    installs = [rest for word, rest in final if word == "RUN" and "pip install" in rest]
    assert any("/wheels/*.whl" in rest for rest in installs)
    assert ("COPY", "--from=build /wheels /wheels") in final
    entry = next(rest for word, rest in final if word == "ENTRYPOINT")
    assert json.loads(entry) == ["vllm-triage"]
    env = " ".join(rest for word, rest in final if word == "ENV")
    assert "NVIDIA_DRIVER_CAPABILITIES=utility" in env


def test_the_wheel_pulls_no_gpu_library() -> None:
    """What the Dockerfile installs is the project's wheel and its runtime dependencies: none of
    them is a GPU library (NVML's binding is an optional extra; the runtime mounts nvidia-smi)."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    for requirement in project["dependencies"]:
        assert not GPU_PACKAGES.search(requirement), requirement


# --- the docker run wrapper ------------------------------------------------------------------

_FAKE = """#!{python}
import json, os, sys
argv = sys.argv[1:]
stdin = sys.stdin.read() if "-" in argv else None
with open(os.environ["FAKE_RECORD"], "a") as record:
    record.write(json.dumps({{"program": {name!r}, "argv": argv, "stdin": stdin}}) + "\\n")
sys.exit(int(os.environ.get({code!r}, "0")))
"""


def _fakes(folder: Path, programs: tuple[str, ...] = ("docker", "vllm-triage")) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for name in programs:
        script = folder / name
        code = "FAKE_DOCKER_EXIT" if name == "docker" else "FAKE_PREFLIGHT_EXIT"
        script.write_text(_FAKE.format(python=sys.executable, name=name, code=code))
        script.chmod(0o755)
    return folder


def _wrapper(
    tmp_path: Path, *args: str, preflight_exit: int = 0, docker_exit: int = 0, **env: str
) -> tuple[subprocess.CompletedProcess[str], list[dict[str, Any]]]:
    record = tmp_path / "calls.jsonl"
    record.unlink(missing_ok=True)
    record.touch()
    variables = {
        **os.environ,
        "PATH": f"{_fakes(tmp_path / 'bin')}:/usr/bin:/bin",
        "FAKE_RECORD": str(record),
        "FAKE_PREFLIGHT_EXIT": str(preflight_exit),
        "FAKE_DOCKER_EXIT": str(docker_exit),
        **env,
    }
    done = subprocess.run(
        ["bash", str(WRAPPER), *args], env=variables, capture_output=True, text=True, timeout=120
    )
    calls = [json.loads(line) for line in record.read_text().splitlines()]
    return done, calls


def test_the_wrapper_passes_every_argument_through_unevaluated(tmp_path: Path) -> None:
    marker = tmp_path / "pwned"
    tricky = [
        "--gpus", "all", "--shm-size", "16g", "--user", "1000:1000",
        "-e", f"NOTE=two words; $(touch {marker}) `touch {marker}` && echo x > {marker}",
        "-v", "/data/my models:/models:ro", "vllm/vllm-openai:kimi-k3", "/models/Kimi-K3",
        "--chat-template", "{{ '*' }} \"double\" 'single' \\ back", "--served-model-name", "",
        "--trust-remote-code", "-tp", "8", "--enable-prefix-caching", "*", "--", "~", "$HOME",
    ]  # fmt: skip
    done, calls = _wrapper(tmp_path, "--image", "vllm/vllm-openai:kimi-k3", "--", *tricky)
    assert done.returncode == 0, done.stderr
    assert [c["program"] for c in calls] == ["vllm-triage", "docker"]
    preflight, docker = calls
    assert docker["argv"] == ["run", *tricky]
    assert not marker.exists()
    assert preflight["argv"] == [
        "preflight", "--image", "vllm/vllm-openai:kimi-k3", "--shm-size", "16g",
        "--container-user", "1000:1000", "--launch-cmd", "-",
    ]  # fmt: skip
    assert shlex.split(preflight["stdin"]) == ["docker", "run", *tricky]
    # Control characters reach docker unchanged too (preflight's copy is only read).
    done, calls = _wrapper(tmp_path, "--image", "x", "--", "img", "line\nbreak", "tab\there")
    assert done.returncode == 0 and calls[-1]["argv"] == ["run", "img", "line\nbreak", "tab\there"]


@pytest.mark.slow
def test_the_wrapper_derives_shm_and_user_from_the_docker_arguments(tmp_path: Path) -> None:
    def preflight_args(*docker: str, given: tuple[str, ...] = ("--image", "x")) -> list[str]:
        done, calls = _wrapper(tmp_path, *given, "--", *docker)
        assert done.returncode == 0, done.stderr
        return list(calls[0]["argv"][1:])

    assert preflight_args("img") == ["--image", "x", "--shm-size", "64m", "--launch-cmd", "-"]
    assert preflight_args("--ipc=host", "img") == ["--image", "x", "--launch-cmd", "-"]
    assert preflight_args("--ipc", "host", "img") == ["--image", "x", "--launch-cmd", "-"]
    assert preflight_args("--shm-size=2g", "-u", "0", "img")[2:6] == [
        "--shm-size", "2g", "--container-user", "0",
    ]  # fmt: skip
    assert "--container-user" not in preflight_args("--user", "vllm", "img")  # a name: not passed
    given = ("--image", "x", "--shm-size=1g", "--launch-cmd", "serve.sh", "--container-user=5")
    assert preflight_args("--shm-size", "8g", "-u", "7", "img", given=given) == list(given)


@pytest.mark.parametrize(("code", "says"), [(1, "no-go"), (2, "preflight failed (exit 2)")])
def test_the_wrapper_starts_nothing_without_a_go(tmp_path: Path, code: int, says: str) -> None:
    done, calls = _wrapper(tmp_path, "--image", "x", "--", "img", preflight_exit=code)
    assert done.returncode == code
    assert [c["program"] for c in calls] == ["vllm-triage"]
    assert says in done.stderr and "the container was not started" in done.stderr


def test_the_wrapper_exits_with_dockers_status_and_refuses_bad_usage(tmp_path: Path) -> None:
    done, _ = _wrapper(tmp_path, "--image", "x", "--", "img", docker_exit=125)
    assert done.returncode == 125
    for args in (("--image", "x"), ("--image", "x", "--")):
        done, calls = _wrapper(tmp_path, *args)
        assert done.returncode == 2 and calls == [] and done.stderr.startswith("usage:")


@pytest.mark.slow
def test_the_wrapper_with_the_real_preflight(tmp_path: Path) -> None:
    """The real vllm-triage (this environment's) between the wrapper and a fake docker: the K3
    launch given as docker arguments is read through the wrapper's quoting."""
    triage = str(Path(sys.executable).parent / "vllm-triage")
    options = (
        "--image-config", str(K3_IMAGE), "--driver", "580.95.05", "--gpu", "NVIDIA B200",
        "--gpu-count", "8", "--recipe", "kimi-k3", "--host-root", str(tmp_path),
    )  # fmt: skip
    launch = [
        "--gpus", "all", "--shm-size", "16g", "-v", "/data/models:/models:ro",
        "vllm/vllm-openai:v0.27.1", "moonshotai/Kimi-K3", "--trust-remote-code", "-tp", "8",
        "--enable-prefix-caching", "--kv-cache-dtype", "fp8", "--max-model-len", "1048576",
        "--no-enable-flashinfer-autotune",
    ]  # fmt: skip
    done, calls = _wrapper(tmp_path, *options, "--", *launch, VLLM_TRIAGE=triage)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("GO") and calls == [
        {"program": "docker", "argv": ["run", *launch], "stdin": None}
    ]
    without = [a for a in launch if a not in ("--shm-size", "16g", "--enable-prefix-caching")]
    done, calls = _wrapper(tmp_path, *options, "--", *without, VLLM_TRIAGE=triage)
    assert done.returncode == 1 and calls == []
    fails = [line.split(":")[0] for line in done.stdout.splitlines() if line.startswith("FAIL")]
    assert fails == ["FAIL shm", "FAIL recipe_flag"]
