"""Opening what a user names on the command line: a file, or "-" for standard input, with the
one-line errors every command gives for a missing, unreadable or wrong kind of path."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import BinaryIO

from vllm_triage.errors import InputError

STDIN = "-"


@contextmanager
def open_input(path: str | Path, what: str) -> Iterator[tuple[BinaryIO, str]]:
    """(binary stream, display name) of a path or "-"; `what` names the expected kind of file."""
    if str(path) == STDIN:
        yield sys.stdin.buffer, "<stdin>"
        return
    try:
        stream = Path(path).open("rb")  # noqa: SIM115 - closed by the with below, after the checks
    except FileNotFoundError:
        raise InputError(f"{path}: no such file") from None
    except PermissionError:
        raise InputError(f"{path}: permission denied") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not {what}") from None
    with stream:
        yield stream, str(path)
