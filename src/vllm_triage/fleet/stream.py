"""`kubectl get ... -o json` files and the Kubernetes API's list answers read object by object
(ijson's yajl2 C backend), never held whole: a 1,000,000-node NodeList is scanned in the memory
of one node, counted against its cap (and a file hashed) as it is read.

A document that is not a list (one Node object, or one node's labels) has no items to stream: its
first MAX_WHOLE_DOCUMENT_BYTES are kept while no item has been found, and such a document is
parsed whole; a larger one without items is refused.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import ijson  # type: ignore[import-untyped]
import numpy as np

from vllm_triage.fleet.errors import FleetInputError
from vllm_triage.models import InputFile
from vllm_triage.safejson import open_regular

MAX_WHOLE_DOCUMENT_BYTES = 16 * 1024**2  # one Node object is 5 to 15 KB
# A Node object nests about 8 levels. The parser keeps a prefix string per level (its memory
# grows with the square of the depth: 6 GB at 50,000), so the depth is checked before it parses.
MAX_JSON_DEPTH = 256
CHUNK_BYTES = 256 * 1024
_NOTHING = object()
# Runs of plain characters taken whole (an alternation per character was 4x slower: the guard
# was most of a streamed scan's time).
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_STRING_END = re.compile(rb'[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
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


class Readable(Protocol):
    """What a list is read from: a file, or an HTTP answer's body (urllib3's response)."""

    def read(self, size: int, /) -> bytes: ...


@dataclass
class ListFile:
    """What streaming a list (a file, or the pages of an API list) found, complete once its
    items are exhausted: how many and how many bytes (every page), the file as an input, and of
    the last document read, the whole of it when it had no items and was small, and a List's
    `metadata` (an API page's continue token)."""

    what: str
    count: int = 0
    size: int = 0
    made_from: InputFile | None = None
    whole: Any = field(default=_NOTHING)
    metadata: Any = None

    @property
    def has_whole(self) -> bool:
        return self.whole is not _NOTHING


class _Reader:
    """The document as the parser reads it: counted against the cap (with the pages before it),
    hashed when asked, its first bytes kept until an item is found, and its top-level `metadata`
    picked out when asked (an API server may write it before or after the items)."""

    def __init__(
        self, stream: Readable, found: ListFile, cap: int, *, hashed: bool, metadata: bool
    ) -> None:
        self.stream, self.found, self.cap = stream, found, cap
        found.whole, found.metadata = _NOTHING, None  # this document's, not one read before
        self.sha256 = hashlib.sha256() if hashed else None
        self.head: bytearray | None = bytearray()
        self.nesting = _Depth()
        self.metadata = ijson.sendable_list()
        # A second parser of the same bytes, dropped once it has the metadata: the API server
        # writes it first, so it costs one chunk's parse.
        self.metadata_parser: Any = (
            ijson.items_coro(self.metadata, "metadata") if metadata else None
        )
        self.pending = self._chunk(CHUNK_BYTES)

    def _chunk(self, size: int) -> bytes:
        data = self.stream.read(size)
        self.found.size += len(data)
        if self.found.size > self.cap:
            what = self.found.what
            raise FleetInputError(f"{what}: larger than {self.cap // 1024**2} MiB; not read")
        if self.sha256 is not None:
            self.sha256.update(data)
        if self.nesting.feed(data) > MAX_JSON_DEPTH:
            what = self.found.what
            raise FleetInputError(f"{what}: JSON nested deeper than {MAX_JSON_DEPTH} levels")
        if self.metadata_parser is not None and data:
            self._find_metadata(data)
        if self.head is not None:
            if len(self.head) + len(data) <= MAX_WHOLE_DOCUMENT_BYTES:
                self.head += data
            else:
                self.head = None
        return data

    def _find_metadata(self, data: bytes) -> None:
        try:
            self.metadata_parser.send(data)
        except (ijson.JSONError, UnicodeDecodeError):  # the items' parser says what is wrong
            self.metadata_parser = None
            return
        if self.metadata:
            self.found.metadata, self.metadata_parser = self.metadata[0], None

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


def _items(reader: _Reader) -> Iterator[Any]:
    """The items of the document the reader reads (a List's `items`, or a bare array), one at a
    time, the rest of it read too (for the hash, and metadata written after the items); the
    whole document kept in `found` when it had no items and was small."""
    found = reader.found
    what, first_item = found.what, found.count + 1
    first = reader.first_byte()
    try:
        if first in (b"[", b"{"):
            prefix = "item" if first == b"[" else "items.item"
            for item in ijson.items(reader, prefix, use_float=True, buf_size=CHUNK_BYTES):
                found.count += 1
                if found.count == first_item:
                    reader.head = None  # a list after all: nothing to keep
                yield item
        else:
            while reader.read(CHUNK_BYTES):  # not JSON: read for the hash and the cap
                pass
    except ijson.JSONError as exc:
        raise FleetInputError(f"{what}: not JSON ({_first_line(exc)})") from None
    except UnicodeDecodeError:
        raise FleetInputError(f"{what}: not JSON (not UTF-8)") from None
    while reader.read(CHUNK_BYTES):  # what the parser left unread
        pass
    if found.count < first_item and reader.head is not None:
        found.whole = parse_large_json(bytes(reader.head), what)


def stream_items(path: Path, found: ListFile, cap: int) -> Iterator[Any]:
    """The items of a `kubectl get ... -o json` file (a List's `items`, or a bare array), one at
    a time as plain Python objects; `found` says the rest when they are exhausted."""
    with open_regular(path, found.what) as stream:
        reader = _Reader(stream, found, cap, hashed=True, metadata=False)
        yield from _items(reader)
    assert reader.sha256 is not None
    found.made_from = InputFile(name=found.what, sha256=reader.sha256.hexdigest(), size=found.size)
    if found.count == 0 and not found.has_whole:
        raise FleetInputError(
            f"{found.what}: no items, and larger than {MAX_WHOLE_DOCUMENT_BYTES // 1024**2} MiB "
            "for one object; expected `kubectl get ... -o json` output"
        )


def stream_page(body: Readable, found: ListFile, cap: int) -> Iterator[Any]:
    """The items of one page of an API server's List answer, streamed as a file's are: `found`
    counts on from the pages before (`cap` is on their bytes together) and, once they are
    exhausted, holds the page's metadata, or the whole page when it had no items."""
    yield from _items(_Reader(body, found, cap, hashed=False, metadata=True))


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
