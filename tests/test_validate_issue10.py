"""validate's additions for the decision record, against fakes (no engine): the structured-output
rung and its format errors, --loose-tools, start stability (--start-cmd/--starts) with a stand-in
`vllm` that starts, fails, hangs or ignores SIGTERM, and two endpoints compared on the same
requests. The real vLLM runs of the same features are in test_validate_realserver.py."""

from __future__ import annotations

import json
import os
import socket
import sys
import time
from pathlib import Path

import pytest
from cli import run_cli
from deadlines import ends_in_time
from fakeserver import FakeServer

from vllm_triage.errors import InputError
from vllm_triage.validate import ValidateOptions, validate
from vllm_triage.validate.deadlines import DEFAULT_DEADLINES

SHORT = {name: 10.0 for name in DEFAULT_DEADLINES}
FAKE_VLLM = Path(__file__).parent / "servers" / "fake_vllm.py"
SECRET = "sk-startSecret0123456789abcdefXYZ"


def _options(url: str, case: Path, **overrides: object) -> ValidateOptions:
    values: dict[str, object] = {
        "url": url,
        "case": case,
        "max_concurrency": 2,
        "deadlines": dict(SHORT),
    }
    values.update(overrides)
    return ValidateOptions(**values)  # type: ignore[arg-type]


def _rungs(result) -> dict[str, tuple[str, str]]:
    return {r.name: (r.status, r.reason or "") for r in result.run.rungs}


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        sock.settimeout(1.0)
        return sock.connect_ex(("127.0.0.1", port)) == 0


def _fake_vllm(tmp_path: Path) -> Path:
    """A `vllm` command that runs tests/servers/fake_vllm.py (the start-up a test asks for)."""
    folder = tmp_path / "bin"
    folder.mkdir(exist_ok=True)
    command = folder / "vllm"
    command.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{FAKE_VLLM}" "$@"\n')
    command.chmod(0o755)
    return command


def _start_cmd(tmp_path: Path, mode: str, port: int) -> str:
    vllm = _fake_vllm(tmp_path)
    return (
        f"# the isolated node's start command\nFAKE_VLLM_MODE={mode} {vllm} serve /models/tiny \\\n"
        f"  --port {port} --api-key {SECRET}\n"
    )


def _written(folder: Path) -> str:
    return "\n".join(
        p.read_text(errors="replace") for p in sorted(folder.rglob("*")) if p.is_file()
    )


# --- structured output and tools ------------------------------------------------------------


@pytest.mark.slow
def test_structured_output_passes_when_the_server_enforces_the_schema(tmp_path: Path) -> None:
    with FakeServer() as server:
        result = validate(_options(server.url, tmp_path))
    rung = next(r for r in result.run.rungs if r.name == "structured_output")
    assert rung.status == "passed" and rung.figures["valid"] == 4
    assert [r["kind"] for r in rung.figures["per_request"]] == [
        "json_schema", "json_schema_stream", "json_object", "json_object_stream",
    ]  # fmt: skip
    assert server.state.response_formats == ["json_schema"] * 2 + ["json_object"] * 2
    assert result.run.structured_output.format_errors == 0
    # The rung comes after tool calls; multi_node, when asked, stays last.
    names = [r.name for r in result.run.rungs]
    assert names[-2:] == ["tool_calls", "structured_output"]


@pytest.mark.slow
def test_unenforced_answers_are_counted_as_format_errors(tmp_path: Path) -> None:
    """The fake answers in turn a JSON object that breaks the schema and text that is no JSON:
    json_schema counts both, json_object only the text (any object is what it promises)."""
    with FakeServer("schema_ignored") as server:
        result = validate(_options(server.url, tmp_path, keep_going=True))
    rungs = _rungs(result)
    summary = result.run.structured_output
    assert (summary.requests, summary.valid, summary.format_errors) == (4, 1, 3)
    assert rungs["structured_output"][0] == "failed"
    assert rungs["structured_output"][1].startswith(
        "3 of 4 requests had structured-output format errors; first: json_schema: "
    )
    assert any("severity: 'urgent' is not one of" in e for e in summary.errors)
    assert any("driver' is a required property" in e for e in summary.errors)
    assert any(e.startswith("json_object_stream: not JSON") for e in summary.errors)
    assert not result.run.passed
    assert all(status == "passed" for name, (status, _) in rungs.items() if name in ("tool_calls",))


