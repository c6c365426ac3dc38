"""Output of `fleet scan` and `fleet run`: rich text for the terminal, markdown for a ticket.

A fleet can be 10,000 nodes: the scan prints one row per node up to a small fleet, and beyond it
one row per (status, driver, GPU model) with the number of nodes and a few of their names; the
JSON (and fleet-scan.json in the case) always holds every node.
"""

from __future__ import annotations

import heapq
from collections import Counter, defaultdict
from collections.abc import Sequence

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from vllm_triage.fleet.models import STATUSES, FleetRun, NodeView, ScanView
from vllm_triage.knowledge.schema import gpu_name_key

PER_NODE_ROWS = 40
MARKDOWN_NODE_ROWS = 200
SHOWN_WAVES = 12
_ORDER = {status: index for index, status in enumerate(
    ("needs_upgrade", "forward_compat", "unsupported", "unknown", "ready")
)}  # fmt: skip
_STYLE = {
    "ready": "green",
    "forward_compat": "yellow",
    "needs_upgrade": "bold red",
    "unsupported": "red",
    "unknown": "magenta",
    "ok": "green",
    "failed": "bold red",
    "unreachable": "bold red",
}


def _ordered(nodes: Sequence[NodeView], first: int | None = None) -> list[NodeView]:
    """The nodes, worst status first, then by name; only the `first` ones when given (a
    million-node scan shows 200 rows: no sort of all of them)."""
    if first is not None and first < len(nodes):
        return heapq.nsmallest(first, nodes, key=lambda n: (_ORDER[n.status], n.name))
    return sorted(nodes, key=lambda n: (_ORDER[n.status], n.name))


def _groups(nodes: Sequence[NodeView]) -> list[tuple[tuple[str, str], list[NodeView]]]:
    """Nodes by (status, driver), the worst status first, then the largest group."""
    found: dict[tuple[str, str], list[NodeView]] = defaultdict(list)
    for node in nodes:
        found[(node.status, node.driver or "-")].append(node)
    return sorted(found.items(), key=lambda item: (_ORDER[item[0][0]], -len(item[1]), item[0]))


def _models(members: Sequence[NodeView], shown: int = 3) -> str:
    """The GPU models of a group (SHARED / MIG forms of one model counted as one)."""
    counted: dict[str, int] = defaultdict(int)
    for product, count in Counter(node.gpu for node in members).items():  # a few products
        counted[gpu_name_key(product) if product else "-"] += count
    ordered = sorted(counted.items(), key=lambda item: (-item[1], item[0]))
    text = ", ".join(f"{name} ({count:,})" for name, count in ordered[:shown])
    return text + (f", {len(ordered) - shown} more" if len(ordered) > shown else "")


def base_reason(node: NodeView) -> str:
    """The verdict's reason without what is particular to the node (classify.py appends
    "; labels N days old ..." and "; labels disagree ..." after it)."""
    return node.reason.split("; labels ", 1)[0]


def _reasons(groups: list[tuple[tuple[str, str], list[NodeView]]]) -> list[str]:
    """Each distinct reason once, in the groups' order."""
    seen: dict[str, None] = {}
    for _, members in groups:
        for node in members:
            seen.setdefault(base_reason(node), None)
    return list(seen)


def _names(nodes: Sequence[NodeView], shown: int = 3) -> str:
    names = ", ".join(node.name for node in nodes[:shown])
    return names + (f" and {len(nodes) - shown} more" if len(nodes) > shown else "")


def _counts(scan: ScanView) -> Text:
    line = Text()
    for status in STATUSES:
        count = scan.counts.get(status, 0)
        if count or status != "unsupported":
            line.append(f"{status} {count}", style=_STYLE[status] if count else "dim")
            line.append("   ")
    return line


def _wave_lines(scan: ScanView) -> list[str]:
    lines = []
    for number, wave in enumerate(scan.waves[:SHOWN_WAVES], 1):
        what = "canary" if number == 1 else f"{len(wave)} node(s)"
        names = ", ".join(wave) if len(wave) <= 4 else f"{wave[0]} ... {wave[-1]}"
        lines.append(f"{number}. {what}: {names}")
    if len(scan.waves) > SHOWN_WAVES:
        rest = scan.waves[SHOWN_WAVES:]
        lines.append(
            f"... {len(rest)} more wave(s), {sum(len(w) for w in rest)} node(s) (--format json)"
        )
    return lines


