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

4. Then, for each of ``--sizes`` (default 10,000, 100,000 and 1,000,000 nodes), a compact
   NodeList (each node's name, the labels the scan reads in its label style, and its GPU
   capacity: about 470 bytes a node, 450 MiB for a million, under the 512 MiB cap; the full
   objects would be 12 GB) is written node by node, and ``jq length`` and the command run on
   it, each through a small launcher that reports the child's own peak RSS (wait4). The
   command's JSON is read back node by node and every node's classification checked.
   The same list is then answered by a local Kubernetes API server (tests/kubereplay.py, in
   this process: the file sent as one NodeList answer in HTTP chunks, ``limit`` ignored as a
   server may) and ``fleet scan --kube`` runs against it, timed, measured and checked alike.

Targets: the in-process scan under 3.0 s (the issue's figure); the ratio scan / jq is printed;
at every size the command's peak RSS under 500 MB, from the file and from the API (it streams:
memory must not grow with the nodes, beyond a small record per node), and its time per node at
the largest size within 2x of the smallest's (linear in nodes).
Exit status: 0 targets met, 1 a target missed (unless --no-fail), 2 a command failed or a node
was classified wrong.

Usage::

    .venv/bin/python bench/bench_fleet.py
    .venv/bin/python bench/bench_fleet.py --nodes 2000 --runs 1 --keep --workdir /tmp/bf
    .venv/bin/python bench/bench_fleet.py --sizes 10000,100000 --runs 1
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
from collections.abc import Callable, Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fleetnodes import NOW, make_fleet, write_compact_fleet  # noqa: E402
from kubereplay import Replay  # noqa: E402

K3_CONFIG = ROOT / "tests" / "data" / "image-configs" / "vllm-openai-cu130.inspect.json"
SCAN_TARGET_S = 3.0
PEAK_TARGET_MB = 500.0
LINEAR_TARGET = 2.0
_SEND_BYTES = 256 * 1024  # the replay's HTTP chunks
# Started by a tiny Python, the command's own ru_maxrss is its peak (a child forked from this
# large process would inherit its high-water mark).
_LAUNCHER = """
import os, sys
report, argv = sys.argv[1], sys.argv[2:]
with open(argv.pop(0), "wb") as sink:
    pid = os.fork()
    if pid == 0:
        os.dup2(sink.fileno(), 1)
        os.execv(argv[0], argv)
_, status, usage = os.wait4(pid, 0)
with open(report, "w") as out:
    out.write(f"{os.waitstatus_to_exitcode(status)} {usage.ru_maxrss}")
"""


def _measured(argv: list[str], output: Path, workdir: Path) -> tuple[float, float]:
    """Wall seconds and peak RSS (MB) of one run, its stdout into `output`."""
    report = workdir / "wait4"
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-I", "-S", "-c", _LAUNCHER, str(report), str(output), *argv],
        stderr=subprocess.PIPE,
        check=False,
    )
    elapsed = time.perf_counter() - started
    code, peak_kib = (int(value) for value in report.read_text().split())
    if done.returncode != 0 or code != 0:
        print(f"FAILED ({code}): {' '.join(argv)}\n{done.stderr.decode()[-2000:]}")
        sys.exit(2)
    return elapsed, peak_kib / 1024


def _classified(output: Path) -> dict[str, tuple[str, str | None]]:
    """Each node's (status, min driver) in the command's JSON, read node by node."""
    import ijson

    with output.open("rb") as stream:
        return {
            node["name"]: (node["status"], node["min_driver"])
            for node in ijson.items(stream, "nodes.item")
        }


def _file_body(path: Path) -> Callable[[], Iterator[bytes]]:
    """The replay's answer: the file, read and sent a chunk at a time (never held here)."""

    def body() -> Iterator[bytes]:
        with path.open("rb") as stream:
            while chunk := stream.read(_SEND_BYTES):
                yield chunk

    return body


def _checked(output: Path, expected: dict[str, tuple[str, str | None]], what: str) -> None:
    """Exits 2 unless the command's JSON classifies every node as expected."""
    got = _classified(output)
    wrong = [name for name, want in expected.items() if got.get(name) != want]
    if wrong or len(got) != len(expected):
        print(f"WRONG ({what}): {len(wrong)} node(s) misclassified, e.g. {wrong[:5]}")
        sys.exit(2)


