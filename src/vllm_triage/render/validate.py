"""Terminal output of `validate`: a live line per rung while it runs, a table at the end."""

from __future__ import annotations

import json

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from vllm_triage.validate.ladder import ValidateResult
from vllm_triage.validate.models import RungResult

_STYLE = {"passed": "green", "failed": "bold red", "skipped": "dim", "not_supported": "yellow"}
_HEADLINE = (
    "ttft_p50_s", "stream_ttft_s", "prompt_processing_s", "prompt_tokens", "hits", "queries",
    "hit_rate", "last_good_level", "valid", "format_errors", "version", "max_model_len",
    "avg_bus_bandwidth_gbps",
)  # fmt: skip


def rung_line(result: RungResult) -> Text:
    """One line for a finished rung (printed as the ladder goes)."""
    line = Text()
    line.append(f"{result.name:<15}", style="bold")
    line.append(f"{result.status:<14}", style=_STYLE[result.status])
    line.append(f"{result.duration_s:7.2f} s  ")
    if result.reason:
        line.append(result.reason)
    return line


def _compact(value: object) -> object:
    return round(value, 3) if isinstance(value, float) else value


def _figures(result: RungResult) -> str:
    shown = {k: _compact(v) for k, v in result.figures.items() if k in _HEADLINE and v is not None}
    if result.name == "concurrency" and isinstance(result.figures.get("levels"), dict):
        for level, figures in result.figures["levels"].items():
            shown[f"c{level}"] = (
                f"ttft p50 {_compact(figures['ttft_p50_s'])} s, "
                f"{_compact(figures['output_tokens_per_s'])} tok/s, "
                f"errors {figures['errors']}/{figures['requests']}"
            )
    return json.dumps(shown, default=str)[1:-1]


def validate_renderable(result: ValidateResult) -> RenderableType:
    run = result.run
    # Text, not str, for whatever came from the server: "[...]" in it is text, not rich markup.
    table = Table(
        title=Text(f"validate {run.url} ({run.model or 'no model'})"), title_justify="left"
    )
    for column in ("rung", "status", "seconds", "reason", "figures"):
        table.add_column(column, overflow="fold")
    for rung in run.rungs:
        table.add_row(
            rung.name,
            Text(rung.status, style=_STYLE[rung.status]),
            f"{rung.duration_s:.2f}",
            Text("; ".join(filter(None, [rung.reason, *rung.findings]))),
            Text(_figures(rung)),
        )
    verdict = Text()
    verdict.append(
        "PASSED" if run.passed else "FAILED", style="bold green" if run.passed else "bold red"
    )
    cache = run.prefix_cache
    verdict.append(
        f"   prefix cache enabled={cache.enabled} queries={cache.queries} hits={cache.hits}"
        f"   tool calls {run.tool_calls.valid}/{run.tool_calls.requests} valid, "
        f"{run.tool_calls.format_errors} with format errors\n"
    )
    verdict.append(f"records  {run.records}\nsummary  {result.folder / 'summary.json'}\n")
    return Group(table, verdict)
