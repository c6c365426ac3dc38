"""Benchmark: how fast the small commands start, against `python -c pass` on the same machine.

`compat` and `preflight` are meant to run as an init container on every pod start, so what a
small command costs is mostly start-up: the interpreter, the imports, the knowledge base. Each
command below runs as a fresh process, in rounds (one run of each per round, so a drift of the
machine falls on all of them alike), in a temporary working folder (diagnose may write a case
folder there) with a temporary cache folder (XDG_CACHE_HOME) for the knowledge cache:

    python -c pass                                                  the reference
    python -c 'import click, pydantic, rich'                        the libraries' floor
    vllm-triage --help                                              target <= 0.20 s
    vllm-triage compat --driver 575.57.08 --cuda 13.0               target <= 0.25 s
    vllm-triage diagnose examples/kimi-k3-r575/vllm-serve.log       target <= 0.25 s
    vllm-triage preflight --image-config ... (host facts given)     target <= 0.30 s

It prints the wall-time median (and the best run) of each, the ratio of each median to the
reference's, and each target as PASS or FAIL (exit status 1 if one fails; --no-fail only
reports). It also prints, once per command, the time with an empty knowledge cache ("cold": the
first run after an install or a data change validates the knowledge files and writes the cache).

Bytecode: the commands run as an installed tool does, from compiled bytecode. A checkout run
with PYTHONDONTWRITEBYTECODE=1 recompiles every module of the tool on each start, which no pip
install does, so the children get PYTHONPYCACHEPREFIX=<a temp dir> (filled by the warm-up run)
and PYTHONDONTWRITEBYTECODE unset; --as-is keeps the environment unchanged instead.

Run: .venv/bin/python bench/bench_startup.py [--runs 21] [--triage PATH] [--no-fail] [--as-is]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_LOG = ROOT / "examples" / "kimi-k3-r575" / "vllm-serve.log"
K3_IMAGE_CONFIG = ROOT / "tests" / "data" / "image-configs" / "vllm-openai-cu130.inspect.json"


# What a command that prints a verdict needs before any of the tool's code runs: the CLI framework
# (click), the models (pydantic), the terminal output (rich).
_LIBRARIES = (
    "import os; os.environ.setdefault('PYDANTIC_DISABLE_PLUGINS', '__all__'); "
    "import click, rich.console, rich.table, rich.panel; "
    "from pydantic import BaseModel, Field"
)


@dataclass(frozen=True)
class Command:
    label: str
    argv: list[str]
    target: float | None  # seconds, wall median
    ok_codes: tuple[int, ...] = (0,)


def _commands(triage: str) -> list[Command]:
    return [
        Command("python -c pass", [sys.executable, "-c", "pass"], None),
        # A second reference: what the libraries every command stands on cost to import, before
        # the tool does anything (the part of a command's time the tool cannot cut by itself).
        Command(
            "python -c 'import click, pydantic, rich'",
            [sys.executable, "-c", _LIBRARIES],
            None,
        ),
        Command("vllm-triage --help", [triage, "--help"], 0.20),
        # compat exits 1 here on purpose: CUDA 13.0 on r575 is a no-go.
        Command(
            "vllm-triage compat --driver 575.57.08 --cuda 13.0",
            [triage, "compat", "--driver", "575.57.08", "--cuda", "13.0"],
            0.25,
            (0, 1),
        ),
        Command(
            "vllm-triage diagnose examples/kimi-k3-r575/vllm-serve.log",
            [triage, "diagnose", str(EXAMPLE_LOG)],
            0.25,
        ),
        # What an init container runs on every pod start, with the host facts given so that no
        # nvidia-smi is needed: the image config, every check but capacity and the model's files.
        Command(
            "vllm-triage preflight --image-config (K3, facts given)",
            [
                triage,
                "preflight",
                "--image-config",
                str(K3_IMAGE_CONFIG),
                "--driver",
                "580.95.05",
                "--gpu",
                "NVIDIA B200",
                "--gpu-count",
                "8",
                "--shm-size",
                "16g",
                "--recipe",
                "kimi-k3",
            ],
            0.30,
        ),
    ]


def _run(command: Command, cwd: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        command.argv, cwd=cwd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE
    )
    elapsed = time.perf_counter() - started
    if done.returncode not in command.ok_codes:
        sys.exit(
            f"bench: FAIL: {command.label} exited {done.returncode}: "
            f"{done.stderr.decode(errors='replace').strip()[-300:]}"
        )
    return elapsed


def _environment(scratch: Path, as_is: bool, cache: str) -> dict[str, str]:
    env = dict(os.environ)
    env["XDG_CACHE_HOME"] = str(scratch / cache)
    env.pop("VLLM_TRIAGE_CASE", None)
    if not as_is:
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    return env


def _triage_path(given: str | None) -> str:
    if given:
        return given
    beside = Path(sys.executable).parent / "vllm-triage"
    if not beside.exists():
        sys.exit(f"bench: FAIL: no vllm-triage beside {sys.executable}; give --triage PATH")
    return str(beside)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=21, help="timed rounds (default 21)")
    parser.add_argument("--triage", help="vllm-triage executable (default: beside this Python)")
    parser.add_argument("--no-fail", action="store_true", help="report targets, exit 0 on misses")
    parser.add_argument(
        "--as-is", action="store_true", help="keep the environment's bytecode settings"
    )
    args = parser.parse_args(argv)
    commands = _commands(_triage_path(args.triage))
    with tempfile.TemporaryDirectory(prefix="bench-startup-") as temp:
        scratch = Path(temp)
        work = scratch / "work"
        work.mkdir()
        env = _environment(scratch, args.as_is, "cache")
        for command in commands:  # fills the bytecode folder and the knowledge cache
            _run(command, work, env)
        cold = {
            c.label: _run(c, work, _environment(scratch, args.as_is, f"cold-{n}"))
            for n, c in enumerate(commands)
        }
        times: dict[str, list[float]] = {c.label: [] for c in commands}
        for _ in range(args.runs):
            for command in commands:
                times[command.label].append(_run(command, work, env))
    reference = statistics.median(times[commands[0].label])
    width = max(len(c.label) for c in commands)
    bytecode = "as the environment says" if args.as_is else "compiled once, then reused"
    print(f"{args.runs} rounds on {os.cpu_count()} CPUs; bytecode {bytecode}; wall seconds")
    print(f"{'command':<{width}}  median   best  ratio  cold   target")
    failed = False
    for command in commands:
        median = statistics.median(times[command.label])
        verdict = ""
        if command.target is not None:
            met = median <= command.target
            failed |= not met
            verdict = f"<= {command.target:.2f}: {'PASS' if met else 'FAIL'}"
        print(
            f"{command.label:<{width}}  {median:6.3f} {min(times[command.label]):6.3f}  "
            f"{median / reference:5.1f}x {cold[command.label]:5.2f}  {verdict}"
        )
    return 1 if failed and not args.no_fail else 0


if __name__ == "__main__":
    sys.exit(main())
