"""Read ahead on another core: a thread drains an iterator into a small queue.

The log scanner reads on its own thread: it reads the stream (which hashes what it reads:
hashlib releases the GIL on large buffers), cuts it into runs of whole lines and counts them
(numpy releases the GIL too), while the consumer searches them (as Hyperscan does). A queue holds at
most `depth` items, so memory stays bounded whatever the file size; an error in a producer is
raised in the consumer, and a consumer that stops early (or never starts) stops the producer at
its next item once `close` is called.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

_POLL_SECONDS = 0.1


class _End:
    """The producer has nothing more (error is what stopped it, if anything)."""

    def __init__(self, error: BaseException | None = None):
        self.error = error


class ReadAhead(Generic[T]):
    """The items of `items`, produced by a daemon thread at most `depth` ahead of the consumer
    (plus the one it holds). The thread starts at once, not at the first item asked for."""

    def __init__(self, items: Iterator[T], depth: int = 1):
        self._items = items
        self._pending: queue.Queue[T | _End] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._finished = False
        self._thread = threading.Thread(target=self._produce, name="log-read-ahead", daemon=True)
        self._thread.start()

    def _put(self, item: T | _End) -> bool:
        while not self._stop.is_set():
            try:
                self._pending.put(item, timeout=_POLL_SECONDS)
                return True
            except queue.Full:
                continue
        return False

    def _produce(self) -> None:
        try:
            for item in self._items:
                if not self._put(item):
                    return
        except BaseException as exc:  # handed to the consumer, which raises it
            self._put(_End(exc))
            return
        finally:
            close = getattr(self._items, "close", None)
            if close is not None:
                close()  # an upstream ReadAhead stops too
        self._put(_End())

    @property
    def backlog(self) -> int:
        """How many items are ready for the consumer."""
        return self._pending.qsize()

    def __iter__(self) -> ReadAhead[T]:
        return self

    def __next__(self) -> T:
        if self._finished:
            raise StopIteration
        try:
            item = self._pending.get()
        except BaseException:
            self.close()
            raise
        if isinstance(item, _End):
            self._finished = True
            self._thread.join()
            if item.error is not None:
                raise item.error
            raise StopIteration
        return item

    def close(self) -> None:
        """Stop the producer (at its next item) and let go of what it queued."""
        self._finished = True
        self._stop.set()


def read_ahead(items: Iterator[T], depth: int = 1) -> ReadAhead[T]:
    """`items` produced ahead by a thread (see ReadAhead); call close() when stopping early."""
    return ReadAhead(items, depth)
