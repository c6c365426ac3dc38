"""The probes' parsers over real outputs (tests/data/collect/samples and the H200 capture)."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import pytest

from vllm_triage.bundle.models import ModelFilesFacts, Mount
from vllm_triage.collect.probes.communication import nccl_from_log, parse_ibv_devinfo
from vllm_triage.collect.probes.container import parse_container_inspect
from vllm_triage.collect.probes.gpu import (
    parse_kernel_module,
    parse_nvidia_smi_xml,
    topology_has_nvlink,
)
from vllm_triage.collect.probes.host import nvidia_modules, parse_os_release
from vllm_triage.collect.probes.kubernetes import parse_pod
from vllm_triage.collect.probes.model_files import (
    check_model_folder,
    looks_like_hub_id,
    map_to_host,
)
from vllm_triage.collect.probes.vllm import version_from_log
from vllm_triage.errors import InputError
from vllm_triage.launch import parse_launch_command

COLLECT = Path(__file__).parent / "data" / "collect"
SAMPLES = COLLECT / "samples"
H200 = COLLECT / "h200-580.159.04"
XMLS = [*sorted((SAMPLES / "nvidia-smi-xml").glob("*.xml")), H200 / "nvidia-smi-q-x.xml"]


@pytest.mark.parametrize("path", XMLS, ids=lambda p: p.name)
def test_nvidia_smi_xml_summary_of_every_real_capture(path: Path, kb) -> None:
    text = path.read_text()
    facts = parse_nvidia_smi_xml(text, kb)
    driver = re.search(r"<driver_version>([^<]+)<", text).group(1)
    cuda = re.search(r"<cuda_version>([^<]+)<", text).group(1)
    assert facts.driver_version == driver
    assert facts.driver_branch == "r" + driver.split(".")[0]
    assert facts.cuda_ceiling == cuda
    assert len(facts.gpus) == text.count("<gpu id=")
    for gpu in facts.gpus:
        assert gpu.name and gpu.memory_total_mib and gpu.memory_total_mib > 1000
        assert gpu.compute_capability is not None, f"{gpu.name} missing from gpus.csv"
    dumped = facts.model_dump_json()
    for uuid in re.findall(r"<uuid>([^<]+)</uuid>", text):
        assert uuid not in dumped, "GPU UUIDs are hashed, never copied"


def test_h200_capture_details(kb) -> None:
    facts = parse_nvidia_smi_xml((H200 / "nvidia-smi-q-x.xml").read_text(), kb)
    (gpu,) = facts.gpus
    assert (gpu.name, gpu.compute_capability, gpu.memory_total_mib) == (
        "NVIDIA H200",
        "9.0",
        143771,
    )
    assert (gpu.mig_mode, gpu.persistence_mode, gpu.ecc_uncorrected_volatile) == (
        "Disabled", "Enabled", 0,
    )  # fmt: skip
    assert gpu.remapped_rows_pending is False and gpu.bus_id == "00000000:00:06.0"
    nvml = json.loads((H200 / "nvml.json").read_text())
    assert nvml["driver"] == facts.driver_version and nvml["gpus"][0]["cc"] == [9, 0]


def test_mig_capture_reports_mig_enabled(kb) -> None:
    facts = parse_nvidia_smi_xml(
        (SAMPLES / "nvidia-smi-xml" / "a100-sxm4-80gb-x4-mig-535.54.03.xml").read_text(), kb
    )
    assert facts.gpus[0].mig_mode == "Enabled"


@pytest.mark.parametrize("bad", ["", "not xml", "<other/>", "<nvidia_smi_log><gpu>"])
def test_broken_xml_is_a_probe_failure(bad: str, kb) -> None:
    from vllm_triage.collect.probes.base import ProbeFailed

    with pytest.raises(ProbeFailed):
        parse_nvidia_smi_xml(bad, kb)


@pytest.mark.parametrize(
    ("name", "version", "kind"),
    [
        ("open-565.57.01-ubuntu24.04.version.txt", "565.57.01", "open"),
        ("open-525.60.11-arch.version.txt", "525.60.11", "open"),
        ("mismatch-kmod-580.173.02-vs-nvml-580.178.version.txt", "580.173.02", "proprietary"),
        ("mismatch-kmod-550.90.07-vs-pkg-550.107.02.version-line.txt", "550.90.07", "proprietary"),
        ("jetson-orin-aarch64-35.3.1.version.txt", "35.3.1", "open"),
    ],
)
def test_kernel_module_version(name: str, version: str, kind: str) -> None:
    text = (SAMPLES / "proc-driver-version" / name).read_text()
    assert parse_kernel_module(text) == (version, kind)


def test_kernel_module_of_the_h200_capture() -> None:
    text = (H200 / "proc-driver-nvidia-version.txt").read_text()
    assert parse_kernel_module(text) == ("580.159.04", "open")
    assert parse_kernel_module("no driver here") is None


def test_topology_nvlink() -> None:
    text = SAMPLES / "nvidia-smi-text"
    assert topology_has_nvlink((text / "topo-m-a100-x8-nv12-17nic.txt").read_text())
    assert not topology_has_nvlink((text / "topo-m-a10-x4-sys-2nic.txt").read_text())
    assert not topology_has_nvlink((H200 / "nvidia-smi-topo-m.txt").read_text())


def test_ibv_devinfo_ports() -> None:
    roce = parse_ibv_devinfo(
        (SAMPLES / "rdma" / "ibv_devinfo-mlx5_2-roce-cx7-h100-host.one-hca.txt").read_text()
    )
    assert [(p.device, p.port, p.link_layer) for p in roce] == [("mlx5_2", 1, "Ethernet")]
    assert roce[0].state == "PORT_ACTIVE"
    two = parse_ibv_devinfo((SAMPLES / "rdma" / "ibv_devinfo-mlx4-connectx3-x2.txt").read_text())
    assert len(two) >= 2 and all(p.device.startswith("mlx4") for p in two)
    assert parse_ibv_devinfo("No IB devices found\n") == []


def test_os_release_and_modules() -> None:
    assert parse_os_release((H200 / "os-release.txt").read_text()) == "Ubuntu 24.04.3 LTS"
    assert nvidia_modules((H200 / "proc-modules.txt").read_text()) == ["nvidia", "nvidia_uvm"]


@pytest.mark.parametrize(
    ("name", "driver", "ceiling", "product"),
    [
        ("node-labels-rke2-a30-535.274.02.gpu-worker-02.json", "535.274.02", "12.2", "NVIDIA-A30"),
        ("node-labels-aws-g4dn-t4-545.23.08.nvidia-only.json", "545.23.08", "12.3", "Tesla-T4"),
    ],
)
def test_gfd_labels_new_and_deprecated(name: str, driver: str, ceiling: str, product: str) -> None:
    labels = json.loads((SAMPLES / "k8s" / name).read_text())
    pod = {"kind": "Pod", "metadata": {"name": "p", "namespace": "ml"}, "spec": {"nodeName": "n"}}
    facts = parse_pod(pod, None, {"metadata": {"labels": labels}})
    assert (facts.gfd_driver_version, facts.gfd_cuda_ceiling) == (driver, ceiling)
    assert facts.gpu_product is not None and facts.gpu_product.startswith(product)
    assert all(k.startswith(("nvidia.com/", "feature.node")) for k in facts.node_gpu_labels)


def test_container_inspect_fields() -> None:
    document = {
        "Id": "abc",
        "Name": "/vllm",
        "Image": "sha256:1",
        "RestartCount": 3,
        "State": {"Status": "exited", "ExitCode": 137, "OOMKilled": True},
        "Config": {
            "Image": "vllm/vllm-openai:v0.11.0",
            "User": "1000:1000",
            "Env": ["A=1", "B=x=y"],
            "Entrypoint": ["vllm", "serve"],
            "Cmd": ["m", "--tensor-parallel-size", "2"],
        },
        "HostConfig": {
            "ShmSize": 67108864,
            "DeviceRequests": [{"Driver": "", "Capabilities": [["gpu"]]}],
        },
        "Mounts": [{"Type": "bind", "Source": "/data/m", "Destination": "/models", "RW": False}],
    }
    facts = parse_container_inspect(document, "docker")
    assert facts.name == "vllm" and facts.exit_code == 137 and facts.oom_killed
    assert facts.env == {"A": "1", "B": "x=y"} and facts.gpu_requested
    assert facts.command == ["vllm", "serve", "m", "--tensor-parallel-size", "2"]
    assert facts.mounts == [
        Mount(source="/data/m", destination="/models", read_write=False, type="bind")
    ]


def test_launch_command_vllm_serve(kb) -> None:
    text = """HF_TOKEN=hf_x VLLM_ALL2ALL_BACKEND=deepep_v2 vllm serve moonshotai/Kimi-K3 \\
      -tp 8 --max-model-len 128k --gpu-memory-utilization=0.92 --enable-prefix-caching \\
      --enable-auto-tool-choice --tool-call-parser kimi_k3 --trust-remote-code --enforce-eager \\
      --port 8000"""
    launch = parse_launch_command(text, kb)
    assert launch.model == "moonshotai/Kimi-K3"
    assert launch.tensor_parallel_size == 8 and launch.max_model_len == 128000
    assert launch.gpu_memory_utilization == 0.92
    assert (
        launch.enable_prefix_caching and launch.enable_auto_tool_choice and launch.trust_remote_code
    )
    assert launch.tool_call_parser == "kimi_k3" and launch.all2all_backend == "deepep_v2"
    assert launch.other == {"--enforce-eager": "true", "--port": "8000"}
    assert launch.env["HF_TOKEN"] == "hf_x"


def test_launch_command_forms(kb) -> None:
    module = parse_launch_command(
        "python3 -m vllm.entrypoints.openai.api_server --model /models/llama --no-enable-prefix-caching",
        kb,
    )
    assert module.model == "/models/llama" and module.enable_prefix_caching is False
    docker = parse_launch_command(
        "docker run --gpus all -e NCCL_DEBUG=INFO --env=UCX_TLS=rc -v /d:/models "
        "vllm/vllm-openai:v0.11.0 --model /models/x --all2all-backend deepep_v2",
        kb,
    )
    assert docker.model == "/models/x" and docker.all2all_backend == "deepep_v2"
    assert docker.env == {"NCCL_DEBUG": "INFO", "UCX_TLS": "rc"}
    argv = parse_launch_command(["vllm", "serve", "m", "--max-model-len", "4096"], kb)
    assert argv.max_model_len == 4096


@pytest.mark.parametrize(
    "text",
    ["python3 train.py --model x", "vllm serve m --max-model-len lots", "vllm serve 'unclosed"],
)
def test_launch_command_errors_are_one_line(text: str, kb) -> None:
    with pytest.raises(InputError):
        parse_launch_command(text, kb)


def test_versions_from_logs() -> None:
    assert version_from_log("INFO 07-01 api_server.py:1 vLLM API server version 0.11.0") == "0.11.0"
    assert nccl_from_log("NCCL INFO NCCL version 2.21.5+cuda12.4") == "2.21.5"


def test_hub_ids_and_mount_mapping() -> None:
    assert looks_like_hub_id("moonshotai/Kimi-K3")
    assert not looks_like_hub_id("/models/Kimi-K3") and not looks_like_hub_id("a/b/c")
    mounts = [
        Mount(source="/data", destination="/models", read_write=True),
        Mount(source="/fast/k3", destination="/models/k3", read_write=False),
    ]
    assert map_to_host("/models/k3/config.json", mounts) == ("/fast/k3/config.json", mounts[1])
    assert map_to_host("/models/other", mounts) == ("/data/other", mounts[0])
    assert map_to_host("/opt/m", mounts) == ("/opt/m", None)


def _model_folder(root: Path, shards: int, listed: int) -> Path:
    folder = root / "model"
    folder.mkdir()
    (folder / "config.json").write_text("{}")
    weight_map = {f"w{i}": f"model-{i:05d}-of-{listed:05d}.safetensors" for i in range(listed)}
    (folder / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    for i in range(shards):
        (folder / f"model-{i:05d}-of-{listed:05d}.safetensors").write_bytes(b"x" * 10)
    return folder


def test_model_folder_consistent(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path, 3, 3)
    facts = check_model_folder(ModelFilesFacts(model="m", kind="local"), folder, None)
    assert facts.exists and facts.readable and facts.config_json and facts.index_consistent
    assert facts.shard_count == 3 and not facts.problems


def test_model_folder_missing_shards(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path, 2, 4)
    facts = check_model_folder(ModelFilesFacts(model="m", kind="local"), folder, None)
    assert facts.index_consistent is False and len(facts.missing_shards) == 2


def test_model_folder_unreadable_for_the_container_user(tmp_path: Path) -> None:
    folder = _model_folder(tmp_path, 1, 1)
    for path in [*folder.iterdir(), folder]:
        path.chmod(0o700)
    me = (os.getuid(), os.getgid())
    other = (me[0] + 1000, me[1] + 1000)
    as_other = check_model_folder(ModelFilesFacts(model="m", kind="local"), folder, other)
    assert as_other.readable is False and any("not readable" in p for p in as_other.problems)
    as_owner = check_model_folder(ModelFilesFacts(model="m", kind="local"), folder, me)
    assert as_owner.readable is True
    as_root = check_model_folder(ModelFilesFacts(model="m", kind="local"), folder, (0, 0))
    assert as_root.readable is True


def test_model_folder_absent(tmp_path: Path) -> None:
    facts = check_model_folder(ModelFilesFacts(model="m", kind="local"), tmp_path / "nope", None)
    assert facts.exists is False and "does not exist" in facts.problems[0]


REAL = COLLECT / "real"


@pytest.mark.parametrize(
    ("name", "engine", "container", "image"),
    [
        ("docker-inspect-container-running-rhel-docker.json", "docker", "quizzical_yalow", "acf3e09a39c9"),
        ("podman-inspect-container-running-rhel.json", "podman", "eager_bell", "registry.access.redhat.com/rhel:latest"),
    ],
)  # fmt: skip
def test_real_inspect_outputs(name: str, engine: str, container: str, image: str) -> None:
    document = json.loads((REAL / name).read_text())
    facts = parse_container_inspect(document[0], engine)
    assert (facts.name, facts.image, facts.status, facts.exit_code) == (
        container,
        image,
        "running",
        0,
    )
    assert facts.command == ["sleep", "1000000"] and facts.gpu_requested is False
    assert facts.env and all("=" not in key for key in facts.env)


def test_real_docker_version_and_cuda_less_image_config() -> None:
    from vllm_triage.collect.probes.container import _apply_image_config, _client_version

    assert (
        _client_version((REAL / "docker-version-json-19.03.8-desktop-mac.json").read_text())
        == "19.03.8"
    )
    facts = parse_container_inspect({}, "podman")
    notes = _apply_image_config(
        facts, json.loads((REAL / "podman-image-inspect-fedora-34.json").read_text()), "fedora"
    )
    assert facts.image_cuda is None and "neither CUDA_VERSION nor NVIDIA_REQUIRE_CUDA" in notes[0]
