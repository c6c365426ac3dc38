"""Opening what a user names on the command line: a file, or "-" for standard input, with the
one-line errors every command gives for a missing, unreadable or wrong kind of path.

Only regular files are read: a FIFO, socket or device could block forever or never end, so it is
refused before any read (opened non-blocking, then checked with fstat). Standard input is the one
stream allowed, and a closed one or a directory there is a one-line error too.
"""

from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from vllm_triage.errors import InputError

STDIN = "-"
_OPEN_FLAGS = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def display_name(path: str | Path) -> str:
    """A path as text that prints anywhere: bytes that are not UTF-8 and control characters
    become backslash escapes (`bad\\xff.log`), so JSON output and one-line errors never break."""
    text = os.fsencode(path).decode("utf-8", errors="backslashreplace")
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def file_kind(mode: int) -> str:
    """What a file that is not a regular file is, in words (for refusals)."""
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


@contextmanager
def open_input(path: str | Path, what: str) -> Iterator[tuple[BinaryIO, str]]:
    """(binary stream, display name) of a regular file or "-"; `what` names the expected kind of
    file."""
    reading_stdin = str(path) == STDIN
    stream = _stdin(what) if reading_stdin else _open_regular(path, what)
    try:
        yield stream, "<stdin>" if reading_stdin else display_name(path)
    finally:
        if not reading_stdin:  # standard input stays open for whoever reads it next
            stream.close()


@contextmanager
def read_errors(name: str) -> Iterator[None]:
    """Around a block that only reads an input: an OSError (EIO, EISDIR on a redirected stdin)
    becomes a one-line InputError naming the input."""
    try:
        yield
    except OSError as exc:
        raise InputError(f"{name}: cannot read ({exc.strerror or exc})") from None


def read_text_input(value: str | Path, option: str, what: str, cap: int) -> str:
    """The text of a FILE|- option (a launch command), at most `cap` bytes: more is refused."""
    try:
        with open_input(value, what) as (stream, name), read_errors(name):
            data = stream.read(cap + 1)
    except InputError as exc:
        raise InputError(f"{option} {exc}") from None
    if len(data) > cap:
        shown = f"{cap >> 20} MiB" if cap >= 1 << 20 else f"{cap} bytes"
        raise InputError(f"{option} {name}: larger than {shown}; {what} is a few KiB")
    return data.decode("utf-8", errors="replace")


class Fingerprint(io.BufferedIOBase, BinaryIO):
    """A binary stream that hashes what is read through it (sha256 and size), so an artifact can
    name its inputs without reading them twice (standard input cannot be read twice)."""

    def __init__(self, stream: BinaryIO) -> None:
        super().__init__()
        self._stream = stream
        self._digest = hashlib.sha256()
        self.size = 0

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._seen(self._stream.read(-1 if size is None else size))

    def readline(self, size: int | None = -1) -> bytes:
        return self._seen(self._stream.readline(-1 if size is None else size))

    @property
    def sha256(self) -> str:
        return self._digest.hexdigest()

    def _seen(self, data: bytes) -> bytes:
        self._digest.update(data)
        self.size += len(data)
        return data


def _open_regular(path: str | Path, what: str) -> BinaryIO:
    shown = display_name(path)
    try:
        fd = os.open(path, _OPEN_FLAGS)  # non-blocking: opening a FIFO must not wait for a writer
    except FileNotFoundError:
        raise InputError(f"{shown}: no such file") from None
    except PermissionError:
        raise InputError(f"{shown}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{shown}: cannot open ({exc.strerror or exc})") from None
    mode = os.fstat(fd).st_mode
    if stat.S_ISREG(mode):
        return os.fdopen(fd, "rb")
    os.close(fd)
    if stat.S_ISDIR(mode):
        raise InputError(f"{shown}: is a directory, not {what}")
    raise InputError(
        f"{shown}: {file_kind(mode)}, not a regular file; only regular files are read "
        "(pipe a stream to standard input and give - instead)"
    )


def _stdin(what: str) -> BinaryIO:
    """Standard input's binary stream; closed or a directory is refused with one line."""
    closed = f"standard input is closed; give {what} as a path, or pipe it to -"
    if sys.stdin is None:
        raise InputError(closed)
    stream = sys.stdin.buffer
    try:
        mode = os.fstat(stream.fileno()).st_mode
    except io.UnsupportedOperation:  # replaced by an in-memory stream (tests, embedding)
        return stream
    except (OSError, ValueError):
        raise InputError(closed) from None
    if stat.S_ISDIR(mode):
        raise InputError(f"standard input is a directory, not {what}")
    return stream
