"""The library behind `vllm-triage report`: the whole case as one self-contained HTML page for
approvers (report.html in the case, an earlier one moved to history/), in English, Korean or
Japanese, and with `pdf` the same page printed to report.pdf by a headless Chromium.

A case folder that does not exist, or holds no artifact of vllm-triage at all, is a one-line
error and nothing is written: a page that only says "missing" six times helps no approver, and
writing report.html into a folder given by mistake (a typo in --case, the home folder) would
leave a stray file there. A case with some artifacts gets its page, each missing step saying so
and which command makes it. A corrupt artifact, or one from a newer vllm-triage, is a one-line
error naming it, and the earlier report stays as it was.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from pydantic import Field

from vllm_triage.case import REPORT, Case, CaseError, case_folder
from vllm_triage.i18n import Language, resolve_language
from vllm_triage.inputs import display_name
from vllm_triage.models import Artifact
from vllm_triage.report.gather import CaseRead, read_case
from vllm_triage.report.page import render_page
from vllm_triage.report.texts import MAKE_COMMANDS, SECTIONS

PDF = "report.pdf"


@dataclass(frozen=True)
class ReportOptions:
    """Which case to report on, in which language, and whether to print it to PDF (with which
    browser; None: the first Chromium on PATH)."""

    case: Path = field(default_factory=case_folder)
    lang: str | None = None
    pdf: bool = False
    browser: Path | None = None


class SectionState(Artifact):
    """One section of the page: whether the case holds its artifact, which files it shows, and
    the command that makes it when it is missing."""

    id: str
    present: bool
    artifacts: list[str] = Field(default_factory=list)
    command: str | None = Field(default=None, description="what makes it, when it is missing")


class ReportResult(Artifact):
    """The answer of `report`: where the page went, in which language, and each section's state."""

    case: str
    path: str = Field(description="report.html in the case")
    pdf: str | None = Field(default=None, description="report.pdf, when asked for")
    language: Language
    sections: list[SectionState]
    written: list[str] = Field(description="every file written, earlier reports moved included")
    stale_pdf: bool = Field(
        default=False, description="a report.pdf of an earlier report is still in the case"
    )


def report(options: ReportOptions) -> ReportResult:
    """Read the case, render the page, write report.html (and report.pdf) into the case."""
    language = resolve_language(options.lang)
    browser = None
    if options.pdf:  # before any work: a missing browser is known at once
        from vllm_triage.report.pdf import find_browser

        browser = find_browser(options.browser)
    read = read_case(options.case)
    if read.empty:
        raise CaseError(
            f"{display_name(options.case)}: holds no vllm-triage artifact (collect, diagnose, "
            "validate or prefix-check make them); no report written"
        )
    html = render_page(read, language, datetime.now(UTC))
    renderings: dict[str, str | bytes] = {".html": html}
    if browser is not None:
        from vllm_triage.report.pdf import print_pdf

        renderings[".pdf"] = print_pdf(browser, html)
    case = Case(options.case)
    written = case.save_current("report", b"", renderings)
    root = options.case
    return ReportResult(
        case=display_name(root),
        path=display_name(root / REPORT),
        pdf=display_name(root / PDF) if browser is not None else None,
        language=language,
        sections=_sections(read, display_name(root)),
        written=[display_name(path) for path in written],
        stale_pdf=browser is None and os.path.lexists(root / PDF),
    )


def _sections(read: CaseRead, case: str) -> list[SectionState]:
    """Each section's state, as the page shows it."""
    import shlex

    quoted = shlex.quote(case)
    found: dict[str, list[str]] = {
        "overview": [],
        "evidence": [bundle.path for bundle in read.bundles],
        "diagnosis": ["diagnosis.json"] if read.diagnosis is not None else [],
        "plan": ["plan.json"] if read.plan is not None else [],
        "fleet": [read.fleet.path] if read.fleet is not None else [],
        "baseline": [b.path for b in read.baselines]
        + (["baseline-comparison.json"] if read.comparison is not None else []),
        "validation": [run.path for run in read.runs] + [c.path for c in read.prefix_checks],
        "record": [read.record.path] if read.record is not None else [],
    }
    states = []
    for section in SECTIONS:
        present = section == "overview" or bool(found[section])
        command = MAKE_COMMANDS.get(section)
        states.append(
            SectionState(
                id=section,
                present=present,
                artifacts=found[section],
                command=None if present or command is None else command.format(case=quoted),
            )
        )
    return states
