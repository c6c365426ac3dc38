"""A file a probe hands to the bundle writer, before redaction."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass
class CapturedFile:
    """A file for the bundle: text, a parsed JSON document, or a raw output file to stream."""

    path: str
    text: str | None = None
    document: Any = None
    source: Path | None = None
    note: str | None = None
    """What the capture left out (a command output over its cap), for the manifest."""
