"""The report's first screen, for the platform owner who signs (issue 20): what is approved (the
path, the driver from and to, the floor to start, the toolkit's driver, the target nodes, the
rollback target), the widening conditions each with its status and the artifact that proves it,
the path's open risks, and each step's verdict with a failed validation run shown as failed; all
of it inside a 1280 x 900 viewport in English, Korean and Japanese (a real headless Chromium, a
screenshot of the first screen of each kept under .cache/test-artifacts/first-screen-<lang>.png).

And the charts: no label is cut short or runs into another one, measured by the layout's own
widths here and by the glyphs Chromium really draws in the browser tests.
"""

from __future__ import annotations

import json
import math
import re
import shutil
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli import Result, run_cli
from test_report import EXAMPLE_LOG, REAL_RUN, build_case, parse
from test_report_browser import ARTIFACTS, LANGUAGES, chromium, watch

from vllm_triage.i18n import catalog
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.report.charts import (
    SMALL_PX,
    TEXT_PX,
    Series,
    Step,
    bar_chart,
    figure,
    fit,
    ladder_chart,
    share_chart,
    text_width,
)
from vllm_triage.report.texts import MESSAGES

VIEWPORT = {"width": 1280, "height": 900}
BLOCKS = ("#decision", "#widening-status", "#open-risks", "#steps")
# Two more runs of the real one, passing, one before and one after it: "1 of 3 runs failed" must
# be said even though the newest passed.
PASSING_STAMPS = ("20261130T090000000000Z", "20261202T090000000000Z")
SVG = "{http://www.w3.org/2000/svg}"


def _ok(result: Result) -> Result:
    assert result.exit_code == 0, (result.exit_code, result.stdout, result.stderr)
    return result


@pytest.fixture(scope="module")
def signed_case(tmp_path_factory: pytest.TempPathFactory, kb: KnowledgeBase) -> Path:
    """The whole case of tests/test_report.py (upgrade_driver, baselines before and after, the
    real run that failed at structured_output), two passing runs beside the failed one, and the
    decision record written on them."""
    case = build_case(tmp_path_factory.mktemp("first-screen"), kb)
    summary = json.loads((REAL_RUN / "summary.json").read_text())
    assert summary["passed"] is False
    summary["passed"] = True
    for rung in summary["rungs"]:
        if rung["status"] == "failed":
            rung["status"], rung["reason"] = "passed", None
    for stamp in PASSING_STAMPS:
        folder = case / "runs" / stamp
        folder.mkdir()
        (folder / "summary.json").write_text(json.dumps(summary))
    _ok(run_cli("record", "--case", str(case)))
    return case


def _json(path: Path) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(path.read_text())
    return document


def _report(case: Path, lang: str) -> str:
    _ok(run_cli("report", "--case", str(case), "--lang", lang))
    return (case / "report.html").read_text(encoding="utf-8")


def _first_screen(page: str) -> str:
    start = page.index('<section id="overview">')
    return page[start : page.index("</section>", start)]


def _field(screen: str, name: str) -> str:
    found = re.search(rf'<dd data-field="{name}">(.*?)</dd>', screen, re.S)
    assert found, name
    return parse(found.group(1)).all_text()


# --- what the first screen says -------------------------------------------------------------


def test_the_first_screen_is_the_decision(signed_case: Path) -> None:
    plan, record = _json(signed_case / "plan.json"), _json(signed_case / "record.json")
    target = plan["plan"]["target"]
    screen = _first_screen(_report(signed_case, "en"))
    # what is approved: the path, the driver from and to, the floor, the toolkit's, the nodes
    assert screen.index('id="decision"') < screen.index('id="widening-status"')
    path = _field(screen, "path")
    assert "Upgrade the host driver" in path and "upgrade_driver" in path
    driver = _field(screen, "driver")
    assert (
        f"{target['installed']} \u2192 {target['recommended_driver']} "
        f"({target['recommended_branch']})" in driver
    )
    assert target["min_driver"] in _field(screen, "min_driver")
    assert target["toolkit_driver"] in _field(screen, "toolkit_driver")
    assert _field(screen, "nodes").startswith(", ".join(plan["constraints"]["nodes"]))
    # the rollback target: the driver of the before baseline, as the record names it
    rollback = _field(screen, "rollback")
    assert rollback == "575.57.08 record.json", rollback
    # the widening conditions: each one's status and the artifacts that prove it
    conditions = re.findall(r'<li data-status="([a-z_]+)">(.*?)</li>', screen, re.S)
    assert [status for status, _ in conditions] == [w["status"] for w in record["widening"]]
    for (_, markup), widening in zip(conditions, record["widening"], strict=True):
        text = parse(markup).all_text()
        assert widening["condition"] in text
        for proof in widening["proof"]:
            assert proof["artifact"] in text
        if not widening["proof"]:
            assert MESSAGES["no_proof"] in text
    assert any(status == "met" for status, _ in conditions)
    # the open risks: the path's own, every one
    risks = next(r["risks"] for r in plan["plan"]["risks_by_path"] if r["path"] == "upgrade_driver")
    block = screen[screen.index('id="open-risks"') :]
    assert [parse(li).all_text() for li in re.findall(r"<li>(.*?)</li>", block, re.S)] == risks


