"""Smoke tests against a real vLLM (CPU build, tiny random model): they pin the server behaviours the
validation ladder relies on, so that a vLLM upgrade that changes one of them fails here first.

Tests that use these servers carry the `realserver` marker (conftest adds it).
`real_server` runs with vLLM's defaults (prefix caching on) and the Hermes tool parser;
`real_server_plain` runs with `--no-enable-prefix-caching` and no tool parser. The model is random:
tests check structure, never content.
"""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
import pytest
import realserver
from realserver import RealServer, metric_value

from vllm_triage.validate.metrics import parse_metrics

HI = [{"role": "user", "content": "hi"}]
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}


def chat(server: RealServer, **body: object) -> httpx.Response:
    payload = {"model": server.model, "messages": HI, "max_tokens": 8, "temperature": 0, **body}
    return httpx.post(f"{server.url}/v1/chat/completions", json=payload, timeout=120.0)


def error_message(response: httpx.Response) -> str:
    return str(response.json()["error"]["message"])


def metrics(server: RealServer) -> str:
    response = httpx.get(f"{server.url}/metrics", timeout=30.0)
    assert response.status_code == 200
    return response.text


def cache_config(server: RealServer) -> dict[str, str]:
    samples = parse_metrics(metrics(server)).samples["vllm:cache_config_info"]
    assert len(samples) == 1
    return samples[0][0]


# --- no server ------------------------------------------------------------------------------------


def test_makefile_installs_the_version_the_tests_expect() -> None:
    makefile = (realserver.REPO / "Makefile").read_text(encoding="utf-8")
    pinned = re.search(r"^VLLM_VERSION\s*:?=\s*(\S+)", makefile, re.MULTILINE)
    assert pinned is not None
    assert pinned.group(1) == realserver.VLLM_VERSION


def test_metrics_parser_reads_labels_with_commas_and_quotes() -> None:
    """vLLM's info metrics carry quoted label values; the package's parser (prometheus_client)."""
    text = (
        "# HELP x y\n"
        'vllm:cache_config_info{a="1,2",b="say \\"hi\\"",enable_prefix_caching="True"} 1.0\n'
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 1024.0\n'
    )
    parsed = parse_metrics(text).samples
    assert parsed["vllm:cache_config_info"][0][0]["enable_prefix_caching"] == "True"
    assert parsed["vllm:cache_config_info"][0][0]["a"] == "1,2"
    assert metric_value(text, "vllm:prefix_cache_hits_total", model_name="m") == 1024.0
    assert metric_value(text, "vllm:missing_total") == 0.0


# --- start-up -------------------------------------------------------------------------------------


def test_a_server_that_dies_at_start_fails_fast_with_its_log(tiny_llama: Path) -> None:
    with (
        pytest.raises(realserver.ServerStartError) as caught,
        realserver.serve(tiny_llama, "--no-such-flag", name="bad_flag", startup_timeout=120),
    ):
        pass  # pragma: no cover - the server never starts
    message = str(caught.value)
    assert "exited with" in message
    assert "--no-such-flag" in message  # argparse names it in the log's last lines


def test_server_started_and_reports_its_size(real_server: RealServer) -> None:
    assert real_server.startup_s < realserver.STARTUP_TIMEOUT_S
    assert 500 * 2**20 < real_server.rss_bytes() < 8 * 2**30
    assert "--enforce-eager" in real_server.args


# --- endpoints ------------------------------------------------------------------------------------


@pytest.mark.realserver  # the server comes from getfixturevalue: the conftest hook cannot see it
@pytest.mark.parametrize("which", ["real_server", "real_server_plain"])
def test_health_models_version(
    which: str, request: pytest.FixtureRequest, tiny_llama: Path
) -> None:
    server: RealServer = request.getfixturevalue(which)
    assert httpx.get(f"{server.url}/health", timeout=10).status_code == 200

    models = httpx.get(f"{server.url}/v1/models", timeout=10).json()
    assert [m["id"] for m in models["data"]] == ["tiny-llama"]
    assert models["data"][0]["max_model_len"] == realserver.MAX_MODEL_LEN
    assert models["data"][0]["root"] == str(tiny_llama)

    assert httpx.get(f"{server.url}/version", timeout=10).json() == {
        "version": realserver.VLLM_VERSION
    }


