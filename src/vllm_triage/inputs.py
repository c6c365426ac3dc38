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
import threading
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, BinaryIO

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
    name its inputs without reading them twice (standard input cannot be read twice).

    With `ahead`, a large regular file is hashed from its start on another core while the reader
    is busy elsewhere (see hash_ahead), until the reader catches up with it or calls
    `stop_hashing_ahead`; the digest is the same."""

    def __init__(self, stream: BinaryIO, *, ahead: bool = False, name: str = "the input") -> None:
        super().__init__()
        self._stream = stream
        self._digest = hashlib.sha256()
        self._name = name
        self.size = 0
        # the digest holds bytes [0, _hashed): past `size` once a helper hashed ahead of the reads
        self._hashed = 0
        # the reads (on a read-ahead thread) and stop_hashing_ahead (on the caller's) take over
        # the helper's digest one at a time
        self._lock = threading.Lock()
        self._ahead = _HashAhead.adopt(stream) if ahead else None

    def readable(self) -> bool:
        return True

    def read(self, size: int | None = -1) -> bytes:
        return self._seen(self._stream.read(-1 if size is None else size))

    def readline(self, size: int | None = -1) -> bytes:
        return self._seen(self._stream.readline(-1 if size is None else size))

    def close(self) -> None:
        """Stop a helper still hashing ahead (the stream read through stays open)."""
        self.stop_hashing_ahead()
        super().close()

    def stop_hashing_ahead(self) -> None:
        """Hash on the reading thread from here on (call it when the other cores get busy)."""
        with self._lock:
            self._take_over()

    def _take_over(self) -> None:
        """The helper's digest goes on here (the lock held)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            self._digest, self._hashed = ahead.stop()

    @property
    def sha256(self) -> str:
        """The sha256 of what was read; InputError if a helper hashed bytes the reads never got
        (the file shrank: truncated, or rotated in place, while it was read)."""
        self.stop_hashing_ahead()
        if self._hashed != self.size:
            raise InputError(
                f"{self._name}: the file shrank while it was read (truncated or rotated in "
                "place); diagnose a copy of it"
            )
        return self._digest.hexdigest()

    def _seen(self, data: bytes) -> bytes:
        end = self.size + len(data)
        with self._lock:
            if self._ahead is not None and end > self._ahead.frontier:
                self._take_over()  # the reads caught up with the helper
            if self._ahead is None and end > self._hashed:
                skip = self._hashed - self.size
                self._digest.update(memoryview(data)[skip:] if skip > 0 else data)
                self._hashed = end
        self.size = end
        return data


# Files smaller than this are hashed by their reader alone: a helper would not get ahead.
HASH_AHEAD_MIN_BYTES = 8 << 20


def hash_ahead(paths: Iterable[str | Path]) -> None:
    """Start hashing the first of these files that is a regular file of HASH_AHEAD_MIN_BYTES or
    more, on another core, so that the work is done while the tool is still starting; the
    Fingerprint(ahead=True) that reads it later goes on from there. Best effort: a path that
    cannot be opened (or is not a regular file) is left to the reader's own one-line error."""
    for path in paths:
        if str(path) == STDIN:
            continue
        try:
            fd = os.open(path, _OPEN_FLAGS)
        except (OSError, ValueError):  # ValueError: a NUL in the path
            continue
        if _HashAhead.start(fd):
            return


def _worth_hashing_ahead(info: os.stat_result) -> bool:
    """A regular file large enough for a helper to get ahead of its reader."""
    return stat.S_ISREG(info.st_mode) and info.st_size >= HASH_AHEAD_MIN_BYTES


class _HashAhead:
    """The sha256 of a regular file from its start, computed on a daemon thread (pread on its own
    descriptor in large pieces: hashlib and the reads release the GIL) until stopped."""

    _PIECE_BYTES = 8 << 20

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._digest = hashlib.sha256()
        self.frontier = 0  # bytes [0, frontier) are hashed
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="input-hash-ahead", daemon=True)
        self._thread.start()

    @classmethod
    def start(cls, fd: int) -> bool:
        """Hash the file behind `fd` (taken over: closed when done) if it is large and regular;
        False (and fd closed) otherwise."""
        try:
            info = os.fstat(fd)
        except OSError:
            info = None
        if info is None or not _worth_hashing_ahead(info):
            os.close(fd)
            return False
        with _WAITING_LOCK:
            if (info.st_dev, info.st_ino) not in _WAITING:
                _WAITING[info.st_dev, info.st_ino] = cls(fd)
                return True
        os.close(fd)
        return True

    @classmethod
    def adopt(cls, stream: BinaryIO) -> _HashAhead | None:
        """The helper for the file `stream` reads: one hash_ahead started, or a new one."""
        try:
            fd = stream.fileno()
            info = os.fstat(fd)
        except (OSError, ValueError, io.UnsupportedOperation):
            return None
        with _WAITING_LOCK:
            waiting = _WAITING.pop((info.st_dev, info.st_ino), None)
        if waiting is not None:
            return waiting
        if not _worth_hashing_ahead(info):
            return None
        try:
            return cls(os.dup(fd))
        except OSError:  # no descriptor to spare: the reader hashes alone
            return None

    def _run(self) -> None:
        try:
            while not self._stopping.is_set():
                piece = os.pread(self._fd, self._PIECE_BYTES, self.frontier)
                if not piece:
                    break
                self._digest.update(piece)
                self.frontier += len(piece)
        except OSError:
            pass  # the reader meets the same error itself, or hashes on from the frontier
        finally:
            os.close(self._fd)

    def stop(self) -> tuple[Any, int]:
        """(digest of bytes [0, frontier), frontier) once the thread has stopped."""
        self._stopping.set()
        self._thread.join()
        return self._digest, self.frontier


_WAITING_LOCK = threading.Lock()
# started by hash_ahead, not yet adopted by a Fingerprint: (st_dev, st_ino) -> helper
_WAITING: dict[tuple[int, int], _HashAhead] = {}


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
    except ValueError:  # a NUL byte: no file system takes it
        raise InputError(f"{shown}: not a valid path (it holds a NUL byte)") from None
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