def test_a_failed_run_is_shown_as_failed_even_when_the_newest_passed(signed_case: Path) -> None:
    screen = _first_screen(_report(signed_case, "en"))
    row = re.search(r'<tr data-step="validation"([^>]*)>(.*?)</tr>', screen, re.S)
    assert row, screen
    assert 'data-verdict="failed"' in row.group(1)
    verdict = re.search(r'<span class="verdict failed">(.*?)</span>', row.group(2))
    assert verdict and verdict.group(1) == "1 of 3 runs failed (structured_output)"
    assert "passed" not in parse(row.group(2)).all_text()
    # every run is listed as an artifact of the step
    for stamp in (*PASSING_STAMPS, "20261201T104500000000Z"):
        assert f"runs/{stamp}" in row.group(2)


def test_only_the_steps_the_path_takes_are_missing(tmp_path: Path, signed_case: Path) -> None:
    """Without the record: it is missing (the upgrade path takes one), the fleet scan is not
    needed; the widening conditions are the plan's, each unknown, with the command that judges
    them; the rollback target is the before baseline's driver."""
    case = tmp_path / "triage"
    shutil.copytree(signed_case, case, symlinks=True)
    (case / "record.json").unlink()
    screen = _first_screen(_report(case, "en"))
    assert '<tr data-step="record" data-state="missing">' in screen
    assert '<tr data-step="fleet" data-state="not_needed">' in screen
    plan = _json(case / "plan.json")
    statuses = re.findall(r'<li data-status="([a-z_]+)">', screen)
    assert statuses == ["unknown"] * len(plan["plan"]["widen_when"])
    assert 'data-make="record"' in screen and f"vllm-triage record --case {case}" in screen
    assert _field(screen, "rollback") == "575.57.08 baseline-comparison.json"


def test_a_case_without_a_plan_says_which_command_makes_it(tmp_path: Path) -> None:
    case = tmp_path / "triage"
    _ok(run_cli("diagnose", str(EXAMPLE_LOG), "--driver", "575.57.08", "--case", str(case)))
    screen = _first_screen(_report(case, "en"))
    decision = screen[screen.index('id="decision"') : screen.index('id="steps"')]
    assert 'data-make="plan"' in decision and f"vllm-triage plan --case {case}" in decision
    assert "data-missing" not in screen, "the sections below say what is missing"
    assert '<tr data-step="record" data-state="missing">' in screen, "before a plan, any step"


# --- the charts ----------------------------------------------------------------------------------


def _boxes(svg: str) -> tuple[tuple[float, float], list[tuple[str, float, float, float, float]]]:
    """The chart's size and each text's box (text, left, top, right, bottom), by the layout's
    own widths: a text's box is its width across, its font size tall above the baseline, turned
    with the text where the text is turned."""
    root = ET.fromstring(svg)
    _, _, width, height = (float(v) for v in str(root.get("viewBox")).split())
    boxes = []
    for element in root.iter(f"{SVG}text"):
        text = element.text or ""
        small = element.get("class") in ("tick", "axis-label", "rung-status", "rung-seconds")
        size = SMALL_PX if small else TEXT_PX
        across = text_width(text, size)
        x, y = float(element.get("x", 0)), float(element.get("y", 0))
        left = {"middle": x - across / 2, "end": x - across}.get(element.get("text-anchor", ""), x)
        corners = [(left, y - size), (left + across, y - size), (left, y), (left + across, y)]
        turn = re.fullmatch(r"rotate\((-?[\d.]+) ([\d.]+) ([\d.]+)\)", element.get("transform", ""))
        if turn:
            angle, cx, cy = (float(g) for g in turn.groups())
            cos, sin = math.cos(math.radians(angle)), math.sin(math.radians(angle))
            corners = [
                (cx + (px - cx) * cos - (py - cy) * sin, cy + (px - cx) * sin + (py - cy) * cos)
                for px, py in corners
            ]
        xs, ys = [c[0] for c in corners], [c[1] for c in corners]
        boxes.append((text, min(xs), min(ys), max(xs), max(ys)))
    return (width, height), boxes


