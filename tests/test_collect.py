"""collect end to end on a fake host that replays real outputs: bundles, probe states, the
allow-list, redaction of planted secrets, deadlines, and diagnose --bundle on the result."""

from __future__ import annotations

import gzip
import io
import json
import os
import re
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
from deadlines import ends_in_time
from fakehost import DECOYS, FakeHost, replay_kimi_k3_node

from vllm_triage.bundle.read import open_bundle
from vllm_triage.collect import CollectOptions, collect
from vllm_triage.collect.api import MARGIN_SECONDS
from vllm_triage.collect.runner import ALLOWED_COMMANDS, DEFAULT_OUTPUT_CAP, IMAGE_PROBE_SCRIPT
from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.errors import InputError

DATA = Path(__file__).parent / "data"
COLLECT = DATA / "collect"
SAMPLES = COLLECT / "samples"
H200 = COLLECT / "h200-580.159.04"
SCENARIOS = COLLECT / "scenarios"
REPO = Path(__file__).parent.parent

HF_TOKEN = "hf_TriageTestTokenAbCdEfGhIjKlMnOpQrStUv"
OPENAI_KEY = "sk-proj-K3triageTESTkey0123456789abcdefABCDEF0123456789"
BEARER = "eyTriageBearerValue0123456789abcdefXYZ"
URL_PASSWORD = "Pr0xyPa55w0rd"
LOG_PASSWORD = "s3cretLogPassw0rd"
ARG_TOKEN = "hf_LaunchFileTokenZyXwVuTsRqPoNmLkJiHg"
SMI_KEY = "sk-SmiProcessKey9876543210zyxwvutsrqpo"
FILE_TOKEN = "hf_FileNameTokenQwErTyUiOpAsDfGhJkLzXc"
PLANTED = {
    HF_TOKEN, OPENAI_KEY, BEARER, URL_PASSWORD, LOG_PASSWORD, ARG_TOKEN, SMI_KEY, FILE_TOKEN,
    "correct horse battery staple", "wJalrXUtnFEMI/K7MDENG/bPxRfiCYTRIAGEKEY1",
    "AKIAIOSFODNN7TRIAGE1", "8f2a9c4d1e7b3f6a0c5d8e2b4f7a1c9d3e6b0f25",
}  # fmt: skip


def _b200_xml_on_575(target: Path) -> Path:
    """The real 8x B200 `nvidia-smi -q -x` capture (driver 580.105.08), with the driver fields set
    to the 575.57.08 / CUDA 12.9 of the real 8x B200 table capture of this case (see the example's
    nvidia-smi.txt), and a process line carrying a secret in its name."""
    text = (SAMPLES / "nvidia-smi-xml" / "b200-x8-580.105.08.xml").read_text()
    text = text.replace("580.105.08", "575.57.08").replace(
        "<cuda_version>13.0</cuda_version>", "<cuda_version>12.9</cuda_version>"
    )
    text = text.replace(
        "<processes>",
        "<processes><process_info><pid>4242</pid><type>C</type>"
        f"<process_name>python3 serve.py --api-key {SMI_KEY}</process_name>"
        "<used_memory>1 MiB</used_memory></process_info>",
        1,
    )
    target.write_text(text)
    return target