def test_tokenize_counts_prompt_and_chat_tokens(real_server: RealServer) -> None:
    url = f"{real_server.url}/tokenize"
    plain = httpx.post(url, json={"model": real_server.model, "prompt": "hello world"}).json()
    assert plain["count"] == len(plain["tokens"]) > 0
    assert plain["max_model_len"] == realserver.MAX_MODEL_LEN

    as_chat = httpx.post(url, json={"model": real_server.model, "messages": HI}).json()
    # ChatML around the message: <|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n
    assert as_chat["count"] == len(as_chat["tokens"]) > 2
    assert as_chat["tokens"][0] == as_chat["tokens"][-3]  # <|im_start|> twice


def test_chat_completion(real_server: RealServer) -> None:
    response = chat(real_server)
    assert response.status_code == 200
    body = response.json()
    assert body["object"] == "chat.completion"
    assert body["model"] == "tiny-llama"
    choice = body["choices"][0]
    assert choice["message"]["role"] == "assistant"
    assert isinstance(choice["message"]["content"], str)
    assert choice["finish_reason"] in ("stop", "length")
    usage = body["usage"]
    assert usage["prompt_tokens"] > 0
    assert 0 < usage["completion_tokens"] <= 8
    assert usage["total_tokens"] == usage["prompt_tokens"] + usage["completion_tokens"]
    # --enable-prompt-tokens-details
    assert usage["prompt_tokens_details"]["cached_tokens"] >= 0


def test_streamed_chat_completion_ends_with_done(real_server: RealServer) -> None:
    payload = {
        "model": real_server.model,
        "messages": HI,
        "max_tokens": 8,
        "temperature": 0,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    with httpx.stream(
        "POST", f"{real_server.url}/v1/chat/completions", json=payload, timeout=120
    ) as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        events = [line[len("data: ") :] for line in response.iter_lines() if line.strip()]
    assert events[-1] == "[DONE]"
    chunks = [json.loads(event) for event in events[:-1]]
    assert all(chunk["object"] == "chat.completion.chunk" for chunk in chunks)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] in ("stop", "length")
    assert chunks[-1]["choices"] == []  # include_usage: a last chunk with the usage only
    assert chunks[-1]["usage"]["completion_tokens"] > 0


def test_image_part_is_refused_by_a_text_model(real_server: RealServer) -> None:
    image = {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}
    messages = [{"role": "user", "content": [{"type": "text", "text": "what is it?"}, image]}]
    response = chat(real_server, messages=messages)
    assert response.status_code == 400
    assert error_message(response) == "tiny-llama is not a multimodal model"


def test_unknown_model_and_too_many_tokens(real_server: RealServer) -> None:
    response = chat(real_server, model="nope")
    assert response.status_code == 404
    assert "does not exist" in error_message(response)

    response = chat(real_server, max_tokens=realserver.MAX_MODEL_LEN + 1)
    assert response.status_code == 400
    assert "cannot be greater than max_model_len=2048" in error_message(response)


# --- metrics and prefix caching -------------------------------------------------------------------


@pytest.mark.realserver
@pytest.mark.parametrize(
    ("which", "enabled"), [("real_server", "True"), ("real_server_plain", "False")]
)
def test_metrics_name_the_prefix_cache_and_its_setting(
    which: str, enabled: str, request: pytest.FixtureRequest
) -> None:
    server: RealServer = request.getfixturevalue(which)
    text = metrics(server)
    for name in (
        "vllm:prefix_cache_queries_total",
        "vllm:prefix_cache_hits_total",
        "vllm:prompt_tokens_cached_total",
        "vllm:kv_cache_usage_perc",
        "vllm:time_to_first_token_seconds_count",
    ):
        assert re.search(rf"^{re.escape(name)}{{", text, re.MULTILINE), name
    config = cache_config(server)
    assert config["enable_prefix_caching"] == enabled
    assert config["block_size"] == "128"


def long_prompt_messages(server: RealServer) -> list[dict[str, str]]:
    """A user message of more than two 128-token blocks, new to the server's prefix cache."""
    text = f"{uuid.uuid4()} " + " ".join(f"request {i} reads the weather." for i in range(60))
    count = httpx.post(
        f"{server.url}/tokenize", json={"model": server.model, "prompt": text}
    ).json()["count"]
    assert count > 2 * 128
    return [{"role": "user", "content": text}]


