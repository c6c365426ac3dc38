"""vllm-triage record and record check, on a case made of real parts (tests/test_report.py's
build_case: collect on the replayed Kimi K3 node, diagnose on its log, plan, two baselines of the
replayed B200 node compared, the validation run recorded against the real vLLM CPU server,
prefix-check): the adopted path and its reason, each part of the verified scope with the run and
figures behind it, the four comparisons, the widening conditions with their artifacts, the review
date and its triggers from the recipe, in English, Korean and Japanese; `record check` against a
local server that speaks the registry's tag-list API (the anonymous token flow and pages, as
Docker Hub does) and against Debian's real registry (docker-registry); one-line errors for bad
input, nothing overwritten.

Start stability and the two-endpoint comparison need runs this test data does not hold (a start
of the real server costs minutes): those runs are the recorded real run with a `starts` block
(numbers of the shape `validate --start-cmd --starts 2` writes) or its comparison with itself
(validate's own compare_runs) added, said where they are made.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from hashlib import sha256
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
from cli import Result, run_cli
from deadlines import ENDLESS_S, ends_in_time
from test_report import REAL_RUN, build_case

from vllm_triage import cli as cli_module
from vllm_triage.baseline.models import BaselineComparison, ComparisonItem
from vllm_triage.errors import InputError
from vllm_triage.i18n import catalog
from vllm_triage.knowledge import KnowledgeBase, load_knowledge
from vllm_triage.knowledge.check import data_problems
from vllm_triage.models import Evidence, Finding
from vllm_triage.record import (
    DecisionRecord,
    RecordCheckOptions,
    RecordOptions,
    record,
    record_check,
)
from vllm_triage.record import messages as m
from vllm_triage.record import registry as registry_module
from vllm_triage.record.judge import Asked, RunRead, tool_calls_correct, widening
from vllm_triage.record.registry import RegistryError, list_tags, matching
from vllm_triage.render.record import record_markdown, review_markdown
from vllm_triage.validate.compare import compare_runs
from vllm_triage.validate.models import RunNode, StartRecord, StartSummary, ValidationRun

RUN = "runs/20261201T104500000000Z"
SUMMARY = f"{RUN}/summary.json"
REPOSITORY = "vllm/vllm-openai"
TOKEN = "anonymous-pull-token-0123456789"
ENV_REQUIRE_REGISTRY = "VLLM_TRIAGE_REQUIRE_REGISTRY"


def _ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def _one_line_error(result: Result, *words: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


@pytest.fixture(scope="module")
def whole_case(tmp_path_factory: pytest.TempPathFactory, kb: KnowledgeBase) -> Path:
    return build_case(tmp_path_factory.mktemp("record"), kb)


@pytest.fixture
def case(whole_case: Path, tmp_path: Path) -> Path:
    """A copy of the whole case this test may change."""
    copy = tmp_path / "triage"
    shutil.copytree(whole_case, copy, symlinks=True)
    return copy


def _record_json(case: Path, *args: str) -> dict[str, Any]:
    result = _ok(run_cli("record", "--case", str(case), "--format", "json", *args))
    document = json.loads(result.stdout)
    assert json.loads((case / "record.json").read_text()) == document
    return document


def _by_id(items: list[dict[str, Any]], key: str = "id") -> dict[str, dict[str, Any]]:
    return {item[key]: item for item in items}


def _real_run() -> ValidationRun:
    return ValidationRun.model_validate_json((REAL_RUN / "summary.json").read_text())


def _case_run(case: Path) -> ValidationRun:
    """The case's run: the recorded real run as `validate --node gpu-node-17` wrote it."""
    return ValidationRun.model_validate_json((case / SUMMARY).read_text())


def _add_run(case: Path, stamp: str, run: ValidationRun) -> str:
    folder = case / "runs" / stamp
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(run.model_dump_json(indent=2))
    return f"runs/{stamp}"


def _later(case: Path) -> str:
    """A moment after the case's diagnosis (a run made after it)."""
    made = datetime.fromisoformat(json.loads((case / "diagnosis.json").read_text())["created_at"])
    return (made + timedelta(hours=2)).isoformat()


def _starts(ready: int, failed_cause: str | None = None) -> StartSummary:
    """Start stability as `validate --start-cmd FILE --starts N` writes it: `ready` starts that
    reached /health, then one that exited with a diagnosed cause (when given)."""
    starts = [
        StartRecord(number=n, outcome="ready", ready_s=300.0 + n, engine_init_s=280.0 + n * 2)
        for n in range(1, ready + 1)
    ]
    if failed_cause is not None:
        starts.append(
            StartRecord(
                number=ready + 1,
                outcome="exited",
                exit_code=1,
                reason="the process exited before /health answered",
                diagnosis=Finding(
                    cause=failed_cause,  # type: ignore[arg-type]
                    phase="before_weights",
                    confidence=0.95,
                    evidence=[Evidence(file="start-2.log", line=14, text="driver too old")],
                    summary="The driver is too old for the image's CUDA.",
                    next_steps=["Upgrade the driver."],
                    avoid=["Do not turn flags."],
                    driver_change_advised=True,
                ),
                phase_reached="before_weights",
            )
        )
    return StartSummary(
        command=["vllm", "serve", "moonshotai/Kimi-K3"],
        node="gpu-node-17",
        requested=len(starts),
        ready=ready,
        engine_init_s=[s.engine_init_s for s in starts if s.engine_init_s is not None],
        ready_s=[s.ready_s for s in starts if s.ready_s is not None],
        starts=starts,
    )


# --- the record of a whole case ------------------------------------------------------------------