def _figures(scan: ScanView) -> str:
    """The image's three driver figures: `min driver` in the tables is the first."""
    recommended = (
        f"{scan.recommended_driver} ({scan.recommended_branch})"
        if scan.recommended_driver
        else (scan.recommended_branch or "not established")
    )
    return (
        f"min driver {scan.min_driver or 'not established'} (to start) · toolkit's driver "
        f"{scan.toolkit_driver or 'not established'} · recommended {recommended}"
    )


def fleet_scan_renderable(scan: ScanView) -> RenderableType:
    """The scan for a terminal."""
    head = Table.grid(padding=(0, 1))
    head.add_column(style="bold", no_wrap=True)
    head.add_column(overflow="fold")
    image = f"{scan.image}: " if scan.image else ""
    head.add_row("image", f"{image}CUDA {scan.cuda}, {scan.cuda_source}")
    if scan.image_pinned:
        head.add_row("pinned", scan.image_pinned)
    head.add_row("drivers", _figures(scan))
    head.add_row("nodes", scan.source)
    head.add_row("status", _counts(scan))
    parts: list[RenderableType] = [head]
    if len(scan.nodes) <= PER_NODE_ROWS:
        table = Table(title="nodes", title_justify="left", show_lines=False)
        for column in ("node", "status", "driver", "min driver", "GPU", "reason"):
            table.add_column(column, overflow="fold", no_wrap=column in ("node", "status"))
        for node in _ordered(scan.nodes):
            table.add_row(
                node.name,
                Text(node.status, style=_STYLE[node.status]),
                node.driver or "-",
                node.min_driver or "-",
                f"{node.gpu or '-'}" + (f" x{node.gpu_count}" if node.gpu_count else ""),
                node.reason,
            )
        parts.append(table)
    else:
        groups = _groups(scan.nodes)
        reasons = {reason: index for index, reason in enumerate(_reasons(groups), 1)}
        table = Table(title="nodes by status and driver", title_justify="left")
        for column in ("status", "driver", "nodes", "min driver", "GPUs", "why"):
            table.add_column(column, overflow="fold", no_wrap=column in ("status", "nodes"))
        for (status, driver), members in groups:
            stale = sum(1 for node in members if node.stale)
            count = f"{len(members):,}" + (f"\n{stale:,} stale" if stale else "")
            why = sorted({reasons[base_reason(node)] for node in members})
            table.add_row(
                Text(status, style=_STYLE[status]),
                driver,
                count,
                members[0].min_driver or "-",
                _models(members),
                " ".join(f"[{index}]" for index in why),
            )
        parts.append(table)
        parts += [Text(f"[{index}] {reason}") for reason, index in reasons.items()]
    if scan.waves:
        parts.append(Text(f"rollout waves (canary, then {scan.wave_size} at a time)", style="bold"))
        parts += [Text(f"  {line}") for line in _wave_lines(scan)]
    else:
        parts.append(Text("rollout: no node needs a driver change", style="bold"))
    parts += [Text(f"note: {note}", style="yellow") for note in scan.notes]
    return Group(*parts)


def _cell(text: object) -> str:
    return " ".join(str(text).split()).replace("|", "\\|").replace("`", "'")


