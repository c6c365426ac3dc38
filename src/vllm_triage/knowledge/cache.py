"""The validated knowledge base, cached between runs so that a command starts without parsing and
validating every knowledge file again (`compat` runs on every pod start).

The cache is a pickle kept through vllm_triage.usercache (the user's cache folder, read back only
when private to the user), one file per knowledge folder, and it is used only when its key
matches: a SHA-256 over the data files (names and bytes), the code that defines what was pickled
(the schema, the loader, the version types, the vocabulary) and the tool, Python and msgspec
versions. Any change rebuilds it by validating the files again; a cache that cannot be read, does
not match or does not unpickle is rebuilt; a folder that cannot be written means validating on
every run, nothing worse. Unpickling rebuilds the Structs without their checks (schema._restore).
"""

from __future__ import annotations

import hashlib
import pickle
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

import msgspec

from vllm_triage import __version__
from vllm_triage.usercache import read_cached, write_cached

T = TypeVar("T")

_MAX_BYTES = 64 * 1024**2
# One cache per knowledge folder (the installed data, a test's copy, --knowledge-dir); the newest stay.
_KEPT = 8
# The modules whose classes are in the pickle: a change to any of them changes the key.
_CODE = ("knowledge/schema.py", "knowledge/loader.py", "versions.py", "vocabulary.py")
_PACKAGE = Path(__file__).resolve().parent.parent


def cache_key(root: Path) -> str:
    """SHA-256 over what the cached knowledge base was made from (OSError if a file is unreadable)."""
    digest = hashlib.sha256()
    for part in (__version__, sys.version, msgspec.__version__, str(root.resolve())):
        digest.update(part.encode() + b"\0")
    files = [(f"code/{name}", _PACKAGE / name) for name in _CODE]
    # The message catalogue (messages/) is no part of what is cached: a command does not read
    # its megabytes to make the key.
    files += sorted(
        (p.relative_to(root).as_posix(), p)
        for p in root.rglob("*")
        if p.is_file() and p.relative_to(root).parts[0] != "messages"
    )
    for name, path in files:
        data = path.read_bytes()
        digest.update(f"{name}\0{len(data)}\0".encode() + data)
    return digest.hexdigest()


def _file_name(root: Path) -> str:
    where = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    return f"knowledge-{where}.pickle"


def load_cached(root: Path, build: Callable[[Path], T], kind: type[T]) -> T:
    """The knowledge base of root (a `kind`) from the cache when its key matches, else built
    (validated) by `build` and cached for the next run."""
    try:
        key = cache_key(root)
    except OSError:
        return build(root)
    name = _file_name(root)
    if (payload := read_cached(name, key, _MAX_BYTES)) is not None:
        try:
            cached = pickle.loads(payload)
        except Exception:  # written by another version of a class: rebuild it
            cached = None
        if isinstance(cached, kind):
            return cached
    built = build(root)
    write_cached(name, key, pickle.dumps(built, pickle.HIGHEST_PROTOCOL), keep_newest=_KEPT)
    return built
