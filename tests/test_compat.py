"""The version-threshold verdict against NVIDIA's rules, through the library and the CLI."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from cli import run_cli

from vllm_triage.diagnose import CompatOptions, compat
from vllm_triage.diagnose.threshold import require_satisfied
from vllm_triage.image.config import ImageError, image_cuda_from_config, image_cuda_from_reference
from vllm_triage.versions import CudaVersion, DriverVersion

DATA = Path(__file__).parent / "data" / "image-configs"

CASES = [
    # driver, cuda, gpu, verdict, min_driver (the floor deciding it), toolkit_driver
    ("575.57.08", "13.0", None, "incompatible", "580", "580.65.06"),
    ("575.57.08", "12.9", None, "compatible", "525.60.13", "575.51.03"),
    ("570.86.10", "12.8", None, "compatible", "525.60.13", "570.26"),
    ("535.183.01", "12.8", None, "conditional", "525.60.13", "570.26"),
    ("520.61.05", "12.0", None, "incompatible", "525.60.13", "525.60.13"),
    ("580.65.06", "13.0", None, "compatible", "580", "580.65.06"),
    ("580.65.06", "13.1", None, "conditional", "580", "590.44.01"),
    ("570.86.10", "13.0", "NVIDIA H100 80GB HBM3", "forward_compat_only", "580", "580.65.06"),
    ("570.86.10", "13.0", "NVIDIA GeForce RTX 4090", "incompatible", "580", "580.65.06"),
    ("570.86.10", "13.0", None, "incompatible", "580", "580.65.06"),
    ("595.71.05", "13.0", None, "compatible", "580", "580.65.06"),
    ("535.183.01", "13.4", "NVIDIA A100-SXM4-80GB", "forward_compat_only", "580", "615.31"),
    ("550.90.07", "13.0", "NVIDIA H100 80GB HBM3", "incompatible", "580", "580.65.06"),
    ("450.80.02", "11.8", None, "conditional", "450.80.02", "520.61.05"),
    # GPU Feature Discovery names (nvidia.com/gpu.product) resolve like nvidia-smi's
    ("570.133.20", "13.0", "NVIDIA-H100-80GB-HBM3", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "NVIDIA-A100-SXM4-80GB", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "NVIDIA-H200", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "Tesla-T4", "forward_compat_only", "580", "580.65.06"),
    (
        "570.133.20",
        "13.0",
        "NVIDIA-H100-80GB-HBM3-SHARED",
        "forward_compat_only",
        "580",
        "580.65.06",
    ),
    (
        "570.133.20",
        "13.0",
        "NVIDIA-A100-SXM4-40GB-MIG-1g.10gb",
        "forward_compat_only",
        "580",
        "580.65.06",
    ),
    ("570.133.20", "13.0", "NVIDIA-GeForce-RTX-4090", "incompatible", "580", "580.65.06"),
    # data-center GPUs the table lacked, and Jetson (forward compatibility without data center)
    ("570.133.20", "13.0", "NVIDIA H800", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "NVIDIA A800-SXM4-80GB", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "NVIDIA L20", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "NVIDIA A2", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "NVIDIA-A16", "forward_compat_only", "580", "580.65.06"),
    ("570.133.20", "13.0", "Orin (nvgpu)", "forward_compat_only", "580", "580.65.06"),
    # CUDA 13.0 Update 3 (installer cuda_13.0.3_580.126.20_linux.run)
    ("580.126.20", "13.0.3", None, "compatible", "580", "580.126.20"),
]


@pytest.mark.parametrize(("driver", "cuda", "gpu", "verdict", "min_driver", "toolkit"), CASES)
def test_verdicts_follow_nvidia_rules(driver, cuda, gpu, verdict, min_driver, toolkit):
    result = compat(CompatOptions(driver, cuda, gpu))
    assert result.verdict == verdict, result.explanation
    assert result.min_driver == min_driver
    assert result.toolkit_driver == toolkit
    assert result.source.startswith("https://")
    assert result.table_rows


def test_r575_is_not_a_forward_compat_base():
    result = compat(CompatOptions("575.57.08", "13.0", "NVIDIA H100 80GB HBM3"))
    assert result.verdict == "incompatible"
    assert any("r575" in c and "not" in c for c in result.conditions)


def test_conditional_names_its_limits():
    result = compat(CompatOptions("580.65.06", "13.1"))
    assert result.rule == "minor_version_compatibility"
    assert [c.split(":")[0] for c in result.conditions] == ["ptx_jit", "container_require"]


def test_kimi_k3_image_by_reference_is_incompatible_on_r575():
    result = compat(CompatOptions("575.51.03", image="vllm/vllm-openai:kimi-k3"))
    assert result.verdict == "incompatible"
    assert result.cuda == "13.0"


def test_found_version_encoding_means_driver_ceiling():
    assert CudaVersion.from_api_int(12080) == CudaVersion(12, 8)


@pytest.mark.parametrize(
    ("reference", "cuda"),
    [
        ("vllm/vllm-openai:kimi-k3", "13.0"),
        ("vllm/vllm-openai:latest", "13.0"),
        ("vllm/vllm-openai", "13.0"),
        ("vllm/vllm-openai:v0.27.1", "13.0"),
        ("vllm/vllm-openai:v0.22.0-cu129-ubuntu2404", "12.9"),
        ("vllm/vllm-openai:v0.19.1", "12.9"),
        ("vllm/vllm-openai:v0.19.1-cu130", "13.0"),
        ("docker.io/vllm/vllm-openai:v0.10.1", "12.8"),
        ("vllm/vllm-openai:v0.9.0", "12.8"),
        ("vllm/vllm-openai:v0.9.2", "12.8"),
    ],
)
def test_image_tags_resolve_through_the_knowledge_base(kb, reference, cuda):
    assert str(image_cuda_from_reference(kb, reference).cuda) == cuda


@pytest.mark.parametrize(
    "reference", ["nginx:latest", "vllm/vllm-openai:nightly", "vllm/vllm-openai@sha256:abc"]
)
def test_unknown_images_are_refused(kb, reference):
    """A tag the knowledge cannot place (nightly, a digest alone) is refused, not guessed."""
    with pytest.raises(ImageError):
        image_cuda_from_reference(kb, reference)


def test_image_config_is_authoritative():
    found = image_cuda_from_config(DATA / "vllm-openai-cu130.inspect.json")
    assert found.cuda == CudaVersion(13, 0, 2)
    assert found.how == "CUDA_VERSION"
    assert found.require and found.require.startswith("cuda>=13.0")
    oci = image_cuda_from_config(DATA / "require-only.oci-config.json")
    assert oci.cuda == CudaVersion(12, 9) and oci.how == "NVIDIA_REQUIRE_CUDA"


def test_image_config_verdict_uses_the_require_string():
    path = DATA / "vllm-openai-cu130.inspect.json"
    assert compat(CompatOptions("580.65.06", image_config=path)).verdict == "compatible"
    assert compat(CompatOptions("575.57.08", image_config=path)).verdict == "incompatible"


def test_require_string_semantics():
    driver = DriverVersion.parse("570.86.10")
    ceiling = CudaVersion(12, 8)
    assert require_satisfied("cuda>=12.8", driver, ceiling) is True
    assert require_satisfied("cuda>=13.0", driver, ceiling) is False
    # brand clauses OR'd with cuda>=: undecidable without the brand, true with it
    require = "cuda>=13.0 brand=tesla,driver>=570,driver<571"
    assert require_satisfied(require, driver, ceiling) is None
    assert require_satisfied(require, driver, ceiling, brand="tesla") is True


def test_cli_json_contract_and_exit_codes(tmp_path: Path):
    done = run_cli("compat", "--driver", "575.57.08", "--cuda", "13.0", "--format", "json")
    assert done.exit_code == 1
    payload = json.loads(done.stdout)
    assert {"schema_version", "verdict", "min_driver", "rule", "conditions", "source"} <= set(
        payload
    )
    assert payload["schema_version"] == 1
    assert payload["verdict"] == "incompatible"
    assert payload["min_driver"] == "580"
    assert payload["toolkit_driver"] == "580.65.06"
    assert payload["recommended_driver"] == "580.173.02"
    assert payload["recommended_branch"] == "r580"
    assert run_cli("compat", "--driver", "580.65.06", "--cuda", "13.1").exit_code == 0
    assert run_cli("compat", "--driver", "575.57.08", "--cuda", "12.9").exit_code == 0
    bad = run_cli("compat", "--driver", "575", "--cuda", "thirteen")
    assert bad.exit_code == 2
    assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    # compat is a pure query: it writes no case folder
    case = tmp_path / "case"
    run_cli(
        "compat", "--driver", "575.57.08", "--cuda", "13.0", env={"VLLM_TRIAGE_CASE": str(case)}
    )
    assert not case.exists()


# --- the GPU table: names, architectures, last branches ---------------------------------------


def test_gfd_h100_on_r570_with_cuda_13_is_forward_compat_only_through_the_cli():
    done = run_cli(
        "compat", "--driver", "570.133.20", "--cuda", "13.0", "--gpu", "NVIDIA-H100-80GB-HBM3",
        "--format", "json",
    )  # fmt: skip
    assert done.exit_code == 1, done.stderr
    payload = json.loads(done.stdout)
    assert payload["verdict"] == "forward_compat_only"
    assert payload["gpu"] == "NVIDIA-H100-80GB-HBM3" and payload["gpu_model"] == "H100 SXM"
    assert payload["cause"] == "driver_too_old" and payload["compute_capability"] == "9.0"
    assert any("cuda-compat-13-0" in step for step in payload["advice"])


def test_h200_is_not_taken_for_an_h20():
    for name in ("NVIDIA H200", "NVIDIA H200 NVL", "NVIDIA-H200", "NVIDIA-H200-NVL-SHARED"):
        result = compat(CompatOptions("570.133.20", "13.0", name))
        assert result.gpu_model == "H200", name
    assert compat(CompatOptions("570.133.20", "13.0", "NVIDIA H20")).gpu_model == "H20"
    done = run_cli(
        "compat", "--driver", "580.65.06", "--cuda", "13.0", "--gpu", "NVIDIA H200",
        "--format", "json",
    )  # fmt: skip
    assert done.exit_code == 0 and json.loads(done.stdout)["gpu_model"] == "H200"


@pytest.mark.parametrize("driver", ["535.183.01", "570.133.20", "580.95.05", "595.71.05"])
def test_v100_with_cuda_13_is_an_unsupported_architecture_whatever_the_driver(driver):
    result = compat(CompatOptions(driver, "13.0", "Tesla V100-SXM2-32GB"))
    assert result.verdict == "incompatible"
    assert result.rule == "unsupported_gpu_arch" and result.cause == "unsupported_gpu_arch"
    assert result.min_driver is None and result.min_branch is None
    assert result.compute_capability == "7.0" and result.gpu_model == "V100"
    assert "whatever the driver" in result.explanation
    text = " ".join([result.explanation, *result.conditions, *result.advice])
    assert not re.search(r"\br(59[0-9]|6[0-9]{2})\b", text), text
    assert any("CUDA 12.x build" in step for step in result.advice)
    assert any("r580 at most" in step for step in result.advice)


def test_v100_with_cuda_13_through_the_cli_exits_1():
    done = run_cli(
        "compat", "--driver", "570.133.20", "--cuda", "13.0", "--gpu", "Tesla-V100-SXM2-32GB",
        "--format", "json",
    )  # fmt: skip
    assert done.exit_code == 1
    payload = json.loads(done.stdout)
    assert payload["verdict"] == "incompatible" and payload["cause"] == "unsupported_gpu_arch"
    assert payload["min_branch"] is None


def test_v100_advice_never_names_a_branch_past_r580(kb):
    """Whatever the driver and CUDA build: no minimum branch, condition or advice past r580."""
    releases = sorted({(r.cuda_version.major, r.cuda_version.minor) for r in kb.toolkits})
    drivers = ["450.80.02", "470.82.01", "535.183.01", "570.133.20", "575.57.08", "580.95.05"]
    for major, minor in releases:
        for driver in drivers:
            result = compat(CompatOptions(driver, f"{major}.{minor}", "Tesla V100-PCIE-32GB"))
            if result.min_branch is not None:
                assert int(result.min_branch[1:]) <= 580, (driver, major, minor)
            text = " ".join([result.explanation, *result.conditions, *result.advice])
            assert not re.search(r"\br(59[0-9]|6[0-9]{2})\b", text), (driver, major, minor, text)
            assert result.verdict in ("compatible", "conditional") or result.advice


def test_v100_with_cuda_12_names_its_last_branch():
    result = compat(CompatOptions("470.82.01", "12.9", "Tesla V100-SXM2-16GB"))
    assert result.verdict == "incompatible" and result.cause == "driver_too_old"
    assert result.min_branch == "r525" and result.toolkit_driver == "575.51.03"
    assert "not past r580" in result.advice[0] and "580.173.02" in result.advice[0]


def test_pascal_follows_the_same_limits():
    result = compat(CompatOptions("580.95.05", "13.0", "Tesla P100-PCIE-16GB"))
    assert result.cause == "unsupported_gpu_arch"
    assert compat(CompatOptions("580.95.05", "13.0", "Tesla T4")).verdict == "compatible"


def test_rtx_pro_6000_server_forward_compat_is_uncertain():
    result = compat(
        CompatOptions("570.133.20", "13.0", "NVIDIA RTX PRO 6000 Blackwell Server Edition")
    )
    assert result.verdict == "incompatible" and result.cause == "driver_too_old"
    assert any("not established" in c for c in result.conditions)
    assert any("cuda-compat-13-0" in step and "804" in step for step in result.advice)


def test_an_unknown_gpu_name_is_said_so():
    result = compat(CompatOptions("570.133.20", "13.0", "NVIDIA Z9000"))
    assert result.verdict == "incompatible" and result.gpu_model is None
    assert "not in the GPU table" in result.explanation


def test_r575_branch_type_is_carried_at_its_certainty():
    result = compat(CompatOptions("575.57.08", "13.0", "NVIDIA H100 80GB HBM3"))
    assert "New Feature Branch (per a secondary source)" in result.explanation


def test_releases_without_an_established_minimum():
    unknown = compat(CompatOptions("615.31", "13.4.2"))
    assert unknown.verdict == "compatible" and unknown.min_driver == "580"
    assert unknown.toolkit_driver == "615.31"  # 13.4 GA's: a floor for Update 1
    assert any("13.4 Update 1: minimum driver not established" in r for r in unknown.table_rows)
    newest = compat(CompatOptions("580.95.05", "13.5"))
    assert newest.verdict == "conditional" and newest.min_driver == "580"
    assert newest.toolkit_driver is None
    assert any("13.5 GA: minimum driver not established" in r for r in newest.table_rows)


def test_releases_before_the_12_8_default_are_not_guessed(kb):
    with pytest.raises(ImageError, match="cannot tell its CUDA from the tag"):
        image_cuda_from_reference(kb, "vllm/vllm-openai:v0.8.5")
    assert "secondary source" in image_cuda_from_reference(kb, "vllm/vllm-openai:v0.12.0").how
    assert "source" not in image_cuda_from_reference(kb, "vllm/vllm-openai:v0.9.0").how
