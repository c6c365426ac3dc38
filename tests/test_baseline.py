"""baseline capture and compare on a node replayed from real outputs (tests/data/baseline/README.md):
the r575 -> r580 driver change reported as expected (exit 0), a lost RDMA device as a regression
(exit 1), the other regressions the comparison must catch, the short request against the real
vLLM server, one-line errors for bad input, and no secret in what a baseline writes."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cli import Result, run_cli
from deadlines import ends_in_time
from fakehost import DECOYS, FakeHost
from realserver import RealServer

from vllm_triage.baseline import CaptureOptions, CompareOptions, baseline_capture, baseline_compare
from vllm_triage.baseline import capture as capture_module
from vllm_triage.baseline.compare import ENDPOINT_SLOWER_FACTOR, ENDPOINT_SLOWER_MIN_S
from vllm_triage.baseline.endpoint import short_request
from vllm_triage.baseline.models import Baseline, BaselineComparison
from vllm_triage.baseline.parsers import (
    devices_from_ports,
    nccl_transport,
    nccl_transport_from_log,
    parse_ibstat,
)
from vllm_triage.case import BASELINE_FILE
from vllm_triage.collect.probes.communication import parse_ibv_devinfo
from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.versions import DriverVersion

ROOT = Path(__file__).resolve().parent.parent
DATA = Path(__file__).parent / "data"
REPLAY = DATA / "baseline"
SMI_XML = REPLAY / "nvidia-smi-q-x.b200-x8-580.105.08.xml"
IBSTAT = REPLAY / "gpud-ibstat-h100-all-active.txt"
IBSTAT_DROPPED = REPLAY / "gpud-ibstat-h100-all-active.mlx5_3-dropped.txt"
NCCL_LOG = REPLAY / "nccl-2.21.5-vllm-5484.log"
K3_INSPECT = DATA / "collect" / "scenarios" / "kimi-k3-docker-inspect.json"
SAMPLES = DATA / "collect" / "samples"

JOB_KEY = "sk-BaselineJobKey0123456789abcdefghijKLMN"
ENDPOINT_KEY = "sk-BaselineEndpointKey9876543210zyxwvuTS"
# Secrets of the Kimi K3 container's environment and command (kimi-k3-docker-inspect.json).
INSPECT_SECRETS = (
    "hf_TriageTestTokenAbCdEfGhIjKlMnOpQrStUv",
    "sk-proj-K3triageTESTkey0123456789abcdefABCDEF0123456789",
    "8f2a9c4d1e7b3f6a0c5d8e2b4f7a1c9d3e6b0f25",
    "correct horse battery staple",
    "AKIAIOSFODNN7TRIAGE1",
    "wJalrXUtnFEMI/K7MDENG/bPxRfiCYTRIAGEKEY1",
    "Pr0xyPa55w0rd",
)
PROGRAMS = ("nvidia-smi", "docker", "nvidia-ctk", "nvidia-container-cli", "ibstat", "ip")


def _smi_xml(target: Path, driver: str, job: bool) -> Path:
    """The real 8x B200 capture (580.105.08, CUDA 13.0), its driver fields set to `driver` (for
    r575 the 575.57.08 / CUDA 12.9 of the real 8x B200 r575 table capture); `job` adds a process
    whose command line carries an API key."""
    text = SMI_XML.read_text().replace("580.105.08", driver)
    if driver == "575.57.08":
        text = text.replace(
            "<cuda_version>13.0</cuda_version>", "<cuda_version>12.9</cuda_version>"
        )
    if job:
        text = text.replace(
            "<processes>",
            "<processes><process_info><gpu_instance_id>N/A</gpu_instance_id>"
            "<compute_instance_id>N/A</compute_instance_id><pid>48211</pid><type>C</type>"
            f"<process_name>python3 -m vllm.entrypoints.openai.api_server --api-key {JOB_KEY}"
            "</process_name><used_memory>171520 MiB</used_memory></process_info>",
            1,
        )
    target.write_text(text)
    return target


def _node(base: Path, driver: str, ibstat: Path = IBSTAT, job: bool = False) -> FakeHost:
    """The 8x B200 node on `driver`, every command the baseline probes run answered with a
    recorded real output (tests/data/baseline/README.md)."""
    host = FakeHost(base).install(PROGRAMS + DECOYS)
    module = (REPLAY / "open-565.57.01-ubuntu24.04.version.txt").read_text()
    host.file("/proc/driver/nvidia/version", module.replace("565.57.01", driver))
    host.file("/etc/os-release", REPLAY / "os-release.ubuntu-24.04.3.txt")
    host.file("/etc/hostname", "gpu-node-17\n")
    host.file("/proc/modules", REPLAY / "proc-modules.h200.txt")
    host.file("/proc/sys/kernel/osrelease", REPLAY / "proc-sys-kernel-osrelease.txt")
    host.reply("nvidia-smi -q -x", stdout_file=_smi_xml(base / "smi.xml", driver, job))
    host.reply(
        "docker version --format {{json .}}",
        stdout_file=REPLAY / "docker-version-json-19.03.8-desktop-mac.json",
    )
    host.reply(
        "docker info --format {{json .}}", stdout_file=REPLAY / "docker-info.constructed.json"
    )
    host.reply("nvidia-ctk --version", stdout_file=REPLAY / "nvidia-ctk-version-1.12.0.txt")
    host.reply(
        "nvidia-container-cli --version", stdout_file=REPLAY / "nvidia-container-cli-V-1.0.7.txt"
    )
    host.reply("ibstat", stdout_file=ibstat)
    host.reply("ip -json address show", stdout_file=REPLAY / "ip-address.constructed.json")
    host.reply("docker inspect --type container vllm-k3", stdout_file=K3_INSPECT)
    host.reply("docker logs --timestamps vllm-k3", stdout_file=NCCL_LOG)
    return host


def _capture(host: FakeHost, case: Path, label: str, kb: KnowledgeBase, **options: Any) -> Baseline:
    values: dict[str, Any] = {"host_root": host.root, "logs": (NCCL_LOG,), "timeout": 10.0}
    values.update(options)
    return baseline_capture(
        CaptureOptions(label=label, case=case, **values), runner=host.runner(), kb=kb
    )


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory, kb: KnowledgeBase) -> Path:
    """One case with three captures of the node: before (r575, a job running), after (r580),
    and after with the RDMA device mlx5_3 gone."""
    base = tmp_path_factory.mktemp("baseline")
    folder = base / "triage"
    _capture(_node(base / "r575", "575.57.08", job=True), folder, "before", kb)
    _capture(_node(base / "r580", "580.105.08"), folder, "after", kb)
    dropped = _node(base / "r580-dropped", "580.105.08", ibstat=IBSTAT_DROPPED)
    _capture(dropped, folder, "after-rdma-lost", kb)
    return folder


def _saved(case: Path, label: str) -> Baseline:
    return Baseline.model_validate_json((case / "baselines" / label / BASELINE_FILE).read_text())


def _compare(case: Path, *args: str) -> tuple[Result, dict[str, Any]]:
    result = run_cli("baseline", "compare", *args, "--case", str(case), "--format", "json")
    assert result.exit_code in (0, 1), result.stderr
    return result, json.loads(result.stdout)


def _items(document: dict[str, Any], kind: str) -> dict[str, dict[str, Any]]:
    return {f"{i['check']}:{i['subject'] or ''}": i for i in document["items"] if i["kind"] == kind}


def _one_line_error(result: Result, *words: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error: "), result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    assert "Traceback" not in result.stderr + result.stdout
    return lines[0]


# --- capture ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_capture_records_what_a_driver_change_can_disturb(case: Path) -> None:
    before = _saved(case, "before")
    assert before.schema_version == 1 and before.tool_version and before.created_at
    assert [f.name for f in before.made_from] == [NCCL_LOG.name]
    gpu = before.gpu
    assert gpu is not None and gpu.driver_version == "575.57.08" and gpu.cuda_ceiling == "12.9"
    assert gpu.kernel_module_version == "575.57.08" and gpu.library_mismatch is False
    assert len(gpu.gpus) == 8 and {g.name for g in gpu.gpus} == {"NVIDIA B200"}
    assert {g.memory_total_mib for g in gpu.gpus} == {183359}
    assert all(g.ecc_aggregate_uncorrectable == 0 for g in gpu.gpus)
    [job] = gpu.processes
    assert job.pid == 48211 and job.used_memory_mib == 171520 and job.bus_id == "00000000:8F:00.0"
    assert JOB_KEY not in job.name and "[REDACTED:" in job.name
    assert before.host and before.host.kernel == "6.18.44-fc-v657-gpu"
    assert before.host.node_name == "gpu-node-17" and before.node == "gpu-node-17"
    runtime = before.container
    assert runtime and runtime.engine == "docker" and runtime.engine_version == "19.03.8"
    assert runtime.toolkit_version == "1.12.0" and runtime.container_cli_version == "1.0.7"
    assert runtime.runtimes == ["nvidia", "runc"] and runtime.default_runtime == "runc"
    comm = before.communication
    assert (
        comm
        and comm.nccl_version == "2.21.5"
        and comm.nccl_version_source == f"log {NCCL_LOG.name}"
    )
    assert comm.rdma_sources == ["ibstat"] and len(comm.rdma_devices) == 12
    assert {d.name for d in comm.rdma_devices} == {f"mlx5_{n}" for n in range(12)}
    assert all(
        p.state == "Active" and p.link_layer == "Ethernet"
        for d in comm.rdma_devices
        for p in d.ports
    )
    assert comm.nccl_transport == "roce" and comm.nccl_transport_source == "settings and RDMA ports"
    assert [(i.name, i.state, i.mtu) for i in comm.interfaces] == [
        ("lo", "UNKNOWN", 65536),
        ("eth0", "UP", 9000),
    ]
    states = {p.name: p.status for p in before.probes}
    assert states == {"gpu": "ok", "host": "ok", "container": "ok", "communication": "ok"}
    raw = case / "baselines" / "before" / "raw"
    for entry in before.files:
        assert (raw / entry.path).is_file()
    assert {"gpu/nvidia-smi-q.xml", "communication/ibstat.txt"} <= {f.path for f in before.files}
    assert JOB_KEY.encode() not in (raw / "gpu" / "nvidia-smi-q.xml").read_bytes()
    assert before.endpoint is None


@pytest.mark.slow
def test_capture_text_output_in_each_language(tmp_path: Path) -> None:
    host = _node(tmp_path / "host", "580.105.08")
    outputs = {}
    for language in ("en", "ko", "ja"):
        # The CLI runs the real command runner; PATH points it at the replayed node.
        result = run_cli(
            "baseline", "capture", "--label", f"l-{language}", "--case", str(tmp_path / "t"),
            "--host-root", str(host.root), "--log", str(NCCL_LOG), "--lang", language,
            env={"PATH": str(host.bin)},
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        outputs[language] = result.stdout
    assert "Baseline l-en" in outputs["en"] and "580.105.08" in outputs["en"]
    assert "기준선 l-ko" in outputs["ko"] and "580.105.08" in outputs["ko"]
    assert "基線" in outputs["ja"] and "580.105.08" in outputs["ja"]


# --- compare ------------------------------------------------------------------------------------


def test_driver_change_r575_to_r580_is_expected_exit_0(case: Path) -> None:
    result, document = _compare(case, "before", "after", "--expect-driver", "580.105.08")
    assert result.exit_code == 0
    comparison = BaselineComparison.model_validate(document)
    assert comparison.verdict == "no_regression" and comparison.regressions == 0
    expected = _items(document, "expected")
    assert expected["driver:"]["before"] == "575.57.08"
    assert expected["driver:"]["after"] == "580.105.08"
    assert (expected["cuda_ceiling:"]["before"], expected["cuda_ceiling:"]["after"]) == (
        "12.9",
        "13.0",
    )
    same = _items(document, "same")
    for check in (
        "kernel:", "gpu_count:", "gpu_memory:", "ecc:", "container_engine:", "toolkit:",
        "container_cli:", "nccl_version:", "nccl_transport:", "rdma_device:", "interface:",
    ):  # fmt: skip
        assert check in same, check
    assert same["rdma_device:"]["after"] == "12" and same["nccl_version:"]["after"] == "2.21.5"
    changed = _items(document, "changed")
    assert changed["gpu_jobs:"]["before"].startswith("1 (python3")
    assert changed["gpu_jobs:"]["after"] == "0"
    assert [f.name for f in comparison.made_from] == ["before/baseline.json", "after/baseline.json"]
    saved = json.loads((case / "baseline-comparison.json").read_text())
    assert saved["verdict"] == "no_regression" and (case / "baseline-comparison.md").is_file()


def test_a_lost_rdma_device_is_a_regression_exit_1(case: Path) -> None:
    result, document = _compare(case, "before", "after-rdma-lost", "--expect-driver", "r580")
    assert result.exit_code == 1
    assert document["verdict"] == "regression" and document["regressions"] == 1
    [lost] = _items(document, "regression").values()
    assert (lost["check"], lost["subject"]) == ("rdma_device", "mlx5_3")
    assert lost["summary"] == "The RDMA device mlx5_3 is gone."
    assert "driver:" in _items(document, "expected")  # the driver change is still the expected one
    assert "rdma_device:" not in _items(document, "same")


@pytest.mark.parametrize(
    ("language", "words"),
    [
        (
            "en",
            ("regression", "The RDMA device mlx5_3 is gone.", "The driver moved up from 575.57.08"),
        ),
        ("ko", ("회귀", "mlx5_3", "575.57.08")),
        ("ja", ("回帰", "mlx5_3", "575.57.08")),
    ],
)
def test_compare_text_and_markdown_in_each_language(
    case: Path, language: str, words: tuple[str, ...]
) -> None:
    for output in ("text", "markdown"):
        result = run_cli(
            "baseline", "compare", "before", "after-rdma-lost", "--case", str(case),
            "--format", output, "--lang", language,
        )  # fmt: skip
        assert result.exit_code == 1, result.stderr
        for word in words:
            assert word in result.stdout, (output, word, result.stdout)
        if language != "en":
            assert "The RDMA device mlx5_3 is gone." not in result.stdout
    markdown = (case / "baseline-comparison.md").read_text()
    assert "mlx5_3" in markdown


def test_compare_takes_baseline_folders_as_well_as_labels(case: Path, tmp_path: Path) -> None:
    elsewhere = tmp_path / "copy-of-before"
    shutil.copytree(case / "baselines" / "before", elsewhere)
    result, document = _compare(case, str(elsewhere), "after")
    assert result.exit_code == 0 and document["before"]["label"] == "before"
    assert document["expect_driver"] is None


def test_a_driver_that_missed_its_target_is_a_regression(case: Path) -> None:
    result, document = _compare(case, "before", "after", "--expect-driver", "590.44.01")
    assert result.exit_code == 1
    driver = _items(document, "regression")["driver:590.44.01"]
    assert (driver["after"], driver["subject"]) == ("580.105.08", "590.44.01")


def _edited(case: Path, tmp_path: Path, edit: Callable[[Baseline], None]) -> Path:
    """A copy of the `after` baseline with one thing changed (as if the node had changed it)."""
    baseline = _saved(case, "after")
    edit(baseline)
    folder = tmp_path / "edited"
    folder.mkdir(parents=True)
    (folder / BASELINE_FILE).write_text(baseline.model_dump_json())
    return folder


def _kernel(b: Baseline) -> None:
    assert b.host is not None
    b.host.kernel = "6.18.50-fc-v700-gpu"


def _toolkit(b: Baseline) -> None:
    assert b.container is not None
    b.container.toolkit_version = "1.17.8"


def _runtime(b: Baseline) -> None:
    assert b.container is not None
    b.container.runtimes = ["runc"]


def _nccl(b: Baseline) -> None:
    assert b.communication is not None
    b.communication.nccl_version = "2.27.3"


def _gpu_lost(b: Baseline) -> None:
    assert b.gpu is not None
    b.gpu.gpus.pop()


def _memory(b: Baseline) -> None:
    assert b.gpu is not None
    b.gpu.gpus[2].memory_total_mib = 81559


def _ecc(b: Baseline) -> None:
    assert b.gpu is not None
    b.gpu.gpus[5].ecc_aggregate_uncorrectable = 3


def _interface(b: Baseline) -> None:
    assert b.communication is not None
    b.communication.interfaces = b.communication.interfaces[:1]


def _port_down(b: Baseline) -> None:
    assert b.communication is not None
    b.communication.rdma_devices[0].ports[0].state = "Down"


def _mismatch(b: Baseline) -> None:
    assert b.gpu is not None
    b.gpu.library_mismatch = True


@pytest.mark.parametrize(
    ("edit", "check", "subject"),
    [
        (_kernel, "kernel", None),
        (_toolkit, "toolkit", None),
        (_runtime, "nvidia_runtime", None),
        (_nccl, "nccl_version", None),
        (_gpu_lost, "gpu_count", None),
        (_memory, "gpu_memory", "00000000:96:00.0"),
        (_ecc, "ecc", "00000000:C5:00.0"),
        (_interface, "interface", "eth0"),
        (_port_down, "rdma_port", "mlx5_0:1"),
        (_mismatch, "library_mismatch", None),
    ],
)
def test_each_regression_is_caught(
    case: Path, tmp_path: Path, edit: Callable[[Baseline], None], check: str, subject: str | None
) -> None:
    folder = _edited(case, tmp_path, edit)
    comparison = baseline_compare(CompareOptions("before", str(folder), case, "r580"))
    regressions = [(i.check, i.subject) for i in comparison.items if i.kind == "regression"]
    assert regressions == [(check, subject)]
    assert comparison.verdict == "regression"


def _endpoint(seconds: float, ok: bool = True) -> Callable[[Baseline], None]:
    def edit(b: Baseline) -> None:
        from vllm_triage.baseline.models import EndpointCheck

        b.endpoint = EndpointCheck(
            url="http://127.0.0.1:8000", model="m", ok=ok, seconds=seconds,
            answer="red, green, blue" if ok else None, error=None if ok else "HTTP 500: boom",
        )  # fmt: skip

    return edit


@pytest.mark.parametrize(
    ("before_s", "after_s", "ok", "kind", "check"),
    [
        (0.8, 0.8 * ENDPOINT_SLOWER_FACTOR + 0.01, True, "regression", "endpoint_slower"),
        (0.05, 0.05 + ENDPOINT_SLOWER_MIN_S - 0.01, True, "same", "endpoint"),  # noise
        (0.8, 1.2, True, "same", "endpoint"),
        (0.8, 0.9, False, "regression", "endpoint"),
    ],
)
def test_the_short_request_failing_or_much_slower_is_a_regression(
    case: Path,
    tmp_path: Path,
    before_s: float,
    after_s: float,
    ok: bool,
    kind: str,
    check: str,
) -> None:
    before = _edited(case, tmp_path / "a", _endpoint(before_s))
    after = _edited(case, tmp_path / "b", _endpoint(after_s, ok))
    comparison = baseline_compare(CompareOptions(str(before), str(after), case, "r580"))
    found = [(i.check, i.kind) for i in comparison.items if i.check.startswith("endpoint")]
    assert found == [(check, kind)]


# --- the short request against a real vLLM server ----------------------------------------------


def test_endpoint_records_time_and_answer_from_a_real_server(
    real_server: RealServer, tmp_path: Path, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BASELINE_TEST_KEY", ENDPOINT_KEY)
    host = _node(tmp_path / "host", "580.105.08")
    case = tmp_path / "t"
    baseline = _capture(
        host, case, "with-model", kb, endpoint=real_server.url, api_key_env="BASELINE_TEST_KEY"
    )
    check = baseline.endpoint
    assert check is not None and check.ok, check
    assert check.model == real_server.model and check.status_code == 200
    assert check.seconds is not None and 0 < check.seconds < 60
    assert check.answer and check.answer.strip() and check.completion_tokens
    assert check.finish_reason in ("stop", "length")
    saved = _saved(case, "with-model")
    assert saved.endpoint == check
    assert ENDPOINT_KEY.encode() not in _every_byte(case)


def test_an_unreachable_endpoint_is_recorded_not_raised(tmp_path: Path, kb: KnowledgeBase) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    host = _node(tmp_path / "host", "580.105.08")
    baseline = _capture(
        host, tmp_path / "t", "down", kb, endpoint=f"http://user:pa55word-x@127.0.0.1:{port}",
        endpoint_timeout=5.0,
    )  # fmt: skip
    check = baseline.endpoint
    assert check is not None and not check.ok and check.error
    assert check.url == f"http://127.0.0.1:{port}" and "pa55word-x" not in check.model_dump_json()


def test_garbage_outputs_are_captured_and_compare_as_not_compared(
    case: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    """nvidia-smi and ip print binary garbage, ibstat undecodable bytes in a device name: the
    probes say so, baseline.json is still valid UTF-8 JSON, and the comparison says what it
    could not compare instead of calling it a regression."""
    host = _node(tmp_path / "host", "580.105.08")
    host.reply("nvidia-smi -q -x", behaviour="garbage")
    host.reply("ip -json address show", behaviour="garbage")
    ibstat = tmp_path / "ibstat.bin"
    ibstat.write_bytes(b"CA 'mlx5_\xff0'\n\tPort 1:\n\t\tState: Active\n\t\tLink layer: Ethernet\n")
    host.reply("ibstat", stdout_file=ibstat)
    folder = tmp_path / "t"
    baseline = _capture(host, folder, "garbage", kb)
    assert baseline.gpu is None and baseline.communication is not None
    assert [d.name for d in baseline.communication.rdma_devices] == ["mlx5_\ufffd0"]
    assert {p.name: p.status for p in baseline.probes}["gpu"] == "failed"
    text = (folder / "baselines" / "garbage" / BASELINE_FILE).read_bytes().decode("utf-8")
    assert json.loads(text)["label"] == "garbage"
    comparison = baseline_compare(
        CompareOptions(str(folder / "baselines" / "garbage"), "after", case)
    )
    kinds = {(i.check, i.kind) for i in comparison.items}
    assert {("driver", "not_compared"), ("gpu_count", "not_compared")} <= kinds
    assert ("rdma_device", "regression") in kinds  # the one device listed is not among mlx5_0..11


@pytest.mark.slow
def test_a_trickling_server_cannot_stretch_the_deadline() -> None:
    """Headers one byte at a time, each within any read timeout: the total deadline still ends
    the short request, and it is recorded as failed."""
    stop = threading.Event()
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(4)

    def trickle() -> None:
        while not stop.is_set():
            try:
                listener.settimeout(0.2)
                connection, _ = listener.accept()
            except OSError:
                continue
            with connection:
                for byte in b"HTTP/1.1 200 OK\r\nX-Slow: " + b"a" * 10_000:
                    if stop.is_set():
                        break
                    try:
                        connection.sendall(bytes([byte]))
                    except OSError:
                        break
                    time.sleep(0.05)

    server = threading.Thread(target=trickle, daemon=True)
    server.start()
    try:
        url = f"http://127.0.0.1:{listener.getsockname()[1]}"
        with ends_in_time(1.0, "a short request to a server that trickles for 500 s"):
            check = short_request(url, "m", None, deadline_s=1.0)
    finally:
        stop.set()
        server.join(5)
        listener.close()
    assert not check.ok and check.error == "no answer within 1 s"


# --- secrets ------------------------------------------------------------------------------------


def _every_byte(folder: Path) -> bytes:
    chunks = []
    for path in sorted(folder.rglob("*")):
        chunks.append(str(path.relative_to(folder)).encode())
        if path.is_file():
            chunks.append(path.read_bytes())
    return b"\n".join(chunks)


@pytest.mark.slow
def test_no_secret_from_the_environment_in_the_baseline_folder(
    tmp_path: Path, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The existing model's container carries tokens, keys and a proxy password in its env and
    command; a GPU job's command line an API key; the endpoint's key sits in the environment."""
    monkeypatch.setenv("BASELINE_TEST_KEY", ENDPOINT_KEY)
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    host = _node(tmp_path / "host", "575.57.08", job=True)
    case = tmp_path / "t"
    runner = host.runner()
    options = CaptureOptions(
        label="secrets", case=case, host_root=host.root, container="vllm-k3",
        endpoint=f"http://127.0.0.1:{port}", api_key_env="BASELINE_TEST_KEY", endpoint_timeout=5.0,
    )  # fmt: skip
    baseline = baseline_capture(options, runner=runner, kb=kb)
    assert runner.scratch is not None and not runner.scratch.exists()  # raw outputs removed
    assert ["docker", "inspect", "--type", "container", "vllm-k3"] in host.calls()
    assert (
        baseline.communication and baseline.communication.nccl_settings["NCCL_IB_HCA"] == "mlx5_2"
    )
    # NCCL_IB_HCA=mlx5_2 selects the MT4125 100 Gb/s RoCE port only: still RoCE.
    assert baseline.communication.nccl_transport == "roce"
    assert baseline.redaction and sum(baseline.redaction.values()) > 0
    everything = _every_byte(case)
    for secret in (*INSPECT_SECRETS, JOB_KEY, ENDPOINT_KEY):
        assert secret.encode() not in everything, secret
    assert (case / "baselines" / "secrets" / "raw" / "container" / "inspect.json").is_file()


