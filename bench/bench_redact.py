"""Benchmark: redaction throughput of the current redactor against the one at commit 3294618.

Both run in the same process on the same text: a realistic vLLM log mix (the generator of
bench_diagnose.py: an 8-way tensor-parallel start-up, serving with request, access and throughput
lines from nine processes, a failure at the end), with a line carrying a secret every
`--secret-every` lines (an Authorization header, HF_TOKEN=, --api-key, a URL password, a PEM key).

The reference is the redactor of commit 3294618, loaded from `git show` into a temporary module,
with the redaction rules of that commit (the rest of the knowledge base is this tree's). Each is
measured two ways, best of `--runs`:

1. line by line: text() once per line, as the bundle writer of 3294618 called it;
2. as collect uses it: the reference line by line (its writer), the current one through stream()
   in 1 MiB blocks (its writer).

The measurements alternate within each round, so that the load of other processes on a shared
machine falls on all of them alike.

Printed: MB/s and lines/s for each, the ratios current / reference, and the target: the current
throughput as collect uses it is at least two thirds of the reference's (it must not fall by more
than a third). Also checked: neither leaves a planted secret.

Run: .venv/bin/python bench/bench_redact.py [--size-mb 64] [--runs 3] [--secret-every 2000]
"""

from __future__ import annotations

import argparse
import io
import random
import shutil
import subprocess
import sys
import tempfile
import time
import types
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "bench"))

from bench_diagnose import generate_log  # noqa: E402

from vllm_triage.knowledge import DATA_DIR, KnowledgeBase, load_knowledge  # noqa: E402
from vllm_triage.redact import Redactor  # noqa: E402

REFERENCE = "3294618"
MIB = 1 << 20
TARGET = 2 / 3
_API = "(APIServer pid=1) DEBUG 11-30 18:54:23 [api_server.py:912]"


def _secret_lines(rng: random.Random) -> list[str]:
    """Lines that carry a secret, each with fresh random values."""

    def token(alphabet: str, size: int) -> str:
        return "".join(rng.choice(alphabet) for _ in range(size))

    alnum = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789"
    b64 = alnum + "+/"
    return [
        f"{_API} request headers: {{'host': 'h:8000', 'authorization': 'Bearer "
        f"sk-{token(alnum, 40)}', 'user-agent': 'curl/8.5.0'}}\n",
        f"{_API} environment HF_TOKEN=hf_{token(alnum, 34)} NCCL_DEBUG=INFO\n",
        f"{_API} argv: vllm serve /models/m --api-key {token(alnum, 24)} --port 8000\n",
        f"{_API} Using proxy https://svc:{token(alnum, 16)}@proxy.corp.example:3128\n",
        f"{_API} -----BEGIN PRIVATE KEY-----\n",
        *(f"{_API} {token(b64, 64)}\n" for _ in range(3)),
        f"{_API} -----END PRIVATE KEY-----\n",
    ]


def build_mix(path: Path, size_mb: int, secret_every: int) -> tuple[list[str], list[str]]:
    """The log mix as lines, and the secrets planted in it (their values)."""
    generate_log(path, size_mb * MIB)
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    rng = random.Random(20261201)
    mixed: list[str] = []
    planted: list[str] = []
    for index, line in enumerate(lines):
        mixed.append(line)
        if index % secret_every == secret_every - 1:
            extra = _secret_lines(rng)
            mixed += extra
            planted += [extra[1].split("hf_", 1)[1].split()[0], extra[3].split(":")[-2]]
    return mixed, planted


def reference_module() -> types.ModuleType:
    """The redactor of the reference commit, as a module of its own."""
    source = subprocess.run(
        ["git", "show", f"{REFERENCE}:src/vllm_triage/collect/redact.py"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    module = types.ModuleType(f"redact_{REFERENCE}")
    sys.modules[module.__name__] = module  # dataclasses look their module up
    exec(compile(source, f"redact@{REFERENCE}", "exec"), module.__dict__)
    return module


def reference_knowledge(scratch: Path) -> KnowledgeBase:
    """This tree's knowledge base with the redaction rules of the reference commit."""
    data = scratch / "knowledge"
    shutil.copytree(DATA_DIR, data)
    rules = subprocess.run(
        ["git", "show", f"{REFERENCE}:src/vllm_triage/knowledge/data/redaction.yaml"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    (data / "redaction.yaml").write_bytes(rules)
    return load_knowledge(data)


def _line_by_line(redactor: Any, lines: list[str]) -> str:
    text = redactor.text
    return "".join([text(line) for line in lines])


def _streamed(redactor: Redactor, data: bytes) -> str:
    sink = io.BytesIO()
    blocks = (data[i : i + MIB] for i in range(0, len(data), MIB))
    redactor.stream(blocks, sink)
    return sink.getvalue().decode("utf-8", errors="surrogateescape")


Measure = tuple[Callable[[], Any], Callable[[Any], str]]


def best(runs: int, measures: dict[str, Measure]) -> dict[str, tuple[float, str]]:
    """The best wall time of each measurement over `runs` rounds (each round runs them all in
    turn, with a fresh redactor each, so load from other processes hits all alike), and its
    last output."""
    times: dict[str, list[float]] = {name: [] for name in measures}
    outputs = dict.fromkeys(measures, "")
    for _ in range(runs):
        for name, (make, work) in measures.items():
            redactor = make()
            started = time.perf_counter()
            outputs[name] = work(redactor)
            times[name].append(time.perf_counter() - started)
    return {name: (min(times[name]), outputs[name]) for name in measures}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size-mb", type=int, default=64, help="size of the log mix (MiB)")
    parser.add_argument("--runs", type=int, default=3, help="runs per measurement (best kept)")
    parser.add_argument("--secret-every", type=int, default=2000, help="lines between secrets")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        lines, planted = build_mix(base / "mix.log", args.size_mb, args.secret_every)
        data = "".join(lines).encode()
        size_mb, count = len(data) / MIB, len(lines)
        old = reference_module()
        old_kb, kb = reference_knowledge(base), load_knowledge()

        def new_redactor() -> Redactor:
            return Redactor(kb)

        def old_redactor() -> Any:
            return old.Redactor(old_kb)

        measured = best(
            args.runs,
            {
                "reference, line by line": (old_redactor, lambda r: _line_by_line(r, lines)),
                "current, line by line": (new_redactor, lambda r: _line_by_line(r, lines)),
                "current, as collect (stream)": (new_redactor, lambda r: _streamed(r, data)),
            },
        )
    print(f"log mix {size_mb:.1f} MiB, {count} lines, {len(planted)} planted secrets checked")
    for name, (seconds, output) in measured.items():
        leaked = sum(secret in output for secret in planted)
        print(
            f"{name:30} {size_mb / seconds:7.1f} MB/s {count / seconds:10.0f} lines/s"
            f"   secrets left: {leaked}"
        )
    reference = measured["reference, line by line"][0]
    per_line = reference / measured["current, line by line"][0]
    as_used = reference / measured["current, as collect (stream)"][0]
    verdict = "met" if as_used >= TARGET else "MISSED"
    print(f"ratio current / reference {REFERENCE}: line by line {per_line:.2f}, "
          f"as collect uses it {as_used:.2f}   target >= {TARGET:.2f}: {verdict}")  # fmt: skip


if __name__ == "__main__":
    main()
