"""Find and kill every process a collect command started, wherever it went.

A process group is not enough: a child may call setsid() (a new session and group), or outlive
its parent holding stdout open, reparented to init. So each command runs with a marker in its
environment, VLLM_TRIAGE_COLLECT_RUN=<run id>:<command number>, which every descendant inherits
through fork, exec and setsid and which /proc/<pid>/environ shows to the same user. A descendant
that cleared its environment is still found through the process tree (parent links) from the
command's own process while its chain is intact, and through the descendants recorded while the
command ran (pid and start time, so a reused pid is never killed). A per-run cgroup would be
tighter, but it needs a delegated cgroup subtree that a user or a debug pod rarely has; the
marker works without privileges, in containers, and on any Linux /proc.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

MARKER_ENV = "VLLM_TRIAGE_COLLECT_RUN"
_PROC = Path("/proc")
_ROUNDS = 4  # kill, look again: a process may fork between a scan and the kill


@dataclass(frozen=True)
class ProcessInfo:
    pid: int
    ppid: int
    start: int  # clock ticks after boot: with the pid, names one process for good


def _stat(pid: int) -> ProcessInfo | None:
    try:
        raw = (_PROC / str(pid) / "stat").read_bytes()
    except OSError:
        return None
    # The command name may hold blanks and parentheses: the fields follow its last ')'.
    fields = raw[raw.rfind(b")") + 2 :].split()
    if len(fields) < 20 or fields[0] in (b"Z", b"X"):  # zombies are dead already
        return None
    return ProcessInfo(pid, int(fields[1]), int(fields[19]))


def _pids() -> list[int]:
    try:
        return [int(name) for name in os.listdir(_PROC) if name.isdigit()]
    except OSError:
        return []


def _carries(pid: int, marker: bytes) -> bool:
    """Whether the process's environment holds the marker (only our own processes are readable)."""
    try:
        environ = (_PROC / str(pid) / "environ").read_bytes()
    except OSError:
        return False
    return any(entry.startswith(marker) for entry in environ.split(b"\0"))


def _table() -> dict[int, ProcessInfo]:
    table = {}
    for pid in _pids():
        info = _stat(pid)
        if info is not None:
            table[pid] = info
    return table


def descendants(roots: Iterable[int], table: dict[int, ProcessInfo]) -> set[int]:
    """The roots' descendants in the table, by parent links."""
    children: dict[int, list[int]] = {}
    for info in table.values():
        children.setdefault(info.ppid, []).append(info.pid)
    found: set[int] = set()
    stack = list(roots)
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found.add(child)
                stack.append(child)
    return found


@dataclass
class Tracked:
    """One command's process, its marker, and the descendants seen while it ran (pid -> start
    time). Its owner reaps it through reaping(), so that kill() never signals a reused pid."""

    pid: int
    marker: str
    seen: dict[int, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _reaped: bool = False

    def __post_init__(self) -> None:
        info = _stat(self.pid)
        if info is not None:
            self.seen[self.pid] = info.start

    @contextlib.contextmanager
    def reaping(self) -> Iterator[None]:
        """Hold off kill() while the owner reaps the process; after it, kill() does nothing."""
        with self._lock:
            yield
            self._reaped = True

    def record(self) -> None:
        """Note the current descendants (kept for when their parent is gone)."""
        table = _table()
        alive = [pid for pid, start in self.seen.items() if _same(table, pid, start)]
        for pid in descendants(alive, table):
            self.seen.setdefault(pid, table[pid].start)

    def kill(self) -> None:
        """SIGKILL the command's process group and every process of the command, until none is
        left (bounded rounds)."""
        with self._lock:
            if not self._reaped:
                kill_marked(f"{MARKER_ENV}={self.marker}", self)


def kill_marked(marker: str, tracked: Tracked | None = None) -> int:
    """Kill every process whose environment starts an entry with `marker` (and the tracked
    command's group, tree and recorded descendants); how many were signalled."""
    encoded = marker.encode()
    own = os.getpid()
    killed = 0
    for _ in range(_ROUNDS):
        if tracked is not None:
            with contextlib.suppress(OSError):
                os.killpg(tracked.pid, signal.SIGKILL)
        table = _table()
        victims = {pid for pid in table if _carries(pid, encoded)}
        if tracked is not None:
            roots = {p for p, s in tracked.seen.items() if _same(table, p, s)}
            victims |= descendants(roots, table) | roots
        victims.discard(own)
        if not victims:
            break
        for pid in victims:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
                killed += 1
    return killed


def _same(table: dict[int, ProcessInfo], pid: int, start: int) -> bool:
    info = table.get(pid)
    return info is not None and info.start == start
