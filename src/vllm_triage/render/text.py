"""Terminal output with rich: readable at a glance, the cause and the proof first."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vllm_triage.i18n import Language
from vllm_triage.models import CompatVerdict, Diagnosis, Fact, Finding, Serving
from vllm_triage.render.diagnosis import (
    ROLES,
    VERDICTS,
    Words,
    differential_line,
    localized,
    localized_compat,
)

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


_CAUSE_STYLE = {"unknown": "bold yellow", "no_failure": "bold green"}


def _finding_panel(finding: Finding, words: Words) -> Panel:
    header = Text()
    header.append(finding.cause, style=_CAUSE_STYLE.get(finding.cause, "bold red"))
    header.append(
        f"   {words.label('phase')} {finding.phase}   "
        f"{words.label('confidence')} {finding.confidence:.2f}"
    )
    if finding.rule:
        header.append(f"   {finding.rule}", style="dim")
    evidence = Text()
    for item in finding.evidence:
        # a log line is cut short; the compat verdict's explanation is a sentence, said whole
        compat = item.file == "compat"
        where = words.label("compat_evidence") if compat else item.where
        evidence.append(f"  {where}: ", style="cyan")
        evidence.append(f"{item.text if compat else _short(item.text)}\n")
    advice = Text(
        f"{words.label('driver_change')}: {words.yes_no(finding.driver_change_advised)}",
        style="bold red" if finding.driver_change_advised else "bold green",
    )
    parts: list[RenderableType] = [header, Text(finding.summary)]
    if finding.evidence:
        parts += [Text(words.label("evidence"), style="bold"), evidence]
    parts += [
        _bullets(words.label("next_steps"), finding.next_steps, "bold"),
        _bullets(words.label("avoid"), finding.avoid, "bold yellow"),
        advice,
    ]
    return Panel(Group(*parts), title=words.label("panel"), title_align="left")


def compat_renderable(verdict: CompatVerdict, words: Words | None = None) -> RenderableType:
    """The compat verdict in the reader's language (English without `words`)."""
    words = words or Words("en")
    verdict = localized_compat(verdict, words)
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    table.add_row(
        words.label("verdict"),
        Text(words.tr.word(VERDICTS, verdict.verdict), style=_VERDICT_STYLE[verdict.verdict]),
    )
    table.add_row(
        words.label("driver"),
        words.label(
            "driver_value",
            driver=verdict.driver,
            branch=verdict.driver_branch,
            ceiling=verdict.driver_cuda_ceiling or "?",
        ),
    )
    table.add_row(words.label("cuda_build"), verdict.cuda)
    if verdict.gpu:
        model = words.label(
            "gpu_value", model=verdict.gpu_model, capability=verdict.compute_capability
        )
        table.add_row(
            words.label("gpu"), escape(verdict.gpu) + (f" ({model})" if verdict.gpu_model else "")
        )
    if verdict.cause:
        table.add_row(words.label("cause"), verdict.cause)
    table.add_row(words.label("min_driver"), verdict.min_driver or words.label("not_established"))
    if verdict.toolkit_driver:
        table.add_row(words.label("toolkit_driver"), verdict.toolkit_driver)
    if verdict.recommended_driver:
        table.add_row(
            words.label("recommended_driver"),
            words.label(
                "recommended_value",
                driver=verdict.recommended_driver,
                branch=verdict.recommended_branch or "?",
            ),
        )
    table.add_row(words.label("rule"), verdict.rule)
    table.add_row(words.label("source"), verdict.source)
    parts: list[RenderableType] = [table, Text(verdict.explanation)]
    if verdict.conditions:
        parts.append(_bullets(words.label("conditions"), verdict.conditions, "bold yellow"))
    if verdict.advice:
        parts.append(_bullets(words.label("what_to_do"), verdict.advice, "bold green"))
    parts.append(_bullets(words.label("table_rows"), verdict.table_rows, "dim"))
    return Panel(Group(*parts), title=words.label("compat_title"), title_align="left")


def _where(fact: Fact, words: Words) -> str:
    if fact.evidence is not None:
        return f"{fact.evidence.file}:{fact.evidence.line}"
    if fact.source in ("flag", "bundle", "recipe"):
        return words.label(f"from_{fact.source}")
    return fact.source


def _facts_table(facts: list[Fact], words: Words) -> RenderableType:
    table = Table(title=words.label("facts"), title_justify="left", expand=True)
    for column in ("fact", "value", "from"):
        table.add_column(words.label(column), overflow="fold")
    for fact in facts:
        table.add_row(fact.key, escape(fact.value), escape(_where(fact, words)))
    return table


