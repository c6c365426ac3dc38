"""Knowledge tables for `vllm-triage knowledge show`: every fact with its certainty and source."""

from __future__ import annotations

from collections.abc import Callable

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from vllm_triage.errors import InputError
from vllm_triage.knowledge import KnowledgeBase


def _table(title: str, columns: list[str], rows: list[list[str]]) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for column in columns:
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*(escape(cell) for cell in row))
    return table


def _cuda(kb: KnowledgeBase) -> RenderableType:
    return _table(
        "CUDA toolkit release -> minimum Linux driver",
        ["CUDA", "release", "min driver", "certainty", "source"],
        [
            [
                str(r.cuda_version),
                r.release,
                str(r.min_linux_driver or "not established"),
                r.certainty,
                r.source,
            ]
            for r in kb.toolkits
        ],
    )


def _families(kb: KnowledgeBase) -> RenderableType:
    return _table(
        "Minor-version compatibility floors",
        ["family", "min driver", "note", "certainty", "source"],
        [
            [f"{r.major}.x", str(r.min_linux_driver), r.note, r.certainty, r.source]
            for r in kb.families
        ],
    )


def _branches(kb: KnowledgeBase) -> RenderableType:
    return _table(
        "Driver branches",
        ["branch", "type", "CUDA ceiling", "notes", "certainty"],
        [[r.branch, r.type, str(r.cuda_ceiling or "?"), r.notes, r.certainty] for r in kb.branches],
    )


def _gpus(kb: KnowledgeBase) -> RenderableType:
    return _table(
        "GPUs",
        ["name", "nvidia-smi name", "CC", "memory GB", "data center", "certainty"],
        [
            [
                g.name,
                g.nvidia_smi_pattern,
                g.compute_capability,
                g.memory_gb,
                "yes" if g.datacenter else "no",
                g.certainty,
            ]
            for g in kb.gpus
        ],
    )


def _forward(kb: KnowledgeBase) -> RenderableType:
    fc = kb.forward_compat
    return Group(
        _table(
            f"CUDA forward compatibility ({fc.source}, as of {fc.as_of})",
            ["package", "supported base branches"],
            [[f"cuda-compat-{k.replace('.', '-')}", ", ".join(v)] for k, v in fc.packages.items()],
        ),
        Text(f"GPUs: {fc.gpu_rule}\nBranches: {fc.branch_rule}"),
    )


def _images(kb: KnowledgeBase) -> RenderableType:
    images = kb.images
    rows = [[f"tag {t.tag}", str(t.cuda), t.note, t.source] for t in images.named_tags]
    rows += [
        [f"vX.Y.Z >= {r.since}", str(r.cuda), r.note, r.source]
        for r in images.default_cuda_by_release
    ]
    rows.append([f"suffix {images.suffix_pattern}", "from the suffix", "explicit variant tag", ""])
    return _table("vLLM images -> CUDA (tag fallback)", ["tag", "CUDA", "note", "source"], rows)


def _phases(kb: KnowledgeBase) -> RenderableType:
    return _table(
        "vLLM start-up milestones",
        ["milestone", "phase", "patterns"],
        [[m.id, m.phase, " | ".join(m.patterns)] for m in kb.phases.milestones],
    )


def _recipes(kb: KnowledgeBase) -> RenderableType:
    return Group(*(_recipe(kb, name) for name in sorted(kb.recipes)))


def _recipe(kb: KnowledgeBase, name: str) -> RenderableType:
    r = kb.recipes[name]
    rows = [
        ["name", r.name],
        ["image", f"{r.image} (CUDA {r.image_cuda})"],
        ["min vLLM", r.min_vllm_version],
        ["driver", f"{r.min_driver_branch}+: {r.driver_note}"],
        ["hardware", r.recommended_hardware],
        ["start-up", r.startup_note],
        *[[f"flag {f.flag}", f.why] for f in r.required_flags],
        *[
            [
                f"profile {p.id}{' (default)' if p.id == r.default_profile else ''}",
                f"{p.name}: {' '.join(f.flag for f in p.flags)}",
            ]
            for p in r.profiles
        ],
        ["tool calls", f"{' '.join(r.tool_calls.flags)}: {r.tool_calls.note}"],
        ["context", f"{r.context.max_model_len}: {r.context.note}"],
        [
            "all2all",
            f"RDMA {r.all2all_backends.rdma}, NVLink {r.all2all_backends.nvlink}: "
            f"{r.all2all_backends.note}",
        ],
        ["source", f"{r.source} (as of {r.as_of}, {r.certainty})"],
    ]
    return _table(f"Recipe {r.id}", ["field", "value"], rows)