def _kube_runs(
    options: argparse.Namespace, tool: Path, nodes: Path, workdir: Path, case: Path
) -> list[tuple[float, float]]:
    """`fleet scan --kube` against the replay answering the list; its JSON into scan.json."""
    with Replay(node_body=_file_body(nodes)) as replay:
        cli = [
            str(tool),
            "fleet",
            "scan",
            "--kube",
            "--kubeconfig",
            str(replay.kubeconfig(workdir)),
        ]
        cli += ["--image-config", str(K3_CONFIG), "--case", str(case), "--format", "json"]
        return [_measured(cli, workdir / "scan.json", workdir) for _ in range(options.runs)]


def _sizes(options: argparse.Namespace, tool: Path, jq: str, workdir: Path) -> bool:
    """jq and the command on compact NodeLists of each size; True when the targets are met."""
    rows = []
    for size in options.sizes:
        nodes = workdir / f"nodes-{size}.json"
        expected = write_compact_fleet(nodes, size)
        mib = nodes.stat().st_size / 2**20
        nodes.read_bytes()  # the page cache
        jq_runs = [_measured([jq, "length", str(nodes)], workdir / "jq.out", workdir)]
        jq_runs += [
            _measured([jq, "length", str(nodes)], workdir / "jq.out", workdir)
            for _ in range(options.runs - 1)
        ]
        output = workdir / "scan.json"
        cli = [str(tool), "fleet", "scan", "--nodes", str(nodes), "--image-config", str(K3_CONFIG)]
        cli += ["--case", str(workdir / f"case-{size}"), "--format", "json"]
        cli_runs = [_measured(cli, output, workdir) for _ in range(options.runs)]
        _checked(output, expected, f"{size:,} nodes")
        kube_runs = _kube_runs(options, tool, nodes, workdir, workdir / f"case-{size}")
        _checked(output, expected, f"{size:,} nodes, --kube")
        output.unlink()
        nodes.unlink()
        shutil.rmtree(workdir / f"case-{size}", ignore_errors=True)
        jq_wall = statistics.median(run[0] for run in jq_runs)
        cli_wall = statistics.median(run[0] for run in cli_runs)
        kube_wall = statistics.median(run[0] for run in kube_runs)
        jq_peak = max(run[1] for run in jq_runs)
        cli_peak = max(run[1] for run in cli_runs)
        kube_peak = max(run[1] for run in kube_runs)
        rows.append((size, mib, jq_wall, jq_peak, cli_wall, cli_peak, kube_wall, kube_peak))
    print(f"\n{'nodes':>10} {'MiB':>7} {'jq s':>7} {'jq MB':>7} {'scan s':>7} {'scan MB':>8} "
          f"{'scan/jq':>8} {'us/node':>8} {'kube s':>7} {'kube MB':>8} {'kube/scan':>9}")  # fmt: skip
    for size, mib, jq_wall, jq_peak, cli_wall, cli_peak, kube_wall, kube_peak in rows:
        print(
            f"{size:>10,} {mib:7.1f} {jq_wall:7.2f} {jq_peak:7.0f} {cli_wall:7.2f} {cli_peak:8.0f} "
            f"{cli_wall / jq_wall:8.2f} {cli_wall / size * 1e6:8.1f} {kube_wall:7.2f} "
            f"{kube_peak:8.0f} {kube_wall / cli_wall:9.2f}"
        )
    peak = max(max(row[5], row[7]) for row in rows)
    per_node = [row[4] / row[0] for row in rows]
    growth = per_node[-1] / per_node[0]
    print(f"every node of each list classified right (median of {options.runs} run(s))")
    print(f"target peak RSS < {PEAK_TARGET_MB:.0f} MB (file and --kube): "
          f"{'PASS' if peak < PEAK_TARGET_MB else 'FAIL'}"
          f" ({peak:.0f} MB)")  # fmt: skip
    print(
        f"target time per node at {rows[-1][0]:,} within {LINEAR_TARGET:g}x of {rows[0][0]:,}: "
        f"{'PASS' if growth <= LINEAR_TARGET else 'FAIL'} ({growth:.2f}x)"
    )
    return peak < PEAK_TARGET_MB and growth <= LINEAR_TARGET


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
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(size) for size in text.split(",") if size],
        default=[10_000, 100_000, 1_000_000],
        help="node counts of the compact lists (comma-separated; empty: none)",
    )
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
    if options.sizes:
        workdir = Path(tempfile.mkdtemp(prefix="bench-fleet-sizes-"))
        try:
            met = _sizes(options, tool, jq, workdir) and met
        finally:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0 if met or options.no_fail else 1


if __name__ == "__main__":
    sys.exit(main())
