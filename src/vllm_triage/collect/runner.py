"""Run the read-only commands of `collect`, and nothing else: an explicit allow-list of shapes.

A probe asks for a command by name with its parameters; the argv is built from the template, so a
command outside the list cannot be formed. Each run has a deadline and keeps at most `output_cap`
bytes of output: the first and the last halves, with one line saying what was left out between
them (the first error of a log is near its start, the exit near its end). When the command ends,
times out or collect is interrupted, every process it started is killed (see processes.py), and
cleanup() removes the raw, unredacted outputs.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import selectors
import shutil
import subprocess
import tempfile
import threading
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from vllm_triage.collect import reasons
from vllm_triage.collect.excerpt import LINE_SEARCH, cut_line, head_end, tail_start
from vllm_triage.collect.processes import MARKER_ENV, Tracked, kill_marked

# The script `--probe-image` runs in a throwaway container: prints versions, changes nothing.
IMAGE_PROBE_SCRIPT = (
    "import json, importlib.metadata as m\n"
    "out = {}\n"
    "try:\n"
    "    import torch\n"
    "    out['torch_version'] = torch.__version__\n"
    "    out['torch_cuda'] = torch.version.cuda\n"
    "except Exception as exc:\n"
    "    out['torch_error'] = repr(exc)\n"
    "for name in ('vllm', 'nvidia-nccl-cu12', 'nvidia-nccl-cu13', 'flashinfer-python'):\n"
    "    try:\n"
    "        out[name] = m.version(name)\n"
    "    except Exception:\n"
    "        pass\n"
    "try:\n"
    "    import vllm\n"
    "    out['vllm_commit'] = getattr(vllm, '__commit__', None)\n"
    "except Exception as exc:\n"
    "    out['vllm_error'] = repr(exc)\n"
    "print(json.dumps(out))\n"
)


@dataclass(frozen=True)
class AllowedCommand:
    """One command shape `collect` may run; `{name}` tokens are filled from probe parameters."""

    name: str
    argv: tuple[str, ...]
    purpose: str


def _engine_commands(engine: str) -> tuple[AllowedCommand, ...]:
    return (
        AllowedCommand(
            f"{engine}_version", (engine, "version", "--format", "{{json .}}"), "engine version"
        ),
        AllowedCommand(
            f"{engine}_info", (engine, "info", "--format", "{{json .}}"), "runtimes, CDI dirs"
        ),
        AllowedCommand(
            f"{engine}_inspect",
            (engine, "inspect", "--type", "container", "{container}"),
            "the failed container: image, command, env, mounts, state",
        ),
        AllowedCommand(
            f"{engine}_logs",
            (engine, "logs", "--timestamps", "{container}"),
            "the container's log as it stands (never restarted)",
        ),
        AllowedCommand(
            f"{engine}_image_inspect",
            (engine, "image", "inspect", "{image}"),
            "the image config: CUDA_VERSION, NVIDIA_REQUIRE_CUDA, labels",
        ),
        AllowedCommand(
            f"{engine}_image_probe",
            (
                engine, "run", "--rm", "--network", "none", "--entrypoint", "python3",
                "{image}", "-c", "{script}",
            ),
            "only with --probe-image: a throwaway container without GPUs prints torch/vLLM versions",
        ),
    )  # fmt: skip


ALLOWED_COMMANDS: tuple[AllowedCommand, ...] = (
    AllowedCommand("nvidia_smi_xml", ("nvidia-smi", "-q", "-x"), "GPUs, driver, MIG, ECC as XML"),
    AllowedCommand("nvidia_smi_topo", ("nvidia-smi", "topo", "-m"), "GPU/NIC topology matrix"),
    *_engine_commands("docker"),
    *_engine_commands("podman"),
    AllowedCommand("nvidia_ctk_version", ("nvidia-ctk", "--version"), "Container Toolkit version"),
    AllowedCommand(
        "nvidia_container_cli_version", ("nvidia-container-cli", "--version"), "libnvidia-container"
    ),
    AllowedCommand(
        "kubectl_pod",
        ("kubectl", "get", "pod", "{pod}", "--namespace", "{namespace}", "--output", "json"),
        "pod spec and container statuses",
    ),
    AllowedCommand(
        "kubectl_events",
        (
            "kubectl",
            "get",
            "events",
            "--namespace",
            "{namespace}",
            "--field-selector",
            "involvedObject.name={pod}",
            "--output",
            "json",
        ),
        "the pod's events",
    ),
    AllowedCommand(
        "kubectl_logs",
        (
            "kubectl",
            "logs",
            "{pod}",
            "--namespace",
            "{namespace}",
            "--all-containers",
            "--timestamps",
        ),
        "current logs",
    ),
    AllowedCommand(
        "kubectl_logs_previous",
        (
            "kubectl",
            "logs",
            "{pod}",
            "--namespace",
            "{namespace}",
            "--all-containers",
            "--timestamps",
            "--previous",
        ),
        "the log of the previous (crashed) run",
    ),
    AllowedCommand(
        "kubectl_node", ("kubectl", "get", "node", "{node}", "--output", "json"), "node labels"
    ),
    AllowedCommand("ibv_devinfo", ("ibv_devinfo",), "RDMA devices and port states"),
    AllowedCommand("ibstat", ("ibstat",), "InfiniBand port states and rates"),
    AllowedCommand("ip_address", ("ip", "-json", "address", "show"), "network interfaces"),
)
_BY_NAME = {command.name: command for command in ALLOWED_COMMANDS}
_FIXED_PARAMETERS = {"script": IMAGE_PROBE_SCRIPT}
_PLACEHOLDER = re.compile(r"\{([a-z_]+)\}")

# Per command: the first and the last halves of this many bytes are kept (a 5 GB `docker logs`
# becomes 32 MiB and a note), which also bounds how long redacting the bundle takes.
DEFAULT_OUTPUT_CAP = 32 * 1024 * 1024
_READ_SIZE = 64 * 1024
_STDERR_KEPT = 8192
# After the command's process exits, how long its pipes may still deliver before whatever holds
# them open (a child that outlived it) is killed.
_DRAIN_SECONDS = 0.5
_RECORD_SECONDS = 0.25
_POLL_SECONDS = 0.05


class CommandNotAllowed(ValueError):
    """A command name outside the allow-list, or a parameter that could smuggle an option in."""


@dataclass
class CommandResult:
    """What a command did: exit status, output (in a temporary file for big logs), timing."""

    argv: list[str]
    returncode: int | None
    output_path: Path | None
    stderr: str
    duration_s: float
    timed_out: bool = False
    missing: bool = False
    total_bytes: int = 0
    omitted_bytes: int = 0
    interrupted: bool = False

    @property
    def ok(self) -> bool:
        return (
            self.returncode == 0
            and not self.timed_out
            and not self.missing
            and not self.interrupted
        )

    @property
    def truncated(self) -> bool:
        """Whether the middle of the output was left out (it was larger than the cap)."""
        return self.omitted_bytes > 0

    def text(self) -> str:
        """The standard output as text (undecodable bytes kept through surrogateescape)."""
        if self.output_path is None:
            return ""
        return self.output_path.read_bytes().decode("utf-8", errors="surrogateescape")

    def failure(self) -> str:
        """One line that says why the command did not give its output."""
        command = " ".join(self.argv)
        if self.missing:
            return reasons.NOT_INSTALLED.format(program=self.argv[0])
        if self.interrupted:
            return reasons.NOT_RUN.format(command=command)
        if self.timed_out:
            return reasons.DID_NOT_FINISH.format(command=command, seconds=f"{self.duration_s:.1f}")
        last = next((line for line in reversed(self.stderr.splitlines()) if line.strip()), "")
        if last:
            return reasons.EXITED_SAYING.format(
                command=command, code=self.returncode, error=last[:300]
            )
        return reasons.EXITED.format(command=command, code=self.returncode)

    def cut_note(self) -> str:
        """What the cap left out, for the manifest's notes."""
        return (
            f"`{' '.join(self.argv)}` printed {self.total_bytes} bytes; the middle "
            f"{self.omitted_bytes} bytes were left out (its first and last parts are kept)"
        )


