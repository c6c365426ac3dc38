"""Hostile OpenAI-compatible servers for the hardening tests of `validate`
(tests/test_validate_hostile.py).

One process serves every case, each under its own path: http://127.0.0.1:PORT/<case>/v1/models.
A case makes one endpoint misbehave (a trickle of one byte a second, a 1 GiB body, a gzip bomb,
JSON of a hostile shape); every other endpoint answers like tests/fakeserver.py. Large bodies are
generated while they are sent, never held; the gzip bomb (1 GiB of zeros in about 1 MB) is made
once and cached under .cache/hostile/.

Run: `python tests/hostile.py [--lifetime SECONDS]`: it prints its port on the first line and
exits when the lifetime (default 900 s) is over, whatever its clients do.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import json
import os
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from fakeserver import _Handler, _State

GIB = 1 << 30
CHAT = "/v1/chat/completions"
BOMB = Path(__file__).resolve().parent.parent / ".cache" / "hostile" / "zeros-1GiB.gz"
ROLE = {"choices": [{"index": 0, "delta": {"role": "assistant", "content": ""}}]}
DEEP = "[" * 100_000 + "]" * 100_000
HUGE_INT = "9" * 5000  # past Python's int <-> str limit (4300 digits)


@functools.cache
def gzip_bomb() -> bytes:
    """1 GiB of zeros, gzip level 9 (~1 MB): compressed once, as a stream, into a cache file."""
    if not BOMB.is_file():
        BOMB.parent.mkdir(parents=True, exist_ok=True)
        partial = BOMB.with_suffix(f".{os.getpid()}.partial")
        compressor = zlib.compressobj(9, zlib.DEFLATED, zlib.MAX_WBITS | 16)
        zeros = bytes(1 << 20)
        with partial.open("wb") as out:
            for _ in range(GIB // len(zeros)):
                out.write(compressor.compress(zeros))
            out.write(compressor.flush())
        partial.replace(BOMB)
    return BOMB.read_bytes()


def _event(choice: dict[str, Any]) -> dict[str, Any]:
    return {"object": "chat.completion.chunk", "choices": [{"index": 0, **choice}]}


def _delta(**delta: Any) -> dict[str, Any]:
    return _event({"delta": delta})


def _tool_index(index: Any) -> dict[str, Any]:
    call = {"index": index, "id": "c1", "function": {"name": "get_weather", "arguments": "{}"}}
    return _delta(tool_calls=[call])


def _completion(**overrides: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": "ok"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 10, "completion_tokens": 2},
    }
    document.update(overrides)
    return document


class _Hostile(_Handler):
    """The fake server's handler, with the case's endpoint replaced by its misbehaviour."""

    def do_GET(self) -> None:
        self._dispatch("GET")

    def do_POST(self) -> None:
        self._dispatch("POST")

    def _dispatch(self, method: str) -> None:
        parts = self.path.split("/", 2)
        case = CASES.get(parts[1]) if len(parts) > 1 else None
        self.path = "/" + (parts[2] if len(parts) > 2 else "")
        stream = bool(self._body().get("stream")) if method == "POST" else None
        if case is None or (case.method, case.path) != (method, self.path):
            pass
        elif case.stream is None or case.stream == stream:
            self.close_connection = True
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                case.run(self)  # until the client gives up, for most cases
            return
        super().do_GET() if method == "GET" else super().do_POST()

    # --- what a case can send -------------------------------------------------------------------

    def send(self, data: bytes) -> None:
        self.wfile.write(data)
        self.wfile.flush()

    def head(self, status: int, content_type: str, **headers: str | int) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Connection", "close")
        for name, value in headers.items():
            self.send_header(name.replace("_", "-"), str(value))
        self.end_headers()

    def trickle(self, data: bytes, gap: float = 1.0) -> None:
        """One byte, then a pause, for ever (the client's deadline must end it)."""
        for byte in data:
            self.send(bytes([byte]))
            time.sleep(gap)

    def endless(self, start: bytes, unit: bytes, total: int = GIB) -> None:
        """`start`, then `unit` again and again up to `total` bytes, made as they are sent."""
        self.send(start)
        for _ in range((total - len(start)) // len(unit)):
            self.send(unit)

    def raw_json(self, text: str, status: int = 200) -> None:
        body = text.encode()
        self.head(status, "application/json", Content_Length=len(body))
        self.send(body)

    def sse(self, *events: dict[str, Any] | str) -> None:
        """A stream: the role event, the given events, [DONE]."""
        self.head(200, "text/event-stream")
        for event in (ROLE, *events, "[DONE]"):
            data = event if isinstance(event, str) else json.dumps(event)
            self.send(f"data: {data}\n\n".encode())

    def bomb(self, content_type: str, encoding: str = "gzip") -> None:
        data = gzip_bomb()
        self.head(200, content_type, Content_Encoding=encoding, Content_Length=len(data))
        self.send(data)


@dataclass(frozen=True)
class Case:
    method: str
    path: str
    run: Callable[[_Hostile], None]
    stream: bool | None = None  # POST chat only: streamed requests, non-streamed, or both


def _get(path: str, run: Callable[[_Hostile], None]) -> Case:
    return Case("GET", path, run)


def _chat(run: Callable[[_Hostile], None], stream: bool) -> Case:
    return Case("POST", CHAT, run, stream)


_JSON, _TEXT, _SSE = "application/json", "text/plain; version=0.0.4", "text/event-stream"
_CONTENT_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"x"}}]}\n\n'
_LONG_CONTENT_EVENT = b'data: {"choices":[{"index":0,"delta":{"content":"%s"}}]}\n\n' % (
    b"x" * 1000
)
_METRIC_LINE = b'vllm:num_requests_running{model_name="fake-model"} 1.0\n'