def test_prefix_cache_hits_whole_blocks_when_enabled(real_server: RealServer) -> None:
    messages = long_prompt_messages(real_server)
    before = metrics(real_server)
    first = chat(real_server, messages=messages, max_tokens=1).json()
    second = chat(real_server, messages=messages, max_tokens=1).json()
    after = metrics(real_server)

    assert first["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    cached = second["usage"]["prompt_tokens_details"]["cached_tokens"]
    assert cached >= 2 * 128
    assert cached % 128 == 0  # whole blocks
    hits = metric_value(after, "vllm:prefix_cache_hits_total") - metric_value(
        before, "vllm:prefix_cache_hits_total"
    )
    queries = metric_value(after, "vllm:prefix_cache_queries_total") - metric_value(
        before, "vllm:prefix_cache_queries_total"
    )
    assert hits == cached
    assert queries == 2 * first["usage"]["prompt_tokens"]


def test_prefix_cache_counters_stay_zero_when_disabled(real_server_plain: RealServer) -> None:
    messages = long_prompt_messages(real_server_plain)
    chat(real_server_plain, messages=messages, max_tokens=1)
    second = chat(real_server_plain, messages=messages, max_tokens=1).json()
    after = metrics(real_server_plain)
    assert second["usage"]["prompt_tokens_details"]["cached_tokens"] == 0
    assert metric_value(after, "vllm:prefix_cache_hits_total") == 0
    assert metric_value(after, "vllm:prefix_cache_queries_total") == 0


# --- tool calls -----------------------------------------------------------------------------------


def test_tool_choice_without_a_parser_is_refused(real_server_plain: RealServer) -> None:
    required = chat(real_server_plain, tools=[WEATHER_TOOL], tool_choice="required")
    assert required.status_code == 400
    assert error_message(required) == 'tool_choice="required" requires --tool-call-parser to be set'

    auto = chat(real_server_plain, tools=[WEATHER_TOOL], tool_choice="auto")
    assert auto.status_code == 400
    assert error_message(auto) == (
        '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
    )


@pytest.mark.parametrize("strict", [False, True])
def test_tool_choice_required_with_hermes_forces_a_call(
    real_server: RealServer, strict: bool
) -> None:
    """The Hermes structural tag makes the output start with the call; the random model may then
    finish it (parsed `tool_calls`) or run out of tokens inside the arguments (the raw text stays
    in `content`, `tool_calls` is absent or empty, and the server logs a JSONDecodeError)."""
    tool = json.loads(json.dumps(WEATHER_TOOL))
    tool["function"]["strict"] = strict
    response = chat(real_server, tools=[tool], tool_choice="required", max_tokens=64)
    assert response.status_code == 200
    choice = response.json()["choices"][0]
    message = choice["message"]
    if message.get("tool_calls"):
        assert choice["finish_reason"] in ("tool_calls", "stop")
        for call in message["tool_calls"]:
            assert call["type"] == "function"
            assert call["id"]
            assert call["function"]["name"] == "get_weather"
            assert isinstance(call["function"]["arguments"], str)
    else:
        assert choice["finish_reason"] == "length"
        assert message["content"].startswith('<tool_call>\n{"name": "get_weather", "arguments": ')


def test_streamed_tool_choice_required_sends_the_call_as_deltas(real_server: RealServer) -> None:
    """Streamed, the Hermes parser sends the forced call as `tool_calls` deltas (name first, then
    argument pieces) whether or not the arguments ever close."""
    payload = {
        "model": real_server.model,
        "messages": HI,
        "tools": [WEATHER_TOOL],
        "tool_choice": "required",
        "max_tokens": 32,
        "temperature": 0,
        "stream": True,
    }
    with httpx.stream(
        "POST", f"{real_server.url}/v1/chat/completions", json=payload, timeout=120
    ) as response:
        assert response.status_code == 200
        events = [line[len("data: ") :] for line in response.iter_lines() if line.strip()]
    assert events[-1] == "[DONE]"
    deltas = [json.loads(e)["choices"][0]["delta"] for e in events[:-1]]
    calls = [call for delta in deltas for call in delta.get("tool_calls") or []]
    assert calls
    assert calls[0]["function"]["name"] == "get_weather"
    assert calls[0]["id"]
    assert {call["index"] for call in calls} == {0}
