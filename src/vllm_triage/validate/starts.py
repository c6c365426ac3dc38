"""Start stability (`validate --start-cmd FILE --starts N`): start the server N times from a
launch command, time each start's engine initialisation, stop it cleanly, and diagnose a start
that fails; the ladder then runs against the last start, which is stopped after it.

Only on a node the user names as isolated: it starts and stops a server there, nothing else. The
command runs without a shell (argv from the launch-command reader; leading NAME=VALUE words set
its environment), in a process group of its own that is stopped whole: SIGTERM, then SIGKILL
after a grace period. The server's output is read through a pipe as it comes: each line timed for
the start-up milestones (knowledge phases), redacted, and written to the run folder; the raw
output is never stored.
"""

from __future__ import annotations

import contextlib
import os
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.diagnose.logreader import normalize
from vllm_triage.diagnose.signatures import CompiledMilestone, encoded
from vllm_triage.errors import InputError, TriageError
from vllm_triage.inputs import display_name
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.launch import LaunchArgs, parse_launch_command, split_command
from vllm_triage.redact import Redactor
from vllm_triage.validate import reasons
from vllm_triage.validate.client import Client, ReplyError
from vllm_triage.validate.credentials import public_url
from vllm_triage.validate.models import StartOutcome, StartRecord, StartSummary

MAX_STARTS = 20
STARTS_FOLDER = "starts"
# The milestone whose first line says the engine has initialised (the API server starts).
READY_MILESTONE = "server_start"
# What a start's log keeps: the first HEAD bytes, then the last TAIL bytes (a marker between).
LOG_HEAD_BYTES = 32 * 1024**2
LOG_TAIL_BYTES = 8 * 1024**2
# One line of server output at most (a longer one is cut, and said so).
_LINE_CAP = 256 * 1024
_READ_CHUNK = 64 * 1024
_POLL_S = 0.25
_HEALTH_TIMEOUT_S = 2.0
# After the group is gone, how long the reader may take to drain the pipe.
_DRAIN_S = 5.0
# Words that only a shell understands: the command is run without one.
_SHELL_WORDS = {"|", "||", "&&", ";", "&", ";;", "(", ")", "{", "}", "!"}
_CONTAINER_TOOLS = ("docker", "podman", "nerdctl", "kubectl")

Notice = Callable[[str], None]


@dataclass(frozen=True)
class StartCommand:
    """A launch command ready to run: argv, the variables it sets, and its parsed fields."""

    argv: list[str]
    env: dict[str, str]
    launch: LaunchArgs


def parse_start_command(text: str, kb: KnowledgeBase) -> StartCommand:
    """The command of a --start-cmd file; InputError (one line) when it cannot be run as given."""
    try:
        words = split_command(text)
    except InputError as exc:
        raise InputError(f"--start-cmd: {exc}") from None
    env: dict[str, str] = {}
    index = 0
    while index < len(words):
        word = words[index]
        name, equals, value = word.partition("=")
        if word in ("export", "env"):
            index += 1
        elif equals and name.isidentifier():
            env[name] = value
            index += 1
        else:
            break
    argv = words[index:]
    if not argv:
        raise InputError("--start-cmd: the file holds no command")
    for word in argv:
        if word in _SHELL_WORDS or word.startswith((">", "<", "2>", "&>", "$(", "`")):
            raise InputError(
                f"--start-cmd: {word!r} needs a shell; the command runs without one (one command, "
                "NAME=VALUE words before it for its environment)"
            )
    try:
        launch = parse_launch_command(words, kb)
    except InputError as exc:
        raise InputError(f"--start-cmd: {exc}") from None
    path = {**os.environ, **env}.get("PATH", os.defpath)
    if shutil.which(argv[0], path=path) is None:
        raise InputError(f"--start-cmd: {display_name(argv[0])}: no such command (PATH {path})")
    return StartCommand(argv=argv, env=env, launch=launch)


def check_start_url(command: StartCommand, url: str) -> None:
    """Refuse a URL that cannot be the started server's: another port than the command's own,
    or one where a server already answers (its start would be measured, not this one's)."""
    given = httpx.URL(url)
    shown = display_name(public_url(url))  # never the URL's user:password
    url_port = given.port or (443 if given.scheme == "https" else 80)
    port = command.launch.other.get("--port")
    in_container = Path(command.argv[0]).name in _CONTAINER_TOOLS
    if port and port.isdigit() and not in_container and int(port) != url_port:
        raise InputError(
            f"--start-cmd serves on port {port}, the URL {shown} on "
            f"{url_port}: give the URL of the server the command starts"
        )
    host = given.host
    try:
        with socket.create_connection((host, url_port), timeout=2.0):
            pass
    except OSError:
        return
    raise InputError(
        f"something already listens at {shown}: --start-cmd measures its own "
        "start; stop that server first, or start this one on another port"
    )


