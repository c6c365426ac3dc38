"""The command runner: only allow-listed shapes can be formed; deadlines, caps, missing tools."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from fakehost import FakeHost

from vllm_triage.collect.runner import CommandNotAllowed, CommandRunner


def test_only_allow_listed_shapes_can_be_formed() -> None:
    runner = CommandRunner()
    assert runner.argv("docker_logs", container="vllm") == [
        "docker",
        "logs",
        "--timestamps",
        "vllm",
    ]
    with pytest.raises(CommandNotAllowed, match="not on the allow-list"):
        runner.argv("docker_restart", container="vllm")
    for smuggled in ("--privileged", "-v/:/host", "", "a\nb", "x\0y"):
        with pytest.raises(CommandNotAllowed, match="not a plain name"):
            runner.argv("docker_inspect", container=smuggled)
    with pytest.raises(CommandNotAllowed, match="needs parameter container"):
        runner.argv("docker_inspect")


def test_missing_program_and_failure_lines(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("docker",))
    runner = host.runner()
    missing = runner.run("nvidia_smi_xml", 5)
    assert missing.missing and "not installed" in missing.failure()
    host.reply(
        "docker version --format {{json .}}", stderr="Cannot connect to the Docker daemon\n", exit=1
    )
    failed = runner.run("docker_version", 5)
    assert failed.returncode == 1 and "Cannot connect to the Docker daemon" in failed.failure()
    runner.cleanup()


def test_deadline_kills_the_process_group(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("nvidia-smi",))
    host.reply("nvidia-smi -q -x", behaviour="hang")
    started = time.monotonic()
    result = host.runner().run("nvidia_smi_xml", 0.5)
    assert result.timed_out and not result.ok and time.monotonic() - started < 3
    assert "did not finish within" in result.failure()


def test_output_cap(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("ibstat",))
    host.reply("ibstat", stdout="x" * 50_000)
    runner = host.runner()
    runner.output_cap = 1000
    result = runner.run("ibstat", 5)
    assert result.truncated and len(result.text()) == 1000
