"""The redactor against a published scanner's own examples: gitleaks' true positives (638 secret
values from 219 rules, tests/data/gitleaks/) placed in a vLLM log bare, behind a neutral name,
behind the rule's own name and in a JSON args dump, and its false positives (`-s` prints the
figures). The floors are the measured figures of 2026-12-01, so that a change that loses ground
fails; issue 19's target is 99% in every placement (see the README's accuracy section for why
values with no name or prefix stop short of it)."""

from __future__ import annotations

import pytest
from gitleaks_harness import measure

from vllm_triage.redact import Redactor

FLOORS = {"bare": 0.84, "env_neutral": 0.83, "env_natural": 0.985, "json": 0.83}


@pytest.mark.slow
def test_gitleaks_examples_are_redacted(capsys: pytest.CaptureFixture[str]) -> None:
    redactor = Redactor()

    def redact(text: str) -> str:
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
