"""SIGTERM and SIGHUP taken as Ctrl-C: `kill` or a closed terminal stops a long command the way
an interrupt does, so that its cleanup (temporary files, child processes) runs; and the cleanup itself shielded, so that a second signal cannot cut it short."""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator
from types import FrameType

STOP_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """STOP_SIGNALS raise KeyboardInterrupt (named after the signal) while the block runs; only
    the main thread can take signals, elsewhere nothing changes."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: FrameType | None) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    previous = {sig: signal.signal(sig, stop) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def shielded() -> Iterator[None]:
    """Interrupting signals wait while the block runs, then interrupt (main thread only)."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received: list[int] = []

    def remember(signum: int, frame: FrameType | None) -> None:
        received.append(signum)

    previous = {sig: signal.signal(sig, remember) for sig in (signal.SIGINT, *STOP_SIGNALS)}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
    if received:
        raise KeyboardInterrupt(signal.Signals(received[0]).name)