@pytest.mark.slow
def test_an_interrupted_capture_leaves_no_folder(
    tmp_path: Path, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    def interrupted(*args: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(capture_module, "_endpoint", interrupted)
    host = _node(tmp_path / "host", "580.105.08")
    case = tmp_path / "t"
    with pytest.raises(KeyboardInterrupt):
        _capture(host, case, "again", kb, endpoint="http://127.0.0.1:9")
    assert not (case / "baselines" / "again").exists()
    monkeypatch.undo()
    assert _capture(host, case, "again", kb).label == "again"  # the label is free again


# --- bad input ----------------------------------------------------------------------------------


def test_unknown_label_is_one_line(case: Path) -> None:
    line = _one_line_error(
        run_cli("baseline", "compare", "before", "nope", "--case", str(case)), "'nope'"
    )
    assert "after, after-rdma-lost, before" in line


def test_label_already_captured_is_one_line_and_kept(case: Path) -> None:
    saved = (case / "baselines" / "before" / BASELINE_FILE).read_bytes()
    _one_line_error(
        run_cli("baseline", "capture", "--label", "before", "--case", str(case)),
        "already captured",
    )
    assert (case / "baselines" / "before" / BASELINE_FILE).read_bytes() == saved


def test_bad_label_and_bad_options_are_one_line(tmp_path: Path) -> None:
    case = str(tmp_path / "t")
    _one_line_error(run_cli("baseline", "capture", "--label", "../up", "--case", case), "label")
    _one_line_error(
        run_cli("baseline", "capture", "--label", "x", "--case", case, "--endpoint", "ftp://h"),
        "--endpoint",
    )
    _one_line_error(
        run_cli("baseline", "capture", "--label", "x", "--case", case, "--api-key-env", "NOPE_X"),
        "--endpoint",
    )
    _one_line_error(
        run_cli("baseline", "capture", "--label", "x", "--case", case, "--lang", "fr"), "'fr'"
    )
    assert not (tmp_path / "t").exists()


def _broken_copy(case: Path, tmp_path: Path, text: str) -> Path:
    folder = tmp_path / "broken"
    shutil.copytree(case / "baselines" / "after", folder)
    (folder / BASELINE_FILE).write_text(text)
    return folder


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ('{"label": "after", "schema_version": 1, "gpu": {"gpus": [', ("baseline.json",)),
        ('{"label": "after", "schema_version": 99}', ("schema_version 99", "newer")),
        ('{"schema_version": 1}', ("not a valid baseline.json", "label")),
        ("[1, 2]", ("not a vllm-triage artifact",)),
    ],
)
def test_corrupt_or_future_baseline_is_one_line(
    case: Path, tmp_path: Path, content: str, words: tuple[str, ...]
) -> None:
    folder = _broken_copy(case, tmp_path, content)
    before = sorted(p.name for p in case.iterdir())
    result = run_cli("baseline", "compare", "before", str(folder), "--case", str(case))
    _one_line_error(result, *words)
    assert sorted(p.name for p in case.iterdir()) == before
    with pytest.raises(InputError):
        baseline_compare(CompareOptions("before", str(folder), case))


