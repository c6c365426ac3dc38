"""What every rung of the ladder shares: options, the client, the recorder, what earlier rungs
learnt about the server (model id, max_model_len, cache settings), and the run's tallies."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import httpx

from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.launch import LaunchArgs
from vllm_triage.validate.client import Client
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

    def __init__(self, stream: IO[str]) -> None:
        self._stream = stream
        self._lock = threading.Lock()
        self.records: list[RequestRecord] = []

    def add(self, record: RequestRecord) -> RequestRecord:
        with self._lock:
            self.records.append(record)
            self._stream.write(record.model_dump_json() + "\n")
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
            response = self.client.get("/metrics", deadline)
        except httpx.HTTPError:
            return None
        if response.status_code != 200:
            return None
        try:
            return parse_metrics(response.text)
        except MetricsError:
            return None

    def result(
        self, name: RungName, status: RungStatus, reason: str | None = None, **figures: object
    ) -> RungResult:
        return RungResult(name=name, status=status, reason=reason, figures=dict(figures))


def gpu_memory_used_mib(url: str) -> list[int] | None:
    """GPU memory in use per GPU via nvidia-smi, when the server runs on this host."""
    host = httpx.URL(url).host
    if host not in ("127.0.0.1", "localhost", "::1") or shutil.which("nvidia-smi") is None:
        return None
    try:
        output = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits"],
            capture_output=True, text=True, timeout=10, check=True,
        ).stdout  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    return [int(v) for v in output.split() if v.strip().isdigit()] or None