@dataclass
class _Reader:
    """Reads the server's output from a pipe: times milestones, redacts, keeps head and tail."""

    pipe: int
    sink: IO[bytes]
    redactor: Redactor
    milestones: list[CompiledMilestone]
    started: float
    seen: dict[str, float] = field(default_factory=dict)
    written: int = 0
    dropped: int = 0
    tail: deque[bytes] = field(default_factory=deque)
    tail_bytes: int = 0
    stop: threading.Event = field(default_factory=threading.Event)
    thread: threading.Thread | None = None
    lines: int = 0

    def start(self) -> None:
        self.thread = threading.Thread(target=self._run, name="start-log", daemon=True)
        self.thread.start()

    def _run(self) -> None:
        pending = b""
        drain_until: float | None = None
        while True:
            if self.stop.is_set():
                # Stopped: what is already in the pipe is read, for _DRAIN_S at most (a process
                # that left the group may hold the pipe open and keep writing).
                drain_until = drain_until or time.monotonic() + _DRAIN_S
                if time.monotonic() > drain_until:
                    break
            ready, _, _ = select.select([self.pipe], [], [], _POLL_S)
            if not ready:
                if self.stop.is_set():
                    break
                continue
            try:
                data = os.read(self.pipe, _READ_CHUNK)
            except OSError:
                break
            if not data:
                break
            pending += data
            *complete, pending = pending.split(b"\n")
            for line in complete:
                self._line(line)
            if len(pending) > _LINE_CAP:
                self._line(pending[:_LINE_CAP] + b" [line cut: longer than 256 KiB]")
                pending = b""
        if pending:
            self._line(pending)

    def _line(self, raw: bytes) -> None:
        now = time.monotonic() - self.started
        self.lines += 1
        raw = raw[:_LINE_CAP]
        line = normalize(raw, self.lines)
        message = encoded(line)
        for milestone in self.milestones:
            key = milestone.milestone.id
            if key not in self.seen and milestone.seen_in(line, message):
                self.seen[key] = round(now, 3)
        text = self.redactor.text(raw.decode("utf-8", errors="replace").rstrip("\r") + "\n")
        data = text.encode("utf-8", errors="replace")
        if self.written + len(data) <= LOG_HEAD_BYTES and not self.tail:
            self.sink.write(data)
            self.written += len(data)
            return
        self.tail.append(data)
        self.tail_bytes += len(data)
        while self.tail_bytes > LOG_TAIL_BYTES:
            self.dropped += len(first := self.tail.popleft())
            self.tail_bytes -= len(first)

    def finish(self) -> int:
        """Wait for the pipe to drain, write the kept tail; the bytes written."""
        self.stop.set()
        if self.thread is not None:
            self.thread.join(2 * _DRAIN_S)
        if self.dropped:
            marker = f"[... {self.dropped} bytes of server output not kept ...]\n"
            self.sink.write(marker.encode())
            self.written += len(marker)
        for data in self.tail:
            self.sink.write(data)
            self.written += len(data)
        self.tail.clear()
        self.sink.flush()
        return self.written


def _die_with_parent() -> None:
    """In the child before exec: SIGTERM when vllm-triage dies, so a killed run leaves no server
    holding the node's GPUs (Linux; elsewhere the group is stopped on every normal exit)."""
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass
class _Running:
    """A server process started by one start, until it is stopped."""

    record: StartRecord
    proc: subprocess.Popen[bytes]
    reader: _Reader
    sink: IO[bytes]
    log_path: Path


