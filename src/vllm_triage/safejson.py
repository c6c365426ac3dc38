"""JSON from anyone (files, servers, archives): a size cap before parsing, a depth cap after it,
integers too long to convert and lone surrogates handled, and one-line errors, never a traceback.

Every place the tool parses JSON it did not write itself goes through `parse_json` or
`read_json_file`, so the limits hold in one place.
"""

from __future__ import annotations

import json
import os
import re
import stat
from pathlib import Path
from typing import IO, Any

from vllm_triage.errors import InputError

# Deeper than any document the tool reads (Kubernetes objects reach ~15); shallow enough that the
# recursive code after parsing (redaction, pydantic, rendering) stays far from the recursion limit.
MAX_DEPTH = 64
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")


class JsonError(InputError):
    """JSON that cannot be used: too big, too deep, malformed; the message is one line."""


def parse_json(
    data: bytes | str,
    what: str,
    *,
    max_bytes: int | None = None,
    max_depth: int = MAX_DEPTH,
) -> Any:
    """The parsed document, or JsonError naming `what` (e.g. "manifest.json", "an SSE event")."""
    if max_bytes is not None and len(data) > max_bytes:
        raise JsonError(f"{what}: larger than {max_bytes} bytes; not parsed")
    try:
        document = json.loads(data)
    except RecursionError:
        raise JsonError(f"{what}: JSON nested too deep") from None
    except UnicodeDecodeError:
        raise JsonError(f"{what}: not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise JsonError(
            f"{what}: not JSON ({exc.msg} at line {exc.lineno} column {exc.colno})"
        ) from None
    except ValueError:  # an integer of thousands of digits (int's str-digits limit)
        raise JsonError(f"{what}: a number in the JSON is too long to use") from None
    return _checked(document, what, max_depth)


def read_json_file(path: Path, what: str, *, max_bytes: int, max_depth: int = MAX_DEPTH) -> Any:
    """A regular file's JSON, read at most `max_bytes` + 1 bytes (a FIFO or device is refused)."""
    return parse_json(
        read_capped(path, what, max_bytes), what, max_bytes=max_bytes, max_depth=max_depth
    )


def read_capped(path: Path, what: str, max_bytes: int) -> bytes:
    """Up to max_bytes + 1 bytes of a regular file, never following a FIFO or a device."""
    with open_regular(path, what) as stream:
        return stream.read(max_bytes + 1)


def open_regular(path: Path, what: str) -> IO[bytes]:
    """A regular file opened for reading without blocking (a FIFO or a device is refused: opening
    or reading one could wait forever); InputError, one line naming `what`, otherwise."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise InputError(f"{what}: no such file") from None
    except PermissionError:
        raise InputError(f"{what}: permission denied") from None
    except OSError as exc:
        raise InputError(f"{what}: cannot open ({exc.strerror})") from None
    stream = os.fdopen(fd, "rb")
    mode = os.fstat(stream.fileno()).st_mode
    if not stat.S_ISREG(mode):
        stream.close()
        if stat.S_ISDIR(mode):
            raise InputError(f"{what}: is a directory")
        raise InputError(f"{what}: not a regular file (a FIFO, socket or device is not read)")
    return stream


def _checked(document: Any, what: str, max_depth: int) -> Any:
    """Refuse nesting past max_depth and replace lone surrogates, in one iterative walk."""
    fixed = _fix_string(document) if isinstance(document, str) else document
    stack: list[tuple[Any, int]] = [(fixed, 1)]
    while stack:
        value, depth = stack.pop()
        if isinstance(value, dict):
            if depth > max_depth:
                raise JsonError(f"{what}: JSON nested deeper than {max_depth} levels")
            for key in [k for k in value if not k.isascii() and _LONE_SURROGATE.search(k)]:
                value[_fix_string(key)] = value.pop(key)
            for key, item in value.items():
                if isinstance(item, str):
                    if not item.isascii():
                        value[key] = _fix_string(item)
                elif isinstance(item, dict | list):
                    stack.append((item, depth + 1))
        elif isinstance(value, list):
            if depth > max_depth:
                raise JsonError(f"{what}: JSON nested deeper than {max_depth} levels")
            for index, item in enumerate(value):
                if isinstance(item, str):
                    if not item.isascii():
                        value[index] = _fix_string(item)
                elif isinstance(item, dict | list):
                    stack.append((item, depth + 1))
    return fixed


def _fix_string(text: str) -> str:
    """A lone surrogate (valid JSON escape, invalid Unicode) becomes U+FFFD, so UTF-8 output works."""
    return _LONE_SURROGATE.sub("\ufffd", text) if not text.isascii() else text
