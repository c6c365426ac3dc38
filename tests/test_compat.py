"""The version-threshold verdict against NVIDIA's rules, through the library and the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_triage.diagnose import compat
from vllm_triage.diagnose.threshold import require_satisfied
from vllm_triage.image.config import ImageError, image_cuda_from_config, image_cuda_from_reference
from vllm_triage.versions import CudaVersion, DriverVersion

DATA = Path(__file__).parent / "data" / "image-configs"

CASES = [
    # driver, cuda, gpu, verdict, min_driver
    ("575.57.08", "13.0", None, "incompatible", "580.65.06"),
    ("575.57.08", "12.9", None, "compatible", "575.51.03"),
    ("570.86.10", "12.8", None, "compatible", "570.26"),
    ("535.183.01", "12.8", None, "conditional", "570.26"),
    ("520.61.05", "12.0", None, "incompatible", "525.60.13"),
    ("580.65.06", "13.0", None, "compatible", "580.65.06"),
    ("580.65.06", "13.1", None, "conditional", "590.44.01"),
    ("570.86.10", "13.0", "NVIDIA H100 80GB HBM3", "forward_compat_only", "580.65.06"),
    ("570.86.10", "13.0", "NVIDIA GeForce RTX 4090", "incompatible", "580.65.06"),
    ("570.86.10", "13.0", None, "incompatible", "580.65.06"),
    ("595.71.05", "13.0", None, "compatible", "580.65.06"),
    ("535.183.01", "13.4", "NVIDIA A100-SXM4-80GB", "forward_compat_only", "615.31"),
    ("550.90.07", "13.0", "NVIDIA H100 80GB HBM3", "incompatible", "580.65.06"),
    ("450.80.02", "11.8", None, "conditional", "520.61.05"),
]


@pytest.mark.parametrize(("driver", "cuda", "gpu", "verdict", "min_driver"), CASES)
def test_verdicts_follow_nvidia_rules(driver, cuda, gpu, verdict, min_driver):
    result = compat(driver, cuda, gpu)
    assert result.verdict == verdict, result.explanation
    assert result.min_driver == min_driver
    assert result.source.startswith("https://")
    assert result.table_rows


def test_r575_is_not_a_forward_compat_base():
    result = compat("575.57.08", "13.0", "NVIDIA H100 80GB HBM3")
    assert result.verdict == "incompatible"
    assert any("r575" in c and "not" in c for c in result.conditions)


def test_conditional_names_its_limits():
    result = compat("580.65.06", "13.1")
    assert result.rule == "minor_version_compatibility"
    assert [c.split(":")[0] for c in result.conditions] == ["ptx_jit", "container_require"]


def test_kimi_k3_image_by_reference_is_incompatible_on_r575():
    result = compat("575.51.03", image="vllm/vllm-openai:kimi-k3")
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
    ],
)
def test_image_tags_resolve_through_the_knowledge_base(kb, reference, cuda):
    assert str(image_cuda_from_reference(kb, reference).cuda) == cuda


@pytest.mark.parametrize(
    "reference", ["nginx:latest", "vllm/vllm-openai:nightly", "vllm/vllm-openai@sha256:abc"]
)
def test_unknown_images_are_refused(kb, reference):
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
    assert compat("580.65.06", image_config=path).verdict == "compatible"
    assert compat("575.57.08", image_config=path).verdict == "incompatible"


def test_require_string_semantics():
    driver = DriverVersion.parse("570.86.10")
    ceiling = CudaVersion(12, 8)
    assert require_satisfied("cuda>=12.8", driver, ceiling) is True
    assert require_satisfied("cuda>=13.0", driver, ceiling) is False
    # brand clauses OR'd with cuda>=: undecidable without the brand, true with it
    require = "cuda>=13.0 brand=tesla,driver>=570,driver<571"
    assert require_satisfied(require, driver, ceiling) is None
    assert require_satisfied(require, driver, ceiling, brand="tesla") is True


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "vllm_triage", *args], capture_output=True, text=True, check=False
    )


def test_cli_json_contract_and_exit_codes():
    done = _cli("compat", "--driver", "575.57.08", "--cuda", "13.0", "--format", "json")
    assert done.returncode == 1
    payload = json.loads(done.stdout)
    assert {"schema_version", "verdict", "min_driver", "rule", "conditions", "source"} <= set(
        payload
    )
    assert payload["schema_version"] == 1
    assert payload["verdict"] == "incompatible"
    assert payload["min_driver"] == "580.65.06"
    assert _cli("compat", "--driver", "580.65.06", "--cuda", "13.1").returncode == 0
    assert _cli("compat", "--driver", "575.57.08", "--cuda", "12.9").returncode == 0
    bad = _cli("compat", "--driver", "575", "--cuda", "thirteen")
    assert bad.returncode == 2
    assert bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
