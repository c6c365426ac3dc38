"""The names inside a bundle and the checks both its writer and its readers apply to them."""

from __future__ import annotations

import hashlib
from pathlib import PurePosixPath
from typing import BinaryIO

MANIFEST = "manifest.json"
FACTS = "facts.json"
LOGS = "logs"
_CHUNK = 1024 * 1024


def safe_relative(path: str) -> PurePosixPath:
    """A path inside the bundle; ValueError for an absolute one or one that climbs with `..`."""
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ValueError(f"bundle path {path!r} is not a plain relative path")
    return relative


def stream_sha256(stream: BinaryIO) -> str:
    """The sha256 of what is left in a binary stream, read in bounded chunks."""
    digest = hashlib.sha256()
    while chunk := stream.read(_CHUNK):
        digest.update(chunk)
    return digest.hexdigest()
