"""What every rung of the ladder shares: options, the client, the recorder, what earlier rungs
learnt about the server (model id, max_model_len, cache settings), and the run's tallies."""

from __future__ import annotations

import shutil
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx

from vllm_triage.case import case_folder
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.knowledge.schema import Recipe
from vllm_triage.launch import LaunchArgs
from vllm_triage.validate.client import METRICS_CAP, Client, ReplyError
from vllm_triage.validate.credentials import Credentials
from vllm_triage.validate.deadlines import DEFAULT_DEADLINES
from vllm_triage.validate.metrics import MetricsError, MetricsSnapshot, parse_metrics
from vllm_triage.validate.models import (
    PrefixCacheSummary,
    RequestRecord,
    RungName,
    RungResult,
    RungStatus,
    StructuredOutputSummary,
    ToolCallSummary,
)
from vllm_triage.validate.toolcalls import TOOLS, loose_tools


@dataclass(frozen=True)
class ValidateOptions:
    """What to validate and how far to push it."""

    url: str
    model: str | None = None
    target_context: int | None = None
    max_concurrency: int = 8
    recipe: str | None = None
    profile: str | None = None
    """The recipe's serving profile the server follows (the recipe's default when None)."""
    api_key_env: str | None = None
    case: Path = field(default_factory=case_folder)
    """The case folder: the run goes into its runs/<UTC>/."""
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
    loose_tools: bool = False
    """Send the tools without `strict: true`, as most agents do (the model alone keeps the format)."""
    start_cmd: str | None = None
    """The text of a command that starts the server (a launch command, run without a shell): the
    server is started `starts` times on this node, each start timed and stopped, and the ladder
    runs against the last one. Only on a node the user names as isolated."""
    starts: int | None = None
    """How many starts (1 when start_cmd is given alone)."""
    start_deadline_s: float = 1200.0
    """Per start: the most seconds until /health answers 200."""
    stop_grace_s: float = 30.0
    """Per stop: seconds between SIGTERM and SIGKILL to the server's process group."""
    compare_url: str | None = None
    """A second endpoint: the same ladder (the same requests) replayed against it, side by side."""
    compare_api_key_env: str | None = None
    """The environment variable holding the second endpoint's API key (never the first one's)."""
    node: str | None = None
    """The node the server runs on, tied to the driver and GPUs of the case's baseline of it
    (the host that ran --start-cmd when None)."""
    image: str | None = None
    """The image the server runs, as the record names it."""


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
    structured_output: StructuredOutputSummary = field(default_factory=StructuredOutputSummary)

    def __post_init__(self) -> None:
        self.tool_calls.mode = "loose" if self.options.loose_tools else "strict"

    @property
    def tools(self) -> list[dict[str, Any]]:
        """The tools every request declares: strict, or loose with --loose-tools."""
        return loose_tools() if self.options.loose_tools else TOOLS

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
