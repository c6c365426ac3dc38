"""The command runner: only allow-listed shapes can be formed; deadlines, output caps (head and
tail kept), missing tools, and no process left behind."""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import deadlines
import pytest
from deadlines import ends_in_time, wait_for, watchdog_s
from fakehost import FakeHost

from vllm_triage.collect.processes import MARKER_ENV
from vllm_triage.collect.runner import CommandNotAllowed, CommandRunner


@contextmanager
def _runner(host: FakeHost) -> Iterator[CommandRunner]:
    """The host's runner, cleaned up (its raw outputs removed) whatever the test does."""
    runner = host.runner()
    try:
        yield runner
    finally:
        runner.cleanup()


def _gone(host: FakeHost) -> bool:
    """Whether every process the fakes started dies (SIGKILL is delivered asynchronously)."""
    wait_for(lambda: not host.alive(), "the fakes' processes are still alive")
    return True


def test_only_allow_listed_shapes_can_be_formed() -> None:
    runner = CommandRunner()
    assert runner.scratch is None, "no folder for raw outputs before a command runs"
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
    runner.cleanup()


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
    assert runner.scratch is not None and not runner.scratch.exists()


@pytest.mark.slow
def test_deadline_kills_the_process_group(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("nvidia-smi",))
    host.reply("nvidia-smi -q -x", behaviour="hang")
    with ends_in_time(0.5, "a run of a command that hangs forever"), _runner(host) as runner:
        result = runner.run("nvidia_smi_xml", 0.5)
    assert result.timed_out and not result.ok
    assert "did not finish within" in result.failure()
    assert _gone(host)


def test_output_cap_keeps_head_and_tail(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("ibstat",))
    lines = [f"line {n:05d} of the output\n" for n in range(5000)]
    host.reply("ibstat", stdout="".join(lines))
    runner = host.runner()
    runner.output_cap = 4000
    result = runner.run("ibstat", 5)
    text = result.text()
    assert result.ok and result.truncated and result.total_bytes == len("".join(lines))
    head, _, tail = text.partition("[vllm-triage: ")
    assert head.startswith(lines[0]) and tail.endswith(lines[-1])
    # Cut at line breaks, and the note tells exactly what was left out.
    assert head.endswith("\n") and tail.split("\n", 1)[1].startswith("line ")
    left_out = int(tail.split(" bytes left out", 1)[0])
    assert (
        left_out
        == result.omitted_bytes
        == result.total_bytes - len(head) - len(tail.split("\n", 1)[1])
    )
    assert len(text) < 4000 + 200
    assert "left out" in result.cut_note()
    runner.cleanup()


def test_small_outputs_are_whole(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("ibstat",))
    host.reply("ibstat", stdout="x" * 3000)
    runner = host.runner()
    runner.output_cap = 4000
    result = runner.run("ibstat", 5)
    assert result.text() == "x" * 3000 and not result.truncated
    runner.cleanup()


@pytest.mark.slow
def test_a_flood_is_cut_at_the_deadline_with_head_and_tail(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("docker",))
    host.reply("docker logs --timestamps c", behaviour="flood_forever")
    runner = host.runner()
    runner.output_cap = 1 << 20
    with ends_in_time(1.0, "a run of a command that floods forever"):
        result = runner.run("docker_logs", 1.0, container="c")
    assert result.timed_out and result.truncated and result.total_bytes > 2 << 20
    text = result.text()
    assert text.startswith("FIRST LINE") and "bytes left out here" in text
    assert len(text) <= (1 << 20) + 200
    assert _gone(host)
    runner.cleanup()


@pytest.mark.slow
def test_a_child_that_keeps_stdout_open_is_killed(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("ibstat",))
    host.reply("ibstat", behaviour="orphan")
    with _runner(host) as runner:
        # the orphan holds the pipe open forever: a run that ends did not wait for it
        with ends_in_time(what="a run whose child keeps stdout open"):
            result = runner.run("ibstat", deadlines.ENDLESS_S)
        assert result.ok and result.text() == "parent done\n"
    assert len(host.pids.read_text().splitlines()) == 2
    assert _gone(host)


@pytest.mark.slow
def test_a_child_in_its_own_session_is_killed(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("ibstat",))
    host.reply("ibstat", behaviour="setsid")
    with _runner(host) as runner:
        assert runner.run("ibstat", 1.0).timed_out
    assert len(host.pids.read_text().splitlines()) == 2
    assert _gone(host)


def test_cleanup_kills_running_commands_and_removes_raw_outputs(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("ibstat", "ibv_devinfo"))
    host.reply("ibstat", behaviour="setsid")
    host.reply("ibv_devinfo", behaviour="hang")
    runner = host.runner()
    results = []
    threads = [
        threading.Thread(target=lambda n=name: results.append(runner.run(n, deadlines.ENDLESS_S)))
        for name in ("ibstat", "ibv_devinfo")
    ]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(host.pids.read_text().splitlines()) >= 3, "the fakes did not start")
    assert runner.scratch is not None and list(runner.scratch.iterdir()), "raw outputs are there"
    runner.cleanup()
    for thread in threads:
        thread.join(watchdog_s())  # the commands run for an hour unless cleanup stops them
    assert not any(t.is_alive() for t in threads)
    assert not runner.scratch.exists()
    assert _gone(host)
    # Nothing starts after cleanup, and nothing comes back into the scratch folder.
    late = runner.run("ibstat", 5)
    assert late.interrupted and not late.ok and "stopping" in late.failure()
    assert not runner.scratch.exists()


def test_every_child_carries_the_run_marker(tmp_path: Path) -> None:
    host = FakeHost(tmp_path).install(("ibstat",))
    host.reply("ibstat", behaviour="setsid")
    runner = host.runner()
    thread = threading.Thread(target=runner.run, args=("ibstat", 30))
    thread.start()
    wait_for(lambda: len(host.alive()) >= 2, "the command and its child did not start")
    living = host.alive()
    assert len(living) == 2, "the command and its child in another session are running"
    for pid in living:
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
        assert any(e.startswith(f"{MARKER_ENV}={runner.run_id}:".encode()) for e in environ)
    assert os.environ.get(MARKER_ENV) is None, "the marker is the children's, not ours"
    runner.cleanup()
    thread.join(5)
    assert not thread.is_alive() and _gone(host)
