"""The HTTP client of `validate`: httpx with bounded timeouts and connection limits, an overall
deadline per request, and SSE parsing that times the first content-bearing event exactly.

It never raises for what a server does (errors, cut streams, malformed events): each request
ends in a RequestRecord whose `error` says what happened, so no failure is counted as a success
or dropped from the statistics.
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass, field
from typing import Any

import httpx

from vllm_triage.validate.models import RequestRecord

_CONNECT_TIMEOUT = 5.0
_REQUEST_CAP = 600.0


@dataclass
class StreamedToolCall:
    id: str | None = None
    name: str | None = None
    arguments: str = ""


@dataclass
class Answer:
    """What a chat completion returned, streamed or not: text, tool calls, raw body (non-stream)."""

    content: str = ""
    reasoning: str = ""
    tool_calls: list[StreamedToolCall] = field(default_factory=list)
    body: dict[str, Any] | None = None
    error_body: str = ""


def _error_text(response: httpx.Response) -> str:
    """The server's error message (OpenAI-style JSON or plain text), one line."""
    try:
        document = response.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return " ".join(response.text.split())[:300]
    if isinstance(document, dict):
        error = document.get("error", document)
        if isinstance(error, dict):
            return str(error.get("message") or error.get("detail") or error)[:300]
        return str(error)[:300]
    return str(document)[:300]


