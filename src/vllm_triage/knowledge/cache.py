"""The validated knowledge base, cached between runs so that a command starts without parsing and
validating every knowledge file again (`compat` runs on every pod start).

The cache is a pickle in the user's cache folder ($XDG_CACHE_HOME/vllm-triage, else
~/.cache/vllm-triage), one file per knowledge folder, and it is used only when its key matches: a
SHA-256 over the data files (names and bytes), the code that defines what was pickled (the schema,
the loader, the version types) and the tool, Python and pydantic versions. Any change rebuilds it
by validating the files again; a cache that cannot be read, does not match or does not unpickle
is rebuilt; a folder that cannot be written means validating on every run, nothing worse.

Unpickling runs code named in the file, so a cache file is read only when the folder and the file
are the user's own and nobody else may write them (owner is this user, no group or world write
bits, no symbolic link on the last step, checked on the opened descriptors): whoever could plant
a file there could already change the user's own files.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import stat
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import pydantic

from vllm_triage import __version__

T = TypeVar("T")

CACHE_FOLDER_NAME = "vllm-triage"
_MAGIC = b"vllm-triage knowledge cache 1\n"
_MAX_BYTES = 64 * 1024**2
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_FOLDER_FLAGS |= getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
# The modules whose classes are in the pickle: a change to any of them changes the key.
_CODE = ("knowledge/schema.py", "knowledge/loader.py", "versions.py", "models.py")
_PACKAGE = Path(__file__).resolve().parent.parent


def cache_folder() -> Path | None:
    """Where the cache lives: $XDG_CACHE_HOME/vllm-triage (when absolute), else ~/.cache."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no home directory to be found
            return None
    return Path(base) / CACHE_FOLDER_NAME


def cache_key(root: Path) -> str:
    """SHA-256 over what the cached knowledge base was made from (OSError if a file is unreadable)."""
    digest = hashlib.sha256()
    for part in (__version__, sys.version, pydantic.VERSION, str(root.resolve())):
        digest.update(part.encode() + b"\0")
    files = [(f"code/{name}", _PACKAGE / name) for name in _CODE]
    files += sorted((p.relative_to(root).as_posix(), p) for p in root.rglob("*") if p.is_file())
    for name, path in files:
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def _file_name(root: Path) -> str:
    where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return f"knowledge-{where}.pickle"


def _private(info: os.stat_result) -> bool:
    """Owned by this user, and nobody else may write it."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_folder(folder: Path, create: bool) -> int | None:
    """A descriptor of the cache folder when it is private to this user, else None."""
    try:
        if create:
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        fd = os.open(folder, _FOLDER_FLAGS)
    except OSError:
        return None
    if stat.S_ISDIR((info := os.fstat(fd)).st_mode) and _private(info):
        return fd
    os.close(fd)
    return None


def _read(folder_fd: int, name: str, key: str, kind: type[T]) -> T | None:
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder_fd)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and _private(info) and info.st_size <= _MAX_BYTES):
            return None
        data = handle.read(_MAX_BYTES + 1)
    header = _MAGIC + key.encode() + b"\n"
    if not data.startswith(header):
        return None
    try:
        value = pickle.loads(data[len(header) :])
    except Exception:  # a truncated or foreign file: rebuild it
        return None
    return value if isinstance(value, kind) else None


def _write(folder_fd: int, name: str, key: str, value: object) -> None:
    """Write the cache atomically (a private temporary file, then a rename); best effort."""
    temporary = f".{name}.{os.getpid()}.tmp"
    try:
        payload = _MAGIC + key.encode() + b"\n" + pickle.dumps(value, pickle.HIGHEST_PROTOCOL)
        fd = os.open(temporary, _WRITE_FLAGS, 0o600, dir_fd=folder_fd)
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
        os.replace(temporary, name, src_dir_fd=folder_fd, dst_dir_fd=folder_fd)
    except Exception:  # a cache that cannot be written is no cache, not an error
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder_fd)


def load_cached(root: Path, build: Callable[[Path], T], kind: type[T]) -> T:
    """The knowledge base of root (a `kind`) from the cache when its key matches, else built
    (validated) by `build` and cached for the next run."""
    folder = cache_folder()
    if folder is None or os.open not in os.supports_dir_fd:
        return build(root)
    try:
        key = cache_key(root)
    except OSError:
        return build(root)
    name = _file_name(root)
    folder_fd = _open_folder(folder, create=False)
    try:
        if folder_fd is not None and (cached := _read(folder_fd, name, key, kind)) is not None:
            return cached
        built = build(root)
        if folder_fd is None:
            folder_fd = _open_folder(folder, create=True)
        if folder_fd is not None:
            _write(folder_fd, name, key, built)
        return built
    finally:
        if folder_fd is not None:
            os.close(folder_fd)