@pytest.mark.slow
def test_a_server_without_structured_output_fails_the_rung_with_its_words(tmp_path: Path) -> None:
    with FakeServer("no_structured_output") as server:
        result = validate(_options(server.url, tmp_path))
    status, reason = _rungs(result)["structured_output"]
    assert status == "failed"
    assert reason == (
        "the server refuses response_format json_schema (response_format is not supported)"
    )


@pytest.mark.slow
def test_loose_tools_are_sent_without_strict_and_recorded(tmp_path: Path) -> None:
    with FakeServer() as strict_server:
        strict = validate(_options(strict_server.url, tmp_path))
    with FakeServer() as loose_server:
        loose = validate(_options(loose_server.url, tmp_path, loose_tools=True))
    assert strict_server.state.tools_strict == {True}
    assert loose_server.state.tools_strict == {False}
    assert strict.run.tool_calls.mode == "strict" and loose.run.tool_calls.mode == "loose"
    figures = next(r for r in loose.run.rungs if r.name == "tool_calls").figures
    assert figures["tools"] == "loose" and figures["valid"] == 6
    summary = json.loads((loose.folder / "summary.json").read_text())
    assert summary["tool_calls"]["mode"] == "loose"


@pytest.mark.slow
def test_loose_tools_on_the_command_line(tmp_path: Path) -> None:
    with FakeServer() as server:
        result = run_cli(
            "validate", server.url, "--case", str(tmp_path), "--max-concurrency", "1",
            "--loose-tools", "--format", "json",
        )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert json.loads(result.stdout)["tool_calls"]["mode"] == "loose"
    assert server.state.tools_strict == {False}


# --- start stability ------------------------------------------------------------------------


@pytest.mark.slow
def test_two_starts_are_timed_stopped_and_the_ladder_runs_on_the_last(tmp_path: Path) -> None:
    port = _free_port()
    url = f"http://127.0.0.1:{port}"
    events: list[str] = []
    started = time.monotonic()
    result = validate(
        _options(url, tmp_path / "case", start_cmd=_start_cmd(tmp_path, "ready", port), starts=2),
        notice=events.append,
    )
    elapsed = time.monotonic() - started
    starts = result.run.starts
    assert starts is not None and starts.requested == 2 and starts.ready == 2
    assert [s.outcome for s in starts.starts] == ["ready", "ready"]
    assert len(starts.engine_init_s) == 2 and len(starts.ready_s) == 2
    for start in starts.starts:
        assert start.engine_init_s is not None and start.ready_s is not None
        # seconds from the launch, each within the run that timed it
        assert 0 < start.engine_init_s <= start.ready_s < elapsed
        # The knowledge's milestones, in the order vLLM reaches them.
        order = ["args", "engine_init", "load_start", "load_done", "graph_capture", "server_start"]
        assert [m for m in order if m in start.milestones] == order
        assert [start.milestones[m] for m in order] == sorted(start.milestones[m] for m in order)
        assert start.stopped_by == "sigterm" and start.diagnosis is None
        log = Path(start.log or "")
        assert log.parent == result.folder / "starts" and log.name == f"start-{start.number}.log"
        assert "Starting vLLM server on" in log.read_text() and start.log_bytes > 0
    assert result.run.passed, [(r.name, r.status, r.reason) for r in result.run.rungs]
    assert starts.node == socket.gethostname()
    # Recorded as the redactor keeps commands: unknown variables' values left out, secrets masked.
    assert starts.command[0] == "FAKE_VLLM_MODE=[OMITTED]" and "serve" in starts.command
    assert not _listening(port), "the last start is stopped after the ladder"
    assert any("start 2: ready in" in e for e in events)
    written = _written(tmp_path / "case")
    assert SECRET not in written, "the command's API key is redacted in the logs and summary"
    summary = json.loads((result.folder / "summary.json").read_text())
    assert summary["starts"]["engine_init_s"] == starts.engine_init_s


