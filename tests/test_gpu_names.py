"""GPU names resolve to their row of the GPU table whichever tool wrote them: nvidia-smi, torch, or
GPU Feature Discovery's nvidia.com/gpu.product label (spaces as hyphens, -SHARED or -MIG-<profile>
appended); a pattern that catches another model's names fails `knowledge check`."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from vllm_triage.knowledge import DATA_DIR, KnowledgeError, load_knowledge
from vllm_triage.knowledge.check import data_problems
from vllm_triage.knowledge.schema import gpu_name_key


@pytest.fixture
def data(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


@pytest.mark.parametrize(
    ("name", "row"),
    [
        # nvidia-smi / NVML
        ("NVIDIA H100 80GB HBM3", "H100 SXM"),
        ("NVIDIA A100-SXM4-80GB", "A100 80GB"),
        ("NVIDIA A100 80GB PCIe", "A100 80GB"),
        ("Tesla T4", "T4"),
        # GPU Feature Discovery: spaces as hyphens
        ("NVIDIA-H100-80GB-HBM3", "H100 SXM"),
        ("NVIDIA-A100-SXM4-80GB", "A100 80GB"),
        ("NVIDIA-A100-80GB-PCIe", "A100 80GB"),
        ("NVIDIA-H200", "H200"),
        ("Tesla-T4", "T4"),
        ("Tesla-V100-SXM2-32GB", "V100"),
        # ... with time-slicing or MIG
        ("NVIDIA-H100-80GB-HBM3-SHARED", "H100 SXM"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.10gb", "A100 40GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.5gb", "A100 40GB"),
        ("NVIDIA-H100-80GB-HBM3-MIG-1g.10gb", "H100 SXM"),
        ("NVIDIA-H100-80GB-HBM3-MIG-3g.40gb-SHARED", "H100 SXM"),
        ("Tesla-T4-SHARED", "T4"),
        # H20 and H200 apart
        ("NVIDIA H20", "H20"),
        ("NVIDIA H20-3e", "H20"),
        ("NVIDIA H200", "H200"),
        ("NVIDIA H200 NVL", "H200"),
        ("NVIDIA-H200-NVL", "H200"),
        # rows added by the 2026-12-01 audit
        ("NVIDIA H800", "H800"),
        ("NVIDIA A800-SXM4-80GB", "A800"),
        ("NVIDIA L20", "L20"),
        ("NVIDIA A2", "A2"),
        ("NVIDIA A16", "A16"),
        ("Orin (nvgpu)", "Jetson Orin"),
        ("NVIDIA Thor", "Jetson Thor"),
    ],
)
def test_names_resolve_to_their_row(kb, name: str, row: str) -> None:
    found = kb.gpu(name)
    assert found is not None and found.name == row, name


@pytest.mark.parametrize(
    ("name", "key"),
    [
        ("NVIDIA-H100-80GB-HBM3-SHARED", "NVIDIA H100 80GB HBM3"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.10gb", "NVIDIA A100 SXM4 40GB"),
        ("NVIDIA-A100-SXM4-40GB-MIG-1g.10gb-SHARED", "NVIDIA A100 SXM4 40GB"),
        ("  NVIDIA A100-SXM4-80GB ", "NVIDIA A100 SXM4 80GB"),
        ("NVIDIA GeForce RTX 4090", "NVIDIA GeForce RTX 4090"),
    ],
)
def test_name_key(name: str, key: str) -> None:
    assert gpu_name_key(name) == key


def test_unknown_names_resolve_to_nothing(kb) -> None:
    for name in ("NVIDIA Z9000", "", "MIG-1g.10gb", "NVIDIA H2000", "NVIDIA A1000"):
        assert kb.gpu(name) is None, name


def _gpu_problems(problems: list[str]) -> list[str]:
    return [p for p in problems if p.startswith(("data/gpus.csv", "data/gpu_limits.yaml"))]


def test_every_example_resolves_to_its_row_and_every_row_is_sourced(kb) -> None:
    assert _gpu_problems(data_problems(kb)) == []
    for row in kb.gpus:
        assert row.examples, f"{row.name}: give at least one name it must match"
        assert all(kb.gpu(example) is row for example in row.examples), row.name
        assert row.source and row.certainty and row.as_of and row.architecture, row.name
    for limit in kb.gpu_limits:
        assert limit.source and limit.certainty and limit.as_of, limit.id


def test_the_gpu_limits(kb) -> None:
    v100, t4 = kb.gpu("Tesla V100-SXM2-32GB"), kb.gpu("Tesla T4")
    assert v100 is not None and t4 is not None
    limits = {limit.id: limit for limit in kb.gpu_limits_for(v100)}
    assert limits["cuda13-starts-at-sm75"].last_cuda_major == 12
    assert limits["cuda13-starts-at-sm75"].certainty == "primary"
    assert limits["r580-last-branch-before-turing"].last_driver_branch == "r580"
    assert limits["r580-last-branch-before-turing"].certainty == "secondary"
    assert kb.gpu_limits_for(t4) == []


@pytest.mark.slow
def test_a_pattern_that_catches_another_model_fails_the_check(data: Path) -> None:
    """The pattern the audit found (`^NVIDIA H20` caught every H200) is reported, row by row."""
    path = data / "gpus.csv"
    text = path.read_text(encoding="utf-8")
    assert ",^NVIDIA H20( 3e)?$," in text
    path.write_text(text.replace(",^NVIDIA H20( 3e)?$,", ",^NVIDIA H20,"), encoding="utf-8")
    problems = _gpu_problems(data_problems(load_knowledge(data)))
    assert problems and all(p.startswith("data/gpus.csv H200: ") for p in problems)
    assert "'NVIDIA H200' resolves to H20" in problems[0]


def test_a_pattern_with_hyphens_is_refused(data: Path) -> None:
    path = data / "gpus.csv"
    text = path.read_text(encoding="utf-8")
    path.write_text(
        text.replace("^NVIDIA A100 (SXM4|PCIE) 40GB$", "^NVIDIA A100-(SXM4|PCIE)-40GB$"),
        encoding="utf-8",
    )
    with pytest.raises(KnowledgeError, match=r"gpus\.csv row [0-9]+: .*spaces for hyphens"):
        load_knowledge(data)


def test_an_example_its_pattern_misses_is_refused(data: Path) -> None:
    path = data / "gpus.csv"
    text = path.read_text(encoding="utf-8")
    path.write_text(text.replace("NVIDIA L20|NVIDIA-L20", "NVIDIA L20|NVIDIA L2"), encoding="utf-8")
    with pytest.raises(KnowledgeError, match=r"gpus\.csv row [0-9]+: .*'NVIDIA L2' does not match"):
        load_knowledge(data)
