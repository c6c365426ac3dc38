"""How collect keeps a log larger than its cap: the first and the last halves, cut at line breaks,
joined by one line that says how much was left out. The first error of a failed start is near the
beginning of a log, the exit near its end; the middle of a long-running server's log is the part
a bundle can lose. Used on command outputs as they stream in (runner) and on log files (writer).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import BinaryIO

# How far a cut looks for a line break, on each side.
LINE_SEARCH = 64 * 1024
# A file over its cap by no more than a cut line is kept whole (it was cut once already).
_SLACK = 1024
_BLOCK = 1024 * 1024


def cut_line(omitted: int, total: int, head: int, tail: int) -> bytes:
    """The line that stands for what was left out."""
    return (
        f"[vllm-triage: {omitted} bytes left out here; the log was {total} bytes, "
        f"the first {head} and the last {tail} are kept]\n"
    ).encode()


def head_end(window: bytes, end: int) -> int:
    """Where the head stops: after the last line break in `window` (which ends at offset `end`),
    else after its last blank, so that no token is cut in two (half a secret has no context)."""
    for separator in (b"\n", b" ", b"\t"):
        found = window.rfind(separator)
        if found >= 0:
            return end - len(window) + found + 1
    return end


def tail_start(window: bytes, start: int) -> int:
    """Where the tail starts: after the first line break in `window` (which starts at `start`),
    else after its first blank."""
    for separator in (b"\n", b" ", b"\t"):
        found = window.find(separator, 0, LINE_SEARCH)
        if found >= 0:
            return start + found + 1
    return start


class FileExcerpt:
    """The blocks of a regular file as the bundle keeps it: whole when it is at most `cap` bytes,
    else head, the cut line and tail. `omitted` is known before the first block is read."""

    def __init__(self, handle: BinaryIO, size: int, cap: int) -> None:
        self._handle, self.size = handle, size
        self.head = self.tail = size
        self.omitted = 0
        if size > cap + _SLACK:
            half = cap // 2
            handle.seek(max(0, half - LINE_SEARCH))
            self.head = head_end(handle.read(min(half, LINE_SEARCH)), half)
            tail_from = size - (cap - half)
            handle.seek(tail_from)
            self.tail = tail_start(handle.read(LINE_SEARCH), tail_from)
            self.omitted = self.tail - self.head
        handle.seek(0)

    def blocks(self) -> Iterator[bytes]:
        yield from self._range(0, self.head)
        if self.omitted:
            yield cut_line(self.omitted, self.size, self.head, self.size - self.tail)
            yield from self._range(self.tail, self.size)

    def _range(self, start: int, end: int) -> Iterator[bytes]:
        self._handle.seek(start)
        while start < end:
            block = self._handle.read(min(_BLOCK, end - start))
            if not block:  # the file shrank while we read it
                return
            start += len(block)
            yield block
