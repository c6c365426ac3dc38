"""The command line on bad input: exit 2, one `vllm-triage: error:` line, never a traceback.

Inputs that are odd but readable (empty, invalid UTF-8, one huge line) get exit 0 and an honest
`unknown` diagnosis. The commands run in-process (tests/cli.py); test_cli_process.py runs the
real console script for the exit codes.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli import Result
from cli import run_cli as run_in
from deadlines import ends_in_time

EXIT_OK, EXIT_BAD_INPUT = 0, 2
MB = 1 << 20


def run_cli(*args: str, cwd: Path, stdin: bytes | None = None) -> Result:
    return run_in(*args, cwd=cwd, input=stdin if stdin is not None else b"")


def assert_bad_input(result: Result) -> str:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.exit_code == EXIT_BAD_INPUT, (result.exit_code, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("vllm-triage: error:"), result.stderr
    return lines[0]


def assert_json_ok(result: Result) -> dict:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.exit_code == EXIT_OK, (result.exit_code, result.stderr)
    return json.loads(result.stdout)


def assert_honest_unknown(result: Result) -> dict:
    document = assert_json_ok(result)
    assert document["primary"]["cause"] == "unknown"
    assert document["primary"]["driver_change_advised"] is False
    assert document["primary"]["confidence"] == 0.0
    return document


@pytest.fixture
def ok_log(tmp_path: Path) -> Path:
    path = tmp_path / "ok.log"
    path.write_text(
        "(APIServer pid=1) INFO 10-16 05:20:48 [api_server.py:1] non-default args: {}\n"
    )
    return path


# ---------------------------------------------------------------------------------------------
# bad input: exit 2


def test_missing_file(tmp_path: Path) -> None:
    message = assert_bad_input(run_cli("diagnose", "does-not-exist.log", cwd=tmp_path))
    assert "does-not-exist.log" in message


def test_directory(tmp_path: Path) -> None:
    (tmp_path / "logs").mkdir()
    message = assert_bad_input(run_cli("diagnose", "logs", cwd=tmp_path))
    assert "director" in message


def test_binary_file(tmp_path: Path) -> None:
    (tmp_path / "core.bin").write_bytes(b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 64)
    assert_bad_input(run_cli("diagnose", "core.bin", cwd=tmp_path))


def test_utf16_file(tmp_path: Path) -> None:
    (tmp_path / "u16.log").write_bytes(
        "RuntimeError: No CUDA GPUs are available\n".encode("utf-16")
    )
    assert_bad_input(run_cli("diagnose", "u16.log", cwd=tmp_path))


def test_missing_file_among_good_ones(tmp_path: Path, ok_log: Path) -> None:
    assert_bad_input(run_cli("diagnose", str(ok_log), "nope.log", cwd=tmp_path))


def test_unknown_recipe(tmp_path: Path, ok_log: Path) -> None:
    message = assert_bad_input(
        run_cli("diagnose", str(ok_log), "--recipe", "no-such-model", cwd=tmp_path)
    )
    assert "no-such-model" in message


@pytest.mark.parametrize("driver", ["banana", "r57", ""])
def test_malformed_driver_diagnose(tmp_path: Path, ok_log: Path, driver: str) -> None:
    assert_bad_input(run_cli("diagnose", str(ok_log), "--driver", driver, cwd=tmp_path))


@pytest.mark.parametrize("driver", ["banana", "575.57.08.01", "575."])
def test_malformed_driver_compat(tmp_path: Path, driver: str) -> None:
    assert_bad_input(run_cli("compat", "--driver", driver, "--cuda", "13.0", cwd=tmp_path))


def test_malformed_image_cuda_diagnose(tmp_path: Path, ok_log: Path) -> None:
    assert_bad_input(run_cli("diagnose", str(ok_log), "--image-cuda", "thirteen", cwd=tmp_path))


def test_malformed_cuda_compat(tmp_path: Path) -> None:
    assert_bad_input(run_cli("compat", "--driver", "575.57.08", "--cuda", "cu1", cwd=tmp_path))


def test_compat_without_any_cuda_source(tmp_path: Path) -> None:
    message = assert_bad_input(run_cli("compat", "--driver", "575.57.08", cwd=tmp_path))
    assert "--cuda" in message


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"\xff\xfe\x00{",
        b'[{"Config": {"Env": ["CUDA_VERSION=13.0"]}',
    ],
    ids=["garbage", "empty", "binary", "truncated"],
)
def test_image_config_invalid_json(tmp_path: Path, content: bytes) -> None:
    (tmp_path / "config.json").write_bytes(content)
    assert_bad_input(
        run_cli("compat", "--driver", "575.57.08", "--image-config", "config.json", cwd=tmp_path)
    )


@pytest.mark.parametrize(
    "document",
    [
        [{"Config": {"Env": ["PATH=/usr/local/sbin:/usr/bin", "NVIDIA_VISIBLE_DEVICES=all"]}}],
        {"config": {"Env": ["PATH=/usr/bin"]}},
        {"Config": {"Env": None}},
        [],
        42,
        [{"Config": {"Env": ["CUDA_VERSION=not-a-version"]}}],
    ],
    ids=["inspect-no-cuda", "oci-no-cuda", "env-null", "empty-list", "number", "malformed-cuda"],
)
def test_image_config_without_cuda_version(tmp_path: Path, document: object) -> None:
    (tmp_path / "config.json").write_text(json.dumps(document))
    assert_bad_input(
        run_cli("compat", "--driver", "575.57.08", "--image-config", "config.json", cwd=tmp_path)
    )


def test_image_config_without_cuda_version_diagnose(tmp_path: Path, ok_log: Path) -> None:
    (tmp_path / "config.json").write_text(json.dumps([{"Config": {"Env": ["PATH=/usr/bin"]}}]))
    assert_bad_input(
        run_cli("diagnose", str(ok_log), "--image-config", "config.json", cwd=tmp_path)
    )


def test_image_unknown_repository_diagnose(tmp_path: Path, ok_log: Path) -> None:
    assert_bad_input(run_cli("diagnose", str(ok_log), "--image", "nginx:latest", cwd=tmp_path))


def test_image_config_missing_file(tmp_path: Path) -> None:
    assert_bad_input(
        run_cli("compat", "--driver", "575.57.08", "--image-config", "nope.json", cwd=tmp_path)
    )


def test_image_config_deeply_nested_json(tmp_path: Path) -> None:
    (tmp_path / "config.json").write_text("[" * 100_000)
    assert_bad_input(
        run_cli("compat", "--driver", "575.57.08", "--image-config", "config.json", cwd=tmp_path)
    )


@pytest.mark.parametrize(
    "image", ["nginx:latest", "ghcr.io/acme/vllm:v0.22.0", "vllm-openai:v0.20.0"]
)
def test_image_unknown_repository(tmp_path: Path, image: str) -> None:
    message = assert_bad_input(
        run_cli("compat", "--driver", "575.57.08", "--image", image, cwd=tmp_path)
    )
    assert "repository" in message


def test_image_known_repository_unreadable_tag(tmp_path: Path) -> None:
    assert_bad_input(
        run_cli(
            "compat", "--driver", "575.57.08", "--image", "vllm/vllm-openai:nightly", cwd=tmp_path
        )
    )


# ---------------------------------------------------------------------------------------------
# odd but readable input: exit 0 and an honest `unknown`


def test_empty_file(tmp_path: Path) -> None:
    (tmp_path / "empty.log").write_bytes(b"")
    document = assert_honest_unknown(
        run_cli("diagnose", "empty.log", "--format", "json", cwd=tmp_path)
    )
    assert document["lines_read"] == 0


def test_invalid_utf8_text(tmp_path: Path) -> None:
    data = b"".join(
        bytes([0x80 + (i % 64), 0xC3, 0x28, 0xFF, 0xFE, 0x41 + (i % 26), 0xED, 0xA0, 0x80, 0x0A])
        for i in range(2000)
    )
    assert b"\x00" not in data
    (tmp_path / "latin.log").write_bytes(data)
    document = assert_honest_unknown(
        run_cli("diagnose", "latin.log", "--format", "json", cwd=tmp_path)
    )
    assert document["lines_read"] == 2000


def test_invalid_utf8_text_in_text_format(tmp_path: Path) -> None:
    (tmp_path / "latin.log").write_bytes(b"caf\xe9 \xff\xfe ok\n" * 50)
    result = run_cli("diagnose", "latin.log", cwd=tmp_path)
    assert result.exit_code == EXIT_OK
    assert "Traceback" not in result.stdout + result.stderr


def test_50mb_single_line(tmp_path: Path) -> None:
    path = tmp_path / "huge.log"
    chunk = b"the quick brown fox jumps over the lazy dog " * (MB // 44)
    with path.open("wb") as stream:
        written = 0
        while written < 50 * MB:
            stream.write(chunk)
            written += len(chunk)
    with ends_in_time(what="diagnose of one 50 MB line"):  # quadratic work would take hours
        result = run_cli("diagnose", "huge.log", "--format", "json", cwd=tmp_path)
    document = assert_honest_unknown(result)
    assert document["lines_read"] == 1


# ---------------------------------------------------------------------------------------------
# standard input


def test_stdin_dash(tmp_path: Path) -> None:
    result = run_cli(
        "diagnose",
        "-",
        "--format",
        "json",
        cwd=tmp_path,
        stdin=b"RuntimeError: No CUDA GPUs are available\n",
    )
    document = assert_json_ok(result)
    assert document["primary"]["cause"] == "no_gpu_visible"
    assert document["primary"]["driver_change_advised"] is False
    assert document["inputs"] == ["<stdin>"]
    assert document["primary"]["evidence"][0]["line"] == 1


def test_stdin_dash_empty(tmp_path: Path) -> None:
    assert_honest_unknown(run_cli("diagnose", "-", "--format", "json", cwd=tmp_path, stdin=b""))


def test_stdin_dash_binary(tmp_path: Path) -> None:
    assert_bad_input(run_cli("diagnose", "-", cwd=tmp_path, stdin=b"\x00\x00\x00binary"))


# ---------------------------------------------------------------------------------------------
# docker json-file lines that decode to something odd: still no traceback


@pytest.mark.parametrize("output_format", ["json", "text"])
def test_json_file_line_with_lone_surrogate(tmp_path: Path, output_format: str) -> None:
    (tmp_path / "container.log").write_bytes(
        b'{"log":"\\ud800 RuntimeError: No CUDA GPUs are available\\n","stream":"stderr",'
        b'"time":"2025-10-16T05:20:48.123456789Z"}\n'
    )
    result = run_cli("diagnose", "container.log", "--format", output_format, cwd=tmp_path)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr[-2000:]
    assert result.exit_code == EXIT_OK


def test_json_file_line_deeply_nested(tmp_path: Path) -> None:
    (tmp_path / "container.log").write_bytes(
        b'{"log":' + b"[" * 20_000 + b" No CUDA GPUs are available\n"
    )
    result = run_cli("diagnose", "container.log", "--format", "json", cwd=tmp_path)
    assert "Traceback" not in result.stdout + result.stderr, result.stderr[-2000:]
    assert result.exit_code == EXIT_OK


@pytest.mark.parametrize("args", [(), ("case",), ("knowledge",), ("fleet",)])
def test_a_bare_command_shows_its_help_whole(tmp_path: Path, args: tuple[str, ...]) -> None:
    """No subcommand: the usage error's code (2) with the group's help as it reads in --help, one
    entry per line (not squeezed into one error line)."""
    result = run_cli(*args, cwd=tmp_path)
    assert result.exit_code == EXIT_BAD_INPUT
    assert "Traceback" not in result.stderr
    lines = result.stderr.splitlines()
    assert lines[0].startswith("Usage: ")
    assert "Commands:" in lines
    assert sum(line.startswith("  ") for line in lines) >= 2


# ---------------------------------------------------------------------------------------------
# float options: a finite number within the option's stated range, else a usage error


def _float_options() -> list[tuple[tuple[str, ...], str, float]]:
    """(command path, option, its maximum) for every float option of every command."""
    import click

    from vllm_triage.cli import app

    found = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        for param in command.params:
            if isinstance(param.type, click.types.FloatParamType):
                assert isinstance(param.type, click.FloatRange), (path, param.name)
                assert param.type.max is not None, f"{' '.join(path)} {param.opts[0]}: no maximum"
                found.append((path, param.opts[0], float(param.type.max)))

    walk(app, ())
    return found


FLOAT_OPTIONS = _float_options()


def test_every_command_has_its_float_options_found() -> None:
    """The walk finds the options the adversarial pass named (a rename would hide one)."""
    names = {(" ".join(path), option) for path, option, _ in FLOAT_OPTIONS}
    assert {("collect", "--timeout"), ("validate", "--start-deadline")} <= names
    assert {("plan", "--deadline-hours"), ("fleet run", "--timeout")} <= names
    assert len(names) >= 11, names


@pytest.mark.parametrize(
    ("path", "option", "maximum"),
    FLOAT_OPTIONS,
    ids=[f"{' '.join(p)} {o}" for p, o, _ in FLOAT_OPTIONS],
)
@pytest.mark.parametrize("value", ["nan", "NaN", "inf", "-inf", "1e308", "1e309", "above"])
def test_a_float_option_refuses_what_is_not_a_finite_number_in_range(
    tmp_path: Path, path: tuple[str, ...], option: str, maximum: float, value: str
) -> None:
    given = repr(maximum * 1.5) if value == "above" else value
    message = assert_bad_input(run_cli(*path, f"{option}={given}", cwd=tmp_path))
    assert f"Invalid value for '{option}'" in message, message
    assert list(tmp_path.iterdir()) == []


def test_a_timeout_above_a_day_is_refused_and_one_within_its_range_is_taken(
    tmp_path: Path,
) -> None:
    message = assert_bad_input(run_cli("fleet", "run", "collect", "--timeout=86401", cwd=tmp_path))
    assert "0<x<=86400" in message
    message = assert_bad_input(run_cli("collect", "--timeout=3601", cwd=tmp_path))
    assert "0<x<=3600" in message
    help_text = run_cli("collect", "--help", cwd=tmp_path).stdout
    assert "0<x<=3600" in help_text  # the range is stated where the option is


# ---------------------------------------------------------------------------------------------
# integer options: within the option's stated range (a minimum and a maximum), else a usage error


def _int_options() -> list[tuple[tuple[str, ...], str, int, int]]:
    """(command path, option, its minimum, its maximum) for every integer option of every
    command."""
    import click

    from vllm_triage.cli import app

    found = []

    def walk(command: click.Command, path: tuple[str, ...]) -> None:
        if isinstance(command, click.Group):
            for name, sub in command.commands.items():
                walk(sub, (*path, name))
        for param in command.params:
            if isinstance(param.type, click.types.IntParamType):
                where = f"{' '.join(path)} {param.opts[0]}"
                assert isinstance(param.type, click.IntRange), f"{where}: no range"
                low, high = param.type.min, param.type.max
                assert low is not None and high is not None, f"{where}: unbounded"
                assert not param.type.min_open and not param.type.max_open, where
                found.append((path, param.opts[0], int(low), int(high)))

    walk(app, ())
    return found


INT_OPTIONS = _int_options()


def test_every_command_has_its_integer_options_found() -> None:
    """The walk finds the options named here (a rename, or a plain `int`, would hide one)."""
    names = {(" ".join(path), option) for path, option, _, _ in INT_OPTIONS}
    assert {("capacity", "--concurrency"), ("capacity", "--tensor-parallel-size")} <= names
    assert {("validate", "--target-context"), ("validate", "--starts")} <= names
    assert {("fleet scan", "--page-size"), ("fleet run", "--forks")} <= names
    assert {("record", "--review-days"), ("preflight", "--gpu-count")} <= names
    assert len(names) >= 17, names


@pytest.mark.parametrize(
    ("path", "option", "minimum", "maximum"),
    INT_OPTIONS,
    ids=[f"{' '.join(p)} {o}" for p, o, _, _ in INT_OPTIONS],
)
@pytest.mark.parametrize("value", ["huge", "negative", "above", "below"])
def test_an_integer_option_refuses_what_is_outside_its_range(
    tmp_path: Path, path: tuple[str, ...], option: str, minimum: int, maximum: int, value: str
) -> None:
    given = {"huge": 10**30, "negative": -1, "above": maximum + 1, "below": minimum - 1}[value]
    message = assert_bad_input(run_cli(*path, f"{option}={given}", cwd=tmp_path))
    assert f"Invalid value for '{option}'" in message, message
    assert f"{minimum}<=x<={maximum}" in message, message
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("path", sorted({path for path, *_ in INT_OPTIONS}))
def test_the_integer_ranges_are_stated_in_help(tmp_path: Path, path: tuple[str, ...]) -> None:
    help_text = run_cli(*path, "--help", cwd=tmp_path).stdout
    for _, option, minimum, maximum in (row for row in INT_OPTIONS if row[0] == path):
        assert f"{minimum}<=x<={maximum}" in help_text, option


def test_the_integer_ranges_are_the_libraries_own() -> None:
    """Where a library checks an option's range itself, the command line states the same one."""
    from vllm_triage.capacity import api as capacity
    from vllm_triage.capacity import shapes
    from vllm_triage.fleet import sources
    from vllm_triage.preflight import api as preflight
    from vllm_triage.record import api as record
    from vllm_triage.validate import ladder, starts

    ranges = {(" ".join(path), option): (low, high) for path, option, low, high in INT_OPTIONS}
    assert ranges["capacity", "--gpu-count"] == (1, capacity.MAX_GPU_COUNT)
    assert ranges["preflight", "--gpu-count"] == (1, preflight.MAX_GPU_COUNT)
    assert ranges["capacity", "--concurrency"] == (1, capacity.MAX_CONCURRENCY)
    assert ranges["capacity", "--max-model-len"] == (1, shapes.MAX_POSITIONS)
    assert ranges["capacity", "--weights-bytes"] == (1, shapes.MAX_TOTAL_BYTES)
    assert ranges["capacity", "--kv-cache-memory-bytes"] == (1, shapes.MAX_TOTAL_BYTES)
    for flag in ("--tensor-parallel-size", "--pipeline-parallel-size", "--data-parallel-size"):
        assert ranges["capacity", flag] == (1, capacity.MAX_PARALLEL)
    assert ranges["capacity", "--decode-context-parallel-size"] == (1, capacity.MAX_PARALLEL)
    assert ranges["validate", "--target-context"] == (16, ladder.MAX_TARGET_CONTEXT)
    assert ranges["validate", "--max-concurrency"] == (1, ladder._MAX_CONCURRENCY)
    assert ranges["validate", "--starts"] == (1, starts.MAX_STARTS)
    assert ranges["record", "--review-days"] == (0, record.MAX_REVIEW_DAYS)
    assert ranges["fleet scan", "--wave-size"] == (1, sources.MAX_NODES)
    assert ranges["fleet scan", "--page-size"] == (1, sources.MAX_NODES)
