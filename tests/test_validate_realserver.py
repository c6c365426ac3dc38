"""The ladder against a real vLLM (CPU build, the tiny model of tests/servers): it passes, counts
prefix hits as deltas of its own run, reports disabled caching and a missing tool-call parser,
and counts valid and malformed tool calls (and structured-output answers) as an independent
reading of the answers does; it compares two endpoints on the same requests, and starts the real
server twice from a launch command, timing each engine initialisation."""

from __future__ import annotations

import contextlib
import json
import socket
import sys
import time
from pathlib import Path

import httpx
import realserver
from cli import run_cli
from jsonschema import Draft202012Validator
from realserver import RealServer, metric_value

from vllm_triage.validate import ValidateOptions, validate
from vllm_triage.validate.client import Client
from vllm_triage.validate.models import StructuredOutputSummary, ToolCallSummary
from vllm_triage.validate.rungs.tool_calls import tally
from vllm_triage.validate.structured import MAX_TOKENS, PROMPT, SCHEMA, response_format
from vllm_triage.validate.structured import tally as structured_tally
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
        "tool_calls": "passed", "structured_output": "passed",
    }  # fmt: skip
    rungs = {r.name: r for r in result.run.rungs}
    assert rungs["health"].figures["version"] == "0.32.0"
    assert rungs["health"].figures["max_model_len"] == 2048
    target = rungs["target_context"].figures
    assert target["measured_with"] == "/tokenize" and 1900 <= target["prompt_tokens"] <= 2048
    assert "not a multimodal model" in (rungs["image"].reason or "")
    assert result.run.prefix_cache.enabled is True and result.run.prefix_cache.hits > 0
    assert result.run.tool_calls.requests == 6 and result.run.tool_calls.valid == 6
    assert result.run.structured_output.valid == 4, result.run.structured_output.errors
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


# --- issue 10: structured output, start stability, two endpoints --------------------------------

_INCIDENT_PROMPTS = [
    PROMPT,
    "Incident as JSON: gpu-03, 4 GPUs, driver r570, severity low.",
    "Describe the incident on node-b5 as JSON.",
    "Give me the JSON for this: dgx-02 lost 2 GPUs.",
    "What is the weather in Lisbon?",
    "JSON please: the node gpu-11 runs driver r580.",
]


def _structured_oracle(content: str) -> str:
    """An independent reading of one answer: 'valid' or 'malformed' against the schema."""
    try:
        document = json.loads(content)
    except json.JSONDecodeError:
        return "malformed"
    if not isinstance(document, dict) or list(Draft202012Validator(SCHEMA).iter_errors(document)):
        return "malformed"
    return "valid"


def test_structured_output_enforced_is_valid_and_unenforced_is_counted(
    real_server: RealServer,
) -> None:
    """With response_format the server (vLLM's guided decoding) enforces the schema: every answer
    is valid. With the schema only asked for in the prompt, nothing enforces it: the tiny model
    writes both, and the tally counts the malformed ones as an independent reading does."""
    client = Client(real_server.url)
    enforced = StructuredOutputSummary()
    for mode in ("json_schema", "json_object"):
        for stream in (False, True):
            body = {
                "model": real_server.model, "messages": [{"role": "user", "content": PROMPT}],
                "response_format": response_format(mode), "max_tokens": MAX_TOKENS,
                "temperature": 0,
            }  # fmt: skip
            send = client.stream_chat if stream else client.chat
            record, answer = send(body, "structured_output", mode, time.monotonic() + 120)
            assert record.status_code == 200, record.error
            structured_tally(enforced, mode, record, answer, mode)
            if mode == "json_schema":
                assert _structured_oracle(answer.content) == "valid", answer.content
    assert (enforced.valid, enforced.format_errors) == (4, 0), enforced.errors
    unenforced = StructuredOutputSummary()
    oracle = {"valid": 0, "malformed": 0}
    for prompt in _INCIDENT_PROMPTS:
        body = {
            "model": real_server.model, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": MAX_TOKENS, "temperature": 0,
        }  # fmt: skip
        record, answer = client.chat(
            body, "structured_output", "prompt_only", time.monotonic() + 120
        )
        assert record.status_code == 200, record.error
        structured_tally(unenforced, "prompt_only", record, answer, "json_schema")
        oracle[_structured_oracle(answer.content)] += 1
    client.close()
    assert oracle["malformed"] > 0, oracle
    assert unenforced.requests == len(_INCIDENT_PROMPTS)
    assert unenforced.valid == oracle["valid"]
    assert unenforced.format_errors == oracle["malformed"], unenforced.errors


