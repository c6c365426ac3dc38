"""Accuracy on labelled real logs: the primary cause must match the label for >= 90% of files, and
no log whose label is not driver_too_old may get driver advice.

The bundled development corpus is always measured. Set VLLM_TRIAGE_CORPUS to a folder of the same
layout (labels.csv + logs/, e.g. a held-out set) to measure that too. The tool never sees the
file names, which contain the answer: it reads a copy under a neutral name.
"""

from __future__ import annotations

import csv
import os
import shutil
from collections import Counter
from pathlib import Path

import pytest

from vllm_triage.diagnose import diagnose

BAR = 0.90
CORPORA = [Path(__file__).parent / "data" / "corpus"]
if extra := os.environ.get("VLLM_TRIAGE_CORPUS"):
    CORPORA.append(Path(extra))


def _measure(corpus: Path, scratch: Path) -> tuple[int, int, list[str], Counter[str]]:
    with (corpus / "labels.csv").open(newline="") as handle:
        rows = list(csv.DictReader(handle))
    correct, wrong_advice, misses, per_label = 0, 0, [], Counter()
    for index, row in enumerate(rows):
        neutral = scratch / f"case-{index}.log"
        shutil.copyfile(corpus / "logs" / row["file"], neutral)
        result = diagnose([str(neutral)])
        per_label[row["label"]] += 1
        if result.primary.cause == row["label"]:
            correct += 1
        else:
            misses.append(f"{row['file']}: expected {row['label']}, got {result.primary.cause}")
        if row["label"] != "driver_too_old" and any(
            f.driver_change_advised for f in [result.primary, *result.findings]
        ):
            wrong_advice += 1
            misses.append(f"{row['file']}: driver change advised for {row['label']}")
    return correct, wrong_advice, misses, per_label


@pytest.mark.parametrize("corpus", CORPORA, ids=lambda p: p.name)
def test_corpus_accuracy(corpus: Path, tmp_path: Path, capsys):
    correct, wrong_advice, misses, per_label = _measure(corpus, tmp_path)
    total = sum(per_label.values())
    with capsys.disabled():
        print(
            f"\n[{corpus}] primary cause matches label: {correct}/{total} "
            f"({correct / total:.1%}); driver advice on non-driver labels: {wrong_advice}"
        )
        for miss in misses:
            print(f"  miss: {miss}")
    assert total > 0
    assert correct / total >= BAR
    assert wrong_advice == 0
