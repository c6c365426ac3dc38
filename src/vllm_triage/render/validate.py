"""Terminal output of `validate`: a live line per rung while it runs, a table at the end (with the
starts and the compared endpoint when there are)."""

from __future__ import annotations

import json
from pathlib import Path

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from vllm_triage.validate.ladder import ValidateResult
from vllm_triage.validate.models import (
    EndpointComparison,
    RungComparison,
    RungResult,
    StartSummary,
    ValidationRun,
)

_STYLE = {"passed": "green", "failed": "bold red", "skipped": "dim", "not_supported": "yellow"}
_HEADLINE = (
    "ttft_p50_s", "stream_ttft_s", "prompt_processing_s", "prompt_tokens", "hits", "queries",
    "hit_rate", "last_good_level", "valid", "format_errors", "version", "max_model_len",
    "avg_bus_bandwidth_gbps", "tools",
)  # fmt: skip


def rung_line(result: RungResult) -> Text:
    """One line for a finished rung (printed as the ladder goes)."""
    line = Text()
    line.append(f"{result.name:<18}", style="bold")
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


def _seconds(value: float | None) -> str:
    return "-" if value is None else f"{value:.1f}"


def starts_table(starts: StartSummary) -> Table:
    """One row per start: outcome, time to /health, engine initialisation, stop, diagnosis."""
    table = Table(
        title=Text(
            f"starts on {starts.node}: {starts.ready} of {starts.requested} ready "
            f"({' '.join(starts.command)[:120]})"
        ),
        title_justify="left",
    )
    for column in ("start", "outcome", "ready s", "engine init s", "stopped", "reason", "log"):
        table.add_column(column, overflow="fold")
    for start in starts.starts:
        reason = start.reason or ""
        if start.diagnosis is not None:
            reason += f" diagnosis: {start.diagnosis.cause} ({start.diagnosis.phase})"
        table.add_row(
            str(start.number),
            Text(start.outcome, style="green" if start.outcome == "ready" else "bold red"),
            _seconds(start.ready_s),
            _seconds(start.engine_init_s),
            start.stopped_by or "-",
            Text(reason.strip()),
            Text(f"{Path(start.log).parent.name}/{Path(start.log).name}" if start.log else ""),
        )
    return table


def _pair_figures(rung: RungComparison) -> dict[str, str]:
    """The headline figures of a rung on both endpoints: `this | other`."""
    return {
        key: f"{_compact(pair[0])} | {_compact(pair[1])}"
        for key, pair in rung.figures.items()
        if key.rsplit(".", 1)[-1] in _HEADLINE or key.endswith(("ttft_p50_s", "errors"))
    }


def comparison_table(run_url: str, comparison: EndpointComparison) -> Table:
    """Each rung on both endpoints, with the headline figures side by side."""
    table = Table(
        title=Text(f"same requests: {run_url}  vs  {comparison.url} ({comparison.model})"),
        title_justify="left",
    )
    for column in ("rung", "this", "other", "both passed", "figures (this | other)"):
        table.add_column(column, overflow="fold")
    for rung in comparison.rungs:
        shown = _pair_figures(rung)
        table.add_row(
            rung.name,
            Text(rung.this or "-", style=_STYLE.get(rung.this or "", "")),
            Text(rung.other or "-", style=_STYLE.get(rung.other or "", "")),
            "yes" if rung.both_passed else f"same ({rung.this})" if rung.same_status else "no",
            Text("; ".join(f"{k} {v}" for k, v in shown.items())),
        )
    return table


def node_line(run: ValidationRun) -> str:
    """Where the run ran, and what ties it to a driver: the record's evidence for a node."""
    node = run.node
    image = f"; image {run.image}" if run.image else ""
    if node.name is None:
        return f"node not named (give --node NAME){image}"
    if node.baseline is None:
        return (
            f"node {node.name}: driver unknown (no baseline of this node in the case: "
            f"`vllm-triage baseline capture` on it){image}"
        )
    gpus = f", {node.gpus}x {node.gpu_model}" if node.gpus else ""
    return f"node {node.name}: driver {node.driver or '?'}{gpus} (baseline {node.baseline}){image}"


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
        f"   tool calls ({run.tool_calls.mode}) {run.tool_calls.valid}/{run.tool_calls.requests} "
        f"valid, {run.tool_calls.format_errors} with format errors"
        f"   structured output {run.structured_output.valid}/{run.structured_output.requests} "
        f"valid, {run.structured_output.format_errors} with format errors\n"
    )
    parts: list[RenderableType] = []
    if run.starts is not None:
        parts.append(starts_table(run.starts))
        if run.starts.engine_init_s:
            verdict.append(
                "engine initialisation "
                + ", ".join(f"{s:.1f} s" for s in run.starts.engine_init_s)
                + "   ready after "
                + ", ".join(f"{s:.1f} s" for s in run.starts.ready_s)
                + "\n"
            )
    parts.append(table)
    if run.comparison is not None:
        parts.append(comparison_table(run.url, run.comparison))
        other = run.comparison
        verdict.append(
            f"compared with {other.url}: {'PASSED' if other.passed else 'FAILED'}, both passed: "
            f"{'yes' if other.both_passed else 'no'}\n",
            style="bold green" if other.both_passed else "bold red",
        )
    verdict.append(f"{node_line(run)}\n")
    verdict.append(f"records  {run.records}\nsummary  {result.folder / 'summary.json'}\n")
    return Group(*parts, verdict)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def validate_markdown(result: ValidateResult) -> str:
    """The run as markdown, ready to paste into a ticket: the rungs with their headline figures,
    the tallies, and the starts and the compared endpoint when there are."""
    from vllm_triage.render.markdown import render_markdown

    run = result.run
    rungs = [
        {
            "name": rung.name,
            "status": rung.status,
            "duration_s": rung.duration_s,
            "reason": _one_line("; ".join(filter(None, [rung.reason, *rung.findings]))),
            "figures": _one_line(_figures(rung)),
        }
        for rung in run.rungs
    ]
    starts = [
        {
            "number": start.number,
            "outcome": start.outcome,
            "ready_s": _seconds(start.ready_s),
            "engine_init_s": _seconds(start.engine_init_s),
            "stopped_by": start.stopped_by or "-",
            "reason": _one_line(
                (start.reason or "")
                + (
                    f" diagnosis: {start.diagnosis.cause} ({start.diagnosis.phase})"
                    if start.diagnosis is not None
                    else ""
                )
            ),
        }
        for start in (run.starts.starts if run.starts else [])
    ]
    compared = [
        {
            "name": rung.name,
            "this": rung.this or "-",
            "other": rung.other or "-",
            "both": "yes"
            if rung.both_passed
            else f"same ({rung.this})"
            if rung.same_status
            else "no",
            "figures": _one_line("; ".join(f"{k} {v}" for k, v in _pair_figures(rung).items())),
        }
        for rung in (run.comparison.rungs if run.comparison else [])
    ]
    return render_markdown(
        "validate.md.j2",
        run=run,
        rungs=rungs,
        starts=starts,
        compared=compared,
        summary=str(result.folder / "summary.json"),
        node=node_line(run),
    )
