"""preflight: the go / no-go before a start, on replayed hosts (fake nvidia-smi and
nvidia-container-cli on PATH that print real captures, tests/fakehost.py) and on given facts.

The issue's cases: the Kimi K3 image (CUDA 13.0) on a replayed r575 host is a no-go and an r580
host passes the driver check; forward compatibility is a go only for a data-center GPU on a
supported base branch (never r575); a K3 launch without --enable-prefix-caching is a no-go for the
aggregated profile and a go for pd-decode; each with a one-line reason. Then each other check, bad
input (one line, exit 2), and the JSON contract.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from pathlib import Path

import pytest
from cli import run_cli
from deadlines import ENDLESS_S, ends_in_time, wait_for
from fakehost import FakeHost

from vllm_triage.errors import InputError
from vllm_triage.preflight import PreflightOptions, PreflightResult, preflight
from vllm_triage.preflight.host import (
    MAX_OUTPUT_BYTES,
    parse_container_cli_info,
    parse_nvidia_smi_table,
    run_command,
)

DATA = Path(__file__).parent / "data"
SAMPLES = DATA / "collect" / "samples"
PREFLIGHT = DATA / "preflight"
K3_IMAGE = DATA / "image-configs" / "vllm-openai-cu130.inspect.json"  # CUDA 13.0.2, v0.27.1
K2 = DATA / "models" / "moonshotai__Kimi-K2-Instruct"
XML_B200_580 = SAMPLES / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
XML_A100_570 = SAMPLES / "nvidia-smi-xml" / "a100-sxm4-40gb-570.148.08.xml"
XML_RTX3060_570 = SAMPLES / "nvidia-smi-xml" / "rtx-3060-570.124.04.xml"
TABLE_B200_575 = PREFLIGHT / "b200-x8-575.57.08.nvidia-smi.txt"
CDI_575 = SAMPLES / "nvidia-container" / "cdi-nvidia-yaml-575.64.03-ctk-1.17.8.yaml"

K3_LAUNCH = "vllm serve moonshotai/Kimi-K3 --trust-remote-code -tp 8"
K3_AGGREGATED = (
    f"{K3_LAUNCH} --enable-prefix-caching --kv-cache-dtype fp8 --max-model-len 1048576 "
    "--no-enable-flashinfer-autotune"
)
# Host facts given, so that the checks under test decide alone: an r580 B200 node.
GIVEN = {"driver": "580.95.05", "gpu": "NVIDIA B200", "gpu_count": 8, "shm_size": "16g"}


@pytest.fixture(autouse=True)
def _no_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    """--image REF resolves through the tag here: no test reaches an engine or a registry."""
    monkeypatch.setenv("VLLM_TRIAGE_IMAGE_LOOKUP", "tag")


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> FakeHost:
    """A fake node: nvidia-smi on PATH (no reply until a test gives one: it exits 64), a host
    root with /dev/shm and eight GPU device nodes."""
    fake = FakeHost(tmp_path / "host").install(("nvidia-smi",))
    (fake.root / "dev" / "shm").mkdir(parents=True)
    for name in ("nvidiactl", *(f"nvidia{i}" for i in range(8))):
        (fake.root / "dev" / name).touch()
    monkeypatch.setenv("PATH", str(fake.bin))
    return fake


def _run(host: FakeHost | None = None, **options: object) -> PreflightResult:
    if host is not None:
        options.setdefault("host_root", host.root)
    options.setdefault("image_config", K3_IMAGE)
    return preflight(PreflightOptions(**options))  # type: ignore[arg-type]


def _check(result: PreflightResult, check_id: str):  # type: ignore[no-untyped-def]
    found = [c for c in result.checks if c.id == check_id]
    assert len(found) == 1, (check_id, [c.id for c in result.checks])
    return found[0]


def _one_line(text: str) -> None:
    assert text and "\n" not in text and "  " not in text, text


# --- the cases --------------------------------------------------------------------------


def test_k3_image_on_a_replayed_r575_host_is_no_go_with_one_line(host: FakeHost) -> None:
    """The real 8x B200 capture at 575.57.08 (plain table: `-q -x` has no reply here, so the
    table is the fallback), the real cu130 image config: CUDA 13.0.2 needs r580."""
    host.reply("nvidia-smi", stdout_file=TABLE_B200_575)
    result = _run(host, shm_size="16g")
    assert not result.go
    driver = _check(result, "driver")
    assert (driver.ok, driver.severity) == (False, "error")
    _one_line(driver.message)
    assert "575.57.08" in driver.message and "needs 580 or newer" in driver.message
    assert "not a supported base branch" in driver.message  # never forward compat on r575
    assert driver.fix and "r580" in driver.fix and "580.173.02" in driver.fix
    host_facts = result.host
    assert (host_facts.min_driver, host_facts.toolkit_driver, host_facts.recommended_driver) == (
        "580",
        "580.95.05",
        "580.173.02",
    )
    assert result.host.driver == "575.57.08" and result.host.gpu_count == 8
    assert result.host.driver_from == "nvidia-smi"
    assert ["nvidia-smi", "-q", "-x"] in host.calls() and ["nvidia-smi"] in host.calls()
    assert [c.id for c in result.failed] == ["driver"]

    shown = run_cli(
        "preflight", "--image-config", str(K3_IMAGE), "--host-root", str(host.root),
        "--shm-size", "16g", env={"PATH": str(host.bin)},
    )  # fmt: skip
    assert shown.exit_code == 1
    lines = shown.stdout.splitlines()
    assert lines[0].startswith("NO-GO")
    assert lines[1].startswith("FAIL driver: Driver 575.57.08 (r575)") and "-> Upgrade" in lines[1]
    assert sum(line.startswith("FAIL") for line in lines) == 1


def test_an_r580_host_passes_the_driver_check(host: FakeHost) -> None:
    host.reply("nvidia-smi -q -x", stdout_file=XML_B200_580)
    result = _run(host, shm_size="16g")
    driver = _check(result, "driver")
    assert driver.ok and "runs natively" in driver.message and "580.105.08" in driver.message
    assert result.go and result.host.gpu == "NVIDIA B200" and result.host.gpu_count == 8
    assert result.host.driver_from == "nvidia-smi -q -x"
    visible = _check(result, "gpus_visible")
    assert visible.ok and "8 GPU(s) visible" in visible.message
    assert ["nvidia-smi"] not in host.calls()  # the XML was enough


def test_forward_compat_is_go_only_for_a_datacenter_gpu_on_a_supported_branch(
    host: FakeHost,
) -> None:
    """A100 (data-center) on r570, a supported base for cuda-compat-13-0: go, with a warning that
    names the package. RTX 3060 on r570: no-go (forward compatibility fails there with 804)."""
    host.reply("nvidia-smi -q -x", stdout_file=XML_A100_570)
    result = _run(host, shm_size="16g")
    driver = _check(result, "driver")
    assert result.go and (driver.ok, driver.severity) == (False, "warning")
    assert driver.message.startswith("runs only through forward compatibility")
    assert driver.fix and "cuda-compat-13-0" in driver.fix
    _one_line(driver.message)

    host.reply("nvidia-smi -q -x", stdout_file=XML_RTX3060_570)
    result = _run(host, shm_size="16g")
    driver = _check(result, "driver")
    assert not result.go and (driver.ok, driver.severity) == (False, "error")
    assert "not a data-center GPU" in driver.message and "804" in driver.message

    # The same B200 as the go case of r580, on r575: never through forward compatibility.
    result = _run(driver="575.57.08", gpu="NVIDIA B200", gpu_count=8, shm_size="16g")
    assert not result.go and _check(result, "driver").severity == "error"
    # Given facts decide the same way as replayed ones: H100 on r570 goes through the package.
    result = _run(driver="570.148.08", gpu="NVIDIA H100 80GB HBM3", gpu_count=8, shm_size="16g")
    assert result.go and _check(result, "driver").message.startswith("runs only through")


def test_k3_launch_without_prefix_caching_is_no_go_for_aggregated_and_go_for_pd_decode() -> None:
    result = _run(**GIVEN, recipe="kimi-k3", launch=K3_LAUNCH)
    assert not result.go and result.host.profile == "blackwell"
    prefix = _check(result, "recipe_flag:--enable-prefix-caching")
    assert (prefix.ok, prefix.severity) == (False, "error")
    assert prefix.message.startswith("--enable-prefix-caching is missing from the launch")
    assert prefix.fix == "Add --enable-prefix-caching to the launch command."
    _one_line(prefix.message)
    assert [c.id for c in result.failed] == ["recipe_flag:--enable-prefix-caching"]

    decode = _run(**GIVEN, recipe="kimi-k3", profile="pd-decode", launch=K3_LAUNCH)
    assert decode.go and decode.host.profile == "pd-decode"
    off = _check(decode, "recipe_flag:--no-enable-prefix-caching")
    assert (off.ok, off.severity) == (False, "warning")  # said, not a stop: the default is off

    full = _run(**GIVEN, recipe="kimi-k3", launch=K3_AGGREGATED)
    assert full.go and all(c.ok for c in full.checks if c.id.startswith("recipe_flag"))
    # The recipe comes from the launch's model when none is named.
    assert not _run(**GIVEN, launch=K3_LAUNCH).go

    shown = run_cli(
        "preflight", "--image-config", str(K3_IMAGE), "--driver", "580.95.05", "--gpu", "B200",
        "--gpu-count", "8", "--shm-size", "16g", "--recipe", "kimi-k3", "--launch-cmd", "-",
        input=K3_LAUNCH,
    )  # fmt: skip
    assert shown.exit_code == 1
    fails = [line for line in shown.stdout.splitlines() if line.startswith("FAIL")]
    assert fails == [
        "FAIL recipe_flag:--enable-prefix-caching: --enable-prefix-caching is missing from the "
        "launch; the kimi-k3 recipe's blackwell profile sets it: Prefix caching is off by default "
        "for K3's hybrid KDA cache; it must be given explicitly. Add --prefix-match-unit 128 so "
        "hits are not limited to 1536-token blocks. -> Add --enable-prefix-caching to the launch "
        "command."
    ]


# --- the recipe: version, all-to-all backend ---------------------------------------------------


def test_recipe_minimum_vllm_version() -> None:
    ok = _check(_run(**GIVEN, recipe="kimi-k3"), "vllm_version")
    assert ok.ok and "0.27.1 (tag v0.27.1)" in ok.message
    old = _run(**GIVEN, recipe="kimi-k3", image_config=None, image="vllm/vllm-openai:v0.26.0")
    check = _check(old, "vllm_version")
    assert not old.go and (check.ok, check.severity) == (False, "error")
    assert "older than the kimi-k3 recipe's minimum 0.27.0" in check.message
    # The tag alone gives the CUDA: said as a warning.
    assert _check(old, "image").severity == "warning"
    own = _check(
        _run(**GIVEN, recipe="kimi-k3", image_config=None, image="vllm/vllm-openai:kimi-k3"),
        "vllm_version",
    )
    assert own.ok and "own image" in own.message
    assert _check(
        _run(**GIVEN, recipe="kimi-k3", launch=K3_AGGREGATED), "recipe_flag:--trust-remote-code"
    ).ok


def test_all_to_all_backend_matches_the_transport(tmp_path: Path) -> None:
    root = tmp_path / "root"
    (root / "sys" / "class" / "infiniband" / "mlx5_0").mkdir(parents=True)
    expert = f"{K3_AGGREGATED} --enable-expert-parallel"
    one_node = _run(**GIVEN, recipe="kimi-k3", launch=f"{expert} --all2all-backend deepep_v2")
    check = _check(one_node, "all2all_backend")
    assert not one_node.go and not check.ok
    assert "NVLink" in check.message and check.fix == (
        "Add --all2all-backend flashinfer_nvlink_one_sided to the launch command."
    )
    nodes = f"{expert} --nnodes 2 --node-rank 0 --all2all-backend deepep_v2"
    multi = _run(**GIVEN, recipe="kimi-k3", launch=nodes, host_root=root)
    assert multi.go and _check(multi, "all2all_backend").ok
    assert "mlx5_0" in _check(multi, "all2all_backend").message
    unset = _run(**GIVEN, recipe="kimi-k3", launch=expert, transport="rdma")
    assert (
        "not set (vLLM's default allgather_reducescatter)"
        in _check(unset, "all2all_backend").message
    )
    # Without expert parallelism (and no backend or transport given) there is nothing to check.
    assert not [
        c
        for c in _run(**GIVEN, recipe="kimi-k3", launch=K3_AGGREGATED).checks
        if c.id == "all2all_backend"
    ]


# --- the host: GPUs visible, /dev/shm, the model, capacity, architectures ------------------------


def test_a_cdi_spec_for_another_driver_is_no_go(host: FakeHost) -> None:
    """The real CDI spec of a 575.64.03 host, on a node that now runs 580.105.08."""
    host.reply("nvidia-smi -q -x", stdout_file=XML_B200_580)
    host.file("/etc/cdi/nvidia.yaml", CDI_575)
    check = _check(_run(host, shm_size="16g"), "gpus_visible")
    assert not check.ok and check.severity == "error"
    assert "575.64.03" in check.message and "580.105.08" in check.message
    assert check.fix and "nvidia-ctk cdi generate" in check.fix
    # The same spec on its own driver: one GPU named in it.
    same = _check(
        _run(host, shm_size="16g", driver="575.64.03", gpu="NVIDIA B200", gpu_count=1),
        "gpus_visible",
    )
    assert same.ok and "CDI spec: 1" in same.message


def test_fewer_visible_gpus_than_the_launch_uses_is_no_go(host: FakeHost) -> None:
    for index in range(1, 8):
        (host.root / "dev" / f"nvidia{index}").unlink()
    host.install(("nvidia-container-cli",))
    host.reply(
        "nvidia-container-cli info",
        stdout_file=PREFLIGHT / "nvidia-container-cli-info-465.19.01-rtx2080ti-x8.partial.txt",
    )
    result = _run(host, **GIVEN, launch=K3_AGGREGATED)
    check = _check(result, "gpus_visible")
    assert not result.go and not check.ok
    assert "the launch uses 8 GPU(s) and only 1 are visible" in check.message
    assert "nvidia-container-cli: 1" in check.message
    # No source at all (no device node, no nvidia-container-cli, no CDI spec): a warning.
    (host.bin / "nvidia-container-cli").unlink()
    bare = host.root.parent / "bare"
    bare.mkdir()
    check = _check(_run(host_root=bare, **GIVEN), "gpus_visible")
    assert (check.ok, check.severity) == (False, "warning")


def test_shm_size(host: FakeHost) -> None:
    small = _run(**GIVEN | {"shm_size": "64m"}, launch=K3_AGGREGATED)
    check = _check(small, "shm")
    assert not small.go and (check.ok, check.severity) == (False, "error")
    assert (
        "64 MiB (given) (the container default): a launch on 8 GPUs needs at least 1.0 GiB"
        in check.message
    )
    single = _run(**GIVEN | {"shm_size": "64m", "gpu_count": 1}, launch="vllm serve Qwen/Qwen3-8B")
    assert single.go and _check(single, "shm").severity == "warning"
    # Detected through statvfs when not given.
    detected = _run(host, driver="580.95.05", gpu="NVIDIA B200", gpu_count=8)
    assert _check(detected, "shm").message.endswith("(statvfs of /dev/shm)")
    assert (
        detected.host.shm_bytes
        == os.statvfs(host.root / "dev" / "shm").f_frsize
        * os.statvfs(host.root / "dev" / "shm").f_blocks
    )


def test_model_path_for_the_containers_user(tmp_path: Path) -> None:
    """By mode bits, for a user other than preflight's own: every folder on the way searchable,
    the files readable. The model sits in a folder anyone may search (pytest's own is 0700)."""
    base = Path(tempfile.mkdtemp(prefix="preflight-model-"))
    try:
        base.chmod(0o755)
        model = base / "k2"
        model.mkdir()
        shutil.copy(K2 / "config.json", model / "config.json")
        for shard in ("model-00001-of-00002", "model-00002-of-00002"):
            (model / f"{shard}.safetensors").write_bytes(b"x")
        for path in (model, *model.iterdir()):
            path.chmod(0o750 if path.is_dir() else 0o640)
            if os.geteuid() == 0:
                os.chown(path, 1000, 1000)
        owner = os.stat(model).st_uid
        ok = _check(
            _run(**GIVEN, model_path=model, container_user=f"{owner}:{owner}"), "model_path"
        )
        assert ok.ok and "config.json and 2 weight file(s)" in ok.message
        group = _check(
            _run(**GIVEN, model_path=model, container_user=f"4242:{owner}"), "model_path"
        )
        assert group.ok  # the group may read
        other = _run(**GIVEN, model_path=model, container_user="4242:4242")
        check = _check(other, "model_path")
        assert not other.go and not check.ok
        assert "not readable for uid 4242 gid 4242 (given)" in check.message
        assert check.fix and "chmod -R a+rX" in check.fix
        _one_line(check.message)
        # The launch's docker --user is the default; a root container reads everything.
        docker = f"docker run --user 4242 vllm/vllm-openai:v0.27.1 {model}"
        by_launch = _check(_run(**GIVEN, model_path=model, launch=docker), "model_path")
        assert not by_launch.ok and "the launch's --user" in by_launch.message
        assert _check(_run(**GIVEN, model_path=model), "model_path").ok
        missing = _check(_run(**GIVEN, model_path=base / "nowhere"), "model_path")
        assert not missing.ok and "does not exist here" in missing.message
    finally:
        shutil.rmtree(base)


def test_capacity_is_a_check() -> None:
    """Kimi-K2-Instruct's real config: does not fit 8x H100 80GB (no-go), fits 8x B200."""
    launch = (
        "vllm serve moonshotai/Kimi-K2-Instruct --trust-remote-code -tp 8 --max-model-len 131072"
    )
    h100 = _run(
        driver="580.95.05",
        gpu="NVIDIA H100 80GB HBM3",
        gpu_count=8,
        shm_size="16g",
        model_path=K2,
        launch=launch,
    )
    check = _check(h100, "capacity")
    assert not h100.go and not check.ok and check.message.startswith("does not fit on 8x H100")
    assert check.fix and check.fix.startswith("--gpu-count 16")
    b200 = _run(**GIVEN, model_path=K2, launch=launch)
    assert b200.go and _check(b200, "capacity").message.startswith("fits on 8x B200")


def test_gpu_architectures_of_the_image(tmp_path: Path) -> None:
    document = json.loads(K3_IMAGE.read_text())
    config = tmp_path / "image.json"

    def with_archs(archs: str) -> Path:
        document[0]["Config"]["Env"].append(f"TORCH_CUDA_ARCH_LIST={archs}")
        config.write_text(json.dumps(document))
        document[0]["Config"]["Env"].pop()
        return config

    hopper = _check(
        _run(**GIVEN | {"gpu": "NVIDIA H100 80GB HBM3"}, image_config=with_archs("8.0 9.0")),
        "gpu_arch",
    )
    assert hopper.ok
    none = _run(**GIVEN, image_config=with_archs("8.0 9.0"))
    assert not none.go and "no kernel in it runs on this GPU" in _check(none, "gpu_arch").message
    ptx = _run(**GIVEN, image_config=with_archs("8.0 9.0+PTX"))
    assert ptx.go and _check(ptx, "gpu_arch").severity == "warning"
    assert not [c for c in _run(**GIVEN).checks if c.id == "gpu_arch"]  # unknown: no check


def test_a_driver_that_does_not_answer_is_no_go_and_no_nvidia_smi_a_warning(host: FakeHost) -> None:
    mismatch = (SAMPLES / "nvidia-smi-text" / "mismatch-nvml-580.178.nvidia-smi.txt").read_text()
    host.reply("nvidia-smi -q -x", stdout=mismatch, exit=18)
    result = _run(host, shm_size="16g")
    check = _check(result, "driver")
    assert not result.go and check.severity == "error"
    assert (
        check.message
        == "the driver does not answer: nvidia-smi: Failed to initialize NVML: Driver/library version mismatch"
    )
    (host.bin / "nvidia-smi").unlink()
    result = _run(host, shm_size="16g")
    check = _check(result, "driver")
    assert result.go and (check.ok, check.severity) == (False, "warning")
    assert "nvidia-smi is not installed here" in check.message


@pytest.mark.slow
def test_host_commands_are_bounded(host: FakeHost) -> None:
    """A hung nvidia-smi ends at the deadline (no-go: the driver does not answer), a flood is
    cut at the cap, what a command leaves behind is killed; nothing keeps running."""
    host.reply("nvidia-smi -q -x", behaviour="hang")
    with ends_in_time(1.0, "a preflight with nvidia-smi hanging forever"):
        result = _run(host, shm_size="16g", timeout=1.0)
    check = _check(result, "driver")
    assert (
        not result.go
        and check.message == "the driver does not answer: nvidia-smi did not answer in 1 s"
    )
    host.reply("nvidia-smi -q -x", behaviour="flood", size=3 * MAX_OUTPUT_BYTES)
    flood = run_command(["nvidia-smi", "-q", "-x"], 30, path=str(host.bin))
    assert flood.ok and len(flood.stdout.encode()) <= MAX_OUTPUT_BYTES
    assert flood.stdout.startswith("FIRST LINE of the flood")
    host.reply("nvidia-smi -q -x", behaviour="orphan")
    # the orphan keeps the pipe open forever: a command that ends did not wait for it
    with ends_in_time(what="a command whose child keeps stdout open"):
        orphan = run_command(["nvidia-smi", "-q", "-x"], ENDLESS_S, path=str(host.bin))
    assert orphan.ok and "parent done" in orphan.stdout
    wait_for(lambda: host.alive() == [], "what the command left behind is killed")


# --- parsers, bad input, the contract ----------------------------------------------------------


def test_parsers_read_the_real_captures() -> None:
    table = parse_nvidia_smi_table(TABLE_B200_575.read_text())
    assert (table.driver, table.cuda_ceiling, len(table.names), table.memory_mib) == (
        "575.57.08", "12.9", 8, 183359,
    )  # fmt: skip
    assert set(table.names) == {"NVIDIA B200"}
    kmd = parse_nvidia_smi_table(
        (PREFLIGHT / "exporter-rtx-2080-super-610.57.04.nvidia-smi.idle.txt").read_text()
    )
    assert (kmd.driver, kmd.cuda_ceiling) == ("610.57.04", "13.3")
    cli = parse_container_cli_info(
        (PREFLIGHT / "nvidia-container-cli-info-465.19.01-rtx2080ti-x8.partial.txt").read_text()
    )
    assert cli == (1, "465.19.01", "GeForce")


@pytest.mark.parametrize(
    ("args", "says"),
    [
        ([], "say which image: --image REF or --image-config FILE"),
        (["--image-config", "/nonexistent/image.json"], "no such file"),
        (["--image", "vllm/vllm-openai:kimi-k3", "--driver", "575.x"], "malformed driver version"),
        (
            ["--image", "vllm/vllm-openai:kimi-k3", "--recipe", "kimi-k9"],
            "unknown recipe 'kimi-k9'",
        ),
        (
            ["--image", "vllm/vllm-openai:kimi-k3", "--recipe", "kimi-k3", "--profile", "x"],
            "has no profile 'x'",
        ),
        (
            ["--image", "vllm/vllm-openai:kimi-k3", "--profile", "pd-decode"],
            "--profile needs --recipe",
        ),
        (["--image", "vllm/vllm-openai:kimi-k3", "--container-user", "vllm"], "expected UID[:GID]"),
        (["--image", "vllm/vllm-openai:kimi-k3", "--shm-size", "lots"], "--shm-size 'lots'"),
        (
            ["--image", "vllm/vllm-openai:kimi-k3", "--transport", "carrier-pigeon"],
            "--transport must be rdma or nvlink",
        ),
        (["--image", "vllm/vllm-openai:kimi-k3", "--launch-cmd", "-"], "no `vllm serve`"),
        (["--image", "registry.example/other:1.0"], "not a known vLLM repository"),
        (
            ["--image", "vllm/vllm-openai:kimi-k3", "--gpu-count", "0"],
            "'--gpu-count': 0 is not in the range 1<=x<=100000",
        ),
    ],
)
def test_bad_input_is_one_line_and_exit_2(args: list[str], says: str, tmp_path: Path) -> None:
    shown = run_cli("preflight", *args, "--host-root", str(tmp_path), input="python train.py\n")
    assert shown.exit_code == 2, shown.stdout + shown.stderr
    lines = shown.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error: ") and says in lines[0]
    assert shown.stdout == ""


def test_bad_input_raises_input_error_from_the_library() -> None:
    with pytest.raises(InputError, match="say which image"):
        preflight(PreflightOptions())


def test_json_contract(host: FakeHost) -> None:
    host.reply("nvidia-smi", stdout_file=TABLE_B200_575)
    shown = run_cli(
        "preflight", "--image-config", str(K3_IMAGE), "--host-root", str(host.root),
        "--recipe", "kimi-k3", "--launch-cmd", "-", "--format", "json",
        input=K3_LAUNCH, env={"PATH": str(host.bin)},
    )  # fmt: skip
    assert shown.exit_code == 1
    document = json.loads(shown.stdout)
    assert document["schema_version"] == 1 and document["go"] is False
    assert {"schema_version", "go", "checks"} <= set(document)
    for check in document["checks"]:
        assert {"id", "ok", "severity", "message"} <= set(check)
        assert isinstance(check["ok"], bool) and check["severity"] in ("error", "warning")
        _one_line(check["message"])
    failed = {c["id"] for c in document["checks"] if not c["ok"] and c["severity"] == "error"}
    assert failed == {"driver", "recipe_flag:--enable-prefix-caching"}
    go = run_cli(
        "preflight", "--image-config", str(K3_IMAGE), "--driver", "580.95.05", "--gpu", "B200",
        "--gpu-count", "8", "--shm-size", "16g", "--host-root", str(host.root), "--format", "json",
    )  # fmt: skip
    assert go.exit_code == 0 and json.loads(go.stdout)["go"] is True
    markdown = run_cli(
        "preflight", "--image-config", str(K3_IMAGE), "--driver", "575.57.08", "--gpu", "B200",
        "--gpu-count", "8", "--shm-size", "16g", "--host-root", str(host.root), "--format", "markdown",
    )  # fmt: skip
    assert markdown.exit_code == 1 and markdown.stdout.startswith("## Preflight: no-go")
    assert "| driver | fail |" in markdown.stdout