class _Capture:
    """A command's standard output into a file as excerpt.py keeps a log: the first half of the
    cap as it comes, the last half in memory (older chunks dropped), the cut line between."""

    def __init__(self, handle: BinaryIO, cap: int) -> None:
        self.handle = handle
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = 0
        self.total = 0
        self.omitted = 0
        self._tail: list[bytes] = []
        self._tail_size = 0

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        if self.head < self.head_cap:
            taken = chunk[: self.head_cap - self.head]
            self.handle.write(taken)
            self.head += len(taken)
            chunk = chunk[len(taken) :]
        if chunk:
            self._tail.append(chunk)
            self._tail_size += len(chunk)
            while self._tail_size - len(self._tail[0]) >= self.tail_cap:
                self._tail_size -= len(self._tail.pop(0))

    def finish(self) -> None:
        tail = b"".join(self._tail)
        self._tail = []
        if self.total <= self.head_cap + self.tail_cap:
            self.handle.write(tail)
            return
        tail = tail[-self.tail_cap :]
        self.handle.seek(max(0, self.head - LINE_SEARCH))
        kept_head = head_end(self.handle.read(), self.head)
        tail = tail[tail_start(tail, 0) :]
        self.handle.seek(kept_head)
        self.handle.truncate()
        self.omitted = self.total - kept_head - len(tail)
        self.handle.write(cut_line(self.omitted, self.total, kept_head, len(tail)) + tail)