def _overlaps(boxes: list[tuple[str, float, float, float, float]]) -> list[tuple[str, str]]:
    found = []
    for index, (a, left, top, right, bottom) in enumerate(boxes):
        for b, left2, top2, right2, bottom2 in boxes[index + 1 :]:
            if (
                min(right, right2) - max(left, left2) > 0
                and min(bottom, bottom2) - max(top, top2) > 0
            ):
                found.append((a, b))
    return found


def _assert_laid_out(svg: str, labels: list[str]) -> list[str]:
    """No two texts overlap, each is inside the chart, none is cut, every label is there whole
    (its lines, joined, are the label): the chart's texts."""
    (width, height), boxes = _boxes(svg)
    assert _overlaps(boxes) == []
    for text, left, top, right, bottom in boxes:
        assert left >= 0 and top >= 0 and right <= width and bottom <= height, (text, width)
    texts = [box[0] for box in boxes]
    assert not any("\u2026" in text or text.endswith("...") for text in texts), texts
    joined = " ".join(texts)
    for label in labels:
        assert label in joined, (label, texts)
    return texts


LONG = "TTFT, first request of the same prefix"
LONGER = "TTFT, repeats of the same prefix after the first request (p50)"


def test_close_values_and_long_labels_do_not_collide_or_get_cut() -> None:
    close = [0.0100, 0.0101, 0.0110, 0.0111, 0.0112]
    svg = bar_chart(
        "close",
        ["1", "2", "4", LONG, LONGER],
        [
            Series("TTFT p50", close, "p50"),
            Series("TTFT p95", [v + 0.0004 for v in close], "p95"),
        ],
        figure,
        "seconds",
    )
    texts = _assert_laid_out(str(svg), ["1", "2", "4", "TTFT p50", "TTFT p95"])
    values = [figure(v) for v in close]
    assert len(set(values)) == len(values), "close values stay apart: " + ", ".join(values)
    assert all(value in texts for value in values)
    assert 'transform="rotate(-90' in svg, "level labels this close are turned upright"
    for label in (LONG, LONGER):
        lines = fit(label, 112)
        assert len(lines) <= 2 and " ".join(lines) == label
        assert all(line in texts for line in lines)


def test_level_value_labels_that_fit_stay_level() -> None:
    svg = bar_chart("few", ["1", "2"], [Series("tokens/s", [120.4, 283.0], "t")], figure, "tok/s")
    assert "rotate" not in svg
    _assert_laid_out(str(svg), ["120", "283"])


def test_japanese_labels_wrap_without_cutting() -> None:
    label = "同じプレフィックスの繰り返しの TTFT (p50)"
    svg = bar_chart("ja", ["最初のリクエストの TTFT", label], [Series("p50", [0.38, 0.07], "p50")],
                    figure, "秒")  # fmt: skip
    texts = _assert_laid_out(str(svg), [])
    lines = fit(label, 112)
    assert "".join(lines).replace(" ", "") == label.replace(" ", "")
    assert all(line in texts for line in lines)
    assert not any(line.startswith(("ッ", "ィ", "ー", ")")) for line in lines)


def test_a_long_share_label_and_a_long_rung_status_are_whole() -> None:
    label = "hits per query (3456 of 4996), counted over every repeat of the same long prefix"
    svg = share_chart(
        "share", [(label, 0.69, ""), ("Reusable once the problems are fixed", None, "")]
    )
    texts = _assert_laid_out(str(svg), ["69%", "Reusable once the problems are fixed"])
    assert " ".join(t for t in texts if t not in ("69%", "\u2013"))[: len(label)] == label
    status = "nicht unterstützt, weil der Server es ablehnt"
    ladder = ladder_chart(
        "ladder",
        [
            Step("structured_output", "failed", status, 6.62),
            Step("multi_node", "not-run", "x", None),
        ],
        lambda s: f"{s:.2f} s",
    )
    _assert_laid_out(str(ladder), ["structured_output", status, "6.62 s"])


def test_numbers_are_written_with_three_significant_digits() -> None:
    assert [figure(v) for v in (0.0372, 0.152, 1.2449, 12.34, 283.4, 1234.5, 0.0)] == [
        "0.0372", "0.152", "1.24", "12.3", "283", "1234", "0",
    ]  # fmt: skip


# --- in Chromium ---------------------------------------------------------------------------------