def test_an_unfinished_capture_and_a_bad_target_are_one_line(case: Path, tmp_path: Path) -> None:
    folder = tmp_path / "unfinished"
    folder.mkdir()
    _one_line_error(
        run_cli("baseline", "compare", str(folder), "after", "--case", str(case)),
        "no baseline.json",
    )
    _one_line_error(
        run_cli(
            "baseline", "compare", "before", "after", "--case", str(case), "--expect-driver", "x9"
        ),
        "--expect-driver",
    )


# --- parsers on real outputs --------------------------------------------------------------------


def test_rdma_parsers_on_real_outputs() -> None:
    ibstat = parse_ibstat((SAMPLES / "rdma" / "gpud-ibstat-h100-some-down.txt").read_text())
    states = {d.name: d.ports[0].state for d in ibstat}
    assert len(ibstat) == 12 and sum(state == "Down" for state in states.values()) == 3
    layers = {p.link_layer for d in ibstat for p in d.ports}
    assert layers == {"InfiniBand", "Ethernet"}
    ports = parse_ibv_devinfo((SAMPLES / "rdma" / "ibv_devinfo-mlx4-connectx3-x2.txt").read_text())
    devices = devices_from_ports(ports)
    assert [d.name for d in devices] == ["mlx4_1", "mlx4_0"]
    assert [p.state for p in devices[0].ports] == ["PORT_ACTIVE", "PORT_DOWN"]
    assert nccl_transport({}, devices) == "infiniband"
    assert nccl_transport({"NCCL_IB_DISABLE": "1"}, devices) == "socket"
    assert nccl_transport({"NCCL_IB_HCA": "^mlx4"}, devices) == "socket"
    assert nccl_transport({}, []) is None


