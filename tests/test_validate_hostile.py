"""`validate` against hostile servers (tests/hostile.py, a process of its own): bodies that trickle
one byte a second, 1 GiB bodies, gzip bombs, SSE events and JSON of hostile shapes.

Each case must end with the right rung failing by its deadline, with a clear one-line reason.
The heavy cases run the real command line in a child process, whose peak memory (ru_maxrss from
os.wait4) is the tool's alone and must stay under 300 MB, and whose stderr must hold no traceback.
The shape cases run the library in this process: quicker, and the same code.
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deadlines import watchdog_s
from peak_memory import run_measured

from vllm_triage.validate import ValidateOptions, validate
from vllm_triage.validate.deadlines import DEFAULT_DEADLINES

HOSTILE = Path(__file__).resolve().parent / "hostile.py"
DEADLINE = 2.0
RSS_LIMIT_MB = 300


@pytest.fixture(scope="module")
def hostile() -> Iterator[str]:
    """The hostile server's base URL; each case lives under /<case>."""
    process = subprocess.Popen(
        [sys.executable, str(HOSTILE), "--lifetime", "600"], stdout=subprocess.PIPE, text=True
    )
    try:
        assert process.stdout is not None
        port = int(process.stdout.readline())
        yield f"http://127.0.0.1:{port}"
    finally:
        process.kill()
        process.wait()


@dataclass
class Run:
    returncode: int
    summary: dict[str, Any]
    stderr: str
    peak_rss_mb: float
    wall_s: float
    summary_file: Path


def _cli(url: str, case: Path, limit_s: float = 60.0) -> Run:
    """`vllm-triage validate URL --format json` in a child process, with its peak RSS."""
    out, err = case / "stdout.json", case / "stderr.txt"
    argv = [
        sys.executable, "-m", "vllm_triage", "validate", url, "--case", str(case),
        "--format", "json", "--max-concurrency", "1", "--deadline", f"all={DEADLINE}",
    ]  # fmt: skip
    started = time.monotonic()
    with out.open("wb") as stdout, err.open("wb") as stderr:
        returncode, peak_rss_mb = run_measured(argv, timeout=limit_s, stdout=stdout, stderr=stderr)
    stdout_text = out.read_text()
    return Run(
        returncode=returncode,
        summary=json.loads(stdout_text) if stdout_text.strip() else {},
        stderr=err.read_text(),
        peak_rss_mb=peak_rss_mb,
        wall_s=time.monotonic() - started,
        summary_file=next(case.glob("runs/*/summary.json")),
    )


def _check_rungs(rungs: list[dict[str, Any]]) -> None:
    """What holds for every case: each rung ends (its reason says which deadline fired), one-line
    reasons, no crash."""
    for rung in rungs:
        assert rung["duration_s"] < watchdog_s(DEADLINE), rung
        reason = rung["reason"] or ""
        assert "\n" not in reason and "internal error" not in reason, rung


