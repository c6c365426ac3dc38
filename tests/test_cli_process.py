"""The console script as users run it, in a child process: the documented exit codes (0 ok, 1
no-go, 2 bad input), one error line on stderr, and a start that works from a bare environment.
Everything else about the command line runs in-process (tests/cli.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from vllm_triage import __version__

REPO = Path(__file__).parent.parent
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"


def _run(*args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_TRIAGE_CASE"}
    return subprocess.run(
        [sys.executable, "-m", "vllm_triage", *args],
        cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


@pytest.mark.slow
def test_exit_0_and_the_default_case_folder(tmp_path: Path) -> None:
    done = _run("diagnose", str(EXAMPLE_LOG), "--format", "json", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["primary"]["cause"] == "driver_too_old"
    assert json.loads((tmp_path / "triage" / "diagnosis.json").read_text()) == json.loads(
        done.stdout
    )


@pytest.mark.slow
def test_exit_1_is_a_no_go(tmp_path: Path) -> None:
    done = _run("compat", "--driver", "575.57.08", "--cuda", "13.0", cwd=tmp_path)
    assert done.returncode == 1 and "incompatible" in done.stdout
    assert done.stderr == "" and list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("diagnose", "missing.log"), "missing.log: no such file"),
        (("compat", "--driver", "banana", "--cuda", "13.0"), "malformed driver version"),
        (("case", "show", "nowhere"), "nowhere: no such case folder"),
        (("diagnose", "--no-such-option"), "No such option"),
    ],
)
@pytest.mark.slow
def test_exit_2_is_one_line(tmp_path: Path, args: tuple[str, ...], words: str) -> None:
    done = _run(*args, cwd=tmp_path)
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.startswith("vllm-triage: error:") and done.stderr.count("\n") == 1
    assert words in done.stderr


@pytest.mark.slow
def test_the_installed_script_starts(tmp_path: Path) -> None:
    script = shutil.which("vllm-triage", path=str(Path(sys.executable).parent))
    assert script is not None, "the console script is installed next to the interpreter"
    done = subprocess.run(
        [script, "--version"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0 and done.stdout == f"vllm-triage {__version__}\n"
    helped = subprocess.run(
        [script, "--help"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert helped.returncode == 0
    for command in ("collect", "diagnose", "validate", "prefix-check", "compat", "case"):
        assert command in helped.stdout
