"""Host names as file names: the one place where a name from an inventory or a cluster becomes a
folder of the case (`..`, `a/b`, NUL or 10,000 characters included), distinct for every host."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
MAX_READABLE = 80
FALLBACK = "host"


def _digest(host: str) -> str:
    return hashlib.sha256(host.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def host_folder(host: str) -> str:
    """A folder name for one host: the name itself when it is already safe (letters, digits,
    `.`, `_`, `-`, no leading dot, at most 80 characters); else its readable part with a hash of
    the whole name, so that `a/b` and `a_b` stay apart."""
    readable = _UNSAFE.sub("_", host).strip("._")[:MAX_READABLE].rstrip("._")
    if readable == host and host:
        return host
    return f"{readable or FALLBACK}-{_digest(host)}"


def host_folders(hosts: Iterable[str]) -> dict[str, str]:
    """Each host's folder, no two alike, even on a file system that ignores case (`Node1` and
    `node1`), and even when a host is named like another's hashed form."""
    taken: set[str] = set()
    folders: dict[str, str] = {}
    for host in sorted(set(hosts)):
        folder = host_folder(host)
        candidate, number = folder, 1
        while candidate.lower() in taken:
            number += 1
            candidate = f"{folder}-{number}"
        taken.add(candidate.lower())
        folders[host] = candidate
    return folders