def fleet_scan_markdown(scan: ScanView) -> str:
    """The scan as markdown, ready to paste into a ticket (every group, the first nodes)."""
    image = f"`{_cell(scan.image)}` " if scan.image else ""
    pinned = f" Pinned: `{_cell(scan.image_pinned)}`." if scan.image_pinned else ""
    out = [
        f"## vllm-triage fleet scan: {image}(CUDA {scan.cuda})",
        "",
        f"Image: {_cell(scan.cuda_source)}.{pinned} Nodes: {_cell(scan.source)}.",
        "",
        f"Drivers: {_cell(_figures(scan))}.",
        "",
        " · ".join(f"**{status}** {scan.counts.get(status, 0):,}" for status in STATUSES),
        "",
        "### By status and driver",
        "| status | driver | nodes | min driver | GPUs | why |",
        "|---|---|---|---|---|---|",
    ]
    for (status, driver), members in _groups(scan.nodes):
        why = "; ".join(dict.fromkeys(base_reason(node) for node in members))
        out.append(
            f"| {status} | {_cell(driver)} | {len(members):,} ({_cell(_names(members))}) | "
            f"{members[0].min_driver or '-'} | {_cell(_models(members))} | {_cell(why)} |"
        )
    out += ["", "### Rollout waves"]
    if scan.waves:
        out.append(
            f"A canary node first, then {scan.wave_size} at a time; nodes already ready are left out."
        )
        out.append("")
        out += _wave_lines(scan)
    else:
        out.append("No node needs a driver change.")
    out += [
        "",
        "### Nodes",
        "| node | status | driver | min driver | GPU | GPU pods | reason |",
        "|---|---|---|---|---|---|---|",
    ]
    for node in _ordered(scan.nodes, MARKDOWN_NODE_ROWS):
        pods = "?" if node.gpu_pods is None else str(node.gpu_pods)
        out.append(
            f"| {_cell(node.name)} | {node.status} | {_cell(node.driver or '-')} | "
            f"{node.min_driver or '-'} | {_cell(node.gpu or '-')} | {pods} | {_cell(node.reason)} |"
        )
    if len(scan.nodes) > MARKDOWN_NODE_ROWS:
        out.append(f"\n_{len(scan.nodes) - MARKDOWN_NODE_ROWS:,} more nodes in fleet-scan.json._")
    if scan.notes:
        out += ["", "### Notes", *(f"- {_cell(note)}" for note in scan.notes)]
    return "\n".join(out) + "\n"


def fleet_run_renderable(run: FleetRun) -> RenderableType:
    """A fleet run for a terminal: one row per host."""
    head = Text(f"fleet run {run.kind} through {run.engine}: ", style="bold")
    head.append(
        ", ".join(f"{state} {count}" for state, count in run.counts.items() if count) or "no host"
    )
    table = Table(title="hosts", title_justify="left")
    for column in ("host", "state", "exit", "go", "result / error", "files"):
        table.add_column(column, overflow="fold", no_wrap=column in ("host", "state"))
    for host in run.hosts:
        go = "-" if host.go is None else ("go" if host.go else "no-go")
        table.add_row(
            host.host,
            Text(host.state, style=_STYLE[host.state]),
            "-" if host.exit_code is None else str(host.exit_code),
            Text(go, style="green" if host.go else "red" if host.go is False else ""),
            host.error or _summary(host.result),
            "\n".join(host.files) or "-",
        )
    parts: list[RenderableType] = [head, table]
    parts += [Text(f"note: {note}", style="yellow") for note in run.notes]
    return Group(*parts)


def _summary(result: object) -> str:
    """One line about a host's JSON result: preflight's failed checks, a bundle's name."""
    if not isinstance(result, dict):
        return "-"
    checks = result.get("checks")
    if isinstance(checks, list):
        failed = [
            str(check.get("message") or check.get("id"))
            for check in checks
            if isinstance(check, dict) and check.get("ok") is False
        ]
        return "; ".join(failed[:3]) or "every check passed"
    for key in ("bundle", "archive", "name"):
        if isinstance(result.get(key), str):
            return str(result[key])
    return "-"


def fleet_run_markdown(run: FleetRun) -> str:
    """A fleet run as markdown."""
    out = [
        f"## vllm-triage fleet run {run.kind} ({run.engine})",
        "",
        " · ".join(f"**{state}** {count}" for state, count in run.counts.items()),
        "",
        "| host | state | exit | go | result / error | files |",
        "|---|---|---|---|---|---|",
    ]
    for host in run.hosts:
        go = "-" if host.go is None else ("go" if host.go else "no-go")
        out.append(
            f"| {_cell(host.host)} | {host.state} | "
            f"{'-' if host.exit_code is None else host.exit_code} | {go} | "
            f"{_cell(host.error or _summary(host.result))} | {_cell(', '.join(host.files) or '-')} |"
        )
    if run.notes:
        out += ["", "### Notes", *(f"- {_cell(note)}" for note in run.notes)]
    return "\n".join(out) + "\n"