@pytest.mark.slow
def test_a_failed_start_is_diagnosed_and_the_ladder_is_skipped(tmp_path: Path) -> None:
    port = _free_port()
    case = tmp_path / "case"
    result = run_cli(
        "validate", f"http://127.0.0.1:{port}", "--case", str(case), "--start-cmd", "-",
        "--starts", "2", "--format", "json",
        input=_start_cmd(tmp_path, "driver_too_old", port),
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    summary = json.loads(result.stdout)
    starts = summary["starts"]
    assert starts["ready"] == 0 and starts["engine_init_s"] == []
    for start in starts["starts"]:
        assert start["outcome"] == "exited" and start["exit_code"] == 1
        assert start["diagnosis"]["cause"] == "driver_too_old"
        assert start["phase_reached"] == "before_weights"
        assert any(
            "driver on your system is too old" in e["text"] for e in start["diagnosis"]["evidence"]
        )
    health = summary["rungs"][0]
    assert health["status"] == "failed"
    assert health["reason"].startswith(
        "the server started by --start-cmd did not become ready (start 2: the process exited "
        "with 1 before /health answered; diagnosis: driver_too_old)"
    )
    assert {r["status"] for r in summary["rungs"][1:]} == {"skipped"}
    assert summary["passed"] is False


@pytest.mark.slow
def test_a_server_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    port = _free_port()
    with ends_in_time(1.0, "a stop of a server that ignores SIGTERM"):
        result = validate(
            _options(
                f"http://127.0.0.1:{port}", tmp_path / "case",
                start_cmd=_start_cmd(tmp_path, "ignore_term", port), starts=1, stop_grace_s=1.0,
            )
        )  # fmt: skip
    assert result.run.starts is not None
    (start,) = result.run.starts.starts
    assert start.outcome == "ready" and start.stopped_by == "sigkill"
    assert not _listening(port)


@pytest.mark.slow
def test_a_start_that_never_answers_times_out_and_is_diagnosed(tmp_path: Path) -> None:
    port = _free_port()
    result = validate(
        _options(
            f"http://127.0.0.1:{port}", tmp_path / "case",
            start_cmd=_start_cmd(tmp_path, "never_ready", port), start_deadline_s=3.0,
            stop_grace_s=2.0,
        )
    )  # fmt: skip
    assert result.run.starts is not None
    (start,) = result.run.starts.starts
    assert start.outcome == "timed_out" and start.reason == "/health did not answer 200 within 3 s"
    assert start.stopped_by == "sigterm" and start.engine_init_s is None
    assert "load_start" in start.milestones and "server_start" not in start.milestones
    assert start.phase_reached == "during_load"
    assert not result.run.passed


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "--start-cmd: the file holds no command"),
        ("A=1 B=2\n", "--start-cmd: the file holds no command"),
        ('vllm serve "unclosed', "--start-cmd: launch command: cannot split it into words"),
        ("sleep 100", "--start-cmd: launch command: no `vllm serve`"),
        ("vllm serve m | tee log", "--start-cmd: '|' needs a shell"),
        ("vllm serve m > log", "--start-cmd: '>' needs a shell"),
        ("/nonexistent/bin/vllm serve m", "--start-cmd: /nonexistent/bin/vllm: no such command"),
    ],
)
def test_bad_start_commands_are_one_line_errors(tmp_path: Path, text: str, message: str) -> None:
    with pytest.raises(InputError, match="^" + message.replace("|", "[|]").replace("(", "[(]")):
        validate(_options("http://127.0.0.1:9", tmp_path, start_cmd=text))
    assert not (tmp_path / "runs").exists(), "no run folder for bad input"