def _signatures(kb: KnowledgeBase) -> RenderableType:
    return _table(
        "Log signatures",
        ["id", "name", "cause", "tier", "phase", "conf."],
        [[s.id, s.name, s.cause, s.tier, s.phase, f"{s.confidence:.2f}"] for s in kb.signatures],
    )


def _signature(kb: KnowledgeBase, rule: str) -> RenderableType:
    s = kb.signature(rule)
    assert s is not None
    rows = [
        ["cause", s.cause + "".join(f", {k}: {v}" for k, v in s.cause_by_phase.items())],
        ["tier / phase", f"{s.tier} / {s.phase}"],
        ["confidence", f"{s.confidence:.2f}"],
        ["summary", s.summary],
        ["explanation", s.explanation.strip()],
        *[["pattern", p] for p in s.patterns],
        *[["next step", step] for step in s.next_steps],
        *[["do not", item] for item in s.avoid],
        ["driver change", "advised" if s.driver_change_advised else "not advised"],
        ["source", f"{s.source} (as of {s.as_of})"],
    ]
    return _table(f"{s.id} {s.name}", ["field", "value"], rows)


def _redaction(kb: KnowledgeBase) -> RenderableType:
    redaction = kb.redaction
    return Group(
        _table(
            f"Redaction rules for collect (as of {redaction.as_of}; earlier rules win)",
            ["id", "kind", "name", "certainty", "source"],
            [[r.id, r.kind, r.name, r.certainty, r.source] for r in redaction.rules],
        ),
        _table(
            "Environment variables kept in a bundle (values redacted; secret names always win)",
            ["prefixes", "names", "why", "certainty"],
            [
                [" ".join(e.prefixes), " ".join(e.names), e.why, e.certainty]
                for e in redaction.env_allow
            ],
        ),
    )


def _fact_checks(kb: KnowledgeBase) -> RenderableType:
    return _table(
        "Fact checks over a collect bundle (diagnose --bundle)",
        ["id", "name", "class", "conf.", "summary", "source"],
        [
            [c.id, c.name, c.cause, f"{c.confidence:.2f}", c.summary, f"{c.source} ({c.as_of})"]
            for c in kb.fact_checks
        ],
    )


def _metrics(kb: KnowledgeBase) -> RenderableType:
    aliases = kb.vllm_metrics
    return _table(
        f"vLLM metric names validate reads, newest first ({aliases.source}, as of {aliases.as_of})",
        ["measures", "names"],
        [[logical, ", ".join(names)] for logical, names in aliases.metrics.items()],
    )


TOPICS: dict[str, Callable[[KnowledgeBase], RenderableType]] = {
    "cuda": _cuda,
    "families": _families,
    "branches": _branches,
    "gpus": _gpus,
    "forward-compat": _forward,
    "images": _images,
    "phases": _phases,
    "recipes": _recipes,
    "signatures": _signatures,
    "fact-checks": _fact_checks,
    "metrics": _metrics,
    "redaction": _redaction,
}


def knowledge_renderable(kb: KnowledgeBase, topic: str | None) -> RenderableType:
    """One topic, a recipe, or a signature by id or name; every topic when none is given."""
    if topic is None:
        return Group(*(render(kb) for render in TOPICS.values()))
    if topic in TOPICS:
        return TOPICS[topic](kb)
    if topic in kb.recipes:
        return _recipe(kb, topic)
    if kb.signature(topic):
        return _signature(kb, topic)
    raise InputError(
        f"unknown topic {topic!r}: use one of {', '.join(TOPICS)}, a recipe "
        f"({', '.join(sorted(kb.recipes))}) or a signature id such as VT101"
    )
