"""Benchmark: how long `collect` takes on a fake host that replays real outputs.

1. All fakes fast: the whole collect (probes, redaction, bundle, .tar.gz) against the reference
   of running the same commands one after another with subprocess, nothing else. Target: < 2 s.
2. One probe hanging forever (nvidia-smi never answers): the collect against its --timeout.
   Target: the bundle is written within the timeout plus a small margin (ratio close to 1.0).
3. The container's log never ends (`docker logs` prints as fast as it can): the collect against
   its --timeout. Target: within the timeout plus collect's fixed margin (MARGIN_SECONDS), the
   log's head and tail kept and its middle noted as left out.

Run: .venv/bin/python bench/bench_collect.py [--timeout 10] [--repeat 5]
The fake host is the one the tests use (tests/fakehost.py), with the Kimi K3 on r575 replay.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from fakehost import FakeHost, replay_kimi_k3_node  # noqa: E402

from vllm_triage.collect import CollectOptions, collect  # noqa: E402
from vllm_triage.collect.api import MARGIN_SECONDS  # noqa: E402

SAMPLES = ROOT / "tests" / "data" / "collect" / "samples"


def _host(base: Path) -> FakeHost:
    """The Kimi K3 node of the tests, with the real 8x B200 XML and the example's log."""
    return replay_kimi_k3_node(
        FakeHost(base).install(),
        SAMPLES / "nvidia-smi-xml" / "b200-x8-580.105.08.xml",
        ROOT / "examples" / "kimi-k3-r575" / "vllm-serve.log",
    )


def _collect_seconds(host: FakeHost, case: Path, timeout: float) -> float:
    options = CollectOptions(container="vllm-k3", host_root=host.root, timeout=timeout, case=case)
    started = time.perf_counter()
    collect(options, runner=host.runner())
    return time.perf_counter() - started


def _sequential_commands_seconds(host: FakeHost) -> float:
    """The reference: the same replayed commands, run one after another, output discarded."""
    commands = [line.split(" ") for line in host.replies]
    started = time.perf_counter()
    for argv in commands:
        subprocess.run([str(host.bin / argv[0]), *argv[1:]], capture_output=True, check=False)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--timeout", type=float, default=10.0, help="collect --timeout (s)")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as scratch:
        base = Path(scratch)
        host = _host(base / "host")
        reference = statistics.median(
            _sequential_commands_seconds(host) for _ in range(args.repeat)
        )
        fast = statistics.median(
            _collect_seconds(host, base / f"case-{i}", args.timeout) for i in range(args.repeat)
        )
        print(f"all fakes fast   collect {fast:.2f} s   reference (same {len(host.replies)} commands "
              f"run one by one) {reference:.2f} s   ratio {fast / reference:.2f}   "
              f"target < 2 s: {'met' if fast < 2 else 'MISSED'}")  # fmt: skip
        host.reply("nvidia-smi -q -x", behaviour="hang")
        hanging = _collect_seconds(host, base / "case-hang", args.timeout)
        print(f"nvidia-smi hangs collect {hanging:.2f} s   reference --timeout {args.timeout:.2f} s   "
              f"ratio {hanging / args.timeout:.2f}   "
              f"target <= timeout + 1 s: {'met' if hanging <= args.timeout + 1 else 'MISSED'}")  # fmt: skip
        host.reply(
            "nvidia-smi -q -x", stdout_file=SAMPLES / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
        )
        host.reply("docker logs --timestamps vllm-k3", behaviour="flood_forever")
        flooding = _collect_seconds(host, base / "case-flood", args.timeout)
        bound = args.timeout + MARGIN_SECONDS
        print(f"docker logs floods collect {flooding:.2f} s   reference --timeout {args.timeout:.2f} s   "
              f"ratio {flooding / args.timeout:.2f}   "
              f"target <= timeout + {MARGIN_SECONDS:g} s: {'met' if flooding <= bound else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
