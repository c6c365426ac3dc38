"""`vllm-triage validate` from the command line: the JSON contract and the exit codes."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from urllib.parse import quote

import pytest
from cli import Result, run_cli
from fakeserver import FakeServer
from test_baseline import _capture, _node

from vllm_triage.knowledge import KnowledgeBase


def _cli(*args: str, env: dict[str, str] | None = None) -> Result:
    return run_cli("validate", *args, env=env)


@pytest.mark.slow
def test_json_contract_and_exit_0(tmp_path: Path) -> None:
    with FakeServer() as server:
        result = _cli(
            server.url, "--case", str(tmp_path), "--max-concurrency", "2", "--format", "json"
        )
    assert result.exit_code == 0, result.stderr
    summary = json.loads(result.stdout)
    assert summary["schema_version"] == 1 and summary["passed"] is True
    (written,) = tmp_path.glob("runs/*/summary.json")  # the case's runs/<UTC>/
    assert json.loads(written.read_text()) == summary
    assert summary["records"] == str(written.parent / "requests.jsonl")
    assert summary["tool_version"] and summary["created_at"] and summary["made_from"] == []
    names = [r["name"] for r in summary["rungs"]]
    assert names == [
        "health",
        "short_text",
        "target_context",
        "same_prefix",
        "concurrency",
        "image",
        "tool_calls",
        "structured_output",
    ]
    for rung in summary["rungs"]:
        assert rung["status"] in ("passed", "failed", "skipped", "not_supported")
        assert "reason" in rung and isinstance(rung["figures"], dict)
    assert set(summary["prefix_cache"]) >= {"enabled", "queries", "hits"}
    assert set(summary["tool_calls"]) >= {"requests", "valid", "format_errors"}
    # Additions of issue 10: the tools' mode, the structured-output tally; no starts, no comparison.
    assert summary["tool_calls"]["mode"] == "strict"
    assert summary["structured_output"] == {
        "requests": 4, "valid": 4, "format_errors": 0, "errors": []
    }  # fmt: skip
    assert summary["starts"] is None and summary["comparison"] is None


@pytest.mark.slow
def test_a_failing_rung_exits_1_and_prints_the_table(tmp_path: Path) -> None:
    with FakeServer("chat_500") as server:
        result = _cli(server.url, "--case", str(tmp_path))
    assert result.exit_code == 1
    assert (
        "short_text" in result.stdout and "HTTP 500" in result.stdout and "FAILED" in result.stdout
    )
    assert "short_text" in result.stderr, "progress lines go to stderr as rungs finish"


@pytest.mark.slow
def test_markdown_is_a_ticket_ready_table_of_the_rungs(tmp_path: Path) -> None:
    with FakeServer("chat_500") as server:
        result = _cli(server.url, "--case", str(tmp_path), "--format", "markdown")
    assert result.exit_code == 1
    lines = result.stdout.splitlines()
    assert lines[0] == "## vllm-triage validate: FAILED"
    assert "| rung | status | seconds | reason | figures |" in lines
    short = next(line for line in lines if line.startswith("| short_text |"))
    assert short.split(" | ")[1] == "failed" and "HTTP 500" in short
    assert any(line.startswith("- Tool calls (strict):") for line in lines)
    (summary,) = tmp_path.glob("runs/*/summary.json")
    assert f"summary: `{summary}`" in result.stdout
    assert "━" not in result.stdout and result.stderr == "", "no terminal table, no progress"


def test_unreachable_and_bad_input_exit_2(tmp_path: Path) -> None:
    unreachable = _cli("http://127.0.0.1:9", "--case", str(tmp_path), "--format", "json")
    assert unreachable.exit_code == 2
    assert json.loads(unreachable.stdout)["passed"] is False
    bad = _cli("localhost:8000", "--case", str(tmp_path))
    assert bad.exit_code == 2 and bad.stderr.startswith("vllm-triage: error:")
    assert len(bad.stderr.strip().splitlines()) == 1


@pytest.mark.slow
def test_api_key_is_sent_and_never_written(tmp_path: Path) -> None:
    secret = "sk-validateSecret0123456789abcdef"
    with FakeServer() as server:
        result = _cli(
            server.url, "--case", str(tmp_path), "--api-key-env", "MY_VLLM_KEY",
            "--max-concurrency", "1", env={"MY_VLLM_KEY": secret},
        )  # fmt: skip
    assert result.exit_code == 0, result.stderr
    assert server.state.authorization == {f"Bearer {secret}"}
    assert secret not in result.stdout + result.stderr
    for path in tmp_path.rglob("*"):
        if path.is_file():
            assert secret not in path.read_text()


def _forms(secret: str) -> set[str]:
    """Every form a secret could be written in: raw, URL-encoded, JSON-escaped, base64."""
    encoded = {secret, quote(secret, safe=""), quote(secret), json.dumps(secret)[1:-1]}
    for text in list(encoded):
        encoded.add(base64.b64encode(text.encode()).decode())
        encoded.add(base64.urlsafe_b64encode(text.encode()).decode())
    return encoded


def _written(folder: Path, *streams: str) -> str:
    files = [p.read_text(errors="replace") for p in folder.rglob("*") if p.is_file()]
    return "\n".join([*files, *streams])


@pytest.mark.slow
def test_url_credentials_are_sent_as_basic_auth_and_never_written(tmp_path: Path) -> None:
    user, password = "alice", 'S3cret"pa$$/wörd'
    userinfo = f"{quote(user, safe='')}:{quote(password, safe='')}@"
    forbidden = _forms(password) | _forms(f"{user}:{password}") | {userinfo}
    outputs = []
    # A healthy server, in text and JSON; one that echoes the credentials in its errors (a
    # careless proxy); no server at all (the connection error names the URL); a bad URL.
    for fault, output_format in (("none", "text"), ("none", "json"), ("echo_auth", "text")):
        with FakeServer(fault) as server:
            url = server.url.replace("http://", f"http://{userinfo}")
            result = _cli(url, "--case", str(tmp_path), "--max-concurrency", "1",
                          "--format", output_format)  # fmt: skip
        assert result.exit_code == (0 if fault == "none" else 1), result.stderr
        expected = "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()
        assert server.state.authorization == {expected}
        assert f"http://127.0.0.1:{server.url.rsplit(':', 1)[1]}" in result.stdout
        if fault == "echo_auth":  # the server's error is kept, masked (and shown as text)
            assert "HTTP 401: refused Basic [redacted] ([redacted])" in result.stdout
        outputs += [result.stdout, result.stderr]
    unreachable = _cli(f"http://{userinfo}127.0.0.1:9", "--case", str(tmp_path), "--format", "json")
    assert unreachable.exit_code == 2 and "http://127.0.0.1:9" in unreachable.stdout
    bad = _cli(f"ftp://{userinfo}example.com:99999999", "--case", str(tmp_path))
    assert bad.exit_code == 2 and "ftp://example.com" in bad.stderr
    # Not percent-encoded: httpx's own error would quote a piece of the password as the port.
    raw = _cli(f"http://{user}:{password}@127.0.0.1:9", "--case", str(tmp_path))
    assert raw.exit_code == 2 and "'http://127.0.0.1:9' is not a valid URL" in raw.stderr
    both = _cli(
        f"http://{userinfo}127.0.0.1:9", "--api-key-env", "MY_KEY", "--case", str(tmp_path),
        env={"MY_KEY": "k" * 20},
    )  # fmt: skip
    assert both.exit_code == 2 and "not both" in both.stderr
    outputs += [unreachable.stdout, unreachable.stderr, bad.stderr, raw.stderr, both.stderr]
    written = _written(tmp_path, *outputs)
    leaked = sorted(form for form in forbidden if form in written)
    assert leaked == [], leaked


@pytest.mark.slow
def test_node_ties_the_run_to_the_newest_baseline_of_that_node(
    tmp_path: Path, kb: KnowledgeBase
) -> None:
    """`--node` names where the server runs; the case's baseline of that node gives the driver
    and GPUs there. A node the case has no baseline of is named, its driver unknown."""
    case = tmp_path / "case"
    _capture(_node(tmp_path / "r580", "580.105.08"), case, "after", kb)
    image = "vllm/vllm-openai:v0.11.0"
    with FakeServer() as server:
        tied = _cli(
            server.url, "--case", str(case), "--node", "GPU-NODE-17.dc1", "--image", image,
            "--max-concurrency", "2", "--format", "json",
        )  # fmt: skip
        other = _cli(
            server.url, "--case", str(case), "--node", "gpu-node-99", "--max-concurrency", "2",
            "--format", "markdown",
        )  # fmt: skip
    assert tied.exit_code == 0, tied.stderr
    summary = json.loads(tied.stdout)
    node = summary["node"]
    assert (node["name"], node["named_by"], node["baseline"]) == (
        "GPU-NODE-17.dc1",
        "flag",
        "after",
    )
    assert (node["driver"], node["gpus"]) == ("580.105.08", 8) and node["gpu_model"]
    assert summary["image"] == image
    assert other.exit_code == 0, other.stderr
    assert "node gpu-node-99: driver unknown" in other.stdout


def test_a_node_or_image_name_that_is_no_name_exits_2(tmp_path: Path) -> None:
    for flag, value in (("--node", "gpu 17"), ("--node", "x" * 300), ("--image", "a\tb")):
        result = _cli("http://127.0.0.1:9", "--case", str(tmp_path), flag, value)
        assert result.exit_code == 2, (flag, result.stderr)
        assert result.stderr.strip().count("\n") == 0 and flag in result.stderr
        assert "Traceback" not in result.stderr
