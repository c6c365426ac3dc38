"""One incident from the first command to the written decision, with real parts: collect on the
replayed Kimi K3 node (real outputs of a node whose cu130 container died on driver 575), diagnose
from the case's bundle, plan under the team's constraints, validate against the real vLLM CPU
server, the decision record, and the report page in English, Korean and Japanese rendered by a
real headless Chromium: no console error, every section there, a screenshot of each kept under
.cache/test-artifacts/ (whole-case-<lang>.png)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from cli import Result, run_cli
from fakehost import FakeHost
from realserver import RealServer
from test_case import _k3_node
from test_report_browser import ARTIFACTS, LANGUAGES, SCRIPTS, chromium, watch

from vllm_triage.report.texts import SECTIONS


def _ok(result: Result, *codes: int) -> Result:
    assert result.exit_code in (codes or (0,)), result.stderr
    return result


def _json(result: Result) -> dict[str, Any]:
    document = json.loads(result.stdout)
    assert isinstance(document, dict)
    return document


@pytest.mark.browser
def test_collect_to_report_in_three_languages(tmp_path: Path, real_server: RealServer) -> None:
    host: FakeHost = _k3_node(tmp_path)
    case = tmp_path / "incident"
    env = {"VLLM_TRIAGE_CASE": str(case), "PATH": str(host.bin)}

    _ok(run_cli("collect", "--container", "vllm-k3", "--host-root", str(host.root), env=env))
    diagnosis = _json(_ok(run_cli("diagnose", "--format", "json", env=env)))
    assert diagnosis["primary"]["cause"] == "driver_too_old"

    plan = _json(
        _ok(
            run_cli("plan", "--no-maintenance-window", "--cluster-cannot-change",
                    "--deadline-hours", "120", "--cannot-maintain-build", "--format", "json",
                    env=env)
        )
    )  # fmt: skip
    assert plan["recommended"]["path"] == "isolated_env"
    assert "forward_compat" not in {plan["recommended"]["path"]}

    # The isolated environment: the real vLLM server stands in for the node that already meets
    # the requirement; the application's validation runs there.
    run = _json(
        _ok(run_cli("validate", real_server.url, "--max-concurrency", "2", "--format", "json",
                    env=env))
    )  # fmt: skip
    assert run["passed"] is True, [r for r in run["rungs"] if r["status"] == "failed"]

    record = _json(
        _ok(
            run_cli("record", "--maintenance-acceptable", "--answered-by", "platform-oncall",
                    "--format", "json", env=env)
        )
    )  # fmt: skip
    assert record["adopted"]["path"] == "isolated_env" and record["adopted"]["follows_plan"]
    verified = {item["id"]: item for item in record["verified"]}
    assert verified["short_text"]["status"] == "verified", verified["short_text"]
    assert verified["short_text"]["proof"]["artifact"].startswith("runs/")
    assert (case / "record.json").is_file() and (case / "plan.json").is_file()

    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    with chromium() as browser:
        _report_in_each_language(browser, case, env)
    assert len(list((case / "history").glob("report-*.html"))) == len(LANGUAGES) - 1


def _report_in_each_language(browser: Any, case: Path, env: dict[str, str]) -> None:
    for lang in LANGUAGES:
        shown = _ok(run_cli("report", "--lang", lang, env=env))
        page_path = Path(shown.stdout.strip().splitlines()[0])
        assert page_path == case / "report.html"
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        problems = watch(page)
        page.goto(page_path.as_uri(), wait_until="load")
        page.screenshot(path=str(ARTIFACTS / f"whole-case-{lang}.png"), full_page=True)
        assert problems == [], (lang, problems)
        assert page.get_attribute("html", "lang") == lang
        for section in SECTIONS:
            assert page.locator(f"#{section}").count() == 1, (lang, section)
        text = page.locator("body").inner_text()
        assert "driver_too_old" in text and "isolated_env" in text
        if lang != "en":
            headings = page.locator("h2").all_inner_texts()
            assert all(SCRIPTS[lang].search(h) for h in headings), (lang, headings)
        page.close()
