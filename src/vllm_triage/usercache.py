"""Files kept between runs in the user's cache folder, so that a command does not redo work that
does not change from run to run: the validated knowledge base, Hyperscan databases, compiled
report templates.

The folder is $XDG_CACHE_HOME/vllm-triage (when absolute), else ~/.cache/vllm-triage. What is kept
there is later unpickled, loaded as a database or run as template code, so a file is read back
only when the folder and the file are the user's own and nobody else may write them (owner is
this user, no group or world write bits, no symbolic link on the last step, all checked on the
opened descriptors): whoever could plant a file there could already change the user's own files.
A file is also read back only under the key it was written with (what it was made from) and when
its SHA-256 matches (a torn or damaged file is made again). Several processes may build the same
file at once (a cold cache): each writes its own temporary and renames it into place, so a reader
finds a whole file or none. Any failure means "not cached": a cache is never an error, and a
folder that cannot be written only means redoing the work.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import secrets
import stat
from pathlib import Path

CACHE_FOLDER_NAME = "vllm-triage"
_MAGIC = b"vllm-triage cache 2\n"
_FOLDER_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_NOFOLLOW", 0)
_FOLDER_FLAGS |= getattr(os, "O_CLOEXEC", 0)
_READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)
_WRITE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
_WRITE_FLAGS |= getattr(os, "O_CLOEXEC", 0)


def cache_folder() -> Path | None:
    """Where the cache lives: $XDG_CACHE_HOME/vllm-triage (when absolute), else ~/.cache."""
    base = os.environ.get("XDG_CACHE_HOME", "")
    if not os.path.isabs(base):
        try:
            base = str(Path.home() / ".cache")
        except (RuntimeError, KeyError):  # no home directory to be found
            return None
    return Path(base) / CACHE_FOLDER_NAME


def read_cached(name: str, key: str, max_bytes: int) -> bytes | None:
    """The payload kept as `name` under `key`, or None: absent, written under another key,
    damaged, larger than `max_bytes`, or not private to this user."""
    folder = _open_folder(create=False)
    if folder is None:
        return None
    try:
        fd = os.open(name, _READ_FLAGS, dir_fd=folder)
    except OSError:
        return None
    finally:
        os.close(folder)
    header = _MAGIC + key.encode() + b"\n"
    limit = len(header) + 65 + max_bytes
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not (stat.S_ISREG(info.st_mode) and _private(info) and info.st_size <= limit):
            return None
        data = handle.read(limit + 1)
    if not data.startswith(header):
        return None
    digest, _, payload = data[len(header) :].partition(b"\n")
    if digest != hashlib.sha256(payload).hexdigest().encode():
        return None
    return payload


def write_cached(name: str, key: str, payload: bytes, keep_newest: int | None = None) -> None:
    """Keep `payload` as `name` under `key` (atomically, private to this user); best effort.
    With `keep_newest`, only that many files sharing name's prefix (up to its first "-") stay."""
    folder = _open_folder(create=True)
    if folder is None:
        return
    # A name no other writer has, even one in another pid namespace sharing the folder, or one
    # killed half-way that left its temporary behind under this process's pid.
    temporary = f".{name}.{secrets.token_hex(8)}.tmp"
    try:
        digest = hashlib.sha256(payload).hexdigest().encode()
        fd = os.open(temporary, _WRITE_FLAGS, 0o600, dir_fd=folder)
        with os.fdopen(fd, "wb") as handle:
            handle.write(_MAGIC + key.encode() + b"\n" + digest + b"\n" + payload)
        os.replace(temporary, name, src_dir_fd=folder, dst_dir_fd=folder)
        if keep_newest is not None:
            _prune(folder, name.partition("-")[0] + "-", keep_newest)
    except Exception:  # a cache that cannot be written is no cache, not an error
        with contextlib.suppress(OSError):
            os.unlink(temporary, dir_fd=folder)
    finally:
        os.close(folder)


def _private(info: os.stat_result) -> bool:
    """Owned by this user, and nobody else may write it."""
    return info.st_uid == os.geteuid() and not info.st_mode & (stat.S_IWGRP | stat.S_IWOTH)


def _open_folder(create: bool) -> int | None:
    """A descriptor of the cache folder when it is private to this user, else None."""
    folder = cache_folder()
    if folder is None or os.open not in os.supports_dir_fd:
        return None
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


def _prune(folder: int, prefix: str, keep: int) -> None:
    kept = []
    for name in os.listdir(folder):
        if name.startswith(prefix):
            with contextlib.suppress(OSError):
                kept.append((os.stat(name, dir_fd=folder, follow_symlinks=False).st_mtime, name))
    for _, name in sorted(kept, reverse=True)[keep:]:
        with contextlib.suppress(OSError):
            os.unlink(name, dir_fd=folder)