@pytest.mark.slow
def test_the_record_of_a_whole_case(case: Path) -> None:
    document = _record_json(case, "--maintenance-acceptable", "--answered-by", "Kim Jisoo")
    made = DecisionRecord.model_validate(document)
    # adopted path and reason: the plan's recommendation under its constraints
    assert made.adopted.path == "upgrade_driver" and made.adopted.follows_plan
    assert made.reason.plan_reason.startswith("A maintenance window is available")
    constraints = made.reason.constraints
    assert constraints.maintenance_window is True and constraints.cluster_can_change is True
    assert constraints.deadline_hours == 48 and constraints.can_maintain_build is False
    # what it was validated on: the plan's node, the driver of its newest baseline, the floor
    on = made.validated_on
    assert on is not None and on.tied and on.run == RUN
    assert (on.node, on.driver, on.baseline, on.min_driver) == (
        "gpu-node-17",
        "580.105.08",
        "after",
        "580",
    )
    assert on.gpus == 8 and on.image is None
    # the driver change decided: the plan's three figures for the image, and the way back
    change = made.driver
    assert change is not None
    assert (change.installed, change.recommended_driver, change.recommended_branch) == (
        "575.57.08",
        "580.173.02",
        "r580",
    )
    assert (change.min_driver, change.rollback_driver) == ("580", "575.57.08")
    plan_target = json.loads((case / "plan.json").read_text())["plan"]["target"]
    assert change.toolkit_driver == plan_target["toolkit_driver"]
    shown = (case / "record.md").read_text()
    assert "node gpu-node-17, driver 580.105.08 (baseline after)" in shown
    assert "image not named (vllm-triage validate --image REF)" in shown
    # verified scope: each part with the run and the figures that prove it
    scope = {item.id: item for item in made.verified}
    assert scope["model_load"].status == "verified"
    assert scope["model_load"].proof is not None
    assert scope["model_load"].proof.figures["version"] == "0.32.0"
    short = scope["short_text"]
    assert short.status == "verified" and short.proof is not None
    assert short.proof.artifact == SUMMARY and short.fields["run"] == RUN
    assert short.proof.figures["stream_ttft_s"] == pytest.approx(0.0279, abs=1e-4)
    assert short.proof.url == "http://127.0.0.1:55985" and short.proof.model == "tiny-llama"
    long = scope["long_context"]
    assert long.status == "verified" and long.proof and long.proof.figures["prompt_tokens"] == 1998
    assert scope["image"].status == "not_verified" and scope["image"].basis == "scope_not_supported"
    assert "text-only model" in scope["image"].fields["reason"]
    assert scope["tool_calls"].status == "verified"
    assert scope["tool_calls"].proof and scope["tool_calls"].proof.figures["valid"] == 6
    assert scope["structured_output"].status == "failed"
    concurrency = scope["concurrency"].proof
    assert concurrency and concurrency.figures["last_good_level"] == 4
    assert concurrency.figures["ttft_p50_s"] == pytest.approx(0.0379)
    assert scope["multi_node"].status == "not_verified"
    assert scope["multi_node"].basis == "scope_not_climbed" and scope["multi_node"].proof is None
    assert all(
        "kv_cache_usage_perc" not in (i.proof.figures if i.proof else {}) for i in scope.values()
    )
    # unverified: the rungs no run passed, then what no run proves
    unverified = [u.id for u in made.unverified]
    assert unverified[:3] == ["scope_image", "scope_structured_output", "scope_multi_node"]
    assert {"production_concurrency", "long_running", "failure_recovery"} <= set(unverified)
    # the four comparisons
    comparisons = {c.id: c for c in made.comparisons}
    recurs = comparisons["start_failure_recurs"]
    assert recurs.answer == "unknown" and recurs.basis == "recurs_no_run", (
        "the recorded run is older than this case's diagnosis"
    )
    prefix = comparisons["prefix_cache_hits"]
    assert prefix.answer == "yes" and prefix.good is True
    assert prefix.fields["hits"] == "3456" and prefix.fields["queries"] == "4996"
    assert prefix.proof[0].artifact == SUMMARY and prefix.proof[0].rung == "same_prefix"
    tools = comparisons["tool_calls_correct"]
    assert tools.answer == "no" and tools.good is False
    assert tools.fields["tool_valid"] == "6" and tools.fields["so_errors"] == "4"
    assert [p.rung for p in tools.proof] == ["tool_calls", "structured_output"]
    maintenance = comparisons["maintenance_acceptable"]
    assert maintenance.answer == "yes" and maintenance.answered_by == "Kim Jisoo"
    assert maintenance.answered_at is not None
    # the widening conditions, each with the artifact behind it
    widening = {w.check: w for w in made.widening}
    plan = json.loads((case / "plan.json").read_text())
    assert [w.condition for w in made.widening] == plan["plan"]["widen_when"]
    assert widening["engine_init_repeated"].status == "unknown"
    assert widening["engine_init_repeated"].basis == "init_no_run"
    # the node's baselines compared without a regression, but neither captured an existing
    # model's request (no --endpoint): the existing models' regression is not proven
    regression = widening["regression_passes"]
    assert regression.status == "unknown" and regression.basis == "regression_no_endpoint"
    assert regression.proof[0].artifact == "baseline-comparison.json"
    assert regression.fields["before"] == "before" and regression.fields["after"] == "after"
    requests = widening["requests_succeed"]
    assert requests.status == "met" and requests.fields["tokens"] == "1998"
    assert {p.rung for p in requests.proof} == {"short_text", "target_context"}
    assert widening["no_communication_error"].status == "unknown"
    approval = widening["rollback_and_approval"]
    assert approval.status == "unknown" and approval.fields["driver"] == "575.57.08"
    # rollback conditions of the path, the plan's procedure
    assert {r.target for r in made.rollback} == {"driver", "image", "nodes"}
    assert made.rollback_procedure == plan["plan"]["rollback"]
    # re-evaluation: 30 days, the date and the recipe's image triggers with their source
    assert made.review.days == 30
    created = datetime.fromisoformat(made.created_at or "").date()
    assert made.review.date == (created + timedelta(days=30)).isoformat()
    triggers = {t.id: t for t in made.review.triggers}
    assert set(triggers) == {"review-date", "official-cu129-image", "stable-release"}
    cu129 = triggers["official-cu129-image"]
    assert cu129.repository == REPOSITORY and cu129.tags == ["kimi-k3-cu129"]
    assert cu129.source and "Kimi-K3.yaml" in cu129.source and cu129.certainty == "secondary"
    assert made.recipe == "kimi-k3"
    # what it was made from, each file with its digest
    names = [f.name for f in made.made_from]
    assert names == ["diagnosis.json", "plan.json", "baseline-comparison.json", SUMMARY]
    digest = sha256((case / "plan.json").read_bytes()).hexdigest()
    assert made.made_from[1].sha256 == digest
    markdown = (case / "record.md").read_text()
    assert "## vllm-triage: Decision record" in markdown
    assert "| Short text request | verified |" in markdown and f"`{SUMMARY} (" in markdown
    assert "- [ ] **An official image with Kimi K3 support appears" in markdown