def test_two_endpoints_on_the_same_requests(real_server: RealServer, tmp_path: Path) -> None:
    """The same server under a second name stands for the second endpoint: both ladders pass,
    structured output included, and the summary holds both side by side."""
    other = real_server.url.replace("127.0.0.1", "localhost")
    result = validate(
        ValidateOptions(
            url=real_server.url, case=tmp_path, max_concurrency=2, compare_url=other,
            target_context=512,
        )
    )  # fmt: skip
    comparison = result.run.comparison
    assert comparison is not None
    assert result.run.passed and comparison.passed and comparison.both_passed, [
        (r.name, r.this, r.other) for r in comparison.rungs
    ]
    rungs = {r.name: r for r in comparison.rungs}
    assert rungs["structured_output"].both_passed
    assert rungs["structured_output"].figures["valid"] == [4, 4]
    assert rungs["tool_calls"].figures["valid"] == [6, 6]
    assert (rungs["image"].this, rungs["image"].other) == ("not_supported", "not_supported")
    assert all(r.both_passed for r in comparison.rungs if r.name != "image")
    first, second = rungs["target_context"].figures["prompt_tokens"]
    assert first == second and 400 <= first <= 512, "the same long prompt on both sides"
    ttft = rungs["short_text"].figures["stream_ttft_s"]
    assert all(isinstance(value, float) and value > 0 for value in ttft)


def test_two_real_starts_record_two_initialisation_times(tiny_llama: Path, tmp_path: Path) -> None:
    """`--start-cmd FILE --starts 2` with the real `vllm serve`: two starts, each timed from the
    log's milestones and until /health, stopped by SIGTERM; the ladder passes on the second."""
    python = realserver.vllm_python()
    assert python is not None
    port = realserver.free_port()
    environment = {
        **realserver.SERVER_ENV,
        "VLLM_CACHE_ROOT": str(realserver.CACHE_DIR / "vllm-cache"),
    }
    command = tmp_path / "start.sh"
    command.write_text(
        "# vLLM on the isolated node\n"
        + " ".join(f"{k}={v}" for k, v in environment.items())
        + f" {realserver.vllm_command(python)} serve {tiny_llama} \\\n"
        f"  --served-model-name {realserver.SERVED_MODEL_NAME} --host 127.0.0.1 --port {port} \\\n"
        f"  --max-model-len {realserver.MAX_MODEL_LEN} --enforce-eager --enable-prompt-tokens-details \\\n"
        "  --enable-auto-tool-choice --tool-call-parser hermes\n"
    )
    case = tmp_path / "case"
    result = run_cli(
        "validate", f"http://127.0.0.1:{port}", "--case", str(case), "--start-cmd", str(command),
        "--starts", "2", "--start-deadline", "600", "--max-concurrency", "1",
        "--target-context", "256", "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr + result.stdout[-3000:]
    summary = json.loads(result.stdout)
    starts = summary["starts"]
    assert starts["requested"] == 2 and starts["ready"] == 2
    assert len(starts["engine_init_s"]) == 2 and len(starts["ready_s"]) == 2
    for start in starts["starts"]:
        assert start["outcome"] == "ready" and start["stopped_by"] in ("sigterm", "sigkill")
        assert 0 < start["engine_init_s"] <= start["ready_s"]
        milestones = start["milestones"]
        assert {"args", "engine_init", "load_start", "kv_cache", "server_start"} <= set(milestones)
        assert milestones["engine_init"] < milestones["load_start"] < milestones["server_start"]
        log = Path(start["log"]).read_text()
        assert "Starting vLLM server on" in log and "init engine" in log
    statuses = {r["name"]: r["status"] for r in summary["rungs"]}
    assert statuses["structured_output"] == "passed" and statuses["tool_calls"] == "passed"
    assert summary["passed"] is True
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 2):
        raise AssertionError("the server is still listening after validate ended")
    print(
        "init times (engine_init_s, ready_s):", starts["engine_init_s"], starts["ready_s"],
        file=sys.stderr,
    )  # fmt: skip
