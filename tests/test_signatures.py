"""Every log signature against its own positive and negative examples (ruff-style rule tests),
through the same normalisation the scanner uses, and the same patterns under grep -E."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from vllm_triage.diagnose.logreader import normalize
from vllm_triage.diagnose.signatures import CompiledSignature
from vllm_triage.knowledge import grep_patterns, load_knowledge

SIGNATURES = load_knowledge().signatures


def _fires(compiled: CompiledSignature, text: str) -> bool:
    line = normalize(text.encode(), 1)
    return compiled.regex.search(line.message) is not None


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: f"{s.id}-{s.name}")
def test_positive_examples_fire(sig):
    compiled = CompiledSignature.of(sig)
    for example in sig.examples.positive:
        assert _fires(compiled, example), example


@pytest.mark.parametrize("sig", SIGNATURES, ids=lambda s: f"{s.id}-{s.name}")
def test_negative_examples_do_not_fire(sig):
    compiled = CompiledSignature.of(sig)
    for example in sig.examples.negative:
        assert not _fires(compiled, example), example


def test_only_driver_threshold_rules_advise_a_driver_change():
    advising = {s.cause for s in SIGNATURES if s.driver_change_advised}
    assert advising == {"driver_too_old"}


def test_info_lines_are_not_errors(kb):
    compiled = CompiledSignature.of(kb.signature("VT999"))
    line = normalize(b"(APIServer pid=1) INFO 11-30 18:55:19 [x.py:1] ValueError: just a word", 1)
    assert line.level == "INFO" and not compiled.counts_at(line)


@pytest.mark.skipif(shutil.which("grep") is None, reason="grep not installed")
def test_grep_reads_the_patterns_as_python_does(tmp_path: Path, kb):
    """The benchmark compares against grep -E -f: the patterns must mean the same there."""
    patterns = tmp_path / "patterns.txt"
    patterns.write_text("\n".join(grep_patterns(kb)) + "\n")
    for sig in kb.signatures:
        for example in sig.examples.positive:
            sample = tmp_path / "sample.log"
            sample.write_text(example + "\n")
            done = subprocess.run(
                ["grep", "-c", "-E", "-f", str(patterns), str(sample)],
                capture_output=True,
                text=True,
                check=False,
            )
            assert done.stdout.strip() == "1", (sig.id, example, done.stderr)
