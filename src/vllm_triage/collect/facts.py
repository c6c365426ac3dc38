"""Size bounds on facts.json: the facts are a summary, and a bundle reader refuses a facts file of
more than a few MiB, so a container with megabytes of labels or environment must not make the
bundle unreadable. Applied after redaction (a cut never exposes part of a secret)."""

from __future__ import annotations

from typing import Any

MAX_STRING = 4096
MAX_ITEMS = 512


def bounded(value: Any) -> Any:
    """The document with long strings cut (saying so) and long lists and mappings shortened."""
    if isinstance(value, str) and len(value) > MAX_STRING:
        return value[:MAX_STRING] + f" [cut: {len(value) - MAX_STRING} more characters]"
    if isinstance(value, dict):
        items = list(value.items())
        return {key: bounded(item) for key, item in items[:MAX_ITEMS]}
    if isinstance(value, list):
        return [bounded(item) for item in value[:MAX_ITEMS]]
    return value