def test_bad_start_input_on_the_command_line(tmp_path: Path) -> None:
    vllm = _fake_vllm(tmp_path)
    command = tmp_path / "start.txt"
    command.write_text(f"{vllm} serve m --port 9\n")
    cases = [
        (["--start-cmd", str(tmp_path / "missing.txt")], "missing.txt"),
        (
            ["--start-cmd", str(command), "--starts", "0"],
            "'--starts': 0 is not in the range 1<=x<=20",
        ),
        (["--start-cmd", str(command), "--starts", "21"], "'--starts': 21 is not in the range"),
        (["--starts", "2"], "--starts needs --start-cmd FILE"),
        (
            ["--start-cmd", str(command), "--starts", "x"],
            "'--starts': 'x' is not a valid integer",
        ),
    ]
    for args, message in cases:
        result = run_cli("validate", "http://127.0.0.1:9", "--case", str(tmp_path), *args)
        assert result.exit_code == 2, (args, result.stdout, result.stderr)
        lines = result.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("vllm-triage: error:"), result.stderr
        assert message in lines[0], (args, lines[0])
    assert not (tmp_path / "runs").exists()


def test_the_start_command_must_serve_the_url_and_nothing_may_answer_there(
    tmp_path: Path,
) -> None:
    port = _free_port()
    other = _free_port()
    with pytest.raises(InputError, match=f"--start-cmd serves on port {port}, the URL"):
        validate(
            _options(
                f"http://127.0.0.1:{other}", tmp_path, start_cmd=_start_cmd(tmp_path, "ready", port)
            )
        )
    with FakeServer() as server:
        busy = int(server.url.rsplit(":", 1)[1])
        url = server.url.replace("http://", "http://user:hunter2secret@")
        with pytest.raises(InputError, match="something already listens at") as refused:
            validate(_options(url, tmp_path, start_cmd=_start_cmd(tmp_path, "ready", busy)))
        assert "hunter2secret" not in str(refused.value) and server.url in str(refused.value)
    assert not (tmp_path / "runs").exists()


def test_help_says_the_node_must_be_isolated() -> None:
    result = run_cli("validate", "--help", env={"COLUMNS": "300"})
    assert result.exit_code == 0
    text = " ".join(result.stdout.split())
    assert "only on a node you name as isolated" in text
    for option in ("--start-cmd", "--starts", "--loose-tools", "--compare-endpoint"):
        assert option in text


# --- two endpoints --------------------------------------------------------------------------


@pytest.mark.slow
def test_two_endpoints_compared_rung_by_rung(tmp_path: Path) -> None:
    with FakeServer() as first, FakeServer("schema_ignored", model="other-model") as second:
        result = validate(_options(first.url, tmp_path, compare_url=second.url, keep_going=True))
    run = result.run
    comparison = run.comparison
    assert comparison is not None and run.passed
    assert comparison.url == second.url and comparison.model == "other-model"
    assert comparison.passed is False and comparison.both_passed is False
    rungs = {r.name: r for r in comparison.rungs}
    assert list(rungs) == [r.name for r in run.rungs]
    assert rungs["short_text"].both_passed and rungs["tool_calls"].both_passed
    so = rungs["structured_output"]
    assert (so.this, so.other, so.both_passed) == ("passed", "failed", False)
    assert so.figures["valid"] == [4, 1] and so.figures["format_errors"] == [0, 3]
    assert (rungs["image"].this, rungs["image"].other) == ("not_supported", "not_supported")
    assert rungs["image"].same_status and not rungs["image"].both_passed
    assert not so.same_status
    levels = rungs["concurrency"].figures
    assert levels["levels.1.requests"][0] == levels["levels.1.requests"][1] > 0
    # The same requests on both sides: the same kinds, in the same order.
    mine = [
        json.loads(line) for line in (result.folder / "requests.jsonl").read_text().splitlines()
    ]
    theirs_path = result.folder / "compare" / "requests.jsonl"
    assert comparison.records == str(theirs_path)
    theirs = [json.loads(line) for line in theirs_path.read_text().splitlines()]
    assert [(r["rung"], r["kind"]) for r in mine] == [(r["rung"], r["kind"]) for r in theirs]
    assert first.state.response_formats == second.state.response_formats
    summary = json.loads((result.folder / "summary.json").read_text())
    assert summary["comparison"]["run"]["structured_output"]["format_errors"] == 3
    assert summary["comparison"]["rungs"][0]["name"] == "health"


