"""`diagnose` on the real vLLM CPU server's own logs (tests/realserver.py): a healthy run, a run
with refused requests, a run stopped with SIGTERM are `no_failure` with the right notes; a start
killed half-way is not.

One server of this module's own (its log must end with our SIGTERM) serves a few requests, some
of which it refuses (tools without a tool parser, an image for a text-only model, an unknown
model); its log is diagnosed while it runs and again after the stop. A second start is stopped
with SIGTERM once it has begun to load the weights; its weights file is a named pipe that nobody
writes, so that start cannot get past loading however fast the machine is. These tests carry the
`realserver` marker (conftest adds it for the `tiny_llama` fixture).
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import realserver

from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.models import Diagnosis

HALF_WAY_MARK = "Starting to load model"
HALF_WAY_TIMEOUT_S = 240.0
ACCESS_LOG_TIMEOUT_S = 60.0
CHAT_ACCESS = '"POST /v1/chat/completions HTTP/1.1"'
HEALTH_ACCESS = '"GET /health HTTP/1.1"'
WEATHER_TOOL = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "description": "Get the weather for a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}},
    },
}


@dataclass(frozen=True)
class Run:
    """Copies of the server's log at three points of its life."""

    healthy: Path  # after plain requests, still running
    refused: Path  # after refused requests, still running
    stopped: Path  # after SIGTERM
    refused_count: int


def _access_lines(log: Path, request: str) -> int:
    return log.read_text(errors="replace").count(request)


def _wait_for_access_lines(log: Path, request: str, count: int) -> None:
    """Until the server's access log holds `count` lines of `request`: uvicorn writes each one
    after its response has gone out."""
    deadline = time.monotonic() + ACCESS_LOG_TIMEOUT_S  # a failure detector, not a measure
    while _access_lines(log, request) < count:
        assert time.monotonic() < deadline, realserver.log_tail(log)
        time.sleep(0.05)


def _snapshot(log: Path, target: Path) -> Path:
    target.write_bytes(log.read_bytes())
    return target


def _chat(client: httpx.Client, **body: object) -> httpx.Response:
    payload = {
        "model": realserver.SERVED_MODEL_NAME,
        "messages": [{"role": "user", "content": "hi"}],
        "max_tokens": 4,
        "temperature": 0,
        **body,
    }
    return client.post("/v1/chat/completions", json=payload)