def test_the_record_is_saved_and_an_earlier_one_kept(case: Path) -> None:
    _record_json(case)
    first = (case / "record.json").read_bytes()
    _record_json(case, "--review-days", "7")
    history = sorted(p.name for p in (case / "history").glob("record-*"))
    assert len(history) == 2 and {Path(n).suffix for n in history} == {".json", ".md"}
    assert (case / "history" / history[0]).read_bytes() == first
    assert json.loads((case / "record.json").read_text())["review"]["days"] == 7


def test_starts_and_the_second_endpoint_are_the_records_figures(
    case: Path, kb: KnowledgeBase
) -> None:
    run = _case_run(case)
    # the recorded run, as a run made after the diagnosis with two timed starts and replayed
    # against a second endpoint (validate's own comparison of the run with itself)
    later = run.model_copy(
        update={
            "created_at": _later(case),
            "starts": _starts(2),
            "comparison": compare_runs(run, run.model_copy(update={"url": "http://10.0.0.9:8000"})),
        }
    )
    folder = _add_run(case, "20261201T150000000000Z", later)
    made = record(RecordOptions(case=case), kb=kb)
    scope = {item.id: item for item in made.verified}
    load = scope["model_load"]
    assert load.status == "verified" and load.basis == "starts_ready"
    assert load.proof and load.proof.figures["engine_init_s"] == [282.0, 284.0]
    assert load.fields["init"] == "282.0 s, 284.0 s" and load.fields["node"] == "gpu-node-17"
    compared = scope["short_text"].proof.compared if scope["short_text"].proof else None
    assert compared is not None and compared.url == "http://10.0.0.9:8000" and compared.both_passed
    assert compared.figures["stream_ttft_s"][0] == compared.figures["stream_ttft_s"][1]
    init = next(w for w in made.widening if w.check == "engine_init_repeated")
    assert init.status == "met" and init.proof[0].artifact == f"{folder}/summary.json"
    recurs = next(c for c in made.comparisons if c.id == "start_failure_recurs")
    assert recurs.answer == "no" and recurs.good is True and recurs.basis == "recurs_starts_ready"
    assert made.runs == [RUN, folder]
    text = record_markdown(made)
    assert "compared with http://10.0.0.9:8000: passed" in text
    assert "2 of 2 starts reached /health on gpu-node-17" in text


def test_a_start_that_fails_again_is_the_failure_recurring(case: Path, kb: KnowledgeBase) -> None:
    run = _case_run(case).model_copy(
        update={"created_at": _later(case), "starts": _starts(1, "driver_too_old")}
    )
    _add_run(case, "20261201T150000000000Z", run)
    made = record(RecordOptions(case=case), kb=kb)
    recurs = next(c for c in made.comparisons if c.id == "start_failure_recurs")
    assert recurs.answer == "yes" and recurs.good is False and recurs.fields["number"] == "2"
    assert next(i for i in made.verified if i.id == "model_load").status == "failed"
    init = next(w for w in made.widening if w.check == "engine_init_repeated")
    assert init.status == "not_met" and "exited (driver_too_old)" in init.fields["outcome"]


def test_one_timed_start_is_not_repeated(case: Path, kb: KnowledgeBase) -> None:
    run = _case_run(case).model_copy(update={"starts": _starts(1)})
    _add_run(case, "20261201T150000000000Z", run)
    made = record(RecordOptions(case=case), kb=kb)
    init = next(w for w in made.widening if w.check == "engine_init_repeated")
    assert init.status == "unknown" and init.basis == "init_once"


def _node_bound(made: DecisionRecord) -> dict[str | None, Any]:
    bound = ("engine_init_repeated", "requests_succeed")
    found = {w.check: w for w in made.widening if w.check in bound}
    assert set(found) == set(bound)
    return found


