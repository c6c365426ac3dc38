"""Terminal and markdown output of `collect`: where the bundle is, how each probe went."""

from __future__ import annotations

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from vllm_triage.collect.api import CollectResult
from vllm_triage.collect.runner import ALLOWED_COMMANDS

_STATUS_STYLE = {"ok": "green", "not_available": "dim", "failed": "red", "timed_out": "yellow"}


def collect_renderable(result: CollectResult) -> RenderableType:
    table = Table(title="probes", title_justify="left", show_edge=False)
    for column in ("probe", "status", "seconds", "files", "reason / notes"):
        table.add_column(column)
    for probe in result.manifest.probes:
        detail = "; ".join(filter(None, [probe.reason, *probe.notes]))
        table.add_row(
            probe.name,
            Text(probe.status, style=_STATUS_STYLE[probe.status]),
            f"{probe.duration_s:.2f}",
            str(len(probe.files)),
            detail,
        )
    redacted = sum(result.manifest.redaction.values())
    counts = ", ".join(f"{rule} {n}" for rule, n in sorted(result.manifest.redaction.items()))
    footer = Text()
    footer.append(f"bundle   {result.folder}\n", style="bold")
    footer.append(f"archive  {result.archive}\n", style="bold")
    footer.append(f"files    {len(result.manifest.files)}\n")
    footer.append(f"redacted {redacted}" + (f" ({counts})" if counts else "") + "\n")
    footer.append(f"next     vllm-triage diagnose --case {result.case}\n")
    return Group(table, Text(), footer)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def collect_markdown(result: CollectResult) -> str:
    """The bundle and how each probe went, as markdown ready to paste into a ticket."""
    from vllm_triage.render.markdown import render_markdown

    manifest = result.manifest
    probes = [
        {
            "name": probe.name,
            "status": probe.status,
            "duration_s": probe.duration_s,
            "files": len(probe.files),
            "detail": _one_line("; ".join(filter(None, [probe.reason, *probe.notes]))),
        }
        for probe in manifest.probes
    ]
    return render_markdown(
        "collect.md.j2",
        r=result,
        m=manifest,
        folder=result.folder.name,
        probes=probes,
        redacted=sum(manifest.redaction.values()),
        counts=", ".join(f"{rule} {n}" for rule, n in sorted(manifest.redaction.items())),
    )


def allow_list_renderable() -> RenderableType:
    table = Table(title="the only commands collect runs", title_justify="left", show_edge=False)
    table.add_column("command")
    table.add_column("for")
    for command in ALLOWED_COMMANDS:
        table.add_row(
            " ".join(command.argv).replace("{script}", "<version script>"), command.purpose
        )
    return table
