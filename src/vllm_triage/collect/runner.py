"""Run the read-only commands of `collect`, and nothing else: an explicit allow-list of shapes.

A probe asks for a command by name with its parameters; the argv is built from the template, so a
command outside the list cannot be formed. Each run has a deadline and an output cap; on timeout
the whole process group is killed, so a hanging tool cannot hold the bundle back.
"""

from __future__ import annotations

import itertools
import os
import re
import shutil
import signal
import subprocess
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

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

DEFAULT_OUTPUT_CAP = 256 * 1024 * 1024
_POLL_SECONDS = 0.02


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
    truncated: bool = False

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.timed_out and not self.missing

    def text(self) -> str:
        """The standard output as text (undecodable bytes kept through surrogateescape)."""
        if self.output_path is None:
            return ""
        return self.output_path.read_bytes().decode("utf-8", errors="surrogateescape")

    def failure(self) -> str:
        """One line that says why the command did not give its output."""
        program = self.argv[0]
        if self.missing:
            return f"{program} is not installed (not on PATH)"
        if self.timed_out:
            return f"`{' '.join(self.argv)}` did not finish within {self.duration_s:.1f} s"
        last = next((line for line in reversed(self.stderr.splitlines()) if line.strip()), "")
        return f"`{' '.join(self.argv)}` exited {self.returncode}" + (
            f": {last[:300]}" if last else ""
        )


@dataclass
class CommandRunner:
    """Runs allow-listed commands; `path` replaces PATH (tests point it at fake commands)."""

    path: str | None = None
    output_cap: int = DEFAULT_OUTPUT_CAP
    scratch: Path = field(default_factory=lambda: Path(tempfile.mkdtemp(prefix="vllm-triage-")))
    history: list[list[str]] = field(default_factory=list)
    _sequence: Iterator[int] = field(default_factory=itertools.count, repr=False)

    def cleanup(self) -> None:
        """Remove the raw (unredacted) outputs; collect calls it once the bundle is written."""
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
        self.scratch.mkdir(mode=0o700, exist_ok=True)
        number = next(self._sequence)  # atomic: probes run commands from several threads
        output = self.scratch / f"{number:03d}-{name}.out"
        errors = self.scratch / f"{number:03d}-{name}.err"
        env = dict(os.environ)
        if self.path is not None:
            env["PATH"] = self.path
        started = time.monotonic()
        with output.open("wb") as out, errors.open("wb") as err:
            try:
                process = subprocess.Popen(
                    [executable, *argv[1:]],
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    env=env,
                    start_new_session=True,
                )
            except OSError as exc:
                return CommandResult(argv, None, None, str(exc), 0.0)
            timed_out, truncated = self._wait(process, output, started + max(timeout, 0.0))
        duration = time.monotonic() - started
        if truncated:
            with output.open("r+b") as handle:
                handle.truncate(self.output_cap)
        stderr = errors.read_bytes()[-8192:].decode("utf-8", errors="replace")
        return CommandResult(
            argv,
            None if timed_out else process.returncode,
            output,
            stderr,
            duration,
            timed_out=timed_out,
            truncated=truncated,
        )

    def _wait(
        self, process: subprocess.Popen[bytes], output: Path, deadline: float
    ) -> tuple[bool, bool]:
        """Wait for the process; kill its group at the deadline or when the output passes the cap."""
        while True:
            try:
                process.wait(timeout=_POLL_SECONDS)
                return False, output.stat().st_size > self.output_cap
            except subprocess.TimeoutExpired:
                pass
            over_cap = output.stat().st_size > self.output_cap
            if time.monotonic() >= deadline or over_cap:
                _kill_group(process)
                return not over_cap, over_cap


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        process.kill()
    process.wait()
