"""Terminal output of `prefix-check`: the reusable share, the problems and their fixes first."""

from __future__ import annotations

from statistics import median

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vllm_triage.prefix.models import Divergence, PrefixReport

MAX_ROWS = 6


def _percent(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 or share == 0 else f"{share:.1%}"


def _share_style(share: float) -> str:
    return "bold green" if share >= 0.8 else "bold yellow" if share >= 0.4 else "bold red"


def _overview(report: PrefixReport) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold")
    table.add_column()
    share = Text(_percent(report.reusable_share), style=_share_style(report.reusable_share))
    share.append(f" of {report.prompt_length:,} prompt {report.unit}")
    if report.reusable_share_if_fixed is not None:
        share.append("   if fixed: ")
        share.append(
            _percent(report.reusable_share_if_fixed),
            style=_share_style(report.reusable_share_if_fixed),
        )
    table.add_row("Reusable", share)
    shares = [r.share for r in report.requests]
    table.add_row(
        "Per request",
        f"min {_percent(min(shares))}, median {_percent(median(shares))}, "
        f"max {_percent(max(shares))}",
    )
    if report.launch is not None:
        launch = Text(report.launch.status, style="bold red" if report.launch.problem else "green")
        launch.append(f"  {report.launch.summary}", style="")
        if report.launch.fix:
            launch.append(f"\nFix: {report.launch.fix}", style="bold")
        table.add_row("Launch", launch)
    expected = [c for c in report.classes if c.expected]
    if expected:
        table.add_row("Expected", ", ".join(f"{c.kind} ({c.pairs} pairs)" for c in expected))
    return table


def _problems(report: PrefixReport) -> RenderableType:
    if not report.problems:
        return Text("No problems: the requests differ only where they are meant to.", style="green")
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold red", no_wrap=True)
    table.add_column()
    for count in report.problems:
        text = Text(f"{count.pairs} pair(s), first: {count.first_pair}")
        if count.fix:
            text.append(f"\nFix: {count.fix}")
        table.add_row(count.kind, text)
    for count in report.after_fixes:
        text = Text(
            f"{count.pairs} pair(s) once the above are fixed (hidden now), first: {count.first_pair}"
        )
        if count.fix:
            text.append(f"\nFix: {count.fix}")
        table.add_row(count.kind, text)
    return Group(Text("Problems", style="bold"), table)


def _pairs(divergences: list[Divergence], hidden: int) -> RenderableType:
    text = Text()
    text.append("First divergence per pair", style="bold")
    text.append(" (problems first; --format json lists every pair)\n", style="dim")
    for item in divergences:
        text.append(f"  lines {item.a_line}/{item.b_line}  ")
        text.append(item.kind, style="green" if item.expected else "bold red")
        text.append(f"  {item.where}  shared {item.common_prefix:,}\n")
        text.append(f"    a: {item.a_excerpt}\n", style="dim")
        text.append(f"    b: {item.b_excerpt}\n", style="dim")
    if hidden:
        text.append(f"  … and {hidden} more pairs\n")
    text.rstrip()
    return text


def prefix_renderable(report: PrefixReport) -> RenderableType:
    header = Text(
        f"{report.source}: {report.requests_compared} of {report.requests_read} requests compared, "
        f"{report.pairs_compared} pairs, lengths in {report.unit}"
        + (f" (tokenizer {report.tokenizer})" if report.tokenizer else ""),
        style="dim",
    )
    panel = Panel(
        Group(_overview(report), Text(""), _problems(report)),
        title="Prefix cache",
        title_align="left",
    )
    ordered = sorted(report.divergences, key=lambda d: d.expected)
    hidden = max(0, len(ordered) - MAX_ROWS)
    parts: list[RenderableType] = [header, panel, _pairs(ordered[:MAX_ROWS], hidden)]
    parts += [Text(f"Note: {note}", style="yellow") for note in report.notes]
    return Group(*parts)
