"""Deadline tests without wall-clock thresholds.

A test of a deadline (or of a bound on work) gives the code an adversary that does not end on its
own, or only far later: a command that hangs, a server that drips forever, a log that floods
without end, a pattern that would backtrack for hours. It asserts what the deadline produces
("timed out", "no answer within 1 s"), and that the call ended at all. The only time measured is
a failure detector, `ends_in_time`: many times the deadline and never under a minute, so a slow or
loaded machine does not trip it, yet finite, so that a deadline which does not fire fails the
test. (pytest-timeout, in pyproject, is the last resort for a call that never returns.)
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

WATCHDOG_FACTOR = 10
WATCHDOG_FLOOR_S = 60.0
# An adversary that must outlast the detector by far: a test that waited for it is caught.
ENDLESS_S = 3600.0


def watchdog_s(deadline_s: float = 0.0) -> float:
    """How long a call with this deadline may run before the test calls it hung."""
    return max(WATCHDOG_FLOOR_S, WATCHDOG_FACTOR * deadline_s)


@contextmanager
def ends_in_time(deadline_s: float = 0.0, what: str = "the call") -> Iterator[None]:
    """Fails when the block runs past `watchdog_s(deadline_s)`: it waited for the adversary."""
    started = time.monotonic()
    yield
    elapsed = time.monotonic() - started
    limit = watchdog_s(deadline_s)
    assert elapsed < limit, (
        f"{what} took {elapsed:.1f} s (deadline {deadline_s:g} s, detector {limit:g} s): "
        "it waited for what it should have cut off"
    )


def wait_for(condition: object, what: str, within_s: float = WATCHDOG_FLOOR_S) -> None:
    """Polls `condition()` until it is true; fails with `what` if it is not within `within_s`
    (a failure detector: the event is what the test waits on)."""
    assert callable(condition)
    deadline = time.monotonic() + within_s
    while not condition():
        assert time.monotonic() < deadline, f"{what}: not within {within_s:g} s"
        time.sleep(0.02)
