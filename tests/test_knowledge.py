"""The knowledge base loads, validates, and names the file and row of any malformed fact."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_triage.knowledge import DATA_DIR, KnowledgeError, load_knowledge
from vllm_triage.ties import check_knowledge


@pytest.fixture
def data_copy(tmp_path: Path) -> Path:
    target = tmp_path / "data"
    shutil.copytree(DATA_DIR, target)
    return target


def test_packaged_knowledge_is_sound(kb):
    assert check_knowledge(kb) == []
    assert {row.cuda_version.major for row in kb.toolkits} == {11, 12, 13}
    assert "kimi-k3" in kb.recipes


def test_every_fact_has_source_and_date(kb):
    for row in [*kb.toolkits, *kb.families, *kb.branches, *kb.gpus]:
        assert row.source and row.as_of and row.certainty
    for sig in kb.signatures:
        assert sig.source and sig.as_of


def test_table_covers_every_release_from_11_0_to_13(kb):
    releases = {(row.cuda_version.major, row.cuda_version.minor) for row in kb.toolkits}
    expected = {(11, m) for m in range(9)} | {(12, m) for m in (0, 1, 2, 3, 4, 5, 6, 8, 9)}
    expected |= {(13, m) for m in range(4)}
    assert expected <= releases


def test_family_minimums(kb):
    assert {f.major: str(f.min_linux_driver) for f in kb.families} == {
        11: "450.80.02",
        12: "525.60.13",
        13: "580",
    }


def test_kimi_recipe_facts(kb):
    recipe = kb.recipes["kimi-k3"]
    assert recipe.min_vllm_version == "0.27.0"
    assert str(recipe.image_cuda) == "13.0"
    assert recipe.cuda_variants_available == ["13.0"]
    assert recipe.min_driver_branch == "r580"
    assert any(f.flag == "--enable-prefix-caching" for f in recipe.required_flags)
    assert recipe.all2all_backends.rdma == "deepep_v2"
    assert recipe.all2all_backends.nvlink == "flashinfer_nvlink_one_sided"


def test_malformed_csv_row_names_file_and_row(data_copy):
    path = data_copy / "cuda_toolkits.csv"
    lines = path.read_text().splitlines()
    lines[3] = lines[3].replace(lines[3].split(",")[2], "five-seventy", 1)
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(KnowledgeError, match=r"cuda_toolkits\.csv row 4: min_linux_driver"):
        load_knowledge(data_copy)


def test_wrong_column_count_is_reported(data_copy):
    path = data_copy / "gpus.csv"
    path.write_text(path.read_text() + "Broken,^X$,8.0\n")
    with pytest.raises(KnowledgeError, match=r"gpus\.csv row [0-9]+: wrong number of columns"):
        load_knowledge(data_copy)


def test_non_portable_pattern_is_refused(data_copy):
    path = data_copy / "signatures" / "memory.yaml"
    path.write_text(path.read_text().replace('"CUDA out of memory"', '"CUDA out of memory \\\\d+"'))
    with pytest.raises(KnowledgeError, match=r"memory\.yaml rule 1 \(VT301\).*grep"):
        load_knowledge(data_copy)


def test_invalid_yaml_names_the_line(data_copy):
    path = data_copy / "recipes" / "kimi-k3.yaml"
    path.write_text(path.read_text() + "\n  broken: [unclosed\n")
    with pytest.raises(KnowledgeError, match=r"kimi-k3\.yaml line [0-9]+: not valid YAML"):
        load_knowledge(data_copy)


def test_duplicate_signature_ids_are_refused(data_copy):
    path = data_copy / "signatures" / "api.yaml"
    path.write_text(path.read_text().replace("id: VT611", "id: VT601"))
    with pytest.raises(KnowledgeError, match="VT601 is defined twice"):
        load_knowledge(data_copy)


def test_check_reports_an_example_that_no_longer_matches(data_copy):
    path = data_copy / "signatures" / "gpu.yaml"
    path.write_text(path.read_text().replace('"No CUDA GPUs are available"', '"No GPUs at all"', 1))
    problems = check_knowledge(load_knowledge(data_copy))
    assert any(p.startswith("VT203") and "positive example not matched" in p for p in problems)


def test_cli_knowledge_check_and_show():
    def run(*args: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "vllm_triage", "knowledge", *args],
            capture_output=True,
            text=True,
            check=False,
        )

    done = run("check")
    assert done.returncode == 0 and done.stdout.startswith("ok:")
    shown = run("show", "VT101")
    assert shown.returncode == 0 and "torch-driver-too-old" in shown.stdout
    assert "580.65.06" in run("show", "cuda").stdout
    assert "vllm:gpu_prefix_cache_hits" in run("show", "metrics").stdout
    assert "VF004" in run("show", "fact-checks").stdout
    unknown = run("show", "nonsense")
    assert unknown.returncode == 2 and "unknown topic" in unknown.stderr


def test_every_fact_check_has_a_condition_and_every_condition_has_data(kb) -> None:
    from vllm_triage.diagnose.facts import known_check_ids

    assert {check.id for check in kb.fact_checks} == known_check_ids()
    assert all(check.source.startswith("https://") for check in kb.fact_checks)


def test_launch_table_fields_exist(kb) -> None:
    from vllm_triage.launch import LaunchArgs

    for argument in kb.vllm_args.arguments:
        assert argument.field in LaunchArgs.model_fields, argument.flag
    for field in kb.vllm_args.environment.values():
        assert field in LaunchArgs.model_fields