def test_a_run_counts_only_on_the_plans_node_with_a_driver_at_the_floor(
    case: Path, kb: KnowledgeBase
) -> None:
    """The plan's node is gpu-node-17 (upgrade_driver: evidence_on plan_nodes, the image's floor
    r580). The case's one run, passing with two ready starts, tied five ways."""
    run = _case_run(case).model_copy(update={"starts": _starts(2)})
    assert (run.node.name, run.node.driver, run.node.baseline) == (
        "gpu-node-17",
        "580.105.08",
        "after",
    )
    cases = {
        None: run.node,
        "run_node_unknown": RunNode(),
        "run_other_node": RunNode(name="vm", named_by="starts"),
        "run_driver_unknown": RunNode(name="gpu-node-17", named_by="flag"),
        "run_driver_below_floor": run.node.model_copy(update={"driver": "575.57.08"}),
    }
    tr = catalog("en")
    for basis, node in cases.items():
        (case / SUMMARY).write_text(run.model_copy(update={"node": node}).model_dump_json())
        made = record(RecordOptions(case=case), kb=kb)
        for check, judged in _node_bound(made).items():
            if basis is None:
                assert judged.status == "met", (check, judged)
                continue
            assert (judged.status, judged.basis) == ("unknown", basis), (check, judged)
            assert judged.fields["nodes"] == "gpu-node-17" and judged.fields["run"] == RUN
            said = tr(m.BASIS[basis], **judged.fields)
            assert "{" not in said
            if basis != "run_driver_below_floor":
                assert "vllm-triage validate --node" in said or "baseline capture" in said
            else:
                assert "575.57.08" in said and "580" in said


def test_the_isolated_environment_counts_any_node_at_the_floor(
    case: Path, kb: KnowledgeBase
) -> None:
    """isolated_env (evidence_on any_node): the isolated node is apart from the shared cluster,
    so a node the plan does not name counts, when its driver meets the image's floor."""
    run = _case_run(case).model_copy(update={"starts": _starts(2)})
    for driver, status in (("580.105.08", "met"), ("575.57.08", "unknown")):
        node = run.node.model_copy(update={"name": "iso-1", "driver": driver})
        (case / SUMMARY).write_text(run.model_copy(update={"node": node}).model_dump_json())
        made = record(RecordOptions(case=case, adopted="isolated_env"), kb=kb)
        assert _node_bound(made)["engine_init_repeated"].status == status, driver


def test_another_path_than_the_plans_is_recorded_with_the_plans_reason_against_it(
    case: Path,
) -> None:
    document = _record_json(
        case, "--adopted", "isolated_env", "--reason", "The window moved to next month."
    )
    made = DecisionRecord.model_validate(document)
    plan = json.loads((case / "plan.json").read_text())
    isolated = next(a for a in plan["alternatives"] if a["path"] == "isolated_env")
    assert made.adopted.path == "isolated_env" and not made.adopted.follows_plan
    assert made.reason.plan_reason == isolated["why_not"]
    assert made.reason.given == "The window moved to next month."
    assert [n.basis for n in made.notes] == ["note_adopted_differs"]
    assert {r.id for r in made.rollback} == {
        "image_answers",
        "isolated_results_fail",
        "isolated_returned",
    }


def test_a_record_needs_answers_with_who_gave_them(case: Path, kb: KnowledgeBase) -> None:
    _one_line_error(
        run_cli("record", "--case", str(case), "--approval-ready"), "--answered-by NAME"
    )
    made = record(RecordOptions(case=case, approval_ready=True, answered_by="Sato Yui"), kb=kb)
    approval = next(w for w in made.widening if w.check == "rollback_and_approval")
    assert approval.status == "met" and approval.answered_by == "Sato Yui"
    maintenance = next(c for c in made.comparisons if c.id == "maintenance_acceptable")
    assert maintenance.answer == "unknown", "only the approval was answered"


class _Asker:
    def __init__(self, answers: list[bool], name: str) -> None:
        self.answers, self.given, self.asked = list(answers), name, []

    def confirm(self, question: str) -> bool:
        self.asked.append(question)
        return self.answers.pop(0)

    def name(self, question: str) -> str:
        self.asked.append(question)
        return self.given


def test_on_a_terminal_the_team_is_asked(case: Path, kb: KnowledgeBase) -> None:
    asker = _Asker([False, True], "  Lee   Minho ")
    made = record(RecordOptions(case=case, ask=asker), kb=kb)
    assert asker.asked == [m.ASK_MAINTENANCE, m.ASK_APPROVAL, m.ASK_NAME]
    maintenance = next(c for c in made.comparisons if c.id == "maintenance_acceptable")
    assert maintenance.answer == "no" and maintenance.answered_by == "Lee Minho"
    approval = next(w for w in made.widening if w.check == "rollback_and_approval")
    assert approval.status == "met" and approval.answered_by == "Lee Minho"


def test_the_prompt_on_the_command_line(case: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cli_module, "_interactive", lambda: True)
    result = _ok(
        run_cli("record", "--case", str(case), "--lang", "ko", "--format", "json",
                input="y\nn\nPark Jiwoo\n")
    )  # fmt: skip
    assert catalog("ko")(m.ASK_MAINTENANCE) in result.stderr
    made = DecisionRecord.model_validate_json((case / "record.json").read_text())
    maintenance = next(c for c in made.comparisons if c.id == "maintenance_acceptable")
    assert maintenance.answer == "yes" and maintenance.answered_by == "Park Jiwoo"
    approval = next(w for w in made.widening if w.check == "rollback_and_approval")
    assert approval.status == "not_met"


