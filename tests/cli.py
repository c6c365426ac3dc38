"""The one way tests run the command line: in-process, through click's CliRunner on the real
root command (which maps every error to one line and an exit code, as the console script does).
Standard output and standard error come back apart (click 8.2.1 and later keep them apart).

Each call gets its own case folder ($VLLM_TRIAGE_CASE, a fresh temporary folder removed after the
call) unless the test names one (--case, or `env`), so no test writes ./triage where it runs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from click.testing import CliRunner

from vllm_triage.cli import app


@dataclass(frozen=True)
class Result:
    exit_code: int
    stdout: str
    stderr: str


def run_cli(
    *args: str,
    input: str | bytes | None = None,
    env: Mapping[str, str] | None = None,
    cwd: Path | None = None,
) -> Result:
    """`vllm-triage ARGS` in this process: its exit code, standard output and standard error."""
    with tempfile.TemporaryDirectory(prefix="vllm-triage-case-") as scratch, _working_in(cwd):
        variables = {"COLUMNS": "200", "VLLM_TRIAGE_CASE": str(Path(scratch) / "triage")}
        variables.update(env or {})
        result = CliRunner().invoke(app, list(args), input=input, env=variables)
    return Result(result.exit_code, result.stdout, result.stderr)


@contextmanager
def _working_in(folder: Path | None) -> Iterator[None]:
    if folder is None:
        yield
        return
    before = Path.cwd()
    os.chdir(folder)
    try:
        yield
    finally:
        os.chdir(before)
