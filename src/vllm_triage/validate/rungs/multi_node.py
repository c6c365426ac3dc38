"""Rung 7, multi-node (only with --multi-node): the all-to-all backend of the launch matches the
transport per the recipe (deepep_v2 for RDMA, flashinfer_nvlink_one_sided for NVLink for Kimi K3),
the logs are free of NCCL/network errors (the diagnose signatures), and a given NCCL test command
runs and reports its bandwidth."""

from __future__ import annotations

import contextlib
import os
import re
import shlex
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from vllm_triage.diagnose.scan import scan_log
from vllm_triage.validate import reasons
from vllm_triage.validate.context import LadderContext
from vllm_triage.validate.models import RungResult

_BUS_BANDWIDTH = re.compile(r"#\s*Avg bus bandwidth\s*:\s*([0-9]{1,12}(?:\.[0-9]{1,12})?)\b")
_OUT_OF_BOUNDS = re.compile(r"#\s*Out of bounds values\s*:\s*([0-9]{1,18})\b")
_OUTPUT_TAIL = 1024 * 1024


def nccl_test_figures(output: str) -> dict[str, object]:
    """Average bus bandwidth (GB/s) and out-of-bounds count from nccl-tests' summary lines."""
    bandwidth = _BUS_BANDWIDTH.search(output)
    bounds = _OUT_OF_BOUNDS.search(output)
    return {
        "avg_bus_bandwidth_gbps": float(bandwidth.group(1)) if bandwidth else None,
        "out_of_bounds_values": int(bounds.group(1)) if bounds else None,
    }


def _run_nccl_test(command: str, deadline: float) -> tuple[int, str]:
    """Run the command in its own session until the deadline (then its whole group is killed);
    its exit code and the last MiB of its output, where nccl-tests prints its summary."""
    with tempfile.TemporaryFile() as output:
        process = subprocess.Popen(
            shlex.split(command), stdin=subprocess.DEVNULL, stdout=output,
            stderr=subprocess.STDOUT, start_new_session=True,
        )  # fmt: skip
        try:
            returncode = process.wait(timeout=max(1.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
            raise
        size = output.seek(0, os.SEEK_END)
        output.seek(max(0, size - _OUTPUT_TAIL))
        return returncode, output.read().decode("utf-8", errors="replace")


def _log_errors(ctx: LadderContext, log: Path) -> list[str]:
    with log.open("rb") as stream:
        scan = scan_log(stream, str(log), ctx.kb)
    return [
        f"{hit.rule.signature.id} {hit.rule.signature.name} at {log.name}:{hit.first_line}: "
        f"{hit.evidence[0].text[:160] if hit.evidence else ''}"
        for hit in scan.hits.values()
        if hit.rule.signature.cause == "nccl_or_network"
    ]


def run(ctx: LadderContext) -> RungResult:
    deadline = ctx.deadline("multi_node")
    problems: list[str] = []
    figures: dict[str, object] = {}
    checked = []
    transport = ctx.options.transport
    if ctx.launch is not None and transport is not None:
        checked.append("all2all backend")
        actual = ctx.launch.all2all_backend
        expected = getattr(ctx.recipe.all2all_backends, transport) if ctx.recipe else None
        figures.update(all2all_backend=actual, transport=transport, expected_backend=expected)
        if expected is None:
            figures["note"] = "no recipe names the backend for this model; nothing to compare"
        elif actual != expected:
            problems.append(
                reasons.BACKEND_MISMATCH.format(
                    actual=actual or "not set",
                    transport=transport,
                    recipe=ctx.recipe.name if ctx.recipe else "",
                    expected=expected,
                )
            )
    for log in ctx.options.logs:
        checked.append(f"log {log.name}")
        problems.extend(_log_errors(ctx, log))
    if ctx.options.nccl_test:
        checked.append("NCCL test")
        try:
            returncode, output = _run_nccl_test(ctx.options.nccl_test, deadline)
        except subprocess.TimeoutExpired:
            problems.append(reasons.NCCL_TEST_DEADLINE)
        except OSError as exc:
            problems.append(reasons.NCCL_TEST_NOT_STARTED.format(error=exc.strerror))
        else:
            figures.update(nccl_test_figures(output))
            if returncode != 0:
                problems.append(reasons.NCCL_TEST_EXITED.format(code=returncode))
            elif figures["avg_bus_bandwidth_gbps"] is None:
                problems.append(reasons.NCCL_TEST_NO_BANDWIDTH)
            if figures.get("out_of_bounds_values"):
                problems.append(
                    reasons.NCCL_TEST_WRONG_VALUES.format(count=figures["out_of_bounds_values"])
                )
    figures["checked"] = checked
    if not checked:
        return ctx.result(
            "multi_node", "skipped",
            reasons.NOTHING_TO_CHECK,
        )  # fmt: skip
    if problems:
        return ctx.result("multi_node", "failed", "; ".join(problems[:3]), **figures)
    return ctx.result("multi_node", "passed", None, **figures)