def _serving_text(serving: Serving, words: Words) -> RenderableType:
    text = Text()
    text.append(f"{words.label('server')}  ", style="bold")
    if serving.started_at is not None:
        where = f"{serving.started_at.file}:{serving.started_at.line}"
        text.append(words.label("started_at", where=where))
    elif serving.last_milestone:
        at = serving.last_milestone_at
        text.append(
            words.label("last_milestone", milestone=serving.last_milestone)
            + (f" ({at.file}:{at.line})" if at else "")
        )
    else:
        text.append(words.label("no_milestone"))
    requests = serving.requests
    total = requests.ok + requests.probes + requests.client_errors + requests.server_errors
    if total:
        more = "+" if requests.capped else ""
        counts = words.label(
            "requests_counts",
            ok=requests.ok,
            probes=requests.probes,
            client=requests.client_errors,
            server=requests.server_errors,
        )
        text.append("; " + words.label("requests_total", total=f"{total}{more}", counts=counts))
    if serving.stop is not None:
        how = words.label("stop_how_signal" if serving.stopped_by_signal else "stop_how_shutdown")
        when = f" {serving.stop_time}" if serving.stop_time else ""
        where = f"{serving.stop.file}:{serving.stop.line}"
        done = f", {words.label('shutdown_complete')}" if serving.shutdown_complete else ""
        text.append("; " + words.label("stop_at", how=f"{how}{when}", where=where) + done)
    return text


def _requests_table(findings: list[Finding], words: Words) -> RenderableType:
    table = Table(title=words.label("refused"), title_justify="left", expand=True)
    for column in ("what", "count", "rule", "first_example"):
        table.add_column(words.label(column), overflow="fold")
    for finding in findings:
        first = finding.evidence[0] if finding.evidence else None
        table.add_row(
            finding.cause if finding.cause != "no_failure" else words.label("refused_one"),
            _count(finding),
            finding.rule or "",
            escape(f"{first.where}: {_short(first.text)}") if first else "",
        )
    return table


def _count(finding: Finding) -> str:
    """A finding's count; "+" after it when it is a lower bound (as the requests' total)."""
    if finding.count is None:
        return ""
    return f"{finding.count}+" if finding.count_exact is False else str(finding.count)


def decision_renderable(diagnosis: Diagnosis, words: Words | None = None) -> RenderableType:
    """--explain: every rule that matched, its tier and phase, and what the weighing made of it."""
    words = words or Words("en")
    text = Text()
    text.append(f"{words.label('decision_explain')}\n", style="bold")
    style = {"primary": "bold green", "outranked": "yellow", "request": "cyan"}
    for match in diagnosis.decision:
        text.append(f"  {match.outcome:<9} ", style=style.get(match.outcome, "dim"))
        text.append(f"{match.rule}", style="bold")
        text.append(
            f"  {match.cause}, {match.tier}, {match.phase}, {match.file}:{match.line}, "
            f"{words.label('confidence')} {match.confidence:.2f}\n"
        )
        text.append(f"            {match.why}\n")
    if not diagnosis.decision:
        text.append(f"  {words.label('no_rule')}\n")
    return text


def diagnosis_renderable(
    diagnosis: Diagnosis, explain: bool = False, language: Language = "en"
) -> RenderableType:
    """The diagnosis for a terminal, its sentences and labels in `language`."""
    words = Words(language)
    diagnosis = localized(diagnosis, language)
    logs_read = words.label("logs_read", lines=diagnosis.lines_read, phase=diagnosis.phase_reached)
    parts: list[RenderableType] = [
        Text(f"{', '.join(diagnosis.inputs)}: {logs_read}", style="dim"),
        _finding_panel(diagnosis.primary, words),
    ]
    if (line := differential_line(diagnosis, words)) is not None:
        parts.append(Text(line, style="yellow"))
    if diagnosis.compat:
        parts.append(compat_renderable(diagnosis.compat, words))
    if diagnosis.serving is not None and (
        diagnosis.serving.started or diagnosis.serving.stop is not None
    ):
        parts.append(_serving_text(diagnosis.serving, words))
    if diagnosis.facts:
        parts.append(_facts_table(diagnosis.facts, words))
    requests = [f for f in diagnosis.findings if f.role == "request"]
    others = [f for f in diagnosis.findings if f.role != "request"]
    if requests:
        parts.append(_requests_table(requests, words))
    if others:
        table = Table(title=words.label("other_findings"), title_justify="left", expand=True)
        for column in ("cause", "role", "phase", "confidence", "rule", "first_evidence"):
            table.add_column(words.label(column), overflow="fold")
        for finding in others:
            first = finding.evidence[0] if finding.evidence else None
            table.add_row(
                finding.cause,
                words.tr.word(ROLES, finding.role),
                finding.phase,
                f"{finding.confidence:.2f}",
                finding.rule or "",
                escape(first.where) if first else "",
            )
        parts.append(table)
    if explain:
        parts.append(decision_renderable(diagnosis, words))
    for note in diagnosis.notes:
        parts.append(Text(f"{words.label('note')}: {note}", style="yellow"))
    return Group(*parts)
