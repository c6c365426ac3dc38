"""Reading what a server sends, within caps: the decoded size of a body (a small gzip that inflates
to gigabytes stops at the cap, never inflated whole) and the length of each streamed line.

Decoding is done here, from the raw bytes, with zlib's `max_length`, so no single chunk can
inflate past a bounded size; encodings other than gzip and deflate (which the client asks for)
are refused.
"""

from __future__ import annotations

import re
import zlib
from collections.abc import Iterable, Iterator

import httpx

ACCEPT_ENCODING = "gzip, deflate"
# Decoded bytes produced per zlib call: the most any single step holds beyond the cap.
_STEP = 64 * 1024
_LINE_END = re.compile(rb"\r\n|\r|\n")


class BodyError(Exception):
    """A body that cannot be read within the caps (too large, a line too long, bad encoding)."""


class _Inflater:
    """gzip or deflate (zlib-wrapped, or raw as some servers send it), in bounded steps."""

    def __init__(self, encoding: str, what: str) -> None:
        self._encoding = encoding
        self._what = what
        self._raw_deflate = False
        self._wrapper_checked = encoding != "deflate"
        self._zlib = self._new()

    def _new(self) -> zlib._Decompress:
        if self._encoding == "gzip":
            return zlib.decompressobj(zlib.MAX_WBITS | 16)
        return zlib.decompressobj(-zlib.MAX_WBITS if self._raw_deflate else zlib.MAX_WBITS)

    def feed(self, data: bytes) -> Iterator[bytes]:
        if not self._wrapper_checked and data:
            self._wrapper_checked = True
            try:
                zlib.decompressobj().decompress(data[:2])
            except zlib.error:
                self._raw_deflate = True
                self._zlib = self._new()
        try:
            while data:
                piece = self._zlib.decompress(data, _STEP)
                data = self._zlib.unconsumed_tail
                if piece:
                    yield piece
                if self._zlib.eof:
                    return
        except zlib.error:
            raise BodyError(f"{self._what}: not valid {self._encoding} data") from None

    def finish(self) -> bytes:
        """What zlib still holds after the last input (a few bytes: all input was consumed)."""
        try:
            return self._zlib.flush()
        except zlib.error:
            raise BodyError(f"{self._what}: not valid {self._encoding} data") from None


def decoded_chunks(response: httpx.Response, cap: int, what: str) -> Iterator[bytes]:
    """The body's bytes as they arrive, decoded; BodyError once more than `cap` bytes came."""
    encodings = [
        e.strip().lower()
        for e in response.headers.get("content-encoding", "").split(",")
        if e.strip().lower() not in ("", "identity")
    ]
    if len(encodings) > 1 or (encodings and encodings[0] not in ("gzip", "x-gzip", "deflate")):
        raise BodyError(f"{what}: unsupported Content-Encoding {', '.join(encodings)!r}")
    inflater = (
        _Inflater("deflate" if encodings == ["deflate"] else "gzip", what) if encodings else None
    )
    total = 0
    for raw in response.iter_raw():
        for piece in inflater.feed(raw) if inflater else (raw,):
            total += len(piece)
            if total > cap:
                raise BodyError(f"{what}: larger than {cap} bytes; not read further")
            yield piece
    if inflater and (tail := inflater.finish()):
        if total + len(tail) > cap:
            raise BodyError(f"{what}: larger than {cap} bytes; not read further")
        yield tail


def read_body(response: httpx.Response, cap: int, what: str) -> bytes:
    """The whole decoded body, at most `cap` bytes (BodyError past it)."""
    return b"".join(decoded_chunks(response, cap, what))


def read_head(response: httpx.Response, limit: int) -> bytes:
    """The first `limit` decoded bytes of a body (an error page), the rest left unread."""
    head = bytearray()
    try:
        for piece in decoded_chunks(response, limit, "the error body"):
            head += piece
    except BodyError:
        pass  # a longer page, or an undecodable one: what came is enough to quote
    return bytes(head[:limit])


def lines(chunks: Iterable[bytes], max_line: int, what: str) -> Iterator[str]:
    """Lines split at CRLF, LF or CR, each at most `max_line` bytes (BodyError past it)."""
    buffer = bytearray()
    for chunk in chunks:
        # Only the new bytes are searched, and the byte before them: a held CR may end in a CRLF.
        position = max(len(buffer) - 1, 0)
        buffer += chunk
        start = 0
        for match in _LINE_END.finditer(buffer, position):
            if match.group() == b"\r" and match.end() == len(buffer):
                break  # perhaps the first half of a CRLF: the next chunk says
            yield _line(buffer[start : match.start()], max_line, what)
            start = match.end()
        del buffer[:start]
        if len(buffer) > max_line:
            raise BodyError(f"{what}: a line longer than {max_line} bytes")
    if buffer.rstrip(b"\r"):
        yield _line(buffer.rstrip(b"\r"), max_line, what)


def _line(data: bytearray, max_line: int, what: str) -> str:
    if len(data) > max_line:
        raise BodyError(f"{what}: a line longer than {max_line} bytes")
    return data.decode("utf-8", errors="replace")