HEAVY = [
    # case, the rung that fails (or None: the ladder passes with a finding in health), reason
    ("trickle_health_headers", "health", "/health: no answer before the rung's deadline"),
    ("trickle_models", "health", "/v1/models: no answer before the rung's deadline (its body"),
    ("trickle_metrics", None, "/metrics: no answer before the rung's deadline"),
    ("trickle_chat", "short_text", "chat completion: no answer before the rung's deadline"),
    ("trickle_stream", "short_text", "no answer before the rung's deadline (after the first token)"),
    ("huge_models", "health", "/v1/models: larger than 4194304 bytes"),
    ("huge_chunked_models", "health", "/v1/models: larger than 4194304 bytes"),
    ("huge_chat", "short_text", "chat completion: the body: larger than 4194304 bytes"),
    ("huge_error", "short_text", 'HTTP 500: {"error": {"message": "overloaded xxx'),
    ("huge_stream", "short_text", "the stream: larger than 4194304 bytes"),
    ("huge_line", "short_text", "the stream: a line longer than 262144 bytes"),
    ("huge_metrics", None, "/metrics: larger than 4194304 bytes"),
    ("gzip_models", "health", "/v1/models: larger than 4194304 bytes"),
    ("gzip_metrics", None, "/metrics: larger than 4194304 bytes"),
    ("gzip_chat", "short_text", "the body: larger than 4194304 bytes"),
    ("gzip_stream", "short_text", "the stream: a line longer than 262144 bytes"),
    ("gzip_twice", "health", "unsupported Content-Encoding 'gzip, gzip'"),
    ("huge_index", "short_text", "tool_calls[0].index: input should be less than 64 (got 50000000)"),
    ("many_tool_calls", "short_text", "more than 64 tool calls in one answer"),
    ("deep_sse", "short_text", "malformed SSE event: JSON nested too deep"),
    ("deep_models", "health", "/v1/models: JSON nested too deep"),
    ("bigint_usage", "short_text", "malformed SSE event: a number in the JSON is too long"),
]  # fmt: skip


@pytest.fixture(scope="module")
def heavy_runs(hostile: str, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Run]:
    """Every heavy case through the command line, a few at once (they mostly wait)."""
    folders = {case: tmp_path_factory.mktemp(case) for case, _, _ in HEAVY}
    with ThreadPoolExecutor(max_workers=4) as pool:
        runs = {
            case: pool.submit(_cli, f"{hostile}/{case}", folder) for case, folder in folders.items()
        }
        return {case: future.result() for case, future in runs.items()}


@pytest.mark.parametrize(("case", "rung", "reason"), HEAVY, ids=[c[0] for c in HEAVY])
@pytest.mark.slow
def test_the_command_holds_its_deadlines_and_memory(
    heavy_runs: dict[str, Run], case: str, rung: str | None, reason: str
) -> None:
    run = heavy_runs[case]
    assert "Traceback" not in run.stderr and run.stderr == "", run.stderr
    assert run.peak_rss_mb < RSS_LIMIT_MB, f"peak RSS {run.peak_rss_mb:.0f} MB"
    rungs = run.summary["rungs"]
    _check_rungs(rungs)
    by_name = {r["name"]: r for r in rungs}
    if rung is None:
        assert run.returncode == 0, rungs
        assert any(reason in finding for finding in by_name["health"]["findings"]), rungs
        assert by_name["health"]["figures"]["metrics"] is False
    else:
        assert run.returncode == 1, rungs
        failed = [r["name"] for r in rungs if r["status"] == "failed"]
        assert failed == [rung], rungs
        assert reason in by_name[rung]["reason"], by_name[rung]["reason"]
    # At most one rung waits for its deadline; the rest is a few requests to a local server.
    assert run.wall_s < watchdog_s(DEADLINE), f"{run.wall_s:.1f} s"
    assert json.loads(run.summary_file.read_text()) == run.summary