class Client:
    """One connection pool to the server under test; thread-safe (httpx.Client is)."""

    def __init__(
        self,
        base_url: str,
        api_key: str | None = None,
        max_connections: int = 64,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        self._http = httpx.Client(
            base_url=base_url.rstrip("/"),
            headers=headers,
            timeout=httpx.Timeout(60.0, connect=_CONNECT_TIMEOUT),
            limits=httpx.Limits(
                max_connections=max_connections, max_keepalive_connections=max_connections
            ),
            transport=transport,
        )
        self.started = time.monotonic()

    def close(self) -> None:
        self._http.close()

    @staticmethod
    def _timeout(deadline: float) -> httpx.Timeout:
        remaining = max(0.05, min(deadline - time.monotonic(), _REQUEST_CAP))
        return httpx.Timeout(remaining, connect=min(_CONNECT_TIMEOUT, remaining))

    def get(self, path: str, deadline: float) -> httpx.Response:
        """GET with the deadline; raises httpx errors (the caller says which rung failed)."""
        return self._http.get(path, timeout=self._timeout(deadline))

    def post(self, path: str, body: dict[str, Any], deadline: float) -> httpx.Response:
        return self._http.post(path, json=body, timeout=self._timeout(deadline))

    def chat(
        self, body: dict[str, Any], rung: str, kind: str, deadline: float
    ) -> tuple[RequestRecord, Answer]:
        """A non-streamed chat completion, measured."""
        record = RequestRecord(
            rung=rung, kind=kind, started_at=time.monotonic() - self.started, stream=False
        )
        answer = Answer()
        started = time.monotonic()
        try:
            response = self.post("/v1/chat/completions", {**body, "stream": False}, deadline)
        except httpx.HTTPError as exc:
            record.error = _transport_error(exc, deadline)
            record.e2e_s = time.monotonic() - started
            return record, answer
        record.e2e_s = time.monotonic() - started
        record.status_code = response.status_code
        if response.status_code != 200:
            answer.error_body = _error_text(response)
            record.error = f"HTTP {response.status_code}: {answer.error_body}"
            return record, answer
        try:
            document = response.json()
            choice = document["choices"][0]
            message = choice.get("message") or {}
        except (json.JSONDecodeError, KeyError, IndexError, TypeError):
            record.error = "the answer is not a chat completion (no choices[0])"
            return record, answer
        answer.body = document
        answer.content = message.get("content") or ""
        answer.reasoning = message.get("reasoning_content") or message.get("reasoning") or ""
        for call in message.get("tool_calls") or []:
            function = call.get("function") or {}
            answer.tool_calls.append(
                StreamedToolCall(
                    call.get("id"), function.get("name"), function.get("arguments") or ""
                )
            )
        record.finish_reason = choice.get("finish_reason")
        _usage(record, document.get("usage"))
        record.content_chars = len(answer.content)
        record.tool_calls = len(answer.tool_calls)
        record.ok = True
        return record, answer

    def stream_chat(
        self, body: dict[str, Any], rung: str, kind: str, deadline: float
    ) -> tuple[RequestRecord, Answer]:
        """A streamed chat completion: time to the first content-bearing event, gaps after it."""
        record = RequestRecord(
            rung=rung, kind=kind, started_at=time.monotonic() - self.started, stream=True
        )
        answer = Answer()
        payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
        started = time.monotonic()
        last_token: float | None = None
        done = False
        try:
            with self._http.stream(
                "POST", "/v1/chat/completions", json=payload, timeout=self._timeout(deadline)
            ) as response:
                record.status_code = response.status_code
                if response.status_code != 200:
                    response.read()
                    answer.error_body = _error_text(response)
                    record.error = f"HTTP {response.status_code}: {answer.error_body}"
                    return record, answer
                for line in response.iter_lines():
                    if time.monotonic() > deadline:
                        record.error = "the stream passed the rung's deadline"
                        break
                    if not line.startswith("data:"):
                        continue  # blank separators, comments (:), event:/id: fields
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    try:
                        event = json.loads(data)
                    except json.JSONDecodeError:
                        record.error = f"malformed SSE event: {data[:80]!r}"
                        break
                    if not isinstance(event, dict):
                        record.error = f"malformed SSE event: {data[:80]!r}"
                        break
                    if event.get("error"):
                        record.error = f"error event in the stream: {_short(event['error'])}"
                        break
                    if event.get("usage"):
                        _usage(record, event["usage"])
                    if _absorb(event, answer, record):
                        now = time.monotonic()
                        if last_token is None:
                            record.ttft_s = now - started
                        else:
                            record.inter_token_s.append(now - last_token)
                        last_token = now
        except httpx.HTTPError as exc:
            record.error = _transport_error(exc, deadline, cut=last_token is not None)
        record.e2e_s = time.monotonic() - started
        if record.error is None and not done:
            record.error = (
                f"the stream was cut in the middle ({len(record.inter_token_s) + 1} content "
                "events, no [DONE])"
                if last_token is not None and record.finish_reason is None
                else "the stream ended without [DONE]"
            )
        record.content_chars = len(answer.content)
        record.tool_calls = len(answer.tool_calls)
        record.ok = record.error is None
        return record, answer


def _absorb(event: dict[str, Any], answer: Answer, record: RequestRecord) -> bool:
    """Fold one chunk into the answer; True when it carried content (text, reasoning, tools)."""
    choices = event.get("choices") or []
    if not choices or not isinstance(choices[0], dict):
        return False
    choice = choices[0]
    if choice.get("finish_reason"):
        record.finish_reason = choice["finish_reason"]
    delta = choice.get("delta") or {}
    carried = False
    if text := delta.get("content"):
        answer.content += text
        carried = True
    if reasoning := delta.get("reasoning_content") or delta.get("reasoning"):
        answer.reasoning += reasoning
        carried = True
    for part in delta.get("tool_calls") or []:
        index = part.get("index", len(answer.tool_calls))
        while len(answer.tool_calls) <= index:
            answer.tool_calls.append(StreamedToolCall())
        call = answer.tool_calls[index]
        function = part.get("function") or {}
        call.id = call.id or part.get("id")
        call.name = call.name or function.get("name")
        call.arguments += function.get("arguments") or ""
        carried = True
    return carried


def _usage(record: RequestRecord, usage: Any) -> None:
    if not isinstance(usage, dict):
        return
    record.prompt_tokens = usage.get("prompt_tokens")
    record.completion_tokens = usage.get("completion_tokens")
    details = usage.get("prompt_tokens_details") or {}
    record.cached_tokens = details.get("cached_tokens") if isinstance(details, dict) else None


def _short(value: Any) -> str:
    text = value.get("message", value) if isinstance(value, dict) else value
    return " ".join(str(text).split())[:200]


def _transport_error(exc: httpx.HTTPError, deadline: float, cut: bool = False) -> str:
    if isinstance(exc, httpx.TimeoutException):
        if time.monotonic() >= deadline - 0.1:
            return "no answer before the rung's deadline" + (
                " (after the first token)" if cut else ""
            )
        return f"timed out ({exc.__class__.__name__})"
    if isinstance(exc, httpx.ConnectError):
        return f"cannot connect: {exc}"
    if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
        return "the stream was cut in the middle" if cut else f"connection broken: {exc}"
    return f"{exc.__class__.__name__}: {exc}"
