"""`vllm-triage collect` from the command line: output, JSON manifest, one-line errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from cli import Result, run_cli
from fakehost import FakeHost

H200 = Path(__file__).parent / "data" / "collect" / "h200-580.159.04"


def _cli(*args: str, path: str | None = None, stdin: str = "") -> Result:
    return run_cli(*args, input=stdin, env={"PATH": path} if path is not None else None)


@pytest.mark.slow
def test_collect_on_the_h200_replay_prints_probes_and_writes_a_bundle(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host").install()
    host.reply("nvidia-smi -q -x", stdout_file=H200 / "nvidia-smi-q-x.xml")
    host.reply("nvidia-smi topo -m", stdout_file=H200 / "nvidia-smi-topo-m.txt")
    host.file("/proc/driver/nvidia/version", H200 / "proc-driver-nvidia-version.txt")
    case = tmp_path / "case"
    launch = "vllm serve /models/m --api-key sk-cliSecretKey0123456789abcdefghij\n"
    result = _cli(
        "collect", "--case", str(case), "--host-root", str(host.root), "--launch-cmd", "-",
        path=str(host.bin), stdin=launch,
    )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert "gpu" in result.stdout and "ok" in result.stdout and "bundle" in result.stdout
    assert f"diagnose --case {case}" in result.stdout
    (bundle,) = [p for p in (case / "bundles").iterdir() if p.is_dir()]
    facts = json.loads((bundle / "facts.json").read_text())
    assert facts["gpu"]["driver_version"] == "580.159.04"
    assert "sk-cliSecretKey" not in (bundle / "vllm" / "launch-command.txt").read_text()
    as_json = _cli("collect", "--case", str(case), "--host-root", str(host.root), "--format",
                   "json", path=str(host.bin))  # fmt: skip
    manifest = json.loads(as_json.stdout)
    assert manifest["schema_version"] == 1
    assert {p["name"] for p in manifest["probes"]} >= {"gpu", "host", "container", "vllm"}
    assert all(len(f["sha256"]) == 64 for f in manifest["files"])


@pytest.mark.slow
def test_markdown_is_a_ticket_ready_table_of_the_probes(tmp_path: Path) -> None:
    host = FakeHost(tmp_path / "host").install()
    host.reply("nvidia-smi -q -x", stdout_file=H200 / "nvidia-smi-q-x.xml")
    case = tmp_path / "case"
    result = _cli("collect", "--case", str(case), "--host-root", str(host.root), "--format",
                  "markdown", path=str(host.bin))  # fmt: skip
    assert result.exit_code == 0, result.stderr
    (bundle,) = [p for p in (case / "bundles").iterdir() if p.is_dir()]
    lines = result.stdout.splitlines()
    assert lines[0] == f"## vllm-triage collect: `{bundle.name}`"
    assert f"| Bundle | `{bundle}` |" in lines
    assert "| probe | status | seconds | files | reason / notes |" in lines
    gpu = next(line for line in lines if line.startswith("| gpu |"))
    assert gpu.split(" | ")[1] == "ok"
    manifest = json.loads((bundle / "manifest.json").read_text())
    assert sum(line.startswith("| ") for line in lines) == 1 + 6 + 1 + len(manifest["probes"])
    assert f"Next: `vllm-triage diagnose --case {case}`" in result.stdout
    assert "━" not in result.stdout and "┃" not in result.stdout, "no terminal table"


def test_show_commands_lists_the_allow_list() -> None:
    result = _cli("collect", "--show-commands")
    assert result.exit_code == 0
    assert "nvidia-smi -q -x" in result.stdout and "docker logs --timestamps" in result.stdout


def test_collect_bad_input_is_one_line(tmp_path: Path) -> None:
    for args, expected in [
        (["--log", str(tmp_path / "missing.log")], "no such file"),
        (["--launch-cmd", str(tmp_path / "missing.sh")], "--launch-cmd"),
        (["--timeout", "-1"], "--timeout"),
        (["--engine", "lxc"], "--engine"),
        (["--timeout", "soon"], "--timeout"),
    ]:
        result = _cli("collect", "--case", str(tmp_path / "c"), *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and expected in result.stderr
        assert "Traceback" not in result.stderr


@pytest.mark.slow
def test_a_fifo_or_a_device_is_refused_not_waited_on(tmp_path: Path) -> None:
    """As a process: a FIFO opened by mistake would block it for good."""
    fifo = tmp_path / "pipe.log"
    os.mkfifo(fifo)  # nobody ever writes it: reading would block forever
    for option, path, expected in [
        ("--log", fifo, "FIFO"),
        ("--log", Path("/dev/zero"), "device"),
        ("--launch-cmd", fifo, "FIFO"),
        ("--log", tmp_path, "directory"),
    ]:
        result = subprocess.run(
            [sys.executable, "-m", "vllm_triage", "collect", "--case", str(tmp_path / "c"),
             option, str(path)],
            capture_output=True, text=True, check=False, timeout=60,
        )  # fmt: skip
        assert result.returncode == 2, (option, path, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and expected in lines[0] and option in lines[0], lines
    assert not (tmp_path / "c").exists() or not list((tmp_path / "c").iterdir())
