"""What is compiled from a knowledge object, memoised by that object's identity: the redaction
rules and the secret scanner are compiled once per knowledge base, then shared."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

SourceT = TypeVar("SourceT")
CompiledT = TypeVar("CompiledT")


class CompiledOnce(Generic[SourceT, CompiledT]):
    """What is compiled from a knowledge object, kept while that same object (by identity) is
    asked for again: a few at most, the oldest dropped first. Thread-safe."""

    def __init__(self, build: Callable[[SourceT], CompiledT], size: int = 8) -> None:
        self._build = build
        self._size = size
        self._kept: dict[int, tuple[SourceT, CompiledT]] = {}
        self._lock = threading.Lock()

    def __call__(self, source: SourceT) -> CompiledT:
        with self._lock:
            kept = self._kept.get(id(source))
            if kept is not None and kept[0] is source:
                return kept[1]
            compiled = self._build(source)
            if len(self._kept) >= self._size:
                self._kept.pop(next(iter(self._kept)))
            self._kept[id(source)] = (source, compiled)
            return compiled
