"""The ladder against a fake server for faults a real vLLM cannot produce on demand: each must end
in the right rung failing with a clear reason, within its deadline, never a hang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deadlines import ends_in_time
from fakeserver import FakeServer

from vllm_triage.errors import InputError
from vllm_triage.validate import ValidateOptions, validate
from vllm_triage.validate.deadlines import DEFAULT_DEADLINES

SHORT = {name: 4.0 for name in DEFAULT_DEADLINES}


def _options(url: str, case: Path, **overrides: object) -> ValidateOptions:
    values: dict[str, object] = {
        "url": url,
        "case": case,
        "max_concurrency": 4,
        "deadlines": dict(SHORT),
    }
    values.update(overrides)
    return ValidateOptions(**values)  # type: ignore[arg-type]


def _rungs(result) -> dict[str, tuple[str, str]]:
    return {r.name: (r.status, r.reason or "") for r in result.run.rungs}


@pytest.mark.slow
def test_the_ladder_passes_on_a_healthy_server(tmp_path: Path) -> None:
    with FakeServer() as server:
        result = validate(_options(server.url, tmp_path))
    rungs = _rungs(result)
    assert result.run.passed and list(rungs) == [
        "health", "short_text", "target_context", "same_prefix", "concurrency", "image", "tool_calls",
        "structured_output",
    ]  # fmt: skip
    assert rungs["image"][0] == "not_supported"
    assert result.run.prefix_cache.hits > 0 and result.run.tool_calls.valid == 6
    summary = json.loads((result.folder / "summary.json").read_text())
    assert summary["schema_version"] == 1 and summary["passed"] is True
    assert set(summary["prefix_cache"]) >= {"enabled", "queries", "hits"}
    assert set(summary["tool_calls"]) >= {"requests", "valid", "format_errors"}
    records = [
        json.loads(line) for line in (result.folder / "requests.jsonl").read_text().splitlines()
    ]
    levels = next(r for r in result.run.rungs if r.name == "concurrency").figures["levels"]
    assert sum(level["requests"] for level in levels.values()) == sum(
        r["rung"] == "concurrency" for r in records
    )
    assert all(r["ok"] for r in records if r["rung"] != "image")


@pytest.mark.parametrize(
    ("fault", "rung", "reason"),
    [
        ("chat_500", "short_text", "HTTP 500: Internal Server Error: EngineCore died"),
        ("stream_cut", "short_text", "the stream was cut in the middle"),
        ("no_first_token", "short_text", "no answer before the rung's deadline"),
        ("malformed_sse", "short_text", "malformed SSE event"),
        ("tool_text_leak", "tool_calls", "tool call leaked into content as raw text"),
        ("no_tool_parser", "tool_calls", "configuration: the server has no tool-call parser"),
    ],
)
@pytest.mark.slow
def test_each_fault_fails_the_right_rung_within_its_deadline(
    fault: str, rung: str, reason: str, tmp_path: Path
) -> None:
    with FakeServer(fault) as server, ends_in_time(4.0 * 3, "a ladder against a fault"):
        result = validate(_options(server.url, tmp_path))
    rungs = _rungs(result)
    failed = [name for name, (status, _) in rungs.items() if status == "failed"]
    assert failed == [rung], rungs
    assert reason in rungs[rung][1]
    after = list(rungs)[list(rungs).index(rung) + 1 :]
    assert all(rungs[name][0] == "skipped" for name in after), (
        "the ladder stops at the first failure"
    )
    assert not result.run.passed


@pytest.mark.slow
def test_no_parser_is_a_configuration_finding_with_the_flags(tmp_path: Path) -> None:
    with FakeServer("no_tool_parser") as server:
        result = validate(_options(server.url, tmp_path))
    tool_rung = next(r for r in result.run.rungs if r.name == "tool_calls")
    assert any("--enable-auto-tool-choice --tool-call-parser" in f for f in tool_rung.findings)


@pytest.mark.slow
def test_missing_metrics_is_reported_not_fatal(tmp_path: Path) -> None:
    with FakeServer("no_metrics") as server:
        result = validate(_options(server.url, tmp_path))
    rungs = _rungs(result)
    assert rungs["health"][0] == "passed"
    health = next(r for r in result.run.rungs if r.name == "health")
    assert health.figures["metrics"] is False and "/metrics is not reachable" in health.findings[0]
    assert rungs["same_prefix"][0] == "skipped" and "cannot count hits" in rungs["same_prefix"][1]
    assert result.run.passed


@pytest.mark.slow
def test_missing_tokenize_falls_back_to_an_estimate_and_says_so(tmp_path: Path) -> None:
    with FakeServer("no_tokenize") as server:
        result = validate(_options(server.url, tmp_path))
    target = next(r for r in result.run.rungs if r.name == "target_context")
    assert target.status == "passed" and target.figures["measured_with"].startswith("estimate")
    assert "estimate" in (target.reason or "")


@pytest.mark.slow
def test_wrong_model_id_fails_health(tmp_path: Path) -> None:
    with FakeServer() as server:
        result = validate(_options(server.url, tmp_path, model="other-model"))
    assert _rungs(result)["health"] == (
        "failed",
        "model 'other-model' is not served here (served: fake-model)",
    )
    assert not result.unreachable


@pytest.mark.slow
def test_keep_going_runs_every_rung(tmp_path: Path) -> None:
    with FakeServer("chat_500") as server:
        result = validate(_options(server.url, tmp_path, keep_going=True))
    statuses = {name: status for name, (status, _) in _rungs(result).items()}
    assert statuses["short_text"] == "failed" and statuses["concurrency"] == "failed"
    levels = next(r for r in result.run.rungs if r.name == "concurrency").figures["levels"]
    assert levels["1"]["errors"] == levels["1"]["requests"] == 2 and levels["1"]["ok"] == 0
    assert levels["1"]["ttft_p50_s"] is None, "failed requests never count as successes"


def test_unreachable_server(tmp_path: Path) -> None:
    result = validate(_options("http://127.0.0.1:9", tmp_path))
    assert result.unreachable and _rungs(result)["health"][0] == "failed"
    assert "cannot reach" in _rungs(result)["health"][1]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"url": "localhost:8000"}, r"not an http\(s\) URL"),
        ({"max_concurrency": 0}, "--max-concurrency"),
        ({"api_key_env": "VLLM_TRIAGE_NO_SUCH_VARIABLE"}, "--api-key-env"),
        ({"recipe": "no-such-recipe"}, "unknown recipe"),
        ({"transport": "carrier-pigeon"}, "--transport"),
    ],
)
def test_bad_input(overrides: dict[str, object], message: str, tmp_path: Path) -> None:
    values: dict[str, object] = {"url": "http://127.0.0.1:9", **overrides}
    url = str(values.pop("url"))
    with pytest.raises(InputError, match=message):
        validate(_options(url, tmp_path, **values))


@pytest.mark.slow
def test_ctrl_c_writes_what_was_measured(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from vllm_triage.validate import ValidationInterrupted, ladder

    def interrupted(ctx: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setitem(ladder.RUNGS, "concurrency", interrupted)
    with FakeServer() as server, pytest.raises(ValidationInterrupted) as stop:
        validate(_options(server.url, tmp_path))
    summary = json.loads((stop.value.result.folder / "summary.json").read_text())
    assert summary["interrupted"] is True and summary["passed"] is False
    assert [r["name"] for r in summary["rungs"]] == [
        "health",
        "short_text",
        "target_context",
        "same_prefix",
    ]
    records = (stop.value.result.folder / "requests.jsonl").read_text().splitlines()
    assert len(records) >= 4 and all(json.loads(line)["rung"] for line in records)