def _k3_log(target: Path) -> Path:
    """The Kimi K3 on r575 log of the example, with secrets a real log can carry."""
    text = (REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log").read_text()
    planted = (
        "2026-11-28T09:14:02.200000000Z (APIServer pid=1) INFO 11-28 09:14:02 [proxy.py:12] "
        f"Using proxy https://proxyuser:{URL_PASSWORD}@proxy.corp.example:3128\n"
        "2026-11-28T09:14:02.200000001Z (APIServer pid=1) DEBUG 11-28 09:14:02 [http.py:40] "
        f"request headers: {{'Authorization': 'Bearer {BEARER}'}}\n"
        "2026-11-28T09:14:02.200000002Z (APIServer pid=1) INFO 11-28 09:14:02 [db.py:3] "
        f"connecting with password={LOG_PASSWORD} token {HF_TOKEN}\n"
    )
    lines = text.splitlines(keepends=True)
    target.write_text("".join(lines[:8]) + planted + "".join(lines[8:]))
    return target


@pytest.fixture
def k3_host(tmp_path: Path) -> FakeHost:
    """A node where the cu130 Kimi K3 container died at CUDA init on an r575 driver."""
    host = FakeHost(tmp_path / "host").install()
    replay = tmp_path / "replay"
    replay.mkdir()
    return replay_kimi_k3_node(
        host, _b200_xml_on_575(replay / "smi.xml"), _k3_log(replay / "container.log")
    )


def _k3_options(host: FakeHost, tmp_path: Path, **overrides: object) -> CollectOptions:
    launch = f"HF_TOKEN={ARG_TOKEN} docker run --gpus all vllm/vllm-openai:kimi-k3 moonshotai/Kimi-K3 -tp 8\n"
    extra_log = tmp_path / f"run-{FILE_TOKEN}.log"
    extra_log.write_text(f"client saw 503; Authorization: Bearer {BEARER}\n")
    values: dict[str, object] = {
        "container": "vllm-k3",
        "host_root": host.root,
        "timeout": 10.0,
        "launch_cmd": launch,
        "logs": (extra_log,),
    }
    values.update(overrides)
    return CollectOptions(**values)  # type: ignore[arg-type]


def _every_byte(case: Path) -> bytes:
    """All bytes a bundle exposes: file names and contents in the folder, the tar (decompressed)."""
    chunks = []
    for path in sorted(case.rglob("*")):
        chunks.append(str(path.relative_to(case)).encode())
        if path.is_file():
            data = path.read_bytes()
            chunks.append(data)
            if path.name.endswith(".tar.gz"):
                chunks.append(gzip.decompress(data))
                with tarfile.open(fileobj=io.BytesIO(data)) as archive:
                    chunks.extend(m.name.encode() for m in archive.getmembers())
    return b"\n".join(chunks)


@pytest.mark.slow
def test_k3_bundle_goes_to_driver_too_old(k3_host: FakeHost, tmp_path: Path) -> None:
    case = tmp_path / "triage"
    result = collect(_k3_options(k3_host, tmp_path, case=case), runner=k3_host.runner())
    assert result.folder.is_dir() and result.archive.is_file()
    states = {p.name: p.status for p in result.manifest.probes}
    assert states == {
        "gpu": "ok", "host": "ok", "container": "ok", "kubernetes": "not_available",
        "image": "not_available", "communication": "ok", "model_files": "ok", "vllm": "ok",
        "logs": "ok",
    }  # fmt: skip
    for entry in result.manifest.files:
        assert (result.folder / entry.path).is_file()
    with open_bundle(result.archive) as bundle:
        assert not bundle.problems
        facts = bundle.facts
        assert facts.gpu and facts.gpu.driver_version == "575.57.08" and len(facts.gpu.gpus) == 8
        assert (
            facts.gpu.kernel_module_version == "575.57.08" and facts.gpu.library_mismatch is False
        )
        assert facts.gpu.nvlink_in_topology is True
        assert facts.container and facts.container.image_cuda == "13.0.2"
        assert facts.container.exit_code == 1 and facts.container.gpu_requested
        assert facts.container.toolkit_version == "1.12.0"
        assert "COMPANY_INTERNAL_SETTING" in facts.container.env_omitted
        assert facts.container.env["NCCL_DEBUG"] == "INFO"
        assert facts.vllm and facts.vllm.launch and facts.vllm.launch.tensor_parallel_size == 8
        assert facts.communication and facts.communication.settings["UCX_TLS"] == "rc,cuda_copy"
        assert [p.link_layer for p in facts.communication.rdma_ports] == ["Ethernet"]
        assert bundle.logs[0].name == "container.log"

    verdict = diagnose(DiagnoseOptions(bundle=result.archive))
    assert verdict.primary.cause == "driver_too_old"
    assert verdict.primary.driver_change_advised
    assert verdict.compat is not None and verdict.compat.verdict == "incompatible"
    assert verdict.compat.driver == "575.57.08" and verdict.compat.cuda.startswith("13.0")
    evidence = " ".join(e.text for e in verdict.primary.evidence)
    assert "575.57.08" in evidence and "13.0" in evidence
    assert any("found version 12090" in e.text for e in verdict.primary.evidence)
    same_from_folder = diagnose(DiagnoseOptions(bundle=result.folder))
    assert same_from_folder.primary.cause == "driver_too_old"
    assert diagnose(DiagnoseOptions(bundle=case)).primary.cause == "driver_too_old"


@pytest.mark.slow
def test_no_planted_secret_survives_anywhere(k3_host: FakeHost, tmp_path: Path) -> None:
    case = tmp_path / "triage"
    result = collect(_k3_options(k3_host, tmp_path, case=case), runner=k3_host.runner())
    everything = _every_byte(case)
    for secret in PLANTED:
        assert secret.encode() not in everything, f"{secret!r} leaked"
        for start in range(0, len(secret) - 11):
            piece = secret[start : start + 12].encode()
            assert piece not in everything, f"part of {secret!r} leaked: {piece!r}"
    assert re.search(rb"\[REDACTED:[a-z0-9_]+:[0-9a-f]{8}\]", everything)
    report = result.manifest.redaction
    assert report and all(isinstance(n, int) and n > 0 for n in report.values())
    manifest = (result.folder / "manifest.json").read_text()
    for secret in PLANTED:
        assert secret not in manifest


@pytest.mark.slow
def test_only_allow_listed_commands_run(k3_host: FakeHost, tmp_path: Path) -> None:
    collect(
        _k3_options(k3_host, tmp_path, probe_image=True, case=tmp_path / "t"),
        runner=k3_host.runner(),
    )
    calls = k3_host.calls()
    assert calls, "the fakes record every call"
    runner = k3_host.runner()
    allowed = set()
    for command in ALLOWED_COMMANDS:
        params = {"container": "vllm-k3", "image": "vllm/vllm-openai:kimi-k3", "pod": "p",
                  "namespace": "default", "node": "n"}  # fmt: skip
        needed = {k: v for k, v in params.items() if "{" + k + "}" in " ".join(command.argv)}
        allowed.add(tuple(runner.argv(command.name, **needed)))
    for call in calls:
        assert tuple(call) in allowed, f"not on the allow-list: {call}"
        assert call[0] not in DECOYS
        verbs = set(call[1:3])
        assert not verbs & {"start", "restart", "rm", "kill", "stop", "exec", "pause", "update"}
        if call[0] == "nvidia-smi":
            assert call[1:] in (["-q", "-x"], ["topo", "-m"]), "no nvidia-smi setting flags"
    probes = [c for c in calls if c[:2] == ["docker", "run"]]
    assert probes == [[
        "docker", "run", "--rm", "--network", "none", "--entrypoint", "python3",
        "vllm/vllm-openai:kimi-k3", "-c", IMAGE_PROBE_SCRIPT,
    ]]  # fmt: skip
    assert "--gpus" not in probes[0]


@pytest.mark.slow
def test_image_probe_runs_only_when_asked(k3_host: FakeHost, tmp_path: Path) -> None:
    result = collect(_k3_options(k3_host, tmp_path, case=tmp_path / "t"), runner=k3_host.runner())
    assert not [c for c in k3_host.calls() if c[:2] == ["docker", "run"]]
    image = next(p for p in result.manifest.probes if p.name == "image")
    assert image.status == "not_available" and "--probe-image" in (image.reason or "")


@pytest.mark.slow
def test_image_probe_reads_torch_cuda(k3_host: FakeHost, tmp_path: Path) -> None:
    k3_host.reply(
        "docker run --rm --network none --entrypoint python3 vllm/vllm-openai:kimi-k3 -c "
        + IMAGE_PROBE_SCRIPT,
        stdout='{"torch_version": "2.13.0+cu130", "torch_cuda": "13.0", "vllm": "0.27.1", '
        '"vllm_commit": "b6bbf29dd", "nvidia-nccl-cu13": "2.28.9"}\n',
    )
    result = collect(
        _k3_options(k3_host, tmp_path, probe_image=True, case=tmp_path / "t"),
        runner=k3_host.runner(),
    )
    with open_bundle(result.folder) as bundle:
        assert bundle.facts.image is not None
        assert (bundle.facts.image.torch_cuda, bundle.facts.image.vllm_version) == (
            "13.0",
            "0.27.1",
        )


@pytest.mark.slow
def test_a_hanging_probe_is_cut_at_its_timeout(k3_host: FakeHost, tmp_path: Path) -> None:
    k3_host.reply("nvidia-smi -q -x", behaviour="hang")
    (k3_host.root / "proc" / "driver" / "nvidia" / "version").unlink()
    with ends_in_time(1.5, "a collect with nvidia-smi hanging forever"):
        result = collect(
            _k3_options(k3_host, tmp_path, timeout=1.5, case=tmp_path / "t"),
            runner=k3_host.runner(),
        )
    gpu = next(p for p in result.manifest.probes if p.name == "gpu")
    assert gpu.status == "timed_out" and "did not finish within" in (gpu.reason or "")
    others = {p.name: p.status for p in result.manifest.probes if p.name != "gpu"}
    assert others["container"] == "ok" and others["host"] == "ok"
    with open_bundle(result.folder) as bundle:
        assert bundle.facts.container is not None and bundle.logs and bundle.facts.gpu is None


@pytest.mark.slow
def test_a_hanging_command_leaves_what_the_kernel_module_says(
    k3_host: FakeHost, tmp_path: Path
) -> None:
    k3_host.reply("nvidia-smi -q -x", behaviour="hang")
    result = collect(
        _k3_options(k3_host, tmp_path, timeout=1.5, case=tmp_path / "t"),
        runner=k3_host.runner(),
    )
    gpu = next(p for p in result.manifest.probes if p.name == "gpu")
    assert gpu.status == "ok" and any("did not finish within" in n for n in gpu.notes)
    with open_bundle(result.folder) as bundle:
        assert bundle.facts.gpu is not None and bundle.facts.gpu.driver_version == "575.57.08"
    assert diagnose(DiagnoseOptions(bundle=result.folder)).primary.cause == "driver_too_old"


@pytest.mark.slow
def test_crashing_garbage_and_missing_commands(k3_host: FakeHost, tmp_path: Path) -> None:
    k3_host.reply("nvidia-smi -q -x", behaviour="crash")
    k3_host.reply("docker inspect --type container vllm-k3", behaviour="garbage")
    (k3_host.bin / "ibv_devinfo").unlink()
    (k3_host.bin / "kubectl").unlink()
    options = _k3_options(k3_host, tmp_path, pod="vllm-0", namespace="ml", case=tmp_path / "t")
    result = collect(options, runner=k3_host.runner())
    states = {p.name: p for p in result.manifest.probes}
    assert states["gpu"].status == "ok", "the kernel module still answers"
    assert any("exited -11" in n for n in states["gpu"].notes)
    assert states["container"].status == "failed"
    assert "did not print JSON" in (states["container"].reason or "")
    assert states["kubernetes"].status == "not_available"
    assert "kubectl is not installed" in (states["kubernetes"].reason or "")
    assert states["host"].status == "ok"


def test_driver_library_mismatch_after_a_driver_change(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host").install()
    host.file(
        "/proc/driver/nvidia/version",
        SAMPLES / "proc-driver-version" / "mismatch-kmod-580.173.02-vs-nvml-580.178.version.txt",
    )
    host.reply(
        "nvidia-smi -q -x",
        stdout_file=SAMPLES / "nvidia-smi-text" / "mismatch-nvml-580.178.nvidia-smi.txt",
        exit=18,
    )
    result = collect(CollectOptions(host_root=host.root, case=tmp_path / "t"), runner=host.runner())
    with open_bundle(result.folder) as bundle:
        gpu = bundle.facts.gpu
        assert gpu is not None and gpu.library_mismatch is True
        assert (gpu.kernel_module_version, gpu.nvml_version) == ("580.173.02", "580.178")
    verdict = diagnose(DiagnoseOptions(bundle=result.folder))
    assert verdict.primary.cause == "driver_library_mismatch"
    assert not verdict.primary.driver_change_advised


PERMISSION_LOG = """\
INFO 11-30 10:02:11 [api_utils.py:286] non-default args: {'model_tag': '/models/llama', 'model': '/models/llama', 'max_model_len': 4096}
INFO 11-30 10:02:18 [core.py:133] Initializing a V1 LLM engine (v0.11.0) with config: model='/models/llama'
ERROR 11-30 10:02:19 [core.py:1083] EngineCore failed to start.
ERROR 11-30 10:02:19 [core.py:1083] Traceback (most recent call last):
ERROR 11-30 10:02:19 [core.py:1083]   File "/usr/local/lib/python3.12/dist-packages/transformers/utils/hub.py", line 479, in cached_files
ERROR 11-30 10:02:19 [core.py:1083] PermissionError: [Errno 13] Permission denied: '/models/llama/config.json'
"""


@pytest.mark.slow
def test_permission_error_on_the_model_mount(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host").install()
    model = host.root / "srv" / "llama"
    model.mkdir(parents=True)
    (model / "config.json").write_text("{}")
    (model / "model.safetensors").write_bytes(b"x" * 64)
    for path in [*model.iterdir(), model]:
        path.chmod(0o700)
    inspect = json.loads((SCENARIOS / "kimi-k3-docker-inspect.json").read_text())
    inspect[0]["Config"].update(
        {"User": "4242:4242", "Image": "vllm/vllm-openai:v0.11.0",
         "Cmd": ["/models/llama", "--max-model-len", "4096"]}
    )  # fmt: skip
    inspect[0]["Mounts"] = [
        {"Type": "bind", "Source": "/srv/llama", "Destination": "/models/llama", "RW": False}
    ]
    (tmp_path / "inspect.json").write_text(json.dumps(inspect))
    (tmp_path / "log").write_text(PERMISSION_LOG)
    host.reply("nvidia-smi -q -x", stdout_file=H200 / "nvidia-smi-q-x.xml")
    host.file("/proc/driver/nvidia/version", H200 / "proc-driver-nvidia-version.txt")
    host.reply("docker version --format {{json .}}", stdout='{"Client":{"Version":"27.3.1"}}')
    host.reply("docker inspect --type container llama", stdout_file=tmp_path / "inspect.json")
    host.reply("docker logs --timestamps llama", stdout_file=tmp_path / "log")
    host.reply(
        "docker image inspect vllm/vllm-openai:v0.11.0",
        stdout_file=DATA / "image-configs" / "vllm-openai-cu130.inspect.json",
    )
    options = CollectOptions(
        container="llama", host_root=host.root, timeout=10, case=tmp_path / "t"
    )
    result = collect(options, runner=host.runner())
    with open_bundle(result.folder) as bundle:
        files = bundle.facts.model_files
        assert files is not None and files.host_path == "/srv/llama"
        assert files.readable is False and files.checked_as == "uid:gid 4242:4242"
    verdict = diagnose(DiagnoseOptions(bundle=result.archive))
    assert verdict.primary.cause == "model_path_or_access"
    assert not verdict.primary.driver_change_advised
    assert not any(f.driver_change_advised for f in verdict.findings)
    assert verdict.compat is not None and verdict.compat.verdict in ("compatible", "conditional")
    assert any(e.file == "facts.json" for e in verdict.primary.evidence)


def test_bad_input_is_refused_before_anything_runs(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host").install()
    with pytest.raises(InputError, match=r"--log .*missing.log: no such file"):
        collect(
            CollectOptions(logs=(tmp_path / "missing.log",), case=tmp_path / "t"),
            runner=host.runner(),
        )
    with pytest.raises(InputError, match="--timeout"):
        collect(CollectOptions(timeout=0, case=tmp_path / "t"), runner=host.runner())
    assert host.calls() == []
    assert not (tmp_path / "t").exists() or not list((tmp_path / "t").iterdir())


def test_two_collects_make_two_bundles(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host").install(())
    options = CollectOptions(host_root=host.root, timeout=2, case=tmp_path / "t")
    first = collect(options, runner=host.runner())
    second = collect(options, runner=host.runner())
    assert first.folder != second.folder and first.folder.is_dir() and second.folder.is_dir()
    assert not list((tmp_path / "t").glob("bundles/.*partial"))
    states = {p.name: p.status for p in second.manifest.probes}
    assert states["gpu"] == "not_available" and states["container"] == "not_available"


POD_SECRETS = (
    "hf_PodEnvTokenAbCdEfGhIjKlMnOpQrStUvWx",
    "sk-proj-PodArgKey0123456789abcdefGHIJKLMNOPQRSTUVWX",
)


def test_crashlooping_pod_on_an_r535_node(tmp_path: Path) -> None:
    """kubectl only (no engine, no GPU on this machine): the pod, its events, the previous run's
    log and the node's real GFD labels are enough for the driver threshold."""
    host = FakeHost(tmp_path / "host").install(("kubectl",))
    labels = json.loads(
        (SAMPLES / "k8s" / "node-labels-rke2-a30-535.274.02.gpu-worker-02.json").read_text()
    )
    (tmp_path / "node.json").write_text(
        json.dumps({"kind": "Node", "metadata": {"name": "gpu-worker-02", "labels": labels}})
    )
    ns = "--namespace inference"
    host.reply(
        f"kubectl get pod kimi-k3-0 {ns} --output json", stdout_file=SCENARIOS / "kimi-k3-pod.json"
    )
    host.reply(
        f"kubectl get events {ns} --field-selector involvedObject.name=kimi-k3-0 --output json",
        stdout_file=SCENARIOS / "kimi-k3-events.json",
    )
    host.reply(
        f"kubectl logs kimi-k3-0 {ns} --all-containers --timestamps --previous",
        stdout_file=REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log",
    )
    host.reply(
        f"kubectl logs kimi-k3-0 {ns} --all-containers --timestamps",
        stdout="2026-11-28T09:16:59Z (APIServer pid=1) INFO 11-28 09:16:59 [api_utils.py:347] starting\n",
    )
    host.reply("kubectl get node gpu-worker-02 --output json", stdout_file=tmp_path / "node.json")
    options = CollectOptions(
        pod="kimi-k3-0", namespace="inference", host_root=host.root, case=tmp_path / "t"
    )
    result = collect(options, runner=host.runner())
    states = {p.name: p.status for p in result.manifest.probes}
    assert states["kubernetes"] == "ok" and states["gpu"] == "not_available"
    with open_bundle(result.folder) as bundle:
        k8s = bundle.facts.kubernetes
        assert k8s is not None and k8s.node == "gpu-worker-02"
        (vllm,) = k8s.containers
        assert (vllm.restart_count, vllm.reason, vllm.last_exit_code, vllm.gpu_limit) == (
            5,
            "CrashLoopBackOff",
            1,
            "8",
        )
        assert [e.reason for e in k8s.events] == ["Pulled", "BackOff"]
        assert (k8s.gfd_driver_version, k8s.gfd_cuda_ceiling) == ("535.274.02", "12.2")
        assert [p.name for p in bundle.logs] == ["pod-previous.log", "pod-current.log"]
        launch = bundle.facts.vllm.launch if bundle.facts.vllm else None
        assert (
            launch is not None
            and launch.model == "moonshotai/Kimi-K3"
            and launch.tensor_parallel_size == 8
        )
    everything = _every_byte(tmp_path / "t")
    for secret in POD_SECRETS:
        assert secret.encode() not in everything
    assert b"cc-4411" not in everything, "env outside the allow-list is kept by name only"
    verdict = diagnose(DiagnoseOptions(bundle=result.archive))
    assert verdict.primary.cause == "driver_too_old" and verdict.primary.driver_change_advised
    assert verdict.compat is not None and verdict.compat.driver == "535.274.02"
    assert any("GPU Feature Discovery" in note for note in verdict.notes)
    assert verdict.primary.evidence[0].file.endswith("logs/pod-previous.log")


@pytest.mark.slow
def test_raw_outputs_do_not_outlive_the_collect(k3_host: FakeHost, tmp_path: Path) -> None:
    runner = k3_host.runner()
    collect(_k3_options(k3_host, tmp_path, case=tmp_path / "t"), runner=runner)
    assert runner.scratch is not None and not runner.scratch.exists(), "raw outputs are removed"


# -- probes fail alone; deadlines hold whatever the commands print --------------------------


@pytest.mark.parametrize(
    "inspect",
    [
        {"behaviour": "garbage"},
        {"stdout": '[{"Config": "not a mapping", "State": 5, "Mounts": {"x": 1}}]'},
        {"stdout": "[" * 100_000},
    ],
    ids=["garbage", "wrong-shapes", "deep"],
)
@pytest.mark.slow
def test_a_bad_inspect_fails_the_container_probe_alone(
    k3_host: FakeHost, tmp_path: Path, inspect: dict[str, str]
) -> None:
    k3_host.reply("docker inspect --type container vllm-k3", **inspect)  # type: ignore[arg-type]
    launch = "vllm serve moonshotai/Kimi-K3 --tensor-parallel-size 8 --max-model-len 65536\n"
    options = _k3_options(k3_host, tmp_path, launch_cmd=launch, case=tmp_path / "t")
    result = collect(options, runner=k3_host.runner())
    states = {p.name: p for p in result.manifest.probes}
    failed = {name for name, p in states.items() if p.status == "failed"}
    assert failed <= {"container"}, {n: states[n].reason for n in failed}
    assert states["vllm"].status == "ok" and states["communication"].status == "ok"
    assert (result.folder / "vllm" / "launch-command.txt").read_text() == launch
    with open_bundle(result.folder) as bundle:
        launched = bundle.facts.vllm.launch if bundle.facts.vllm else None
        assert launched is not None and launched.tensor_parallel_size == 8
        assert launched.max_model_len == 65536
    if states["container"].status == "failed":
        assert "did not print JSON" in (states["container"].reason or "")
        notes = " ".join(n for p in result.manifest.probes for n in p.notes)
        assert "container inspect:" in notes, "the probes that use it say what is missing"


@pytest.mark.parametrize("behaviour", ["flood", "flood_forever"])
@pytest.mark.slow
def test_the_whole_run_ends_near_the_timeout_whatever_the_log_prints(
    k3_host: FakeHost, tmp_path: Path, behaviour: str
) -> None:
    """The CLI, as a user runs it, against a `docker logs` that prints 300 MB quickly or never
    ends: the whole run (probes, redaction, archive) ends, with the log capped (how near
    --timeout it ends is bench/bench_collect.py's measure)."""
    k3_host.reply("docker logs --timestamps vllm-k3", behaviour=behaviour, size=300 << 20)
    timeout, case = 2.0, tmp_path / "t"
    with ends_in_time(timeout + MARGIN_SECONDS, f"a collect against a log that does {behaviour}"):
        done = subprocess.run(
            [sys.executable, "-m", "vllm_triage", "collect", "--container", "vllm-k3",
             "--host-root", str(k3_host.root), "--case", str(case), "--timeout", str(timeout),
             "--format", "json"],
            env=dict(os.environ, PATH=str(k3_host.bin)), capture_output=True, check=False,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert not k3_host.alive()
    manifest = json.loads(done.stdout)
    entry = next(f for f in manifest["files"] if f["path"] == "logs/container.log")
    assert entry["truncated"] and "left out" in entry["note"]
    assert entry["size"] <= DEFAULT_OUTPUT_CAP + 4096
    container = next(p for p in manifest["probes"] if p["name"] == "container")
    assert any("left out" in note for note in container["notes"])
    (archive,) = case.glob("bundles/*.tar.gz")
    folder = archive.parent / archive.name.removesuffix(".tar.gz")
    with (folder / "logs" / "container.log").open() as log:  # 32 MiB: read line by line
        lines = iter(log)
        assert next(lines) == "FIRST LINE of the flood\n"
        assert any("bytes left out here" in line for line in lines)
        *_, last = lines
    if behaviour == "flood":  # it ended: its last line is kept, the middle is not
        assert last == "LAST LINE of the flood\n"
    else:
        assert any("did not finish within" in note for note in container["notes"])
    with open_bundle(archive) as bundle:
        assert not bundle.problems


@pytest.mark.slow
def test_redaction_stops_at_the_deadline_with_a_note_never_in_clear(
    k3_host: FakeHost, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No time left for the streamed files once the probes are done (however early that is).
    monkeypatch.setattr("vllm_triage.collect.api.WRITE_SECONDS", -1000.0)
    big = tmp_path / "big.log"
    big.write_text(f"Authorization: Bearer {BEARER}\n" * 200_000)
    options = _k3_options(k3_host, tmp_path, logs=(big,), case=tmp_path / "t")
    result = collect(options, runner=k3_host.runner())
    entry = next(f for f in result.manifest.files if f.path == "logs/given-1-big.log")
    assert entry.truncated and "deadline" in (entry.note or "")
    written = (result.folder / entry.path).read_text()
    assert "the collect deadline came here" in written and BEARER not in written
    assert BEARER.encode() not in _every_byte(tmp_path / "t")


@pytest.mark.slow
def test_a_log_of_one_huge_line_is_redacted_in_bounded_memory(tmp_path: Path) -> None:
    """A single 300 MB line: the bundle keeps its head and tail, redacted at both ends, and the
    collect process stays far below the line's size in memory."""
    host = FakeHost(tmp_path / "host").install(())
    log = tmp_path / "one-line.log"
    with log.open("wb") as out:  # written in pieces: the test process stays small too
        out.write(f"start HF_TOKEN={HF_TOKEN} ".encode())
        for _ in range(300):
            out.write(b"word " * (1 << 18))
        out.write(f" end password={LOG_PASSWORD}".encode())
    # The peak is read in the child (VmHWM: since its exec, unlike ru_maxrss which a child
    # forked from this test process inherits).
    code = (
        "import re, sys; from pathlib import Path; from vllm_triage.collect import "
        "CollectOptions, collect; collect(CollectOptions(logs=(Path(sys.argv[1]),), "
        "host_root=Path(sys.argv[2]), timeout=5, case=Path(sys.argv[3]))); "
        "print(re.search(r'VmHWM:\\s*([0-9]+) kB', open('/proc/self/status').read()).group(1))"
    )
    case = tmp_path / "t"
    done = subprocess.run(
        [sys.executable, "-c", code, str(log), str(host.root), str(case)],
        env=dict(os.environ, PATH=str(host.bin)),
        capture_output=True,
        text=True,
        check=True,
    )
    peak_mb = int(done.stdout.split()[-1]) / 1024
    assert peak_mb < 200, f"peak RSS {peak_mb:.0f} MB for a {log.stat().st_size >> 20} MiB line"
    (bundle,) = [p for p in (case / "bundles").iterdir() if p.is_dir()]
    written = (bundle / "logs" / "given-1-one-line.log").read_bytes()
    assert written.startswith(b"start HF_TOKEN=[REDACTED:secret_env:")
    assert written.endswith(b" end password=[REDACTED:secret_env:" + written[-9:])
    assert HF_TOKEN.encode() not in written and LOG_PASSWORD.encode() not in written
    assert b"bytes left out here" in written and len(written) < DEFAULT_OUTPUT_CAP + 4096


@pytest.mark.slow
def test_a_huge_inspect_keeps_the_bundle_readable(k3_host: FakeHost, tmp_path: Path) -> None:
    """An inspect just under the JSON cap, all labels, env and command: facts.json is bounded
    (a reader refuses facts of more than a few MiB), the raw inspect is kept whole."""
    inspect = json.loads((SCENARIOS / "kimi-k3-docker-inspect.json").read_text())
    config = inspect[0]["Config"]
    config["Labels"] = {f"com.example.label.{i}": "v" * 900 for i in range(1500)}
    config["Env"] += [f"VLLM_SETTING_{i}={'e' * 300}" for i in range(3000)]
    config["Cmd"] += ["--flag"] * 50_000
    (tmp_path / "inspect.json").write_text(json.dumps(inspect))
    assert (tmp_path / "inspect.json").stat().st_size < 4 << 20
    k3_host.reply("docker inspect --type container vllm-k3", stdout_file=tmp_path / "inspect.json")
    result = collect(_k3_options(k3_host, tmp_path, case=tmp_path / "t"), runner=k3_host.runner())
    assert (result.folder / "facts.json").stat().st_size < 2 << 20
    with open_bundle(result.archive) as bundle:
        assert not bundle.problems and bundle.facts.container is not None
        assert len(bundle.facts.container.image_labels) <= 512
        assert bundle.facts.container.env["NCCL_DEBUG"] == "INFO"


@pytest.mark.slow
def test_a_host_root_without_name_or_kernel_is_not_this_machine(
    k3_host: FakeHost, tmp_path: Path
) -> None:
    """Under --host-root the node is not the machine running the tool (a debug pod): a missing
    /etc/hostname or kernel release is not recorded (a note says why), never this machine's."""
    for name in ("etc/hostname", "proc/sys/kernel/osrelease"):
        (k3_host.root / name).unlink(missing_ok=True)
    options = _k3_options(k3_host, tmp_path, case=tmp_path / "triage")
    result = collect(options, runner=k3_host.runner())
    with open_bundle(result.folder) as bundle:
        assert bundle.facts.host is not None
        assert bundle.facts.host.node_name is None and bundle.facts.host.kernel is None
    (host_probe,) = [p for p in result.manifest.probes if p.name == "host"]
    assert any("/etc/hostname" in note for note in host_probe.notes)
