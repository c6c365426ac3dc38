"""The ladder against a real vLLM (CPU build, the tiny model of tests/servers): it passes, counts
prefix hits as deltas of its own run, reports disabled caching and a missing tool-call parser,
and counts valid and malformed tool calls as an independent reading of the answers does."""

from __future__ import annotations

import json
import time
from pathlib import Path

import httpx
from jsonschema import Draft202012Validator
from realserver import RealServer, metric_value

from vllm_triage.validate import ValidateOptions, validate
from vllm_triage.validate.client import Client
from vllm_triage.validate.models import ToolCallSummary
from vllm_triage.validate.rungs.tool_calls import tally
from vllm_triage.validate.toolcalls import TOOLS, loose_tools


def _statuses(result) -> dict[str, str]:
    return {r.name: r.status for r in result.run.rungs}


def test_the_ladder_passes_on_a_real_vllm(real_server: RealServer, tmp_path: Path) -> None:
    result = validate(ValidateOptions(url=real_server.url, case=tmp_path, max_concurrency=4))
    statuses = _statuses(result)
    assert result.run.passed, [(r.name, r.status, r.reason) for r in result.run.rungs]
    assert statuses == {
        "health": "passed", "short_text": "passed", "target_context": "passed",
        "same_prefix": "passed", "concurrency": "passed", "image": "not_supported",
        "tool_calls": "passed",
    }  # fmt: skip
    rungs = {r.name: r for r in result.run.rungs}
    assert rungs["health"].figures["version"] == "0.32.0"
    assert rungs["health"].figures["max_model_len"] == 2048
    target = rungs["target_context"].figures
    assert target["measured_with"] == "/tokenize" and 1900 <= target["prompt_tokens"] <= 2048
    assert "not a multimodal model" in (rungs["image"].reason or "")
    assert result.run.prefix_cache.enabled is True and result.run.prefix_cache.hits > 0
    assert result.run.tool_calls.requests == 6 and result.run.tool_calls.valid == 6
    levels = rungs["concurrency"].figures["levels"]
    assert list(levels) == ["1", "2", "4"] and all(
        level["errors"] == 0 for level in levels.values()
    )
    assert all(level["ttft_p50_s"] and level["output_tokens_per_s"] for level in levels.values())


def test_prefix_hits_are_deltas_of_this_run(real_server: RealServer, tmp_path: Path) -> None:
    def total() -> float:
        text = httpx.get(f"{real_server.url}/metrics", timeout=30).text
        return metric_value(text, "vllm:prefix_cache_hits_total")

    options = ValidateOptions(
        url=real_server.url, case=tmp_path, max_concurrency=1, keep_going=True
    )
    validate(options)
    before = total()
    assert before > 0, "the first run left hits in the server's counters"
    second = validate(options)
    after = total()
    hits = second.run.prefix_cache.hits
    assert 0 < hits <= after - before, "the rung counts this run's hits only"
    assert hits < after, "not the total since the server started"
    same_prefix = next(r for r in second.run.rungs if r.name == "same_prefix")
    assert same_prefix.figures["hits"] == hits and same_prefix.figures["queries"] > hits


def test_disabled_caching_and_missing_parser(real_server_plain: RealServer, tmp_path: Path) -> None:
    result = validate(
        ValidateOptions(
            url=real_server_plain.url, case=tmp_path, max_concurrency=1, keep_going=True
        )
    )
    rungs = {r.name: r for r in result.run.rungs}
    assert rungs["same_prefix"].status == "failed"
    assert rungs["same_prefix"].reason == "prefix caching is disabled (from vllm:cache_config_info)"
    assert result.run.prefix_cache.enabled is False and result.run.prefix_cache.hits == 0
    assert rungs["tool_calls"].status == "failed"
    assert (rungs["tool_calls"].reason or "").startswith(
        "configuration: the server has no tool-call parser"
    )
    assert "--tool-call-parser to be set" in (rungs["tool_calls"].reason or "")
    assert rungs["tool_calls"].findings == [
        "start the server with --enable-auto-tool-choice --tool-call-parser "
        "<the parser for this model, e.g. hermes>"
    ]
    assert rungs["image"].status == "not_supported"
    assert all(
        rungs[n].status == "passed"
        for n in ("health", "short_text", "target_context", "concurrency")
    )
    assert not result.run.passed


def _oracle(body: dict | None, content: str, calls: list[tuple[str | None, str]]) -> str:
    """An independent reading of one answer: 'valid', 'malformed', or 'none'."""
    if body is not None:
        message = body["choices"][0]["message"]
        calls = [
            (c["function"]["name"], c["function"]["arguments"])
            for c in message.get("tool_calls") or []
        ]
        content = message.get("content") or ""
    if not calls:
        return "malformed" if "<tool_call>" in content else "none"
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    for name, arguments in calls:
        try:
            parsed = json.loads(arguments)
        except json.JSONDecodeError:
            return "malformed"
        if name not in schemas or list(Draft202012Validator(schemas[name]).iter_errors(parsed)):
            return "malformed"
    return "valid"


def test_required_tool_calls_valid_and_malformed_counted(real_server: RealServer) -> None:
    """Without `strict` the model alone keeps the format: it does both, and each is counted."""
    client = Client(real_server.url)
    summary = ToolCallSummary()
    oracle = {"valid": 0, "malformed": 0, "none": 0}
    prompts = [
        "What is the weather in Lisbon?", "Use the tool now.", "Call get_weather for Paris please.",
        "Weather?", "Is it cold in Oslo?", "Search the runbooks: how to drain a node?",
    ]  # fmt: skip
    for stream in (False, True):
        for prompt in prompts:
            body = {
                "model": real_server.model, "messages": [{"role": "user", "content": prompt}],
                "tools": loose_tools(), "tool_choice": "required", "max_tokens": 64, "temperature": 0,
            }  # fmt: skip
            send = client.stream_chat if stream else client.chat
            record, answer = send(body, "tool_calls", "required", time.monotonic() + 120)
            assert record.status_code == 200, record.error
            tally(summary, "required", record, answer, required=True)
            calls = [(c.name, c.arguments) for c in answer.tool_calls]
            oracle[_oracle(answer.body, answer.content, calls)] += 1
    client.close()
    assert oracle["valid"] > 0 and oracle["malformed"] + oracle["none"] > 0, oracle
    assert summary.requests == 2 * len(prompts)
    assert summary.valid == oracle["valid"]
    assert summary.format_errors == oracle["malformed"] + oracle["none"], summary.errors
    assert len(summary.errors) >= summary.format_errors