SHAPES = [
    ("negative_index", "short_text", "index: input should be greater than or equal to 0 (got -1)"),
    ("float_index", "short_text", "index: should be an integer (got 1.5)"),
    ("string_index", "short_text", "index: should be an integer (got '0')"),
    ("delta_string", "short_text", "choices[0].delta: should be a JSON object (got 'hello')"),
    ("choices_object_stream", "short_text", "choices: should be a JSON array (got a JSON object)"),
    ("tool_calls_object", "short_text", "delta.tool_calls: should be a JSON array"),
    ("content_number", "short_text", "delta.content: should be a string (got 42)"),
    ("event_number", "short_text", "malformed SSE event: should be a JSON object (got 5)"),
    ("event_not_json", "short_text", "malformed SSE event: not JSON (Expecting property name"),
    ("error_event", "short_text", "error event in the stream: engine died"),
    ("usage_string_stream", "short_text", "usage.prompt_tokens: should be an integer (got '10')"),
    ("choices_object", "short_text", "the body: choices: should be a JSON array"),
    ("choices_empty", "short_text", "the body: choices: list should have at least 1 item"),
    ("message_list", "short_text", "choices[0].message: should be a JSON object (got a JSON array)"),
    ("usage_string", "short_text", "usage.prompt_tokens: should be an integer (got '10')"),
    ("usage_negative", "short_text", "usage.completion_tokens: input should be greater than or equal to 0"),
    ("finish_reason_number", "short_text", "choices[0].finish_reason: should be a string (got 1)"),
    ("chat_not_object", "short_text", "the body: should be a JSON object (got a JSON array)"),
    ("deep_chat", "short_text", "the body: JSON nested too deep"),
    ("bigint_chat", "short_text", "the body: a number in the JSON is too long to use"),
    ("data_object", "health", "/v1/models: data: should be a JSON array (got a JSON object)"),
    ("data_strings", "health", "/v1/models: data[0]: should be a JSON object (got 'fake-model')"),
    ("models_array", "health", "/v1/models: should be a JSON object (got a JSON array)"),
    ("model_id_number", "health", "/v1/models: data[0].id: should be a string (got 5)"),
    ("max_model_len_string", "health", "data[0].max_model_len: should be an integer (got '2048')"),
    ("max_model_len_huge", "health", "data[0].max_model_len: input should be less than or equal to"),
    ("bigint_models", "health", "/v1/models: a number in the JSON is too long to use"),
    ("models_html", "health", "/v1/models: not JSON (Expecting value at line 1 column 1)"),
    ("brotli", "health", "/v1/models: unsupported Content-Encoding 'br'"),
]  # fmt: skip


def _options(url: str, case: Path) -> ValidateOptions:
    deadlines = dict.fromkeys(DEFAULT_DEADLINES, DEADLINE)
    return ValidateOptions(url=url, case=case, max_concurrency=1, deadlines=deadlines)


@pytest.mark.parametrize(("case", "rung", "reason"), SHAPES, ids=[c[0] for c in SHAPES])
def test_a_hostile_shape_is_a_format_error_of_its_rung(
    hostile: str, tmp_path: Path, case: str, rung: str, reason: str
) -> None:
    result = validate(_options(f"{hostile}/{case}", tmp_path))
    rungs = [r.model_dump() for r in result.run.rungs]
    _check_rungs(rungs)
    failed = [r for r in rungs if r["status"] == "failed"]
    assert [r["name"] for r in failed] == [rung], rungs
    assert reason in failed[0]["reason"], failed[0]["reason"]
    assert not result.unreachable


@pytest.mark.parametrize(
    ("case", "check"),
    [
        ("version_array", lambda rungs: rungs["health"].figures["version"] is None),
        (
            "metrics_garbage",
            lambda rungs: "/metrics is not Prometheus text" in rungs["health"].findings[0],
        ),
        # NaN / +Inf counters count nothing; a block_size label that is no number is not used.
        ("metrics_nan", lambda rungs: rungs["same_prefix"].figures["hits"] is None),
        (
            "tokenize_string",
            lambda rungs: (
                "estimate: /tokenize: count: should be an integer"
                in (rungs["target_context"].reason or "")
            ),
        ),
        # A count of 0 tokens must not grow the prompt without bound.
        ("tokenize_zero", lambda rungs: rungs["target_context"].status == "passed"),
        ("max_model_len_one", lambda rungs: rungs["target_context"].status == "skipped"),
    ],
)
@pytest.mark.slow
def test_odd_but_usable_answers_are_used_honestly(
    hostile: str, tmp_path: Path, case: str, check: Any
) -> None:
    result = validate(_options(f"{hostile}/{case}", tmp_path))
    _check_rungs([r.model_dump() for r in result.run.rungs])
    rungs = {r.name: r for r in result.run.rungs}
    assert check(rungs), [(r.name, r.status, r.reason, r.findings) for r in result.run.rungs]
    assert result.run.passed
