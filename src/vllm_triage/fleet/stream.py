"""`kubectl get ... -o json` files read object by object (ijson's yajl2 C backend), never held
whole: a 1,000,000-node NodeList is scanned in the memory of one node, hashed and counted as it
is read.

A document that is not a list (one Node object, or one node's labels) has no items to stream: its
first MAX_WHOLE_DOCUMENT_BYTES are kept while no item has been found, and such a document is
parsed whole; a larger one without items is refused.
"""

from __future__ import annotations

import hashlib
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import ijson  # type: ignore[import-untyped]
import numpy as np

from vllm_triage.fleet.errors import FleetInputError
from vllm_triage.models import InputFile

MAX_WHOLE_DOCUMENT_BYTES = 16 * 1024**2  # one Node object is 5 to 15 KB
# A Node object nests about 8 levels. The parser keeps a prefix string per level (its memory
# grows with the square of the depth: 6 GB at 50,000), so the depth is checked before it parses.
MAX_JSON_DEPTH = 256
CHUNK_BYTES = 256 * 1024
_NOTHING = object()
_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_STRING_END = re.compile(rb'(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEP = np.zeros(256, dtype=np.int64)
_STEP[list(b"[{")] = 1
_STEP[list(b"]}")] = -1


def _escapes_next(text: bytes) -> bool:
    """Whether a string's text cut here ends inside an escape (an odd run of backslashes)."""
    return (len(text) - len(text.rstrip(b"\\"))) % 2 == 1


class _Depth:
    """The nesting depth of a JSON text fed in chunks, strings skipped (a bracket in a string
    is text), at C speed: strings removed by a regular expression, brackets summed by numpy."""

    def __init__(self) -> None:
        self.depth = 0
        self.in_string = False
        self.escaped = False

    def feed(self, data: bytes) -> int:
        """The deepest level reached in this chunk."""
        if not data:
            return self.depth
        start = 0
        if self.in_string:
            start = 1 if self.escaped else 0
            end = _STRING_END.match(data, start)
            if end is None:
                self.escaped = _escapes_next(data[start:])
                return self.depth
            start, self.in_string, self.escaped = end.end(), False, False
        rest = _STRING.sub(b"", data[start:])
        opened = rest.find(b'"')
        if opened >= 0:  # a string that goes on in the next chunk
            self.in_string, self.escaped = True, _escapes_next(rest[opened + 1 :])
            rest = rest[:opened]
        brackets = rest.translate(None, _NOT_BRACKETS)
        if not brackets:
            return self.depth
        running = np.cumsum(_STEP[np.frombuffer(brackets, dtype=np.uint8)]) + self.depth
        self.depth = int(running[-1])
        return max(int(running.max()), self.depth)


def open_regular(path: Path, what: str) -> IO[bytes]:
    """A regular file opened for reading (never a FIFO or a device, which could block)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise FleetInputError(f"{what}: no such file") from None
    except PermissionError:
        raise FleetInputError(f"{what}: permission denied") from None
    except OSError as exc:
        raise FleetInputError(f"{what}: cannot open ({exc.strerror})") from None
    stream = os.fdopen(fd, "rb")
    mode = os.fstat(stream.fileno()).st_mode
    if not stat.S_ISREG(mode):
        stream.close()
        kind = "is a directory" if stat.S_ISDIR(mode) else "not a regular file"
        raise FleetInputError(f"{what}: {kind} (a FIFO, socket or device is not read)")
    return stream


class _Reader:
    """The file as the parser reads it: counted against the cap, hashed, and its first bytes
    kept until an item is found."""

    def __init__(self, stream: IO[bytes], what: str, cap: int) -> None:
        self.stream, self.what, self.cap = stream, what, cap
        self.sha256 = hashlib.sha256()
        self.size = 0
        self.head: bytearray | None = bytearray()
        self.nesting = _Depth()
        self.pending = self._chunk(CHUNK_BYTES)

    def _chunk(self, size: int) -> bytes:
        data = self.stream.read(size)
        self.size += len(data)
        if self.size > self.cap:
            raise FleetInputError(f"{self.what}: larger than {self.cap // 1024**2} MiB; not read")
        self.sha256.update(data)
        if self.nesting.feed(data) > MAX_JSON_DEPTH:
            raise FleetInputError(f"{self.what}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if self.head is not None:
            if len(self.head) + len(data) <= MAX_WHOLE_DOCUMENT_BYTES:
                self.head += data
            else:
                self.head = None
        return data

    def first_byte(self) -> bytes:
        stripped = self.pending.lstrip()
        while not stripped and self.pending:
            self.pending = self._chunk(CHUNK_BYTES)
            stripped = self.pending.lstrip()
        return stripped[:1]

    def read(self, size: int = -1) -> bytes:
        if size == 0:  # ijson's probe: bytes or text
            return b""
        if self.pending:
            data, self.pending = self.pending, b""
            return data
        return self._chunk(size if size > 0 else CHUNK_BYTES)


@dataclass
class ListFile:
    """What streaming a list file found, complete once its items are exhausted: how many, the
    file as an input, and the whole document when it had no items and was small."""

    what: str
    count: int = 0
    made_from: InputFile | None = None
    whole: Any = field(default=_NOTHING)

    @property
    def has_whole(self) -> bool:
        return self.whole is not _NOTHING


def stream_items(path: Path, found: ListFile, cap: int) -> Iterator[Any]:
    """The items of a `kubectl get ... -o json` file (a List's `items`, or a bare array), one at
    a time as plain Python objects; `found` says the rest when they are exhausted."""
    what = found.what
    with open_regular(path, what) as stream:
        reader = _Reader(stream, what, cap)
        first = reader.first_byte()
        try:
            if first in (b"[", b"{"):
                prefix = "item" if first == b"[" else "items.item"
                for item in ijson.items(reader, prefix, use_float=True, buf_size=CHUNK_BYTES):
                    if found.count == 0:
                        reader.head = None  # a list after all: nothing to keep
                    found.count += 1
                    yield item
            else:
                while reader.read(CHUNK_BYTES):  # not JSON: read for the hash and the cap
                    pass
        except ijson.JSONError as exc:
            raise FleetInputError(f"{what}: not JSON ({_first_line(exc)})") from None
        except UnicodeDecodeError:
            raise FleetInputError(f"{what}: not JSON (not UTF-8)") from None
        while reader.read(CHUNK_BYTES):  # what the parser left unread, for the hash
            pass
    found.made_from = InputFile(name=what, sha256=reader.sha256.hexdigest(), size=reader.size)
    if found.count == 0:
        if reader.head is None:
            raise FleetInputError(
                f"{what}: no items, and larger than {MAX_WHOLE_DOCUMENT_BYTES // 1024**2} MiB for "
                "one object; expected `kubectl get ... -o json` output"
            )
        found.whole = parse_large_json(bytes(reader.head), what)


def parse_large_json(data: bytes, what: str) -> Any:
    """A JSON document held in memory (an API page, a small file) into plain Python objects,
    through orjson (3x the standard library's speed); errors are one line."""
    import orjson

    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise FleetInputError(f"{what}: not JSON ({_first_line(exc)})") from None


def _first_line(exc: Exception) -> str:
    lines = str(exc).splitlines()
    return lines[0][:200] if lines else type(exc).__name__
