"""Benchmark `vllm-triage fleet scan` on a recorded-shape 10,000-node NodeList against `jq length`.

What is measured
----------------
1. A NodeList of ``--nodes`` nodes (default 10,000) is written as ``kubectl get nodes -o json``
   prints it: every node a full Node object (metadata with GPU Feature Discovery labels built on
   the real label sets in tests/data/fleet/, spec, status with capacity, conditions, images and
   nodeInfo), drivers from r570, r575, r580 and r590, current and deprecated label names,
   hyphenated products with -SHARED / -MIG suffixes, 5% stale timestamps, some nodes with GPUs but
   no GFD labels and some without GPUs (tests/fleetnodes.py, which also says what each node must
   be classified as). About 120 MB.
2. After one warm-up read (the file in the page cache), each command runs ``--runs`` times:

   * ``jq length NODES``: jq parses the whole document and prints one number; the reference for
     "merely parse the JSON";
   * ``vllm-triage fleet scan --nodes NODES --image-config K3 --format json``: the whole command,
     Python start-up, parsing, classification of every node, the waves, the JSON written to stdout
     and fleet-scan.json and .md into a case folder;
   * ``fleet_scan()`` in-process: the library call alone (what the test holds under 3 s).

3. The command's JSON must classify every node as expected (status and minimum driver); anything
   else exits with status 2.

Targets: the in-process scan under 3.0 s (the issue's figure); the ratio scan / jq is printed.
Exit status: 0 targets met, 1 a target missed (unless --no-fail), 2 a command failed or a node
was classified wrong.

Usage::

    .venv/bin/python bench/bench_fleet.py
    .venv/bin/python bench/bench_fleet.py --nodes 2000 --runs 1 --keep --workdir /tmp/bf
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fleetnodes import NOW, make_fleet  # noqa: E402

K3_CONFIG = ROOT / "tests" / "data" / "image-configs" / "vllm-openai-cu130.inspect.json"
SCAN_TARGET_S = 3.0


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _timed(argv: list[str], output: Path | None = None) -> tuple[float, float]:
    """Wall and CPU seconds of one run (the children run one at a time, so the CPU delta is
    this child's own)."""
    cpu, started = _children_cpu(), time.perf_counter()
    with open(output or os.devnull, "wb") as sink:
        done = subprocess.run(argv, stdout=sink, stderr=subprocess.PIPE, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        print(f"FAILED ({done.returncode}): {' '.join(argv)}\n{done.stderr.decode()[-2000:]}")
        sys.exit(2)
    return elapsed, _children_cpu() - cpu


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--nodes", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--no-fail", action="store_true")
    options = parser.parse_args()
    jq = shutil.which("jq")
    if jq is None:
        print("jq is not installed (Debian's jq: make system-deps)")
        return 2
    tool = Path(sys.executable).parent / "vllm-triage"
    workdir = options.workdir or Path(tempfile.mkdtemp(prefix="bench-fleet-"))
    workdir.mkdir(parents=True, exist_ok=True)
    try:
        import orjson

        started = time.perf_counter()
        fleet = make_fleet(options.nodes)
        nodes = workdir / "nodes.json"
        nodes.write_bytes(orjson.dumps(fleet.document, option=orjson.OPT_INDENT_2))
        size = nodes.stat().st_size
        print(
            f"NodeList: {options.nodes:,} nodes, {size / 2**20:,.1f} MiB, written in "
            f"{time.perf_counter() - started:.1f} s ({nodes})"
        )
        nodes.read_bytes()  # warm the page cache
        env_case = workdir / "case"
        jq_times = [_timed([jq, "length", str(nodes)]) for _ in range(options.runs)]
        cli = [str(tool), "fleet", "scan", "--nodes", str(nodes), "--image-config", str(K3_CONFIG)]
        cli += ["--case", str(env_case), "--format", "json"]
        output = workdir / "scan.json"
        cli_times = [_timed(cli, output) for _ in range(options.runs)]
        document = json.loads(output.read_bytes())
        # The command runs at the real time: the label ages differ, the statuses do not.
        got = {node["name"]: (node["status"], node["min_driver"]) for node in document["nodes"]}
        wrong = [name for name, want in fleet.expected.items() if got.get(name) != want]
        if wrong or len(got) != len(fleet.expected):
            print(f"WRONG: {len(wrong)} node(s) misclassified, e.g. {wrong[:5]}")
            return 2

        from vllm_triage.fleet import FleetScanOptions, fleet_scan
        from vllm_triage.knowledge import load_knowledge

        kb = load_knowledge()
        lib_times = []
        for _ in range(options.runs):
            gc.collect()
            cpu, started = time.process_time(), time.perf_counter()
            fleet_scan(FleetScanOptions(image_config=K3_CONFIG, nodes=nodes, now=NOW), kb=kb)
            lib_times.append((time.perf_counter() - started, time.process_time() - cpu))
    finally:
        if not options.keep and options.workdir is None:
            shutil.rmtree(workdir, ignore_errors=True)

    def row(name: str, times: list[tuple[float, float]]) -> str:
        wall = statistics.median(t[0] for t in times)
        cpu = statistics.median(t[1] for t in times)
        best = min(t[0] for t in times)
        return (
            f"{name:<34} {wall:7.2f} s (best {best:5.2f})  cpu {cpu:6.2f} s  "
            f"{size / 2**20 / wall:7.1f} MiB/s"
        )

    print(f"\n{'command':<34} {'wall, median':>22}  {'cpu, median':>12}")
    print(row("jq length (parse only)", jq_times))
    print(row("vllm-triage fleet scan (command)", cli_times))
    print(row("fleet_scan() (library)", lib_times))
    jq_wall = statistics.median(t[0] for t in jq_times)
    jq_cpu = statistics.median(t[1] for t in jq_times)
    cli_wall = statistics.median(t[0] for t in cli_times)
    cli_cpu = statistics.median(t[1] for t in cli_times)
    library = statistics.median(t[0] for t in lib_times)
    library_cpu = statistics.median(t[1] for t in lib_times)
    print(
        f"\nratio fleet scan command / jq length: wall {cli_wall / jq_wall:.2f}, cpu {cli_cpu / jq_cpu:.2f}"
    )
    print(
        f"ratio fleet_scan() / jq length:       wall {library / jq_wall:.2f}, cpu {library_cpu / jq_cpu:.2f}"
    )
    print(f"every one of {len(fleet.expected):,} GPU nodes classified right")
    print(f"load average over the run: {os.getloadavg()[0]:.2f} ({os.cpu_count()} CPUs)")
    met = library < SCAN_TARGET_S
    print(
        f"target fleet_scan() < {SCAN_TARGET_S:.1f} s: {'PASS' if met else 'FAIL'} ({library:.2f} s)"
    )
    return 0 if met or options.no_fail else 1


if __name__ == "__main__":
    sys.exit(main())
