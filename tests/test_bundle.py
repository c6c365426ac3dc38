"""Reading bundles: the real one written on an H200 host, tampering, bad and malicious input."""

from __future__ import annotations

import io
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from cli import run_cli

from vllm_triage.bundle.read import BundleError, open_bundle
from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.errors import InputError

REAL = Path(__file__).parent / "data" / "collect" / "h200-580.159.04" / "real-bundle"
NAME = "bundle-20261130T203859633796Z"


@pytest.mark.parametrize("path", [REAL / NAME, REAL / f"{NAME}.tar.gz", REAL])
def test_the_real_h200_bundle_reads_cleanly(path: Path) -> None:
    with open_bundle(path) as bundle:
        assert bundle.problems == []
        assert bundle.manifest.tool_version and bundle.manifest.files
        gpu = bundle.facts.gpu
        assert gpu is not None and gpu.driver_version == "580.159.04"
        assert gpu.gpus[0].name == "NVIDIA H200" and gpu.kernel_module_type == "open"
        assert bundle.facts.container is None
        assert [p.name for p in bundle.logs] == ["given-1-k3.log"]


def test_real_bundle_diagnosis_trusts_the_host_over_a_foreign_log() -> None:
    verdict = diagnose(DiagnoseOptions(bundle=REAL / f"{NAME}.tar.gz", image_cuda="13.0"))
    assert verdict.compat is not None and verdict.compat.verdict == "compatible"
    assert verdict.compat.driver == "580.159.04"
    assert not verdict.primary.driver_change_advised
    assert verdict.primary.confidence < 0.9


def test_a_file_changed_after_collect_is_reported(tmp_path: Path) -> None:
    copy = tmp_path / NAME
    shutil.copytree(REAL / NAME, copy)
    with (copy / "logs" / "given-1-k3.log").open("a") as log:
        log.write("an edit after the fact\n")
    (copy / "gpu" / "topo-m.txt").unlink()
    with open_bundle(copy) as bundle:
        assert any("given-1-k3.log: checksum differs" in p for p in bundle.problems)
        assert any("topo-m.txt: listed in the manifest but missing" in p for p in bundle.problems)
    assert any("checksum differs" in note for note in diagnose(DiagnoseOptions(bundle=copy)).notes)


def test_newer_schema_and_broken_manifest_are_one_line_errors(tmp_path: Path) -> None:
    copy = tmp_path / NAME
    shutil.copytree(REAL / NAME, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    (copy / "manifest.json").write_text(json.dumps({**manifest, "schema_version": 99}))
    with pytest.raises(BundleError, match="newer than this vllm-triage"):
        diagnose(DiagnoseOptions(bundle=copy))
    (copy / "manifest.json").write_text("{not json")
    with pytest.raises(BundleError, match=r"not a valid manifest\.json"):
        diagnose(DiagnoseOptions(bundle=copy))
    (copy / "manifest.json").unlink()
    with pytest.raises(BundleError, match="no bundle in this folder"):
        diagnose(DiagnoseOptions(bundle=copy))
    with pytest.raises(InputError, match="no such bundle"):
        diagnose(DiagnoseOptions(bundle=tmp_path / "absent"))


def test_malicious_archive_through_the_cli_writes_nothing_outside(tmp_path: Path) -> None:
    evil = tmp_path / "evil.tar.gz"
    with tarfile.open(evil, "w:gz") as archive:
        data = b"pwned"
        member = tarfile.TarInfo("../../escaped.txt")
        member.size = len(data)
        archive.addfile(member, io.BytesIO(data))
    before = sorted(p.name for p in tmp_path.parent.iterdir())
    result = run_cli("diagnose", "--bundle", str(evil))
    assert result.exit_code == 2
    assert result.stderr.startswith("vllm-triage: error:") and len(result.stderr.splitlines()) == 1
    assert "Traceback" not in result.stderr and "'..'" in result.stderr
    assert sorted(p.name for p in tmp_path.parent.iterdir()) == before
    assert not (tmp_path.parent / "escaped.txt").exists()


def test_truncated_archive_through_the_cli(tmp_path: Path) -> None:
    data = (REAL / f"{NAME}.tar.gz").read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    result = run_cli("diagnose", "--bundle", str(cut))
    assert result.exit_code == 2 and "truncated" in result.stderr
    assert len(result.stderr.splitlines()) == 1
