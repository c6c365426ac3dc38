"""A small OpenAI-compatible fake server for the faults a real vLLM cannot produce on demand:
500s, a stream cut in the middle, a first token that never comes, malformed SSE, no /metrics,
another model id. Without a fault it streams fixed tokens with no model work (the client's
ceiling in bench/bench_validate.py).

Run in-process (FakeServer as a context manager) or as a separate process:
`python tests/fakeserver.py PORT [FAULT]`.
"""

from __future__ import annotations

import base64
import json
import sys
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

FAULTS = (
    "none", "chat_500", "stream_cut", "no_first_token", "malformed_sse", "no_metrics",
    "no_tokenize", "tool_text_leak", "no_tool_parser", "echo_auth", "schema_ignored",
    "no_structured_output",
)  # fmt: skip
# The answer to a response_format request: what vllm_triage.validate.structured.SCHEMA asks for.
INCIDENT = {
    "node": "gpu-07", "severity": "high", "gpus": 8,
    "driver": {"branch": "r575", "upgrade_needed": True},
}  # fmt: skip
# With fault schema_ignored: what a server that does not enforce the schema lets a model write.
UNENFORCED = ['{"node": "gpu-07", "severity": "urgent", "gpus": 8}', "Sure! Here is the JSON:"]
TOKENS = ["Hel", "lo", ",", " wor", "ld", "!", " The", " end", "."]


