"""Run a command and measure its own peak memory.

Linux carries a process's peak RSS (ru_maxrss) across fork and exec, so a child forked straight
from a large pytest process reports pytest's peak. A tiny launcher (python -I -S, a few MB)
starts the command instead and reports the command's wait4 figures.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import threading
from pathlib import Path
from typing import IO, Any

import pytest

_LAUNCHER = """
import os, sys
report, stdin, argv = sys.argv[1], sys.argv[2], sys.argv[3:]
pid = os.fork()
if pid == 0:
    if stdin == "closed":
        os.close(0)
    elif stdin != "inherit":
        os.dup2(int(stdin), 0)
    os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as out:
    out.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def run_measured(
    argv: list[str],
    *,
    timeout: float,
    stdin: IO[Any] | int | None = None,
    stdout: IO[Any] | int | None = None,
    stderr: IO[Any] | int | None = None,
    cwd: Path | None = None,
    env: dict[str, str] | None = None,
    close_stdin: bool = False,
) -> tuple[int, float]:
    """(exit code, peak RSS in MB) of argv (argv[0] a path); a run past timeout fails the test."""
    # A raw descriptor (a directory, say) reaches the command only: the launcher, a Python too,
    # would refuse to start on it, so it gets the descriptor by number and moves it to 0.
    raw_fd = stdin if isinstance(stdin, int) and stdin >= 0 else None
    how = "closed" if close_stdin else "inherit" if raw_fd is None else str(raw_fd)
    with tempfile.TemporaryDirectory(prefix="peak-") as scratch:
        report = Path(scratch) / "wait4"
        launcher = subprocess.Popen(
            [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(report), how, *argv],
            stdin=subprocess.DEVNULL if raw_fd is not None else stdin,
            pass_fds=() if raw_fd is None else (raw_fd,),
            stdout=stdout,
            stderr=stderr,
            cwd=cwd,
            env=env,
            start_new_session=True,
        )
        # A hang fails the test, never stalls it: the launcher's whole group is killed.
        killer = threading.Timer(timeout, os.killpg, (launcher.pid, signal.SIGKILL))
        killer.start()
        try:
            launcher.wait()
        finally:
            killer.cancel()
        if not report.exists():
            pytest.fail(f"still running after {timeout} s (blocked on its input?): {argv}")
        code, max_rss_kib = (int(value) for value in report.read_text().split())
    return code, max_rss_kib / 1024  # ru_maxrss is in KiB on Linux
