"""Terminal output with rich: readable at a glance, the cause and the proof first."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vllm_triage.models import CompatVerdict, Diagnosis, Finding

_VERDICT_STYLE = {
    "compatible": "bold green",
    "conditional": "bold yellow",
    "forward_compat_only": "bold magenta",
    "incompatible": "bold red",
}


_EVIDENCE_WIDTH = 220


def _short(text: str) -> str:
    return text if len(text) <= _EVIDENCE_WIDTH else text[: _EVIDENCE_WIDTH - 1] + "…"


def _bullets(title: str, items: list[str], style: str) -> RenderableType:
    text = Text()
    text.append(f"{title}\n", style=style)
    for item in items:
        text.append(f"  • {item}\n")
    return text


def _finding_panel(finding: Finding) -> Panel:
    header = Text()
    header.append(finding.cause, style="bold red" if finding.cause != "unknown" else "bold yellow")
    header.append(f"   phase {finding.phase}   confidence {finding.confidence:.2f}")
    if finding.rule:
        header.append(f"   {finding.rule}", style="dim")
    evidence = Text()
    for item in finding.evidence:
        where = "compat verdict" if item.file == "compat" else f"{item.file}:{item.line}"
        evidence.append(f"  {where}: ", style="cyan")
        evidence.append(f"{_short(item.text)}\n")
    advice = Text(
        "Driver change advised: yes"
        if finding.driver_change_advised
        else "Driver change advised: no",
        style="bold red" if finding.driver_change_advised else "bold green",
    )
    parts: list[RenderableType] = [header, Text(finding.summary)]
    if finding.evidence:
        parts += [Text("Evidence", style="bold"), evidence]
    parts += [
        _bullets("Next steps", finding.next_steps, "bold"),
        _bullets("Do not", finding.avoid, "bold yellow"),
        advice,
    ]
    return Panel(Group(*parts), title="Diagnosis", title_align="left")


def compat_renderable(verdict: CompatVerdict) -> RenderableType:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row("Verdict", Text(verdict.verdict, style=_VERDICT_STYLE[verdict.verdict]))
    table.add_row(
        "Driver",
        f"{verdict.driver} ({verdict.driver_branch}, CUDA up to {verdict.driver_cuda_ceiling or '?'})",
    )
    table.add_row("CUDA build", verdict.cuda)
    if verdict.gpu:
        table.add_row("GPU", escape(verdict.gpu))
    table.add_row("Minimum driver", verdict.min_driver or "not established")
    table.add_row("Rule", verdict.rule)
    table.add_row("Source", verdict.source)
    parts: list[RenderableType] = [table, Text(verdict.explanation)]
    if verdict.conditions:
        parts.append(_bullets("Conditions", verdict.conditions, "bold yellow"))
    parts.append(_bullets("Table rows used", verdict.table_rows, "dim"))
    return Panel(Group(*parts), title="Driver / CUDA compatibility", title_align="left")


def diagnosis_renderable(diagnosis: Diagnosis) -> RenderableType:
    parts: list[RenderableType] = [
        Text(
            f"{', '.join(diagnosis.inputs)}: {diagnosis.lines_read} lines, "
            f"reached {diagnosis.phase_reached}",
            style="dim",
        ),
        _finding_panel(diagnosis.primary),
    ]
    if diagnosis.compat:
        parts.append(compat_renderable(diagnosis.compat))
    if diagnosis.findings:
        table = Table(title="Other findings", title_justify="left", expand=True)
        for column in ("cause", "role", "phase", "conf.", "rule", "first seen"):
            table.add_column(column, overflow="fold")
        for finding in diagnosis.findings:
            first = finding.evidence[0] if finding.evidence else None
            table.add_row(
                finding.cause,
                finding.role,
                finding.phase,
                f"{finding.confidence:.2f}",
                finding.rule or "",
                escape(f"{first.file}:{first.line}") if first else "",
            )
        parts.append(table)
    for note in diagnosis.notes:
        parts.append(Text(f"Note: {note}", style="yellow"))
    return Group(*parts)