def test_nccl_transport_from_a_log() -> None:
    assert nccl_transport_from_log(NCCL_LOG.read_text()) is None  # the real log names no network
    lines = (
        "node:1:2 [0] NCCL INFO NET/IB : Using [0]mlx5_0:1/RoCE [1]mlx5_1:1/RoCE ; OOB eth0:10.0.0.7<0>\n"
        "node:1:2 [0] NCCL INFO Using network IB\n"
    )
    assert nccl_transport_from_log(lines) == "roce"
    assert nccl_transport_from_log("x NCCL INFO Using network Socket\n") == "socket"


def test_the_replay_data_is_what_its_readme_says() -> None:
    readme = (REPLAY / "README.md").read_text()
    for path in REPLAY.iterdir():
        if path.name != "README.md":
            assert path.name in readme, path.name
    full, dropped = IBSTAT.read_text(), IBSTAT_DROPPED.read_text()
    block = re.search(r"^CA 'mlx5_3'\n(?:\t.*\n)+", full, re.MULTILINE)
    assert block is not None and full.replace(block.group(0), "") == dropped
    assert os.path.getsize(SMI_XML) == os.path.getsize(
        SAMPLES / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
    )


# --- the driver judged against the case's plan (issue 20) ----------------------------------------


@pytest.fixture
def planned(tmp_path: Path, kb: KnowledgeBase) -> Path:
    """A case as the runbook makes it: the README's diagnosis, a plan (minimum and recommended
    target for the image's CUDA), a baseline before on r575 and three nodes after."""
    folder = tmp_path / "triage"
    log = ROOT / "examples" / "kimi-k3-r575" / "vllm-serve.log"
    diagnosed = run_cli(
        "diagnose", str(log), "--driver", "575.57.08", "--recipe", "kimi-k3", "--gpu",
        "NVIDIA B200", "--case", str(folder), "--format", "json",
    )  # fmt: skip
    assert diagnosed.exit_code == 0, diagnosed.stderr
    plan = run_cli(
        "plan", "--case", str(folder), "--maintenance-window", "--cluster-cannot-change",
        "--cannot-maintain-build", "--format", "json",
    )  # fmt: skip
    assert plan.exit_code == 0, plan.stderr
    _capture(_node(tmp_path / "r575", "575.57.08", job=True), folder, "before", kb)
    return folder


