"""The HTTP client of `validate`: httpx with connection limits, a total deadline per request (see
transport.py), bodies read within size caps (body.py) and checked against their shapes (wire.py),
and SSE parsing that times the first content-bearing event exactly.

It never raises for what a server does (errors, cut streams, malformed or oversized events): a
chat request ends in a RequestRecord whose `error` says what happened, so no failure is counted
as a success or dropped from the statistics; the other requests raise ReplyError, one line.
Nothing a server says back is recorded before the credentials are masked out of it.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import httpx

from vllm_triage.deadline_http import DeadlineTransport, deadline_scope
from vllm_triage.safejson import JsonError, parse_json
from vllm_triage.validate import wire
from vllm_triage.validate.body import (
    ACCEPT_ENCODING,
    BodyError,
    decoded_chunks,
    lines,
    read_body,
    read_head,
)
from vllm_triage.validate.credentials import Credentials
from vllm_triage.validate.models import RequestRecord

_CONNECT_TIMEOUT = 5.0
_REQUEST_CAP = 600.0
_CHAT = "/v1/chat/completions"
# Caps on what a server may send (decoded bytes). A real answer of the ladder is a few KB.
BODY_CAP = 4 * 1024 * 1024  # one JSON answer: /v1/models, a chat completion, /tokenize
METRICS_CAP = 4 * 1024 * 1024  # /metrics: ~2 s to parse at this size; a real page is < 1 MB
STREAM_CAP = 4 * 1024 * 1024  # a whole SSE stream
LINE_CAP = 256 * 1024  # one SSE line
_ERROR_QUOTE = 64 * 1024  # the head of an error page, to quote from
_AFTER_FIRST_TOKEN = "after the first token"
_AFTER_HEADERS = "its body was still arriving"
# Inter-token gaps kept per request: far more than the ladder's answers have tokens.
MAX_GAPS = 4096


class ReplyError(Exception):
    """A request without a usable answer (transport, deadline, status, size, shape); one line.

    `unreachable` when no connection could be made at all."""

    def __init__(self, message: str, *, unreachable: bool = False) -> None:
        super().__init__(message)
        self.unreachable = unreachable


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


@dataclass
class _Assembly:
    """A streamed answer in pieces, joined once at the end (no quadratic string growth)."""

    content: list[str] = field(default_factory=list)
    reasoning: list[str] = field(default_factory=list)
    calls: list[tuple[StreamedToolCall, list[str]]] = field(default_factory=list)

    def absorb(self, chunk: wire.ChatCompletionChunk, record: RequestRecord) -> bool:
        """Fold one event in; True when it carried content (text, reasoning, tool calls)."""
        if not chunk.choices:
            return False
        choice = chunk.choices[0]
        if choice.finish_reason:
            record.finish_reason = choice.finish_reason
        delta = choice.delta
        if delta is None:
            return False
        carried = False
        if delta.content:
            self.content.append(delta.content)
            carried = True
        if delta.thinking:
            self.reasoning.append(delta.thinking)
            carried = True
        for part in delta.tool_calls or ():
            index = len(self.calls) if part.index is None else part.index
            if index >= wire.MAX_TOOL_CALLS:
                raise wire.WireError(
                    f"SSE event: more than {wire.MAX_TOOL_CALLS} tool calls in one answer"
                )
            while len(self.calls) <= index:
                self.calls.append((StreamedToolCall(), []))
            call, arguments = self.calls[index]
            function = part.function or wire.Function()
            call.id = call.id or part.id
            call.name = call.name or function.name
            arguments.append(function.arguments or "")
            carried = True
        return carried

    def answer(self) -> Answer:
        calls = [
            StreamedToolCall(call.id, call.name, "".join(arguments))
            for call, arguments in self.calls
        ]
        return Answer("".join(self.content), "".join(self.reasoning), calls)


class Client:
    """One connection pool to the server under test; thread-safe (httpx.Client is).

    Credentials in the URL (`http://user:password@host`) are sent as basic auth, the API key as
    a bearer token; `base_url` is the URL without them."""

    def __init__(
        self, base_url: str, api_key: str | None = None, max_connections: int = 64
    ) -> None:
        bare, self.credentials = Credentials.split(base_url, api_key)
        self.base_url = bare.rstrip("/")
        headers = {"Accept-Encoding": ACCEPT_ENCODING}
        if api_key:
            headers["Authorization"] = f"Bearer {api_key}"
        limits = httpx.Limits(
            max_connections=max_connections, max_keepalive_connections=max_connections
        )
        self._http = httpx.Client(
            base_url=self.base_url,
            headers=headers,
            auth=self.credentials.auth,
            timeout=httpx.Timeout(60.0, connect=_CONNECT_TIMEOUT),
            transport=DeadlineTransport(limits),
        )
        self.started = time.monotonic()

    def close(self) -> None:
        self._http.close()

    @contextlib.contextmanager
    def _open(
        self, method: str, path: str, deadline: float, body: dict[str, Any] | None = None
    ) -> Iterator[httpx.Response]:
        """A response whose headers came; reading its body inside the block keeps the deadline."""
        remaining = max(0.05, min(deadline - time.monotonic(), _REQUEST_CAP))
        timeout = httpx.Timeout(remaining, connect=min(_CONNECT_TIMEOUT, remaining))
        with (
            deadline_scope(time.monotonic() + remaining),
            self._http.stream(method, path, json=body, timeout=timeout) as response,
        ):
            yield response

    def fetch(
        self,
        path: str,
        deadline: float,
        body: dict[str, Any] | None = None,
        cap: int = BODY_CAP,
    ) -> bytes:
        """The body of a 200 answer to GET (or POST of `body`); ReplyError for anything else."""
        answered = False
        try:
            with self._open("GET" if body is None else "POST", path, deadline, body) as response:
                answered = True
                if response.status_code != 200:
                    quote = self._quote(response)
                    raise ReplyError(
                        f"{path} answered HTTP {response.status_code}"
                        + (f": {quote}" if quote else "")
                    )
                return read_body(response, cap, path)
        except httpx.HTTPError as exc:
            after = _AFTER_HEADERS if answered else ""
            raise ReplyError(
                f"{path}: {self._transport_error(exc, deadline, after)}",
                unreachable=isinstance(exc, httpx.ConnectError | httpx.ConnectTimeout),
            ) from None
        except BodyError as exc:
            raise ReplyError(str(exc)) from None

    def fetch_json(
        self,
        path: str,
        shape: type[wire.Shape],
        deadline: float,
        body: dict[str, Any] | None = None,
    ) -> wire.Shape:
        """A 200 answer's JSON as `shape`; ReplyError when there is none or it does not fit."""
        data = self.fetch(path, deadline, body)
        try:
            return wire.parse(data, shape, path)
        except wire.WireError as exc:
            raise ReplyError(self.credentials.mask(str(exc))) from None

    def chat(
        self, body: dict[str, Any], rung: str, kind: str, deadline: float
    ) -> tuple[RequestRecord, Answer]:
        """A non-streamed chat completion, measured."""
        record = RequestRecord(
            rung=rung, kind=kind, started_at=time.monotonic() - self.started, stream=False
        )
        answer = Answer()
        started = time.monotonic()
        data = b""
        try:
            with self._open("POST", _CHAT, deadline, {**body, "stream": False}) as response:
                record.status_code = response.status_code
                if response.status_code != 200:
                    answer.error_body = self._quote(response)
                    record.error = f"HTTP {response.status_code}: {answer.error_body}"
                else:
                    data = read_body(response, BODY_CAP, "the body")
        except httpx.HTTPError as exc:
            after = _AFTER_HEADERS if record.status_code is not None else ""
            record.error = self._transport_error(exc, deadline, after)
        except BodyError as exc:
            record.error = str(exc)
        record.e2e_s = time.monotonic() - started
        if record.error is None:
            try:
                document = parse_json(data, "the body")
                completion = wire.fit(document, wire.ChatCompletion, "the body")
            except (JsonError, wire.WireError) as exc:
                record.error = str(exc)
            else:
                answer = _completed(completion)
                answer.body = document
                record.finish_reason = completion.choices[0].finish_reason
                _usage(record, completion.usage)
        return self._finish(record, answer), answer

    def stream_chat(
        self, body: dict[str, Any], rung: str, kind: str, deadline: float
    ) -> tuple[RequestRecord, Answer]:
        """A streamed chat completion: time to the first content-bearing event, gaps after it."""
        record = RequestRecord(
            rung=rung, kind=kind, started_at=time.monotonic() - self.started, stream=True
        )
        assembly = _Assembly()
        payload = {**body, "stream": True, "stream_options": {"include_usage": True}}
        started = time.monotonic()
        last_token: float | None = None
        done = False
        try:
            with self._open("POST", _CHAT, deadline, payload) as response:
                record.status_code = response.status_code
                if response.status_code != 200:
                    failed = Answer(error_body=self._quote(response))
                    record.error = f"HTTP {response.status_code}: {failed.error_body}"
                    return self._finish(record, failed), failed
                chunks = decoded_chunks(response, STREAM_CAP, "the stream")
                for line in lines(chunks, LINE_CAP, "the stream"):
                    if not line.startswith("data:"):
                        continue  # blank separators, comments (:), event:/id: fields
                    data = line[5:].strip()
                    if data == "[DONE]":
                        done = True
                        break
                    now = time.monotonic()
                    try:
                        chunk = wire.parse(data, wire.ChatCompletionChunk, "SSE event")
                        if chunk.error:
                            record.error = f"error event in the stream: {_short(chunk.error)}"
                            break
                        carried = assembly.absorb(chunk, record)
                    except wire.WireError as exc:
                        record.error = f"malformed {exc}"
                        break
                    if chunk.choices and record.first_chunk_s is None:
                        record.first_chunk_s = now - started
                    _usage(record, chunk.usage)
                    if carried:
                        if last_token is None:
                            record.ttft_s = now - started
                        elif len(record.inter_token_s) < MAX_GAPS:
                            record.inter_token_s.append(now - last_token)
                        record.content_events += 1
                        last_token = now
        except httpx.HTTPError as exc:
            after = _AFTER_FIRST_TOKEN if last_token is not None else ""
            record.error = self._transport_error(exc, deadline, after)
        except BodyError as exc:
            record.error = str(exc)
        record.e2e_s = time.monotonic() - started
        if record.error is None and not done:
            record.error = (
                f"the stream was cut in the middle ({record.content_events} content events, "
                "no [DONE])"
                if last_token is not None and record.finish_reason is None
                else "the stream ended without [DONE]"
            )
        answer = assembly.answer()
        return self._finish(record, answer), answer

    def _finish(self, record: RequestRecord, answer: Answer) -> RequestRecord:
        record.content_chars = len(answer.content)
        record.tool_calls = len(answer.tool_calls)
        record.ok = record.error is None
        if record.error is not None:
            record.error = self.credentials.mask(record.error)
        answer.error_body = self.credentials.mask(answer.error_body)
        return record

    def _quote(self, response: httpx.Response) -> str:
        """The server's error message (OpenAI-style JSON or plain text), one line, masked."""
        head = read_head(response, _ERROR_QUOTE)
        try:
            document = parse_json(head, "the error body")
        except JsonError:
            text = head.decode("utf-8", errors="replace")
        else:
            error = document.get("error", document) if isinstance(document, dict) else document
            if isinstance(error, dict):
                error = error.get("message") or error.get("detail") or error
            text = str(error)
        return self.credentials.mask(" ".join(text.split())[:300])

    def _transport_error(self, exc: httpx.HTTPError, deadline: float, after: str = "") -> str:
        """One line for a transport failure; `after` says how far the answer had come."""
        if isinstance(exc, httpx.TimeoutException):
            if time.monotonic() >= deadline - 0.1:
                return "no answer before the rung's deadline" + (f" ({after})" if after else "")
            return f"timed out ({exc.__class__.__name__})"
        if isinstance(exc, httpx.ConnectError):
            return f"cannot connect: {self.credentials.mask(str(exc))}"
        if isinstance(exc, httpx.RemoteProtocolError | httpx.ReadError):
            if after == _AFTER_FIRST_TOKEN:
                return "the stream was cut in the middle"
            return f"connection broken: {self.credentials.mask(str(exc))}"
        return f"{exc.__class__.__name__}: {self.credentials.mask(str(exc))}"


def _completed(completion: wire.ChatCompletion) -> Answer:
    """The answer of a non-streamed completion's first choice."""
    message = completion.choices[0].message or wire.Message()
    calls = [
        StreamedToolCall(
            call.id,
            call.function.name if call.function else None,
            (call.function.arguments if call.function else None) or "",
        )
        for call in message.tool_calls or ()
    ]
    return Answer(message.content or "", message.thinking, calls)


def _usage(record: RequestRecord, usage: wire.Usage | None) -> None:
    """Token counts from a usage object; a count it leaves out keeps what an earlier one said."""
    if usage is None:
        return
    details = usage.prompt_tokens_details
    counts = {
        "prompt_tokens": usage.prompt_tokens,
        "completion_tokens": usage.completion_tokens,
        "cached_tokens": details.cached_tokens if details else None,
    }
    for name, value in counts.items():
        if value is not None:
            setattr(record, name, value)


def _short(value: Any) -> str:
    text = value.get("message", value) if isinstance(value, dict) else value
    return " ".join(str(text).split())[:200]