# A case that sends several parts is a lambda returning a tuple: its parts run in order.
CASES: dict[str, Case] = {
    # --- trickles: one byte a second ------------------------------------------------------------
    "trickle_health_headers": _get(
        "/health", lambda h: h.trickle(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    ),
    "trickle_models": _get(
        "/v1/models",
        lambda h: (
            h.head(200, _JSON, Content_Length=100_000),
            h.trickle(b'{"object": "list", "data": [{"id": "fake-model"}' + b" " * 99_000),
        ),
    ),
    "trickle_metrics": _get(
        "/metrics",
        lambda h: (h.head(200, _TEXT, Content_Length=100_000), h.trickle(_METRIC_LINE * 2000)),
    ),
    "trickle_chat": _chat(
        lambda h: (
            h.head(200, _JSON, Content_Length=100_000),
            h.trickle(json.dumps(_completion()).encode() + b" " * 99_000),
        ),
        stream=False,
    ),
    "trickle_stream": _chat(
        lambda h: (
            h.head(200, _SSE),
            h.send(f"data: {json.dumps(ROLE)}\n\n".encode() + _CONTENT_EVENT),
            h.trickle(_CONTENT_EVENT * 100),
        ),
        stream=True,
    ),
    # --- 1 GiB bodies, made as they are sent ----------------------------------------------------
    "huge_models": _get(
        "/v1/models",
        lambda h: (h.head(200, _JSON, Content_Length=GIB), h.endless(b'{"data": [', b" " * 65536)),
    ),
    "huge_chunked_models": _get(
        "/v1/models",
        lambda h: (
            h.head(200, _JSON, Transfer_Encoding="chunked"),
            h.endless(b"40000000\r\n" + b'{"data": [', b" " * 65536),
        ),
    ),
    "huge_chat": _chat(
        lambda h: (
            h.head(200, _JSON, Content_Length=GIB),
            h.endless(b'{"choices": [', b" " * 65536),
        ),
        stream=False,
    ),
    "huge_error": _chat(
        lambda h: (
            h.head(500, _JSON, Content_Length=GIB),
            h.endless(b'{"error": {"message": "overloaded ', b"x" * 65536),
        ),
        stream=False,
    ),
    "huge_stream": _chat(  # long events: the size cap, not the parsing time, must end it
        lambda h: (h.head(200, _SSE), h.endless(b"", _LONG_CONTENT_EVENT * 64)), stream=True
    ),
    "huge_line": _chat(
        lambda h: (
            h.head(200, _SSE),
            h.endless(b'data: {"choices":[{"index":0,"delta":{"content":"', b"a" * 65536),
        ),
        stream=True,
    ),
    "huge_metrics": _get(
        "/metrics",
        lambda h: (
            h.head(200, _TEXT, Content_Length=GIB),
            h.endless(b"# TYPE vllm:num_requests_running gauge\n", _METRIC_LINE * 1000),
        ),
    ),
    # --- gzip bombs: ~1 MB that inflates to 1 GiB -----------------------------------------------
    "gzip_models": _get("/v1/models", lambda h: h.bomb(_JSON)),
    "gzip_metrics": _get("/metrics", lambda h: h.bomb(_TEXT)),
    "gzip_chat": _chat(lambda h: h.bomb(_JSON), stream=False),
    "gzip_stream": _chat(lambda h: h.bomb(_SSE), stream=True),
    "gzip_twice": _get("/v1/models", lambda h: h.bomb(_JSON, "gzip, gzip")),
    "brotli": _get("/v1/models", lambda h: h.bomb(_JSON, "br")),
    # --- SSE events of hostile shapes -----------------------------------------------------------
    "huge_index": _chat(lambda h: h.sse(_tool_index(50_000_000)), stream=True),
    "negative_index": _chat(lambda h: h.sse(_tool_index(-1)), stream=True),
    "float_index": _chat(lambda h: h.sse(_tool_index(1.5)), stream=True),
    "string_index": _chat(lambda h: h.sse(_tool_index("0")), stream=True),
    "many_tool_calls": _chat(
        lambda h: h.sse(*(_tool_index(i) for i in range(64)), _delta(tool_calls=[{"id": "x"}])),
        stream=True,
    ),
    "deep_sse": _chat(lambda h: h.sse(DEEP), stream=True),
    "bigint_usage": _chat(
        lambda h: h.sse(f'{{"choices": [], "usage": {{"completion_tokens": {HUGE_INT}}}}}'),
        stream=True,
    ),
    "delta_string": _chat(lambda h: h.sse(_event({"delta": "hello"})), stream=True),
    "choices_object_stream": _chat(lambda h: h.sse({"choices": {"0": {}}}), stream=True),
    "tool_calls_object": _chat(lambda h: h.sse(_delta(tool_calls={"index": 0})), stream=True),
    "content_number": _chat(lambda h: h.sse(_delta(content=42)), stream=True),
    "event_number": _chat(lambda h: h.sse("5"), stream=True),
    "event_not_json": _chat(lambda h: h.sse("{'choices': []}"), stream=True),
    "error_event": _chat(lambda h: h.sse({"error": {"message": "engine died"}}), stream=True),
    "usage_string_stream": _chat(
        lambda h: h.sse({"choices": [], "usage": {"prompt_tokens": "10"}}), stream=True
    ),
    # --- chat completions of hostile shapes -----------------------------------------------------
    "choices_object": _chat(lambda h: h._json(200, _completion(choices={"0": {}})), stream=False),
    "choices_empty": _chat(lambda h: h._json(200, _completion(choices=[])), stream=False),
    "message_list": _chat(
        lambda h: h._json(200, _completion(choices=[{"message": []}])), stream=False
    ),
    "usage_string": _chat(
        lambda h: h._json(200, _completion(usage={"prompt_tokens": "10"})), stream=False
    ),
    "usage_negative": _chat(
        lambda h: h._json(200, _completion(usage={"completion_tokens": -5})), stream=False
    ),
    "finish_reason_number": _chat(
        lambda h: h._json(
            200, _completion(choices=[{"message": {"content": "ok"}, "finish_reason": 1}])
        ),
        stream=False,
    ),
    "chat_not_object": _chat(lambda h: h._json(200, ["ok"]), stream=False),
    "deep_chat": _chat(lambda h: h.raw_json(DEEP), stream=False),
    "bigint_chat": _chat(
        lambda h: h.raw_json(
            f'{{"choices": [{{"message": {{"content": "ok"}}}}], '
            f'"usage": {{"prompt_tokens": {HUGE_INT}}}}}'
        ),
        stream=False,
    ),
    # --- model lists of hostile shapes ----------------------------------------------------------
    "data_object": _get("/v1/models", lambda h: h._json(200, {"data": {"id": "fake-model"}})),
    "data_strings": _get("/v1/models", lambda h: h._json(200, {"data": ["fake-model"]})),
    "models_array": _get("/v1/models", lambda h: h._json(200, [1, 2])),
    "model_id_number": _get("/v1/models", lambda h: h._json(200, {"data": [{"id": 5}]})),
    "max_model_len_string": _get(
        "/v1/models",
        lambda h: h._json(200, {"data": [{"id": "fake-model", "max_model_len": "2048"}]}),
    ),
    "max_model_len_huge": _get(
        "/v1/models",
        lambda h: h._json(200, {"data": [{"id": "fake-model", "max_model_len": 10**12}]}),
    ),
    "max_model_len_one": _get(
        "/v1/models", lambda h: h._json(200, {"data": [{"id": "fake-model", "max_model_len": 1}]})
    ),
    "deep_models": _get("/v1/models", lambda h: h.raw_json(DEEP)),
    "bigint_models": _get(
        "/v1/models",
        lambda h: h.raw_json(f'{{"data": [{{"id": "fake-model", "max_model_len": {HUGE_INT}}}]}}'),
    ),
    "models_html": _get(
        "/v1/models",
        lambda h: (h.head(200, "text/html", Content_Length=13), h.send(b"<html></html>")),
    ),
    # --- the other endpoints --------------------------------------------------------------------
    "version_array": _get("/version", lambda h: h._json(200, [])),
    "metrics_garbage": _get(
        "/metrics",
        lambda h: (h.head(200, _TEXT, Content_Length=16), h.send(b"\x00\xff{{{ garbage \n\n")),
    ),
    "metrics_nan": _get(
        "/metrics",
        lambda h: h._text(
            200,
            "# TYPE vllm:prefix_cache_queries counter\n"
            "vllm:prefix_cache_queries_total NaN\n"
            "# TYPE vllm:prefix_cache_hits counter\n"
            "vllm:prefix_cache_hits_total +Inf\n"
            "# TYPE vllm:cache_config_info gauge\n"
            'vllm:cache_config_info{block_size="abc",enable_prefix_caching="True"} 1.0\n',
        ),
    ),
    "tokenize_string": Case("POST", "/tokenize", lambda h: h._json(200, {"count": "12"})),
    "tokenize_zero": Case("POST", "/tokenize", lambda h: h._json(200, {"count": 0})),
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lifetime", type=float, default=900.0)
    args = parser.parse_args()
    threading.Timer(args.lifetime, os._exit, (0,)).start()
    gzip_bomb()  # made (or read) before any client waits for it
    handler = type("Handler", (_Hostile,), {"state": _State()})
    server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    print(server.server_address[1], flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
