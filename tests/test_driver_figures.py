"""One driver requirement per image, the same in every command (issue 20): for the Kimi K3
image (CUDA 13.0.2) the floor that decides the verdict is r580 (CUDA 13.x minor-version
compatibility, NVIDIA's Table 2: >= 580), the toolkit's own driver 580.95.05 (Table 3, 13.0
Update 2) and the recommended target 580.173.02 (the r580 long-term branch's current release,
recovery.yaml). compat, diagnose, plan, preflight, fleet scan, baseline compare and record carry
the three, in JSON; none prints a minimum that contradicts its verdict."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli import Result, run_cli
from test_report import build_case

from vllm_triage.knowledge import KnowledgeBase

DATA = Path(__file__).parent / "data"
K3_IMAGE = DATA / "image-configs" / "vllm-openai-cu130.inspect.json"  # CUDA 13.0.2
FIGURES = {"min_driver": "580", "toolkit_driver": "580.95.05", "recommended_driver": "580.173.02"}


def _json(result: Result) -> Any:
    assert result.exit_code in (0, 1), (result.exit_code, result.stderr)
    return json.loads(result.stdout)


def _figures(document: dict[str, Any]) -> dict[str, Any]:
    return {name: document.get(name) for name in FIGURES}


@pytest.fixture(scope="module")
def whole_case(tmp_path_factory: pytest.TempPathFactory, kb: KnowledgeBase) -> Path:
    return build_case(tmp_path_factory.mktemp("figures"), kb)


def test_compat_says_the_three_and_its_verdict_follows_the_floor() -> None:
    verdicts = {
        driver: _json(run_cli("compat", "--driver", driver, "--cuda", "13.0.2", "--format", "json"))
        for driver in ("575.57.08", "580.65.06", "580.95.05")
    }
    for driver, verdict in verdicts.items():
        assert _figures(verdict) == FIGURES, driver
    # below the floor: incompatible; at any r580 release: it runs (the floor decides, not the
    # toolkit's driver)
    assert verdicts["575.57.08"]["verdict"] == "incompatible"
    assert verdicts["580.65.06"]["verdict"] == "compatible"
    assert "580.95.05" in verdicts["580.65.06"]["explanation"]  # said, as the toolkit's driver
    text = run_cli("compat", "--driver", "580.65.06", "--cuda", "13.0.2").stdout
    assert "Minimum driver (to start)  580" in " ".join(text.split("│"))


def test_every_step_of_the_case_carries_the_same_three(whole_case: Path) -> None:
    diagnosis = json.loads((whole_case / "diagnosis.json").read_text())
    assert diagnosis["compat"]["cuda"] == "13.0.2"
    assert _figures(diagnosis["compat"]) == FIGURES
    plan = json.loads((whole_case / "plan.json").read_text())
    assert _figures(plan["plan"]["target"]) == FIGURES
    comparison = json.loads((whole_case / "baseline-comparison.json").read_text())
    assert _figures(comparison) == FIGURES
    record = _json(run_cli("record", "--case", str(whole_case), "--format", "json"))
    assert _figures(record["driver"]) == FIGURES
    shown = _json(run_cli("case", "show", str(whole_case), "--format", "json"))
    plans = [entry for entry in shown["artifacts"] if entry["kind"] == "plan"]
    assert [_figures(entry) for entry in plans] == [FIGURES]


def test_preflight_and_fleet_scan_carry_the_same_three(tmp_path: Path) -> None:
    preflight = _json(
        run_cli(
            "preflight", "--image-config", str(K3_IMAGE), "--driver", "575.57.08", "--gpu",
            "NVIDIA B200", "--gpu-count", "8", "--shm-size", "16g", "--format", "json",
        )
    )  # fmt: skip
    assert _figures(preflight["host"]) == FIGURES
    nodes = tmp_path / "nodes.json"
    nodes.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": []}))
    scan = _json(
        run_cli(
            "fleet", "scan", "--image-config", str(K3_IMAGE), "--nodes", str(nodes), "--case",
            str(tmp_path / "case"), "--format", "json",
        )
    )  # fmt: skip
    assert _figures(scan) == FIGURES