def _target(case: Path) -> dict[str, Any]:
    target: dict[str, Any] = json.loads((case / "plan.json").read_text())["plan"]["target"]
    return target


def test_a_downgrade_is_a_regression_without_any_target(case: Path, tmp_path: Path) -> None:
    """No plan, no --expect-driver: a driver lower than before regresses (it was "as planned")."""
    result, document = _compare(case, "after", "before")
    assert result.exit_code == 1 and document["driver_expectation"] is None
    (down,) = [i for i in document["items"] if i["check"] == "driver_downgrade"]
    assert down["kind"] == "regression" and (down["before"], down["after"]) == (
        "580.105.08", "575.57.08",
    )  # fmt: skip
    up = _items(_compare(case, "before", "after")[1], "expected")
    assert "driver_up:" in up and "as planned" not in up["driver_up:"]["summary"]


def test_the_plan_decides_the_driver_judgement(
    planned: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    target = _target(planned)
    floor, toolkit = target["min_driver"], target["toolkit_driver"]
    release = target["recommended_driver"]
    assert (floor, release) == ("580", "580.173.02")
    assert DriverVersion.parse(floor) <= DriverVersion.parse(toolkit) < DriverVersion.parse(release)
    # the floor met (the toolkit's own driver), the recommended target not: expected, said so
    _capture(_node(tmp_path / "at-minimum", toolkit), planned, "after", kb)
    result, document = _compare(planned, "before", "after")
    assert result.exit_code == 0, _items(document, "regression")
    assert document["driver_expectation"] == "plan"
    assert (document["min_driver"], document["toolkit_driver"]) == (floor, toolkit)
    assert document["recommended_driver"] == release
    below = _items(document, "expected")[f"driver_below_target:{release}"]
    assert "meets the minimum" in below["summary"] and release in below["summary"]
    # the recommended target itself: as planned
    _capture(_node(tmp_path / "at-target", release), planned, "after-2", kb)
    result, document = _compare(planned, "before", "after-2")
    assert result.exit_code == 0 and "driver:" in _items(document, "expected")
    # a driver below the floor the image needs: a regression, though it went up
    under = "575.64.05"
    assert DriverVersion.parse("575.57.08") < DriverVersion.parse(under)
    _capture(_node(tmp_path / "under", under), planned, "after-3", kb)
    result, document = _compare(planned, "before", "after-3")
    assert result.exit_code == 1
    assert f"driver_minimum:{floor}" in _items(document, "regression")
    # --expect-driver still overrides: the recommended target asked for, the minimum node misses
    result, document = _compare(planned, "before", "after", "--expect-driver", release)
    assert result.exit_code == 1 and document["driver_expectation"] == "flag"


def test_an_exploratory_pair_never_replaces_the_comparison_of_the_change(
    planned: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    release = _target(planned)["recommended_driver"]
    _capture(_node(tmp_path / "r580", release), planned, "after", kb)
    _capture(_node(tmp_path / "r580-again", release), planned, "after-ep", kb)
    assert _compare(planned, "before", "after")[0].exit_code == 0
    current = (planned / "baseline-comparison.json").read_bytes()
    result = run_cli("baseline", "compare", "after", "after-ep", "--case", str(planned))
    assert result.exit_code == 0, result.stderr
    assert "Kept in history only" in result.stderr and "before -> after" in result.stderr
    assert (planned / "baseline-comparison.json").read_bytes() == current
    (kept,) = (planned / "history").glob("baseline-comparison-after-after-ep-*.json")
    document = json.loads(kept.read_text())
    assert (document["before"]["label"], document["after"]["label"]) == ("after", "after-ep")
    # a pair from the node before the change is the runbook's: it replaces the current one
    assert _compare(planned, "before", "after-ep")[0].exit_code == 0
    assert json.loads((planned / "baseline-comparison.json").read_text())["after"]["label"] == (
        "after-ep"
    )