# --- languages -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("language", "words"),
    [
        ("ko", ("결정 기록", "검증된 범위", "확대 조건", "롤백 조건", "Kimi K3 지원이 vLLM 안정 릴리스에 포함")),
        ("ja", ("決定記録", "確認済み範囲", "拡大の条件", "ロールバック条件", "Kimi K3 対応が vLLM の安定版リリースに入る")),
    ],
)  # fmt: skip
def test_the_record_in_korean_and_japanese(
    case: Path, language: str, words: tuple[str, ...]
) -> None:
    result = _ok(run_cli("record", "--case", str(case), "--lang", language, "--format", "markdown"))
    for word in words:
        assert word in result.stdout, word
    assert result.stdout == (case / "record.md").read_text()
    tr = catalog(language)  # type: ignore[arg-type]
    for english in (m.TITLE, m.VERIFIED, m.UNVERIFIED, m.COMPARISONS, m.WIDENING, m.REVIEW):
        assert tr(english) != english and english not in result.stdout
    for question in m.QUESTIONS.values():
        assert tr(question) in result.stdout
    made = DecisionRecord.model_validate_json((case / "record.json").read_text())
    assert made.adopted.name == "Upgrade the host driver", "the JSON keeps English"
    # every stored sentence of this record has a translation with the same fields
    for item in made.verified:
        assert tr(m.BASIS[item.basis]) != m.BASIS[item.basis]
    for unverified in made.unverified:
        assert tr(unverified.why) != unverified.why and tr(unverified.name) != unverified.name
    for rule in made.rollback:
        assert tr(rule.when) != rule.when
    for trigger in made.review.triggers:
        assert tr(trigger.name) != trigger.name


# --- record check --------------------------------------------------------------------------------


class _Registry:
    """A registry that speaks the OCI distribution tag-list API as Docker Hub does: GET
    /v2/<name>/tags/list answers 401 with a Bearer challenge until a token from its realm
    (/token, asked for anonymously) comes with the request; tags come in pages of `page`, the
    next one named by a Link header."""

    def __init__(self, tags: list[str], page: int = 1000) -> None:
        self.tags, self.page = tags, page
        self.requests: list[tuple[str, str | None]] = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:
                outer.requests.append((self.path, self.headers.get("Authorization")))
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                if parts.path == "/token":
                    if query.get("scope") != f"repository:{REPOSITORY}:pull":
                        return self._send(400, {"errors": [{"code": "DENIED"}]})
                    return self._send(200, {"token": TOKEN, "expires_in": 300})
                if parts.path != f"/v2/{REPOSITORY}/tags/list":
                    return self._send(404, {"errors": [{"code": "NAME_UNKNOWN"}]})
                if self.headers.get("Authorization") != f"Bearer {TOKEN}":
                    realm = f"http://127.0.0.1:{outer.port}/token"
                    challenge = (
                        f'Bearer realm="{realm}",service="registry.test",'
                        f'scope="repository:{REPOSITORY}:pull"'
                    )
                    return self._send(401, {"errors": [{"code": "UNAUTHORIZED"}]}, challenge)
                size = min(int(query.get("n", "100")), outer.page)
                start = outer.tags.index(query["last"]) + 1 if "last" in query else 0
                chunk = outer.tags[start : start + size]
                link = None
                if start + size < len(outer.tags):
                    link = f'</v2/{REPOSITORY}/tags/list?n={size}&last={chunk[-1]}>; rel="next"'
                self._send(200, {"name": REPOSITORY, "tags": chunk}, link=link)

            def _send(
                self, code: int, body: object, challenge: str | None = None, link: str | None = None
            ) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                if challenge:
                    self.send_header("WWW-Authenticate", challenge)
                if link:
                    self.send_header("Link", link)
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def registry() -> Iterator[_Registry]:
    server = _Registry(["kimi-k3", "latest", "v0.26.0", "v0.26.0-cu129", "nightly-2026-11-30"])
    yield server
    server.close()


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _check(case: Path, *args: str) -> tuple[Result, dict[str, Any]]:
    result = run_cli("record", "check", "--case", str(case), "--format", "json", *args)
    assert result.exit_code in (0, 1, 4), (result.exit_code, result.stderr)
    return result, json.loads(result.stdout)


def test_not_due_while_the_registry_has_no_such_tag(case: Path, registry: _Registry) -> None:
    _record_json(case)
    before = (case / "record.json").read_bytes()
    result, review = _check(case, "--registry", registry.url)
    assert result.exit_code == 0 and review["due"] is False
    triggers = _by_id(review["triggers"])
    assert triggers["review-date"]["status"] == "not_met"
    for name in ("official-cu129-image", "stable-release"):
        assert triggers[name]["status"] == "not_met" and triggers[name]["tags_read"] == 5
    # the anonymous token flow: a challenge, a token asked for without credentials, the list
    paths = [(path.split("?")[0], auth) for path, auth in registry.requests]
    assert paths == [
        (f"/v2/{REPOSITORY}/tags/list", None),
        ("/token", None),
        (f"/v2/{REPOSITORY}/tags/list", f"Bearer {TOKEN}"),
    ], "one listing serves both triggers of the repository"
    assert "service=registry.test" in registry.requests[1][0]
    assert (case / "record.json").read_bytes() == before and not (case / "history").exists()
    assert TOKEN not in result.stdout + result.stderr


def test_due_when_an_official_cu129_image_appears(case: Path, registry: _Registry) -> None:
    _record_json(case)
    registry.tags += ["v0.27.1-cu129-ubuntu2404", "kimi-k3-cu129", "v0.28.0", "v0.28.0rc1"]
    registry.page = 3  # pages, as a registry with thousands of tags sends them
    result, review = _check(case, "--registry", registry.url)
    assert result.exit_code == 1 and review["due"] is True
    triggers = _by_id(review["triggers"])
    cu129 = triggers["official-cu129-image"]
    assert cu129["status"] == "met" and cu129["tags_read"] == 9
    assert cu129["found"] == ["v0.27.1-cu129-ubuntu2404", "kimi-k3-cu129"]
    assert triggers["stable-release"]["found"] == ["v0.28.0"], "no rc, no suffix, 0.27.0 or later"
    text = _ok_or_due(run_cli("record", "check", "--case", str(case), "--registry", registry.url))
    assert "Due for review" in text and "kimi-k3-cu129" in text