@pytest.mark.slow
def test_compare_on_the_command_line_exits_1_when_one_side_fails(tmp_path: Path) -> None:
    key = "sk-firstEndpointKey0123456789"
    other_key = "sk-secondEndpointKey987654321"
    with FakeServer() as first, FakeServer("chat_500") as second:
        result = run_cli(
            "validate", first.url, "--case", str(tmp_path), "--max-concurrency", "1",
            "--api-key-env", "FIRST_KEY", "--compare-endpoint", second.url,
            "--compare-api-key-env", "SECOND_KEY",
            env={"FIRST_KEY": key, "SECOND_KEY": other_key, "COLUMNS": "250"},
        )  # fmt: skip
    assert result.exit_code == 1, result.stderr
    assert first.state.authorization == {f"Bearer {key}"}
    assert second.state.authorization == {f"Bearer {other_key}"}, "each endpoint its own key"
    assert "compared with" in result.stdout and "both passed: no" in result.stdout
    assert "same requests:" in result.stdout
    passing = run_cli(
        "validate", "http://127.0.0.1:9", "--compare-endpoint", "http://127.0.0.1:9/",
        "--case", str(tmp_path),
    )  # fmt: skip
    assert passing.exit_code == 2 and "is the server itself" in passing.stderr
    bad = run_cli(
        "validate", "http://127.0.0.1:9", "--compare-endpoint", "localhost:8000",
        "--case", str(tmp_path),
    )  # fmt: skip
    assert bad.exit_code == 2 and "not an http(s) URL" in bad.stderr
    lonely = run_cli(
        "validate", "http://127.0.0.1:9", "--compare-api-key-env", "SECOND_KEY",
        "--case", str(tmp_path), env={"SECOND_KEY": "x" * 20},
    )  # fmt: skip
    assert (
        lonely.exit_code == 2 and "--compare-api-key-env needs --compare-endpoint" in lonely.stderr
    )


@pytest.mark.slow
def test_compare_keeps_the_long_prompt_as_long_as_the_first_side(tmp_path: Path) -> None:
    with FakeServer() as first, FakeServer() as second:
        second.state.max_model_len = 8192
        result = validate(_options(first.url, tmp_path, compare_url=second.url))
    assert result.run.comparison is not None
    target = next(r for r in result.run.comparison.rungs if r.name == "target_context")
    mine, theirs = target.figures["target_tokens"]
    assert mine == theirs == 4096 - 32 - 8


def test_env_is_inherited_by_the_started_server(tmp_path: Path) -> None:
    """The server gets this environment with the command's NAME=VALUE over it (no shell)."""
    from vllm_triage.knowledge import load_knowledge
    from vllm_triage.validate.starts import child_environment, parse_start_command

    vllm = _fake_vllm(tmp_path)
    command = parse_start_command(
        f"export A=1\nB='two words' {vllm} serve m --port 1", load_knowledge()
    )
    assert command.env == {"A": "1", "B": "two words"}
    assert command.argv == [str(vllm), "serve", "m", "--port", "1"]
    environment = child_environment(command)
    assert environment["B"] == "two words" and environment["PATH"] == os.environ["PATH"]
