"""Commands at once on one case folder: a loop in a script, two terminals or an evaluation harness
start several `diagnose`, `plan` and `report` runs together. Each is a separate process with a
cold user cache ($XDG_CACHE_HOME empty, so they also build the knowledge cache at once), released
together from a pipe barrier (every child blocks reading a pipe whose write end the test closes:
an event, not a sleep). Every run must succeed and every artifact be kept: six diagnoses are one
current plus five in history, all distinct and readable.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import pytest
from deadlines import ends_in_time, watchdog_s

from vllm_triage import case as case_module
from vllm_triage.case import LOCK, Case, CaseError, read_artifact
from vllm_triage.models import Diagnosis
from vllm_triage.plan.models import Plan

REPO = Path(__file__).parent.parent
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
ROUNDS = 3

# Tells the test it is about to wait (fd `ready`), waits for the release (EOF on fd `go`), then
# runs the console script's entry point: the imports and the knowledge build come after the
# release, so the children race through all of it.
_LAUNCHER = """\
import os, sys
ready, go = int(sys.argv[1]), int(sys.argv[2])
os.write(ready, b".")
os.close(ready)
os.read(go, 1)
os.close(go)
sys.argv = ["vllm-triage", *sys.argv[3:]]
from vllm_triage.cli import main
main()
"""


def run_together(
    commands: Sequence[Sequence[str]], cwd: Path, cache: Path
) -> list[tuple[int, str]]:
    """Start every command as its own process, release them at once; (exit code, stderr) each."""
    env = {k: v for k, v in os.environ.items() if k != "VLLM_TRIAGE_CASE"}
    env |= {"XDG_CACHE_HOME": str(cache), "COLUMNS": "200"}
    ready_read, ready_write = os.pipe()
    go_read, go_write = os.pipe()
    children = []
    try:
        for command in commands:
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", _LAUNCHER, str(ready_write), str(go_read), *command],
                    cwd=cwd,
                    env=env,
                    pass_fds=(ready_write, go_read),
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                    stderr=subprocess.PIPE,
                )
            )
        os.close(ready_write)
        ready_write = -1
        waiting = b""
        while len(waiting) < len(commands):  # each child writes one byte before it blocks
            got = os.read(ready_read, 64)
            assert got, "a child ended before it reached the barrier"
            waiting += got
    finally:
        os.close(go_write)  # the release: every child's read of `go` ends at once
        for fd in (ready_read, ready_write, go_read):
            if fd >= 0:
                os.close(fd)
    results = []
    for child in children:
        _, stderr = child.communicate(timeout=watchdog_s(60))
        results.append((child.returncode, stderr.decode("utf-8", "replace")))
    return results


def _diagnose(case: Path) -> list[str]:
    return ["diagnose", str(EXAMPLE_LOG), "--case", str(case), "--format", "json"]


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_six_diagnoses_at_once_keep_all_six(tmp_path: Path, round_: int) -> None:
    case = tmp_path / "triage"
    results = run_together([_diagnose(case)] * 6, tmp_path, tmp_path / f"cache-{round_}")
    assert [code for code, _ in results] == [0] * 6, [err for _, err in results]
    assert all(err == "" for _, err in results), results
    current = Case(case).diagnosis_path
    history = Case(case).history("diagnosis")
    assert len(history) == 5, sorted(p.name for p in (case / "history").iterdir())
    documents = [read_artifact(path, Diagnosis) for path in (current, *history)]
    assert all(d.primary.cause == "driver_too_old" for d in documents)
    texts = {path.read_bytes() for path in (current, *history)}
    assert len(texts) == 6, "two of the six diagnoses are the same file"
    for path in (current, *history):  # each JSON has its markdown beside it
        markdown = path.with_suffix(".md")
        assert markdown.is_file() and markdown.read_text().strip(), markdown
    leftovers = [p.name for p in case.rglob("*.partial")]
    assert leftovers == [], leftovers


@pytest.mark.slow
@pytest.mark.parametrize("round_", range(ROUNDS))
def test_diagnose_plan_and_report_at_once(tmp_path: Path, round_: int) -> None:
    case = tmp_path / "triage"
    first = run_together([_diagnose(case)], tmp_path, tmp_path / "warm")
    assert first == [(0, "")], first
    commands = [
        _diagnose(case),
        _diagnose(case),
        ["plan", "--case", str(case), "--format", "json"],
        ["plan", "--case", str(case), "--format", "json"],
        ["report", "--case", str(case)],
        ["report", "--case", str(case)],
    ]
    results = run_together(commands, tmp_path, tmp_path / f"cache-{round_}")
    assert [code for code, _ in results] == [0] * 6, [err for _, err in results]
    assert len(Case(case).history("diagnosis")) == 2  # the first, and one of the two at once
    plans = [case / "plan.json", *Case(case).history("plan")]
    assert len(plans) == 2 and all(read_artifact(p, Plan).schema_version for p in plans)
    assert all(p.with_suffix(".md").is_file() for p in plans)
    reports = [case / "report.html", *(case / "history").glob("report-*.html")]
    assert len(reports) == 2 and all(p.read_text().startswith("<!") for p in reports)


def test_a_lock_held_for_ever_is_a_one_line_error_within_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A vllm-triage stopped (Ctrl-Z) while it holds the case's lock never lets go: the next
    writer gives up after LOCK_WAIT_S with a line saying so, and the case is as it was."""
    case = Case(tmp_path / "triage")
    case.save_current("first", b"{}", {})
    monkeypatch.setattr(case_module, "LOCK_WAIT_S", 0.2)
    holder = os.open(case.root / LOCK, os.O_RDWR)
    try:
        fcntl.flock(holder, fcntl.LOCK_EX)  # another open file: flock conflicts with it
        with ends_in_time(0.2), pytest.raises(CaseError, match=r"held this case's lock for 0\.2 s"):
            case.save_current("plan", b"{}", {".md": "plan"})
    finally:
        os.close(holder)
    assert sorted(p.name for p in case.root.iterdir()) == [LOCK, "first.json"]
    case.save_current("plan", b"{}", {".md": "plan"})  # released: the next writer goes on
    assert (case.root / "plan.json").read_bytes() == b"{}"