def _ok_or_due(result: Result) -> str:
    assert result.exit_code in (0, 1), result.stderr
    return result.stdout


def test_an_unreachable_registry_leaves_the_trigger_unknown_and_the_check_incomplete(
    case: Path,
) -> None:
    """Nothing due among what could be checked, two triggers not checked: exit 4 (a scheduled
    check learns it checked less than the record asks), the triggers named."""
    _record_json(case)
    url = f"http://127.0.0.1:{_free_port()}"
    result, review = _check(case, "--registry", url, "--deadline", "5")
    assert result.exit_code == 4 and review["due"] is False
    assert review["unchecked"] == ["official-cu129-image", "stable-release"]
    triggers = _by_id(review["triggers"])
    for name in ("official-cu129-image", "stable-release"):
        assert triggers[name]["status"] == "unknown"
        assert "ConnectError" in triggers[name]["fields"]["error"]
    markdown = run_cli(
        "record", "check", "--case", str(case), "--registry", url, "--format", "markdown"
    )
    assert markdown.exit_code == 4
    assert "Not checked (2)" in markdown.stdout and "exits 4" in markdown.stdout
    for name in (triggers["official-cu129-image"]["name"], triggers["stable-release"]["name"]):
        assert name in markdown.stdout


def test_due_when_the_review_date_has_come(case: Path, kb: KnowledgeBase) -> None:
    _record_json(case, "--review-days", "0")
    url = f"http://127.0.0.1:{_free_port()}"
    result, review = _check(case, "--registry", url, "--lang", "ja")
    assert result.exit_code == 1 and review["due"] is True, "due wins over unchecked triggers"
    assert review["unchecked"]
    assert _by_id(review["triggers"])["review-date"]["status"] == "met"
    text = run_cli("record", "check", "--case", str(case), "--registry", url, "--lang", "ja")
    assert text.exit_code == 1 and "再評価が必要" in text.stdout
    # by the library: a record of 30 days is due on the 30th day, not on the 29th
    _record_json(case)
    made = DecisionRecord.model_validate_json((case / "record.json").read_text())
    day = date.fromisoformat(made.review.date)
    for today, due in ((day - timedelta(days=1), False), (day, True)):
        review_made = record_check(
            RecordCheckOptions(case=case, today=today), tags=lambda registry, name: []
        )
        assert review_made.due is due
        assert "再評価" in review_markdown(review_made, "ja")


@pytest.mark.slow
def test_registry_answers_that_are_not_tag_lists(monkeypatch: pytest.MonkeyPatch) -> None:
    def serve(handler: Any) -> tuple[ThreadingHTTPServer, str]:
        server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        return server, f"http://127.0.0.1:{server.server_address[1]}"

    released = threading.Event()

    class Answers(BaseHTTPRequestHandler):
        mode = ""

        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            mode = type(self).mode
            if mode == "slow":  # no answer until the test ends
                released.wait(ENDLESS_S)
            if mode == "basic":
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="registry"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = {
                "big": json.dumps({"tags": ["x" * 100] * 60_000}),
                "html": "<html>maintenance</html>",
                "elsewhere": json.dumps({"tags": ["a"]}),
                "slow": json.dumps({"tags": []}),
            }[mode].encode()
            self.send_response(200)
            if mode == "elsewhere":
                self.send_header("Link", '<http://203.0.113.7/v2/x/tags/list?last=a>; rel="next"')
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

    server, url = serve(Answers)
    try:
        for mode, words in (
            ("big", "larger than"),
            ("html", "not JSON"),
            ("elsewhere", "another host"),
            ("basic", "asks for credentials"),
            ("slow", "no answer within 0.5 s"),
        ):
            Answers.mode = mode
            deadline = 0.5 if mode == "slow" else 10
            with ends_in_time(deadline, mode), pytest.raises(RegistryError, match=words):
                list_tags(url, REPOSITORY, deadline_s=deadline)
    finally:
        released.set()
        server.shutdown()
        server.server_close()


def test_tags_that_meet_a_trigger() -> None:
    pattern = r"v(?P<version>[0-9]+\.[0-9]+\.[0-9]+)-cu129(-[a-z0-9.]+)?"
    tags = ["v0.26.9-cu129", "v0.27.0-cu129", "v0.27.0-cu130", "v0.30.0-cu129-ubuntu2404",
            "v0.100.0-cu129", "xv0.28.0-cu129", "kimi-k3-cu129"]  # fmt: skip
    assert matching(tags, ["kimi-k3-cu129"], pattern, "0.27.0") == [
        "v0.27.0-cu129",
        "v0.30.0-cu129-ubuntu2404",
        "v0.100.0-cu129",
        "kimi-k3-cu129",
    ]


# --- the real registry (Debian's docker-registry) ------------------------------------------------