def _exited(pid: int) -> bool:
    """Whether the process has exited, without reaping it (its pid and group stay ours)."""
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


@dataclass
class CommandRunner:
    """Runs allow-listed commands; `path` replaces PATH (tests point it at fake commands)."""

    path: str | None = None
    output_cap: int = DEFAULT_OUTPUT_CAP
    scratch: Path | None = None  # the raw outputs' folder, made private at the first command
    history: list[list[str]] = field(default_factory=list)
    run_id: str = field(default_factory=lambda: uuid.uuid4().hex)
    _sequence: Iterator[int] = field(default_factory=itertools.count, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _live: dict[int, Tracked] = field(default_factory=dict, repr=False)
    _closed: bool = field(default=False, repr=False)

    def stop(self) -> None:
        """No command starts after this, and every process any command started is killed (the
        outputs captured so far stay, for the bundle). Safe more than once, from any thread."""
        with self._lock:
            self._closed = True
            live = list(self._live.values())
        for tracked in live:
            tracked.kill()
        kill_marked(f"{MARKER_ENV}={self.run_id}:")

    def cleanup(self) -> None:
        """stop(), then remove the raw (unredacted) outputs."""
        self.stop()
        if self.scratch is not None:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def argv(self, name: str, **parameters: str) -> list[str]:
        """The argv of an allow-listed command with its parameters filled in."""
        command = _BY_NAME.get(name)
        if command is None:
            raise CommandNotAllowed(f"command {name!r} is not on the allow-list")
        values = {**parameters, **_FIXED_PARAMETERS}
        for key, value in parameters.items():
            if not value or value.startswith("-") or "\0" in value or "\n" in value:
                raise CommandNotAllowed(f"parameter {key}={value!r} is not a plain name")
        try:
            return [_PLACEHOLDER.sub(lambda m: values[m.group(1)], token) for token in command.argv]
        except KeyError as exc:
            raise CommandNotAllowed(f"command {name!r} needs parameter {exc.args[0]}") from None

    def run(self, name: str, timeout: float, **parameters: str) -> CommandResult:
        """Run one allow-listed command with a deadline; never raises for the command's failure."""
        argv = self.argv(name, **parameters)
        self.history.append(argv)
        executable = shutil.which(argv[0], path=self.path if self.path is not None else None)
        if executable is None:
            return CommandResult(argv, None, None, "", 0.0, missing=True)
        started = time.monotonic()
        with self._lock:  # no command starts once cleanup() began; each is known to it
            if self._closed:
                return CommandResult(argv, None, None, "", 0.0, interrupted=True)
            if self.scratch is None:
                self.scratch = Path(tempfile.mkdtemp(prefix="vllm-triage-"))
            number = next(self._sequence)
            output = self.scratch / f"{number:03d}-{name}.out"
            env = dict(os.environ, **{MARKER_ENV: f"{self.run_id}:{number}"})
            if self.path is not None:
                env["PATH"] = self.path
            try:
                handle = output.open("w+b")
                process = subprocess.Popen(
                    [executable, *argv[1:]],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE,
                    stderr=subprocess.PIPE,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                return CommandResult(argv, None, None, str(exc), 0.0)
            tracked = self._live[number] = Tracked(process.pid, f"{self.run_id}:{number}")
        capture = _Capture(handle, self.output_cap)
        stderr = bytearray()
        try:
            timed_out = self._pump(process, tracked, capture, stderr, started + max(timeout, 0.0))
        finally:
            tracked.kill()  # before reaping: the pid and the group are still the command's
            self._drain(process, capture, stderr)
            with tracked.reaping():
                process.wait()
            with self._lock:
                self._live.pop(number, None)
            with contextlib.suppress(OSError):
                capture.finish()
            handle.close()
        return CommandResult(
            argv,
            None if timed_out else process.returncode,
            output,
            bytes(stderr).decode("utf-8", errors="replace"),
            time.monotonic() - started,
            timed_out=timed_out,
            total_bytes=capture.total,
            omitted_bytes=capture.omitted,
        )

    @staticmethod
    def _pump(
        process: subprocess.Popen[bytes],
        tracked: Tracked,
        capture: _Capture,
        stderr: bytearray,
        deadline: float,
    ) -> bool:
        """Read the command's output until it ends; True when the deadline came first."""
        assert process.stdout is not None and process.stderr is not None
        with selectors.DefaultSelector() as selector:
            selector.register(process.stdout, selectors.EVENT_READ, capture)
            selector.register(process.stderr, selectors.EVENT_READ, None)
            exited_at: float | None = None
            record_at = time.monotonic() + _RECORD_SECONDS
            while selector.get_map():
                now = time.monotonic()
                if now >= deadline:
                    return True
                if exited_at is None and _exited(process.pid):
                    exited_at = now
                if exited_at is not None and now - exited_at > _DRAIN_SECONDS:
                    return False  # a child outlived it, holding the pipe: killed by the caller
                if now >= record_at:
                    tracked.record()
                    record_at = now + _RECORD_SECONDS
                for key, _ in selector.select(min(deadline - now, _POLL_SECONDS)):
                    chunk = os.read(key.fd, _READ_SIZE)
                    if not chunk:
                        selector.unregister(key.fileobj)
                    elif key.data is capture:
                        capture.add(chunk)
                    else:
                        stderr += chunk
                        del stderr[:-_STDERR_KEPT]
        while not _exited(process.pid):
            if time.monotonic() >= deadline:
                return True
            time.sleep(_POLL_SECONDS / 5)
        return False

    @staticmethod
    def _drain(process: subprocess.Popen[bytes], capture: _Capture, stderr: bytearray) -> None:
        """What the pipes still hold once every writer is dead, then close them."""
        for stream, sink in ((process.stdout, capture), (process.stderr, None)):
            if stream is None:
                continue
            with contextlib.suppress(OSError):
                os.set_blocking(stream.fileno(), False)
                while chunk := os.read(stream.fileno(), _READ_SIZE):
                    if sink is not None:
                        sink.add(chunk)
                    else:
                        stderr += chunk
                        del stderr[:-_STDERR_KEPT]
            stream.close()
