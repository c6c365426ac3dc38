"""Benchmark `vllm-triage diagnose` against ripgrep and grep on a large, realistic vLLM log.

What is measured
----------------
1. A synthetic vLLM log of ``--size-mb`` MiB (default 1100, i.e. more than 1 GB) is written: the
   start-up of an 8-way tensor-parallel server (API server, ``EngineCore_DP0``, ``Worker_TP0`` to
   ``Worker_TP7``, line shapes taken from a real vLLM 0.32.0 log), then hours of serving (uvicorn
   access lines, request logging, throughput lines from ``loggers.py``, the eight workers' INFO
   lines interleaved, a few benign WARNING and ERROR lines), and ONE failure near the end: a
   ``torch.OutOfMemoryError: CUDA out of memory`` traceback in one worker followed by the
   ``RuntimeError: Worker failed`` / ``EngineDeadError`` cascade and the shutdown.
2. The tool's own patterns are exported with ``vllm-triage knowledge patterns``.
3. After one warm-up read (so that the file is in the page cache and no tool pays for the disk),
   and a warm-up ``diagnose`` of the 34-line example log (it fills the knowledge cache and the
   bytecode cache: see below), each round runs every command once, in turn, so that a drift of
   the machine's load falls on all of them alike; ``--runs`` rounds (default 3):

   * ``rg -c -f patterns.txt LOG`` (ripgrep, Debian's ``ripgrep`` package: ``make system-deps``)
   * ``grep -c -E -f patterns.txt LOG``
   * ``vllm-triage diagnose LOG --format json``
   * ``vllm-triage diagnose examples/kimi-k3-r575/vllm-serve.log --format json`` (start-up)

   Wall time is measured around fork/exec/wait, so the tool's Python start-up is included (the
   user pays for it too). Peak RSS is the child's own ``ru_maxrss`` taken from ``os.wait4``, which
   is exact per child (``RUSAGE_CHILDREN`` would mix children together). CPU seconds (user +
   system, from the same rusage) are printed too: ``diagnose`` reads ahead and hashes on a second
   core, so on a busy machine its wall time depends on what else runs.
4. The JSON's primary cause must be the planted failure. The OOM happens after the server
   started (serving lines precede it), so the expected cause is ``oom_under_load``; anything else
   is a correctness failure and exits with status 2 whatever the flags.

Why ripgrep (and grep) is the reference
---------------------------------------
``diagnose`` has to find every line that matches any of its signature, milestone, stop, access
and fact patterns, in one pass over a file that can be gigabytes. ``rg -c -f`` with exactly
those patterns does the same search with a literal-prefiltered lazy DFA and no interpretation at
all: it is a practical lower bound for "read the file and find the candidate lines". The tool
adds hashing the input, line numbers, decoding, normalisation, classification and JSON output on
top, so the targets are ``diagnose_time / rg_time <= 1.5`` (medians), ``diagnose_time /
grep_time <= 2.0``, and a peak RSS under 150 MB (the tool streams the file in fixed-size blocks,
so memory must not grow with the log). grep runs with ``LC_ALL=C`` by default (byte semantics,
its fastest mode); ``--grep-locale`` changes that. rg needs no locale (it reads UTF-8 as the tool
does).

Bytecode: the commands run as an installed tool does, from compiled bytecode. A checkout run with
PYTHONDONTWRITEBYTECODE=1 recompiles every changed module of the tool on each start, which no pip
install does, so the children get PYTHONPYCACHEPREFIX=<the work folder> (filled by the warm-up
run) and PYTHONDONTWRITEBYTECODE unset; ``--as-is`` keeps the environment unchanged instead.

Sizes: 1 MB here means 2**20 bytes (MiB); MB/s is file size in MiB divided by wall seconds.

Exit status: 0 all good; 1 a performance target failed (unless ``--no-fail``); 2 a command failed,
ripgrep is missing, or the diagnosis is wrong.

Usage::

    .venv/bin/python bench/bench_diagnose.py                 # 1100 MiB, temp dir, deleted
    .venv/bin/python bench/bench_diagnose.py --size-mb 200 --keep --workdir /tmp/b --no-fail
    .venv/bin/python bench/bench_diagnose.py --dense     # the example log repeated to 1 GiB

Dense mode (``--dense``): the log is the 34-line example (examples/kimi-k3-r575/vllm-serve.log,
a match every few lines) repeated until it holds at least ``--size-mb`` MiB (default 1024 then);
the expected cause is the example's, ``driver_too_old``, and the same targets apply against rg
and grep on that file.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NoReturn

MIB = 1 << 20
WRITE_CHUNK = 8 * MIB
N_WORKERS = 8
RATIO_TARGET = 2.0  # diagnose / grep
RG_RATIO_TARGET = 1.5  # diagnose / rg
RSS_TARGET_MB = 150.0
EXPECTED_CAUSE = "oom_under_load"
DENSE_EXPECTED_CAUSE = "driver_too_old"
DENSE_DEFAULT_MIB = 1024
ROOT = Path(__file__).resolve().parent.parent
STARTUP_LOG = ROOT / "examples" / "kimi-k3-r575" / "vllm-serve.log"

# Placeholder for the "MM-DD HH:MM:SS" stamp inside pre-built serving blocks.
_TS = b"\x00TS\x00"
_T0 = dt.datetime(2026, 11, 30, 18, 53, 55)

API = "(APIServer pid=1)"
CORE = "(EngineCore_DP0 pid=406)"
WORKER_PIDS = [1231 + rank for rank in range(N_WORKERS)]
SITE = "/usr/local/lib/python3.12/dist-packages"
MODEL = "/models/Qwen3-235B-A22B-Instruct-2507"
SERVED = "qwen3-235b"


def _worker(rank: int) -> str:
    return f"(Worker_TP{rank} pid={WORKER_PIDS[rank]})"


# ---------------------------------------------------------------------------------------------
# Log generation
# ---------------------------------------------------------------------------------------------


@dataclass
class LogStats:
    """What was written: bytes, lines, simulated seconds of serving."""

    size: int = 0
    lines: int = 0
    serving_seconds: int = 0
    blocks: list[int] = field(default_factory=list)


def _stamp(when: dt.datetime) -> str:
    return when.strftime("%m-%d %H:%M:%S")


def _startup_lines(when: dt.datetime) -> list[str]:
    """Start-up of an 8-GPU TP server, shaped after the real vLLM 0.32.0 log."""
    t = _stamp(when)
    t2 = _stamp(when + dt.timedelta(seconds=14))
    t3 = _stamp(when + dt.timedelta(seconds=31))
    t4 = _stamp(when + dt.timedelta(seconds=95))
    t5 = _stamp(when + dt.timedelta(seconds=160))
    out = [
        f"{API} INFO {t} [api_utils.py:347] ",
        f"{API} INFO {t} [api_utils.py:347]        █     █     █▄   ▄█",
        f"{API} INFO {t} [api_utils.py:347]  ▄▄ ▄█ █     █     █ ▀▄▀ █  version 0.32.0",
        f"{API} INFO {t} [api_utils.py:347]   █▄█▀ █     █     █     █  model   {MODEL}",
        f"{API} INFO {t} [api_utils.py:347]    ▀▀  ▀▀▀▀▀ ▀▀▀▀▀ ▀     ▀",
        f"{API} INFO {t} [api_utils.py:347] ",
        f"{API} INFO {t} [api_utils.py:286] non-default args: {{'host': '0.0.0.0', 'port': 8000, "
        f"'model': '{MODEL}', 'served_model_name': ['{SERVED}'], 'max_model_len': 32768, "
        "'tensor_parallel_size': 8, 'gpu_memory_utilization': 0.92, 'enable_prefix_caching': True, "
        "'enable_log_requests': True}",
        f"{API} INFO {t2} [model.py:733] Resolved architecture: Qwen3MoeForCausalLM",
        f"{API} INFO {t2} [model.py:2152] Using max model len 32768",
        f"{API} INFO {t2} [scheduler.py:219] Chunked prefill is enabled with "
        "max_num_batched_tokens=8192.",
        f"{CORE} INFO {t2} [core.py:133] Initializing a V1 LLM engine (v0.32.0) with config: "
        f"model='{MODEL}', speculative_config=None, tokenizer='{MODEL}', skip_tokenizer_init=False, "
        "tokenizer_mode=auto, revision=None, trust_remote_code=False, dtype=torch.bfloat16, "
        "max_seq_len=32768, download_dir=None, load_format=auto, tensor_parallel_size=8, "
        "pipeline_parallel_size=1, data_parallel_size=1, disable_custom_all_reduce=False, "
        "quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, "
        f"seed=0, served_model_name={SERVED}, enable_prefix_caching=True, "
        "enable_chunked_prefill=True, pooler_config=None",
        f"{CORE} INFO {t2} [multiproc_executor.py:153] DP group leader: node_rank=0, "
        "node_rank_within_dp=0, master_addr=127.0.0.1, world_size=8, local_world_size=8",
    ]
    for rank in range(N_WORKERS):
        out.append(
            f"{_worker(rank)} INFO {t3} [parallel_state.py:1906] world_size=8 rank={rank} "
            f"local_rank={rank} distributed_init_method=tcp://127.0.0.1:41527 backend=nccl"
        )
    for rank in range(N_WORKERS):
        out.append(f"{_worker(rank)} INFO {t3} [pynccl.py:111] vLLM is using nccl==2.27.5")
    for rank in range(N_WORKERS):
        out.append(
            f"{_worker(rank)} INFO {t3} [parallel_state.py:2350] rank {rank} in world size 8 is "
            f"assigned as DP rank 0, PP rank 0, PCP rank 0, TP rank {rank}, ETP rank {rank}, "
            "EP rank N/A, EPLB rank N/A"
        )
    for rank in range(N_WORKERS):
        out.append(
            f"{_worker(rank)} WARNING {t3} [custom_all_reduce.py:154] Custom allreduce is "
            "disabled because your platform lacks GPU P2P capability or P2P test failed. To "
            "silence this warning, specify disable_custom_all_reduce=True explicitly."
        )
    for rank in range(N_WORKERS):
        out.append(
            f"{_worker(rank)} INFO {t3} [gpu_model_runner.py:3338] Starting to load model "
            f"{MODEL}..."
        )
    out.append(
        f"{_worker(0)} INFO {t3} [cuda.py:411] Using FLASH_ATTN attention backend out of "
        "potential backends: ['FLASH_ATTN', 'FLASHINFER', 'TRITON_ATTN', 'FLEX_ATTENTION']"
    )
    out.append("Loading safetensors checkpoint shards:   0% Completed | 0/118 [00:00<?, ?it/s]")
    for done in (12, 30, 59, 88, 118):
        out.append(
            f"Loading safetensors checkpoint shards: {done * 100 // 118:3d}% Completed | "
            f"{done}/118 [00:{done // 2:02d}<00:{(118 - done) // 2:02d},  2.11it/s]"
        )
    for rank in range(N_WORKERS):
        out.append(
            f"{_worker(rank)} INFO {t4} [default_loader.py:501] Loading weights took 58.21 seconds"
        )
        out.append(
            f"{_worker(rank)} INFO {t4} [gpu_model_runner.py:3420] Model loading took 54.8617 GiB "
            "memory and 60.123512 seconds"
        )
    for rank in range(N_WORKERS):
        out.append(
            f"{_worker(rank)} INFO {t4} [backends.py:631] Using cache directory: "
            f"/root/.cache/vllm/torch_compile_cache/5c0d0a4b19/rank_{rank}_0/backbone for vLLM's "
            "torch.compile"
        )
        out.append(
            f"{_worker(rank)} INFO {t4} [monitor.py:34] torch.compile takes 21.37 s in total"
        )
        out.append(
            f"{_worker(rank)} INFO {t4} [gpu_worker.py:359] Available KV cache memory: 14.73 GiB"
        )
    out.append(f"{CORE} INFO {t4} [kv_cache_utils.py:1229] GPU KV cache size: 1,286,912 tokens")
    out.append(
        f"{CORE} INFO {t4} [kv_cache_utils.py:1234] Maximum concurrency for 32,768 tokens per "
        "request: 39.27x"
    )
    for rank in range(N_WORKERS):
        out.append(
            f"{_worker(rank)} INFO {t5} [gpu_model_runner.py:4777] Graph capturing finished in "
            "23 secs, took 1.12 GiB"
        )
    out += [
        f"{CORE} INFO {t5} [core.py:402] init engine (profile, create kv cache, warmup model) "
        "took 129.81 s",
        f"{API} INFO {t5} [loggers.py:181] Engine 000: vllm cache_config_info with "
        "initialization after num_gpu_blocks is: 80432",
        f"{API} INFO {t5} [entry.py:136] Supported tasks: ['generate']",
        f"{API} WARNING {t5} [model.py:1682] Default sampling parameters have been overridden "
        "by the model's Hugging Face generation config recommended from the model creator. If "
        "this is not intended, please relaunch vLLM instance with `--generation-config vllm`.",
        f"{API} INFO {t5} [hf.py:648] Detected the chat template content format to be 'string'. "
        "You can set `--chat-template-content-format` to override this.",
        f"{API} INFO {t5} [entry.py:140] Starting vLLM server on http://0.0.0.0:8000",
        f"{API} INFO {t5} [launcher.py:186] Available routes are:",
    ]
    for route, methods in (
        ("/openapi.json", "GET, HEAD"),
        ("/docs", "GET, HEAD"),
        ("/health", "GET"),
        ("/metrics", "GET"),
        ("/tokenize", "POST"),
        ("/v1/models", "GET"),
        ("/version", "GET"),
        ("/v1/chat/completions", "POST"),
        ("/v1/completions", "POST"),
        ("/v1/responses", "POST"),
    ):
        out.append(f"{API} INFO {t5} [launcher.py:195] Route: {route}, Methods: {methods}")
    out += [
        "INFO:     Started server process [1]",
        "INFO:     Waiting for application startup.",
        "INFO:     Application startup complete.",
        'INFO:     127.0.0.1:40112 - "GET /health HTTP/1.1" 200 OK',
    ]
    return out


_PROMPTS = [
    "You are a helpful assistant.\\nSummarise the following incident report for an on-call "
    "engineer in three bullet points: the GPU node rebooted after a kernel upgrade, the pods ",
    "Translate into French: The quarterly results exceeded expectations in every region except ",
    "Write a Python function that parses an ISO 8601 duration string and returns the number of ",
    "<|im_start|>system\\nYou are a code reviewer.<|im_end|>\\n<|im_start|>user\\nReview this diff:",
    "Explain, for a new hire, why tensor parallelism needs fast interconnects between GPUs and ",
]


def _serving_second(rng: random.Random, variant: int) -> bytes:
    """One simulated second of serving, with _TS where the time stamp goes."""
    ts = _TS.decode("latin-1")
    lines: list[str] = []
    n_requests = rng.randint(14, 22)
    for _ in range(n_requests):
        rid = f"chatcmpl-{rng.getrandbits(64):016x}{rng.getrandbits(64):016x}"
        prompt = rng.choice(_PROMPTS)
        ntok = rng.randint(40, 6000)
        lines.append(
            f"{API} INFO {ts} [logger.py:41] Received request {rid}: prompt: '{prompt}', "
            f"params: SamplingParams(n=1, presence_penalty=0.0, frequency_penalty=0.0, "
            f"repetition_penalty=1.0, temperature=0.7, top_p=0.8, top_k=20, min_p=0.0, seed=None, "
            f"stop=[], stop_token_ids=[], ignore_eos=False, max_tokens={rng.randint(64, 4096)}, "
            f"min_tokens=0, logprobs=None, skip_special_tokens=True), prompt_token_ids: None, "
            f"prompt_embeds shape: None, lora_request: None, num_prompt_tokens: {ntok}."
        )
        lines.append(f"{API} INFO {ts} [engine.py:317] Added request {rid}.")
        port = rng.randint(32768, 60999)
        roll = rng.random()
        if roll < 0.93:
            lines.append(
                f"INFO:     10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{port} - "
                '"POST /v1/chat/completions HTTP/1.1" 200 OK'
            )
        elif roll < 0.97:
            lines.append(
                f"INFO:     10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{port} - "
                '"POST /v1/completions HTTP/1.1" 200 OK'
            )
        else:
            lines.append(
                f"INFO:     10.0.{rng.randint(0, 9)}.{rng.randint(2, 250)}:{port} - "
                '"POST /v1/chat/completions HTTP/1.1" 400 Bad Request'
            )
    for _ in range(rng.randint(1, 3)):
        lines.append(
            f'INFO:     127.0.0.1:{rng.randint(32768, 60999)} - "GET /metrics HTTP/1.1" 200 OK'
        )
    if rng.random() < 0.2:
        lines.append(
            f'INFO:     127.0.0.1:{rng.randint(32768, 60999)} - "GET /health HTTP/1.1" 200 OK'
        )
    # The eight workers' periodic INFO lines, interleaved with the API server's.
    step = variant * 1000
    for rank in range(N_WORKERS):
        step += rng.randint(1, 40)
        kind = rng.random()
        if kind < 0.6:
            text = (
                f"[gpu_model_runner.py:4777] step {step}: {rng.randint(1, 256)} reqs, "
                f"{rng.randint(256, 8192)} scheduled tokens, forward {rng.uniform(8, 90):.2f} ms, "
                f"cudagraph {'FULL' if rng.random() < 0.7 else 'PIECEWISE'}"
            )
        elif kind < 0.85:
            text = (
                f"[custom_all_reduce.py:203] all_reduce bytes={rng.randint(1, 64) << 20} "
                f"latency={rng.uniform(20, 400):.1f} us"
            )
        else:
            text = (
                f"[block_pool.py:318] free blocks {rng.randint(1000, 80432)}/80432, "
                f"cached {rng.randint(0, 40000)}"
            )
        lines.insert(rng.randrange(len(lines) + 1), f"{_worker(rank)} INFO {ts} {text}")
    if variant % 10 == 0:
        lines.append(
            f"{API} INFO {ts} [loggers.py:271] Engine 000: Avg prompt throughput: "
            f"{rng.uniform(2000, 60000):.1f} tokens/s, Avg generation throughput: "
            f"{rng.uniform(500, 9000):.1f} tokens/s, Running: {rng.randint(1, 200)} reqs, "
            f"Waiting: {rng.randint(0, 40)} reqs, GPU KV cache usage: {rng.uniform(5, 99):.1f}%, "
            f"Prefix cache hit rate: {rng.uniform(10, 80):.1f}%"
        )
    if variant % 7 == 3:
        lines.append(
            f"{API} WARNING {ts} [protocol.py:93] The following fields were present in the "
            "request but ignored: {'top_k_logprobs', 'stream_options'}"
        )
    if variant % 13 == 5:
        lines.append(
            f"{CORE} WARNING {ts} [scheduler.py:1270] Sequence group {rng.randint(1, 99999)} is "
            "preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache "
            "space. This can affect the end-to-end performance. Increase gpu_memory_utilization "
            f"or tensor_parallel_size to provide more KV cache memory. "
            f"total_num_cumulative_preemption={rng.randint(1, 900)}"
        )
    if variant % 61 == 17:
        lines.append(
            f"{API} ERROR {ts} [serving.py:274] Error with model error=ErrorInfo(message='The "
            "model `gpt-4o` does not exist. Valid aliases: qwen3-235b', type='NotFoundError', "
            "param='model', code=404)"
        )
        lines.append(
            f'INFO:     10.0.3.17:{rng.randint(32768, 60999)} - "POST /v1/chat/completions '
            'HTTP/1.1" 404 Not Found'
        )
    return ("\n".join(lines) + "\n").encode()


def _failure_lines(when: dt.datetime) -> list[str]:
    """The planted failure: OOM in one worker under load, then the cascade and the shutdown."""
    t = _stamp(when)
    t1 = _stamp(when + dt.timedelta(seconds=1))
    rank = 5
    w = f"{_worker(rank)} ERROR {t} [multiproc_executor.py:703]"
    oom = (
        "CUDA out of memory. Tried to allocate 3.82 GiB. GPU 5 has a total capacity of 79.19 GiB "
        f"of which 2.61 GiB is free. Process {WORKER_PIDS[rank]} has 76.57 GiB memory in use. Of "
        "the allocated memory 71.93 GiB is allocated by PyTorch, with 1.17 GiB allocated in "
        "private pools (e.g., CUDA Graphs), and 1.96 GiB is reserved by PyTorch but unallocated. "
        "If reserved but unallocated memory is large try setting "
        "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True to avoid fragmentation.  See "
        "documentation for Memory Management  "
        "(https://pytorch.org/docs/stable/notes/cuda.html#environment-variables)"
    )
    worker_tb = [
        "WorkerProc hit an exception.",
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/v1/executor/multiproc_executor.py", line 698, in worker_busy_loop',
        "    output = func(*args, **kwargs)",
        "             ^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SITE}/torch/utils/_contextlib.py", line 120, in decorate_context',
        "    return func(*args, **kwargs)",
        f'  File "{SITE}/vllm/v1/worker/gpu_worker.py", line 447, in execute_model',
        "    output = self.model_runner.execute_model(scheduler_output, intermediate_tensors)",
        f'  File "{SITE}/vllm/v1/worker/gpu_model_runner.py", line 2341, in execute_model',
        "    sampler_output = self.sampler(logits=logits, sampling_metadata=sampling_metadata)",
        f'  File "{SITE}/vllm/v1/sample/sampler.py", line 94, in forward',
        "    logits = self.apply_temperature(logits, sampling_metadata.temperature)",
        f'  File "{SITE}/vllm/v1/sample/sampler.py", line 151, in apply_temperature',
        "    return logits.div_(temp.unsqueeze(dim=1))",
        f"torch.OutOfMemoryError: {oom}",
    ]
    out = [f"{w} {line}" for line in worker_tb]
    c = f"{CORE} ERROR {t} [core.py:710]"
    out.append(
        f"{CORE} ERROR {t} [dump_input.py:72] Dumping input data for V1 LLM engine (v0.32.0) "
        f"with config: model='{MODEL}', tensor_parallel_size=8, max_seq_len=32768"
    )
    out.append(
        f"{CORE} ERROR {t} [dump_input.py:79] Dumping scheduler output for model execution: "
        "SchedulerOutput(scheduled_new_reqs=[], total_num_scheduled_tokens=8192, "
        "num_common_prefix_blocks=[0], finished_req_ids=[], free_encoder_mm_hashes=[])"
    )
    core_tb = [
        "EngineCore encountered a fatal error.",
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/v1/engine/core.py", line 701, in run_engine_core',
        "    engine_core.run_busy_loop()",
        f'  File "{SITE}/vllm/v1/engine/core.py", line 728, in run_busy_loop',
        "    self._process_engine_step()",
        f'  File "{SITE}/vllm/v1/engine/core.py", line 284, in step',
        "    model_output = self.execute_model_with_error_logging(",
        f'  File "{SITE}/vllm/v1/executor/multiproc_executor.py", line 267, in collective_rpc',
        "    raise RuntimeError(",
        f"RuntimeError: Worker failed with error '{oom}', please check the stack trace above for "
        "the root cause",
    ]
    out += [f"{c} {line}" for line in core_tb]
    a = f"{API} ERROR {t} [async_llm.py:480]"
    api_tb = [
        "AsyncLLM output_handler failed.",
        "Traceback (most recent call last):",
        f'  File "{SITE}/vllm/v1/engine/async_llm.py", line 439, in output_handler',
        "    outputs = await engine_core.get_output_async()",
        "              ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^^",
        f'  File "{SITE}/vllm/v1/engine/core_client.py", line 846, in get_output_async',
        "    raise self._format_exception(outputs) from None",
        "vllm.v1.engine.exceptions.EngineDeadError: EngineCore encountered an issue. See stack "
        "trace (above) for the root cause.",
    ]
    out += [f"{a} {line}" for line in api_tb]
    for port in (50512, 50528, 50530, 50544):
        out.append(
            f"{API} ERROR {t} [serving_chat.py:1145] Error in chat completion stream generator."
        )
        out.append(
            f"{API} ERROR {t} [serving_chat.py:1145] vllm.v1.engine.exceptions.EngineDeadError: "
            "EngineCore encountered an issue. See stack trace (above) for the root cause."
        )
        out.append(
            f'INFO:     127.0.0.1:{port} - "POST /v1/chat/completions HTTP/1.1" 500 Internal '
            "Server Error"
        )
    out += [
        f"{API} INFO {t1} [launcher.py:99] Shutting down FastAPI HTTP server.",
        f"[rank0]:[W{when:%m%d %H:%M:%S}.120934 ProcessGroupNCCL.cpp:1479] Warning: WARNING: "
        "destroy_process_group() was not called before program exit, which can leak resources.",
        "INFO:     Shutting down",
        "INFO:     Waiting for application shutdown.",
        "INFO:     Application shutdown complete.",
        "INFO:     Finished server process [1]",
    ]
    return out


def generate_dense_log(path: Path, size_bytes: int) -> LogStats:
    """The example log repeated until the file holds at least `size_bytes` (whole copies)."""
    example = STARTUP_LOG.read_bytes()
    copies = -(-size_bytes // len(example))
    chunk_copies = max(1, WRITE_CHUNK // len(example))
    stats = LogStats()
    with path.open("wb", buffering=0) as out:
        while copies:
            now = min(copies, chunk_copies)
            out.write(example * now)
            copies -= now
            stats.size += now * len(example)
            stats.lines += now * example.count(b"\n")
    return stats


def generate_log(
    path: Path, size_bytes: int, seed: int = 20261130, variants: int = 240
) -> LogStats:
    """Write start-up, serving until `size_bytes`, then the planted failure. Fast: pre-built blocks.

    Each simulated second is one of `variants` pre-rendered blocks (random ids, ports, numbers);
    only its time stamp is filled in per second, with one bytes.join over pre-split parts.
    """
    rng = random.Random(seed)
    stats = LogStats()
    templates: list[tuple[list[bytes], int]] = []
    for variant in range(variants):
        block = _serving_second(rng, variant)
        templates.append((block.split(_TS), block.count(b"\n")))
    when = _T0
    with path.open("wb", buffering=0) as out:
        head = ("\n".join(_startup_lines(when)) + "\n").encode()
        out.write(head)
        stats.size += len(head)
        stats.lines += head.count(b"\n")
        when += dt.timedelta(seconds=170)
        pending: list[bytes] = []
        pending_size = 0
        order = list(range(variants))
        # Leave room for the failure tail (~10 KB) so the total lands just above size_bytes.
        while stats.size + pending_size < size_bytes:
            rng.shuffle(order)
            for index in order:
                parts, nlines = templates[index]
                chunk = _stamp(when).encode().join(parts)
                pending.append(chunk)
                pending_size += len(chunk)
                stats.lines += nlines
                stats.serving_seconds += 1
                when += dt.timedelta(seconds=1)
                if pending_size >= WRITE_CHUNK or stats.size + pending_size >= size_bytes:
                    out.write(b"".join(pending))
                    stats.size += pending_size
                    pending, pending_size = [], 0
                    if stats.size >= size_bytes:
                        break
        tail = ("\n".join(_failure_lines(when)) + "\n").encode()
        out.write(tail)
        stats.size += len(tail)
        stats.lines += tail.count(b"\n")
    return stats


# ---------------------------------------------------------------------------------------------
# Measurement
# ---------------------------------------------------------------------------------------------


@dataclass
class Run:
    """One execution of a command: wall seconds, peak RSS (KiB), exit code, captured stdout, and
    CPU seconds (user + system)."""

    seconds: float
    maxrss_kib: int
    returncode: int
    stdout: bytes
    cpu_seconds: float = 0.0


def run_measured(cmd: list[str], workdir: Path, env: dict[str, str] | None = None) -> Run:
    """Fork/exec `cmd`, wait for it with os.wait4 and return its own wall time and ru_maxrss."""
    out_path = workdir / ".bench-stdout"
    err_path = workdir / ".bench-stderr"
    # Output goes to files, not pipes: nothing can block while we sit in os.wait4.
    with out_path.open("wb") as sink, err_path.open("wb") as errors:
        start = time.perf_counter()
        proc = subprocess.Popen(cmd, stdout=sink, stderr=errors, env=env)
        # os.wait4 reaps this child and returns its own rusage (not all children's).
        _, status, usage = os.wait4(proc.pid, 0)
        seconds = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    stdout = out_path.read_bytes()
    stderr = err_path.read_bytes()
    out_path.unlink()
    err_path.unlink()
    if stderr.strip():
        sys.stderr.write(stderr.decode(errors="replace"))
    # Linux reports ru_maxrss in KiB.
    cpu = usage.ru_utime + usage.ru_stime
    return Run(seconds, int(usage.ru_maxrss), proc.returncode, stdout, cpu)


def warm_cache(path: Path) -> float:
    """Read the whole file once so both tools find it in the page cache; returns seconds."""
    start = time.perf_counter()
    with path.open("rb", buffering=0) as stream:
        while stream.read(WRITE_CHUNK):
            pass
    return time.perf_counter() - start


def _find_triage(explicit: str | None) -> str:
    if explicit:
        return explicit
    beside = Path(sys.executable).parent / "vllm-triage"
    if beside.exists():
        return str(beside)
    found = shutil.which("vllm-triage")
    if not found:
        raise SystemExit("bench: cannot find the vllm-triage command; pass --triage PATH")
    return found


def _find_rg(explicit: str) -> str:
    found = shutil.which(explicit)
    if not found:
        _die(
            f"ripgrep ({explicit!r}) not found: install Debian's ripgrep package "
            "(`make system-deps`, or apt-get install ripgrep) or pass --rg PATH"
        )
    return str(found)


def _child_env(workdir: Path, as_is: bool) -> dict[str, str] | None:
    """The tool's environment: bytecode compiled once into the work folder, as an installed tool
    has it (see the module docstring), unless `as_is`."""
    if as_is:
        return None
    env = dict(os.environ)
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def _die(message: str, code: int = 2) -> NoReturn:
    print(f"bench: FAIL: {message}", file=sys.stderr)
    sys.exit(code)


def _summary(runs: list[Run]) -> tuple[float, float, int]:
    """(median seconds, best seconds, peak RSS KiB over all runs)."""
    times = [r.seconds for r in runs]
    return statistics.median(times), min(times), max(r.maxrss_kib for r in runs)


def _cpu(runs: list[Run]) -> float:
    """Median CPU seconds (user + system)."""
    return statistics.median(r.cpu_seconds for r in runs)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Benchmark vllm-triage diagnose against rg -c -f and grep -c -E -f on a "
        "large vLLM log.",
    )
    parser.add_argument(
        "--size-mb",
        type=int,
        help=f"log size in MiB (default 1100; {DENSE_DEFAULT_MIB} with --dense)",
    )
    parser.add_argument(
        "--dense", action="store_true", help="the example log repeated: a match every few lines"
    )
    parser.add_argument("--workdir", type=Path, help="where to write the log (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the generated log and patterns")
    parser.add_argument("--runs", type=int, default=3, help="timed runs per tool (default 3)")
    parser.add_argument("--no-fail", action="store_true", help="report targets, exit 0 on misses")
    parser.add_argument("--triage", help="vllm-triage executable (default: beside this Python)")
    parser.add_argument("--grep", default="grep", help="grep executable (default: grep)")
    parser.add_argument("--rg", default="rg", help="ripgrep executable (default: rg)")
    parser.add_argument(
        "--as-is", action="store_true", help="keep the environment's bytecode settings"
    )
    parser.add_argument("--grep-locale", default="C", help="LC_ALL for grep (default: C)")
    parser.add_argument("--log", type=Path, help="benchmark this existing log instead (kept)")
    parser.add_argument("--expect", help="expected primary cause (default: the planted one)")
    args = parser.parse_args(argv)
    if args.size_mb is None:
        args.size_mb = DENSE_DEFAULT_MIB if args.dense else 1100
    if args.expect is None:
        args.expect = DENSE_EXPECTED_CAUSE if args.dense else EXPECTED_CAUSE
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.size_mb < 1:
        parser.error("--size-mb must be at least 1")
    return args


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    triage = _find_triage(args.triage)
    args.rg = _find_rg(args.rg)
    made_dir = args.workdir is None
    workdir = Path(tempfile.mkdtemp(prefix="vllm-triage-bench-")) if made_dir else args.workdir
    workdir.mkdir(parents=True, exist_ok=True)
    log = args.log or workdir / ("vllm-serve-dense.log" if args.dense else "vllm-serve-large.log")
    patterns = workdir / "patterns.txt"
    try:
        return _bench(args, triage, workdir, log, patterns)
    finally:
        if not args.keep:
            if args.log is None:
                log.unlink(missing_ok=True)
            patterns.unlink(missing_ok=True)
            if made_dir:
                shutil.rmtree(workdir, ignore_errors=True)
        else:
            print(f"kept: {log} {patterns}")


def _bench(args: argparse.Namespace, triage: str, workdir: Path, log: Path, patterns: Path) -> int:
    if args.log is None:
        start = time.perf_counter()
        make = generate_dense_log if args.dense else generate_log
        stats = make(log, args.size_mb * MIB)
        gen_s = time.perf_counter() - start
        print(
            f"generated {log} : {stats.size / MIB:.1f} MiB, {stats.lines:,} lines, "
            f"{stats.serving_seconds:,} s of serving, in {gen_s:.1f} s "
            f"({stats.size / MIB / gen_s:.0f} MiB/s)"
        )
    size_mib = log.stat().st_size / MIB

    exported = subprocess.run([triage, "knowledge", "patterns"], capture_output=True, check=False)
    if exported.returncode != 0 or not exported.stdout.strip():
        _die(f"`{triage} knowledge patterns` failed: {exported.stderr.decode(errors='replace')}")
    patterns.write_bytes(exported.stdout)
    n_patterns = len(exported.stdout.decode().splitlines())
    print(f"patterns: {n_patterns} from `vllm-triage knowledge patterns` -> {patterns}")

    warm_s = warm_cache(log)
    print(f"warm-up read: {warm_s:.2f} s ({size_mib / warm_s:.0f} MiB/s)")

    rg_cmd = [args.rg, "-c", "-f", str(patterns), str(log)]
    grep_cmd = [args.grep, "-c", "-E", "-f", str(patterns), str(log)]
    grep_env = dict(os.environ, LC_ALL=args.grep_locale)
    # The diagnosis (and its history, one per run) goes into a case folder in the work folder.
    case = ["--format", "json", "--case", str(workdir / "case")]
    diag_cmd = [triage, "diagnose", str(log), *case]
    small_cmd = [triage, "diagnose", str(STARTUP_LOG), *case]
    env = _child_env(workdir, args.as_is)
    warm = run_measured(small_cmd, workdir, env)  # fills the knowledge and bytecode caches
    if warm.returncode != 0:
        _die(f"vllm-triage diagnose {STARTUP_LOG} exited {warm.returncode}")

    runs: dict[str, list[Run]] = {"rg": [], "grep": [], "diagnose": [], "start-up": []}
    for i in range(args.runs):
        rg_run = run_measured(rg_cmd, workdir)
        if rg_run.returncode not in (0, 1):
            _die(f"rg exited {rg_run.returncode}")
        grep_run = run_measured(grep_cmd, workdir, grep_env)
        if grep_run.returncode not in (0, 1):
            _die(f"grep exited {grep_run.returncode}")
        diag_run = run_measured(diag_cmd, workdir, env)
        if diag_run.returncode != 0:
            _die(f"vllm-triage diagnose exited {diag_run.returncode}")
        small_run = run_measured(small_cmd, workdir, env)
        if small_run.returncode != 0:
            _die(f"vllm-triage diagnose {STARTUP_LOG} exited {small_run.returncode}")
        for name, run in (
            ("rg", rg_run),
            ("grep", grep_run),
            ("diagnose", diag_run),
            ("start-up", small_run),
        ):
            runs[name].append(run)
        print(
            f"run {i + 1}/{args.runs}: rg {rg_run.seconds:.2f} s | grep {grep_run.seconds:.2f} s "
            f"| diagnose {diag_run.seconds:.2f} s {diag_run.maxrss_kib / 1024:.1f} MB "
            f"(cpu {diag_run.cpu_seconds:.2f} s) | 34-line log {small_run.seconds:.2f} s"
        )

    rg_count = runs["rg"][-1].stdout.decode().strip()
    grep_count = runs["grep"][-1].stdout.decode().strip()
    result = json.loads(runs["diagnose"][-1].stdout)
    primary = result["primary"]
    evidence = primary["evidence"][0] if primary["evidence"] else {}
    print(
        f"matching lines: rg {rg_count}, grep {grep_count}; diagnose: "
        f"lines_read={result['lines_read']:,}, phase_reached={result['phase_reached']}, "
        f"primary={primary['cause']} ({primary['rule']}, phase {primary['phase']}, "
        f"line {evidence.get('line')})"
    )
    if primary["cause"] != args.expect:
        _die(f"primary cause is {primary['cause']!r}, expected {args.expect!r}")
    planted = args.log is None and not args.dense
    if planted and "CUDA out of memory" not in json.dumps(primary["evidence"]):
        _die("the primary evidence does not show the planted OOM line")

    rg_med, rg_best, _ = _summary(runs["rg"])
    grep_med, grep_best, _ = _summary(runs["grep"])
    diag_med, diag_best, diag_rss = _summary(runs["diagnose"])
    small_med, small_best, _ = _summary(runs["start-up"])
    print()
    print(
        f"log: {size_mib:.1f} MiB; {args.runs} round(s), median (best) wall seconds, median CPU "
        "seconds, peak RSS"
    )
    header = f"{'tool':<36} {'seconds':>14} {'MB/s':>7} {'CPU s':>7} {'peak RSS MB':>12}"
    print(header)
    print("-" * len(header))
    rows = (
        ("rg -c -f", runs["rg"], size_mib),
        (f"grep -c -E -f (LC_ALL={args.grep_locale})", runs["grep"], size_mib),
        ("vllm-triage diagnose --format json", runs["diagnose"], size_mib),
        ("diagnose, 34-line log (start-up)", runs["start-up"], None),
    )
    for name, measured, mib in rows:
        med, best, rss = _summary(measured)
        speed = f"{mib / med:.0f}" if mib else "-"
        print(
            f"{name:<36} {f'{med:.2f} ({best:.2f})':>14} {speed:>7} {_cpu(measured):>7.2f} "
            f"{rss / 1024:>12.1f}"
        )
    rg_ratio = diag_med / rg_med
    ratio = diag_med / grep_med
    rg_ok = rg_ratio <= RG_RATIO_TARGET
    ratio_ok = ratio <= RATIO_TARGET
    rss_ok = diag_rss / 1024 < RSS_TARGET_MB
    print()
    print(
        f"diagnose {diag_med:.2f} s, rg {rg_med:.2f} s: ratio diagnose/rg (median) {rg_ratio:.2f} "
        f"(best/best: {diag_best / rg_best:.2f})"
    )
    print(f"ratio diagnose/grep (median): {ratio:.2f}  (best/best: {diag_best / grep_best:.2f})")
    print(f"start-up (34-line log): {small_med:.2f} s (best {small_best:.2f} s)")
    print(f"target ratio vs rg <= {RG_RATIO_TARGET:.1f}:        {'PASS' if rg_ok else 'FAIL'}")
    print(f"target ratio vs grep <= {RATIO_TARGET:.1f}:      {'PASS' if ratio_ok else 'FAIL'}")
    print(
        f"target diagnose RSS < {RSS_TARGET_MB:.0f} MB:   {'PASS' if rss_ok else 'FAIL'} "
        f"({diag_rss / 1024:.1f} MB)"
    )
    if not (rg_ok and ratio_ok and rss_ok) and not args.no_fail:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