@pytest.fixture(scope="module")
def real_registry(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Debian's docker-registry (distribution 2.8) on 127.0.0.1, storage in a temporary folder,
    no authentication; `make system-deps` installs it."""
    program = shutil.which("docker-registry") or (
        "/usr/bin/docker-registry" if os.path.exists("/usr/bin/docker-registry") else None
    )
    if program is None:
        message = "no docker-registry (Debian: apt-get install docker-registry)"
        if os.environ.get(ENV_REQUIRE_REGISTRY) == "1":
            pytest.fail(f"{ENV_REQUIRE_REGISTRY}=1 and {message}", pytrace=False)
        pytest.skip(message)
    folder = tmp_path_factory.mktemp("registry")
    port = _free_port()
    config = folder / "config.yml"
    config.write_text(
        "version: 0.1\nlog:\n  level: error\nstorage:\n  filesystem:\n"
        f"    rootdirectory: {folder / 'data'}\nhttp:\n  addr: 127.0.0.1:{port}\n"
    )
    process = subprocess.Popen(
        [program, "serve", str(config)], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(100):
            try:
                if httpx.get(f"{url}/v2/", timeout=1).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.1)
        else:
            pytest.fail("docker-registry did not start")
        yield url
    finally:
        process.terminate()
        process.wait(timeout=10)


def _push(url: str, repository: str, tags: list[str]) -> None:
    """Push one tiny image under each tag (a config and a layer blob, a schema 2 manifest) through
    the distribution API, as `docker push` does."""
    with httpx.Client(base_url=url, timeout=10) as client:
        descriptors = []
        for media_type, blob in (
            ("application/vnd.docker.container.image.v1+json", b'{"architecture":"amd64","os":"linux"}'),
            ("application/vnd.docker.image.rootfs.diff.tar.gzip", b"\x1f\x8b\x08\x00" + b"\x00" * 16),
        ):  # fmt: skip
            digest = "sha256:" + sha256(blob).hexdigest()
            started = client.post(f"/v2/{repository}/blobs/uploads/")
            assert started.status_code == 202, started.text
            location = started.headers["Location"]
            sep = "&" if "?" in location else "?"
            put = client.put(f"{location}{sep}digest={digest}", content=blob,
                             headers={"Content-Type": "application/octet-stream"})  # fmt: skip
            assert put.status_code == 201, put.text
            descriptors.append({"mediaType": media_type, "size": len(blob), "digest": digest})
        manifest = json.dumps(
            {
                "schemaVersion": 2,
                "mediaType": "application/vnd.docker.distribution.manifest.v2+json",
                "config": descriptors[0],
                "layers": descriptors[1:],
            }
        )
        for tag in tags:
            put = client.put(
                f"/v2/{repository}/manifests/{tag}",
                content=manifest,
                headers={"Content-Type": "application/vnd.docker.distribution.manifest.v2+json"},
            )
            assert put.status_code == 201, put.text


def test_record_check_against_a_real_registry(
    case: Path, real_registry: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _push(real_registry, REPOSITORY, ["kimi-k3", "v0.26.0", "v0.26.0-cu129"])
    _record_json(case)
    result, review = _check(case, "--registry", real_registry)
    assert result.exit_code == 0, review
    assert {t["id"]: t["status"] for t in review["triggers"]} == {
        "review-date": "not_met",
        "official-cu129-image": "not_met",
        "stable-release": "not_met",
    }
    _push(real_registry, REPOSITORY, ["v0.27.0", "v0.27.0-cu129"])
    monkeypatch.setattr(registry_module, "PAGE_SIZE", 2)  # the registry's own Link pages
    tags = list_tags(real_registry, REPOSITORY)
    assert sorted(tags) == ["kimi-k3", "v0.26.0", "v0.26.0-cu129", "v0.27.0", "v0.27.0-cu129"]
    result, review = _check(case, "--registry", real_registry)
    assert result.exit_code == 1 and review["due"] is True
    found = {t["id"]: t["found"] for t in review["triggers"]}
    assert found["official-cu129-image"] == ["v0.27.0-cu129"]
    assert found["stable-release"] == ["v0.27.0"]
    with pytest.raises(RegistryError, match="HTTP 404"):
        list_tags(real_registry, "nobody/nothing")


# --- the report shows the record -----------------------------------------------------------------


@pytest.mark.parametrize("language", ["en", "ko", "ja"])
def test_the_report_shows_the_record(case: Path, language: str) -> None:
    _record_json(case, "--maintenance-acceptable", "--answered-by", "Kim Jisoo")
    _ok(run_cli("report", "--case", str(case), "--lang", language))
    page = (case / "report.html").read_text()
    section = page[
        page.index('<section id="record">') : page.index(
            "</section>", page.index('<section id="record">')
        )
    ]
    tr = catalog(language)  # type: ignore[arg-type]
    assert 'data-missing="record"' not in section
    for text in (m.VERIFIED, m.UNVERIFIED, m.WIDENING, m.ROLLBACK, m.REVIEW):
        assert tr(text) in section
    assert tr(m.QUESTIONS["prefix_cache_hits"]).replace("'", "&#39;") in section
    assert SUMMARY in section and "Kim Jisoo" in section
    assert 'class="badge passed"' in section and 'class="badge failed"' in section


# --- bad input: one line, nothing overwritten ---------------------------------------------------


def test_a_case_without_a_diagnosis_or_a_plan(tmp_path: Path, case: Path) -> None:
    empty = tmp_path / "empty"
    _one_line_error(run_cli("record", "--case", str(empty)), "no diagnosis", "vllm-triage diagnose")
    assert not empty.exists()
    (case / "plan.json").unlink()
    _one_line_error(run_cli("record", "--case", str(case)), "no plan", "vllm-triage plan --case")
    assert not (case / "record.json").exists()
    _one_line_error(
        run_cli("record", "check", "--case", str(case)), "no decision record", "vllm-triage record"
    )


@pytest.mark.parametrize(
    ("target", "content", "words"),
    [
        ("plan.json", "{not json", ("plan.json",)),
        ("plan.json", None, ("plan.json", "schema_version 99 is newer")),
        (SUMMARY, None, ("summary.json", "schema_version 99 is newer")),
        ("baseline-comparison.json", '{"schema_version": 1}', ("baseline-comparison.json", "not a valid")),
    ],
)  # fmt: skip
def test_corrupt_or_newer_artifacts(
    case: Path, target: str, content: str | None, words: tuple[str, ...]
) -> None:
    _record_json(case)
    before = (case / "record.json").read_bytes()
    path = case / target
    if content is None:
        document = json.loads(path.read_text())
        document["schema_version"] = 99
        content = json.dumps(document)
    path.write_text(content)
    _one_line_error(run_cli("record", "--case", str(case)), *words)
    assert (case / "record.json").read_bytes() == before and not (case / "history").exists()


def test_bad_options_are_one_line_and_write_nothing(case: Path) -> None:
    for args, words in (
        (("--lang", "fr"), ("unknown language 'fr'",)),
        (("--adopted", "reboot_everything"), ("--adopted", "upgrade_driver")),
        (("--review-days", "-1"), ("--review-days",)),
        (("--recipe", "nope"), ("unknown recipe 'nope'",)),
        (("--maintenance-acceptable",), ("--answered-by NAME",)),
        (("--maintenance-acceptable", "--answered-by", "x\x1by"), ("--answered-by",)),
    ):
        _one_line_error(run_cli("record", "--case", str(case), *args), *words)
    assert not (case / "record.json").exists()


def test_record_check_bad_input(case: Path) -> None:
    _record_json(case)
    for args, words in (
        (("--lang", "de"), ("unknown language 'de'",)),
        (("--registry", "ftp://registry"), ("--registry",)),
        (("--registry", "https://user:pw@registry.test"), ("no user",)),
        (("--deadline", "0"), ("--deadline",)),
    ):
        _one_line_error(run_cli("record", "check", "--case", str(case), *args), *words)
    record_path = case / "record.json"
    document = json.loads(record_path.read_text())
    document["schema_version"] = 99
    record_path.write_text(json.dumps(document))
    _one_line_error(run_cli("record", "check", "--case", str(case)), "record.json", "newer")
    record_path.write_text("[]")
    _one_line_error(run_cli("record", "check", "--case", str(case)), "record.json")
    with pytest.raises(InputError):
        record_check(RecordCheckOptions(case=case))


def test_both_forms_of_the_command(case: Path) -> None:
    help_text = _ok(run_cli("record", "--help")).stdout
    assert "--adopted" in help_text and "check" in help_text
    check_help = _ok(run_cli("record", "check", "--help")).stdout
    assert "--registry" in check_help and "--adopted" not in check_help
    _ok(run_cli("record", env={"VLLM_TRIAGE_CASE": str(case)}))
    assert (case / "record.json").exists()
    # the case, language and format given before `check` are the check's
    url = f"http://127.0.0.1:{_free_port()}"
    result = run_cli("record", "--case", str(case), "--format", "json", "check", "--registry", url)
    assert result.exit_code == 4 and json.loads(result.stdout)["due"] is False  # unchecked
    _one_line_error(
        run_cli("record", "--case", str(case), "--adopted", "isolated_env", "check"),
        "does not make a record",
    )


# --- the knowledge behind it ---------------------------------------------------------------------


@pytest.mark.slow
def test_every_widening_condition_of_the_plan_has_a_check(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    assert [r.condition for r in kb.record.widening] == kb.recovery.change_plan.widen_when
    data = tmp_path / "data"
    shutil.copytree(kb.data_dir, data)
    recovery = data / "recovery.yaml"
    text = recovery.read_text()
    recovery.write_text(text.replace("No multi-node communication error recurs.", "No NCCL error."))
    problems = data_problems(load_knowledge(data))
    assert any(
        "record.yaml: no widening rule for recovery.yaml's condition 'No NCCL error.'" in p
        for p in problems
    )
    assert any("no_communication_error: recovery.yaml has no condition" in p for p in problems)


def test_the_existing_models_regression_needs_their_request_on_both_sides(case: Path) -> None:
    """regression_passes is met only by a comparison that compared an existing model's request
    (baseline --endpoint on both sides) without a regression; the node's state alone is unknown."""
    compared = BaselineComparison.model_validate_json(
        (case / "baseline-comparison.json").read_text()
    )
    condition = "The existing models' regression tests pass."
    node_only = widening(condition, "regression_passes", [], (compared, "c.json"), None, Asked())
    assert (node_only.status, node_only.basis) == ("unknown", "regression_no_endpoint")
    answered = compared.model_copy(
        update={"items": [*compared.items, ComparisonItem(check="endpoint", kind="same",
                                                          summary="same")]}
    )  # fmt: skip
    with_request = widening(condition, "regression_passes", [], (answered, "c.json"), None, Asked())
    assert (with_request.status, with_request.basis) == ("met", "regression_none")


def test_tool_call_counts_say_what_they_count() -> None:
    """A tool-calls rung that failed with no format error (no tool parser on the server) beside a
    structured output 4 of 4 valid: the answer is no, and the sentence says valid and errors."""
    run = _real_run()
    rungs = [
        rung.model_copy(update={"status": "failed", "reason": "the server has no tool parser"})
        if rung.name == "tool_calls"
        else rung.model_copy(update={"status": "passed", "reason": None})
        if rung.name == "structured_output"
        else rung
        for rung in run.rungs
    ]
    parserless = run.model_copy(
        update={
            "rungs": rungs,
            "tool_calls": run.tool_calls.model_copy(update={"requests": 0, "valid": 0}),
            "structured_output": run.structured_output.model_copy(
                update={"valid": 4, "format_errors": 0, "errors": []}
            ),
        }
    )
    answer = tool_calls_correct([RunRead("runs/x", "runs/x/summary.json", parserless)])
    assert (answer.answer, answer.basis) == ("no", "tools_failed")
    said = m.BASIS[answer.basis].format(**answer.fields)
    assert "structured output 4 of 4 valid" in said and "no format errors" in said
    assert "no tool parser" in said and "Format errors" not in said