_CHART_TEXTS = """(svg) => {
  const frame = svg.getBoundingClientRect();
  const texts = Array.from(svg.querySelectorAll("text")).map((t) => {
    const r = t.getBoundingClientRect();
    return [t.textContent, r.left, r.top, r.right, r.bottom];
  });
  return [[frame.left, frame.top, frame.right, frame.bottom], texts];
}"""


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.mark.browser
@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_decision_fits_the_first_screen_in_chromium(
    browser: Any, signed_case: Path, lang: str
) -> None:
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    _report(signed_case, lang)
    kept = ARTIFACTS / f"first-screen-{lang}.html"
    shutil.copyfile(signed_case / "report.html", kept)
    page = browser.new_page(viewport=VIEWPORT)
    problems = watch(page)
    page.goto(kept.as_uri(), wait_until="load")
    shot = ARTIFACTS / f"first-screen-{lang}.png"
    page.screenshot(path=str(shot))  # the first screen only, as the signer opens the page
    assert problems == [], problems
    assert page.evaluate("document.documentElement.scrollWidth") <= VIEWPORT["width"]
    assert page.evaluate("document.documentElement.scrollHeight") > 2 * VIEWPORT["height"], (
        "the details follow below the first screen"
    )

    for block in BLOCKS:
        box = page.locator(block).bounding_box()
        assert box is not None, block
        assert box["x"] >= 0 and box["x"] + box["width"] <= VIEWPORT["width"], (lang, block, box)
        assert box["y"] >= 0 and box["y"] + box["height"] <= VIEWPORT["height"], (lang, block, box)
        # nothing in the block runs past its edge (a long artifact path, an unwrapped table)
        assert page.eval_on_selector(block, "e => e.scrollWidth <= e.clientWidth"), (lang, block)
        assert page.locator(block).is_visible()

    plan, record = _json(signed_case / "plan.json"), _json(signed_case / "record.json")
    target = plan["plan"]["target"]
    decision = page.locator("#decision")
    assert "upgrade_driver" in decision.locator('[data-field="path"]').inner_text()
    driver = decision.locator('[data-field="driver"]').inner_text()
    assert target["installed"] in driver and target["recommended_driver"] in driver
    assert driver.index(target["installed"]) < driver.index("\u2192")
    assert driver.index("\u2192") < driver.index(target["recommended_driver"])
    assert "575.57.08" in decision.locator('[data-field="rollback"]').inner_text()
    assert decision.locator('[data-field="min_driver"]').count() == 1
    assert decision.locator('[data-field="nodes"]').inner_text().startswith("gpu-node-17")

    statuses = page.locator("#widening-status li[data-status]")
    assert statuses.count() == len(record["widening"])
    assert [statuses.nth(i).get_attribute("data-status") for i in range(statuses.count())] == [
        w["status"] for w in record["widening"]
    ]
    met = page.locator('#widening-status li[data-status="met"]').first
    assert "summary.json" in met.inner_text(), "a met condition names the run that proves it"
    risks = next(r["risks"] for r in plan["plan"]["risks_by_path"] if r["path"] == "upgrade_driver")
    assert page.locator("#open-risks li").count() == len(risks)

    # the failed run: failed, in the first screen, in every language
    row = page.locator('#steps tr[data-step="validation"]')
    assert row.get_attribute("data-verdict") == "failed"
    verdict = row.locator(".verdict.failed")
    assert verdict.is_visible()
    box = verdict.bounding_box()
    assert box is not None and box["y"] + box["height"] <= VIEWPORT["height"]
    tr = catalog(lang)  # type: ignore[arg-type]
    said = verdict.inner_text()
    assert tr(MESSAGES["runs_failed_of"]).format(failed=1, total=3) in said, said
    assert tr(MESSAGES["passed"]) not in said
    assert page.locator('#steps tr[data-step="fleet"]').get_attribute("data-state") == "not_needed"
    assert shot.stat().st_size > 10_000
    page.close()


@pytest.mark.browser
@pytest.mark.parametrize("lang", LANGUAGES)
def test_no_chart_label_overlaps_another_as_chromium_draws_it(
    browser: Any, signed_case: Path, lang: str
) -> None:
    _report(signed_case, lang)
    page = browser.new_page(viewport=VIEWPORT)
    page.goto((signed_case / "report.html").as_uri(), wait_until="load")
    charts = page.locator("svg.chart").all()
    assert len(charts) >= 5
    for number, chart in enumerate(charts):
        (left, top, right, bottom), texts = chart.evaluate(_CHART_TEXTS)
        for text, x0, y0, x1, y1 in texts:
            assert x0 >= left - 1 and x1 <= right + 1 and y0 >= top - 1 and y1 <= bottom + 1, (
                lang, number, text,
            )  # fmt: skip
        boxes = [(t, x0 + 0.5, y0 + 0.5, x1 - 0.5, y1 - 0.5) for t, x0, y0, x1, y1 in texts]
        assert _overlaps(boxes) == [], (lang, number)
    page.close()
