"""Stream a log and hand over only the lines worth reading, with their line numbers.

Logs can be gigabytes. The file is read in fixed-size blocks and one combined RE2 pattern (a DFA,
as fast as grep) finds candidate lines inside each block; only those lines are decoded and
normalised. Memory stays bounded whatever the file size or line length.
"""

from __future__ import annotations

import contextlib
import re
from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import BinaryIO

import re2

from vllm_triage.errors import InputError
from vllm_triage.safejson import JsonError, parse_json

BLOCK_SIZE = 8 << 20
MAX_LINE_BYTES = 64 << 10
EVIDENCE_CHARS = 400
TAIL_LINES = 8
_BINARY_PROBE = 8192

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")
_PREFIXES = (
    # Docker/Kubernetes --timestamps, RFC 3339
    re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+"),
    # docker compose service prefix
    re.compile(r"^[\w.-]+(?:-\d+)?\s+\|\s"),
    # kubectl logs --prefix
    re.compile(r"^\[pod/[^\]]+\]\s"),
)
_PROCESS = re.compile(r"^\((?P<process>[A-Za-z_][\w-]*(?: pid=\d+)?)\)\s*")
_LEVEL = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
    r"(?:\s+\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s*(?:\[[^\]]*\]\s*)?|:\s+)"
)


class LogError(InputError):
    """A log that cannot be read as text; one-line message."""


@dataclass(frozen=True)
class LogLine:
    """One candidate line: its number, the message to match, and the text to show as evidence."""

    number: int
    message: str
    display: str
    process: str | None
    level: str | None


def normalize(raw: bytes, number: int) -> LogLine:
    """Decode and strip what varies between log sources: colours, timestamps, process prefixes."""
    text = raw[:MAX_LINE_BYTES].decode("utf-8", errors="replace").rstrip("\r\n")
    text = _ANSI.sub("", text).replace("\r", "")
    if text.startswith('{"log":'):
        # Docker's json-file driver: the message (with its own colour codes) is inside "log".
        with contextlib.suppress(JsonError):
            document = parse_json(text, "a json-file log line")
            if isinstance(document, dict):
                decoded = str(document.get("log", text)).rstrip("\n")
                text = _ANSI.sub("", decoded).replace("\r", "")
    stripped = True
    while stripped:
        stripped = False
        for prefix in _PREFIXES:
            if match := prefix.match(text):
                text = text[match.end() :]
                stripped = True
    display = text.strip()
    process = None
    if match := _PROCESS.match(text):
        process = match.group("process")
        text = text[match.end() :]
    level = None
    if match := _LEVEL.match(text):
        level = "WARNING" if match.group("level") == "WARN" else match.group("level")
        text = text[match.end() :]
    if len(display) > EVIDENCE_CHARS:
        display = display[: EVIDENCE_CHARS - 1] + "…"
    return LogLine(number, text.strip(), display, process, level)


class Prefilter:
    """One combined RE2 pattern over named groups of patterns; groups can be switched off."""

    def __init__(self, groups: dict[str, list[str]]):
        self._groups = groups
        self._active = set(groups)
        self._regex: object | None = None
        self._options = re2.Options()
        self._options.max_mem = 256 << 20
        self._options.never_capture = True
        self._options.never_nl = True

    @property
    def regex(self) -> object | None:
        """The compiled alternation of the active groups (None when nothing is left to look for)."""
        if self._regex is None and self._active:
            # Docker's json-file logs escape quotes (\"); the raw bytes must still match.
            patterns = [
                p.replace('"', r'\\?"') for key in sorted(self._active) for p in self._groups[key]
            ]
            # (?m): ^ and $ mean a line's start and end, as in grep, not the block's.
            alternation = "|".join(f"(?:{p})" for p in patterns)
            self._regex = re2.compile(f"(?m){alternation}", self._options)
        return self._regex

    def deactivate(self, key: str) -> None:
        if key in self._active:
            self._active.discard(key)
            self._regex = None

    def activate(self, keys: Iterable[str]) -> None:
        added = set(keys) - self._active
        if added:
            self._active |= added
            self._regex = None


class LogScanner:
    """Reads a stream block by block; yields candidate lines; counts lines; keeps the last few."""

    def __init__(self, stream: BinaryIO, prefilter: Prefilter):
        self._stream = stream
        self._prefilter = prefilter
        self.lines_read = 0
        self.tail: deque[tuple[int, bytes]] = deque(maxlen=TAIL_LINES)

    def _blocks(self) -> Iterator[bytes]:
        """Blocks of whole lines; a line longer than MAX_LINE_BYTES is cut there."""
        carry = b""
        skipping = False
        first = True
        while data := self._stream.read(BLOCK_SIZE):
            if first:
                first = False
                if b"\x00" in data[:_BINARY_PROBE]:
                    raise LogError("not a text log (binary data, or UTF-16)")
            if skipping:
                newline = data.find(b"\n")
                if newline < 0:
                    continue
                data = data[newline + 1 :]
                skipping = False
            buffer = carry + data if carry else data
            last_newline = buffer.rfind(b"\n")
            if last_newline < 0:
                if len(buffer) > MAX_LINE_BYTES:
                    yield buffer[:MAX_LINE_BYTES] + b"\n"
                    carry, skipping = b"", True
                else:
                    carry = buffer
                continue
            carry = buffer[last_newline + 1 :]
            if len(carry) > MAX_LINE_BYTES:
                yield buffer[: last_newline + 1] + carry[:MAX_LINE_BYTES] + b"\n"
                carry, skipping = b"", True
                continue
            yield buffer[: last_newline + 1]
        if carry:
            yield carry[:MAX_LINE_BYTES] + b"\n"

    def candidates(self) -> Iterator[tuple[int, bytes]]:
        """(line number, raw line) for every line the prefilter's current pattern matches."""
        for block in self._blocks():
            base = self.lines_read
            counted_at, counted = 0, 0
            position = 0
            regex = self._prefilter.regex
            while regex is not None:
                match = regex.search(block, position)  # type: ignore[attr-defined]
                if match is None:
                    break
                start = block.rfind(b"\n", 0, match.start()) + 1
                end = block.find(b"\n", match.start())
                counted += block.count(b"\n", counted_at, start)
                counted_at = start
                yield base + counted + 1, block[start:end]
                position = end + 1
                regex = self._prefilter.regex
            self.lines_read = base + block.count(b"\n")
            self._remember_tail(block)

    def _remember_tail(self, block: bytes) -> None:
        pieces: list[bytes] = []
        end = len(block) - 1
        while end >= 0 and len(pieces) < TAIL_LINES:
            start = block.rfind(b"\n", 0, end) + 1
            pieces.append(block[start:end])
            end = start - 1
        for offset, piece in enumerate(reversed(pieces)):
            self.tail.append((self.lines_read - len(pieces) + 1 + offset, piece))
