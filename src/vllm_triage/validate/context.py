"""What every rung of the ladder shares: options, the client, the recorder, what earlier rungs
learnt about the server (model id, max_model_len, cache settings), and the run's tallies."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, cast

import httpx

from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.launch import LaunchArgs
from vllm_triage.validate.client import METRICS_CAP, Client, ReplyError
from vllm_triage.validate.credentials import Credentials
from vllm_triage.validate.metrics import MetricsError, MetricsSnapshot, parse_metrics
from vllm_triage.validate.models import (
    PrefixCacheSummary,
    RequestRecord,
    RungName,
    RungResult,
    RungStatus,
    ToolCallSummary,
)

DEFAULT_DEADLINES: dict[RungName, float] = {
    "health": 30.0,
    "short_text": 120.0,
    "target_context": 600.0,
    "same_prefix": 300.0,
    "concurrency": 900.0,
    "image": 120.0,
    "tool_calls": 300.0,
    "multi_node": 600.0,
}
_MAX_DEADLINE = 24 * 3600.0


def parse_deadlines(values: Sequence[str]) -> dict[RungName, float]:
    """Rung deadlines from RUNG=SECONDS settings (RUNG `all` sets every rung) over the defaults."""
    deadlines = dict(DEFAULT_DEADLINES)
    for value in values:
        name, _, seconds = value.partition("=")
        name = name.strip()
        if name != "all" and name not in deadlines:
            raise InputError(
                f"--deadline {value!r}: give RUNG=SECONDS, RUNG one of all, {', '.join(deadlines)}"
            )
        try:
            number = float(seconds)
        except ValueError:
            number = 0.0  # refused below, with the same message
        if not 0 < number <= _MAX_DEADLINE:
            raise InputError(
                f"--deadline {value!r}: SECONDS must be a number above 0 and at most {_MAX_DEADLINE:g}"
            )
        for rung in deadlines if name == "all" else [name]:
            deadlines[cast(RungName, rung)] = number
    return deadlines


@dataclass(frozen=True)
class ValidateOptions:
    """What to validate and how far to push it."""

    url: str
    model: str | None = None
    target_context: int | None = None
    max_concurrency: int = 8
    recipe: str | None = None
    api_key_env: str | None = None
    case: Path = Path("triage")
    keep_going: bool = False
    launch_cmd: str | None = None
    multi_node: bool = False
    logs: tuple[Path, ...] = ()
    transport: str | None = None
    nccl_test: str | None = None
    same_prefix_requests: int = 4
    requests_per_slot: int = 2
    error_rate_threshold: float = 0.05
    output_tokens: int = 32
    deadlines: dict[RungName, float] = field(default_factory=lambda: dict(DEFAULT_DEADLINES))


class Recorder:
    """Appends each request's record to requests.jsonl as it ends (flushed: Ctrl-C loses none)."""

    def __init__(self, stream: IO[str], credentials: Credentials | None = None) -> None:
        self._stream = stream
        self._credentials = credentials or Credentials()  # to mask what a server echoed
        self._lock = threading.Lock()

    def add(self, record: RequestRecord) -> RequestRecord:
        line = self._credentials.mask_model(record).model_dump_json()
        with self._lock:
            self._stream.write(line + "\n")
            self._stream.flush()
        return record


@dataclass
class LadderContext:
    options: ValidateOptions
    client: Client
    kb: KnowledgeBase
    recorder: Recorder
    launch: LaunchArgs | None = None
    recipe: Recipe | None = None
    model: str | None = None
    max_model_len: int | None = None
    metrics_available: bool | None = None
    cache_labels: dict[str, str] | None = None
    unreachable: bool = False
    prefix_cache: PrefixCacheSummary = field(default_factory=PrefixCacheSummary)
    tool_calls: ToolCallSummary = field(default_factory=ToolCallSummary)

    def deadline(self, rung: RungName) -> float:
        return time.monotonic() + self.options.deadlines[rung]

    def metrics(self, deadline: float) -> MetricsSnapshot | None:
        """One scrape of /metrics, or None when the server has none (said once, in health)."""
        if self.metrics_available is False:
            return None
        try:
            return scrape_metrics(self.client, deadline)
        except (ReplyError, MetricsError):
            return None

    def result(
        self, name: RungName, status: RungStatus, reason: str | None = None, **figures: object
    ) -> RungResult:
        return RungResult(name=name, status=status, reason=reason, figures=dict(figures))


def scrape_metrics(client: Client, deadline: float) -> MetricsSnapshot:
    """/metrics, read within its size cap and parsed; ReplyError or MetricsError otherwise."""
    page = client.fetch("/metrics", deadline, cap=METRICS_CAP)
    return parse_metrics(page.decode("utf-8", errors="replace"))


def gpu_memory_used_mib(url: str, deadline: float) -> list[int] | None:
    """GPU memory in use per GPU via nvidia-smi, when the server runs on this host."""
    host = httpx.URL(url).host
    left = deadline - time.monotonic()
    if host not in ("127.0.0.1", "localhost", "::1") or left <= 0 or not shutil.which("nvidia-smi"):
        return None
    try:
        output = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=left, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return [int(v) for v in output.split()[:64] if v.strip().isdigit() and len(v) < 10] or None