@dataclass
class _State:
    fault: str = "none"
    model: str = "fake-model"
    max_model_len: int = 4096
    token_delay: float = 0.0
    queries: int = 0
    hits: int = 0
    seen_prompts: set[str] = field(default_factory=set)
    authorization: set[str] = field(default_factory=set)
    tools_strict: set[bool] = field(default_factory=set)  # `strict` of every tool declared
    response_formats: list[str] = field(default_factory=list)
    unenforced: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    state: _State

    def log_message(self, *args: Any) -> None:  # keep test output quiet
        pass

    def _json(self, status: int, document: Any) -> None:
        body = json.dumps(document).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _text(self, status: int, text: str) -> None:
        body = text.encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain; version=0.0.4")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self) -> None:
        state = self.state
        state.authorization.add(self.headers.get("Authorization") or "")
        if self.path == "/health":
            self._text(200, "")
        elif self.path == "/v1/models":
            self._json(200, {"object": "list", "data": [
                {"id": state.model, "object": "model", "max_model_len": state.max_model_len}
            ]})  # fmt: skip
        elif self.path == "/version":
            self._json(200, {"version": "0.0.0-fake"})
        elif self.path == "/metrics" and state.fault != "no_metrics":
            self._text(200, (
                "# TYPE vllm:prefix_cache_queries counter\n"
                f'vllm:prefix_cache_queries_total{{model_name="{state.model}"}} {state.queries}.0\n'
                "# TYPE vllm:prefix_cache_hits counter\n"
                f'vllm:prefix_cache_hits_total{{model_name="{state.model}"}} {state.hits}.0\n'
                "# TYPE vllm:cache_config_info gauge\n"
                'vllm:cache_config_info{block_size="16",enable_prefix_caching="True"} 1.0\n'
                "# TYPE vllm:kv_cache_usage_perc gauge\n"
                f'vllm:kv_cache_usage_perc{{model_name="{state.model}"}} 0.01\n'
            ))  # fmt: skip
        else:
            self._json(404, {"error": {"message": f"not found: {self.path}"}})

    def handle_one_request(self) -> None:
        self._request_body: dict[str, Any] | None = None  # a kept-alive connection's next request
        super().handle_one_request()

    def _body(self) -> dict[str, Any]:
        """The request's JSON body, read once (a subclass may look at it before do_POST)."""
        if self._request_body is None:
            length = int(self.headers.get("Content-Length") or 0)
            self._request_body = json.loads(self.rfile.read(length) or b"{}")
        return self._request_body

    def do_POST(self) -> None:
        state = self.state
        state.authorization.add(self.headers.get("Authorization") or "")
        body = self._body()
        if self.path == "/tokenize":
            if state.fault == "no_tokenize":
                self._json(404, {"error": {"message": "Not Found"}})
                return
            text = json.dumps(body.get("messages")) + json.dumps(body.get("tools") or "")
            self._json(200, {"count": len(text) // 4, "max_model_len": state.max_model_len})
            return
        if self.path != "/v1/chat/completions":
            self._json(404, {"error": {"message": "not found"}})
            return
        if body.get("model") != state.model:
            self._json(
                404, {"error": {"message": f"The model `{body.get('model')}` does not exist."}}
            )
            return
        if state.fault == "chat_500":
            self._json(500, {"error": {"message": "Internal Server Error: EngineCore died"}})
            return
        if state.fault == "echo_auth":  # a careless proxy: the credentials back in the error
            header = self.headers.get("Authorization") or ""
            decoded = base64.b64decode(header.removeprefix("Basic ") + "==").decode(
                errors="replace"
            )
            self._json(401, {"error": {"message": f"refused {header} ({decoded})"}})
            return
        messages = body.get("messages") or []
        if any(isinstance(m.get("content"), list) for m in messages):
            self._json(400, {"error": {"message": f"{state.model} is not a multimodal model"}})
            return
        tools = body.get("tools")
        choice = body.get("tool_choice")
        for tool in tools or ():
            state.tools_strict.add(bool(tool.get("function", {}).get("strict")))
        structured = (body.get("response_format") or {}).get("type")
        if structured:
            state.response_formats.append(structured)
            if state.fault == "no_structured_output":
                self._json(400, {"error": {"message": "response_format is not supported"}})
                return
        if tools and choice not in (None, "none") and state.fault == "no_tool_parser":
            self._json(
                400,
                {
                    "error": {
                        "message": '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'
                    }
                },
            )
            return
        prompt = json.dumps(messages[:-1])
        with state.lock:
            state.queries += len(prompt) // 4
            if prompt in state.seen_prompts:
                state.hits += len(prompt) // 4
            state.seen_prompts.add(prompt)
        call = tools and choice not in (None, "none")
        if structured:
            self._structured(body)
        elif body.get("stream"):
            self._stream(body, bool(call))
        else:
            self._json(200, self._completion(body, bool(call)))

    def _structured(self, body: dict[str, Any]) -> None:
        """A JSON answer, as a server that enforces response_format gives it (schema_ignored:
        the answers a model writes when nothing enforces it, in turn)."""
        state = self.state
        text = json.dumps(INCIDENT)
        if state.fault == "schema_ignored":
            with state.lock:
                text = UNENFORCED[state.unenforced % len(UNENFORCED)]
                state.unenforced += 1
        if not body.get("stream"):
            completion = self._completion(body, False)
            completion["choices"][0]["message"]["content"] = text
            self._json(200, completion)
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": state.model}
        for piece in (text[: len(text) // 2], text[len(text) // 2 :]):
            self._event({**chunk, "choices": [{"index": 0, "delta": {"content": piece}}]})
        self._event({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
        self._event({**chunk, "choices": [], "usage": {
            "prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}})  # fmt: skip
        self._event("[DONE]")

    def _completion(self, body: dict[str, Any], call: bool) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": "".join(TOKENS)}
        if call and self.state.fault == "tool_text_leak":
            message["content"] = (
                '<tool_call>{"name": "get_weather", "arguments": {"city": "Lisbon"}</tool_call>'
            )
        elif call:
            message = {"role": "assistant", "content": None, "tool_calls": [{
                "id": "call_1", "type": "function",
                "function": {"name": "get_weather", "arguments": '{"city": "Lisbon", "unit": "celsius"}'},
            }]}  # fmt: skip
        return {
            "id": "chatcmpl-fake", "object": "chat.completion", "model": self.state.model,
            "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if call else "stop"}],
            "usage": {"prompt_tokens": 10, "completion_tokens": len(TOKENS), "total_tokens": 10 + len(TOKENS)},
        }  # fmt: skip

    def _event(self, document: Any) -> None:
        data = document if isinstance(document, str) else json.dumps(document)
        self.wfile.write(f"data: {data}\n\n".encode())
        self.wfile.flush()

    def _stream(self, body: dict[str, Any], call: bool) -> None:
        state = self.state
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Connection", "close")
        self.end_headers()
        self.close_connection = True
        if state.fault == "no_first_token":
            time.sleep(3600)
            return
        chunk = {"id": "chatcmpl-fake", "object": "chat.completion.chunk", "model": state.model}
        self._event(
            {**chunk, "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
        )
        if state.fault == "malformed_sse":
            self._event("{this is not json")
            return
        pieces = TOKENS
        if call:
            arguments = ['{"city": ', '"Lisbon"}']
            self._event({**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": 0, "id": "call_1", "type": "function", "function": {"name": "get_weather", "arguments": ""}}
            ]}}]})  # fmt: skip
            for part in arguments:
                self._event({**chunk, "choices": [{"index": 0, "delta": {"tool_calls": [
                    {"index": 0, "function": {"arguments": part}}]}}]})  # fmt: skip
            pieces = []
        for index, piece in enumerate(pieces):
            if state.fault == "stream_cut" and index == 2:
                self.wfile.flush()
                self.connection.shutdown(2)
                return
            if state.token_delay:
                time.sleep(state.token_delay)
            self._event({**chunk, "choices": [{"index": 0, "delta": {"content": piece}}]})
        self._event(
            {
                **chunk,
                "choices": [
                    {"index": 0, "delta": {}, "finish_reason": "tool_calls" if call else "stop"}
                ],
            }
        )
        self._event({**chunk, "choices": [], "usage": {
            "prompt_tokens": 10, "completion_tokens": len(TOKENS), "total_tokens": 10 + len(TOKENS)}})  # fmt: skip
        self._event("[DONE]")


class FakeServer:
    """A fake server on 127.0.0.1 in a background thread; `fault` picks what goes wrong."""

    def __init__(
        self, fault: str = "none", model: str = "fake-model", token_delay: float = 0.0
    ) -> None:
        assert fault in FAULTS, fault
        state = _State(fault=fault, model=model, token_delay=token_delay)
        handler = type("Handler", (_Handler,), {"state": state})
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self.httpd.daemon_threads = True
        self.state = state
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    def __enter__(self) -> FakeServer:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


if __name__ == "__main__":
    port = int(sys.argv[1])
    fault = sys.argv[2] if len(sys.argv) > 2 else "none"
    state = _State(fault=fault)
    server = ThreadingHTTPServer(
        ("127.0.0.1", port), type("Handler", (_Handler,), {"state": state})
    )
    server.daemon_threads = True
    server.serve_forever()
