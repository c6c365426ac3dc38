"""`case show` for people, in their language: rich text for the terminal (one row per artifact with
its verdict, then the next step) and markdown (a jinja2 template) for the ticket.

Both are made from one view: each entry's verdict said again through the reader's catalog
(vllm_triage.runbook.verdicts), the next step's reason and command looked up by its id in the
runbook's data (vllm_triage.runbook.steps) and filled with its fields; machine values (paths,
causes, rung names, labels, versions, commands) are shown as they are."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from vllm_triage.i18n import N_, Catalog, Language, catalog
from vllm_triage.runbook.models import CaseSummary, NextStep, UnreadableEntry
from vllm_triage.runbook.steps import NOTES, REASONS, TITLES
from vllm_triage.runbook.verdicts import verdict

if TYPE_CHECKING:
    from jinja2 import Environment

_KIND = {
    "bundle": N_("bundle"),
    "diagnosis": N_("diagnosis"),
    "plan": N_("plan"),
    "baseline": N_("baseline"),
    "validation": N_("validation"),
    "baseline_comparison": N_("baseline comparison"),
    "prefix_check": N_("prefix-check"),
    "record": N_("record"),
    "report": N_("report"),
    "fleet_scan": N_("fleet scan"),
}


@dataclass(frozen=True)
class Row:
    kind: str
    path: str
    when: str
    verdict: str
    dim: bool


@dataclass(frozen=True)
class View:
    """Everything a rendering shows, already in the reader's language."""

    title: str
    title_markdown: str
    labels: dict[str, str]
    rows: list[Row]
    empty: str | None
    step: str
    command: str
    why: str
    notes: list[str]


def case_view(summary: CaseSummary, language: Language = "en") -> View:
    tr = catalog(language)
    rows = []
    for entry in summary.artifacts:
        earlier = bool(getattr(entry, "history", False))
        if isinstance(entry, UnreadableEntry):
            kind = tr(_KIND[entry.artifact]) + " " + tr("(unreadable)")
        else:
            kind = tr(_KIND[entry.kind])
        if earlier:
            kind += " " + tr("(earlier)")
        rows.append(Row(kind, entry.path, _when(entry.created_at), verdict(entry, tr), earlier))
    step = summary.next_step
    command, why, notes = _said(step, tr)
    return View(
        title=tr("case {case}", case=summary.case),
        title_markdown=tr("case {case}", case="`" + summary.case + "`"),
        labels={
            "artifact": tr("artifact"),
            "path": tr("path"),
            "made": tr("made (UTC)"),
            "verdict": tr("verdict"),
            "next": tr("next"),
            "why": tr("why"),
            "note": tr("note"),
            "next_step": tr("Next step"),
        },
        rows=rows,
        empty=None if rows else tr("the case holds nothing yet"),
        step=tr(TITLES[step.step]),
        command=command,
        why=why,
        notes=notes,
    )


def _said(step: NextStep, tr: Catalog) -> tuple[str, str, list[str]]:
    """The next step's command, reason and notes in the reader's language (as the JSON says them
    when the reason is not one this vllm-triage knows)."""
    reason = REASONS.get(step.reason)
    if reason is None:
        return step.command, step.why, [note.text for note in step.notes]
    notes = [
        tr(NOTES[note.id], **note.fields) if note.id in NOTES else note.text for note in step.notes
    ]
    return tr(reason.command, **step.fields), tr(reason.why, **step.fields), notes


def case_renderable(summary: CaseSummary, language: Language = "en") -> RenderableType:
    view = case_view(summary, language)
    table = Table(title=Text(view.title), title_justify="left", show_edge=False)
    for column in ("artifact", "path", "made", "verdict"):
        table.add_column(view.labels[column], overflow="fold")
    for row in view.rows:
        table.add_row(
            row.kind, Text(row.path), row.when, Text(row.verdict), style="dim" if row.dim else None
        )
    width = max(cell_len(view.labels[key]) for key in ("next", "why", "note")) + 2

    def label(key: str) -> str:  # padded by the cells it takes (Korean, Japanese: two each)
        return view.labels[key] + " " * (width - cell_len(view.labels[key]))

    footer = Text()
    if view.empty:
        footer.append(f"{view.empty}\n", style="dim")
    footer.append(f"{label('next')}{view.step}: ", style="bold")
    footer.append(f"{view.command}\n")
    footer.append(f"{label('why')}{view.why}\n")
    for note in view.notes:
        footer.append(f"{label('note')}{note}\n", style="yellow")
    return Group(table, Text(), footer)


def _when(created_at: str | None) -> str:
    """2026-12-01T08:34:33.970916+00:00 as 2026-12-01 08:34:33 (UTC; the JSON keeps it whole)."""
    return created_at[:19].replace("T", " ") if created_at else ""


def _env() -> Environment:
    from vllm_triage.render.jinja import markdown_environment

    return markdown_environment()


def case_markdown(summary: CaseSummary, language: Language = "en") -> str:
    """The case as markdown for the ticket: the artifacts' table, then the next step."""
    text: str = _env().get_template("case.md.j2").render(s=summary, v=case_view(summary, language))
    return text
