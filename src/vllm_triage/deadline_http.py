"""A total deadline for a request (validate's rungs, baseline's short request, record check's
registry calls), enforced on each socket operation.

httpx's timeouts bound each read, so a server that trickles one byte a second keeps a request
alive for ever. Here the network backend under httpx clamps every connect, read and write to the
time left before the request's deadline (a context variable set by `deadline_scope`), and fails
at once when none is left: headers, body and stream alike end by the deadline.
"""

from __future__ import annotations

import contextlib
import ssl
import time
from collections.abc import Iterable, Iterator
from contextvars import ContextVar
from typing import Any

import httpcore
import httpx

_DEADLINE: ContextVar[float | None] = ContextVar("validate_deadline", default=None)


@contextlib.contextmanager
def deadline_scope(deadline: float) -> Iterator[None]:
    """Every socket operation inside the block ends by `deadline` (time.monotonic())."""
    token = _DEADLINE.set(deadline)
    try:
        yield
    finally:
        _DEADLINE.reset(token)


def _time_left(timeout: float | None, error: type[httpcore.TimeoutException]) -> float | None:
    """The timeout clamped to what is left before the deadline; `error` when nothing is left."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        raise error("the request's deadline passed")
    return left if timeout is None else min(timeout, left)


class _DeadlineStream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _time_left(timeout, httpcore.ReadTimeout))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _time_left(timeout, httpcore.WriteTimeout))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.start_tls(ssl_context, server_hostname, left))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _DeadlineBackend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(
            self._inner.connect_tcp(host, port, left, local_address, socket_options)
        )

    def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.NetworkStream:
        left = _time_left(timeout, httpcore.ConnectTimeout)
        return _DeadlineStream(self._inner.connect_unix_socket(path, left, socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class DeadlineTransport(httpx.HTTPTransport):
    """httpx's own transport (pool, proxies from the environment, TLS) over the deadline backend."""

    def __init__(self, limits: httpx.Limits | None = None) -> None:
        # No limits given: httpx's own defaults.
        default = httpx.Limits(max_connections=100, max_keepalive_connections=20)
        super().__init__(limits=limits or default)
        # httpx builds its httpcore pool without a backend argument; every httpcore pool (direct,
        # HTTP or SOCKS proxy) keeps the backend it hands to new connections in this attribute.
        self._pool._network_backend = _DeadlineBackend(self._pool._network_backend)