@pytest.fixture(scope="module")
def run(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Run:
    folder = tmp_path_factory.mktemp("diagnose-realserver")
    with realserver.serve(tiny_llama, name="diagnose_realserver", log_dir=folder) as server:
        with server.client(timeout=120.0) as client:
            chats = _access_lines(server.log_path, CHAT_ACCESS)
            for _ in range(2):
                assert _chat(client).status_code == 200
            assert client.get("/health").status_code == 200
            _wait_for_access_lines(server.log_path, CHAT_ACCESS, chats + 2)
            _wait_for_access_lines(server.log_path, HEALTH_ACCESS, 1)
            healthy = _snapshot(server.log_path, folder / "healthy.log")
            refused = [
                _chat(client, tools=[WEATHER_TOOL], tool_choice="auto"),
                _chat(
                    client,
                    messages=[
                        {
                            "role": "user",
                            "content": [
                                {"type": "text", "text": "what is this?"},
                                {
                                    "type": "image_url",
                                    "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="},
                                },
                            ],
                        }
                    ],
                ),
                _chat(client, model="no-such-model"),
            ]
            assert [r.status_code // 100 for r in refused] == [4, 4, 4]
            assert _chat(client).status_code == 200
            _wait_for_access_lines(server.log_path, CHAT_ACCESS, chats + 2 + len(refused) + 1)
            refused_log = _snapshot(server.log_path, folder / "refused.log")
        log_path = server.log_path
    stopped = _snapshot(log_path, folder / "stopped.log")
    return Run(healthy, refused_log, stopped, len(refused))


def _diagnose(log: Path) -> Diagnosis:
    return diagnose(DiagnoseOptions(logs=(str(log),)))


def test_a_healthy_running_server_is_no_failure(run: Run) -> None:
    result = _diagnose(run.healthy)
    assert result.primary.cause == "no_failure"
    assert result.primary.driver_change_advised is False
    assert result.serving is not None and result.serving.started and result.serving.served
    assert result.serving.requests.ok >= 3  # the warm-up and two chats
    assert result.serving.requests.probes >= 1
    assert result.serving.stop is None
    assert "still running" in result.primary.summary
    assert not [f for f in result.findings if f.role == "request"]


def test_refused_requests_are_findings_of_a_healthy_server(run: Run) -> None:
    result = _diagnose(run.refused)
    assert result.primary.cause == "no_failure"
    requests = result.serving.requests if result.serving else None
    assert requests is not None and requests.client_errors == run.refused_count
    access = next(f for f in result.findings if f.rule == "access log")
    assert access.role == "request" and access.count == run.refused_count
    assert access.evidence and " 400 " in access.evidence[0].text
    assert f"{run.refused_count} answered with an error" in result.primary.summary


def test_a_server_stopped_with_sigterm_is_no_failure_with_when(run: Run) -> None:
    result = _diagnose(run.stopped)
    assert result.primary.cause == "no_failure"
    serving = result.serving
    assert serving is not None and serving.healthy
    assert serving.stopped_by_signal and serving.stop is not None
    assert serving.stop_time is not None and serving.stop_time in result.primary.summary
    assert "SIGTERM" in result.primary.summary or "SIGINT" in result.primary.summary
    assert not any(f.driver_change_advised for f in result.findings)
    assert all(m.outcome != "primary" for m in result.decision)


def _model_that_blocks_at_its_weights(model: Path, folder: Path) -> Path:
    """The model's files linked into `folder`, each weights file a named pipe instead: opening it
    to load the weights waits for a writer, and none comes."""
    folder.mkdir()
    for source in model.iterdir():
        if source.suffix == ".safetensors":
            os.mkfifo(folder / source.name)
        else:
            (folder / source.name).symlink_to(source.resolve())
    return folder


def _start_and_kill_half_way(model: Path, log_path: Path) -> None:
    """Start `vllm serve` and stop it with SIGTERM once it has begun to load the weights."""
    python = realserver.vllm_python()
    assert python is not None
    argv = [
        str(realserver.vllm_command(python)), "serve", str(model),
        "--served-model-name", realserver.SERVED_MODEL_NAME,
        "--host", "127.0.0.1", "--port", str(realserver.free_port()),
        "--max-model-len", str(realserver.MAX_MODEL_LEN), "--enforce-eager",
    ]  # fmt: skip
    env = {
        **os.environ,
        **realserver.SERVER_ENV,
        "VLLM_CACHE_ROOT": str(realserver.CACHE_DIR / "vllm-cache"),
        "PATH": f"{python.parent}{os.pathsep}{os.environ.get('PATH', '')}",
    }
    log_path.write_bytes(b"")
    proc = realserver.launch(argv, log_path, env, log_path.parent)
    try:
        # a failure detector, not a measure: the mark comes within seconds of the start
        deadline = time.monotonic() + HALF_WAY_TIMEOUT_S
        while HALF_WAY_MARK not in log_path.read_text(errors="replace"):
            assert proc.poll() is None, realserver.log_tail(log_path)
            assert time.monotonic() < deadline, realserver.log_tail(log_path)
            time.sleep(0.2)
    finally:
        realserver.stop_process_group(proc)


@pytest.fixture(scope="module")
def killed_half_way(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    folder = tmp_path_factory.mktemp("diagnose-half-way")
    model = _model_that_blocks_at_its_weights(tiny_llama, folder / "model")
    log = folder / "half-way.log"
    _start_and_kill_half_way(model, log)
    yield log


def test_a_start_killed_half_way_is_not_no_failure(killed_half_way: Path) -> None:
    text = killed_half_way.read_text(errors="replace")
    assert HALF_WAY_MARK in text and "Application startup complete" not in text
    result = _diagnose(killed_half_way)
    assert result.primary.cause != "no_failure"
    assert result.serving is not None and not result.serving.started
    assert result.phase_reached in ("before_weights", "during_load")
    if result.primary.cause == "unknown":
        assert "stops in phase" in result.primary.summary
