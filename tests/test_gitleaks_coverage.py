"""The redactor against a published scanner's own examples: gitleaks' true positives (638 secret
values from 219 rules, tests/data/gitleaks/) placed in a vLLM log bare in a line of text, behind
the value's own name and a neutral one, in a JSON args dump under its own name (or, for a value
its example names by an option or header, in the command that holds it) and under a neutral
key, and its false positives (`-s` prints the figures). Each text gets a redactor of its own, as
each bundle does. Issue 19's target, 99%, is the floor bare, behind the own name and in JSON
under it; with no name at all the hex and UUID values stay in clear, as a bundle's ids and
digests do (see the README's accuracy section), and those floors are the figures of
2026-12-02, so that a change that loses ground fails."""

from __future__ import annotations

import pytest
from gitleaks_harness import measure

from vllm_triage.redact import Redactor

FLOORS = {
    "bare": 0.99,
    "env_natural": 0.99,
    "json_natural": 0.99,
    "env_neutral": 0.845,
    "json_neutral": 0.845,
}


@pytest.mark.slow
def test_gitleaks_examples_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    def redact(text: str) -> str:
        # a redactor per text, as per bundle: what it learned from one placement of a value
        # (a secret found by its name is redacted wherever it appears next) must not help another
        redactor = Redactor()
        out = redactor.text(text)
        redactor.end_of_file()
        return out

    report = measure(redact)
    with capsys.disabled():
        for name, placement in report.placements.items():
            print(f"\ngitleaks true positives, {name}: {placement.redacted}/{placement.total} "
                  f"({placement.share:.1%}) redacted")  # fmt: skip
        print(f"gitleaks false positives changed anyway: {report.fp_changed}/{report.fp_total} "
              f"({report.fp_share:.1%})")  # fmt: skip
    for name, floor in FLOORS.items():
        assert report.placements[name].share >= floor, (name, report.placements[name].share)
