"""Output of `capacity`: the verdict and its figures first, then what would change it and what the
estimate assumed; rich text for the terminal, markdown (a jinja2 template) for a ticket."""

from __future__ import annotations

from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vllm_triage.capacity.models import CapacityEstimate

if TYPE_CHECKING:
    from jinja2 import Environment

GIB = 1024**3
_STYLE = {"fits": "bold green", "tight": "bold yellow", "does_not_fit": "bold red"}


def _gib(value: float | None) -> str:
    return "unknown" if value is None else f"{value / GIB:,.2f} GiB"


def _view(e: CapacityEstimate) -> dict[str, str]:
    """The figures as people read them (GiB, thousands separators, the layout in words)."""
    p = e.parallel
    parallel = f"TP {p.tensor} x PP {p.pipeline} x DP {p.data}"
    if p.decode_context > 1:
        parallel += f", DCP {p.decode_context}"
    if p.expert_parallel:
        parallel += ", expert parallel"
    return {
        "params": f"{e.parameters / 1e9:,.2f}B",
        "weights_total": _gib(e.weights_bytes_total),
        "weights_per_gpu": _gib(e.weights_bytes_per_gpu),
        "reserve": _gib(e.reserve_bytes_per_gpu),
        "kv_memory": _gib(e.kv_memory_bytes_per_gpu),
        "kv_shortfall": _gib(max(0, -e.kv_memory_bytes_per_gpu)),
        "gpu_memory": _gib(e.gpu_memory_bytes),
        "parallel": parallel,
        "kv_tokens": "none (no layer keeps per-token KV)"
        if e.kv_tokens is None
        else f"{e.kv_tokens:,}",
    }


def _more_reasons(e: CapacityEstimate) -> list[str]:
    """The reasons the summary does not already say."""
    return [reason for reason in e.reasons if reason not in e.summary]


def _figures(e: CapacityEstimate, v: dict[str, str]) -> Table:
    table = Table.grid(padding=(0, 2))
    table.add_column(style="bold", no_wrap=True)
    table.add_column(overflow="fold")
    table.add_row(
        "Model",
        f"{e.model} ({e.architecture or e.model_type}, {v['params']} parameters, {e.attention})",
    )
    weights = f"{e.dtype}" + (f", {e.quantization}" if e.quantization else "")
    table.add_row("Weights", f"{weights}: {v['weights_total']} ({e.weights_source})")
    hardware = e.device
    if e.gpu_memory_bytes:
        hardware += (
            f", {v['gpu_memory']} usable each at --gpu-memory-utilization "
            f"{e.gpu_memory_utilization:g}"
        )
    table.add_row("Hardware", hardware)
    table.add_row("Parallel", f"{v['parallel']} ({e.gpus_needed} GPU(s))")
    context = f"--max-model-len {e.max_model_len:,}"
    if e.model_max_len:
        context += f" (the model allows {e.model_max_len:,})"
    table.add_row("Context", f"{context}, {e.concurrency} request(s) at once")
    table.add_row("", "")
    room = e.kv_memory_bytes_per_gpu
    kv_cache = (
        f"KV cache {v['kv_memory']}"
        if room >= 0
        else f"no room for a KV cache: {_gib(-room)} short"
    )
    table.add_row("Per GPU", f"weights {v['weights_per_gpu']}, reserve {v['reserve']}, {kv_cache}")
    per_token = (
        f"{e.kv_bytes_per_token:,} bytes (all GPUs of a replica, {e.kv_cache_dtype}), "
        f"{e.kv_bytes_per_token_per_gpu:,} per GPU"
    )
    if e.fixed_bytes_per_request:
        per_token += f"; plus {e.fixed_bytes_per_request:,} bytes of fixed state per request"
    table.add_row("KV per token", per_token)
    table.add_row("KV tokens", v["kv_tokens"])
    table.add_row(
        "Requests",
        f"{e.max_concurrency_at_max_model_len:,.2f} of {e.max_model_len:,} tokens at once; "
        f"{e.concurrency} request(s) can reach {e.max_context_at_concurrency:,} tokens"
        if e.kv_tokens is None or e.kv_tokens > 0
        else "none: the server cannot start with this layout",
    )
    return table


def capacity_renderable(e: CapacityEstimate) -> RenderableType:
    """The estimate for a terminal."""
    v = _view(e)
    head = Text(e.verdict, style=_STYLE[e.verdict])
    head.append(f"  {e.summary}", style="")
    parts: list[RenderableType] = [head, Text(""), _figures(e, v)]
    reasons = _more_reasons(e)
    if reasons:
        parts.append(Text("\nWhy", style="bold"))
        parts += [Text(f"  • {reason}") for reason in reasons]
    if e.changes:
        parts.append(Text("\nWhat would change it", style="bold"))
        for change in e.changes:
            line = Text("  ")
            line.append(f"{change.flag} {change.value}", style="bold")
            line.append(f"  {change.effect}")
            parts.append(line)
    panel = Panel(Group(*parts), title="Capacity (an estimate)", title_align="left")
    notes: list[RenderableType] = [Text(e.estimate_note, style="dim")]
    notes += [Text(f"Assumed: {note}", style="yellow") for note in e.assumptions]
    return Group(panel, *notes)


def _env() -> Environment:
    from vllm_triage.render.jinja import markdown_environment

    return markdown_environment()


def capacity_markdown(e: CapacityEstimate) -> str:
    """The estimate as markdown, ready to paste into a ticket."""
    return _env().get_template("capacity.md.j2").render(e=e, v=_view(e), reasons=_more_reasons(e))
