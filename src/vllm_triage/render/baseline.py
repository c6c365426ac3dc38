"""Terminal and markdown output of `baseline capture` and `baseline compare`, in the reader's
language: every sentence comes from vllm_triage.baseline.texts (the `baseline` catalog), the
values (versions, device names, paths) as the artifact holds them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.cells import cell_len
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from vllm_triage.baseline import texts
from vllm_triage.collect.reasons import REASONS
from vllm_triage.i18n import N_, Catalog, Language, catalog

if TYPE_CHECKING:
    from jinja2 import Environment

    from vllm_triage.baseline.models import Baseline, BaselineComparison, ComparisonItem

_KIND_STYLE = {
    "regression": "bold red",
    "expected": "green",
    "changed": "yellow",
    "not_compared": "dim",
    "same": "dim",
}
_STATUS_STYLE = {"ok": "green", "not_available": "dim", "failed": "red", "timed_out": "yellow"}
# A probe's status in words (English shows the status itself).
PROBE_STATUSES = {
    "ok": N_("ok"),
    "not_available": N_("not available"),
    "failed": N_("failed"),
    "timed_out": N_("timed out"),
}
RUNTIMES = N_("(runtimes: {runtimes})")


@dataclass(frozen=True)
class ProbeRow:
    """A baseline's probe as its table shows it, in the reader's language."""

    name: str
    status: str
    status_word: str
    seconds: str
    why: str


def probe_rows(baseline: Baseline, tr: Catalog) -> list[ProbeRow]:
    """Each probe: its status in words, and why it found nothing (its reason said through the
    catalog, collect/reasons.py) followed by its notes."""
    return [
        ProbeRow(
            probe.name,
            probe.status,
            tr.word(PROBE_STATUSES, probe.status),
            f"{probe.duration_s:.2f}",
            "; ".join(filter(None, [tr.composed(probe.reason or "", REASONS), *probe.notes])),
        )
        for probe in baseline.probes
    ]


def finding(item: ComparisonItem, tr: Catalog) -> str:
    """A finding's sentence in the catalog's language (its English summary for a check this
    version does not know, e.g. from a newer vllm-triage)."""
    message = texts.FINDINGS.get((item.check, item.kind))
    if message is None:
        return item.summary
    return tr(
        message,
        subject=item.subject or "",
        before="-" if item.before is None else item.before,
        after="-" if item.after is None else item.after,
    )


def _verdict(comparison: BaselineComparison, tr: Catalog) -> str:
    if comparison.verdict == "regression":
        return tr(texts.VERDICT_REGRESSION, count=comparison.regressions)
    return tr(texts.VERDICT_OK, expected=comparison.expected)


def _counts(comparison: BaselineComparison, tr: Catalog) -> str:
    return tr(
        texts.COUNTS,
        regressions=comparison.regressions,
        expected=comparison.expected,
        changed=comparison.changed,
    )


def _target(comparison: BaselineComparison, tr: Catalog) -> str:
    if comparison.expect_driver:
        return tr(texts.TARGET, target=comparison.expect_driver)
    return tr(texts.NO_TARGET)


def comparison_renderable(comparison: BaselineComparison, language: Language) -> RenderableType:
    tr = catalog(language)
    title = tr(texts.COMPARISON_TITLE, before=comparison.before.label, after=comparison.after.label)
    table = Table(title=Text(title), title_justify="left", show_edge=False)
    table.add_column(tr(texts.COLUMN_KIND))
    table.add_column(tr(texts.COLUMN_CHECK))
    table.add_column(tr(texts.COLUMN_FINDING), overflow="fold")
    for entry in comparison.items:
        table.add_row(
            Text(tr(texts.KINDS[entry.kind]), style=_KIND_STYLE[entry.kind]),
            Text(entry.check),
            Text(finding(entry, tr)),
        )
    footer = Text()
    style = "bold red" if comparison.verdict == "regression" else "bold green"
    footer.append(_verdict(comparison, tr) + "\n", style=style)
    footer.append(_counts(comparison, tr) + "\n")
    footer.append(_target(comparison, tr) + "\n", style="dim")
    return Group(table, Text(), footer)


def _value(value: object, tr: Catalog) -> str:
    return tr(texts.UNKNOWN) if value in (None, "", []) else str(value)


def capture_rows(baseline: Baseline, tr: Catalog) -> list[tuple[str, str]]:
    """The baseline at a glance: (label, value) rows, shared by text and markdown."""
    gpu, host, container, comm = (
        baseline.gpu,
        baseline.host,
        baseline.container,
        baseline.communication,
    )
    driver = None
    if gpu and gpu.driver_version:
        driver = (
            f"{gpu.driver_version} ({gpu.driver_branch or '?'}, CUDA {gpu.cuda_ceiling or '?'})"
        )
    gpus = None
    if gpu and gpu.gpus:
        names = sorted({g.name for g in gpu.gpus})
        memory = sorted({g.memory_total_mib for g in gpu.gpus if g.memory_total_mib})
        gpus = f"{len(gpu.gpus)} x {', '.join(names)}" + (
            f", {'/'.join(str(m) for m in memory)} MiB" if memory else ""
        )
    engine = None
    if container and container.engine and container.engine != "none":
        engine = f"{container.engine} {container.engine_version or '?'}"
        if container.runtimes:
            engine += " " + tr(RUNTIMES, runtimes=", ".join(container.runtimes))
    nccl = None
    if comm and comm.nccl_version:
        nccl = f"{comm.nccl_version} ({_source(comm.nccl_version_source, tr)})"
    transport = None
    if comm and comm.nccl_transport:
        transport = f"{comm.nccl_transport} ({_source(comm.nccl_transport_source, tr)})"
    rdma = None
    if comm and comm.rdma_sources:
        rdma = f"{len(comm.rdma_devices)} ({', '.join(comm.rdma_sources)})"
        if comm.rdma_devices:
            rdma += ": " + ", ".join(d.name for d in comm.rdma_devices[:16])
    interfaces = None
    if comm and comm.interfaces:
        interfaces = ", ".join(f"{i.name} {i.state or '?'}" for i in comm.interfaces[:16])
    jobs = None
    if gpu is not None:
        jobs = str(len(gpu.processes))
    return [
        (tr(texts.LABEL_NODE), _value(baseline.node, tr)),
        (tr(texts.LABEL_DRIVER), _value(driver, tr)),
        (tr(texts.LABEL_GPUS), _value(gpus, tr)),
        (tr(texts.LABEL_GPU_JOBS), _value(jobs, tr)),
        (tr(texts.LABEL_KERNEL), _value(host.kernel if host else None, tr)),
        (tr(texts.LABEL_ENGINE), _value(engine, tr)),
        (tr(texts.LABEL_TOOLKIT), _value(container.toolkit_version if container else None, tr)),
        (tr(texts.LABEL_NCCL), _value(nccl, tr)),
        (tr(texts.LABEL_TRANSPORT), _value(transport, tr)),
        (tr(texts.LABEL_RDMA), _value(rdma, tr)),
        (tr(texts.LABEL_INTERFACES), _value(interfaces, tr)),
        (tr(texts.LABEL_ENDPOINT), _endpoint(baseline, tr)),
    ]


def _source(source: str | None, tr: Catalog) -> str:
    return tr.composed(source, texts.NCCL_SOURCES) if source else "?"


def _endpoint(baseline: Baseline, tr: Catalog) -> str:
    check = baseline.endpoint
    if check is None:
        return tr(texts.NOT_ASKED)
    if not check.ok:
        return tr(texts.ENDPOINT_FAILED, error=check.error or "?")
    answer = " ".join((check.answer or "").split())
    return tr(
        texts.ENDPOINT_OK,
        seconds=f"{check.seconds:.2f}" if check.seconds is not None else "?",
        model=check.model or "?",
        answer=answer[:120] + ("…" if len(answer) > 120 else ""),
    )


def capture_renderable(
    baseline: Baseline, folder: str, language: Language, previous: str | None = None
) -> RenderableType:
    """The baseline at a glance, how each probe went, where it is and what comes next
    (`previous`: the label of the case's latest earlier baseline, if any)."""
    tr = catalog(language)
    summary = Table(
        title=Text(tr(texts.BASELINE_TITLE, label=baseline.label)),
        title_justify="left",
        show_edge=False,
        show_header=False,
    )
    summary.add_column(tr(texts.COLUMN_ITEM), style="bold")
    summary.add_column(tr(texts.COLUMN_VALUE), overflow="fold")
    for name, value in capture_rows(baseline, tr):
        summary.add_row(name, Text(value))
    probes = Table(title=tr(texts.PROBES_TITLE), title_justify="left", show_edge=False)
    for column in (texts.COLUMN_PROBE, texts.COLUMN_STATUS, texts.COLUMN_SECONDS):
        probes.add_column(tr(column))
    probes.add_column(tr(texts.COLUMN_NOTES), overflow="fold")
    for row in probe_rows(baseline, tr):
        probes.add_row(
            row.name,
            Text(row.status_word, style=_STATUS_STYLE.get(row.status, "")),
            row.seconds,
            Text(row.why),
        )
    lines = [
        (tr(texts.LABEL_FOLDER), folder),
        (tr(texts.LABEL_FILES), str(len(baseline.files))),
        (tr(texts.LABEL_REDACTED), str(sum(baseline.redaction.values()))),
        (tr(texts.LABEL_NEXT), _next(baseline, previous, tr)),
    ]
    width = max(cell_len(name) for name, _ in lines)
    footer = Text()
    for number, (name, value) in enumerate(lines):
        padded = name + " " * (width - cell_len(name))
        footer.append(f"{padded}  {value}\n", style="bold" if number == 0 else None)
    return Group(summary, Text(), probes, Text(), footer)


def _next(baseline: Baseline, previous: str | None, tr: Catalog) -> str:
    """What to run next: compare with the case's earlier baseline, or capture after the change."""
    if previous is not None:
        return tr(texts.NEXT_COMPARE, before=previous, after=baseline.label)
    return tr(texts.NEXT_CAPTURE, label=baseline.label)


def _env() -> Environment:
    from vllm_triage.render.jinja import markdown_environment

    return markdown_environment()


def _labels(tr: Catalog) -> dict[str, str]:
    names = [
        name for name in dir(texts) if name.isupper() and isinstance(getattr(texts, name), str)
    ]
    return {name: tr(getattr(texts, name)) for name in names}


def comparison_markdown(comparison: BaselineComparison, language: Language) -> str:
    tr = catalog(language)
    rows: list[dict[str, Any]] = [
        {"kind": tr(texts.KINDS[i.kind]), "check": i.check, "finding": finding(i, tr)}
        for i in comparison.items
    ]
    return (
        _env()
        .get_template("baseline_compare.md.j2")
        .render(
            c=comparison,
            rows=rows,
            title=tr(
                texts.COMPARISON_TITLE,
                before=comparison.before.label,
                after=comparison.after.label,
            ),
            verdict=_verdict(comparison, tr),
            counts=_counts(comparison, tr),
            target=_target(comparison, tr),
            t=_labels(tr),
        )
    )


def capture_markdown(
    baseline: Baseline, folder: str, language: Language, previous: str | None = None
) -> str:
    tr = catalog(language)
    return (
        _env()
        .get_template("baseline_capture.md.j2")
        .render(
            b=baseline,
            folder=folder,
            title=tr(texts.BASELINE_TITLE, label=baseline.label),
            rows=capture_rows(baseline, tr),
            probes=probe_rows(baseline, tr),
            next=_next(baseline, previous, tr),
            t=_labels(tr),
        )
    )
