"""The common interface of the probes: what a probe gets (options, a command runner with its own
deadline, read access to the host's files, results shared between probes) and what it returns.
"""

from __future__ import annotations

import shutil
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from vllm_triage.case import case_folder
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.runner import CommandResult, CommandRunner
from vllm_triage.errors import InputError
from vllm_triage.inputs import open_input
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.models import Artifact
from vllm_triage.safejson import JsonError, parse_json

T = TypeVar("T")
_LOG_HEAD_BYTES = 32 * 1024 * 1024
# A JSON answer (inspect, a pod, events) larger than this is refused, not parsed.
_JSON_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class CollectOptions:
    """What to collect: the incident's container or pod, extra logs, launch command, model path."""

    container: str | None = None
    pod: str | None = None
    namespace: str = "default"
    logs: tuple[Path, ...] = ()
    launch_cmd: str | None = None
    image: str | None = None
    model_path: str | None = None
    probe_image: bool = False
    timeout: float = 10.0
    host_root: Path = Path("/")
    engine: str | None = None
    case: Path = field(default_factory=case_folder)
    """The case folder: the bundle goes into its bundles/."""


class NotAvailable(Exception):
    """The probe's source of evidence is not on this host or not asked for; the reason says which."""


@dataclass
class ProbeOutput:
    files: list[CapturedFile] = field(default_factory=list)
    facts: Artifact | None = None
    notes: list[str] = field(default_factory=list)


class SharedResults:
    """Results that several probes need (one `docker inspect`, one pod JSON): computed once."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._done: dict[str, threading.Event] = {}
        self._values: dict[str, Any] = {}

    def get(self, key: str, compute: Callable[[], T], timeout: float) -> T:
        with self._lock:
            event = self._done.get(key)
            owner = event is None
            if event is None:
                event = self._done[key] = threading.Event()
        if owner:
            try:
                self._values[key] = compute()
            except Exception as exc:  # handed to every waiter, raised in each
                self._values[key] = exc
            finally:
                event.set()
        elif not event.wait(max(timeout, 0.0)):
            raise TimeoutError(f"waiting for {key} that another probe is collecting")
        value = self._values[key]
        if isinstance(value, Exception):
            raise value
        return value  # type: ignore[no-any-return]


@dataclass
class ProbeContext:
    """One probe's view of the collection, with its own deadline."""

    options: CollectOptions
    runner: CommandRunner
    kb: KnowledgeBase
    deadline: float
    shared: SharedResults

    def remaining(self) -> float:
        return max(0.0, self.deadline - time.monotonic())

    def run(self, name: str, **parameters: str) -> CommandResult:
        """Run an allow-listed command within what is left of this probe's time."""
        return self.runner.run(name, self.remaining(), **parameters)

    def once(self, key: str, compute: Callable[[], T]) -> T:
        """A result shared between probes: the first asks, the others wait for it."""
        return self.shared.get(key, compute, self.remaining())

    def host_file(self, path: str) -> Path:
        """A host path under --host-root (e.g. /host in a node debug pod)."""
        return self.options.host_root / path.lstrip("/")

    def read_host_text(self, path: str, limit: int = 1024 * 1024) -> str | None:
        """A small host file as text, or None when it is absent or unreadable."""
        try:
            with self.host_file(path).open("rb") as handle:
                return handle.read(limit).decode("utf-8", errors="replace")
        except OSError:
            return None

    def log_head(self, path: Path) -> str | None:
        """The first 32 MiB of a --log file as text, read once for every probe that looks."""

        def read() -> str | None:
            try:  # a regular file only (never blocks on a FIFO)
                with open_input(path, "a log file") as (handle, _):
                    return handle.read(_LOG_HEAD_BYTES).decode("utf-8", "replace")
            except InputError:
                return None

        return self.once(f"log_head:{path}", read)

    def engine(self) -> str:
        """The container engine to ask: the one given, else docker, else podman."""
        if self.options.engine:
            return self.options.engine
        for candidate in ("docker", "podman"):
            if shutil.which(candidate, path=self.runner.path):
                return candidate
        raise NotAvailable(reasons.NO_ENGINE)

    def json_command(self, name: str, **parameters: str) -> tuple[CommandResult, Any]:
        """Run a command that prints JSON; NotAvailable if the tool is missing, ProbeFailed
        (one line) for anything that is not a JSON document of a sane size and depth."""
        result = self.run(name, **parameters)
        if result.missing:
            raise NotAvailable(result.failure())
        if not result.ok:
            raise ProbeFailed.of(result)
        command = " ".join(result.argv)
        if result.truncated or result.total_bytes > _JSON_MAX_BYTES:
            raise ProbeFailed(
                reasons.JSON_TOO_LARGE.format(command=command, size=result.total_bytes)
            )
        data = result.output_path.read_bytes() if result.output_path else b""
        try:
            return result, parse_json(data, f"`{command}`", max_bytes=_JSON_MAX_BYTES)
        except JsonError as exc:
            reason = str(exc).removeprefix(f"`{command}`: ")
            raise ProbeFailed(reasons.NOT_JSON.format(command=command, reason=reason)) from None

    def output_file(self, path: str, result: CommandResult) -> CapturedFile:
        """A command's output for the bundle, with a note when its middle was left out."""
        note = result.cut_note() if result.truncated else None
        return CapturedFile(path, source=result.output_path, note=note)


class ProbeFailed(Exception):
    """The source is there but gave no usable answer; the message is the one-line reason."""

    @staticmethod
    def of(result: CommandResult) -> ProbeFailed:
        """The failure of a command: timed out, or failed."""
        return (
            ProbeTimedOut(result.failure()) if result.timed_out else ProbeFailed(result.failure())
        )


class ProbeTimedOut(ProbeFailed):
    """The source did not answer before the probe's deadline."""


class Probe(NamedTuple):
    name: str
    collect: Callable[[ProbeContext], ProbeOutput]
    purpose: str
