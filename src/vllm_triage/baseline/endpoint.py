"""The short request a baseline records against a model already serving on the node: one chat
completion, timed, its answer kept (capped). It proves the change left the node able to serve
what it served before, and how fast.

httpx with one total deadline for the whole exchange, enforced on every socket operation (a
server that trickles a byte a second cannot stretch it), and a cap on the body read (compressed
answers are refused rather than inflated). The API key goes into the request only; the URL is
recorded without its user part, and any form of a credential the server echoes back is masked.
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterable
from typing import Any
from urllib.parse import quote

import httpx

from vllm_triage.baseline.models import EndpointCheck
from vllm_triage.deadline_http import DeadlineTransport, deadline_scope
from vllm_triage.safejson import JsonError, parse_json

PROMPT = "Name three primary colours, separated by commas."
MAX_TOKENS = 32
DEFAULT_DEADLINE_S = 60.0
# A chat completion of 32 tokens is a few KiB; /v1/models of a node a few KiB more.
BODY_CAP = 1024 * 1024
ANSWER_CHARS = 500
ERROR_CHARS = 300
_CONNECT_S = 5.0
_MASK = "[redacted]"
_MIN_SECRET = 4


class _Failed(Exception):
    """The request gave no usable answer; the message is one line."""

    def __init__(self, message: str, status_code: int | None = None) -> None:
        super().__init__(message)
        self.status_code = status_code


def public_url(url: str) -> str:
    """The URL without `user:password@`, for anything written or printed."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL:
        return url.rsplit("@", 1)[-1]
    return str(parsed.copy_with(username=None, password=None)) if parsed.userinfo else url


def _forms(secrets: Iterable[str]) -> list[str]:
    forms = set()
    for secret in secrets:
        forms |= {
            secret,
            quote(secret, safe=""),
            json.dumps(secret)[1:-1],
            base64.b64encode(secret.encode()).decode(),
        }
    return sorted((f for f in forms if len(f) >= _MIN_SECRET), key=len, reverse=True)


def short_request(
    url: str, model: str | None, api_key: str | None, deadline_s: float = DEFAULT_DEADLINE_S
) -> EndpointCheck:
    """One short chat completion against `url` (the model's first id from /v1/models when no
    `model` is given), all within `deadline_s`; never raises for what the server does."""
    parsed = httpx.URL(url)
    basic = (parsed.username, parsed.password) if parsed.userinfo else None
    secrets = [s for s in (api_key, basic[1] if basic else None) if s]
    if basic and basic[1]:
        secrets.append(":".join(basic))
    masks = _forms(secrets)

    def mask(text: str) -> str:
        for form in masks:
            text = text.replace(form, _MASK)
        return text

    shown = public_url(url)
    base = str(parsed.copy_with(username=None, password=None)).rstrip("/")
    headers = {"Accept-Encoding": "identity"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    deadline = time.monotonic() + deadline_s
    started: float | None = None
    try:
        with (
            deadline_scope(deadline),
            httpx.Client(
                base_url=base,
                headers=headers,
                auth=httpx.BasicAuth(*basic) if basic else None,
                timeout=httpx.Timeout(deadline_s, connect=min(_CONNECT_S, deadline_s)),
                transport=DeadlineTransport(),
                follow_redirects=False,
            ) as client,
        ):
            if model is None:
                model = _first_model(_get_json(client, "GET", "/v1/models", None))
            body = {
                "model": model,
                "messages": [{"role": "user", "content": PROMPT}],
                "max_tokens": MAX_TOKENS,
                "temperature": 0,
                "stream": False,
            }
            started = time.monotonic()
            document = _get_json(client, "POST", "/v1/chat/completions", body)
            seconds = time.monotonic() - started
            return _answered(shown, model, document, seconds, mask)
    except _Failed as exc:
        return EndpointCheck(
            url=shown,
            model=model,
            ok=False,
            status_code=exc.status_code,
            seconds=round(time.monotonic() - started, 3) if started is not None else None,
            error=mask(str(exc))[:ERROR_CHARS],
        )
    except httpx.HTTPError as exc:
        if isinstance(exc, httpx.TimeoutException) and time.monotonic() >= deadline - 0.1:
            reason = f"no answer within {deadline_s:g} s"
        else:
            reason = f"{type(exc).__name__}: {exc}"
        return EndpointCheck(
            url=shown,
            model=model,
            ok=False,
            seconds=round(time.monotonic() - started, 3) if started is not None else None,
            error=mask(" ".join(reason.split()))[:ERROR_CHARS],
        )


def _get_json(client: httpx.Client, method: str, path: str, body: dict[str, Any] | None) -> Any:
    """A 200 answer's JSON, read within BODY_CAP; _Failed for anything else."""
    with client.stream(method, path, json=body) as response:
        encoding = response.headers.get("content-encoding", "identity").strip().lower()
        if encoding not in ("", "identity"):
            raise _Failed(f"{path}: compressed answer ({encoding}) refused", response.status_code)
        data = bytearray()
        for chunk in response.iter_raw():
            data += chunk
            if len(data) > BODY_CAP:
                raise _Failed(f"{path}: answer larger than {BODY_CAP} bytes", response.status_code)
        if response.status_code != 200:
            quoted = " ".join(bytes(data[:ERROR_CHARS]).decode("utf-8", "replace").split())
            raise _Failed(
                f"{path} answered HTTP {response.status_code}" + (f": {quoted}" if quoted else ""),
                response.status_code,
            )
    try:
        return parse_json(bytes(data), path, max_bytes=BODY_CAP)
    except JsonError as exc:
        raise _Failed(str(exc), 200) from None


def _first_model(document: Any) -> str:
    entries = document.get("data") if isinstance(document, dict) else None
    for entry in entries if isinstance(entries, list) else []:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
            return str(entry["id"])
    raise _Failed("/v1/models lists no model; give --model", 200)


def _answered(url: str, model: str, document: Any, seconds: float, mask: Any) -> EndpointCheck:
    choices = document.get("choices") if isinstance(document, dict) else None
    choice = choices[0] if isinstance(choices, list) and choices else None
    message = choice.get("message") if isinstance(choice, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    usage = document.get("usage") if isinstance(document, dict) else None
    tokens = usage.get("completion_tokens") if isinstance(usage, dict) else None
    finish = choice.get("finish_reason") if isinstance(choice, dict) else None
    text = content if isinstance(content, str) else None
    error = None
    if choice is None:
        error = "the answer has no choices"
    elif not (text or "").strip():
        error = "the answer is empty"
    return EndpointCheck(
        url=url,
        model=model,
        ok=error is None,
        status_code=200,
        seconds=round(seconds, 3),
        answer=mask(text)[:ANSWER_CHARS] if text is not None else None,
        finish_reason=finish if isinstance(finish, str) else None,
        completion_tokens=tokens
        if isinstance(tokens, int) and not isinstance(tokens, bool)
        else None,
        error=error,
    )