class StartStability:
    """N starts of the server; the last one (when ready) is left running for the ladder until
    `close()`, which every caller must reach (a `finally`)."""

    def __init__(
        self,
        command: StartCommand,
        url: str,
        starts: int,
        folder: Path,
        kb: KnowledgeBase,
        *,
        deadline_s: float,
        grace_s: float,
        api_key: str | None = None,
        notice: Notice | None = None,
    ) -> None:
        self.command = command
        self.url = url  # with its credentials, if any: for the client only
        self.shown_url = public_url(url)
        self.folder = folder
        self.kb = kb
        self.deadline_s = deadline_s
        self.grace_s = grace_s
        self.api_key = api_key
        self.notice = notice or (lambda _: None)
        self.milestones = [
            CompiledMilestone.of(m, rank) for rank, m in enumerate(kb.phases.milestones)
        ]
        shown = Redactor(kb).argv([*(f"{k}={v}" for k, v in command.env.items()), *command.argv])
        self.summary = StartSummary(command=shown, node=socket.gethostname(), requested=starts)
        self._running: _Running | None = None

    def run(self) -> bool:
        """Start N times; True when the last start is ready (and left running)."""
        total = self.summary.requested
        for number in range(1, total + 1):
            running = self._start(number)
            ready = running is not None and running.record.outcome == "ready"
            if number < total or not ready:
                self._stop(running)
        return self._running is not None

    def close(self) -> StartSummary:
        """Stop the server left running (or one half-started when interrupted), finish its log,
        and give the summary with every start's figures."""
        self._stop(self._running)
        ready = [s for s in self.summary.starts if s.outcome == "ready"]
        self.summary.ready = len(ready)
        self.summary.ready_s = [s.ready_s for s in ready if s.ready_s is not None]
        self.summary.engine_init_s = [s.engine_init_s for s in ready if s.engine_init_s is not None]
        return self.summary

    # --- one start ------------------------------------------------------------------------

    def _start(self, number: int) -> _Running | None:
        record = StartRecord(number=number, outcome="not_started")
        self.summary.starts.append(record)
        logs = self.folder / STARTS_FOLDER
        logs.mkdir(exist_ok=True)
        log_path = logs / f"start-{number}.log"
        record.log = str(log_path)
        redactor = Redactor(self.kb)
        redactor.argv(self.command.argv)  # learn the command's secrets: the log may echo them
        sink = log_path.open("wb")
        env = dict(child_environment(self.command))
        read_end, write_end = os.pipe()
        started = time.monotonic()
        try:
            proc = subprocess.Popen(
                self.command.argv,
                stdin=subprocess.DEVNULL,
                stdout=write_end,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,  # its own process group, stopped whole
                preexec_fn=_die_with_parent,
            )
        except OSError as exc:
            os.close(read_end)
            os.close(write_end)
            sink.close()
            record.reason = reasons.CANNOT_RUN.format(
                program=display_name(self.command.argv[0]), error=exc.strerror
            )
            self.notice(f"start {number}: {record.reason}")
            return None
        os.close(write_end)
        reader = _Reader(read_end, sink, redactor, self.milestones, started)
        reader.start()
        running = _Running(record, proc, reader, sink, log_path)
        self._running = running
        self.notice(
            f"start {number} of {self.summary.requested}: waiting for {self.shown_url}/health"
        )
        outcome: StartOutcome = "interrupted"
        try:
            outcome = self._wait(running, started)
        finally:
            record.outcome = outcome
            record.milestones = dict(reader.seen)
            record.engine_init_s = reader.seen.get(READY_MILESTONE)
        if outcome == "ready":
            self.notice(
                f"start {number}: ready in {record.ready_s:.1f} s"
                + (
                    f" (engine initialised at {record.engine_init_s:.1f} s)"
                    if record.engine_init_s is not None
                    else ""
                )
            )
        return running

    def _wait(self, running: _Running, started: float) -> StartOutcome:
        record = running.record
        deadline = started + self.deadline_s
        client = Client(self.url, self.api_key, max_connections=2)
        try:
            while True:
                code = running.proc.poll()
                if code is not None:
                    record.exit_code = code
                    record.reason = reasons.EXITED_EARLY.format(code=code)
                    return "exited"
                now = time.monotonic()
                if now >= deadline:
                    record.reason = reasons.NO_HEALTH.format(seconds=f"{self.deadline_s:g}")
                    return "timed_out"
                with contextlib.suppress(ReplyError):
                    client.fetch("/health", min(deadline, now + _HEALTH_TIMEOUT_S))
                    record.ready_s = round(time.monotonic() - started, 3)
                    return "ready"
                time.sleep(min(_POLL_S * 2, max(0.0, deadline - time.monotonic())))
        finally:
            client.close()

    def _stop(self, running: _Running | None) -> None:
        """Stop the process group (SIGTERM, then SIGKILL after the grace period), finish the
        log, and diagnose the start from it when it failed."""
        if running is None:
            return
        if running is self._running:
            self._running = None
        record, proc = running.record, running.proc
        pgid = proc.pid
        interrupted = False
        if proc.poll() is None or _group_alive(pgid):
            record.stopped_by = "sigterm"
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pgid, signal.SIGTERM)
            deadline = time.monotonic() + self.grace_s
            try:
                while time.monotonic() < deadline:
                    if proc.poll() is not None and not _group_alive(pgid):
                        break
                    time.sleep(0.1)
            except KeyboardInterrupt:  # a second Ctrl-C: no more grace, but nothing left behind
                interrupted = True
            if _group_alive(pgid):
                record.stopped_by = "sigkill"
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(pgid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=10)
        if record.exit_code is None and record.outcome != "ready":
            record.exit_code = proc.returncode
        record.log_bytes = running.reader.finish()
        running.sink.close()
        with contextlib.suppress(OSError):
            os.close(running.reader.pipe)
        record.milestones = dict(running.reader.seen)
        record.engine_init_s = running.reader.seen.get(READY_MILESTONE)
        if record.outcome != "ready":
            record.engine_init_s = None  # the milestone alone is not a start that served
        if record.outcome in ("exited", "timed_out"):
            self._diagnose(record, running.log_path)
            self.notice(
                f"start {record.number}: {record.outcome} ({record.reason})"
                + (f"; diagnosis: {record.diagnosis.cause}" if record.diagnosis else "")
            )
        if interrupted:
            raise KeyboardInterrupt

    def _diagnose(self, record: StartRecord, log: Path) -> None:
        try:
            diagnosis = diagnose(DiagnoseOptions(logs=(str(log),)), kb=self.kb)
        except TriageError as exc:
            record.reason = reasons.NOT_DIAGNOSED.format(reason=record.reason, error=exc)
            return
        record.diagnosis = diagnosis.primary
        record.phase_reached = diagnosis.phase_reached


def child_environment(command: StartCommand) -> Mapping[str, str]:
    """The environment the server gets: this one, with the command's own assignments over it."""
    return {**os.environ, **command.env}
