"""The plan for people, in their language: rich text for the terminal, markdown (a jinja2
template) for the ticket and the case's plan.md.

Both are made from one view: the plan's stored sentences (English message ids) and the labels of
vllm_triage.plan.messages, translated through the reader's catalog; machine values (path ids,
versions, node names) are shown as they are."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vllm_triage.i18n import Catalog, Language, catalog
from vllm_triage.plan import messages as m
from vllm_triage.plan.models import DriverTarget, Plan

if TYPE_CHECKING:
    from jinja2 import Environment


@dataclass
class Section:
    """A titled list: plain bullets, a numbered order, or a checklist to paste into a ticket."""

    title: str
    items: list[str]
    style: str = "bullets"  # bullets | numbered | checklist


@dataclass
class View:
    """Everything a rendering shows, already in the reader's language."""

    title: str
    labels: dict[str, str]
    diagnosis: str
    recommended_name: str
    recommended_path: str
    reason: str
    summary: str
    more_reasons: list[str]
    caveats: list[str]
    alternatives: list[tuple[str, str, str, list[str]]]  # name, path, why not, other reasons
    order: list[tuple[str, str, str]]  # name, path, when
    steps: list[str]
    facts: list[tuple[str, list[tuple[str, str]]]] = field(default_factory=list)
    flow: tuple[str, list[str], list[str], list[str]] | None = None  # name, steps, avoid, rungs
    baseline: list[tuple[str, str]] = field(default_factory=list)
    sections: list[Section] = field(default_factory=list)
    constraints: list[tuple[str, str]] = field(default_factory=list)
    assumptions: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


# The labels a view carries by name (the others are placed where they are used).
_LABELS = (
    *("RECOMMENDED", "WHY", "CAVEATS", "ALTERNATIVES", "PATH", "WHY_NOT", "ORDER", "STEPS"),
    *("DIAGNOSIS", "FLOW", "VALIDATE_WITH", "DO_NOT", "BASELINE", "NOW", "CONSTRAINTS"),
    *("ASSUMPTIONS", "NOTES"),
)


def _yes_no(tr: Catalog, value: bool | None) -> str:
    return tr(m.UNKNOWN) if value is None else tr(m.YES) if value else tr(m.NO)


def _word(tr: Catalog, words: dict[str, str], value: str) -> str:
    """A knowledge value (a certainty, a branch type) in words, as it is when there are none."""
    return tr(words[value]) if value in words else value


def _hours(tr: Catalog, hours: float | None) -> str:
    if hours is None:
        return tr(m.NONE_GIVEN)
    return tr(m.HOURS, hours=f"{hours:g}")


def plan_view(plan: Plan, language: Language = "en") -> View:
    """The plan as one language's view (the labels and every stored sentence translated)."""
    tr = catalog(language)
    names = {plan.recommended.path: plan.recommended.name}
    names |= {alternative.path: alternative.name for alternative in plan.alternatives}
    d, rec, change = plan.diagnosis, plan.recommended, plan.plan
    view = View(
        title=tr(m.TITLE),
        labels={key: tr(getattr(m, key)) for key in _LABELS},
        diagnosis=tr(m.CAUSE_LINE, cause=d.cause, phase=d.phase, confidence=f"{d.confidence:.2f}")
        + f" · {tr(m.DRIVER_THRESHOLD)}: {_yes_no(tr, d.threshold)} · {d.source}",
        recommended_name=tr(rec.name),
        recommended_path=rec.path,
        reason=tr(rec.reason),
        summary=tr(rec.summary) if rec.summary else "",
        more_reasons=[tr(reason) for reason in rec.reasons if reason != rec.reason],
        caveats=[tr(caveat) for caveat in rec.caveats],
        alternatives=[
            (tr(a.name), a.path, tr(a.why_not), [tr(r) for r in a.against if r != a.why_not])
            for a in plan.alternatives
        ],
        order=[(tr(names.get(s.path, s.path)), s.path, tr(s.when)) for s in change.sequence],
        steps=[tr(step) for step in change.steps],
    )
    view.facts = _facts(plan, tr)
    if change.flow is not None:
        flow = change.flow
        view.flow = (
            tr(flow.name),
            [tr(s) for s in flow.steps],
            [tr(a) for a in flow.avoid],
            flow.rungs,
        )
    view.baseline = [(tr(entry.item), entry.now or "") for entry in change.baseline]
    sections = [
        (m.STAGED_ORDER, change.staged_order, "checklist"),
        (m.ROLLBACK, change.rollback, "numbered"),
        (m.WIDEN_WHEN, change.widen_when, "checklist"),
        (m.CHANGE_RECORD, change.change_record, "checklist"),
    ]
    if change.reproducibility is not None:
        sections += [
            (m.PIN, change.reproducibility.pin, "bullets"),
            (m.REPRODUCE, change.reproducibility.check, "bullets"),
        ]
    sections.append((m.RECHECK, change.recheck, "bullets"))
    risks = [
        Section(
            tr(m.RISKS_OF, path=tr(names.get(entry.path, entry.path))),
            [tr(item) for item in entry.risks],
            "bullets",
        )
        for entry in change.risks_by_path
    ]
    plain = [
        Section(tr(title), [tr(item) for item in items], style)
        for title, items, style in sections
        if items
    ]
    # each path's risks where the change's risks were read: after the staged order and rollback
    view.sections = plain[:2] + risks + plain[2:]
    view.constraints = _constraints(plan, tr)
    view.assumptions = [tr(text) for text in plan.assumptions]
    view.notes = [tr(text) for text in plan.notes]
    return view


def _figures(target: DriverTarget, tr: Catalog) -> list[tuple[str, str]]:
    """The image's three driver figures, each named for what it decides."""
    rows: list[tuple[str, str]] = []
    if target.min_driver and target.cuda:
        family = target.min_rule == "minor_version_compatibility"
        rows.append(
            (
                tr(m.MINIMUM),
                tr(
                    m.MINIMUM_FAMILY,
                    driver=target.min_driver,
                    branch=target.min_branch,
                    major=target.cuda.split(".")[0],
                )
                if family
                else f"{target.min_driver} ({target.min_branch})",
            )
        )
    if target.toolkit_driver:
        line = m.TOOLKIT_FLOOR if target.toolkit_lower_bound else m.TOOLKIT_LINE
        rows.append(
            (tr(m.TOOLKIT), tr(line, driver=target.toolkit_driver, release=target.toolkit_release))
        )
    if target.recommended_driver and target.recommended_branch:
        line = tr(
            m.TARGET_LINE,
            release=target.recommended_driver,
            branch=target.recommended_branch,
            eol=target.recommended_eol,
        )
        rows.append((tr(m.TARGET), line))
        if target.recommended_as_of:
            sure = target.recommended_certainty or "?"
            date = tr(
                m.AS_OF, date=target.recommended_as_of, certainty=_word(tr, m.CERTAINTY, sure)
            )
            rows.append(("", date))
        if target.recommended_note:
            rows.append(("", tr(target.recommended_note)))
    elif target.recommended_branch:
        rows.append((tr(m.TARGET), tr(m.TARGET_BRANCH_ONLY, branch=target.recommended_branch)))
    return rows


def _facts(plan: Plan, tr: Catalog) -> list[tuple[str, list[tuple[str, str]]]]:
    """The driver target and the forward-compatibility check, as labelled rows."""
    blocks: list[tuple[str, list[tuple[str, str]]]] = []
    target = plan.plan.target
    if target is not None:
        rows: list[tuple[str, str]] = []
        if target.cuda:
            rows.append((tr(m.IMAGE_CUDA), target.cuda))
        if target.installed:
            rows.append((tr(m.INSTALLED), f"{target.installed} ({target.installed_branch})"))
        rows += _figures(target, tr)
        if rows:
            blocks.append((tr(m.DRIVER_TARGET), rows))
    fc = plan.plan.forward_compat
    if fc is not None:
        rows = [(tr(m.FORWARD_COMPAT), tr(m.POSSIBLE) if fc.possible else tr(m.NOT_POSSIBLE))]
        if fc.package:
            rows.append((tr(m.PACKAGE), fc.package))
        rows.append((tr(m.SUPPORTED_BASES), ", ".join(fc.supported_bases) or "-"))
        if fc.installed_branch:
            kind = f" ({_word(tr, m.BRANCH_TYPE, fc.branch_type)})" if fc.branch_type else ""
            rows.append((tr(m.INSTALLED_BRANCH), fc.installed_branch + kind))
        gpu = f"{fc.gpu}: " if fc.gpu else ""
        rows.append((tr(m.DATACENTER_GPU), gpu + _yes_no(tr, fc.datacenter)))
        blocks.append((tr(m.FORWARD_COMPAT), rows))
    return blocks


def _constraints(plan: Plan, tr: Catalog) -> list[tuple[str, str]]:
    c = plan.constraints
    asked = f" ({tr(m.ASKED)})"
    rows = [
        (tr(m.MAINTENANCE_WINDOW), _yes_no(tr, c.maintenance_window), "maintenance_window"),
        (tr(m.CLUSTER_CAN_CHANGE), _yes_no(tr, c.cluster_can_change), "cluster_can_change"),
        (tr(m.DEADLINE), _hours(tr, c.deadline_hours), "deadline"),
        (tr(m.CAN_MAINTAIN_BUILD), _yes_no(tr, c.can_maintain_build), "can_maintain_build"),
    ]
    shown = [(label, value + (asked if key in c.asked else "")) for label, value, key in rows]
    if c.driver:
        shown.append((tr(m.DRIVER), c.driver))
    if c.gpu:
        shown.append((tr(m.GPU), c.gpu))
    if plan.host.node:
        shown.append((tr(m.NODE), plan.host.node))
    if c.nodes:
        shown.append((tr(m.TARGET_NODES), ", ".join(c.nodes)))
    if c.exclude:
        shown.append((tr(m.EXCLUDED_NODES), ", ".join(c.exclude)))
    return shown


# --- rich text ---------------------------------------------------------------------------------


def plan_renderable(plan: Plan, language: Language = "en") -> RenderableType:
    """The plan for the terminal."""
    v = plan_view(plan, language)
    lab = v.labels
    head = Text()
    head.append(v.recommended_name, style="bold green")
    head.append(f"  {v.recommended_path}", style="dim")
    top: list[RenderableType] = [Text(v.diagnosis, style="dim"), head, Text(v.reason)]
    if v.summary:
        top.append(Text(v.summary, style="dim"))
    if v.more_reasons:
        top.append(_bullets(lab["WHY"], v.more_reasons, "bold"))
    if v.caveats:
        top.append(_bullets(lab["CAVEATS"], v.caveats, "bold yellow"))
    if v.order:
        order = Text()
        order.append(f"{lab['ORDER']}\n", style="bold")
        for number, (name, path, when) in enumerate(v.order, start=1):
            order.append(f"  {number}. {name} ", style="bold")
            order.append(f"({path})", style="dim")
            order.append(f": {when}\n")
        top.append(order)
    top.append(_bullets(lab["STEPS"], v.steps, "bold"))
    parts: list[RenderableType] = [
        Panel(Group(*top), title=f"{v.title}: {lab['RECOMMENDED']}", title_align="left")
    ]
    table = Table(title=lab["ALTERNATIVES"], title_justify="left", expand=True, show_lines=True)
    table.add_column(lab["PATH"], overflow="fold", ratio=1)
    table.add_column(lab["WHY_NOT"], overflow="fold", ratio=3)
    for name, path, why_not, others in v.alternatives:
        cell = Text(why_not)
        for other in others:
            cell.append(f"\n• {other}", style="dim")
        table.add_row(Text(f"{name}\n{path}"), cell)
    parts.append(table)
    for title, rows in v.facts:
        grid = Table.grid(padding=(0, 2))
        grid.add_column(style="bold")
        grid.add_column()
        for label, value in rows:
            grid.add_row(label, escape(value))
        parts.append(Panel(grid, title=title, title_align="left"))
    if v.flow is not None:
        name, steps, avoid, rungs = v.flow
        flow: list[RenderableType] = [Text(name, style="bold"), _bullets(lab["STEPS"], steps, "")]
        flow.append(_bullets(lab["DO_NOT"], avoid, "bold yellow"))
        if rungs:
            flow.append(Text(f"{lab['VALIDATE_WITH']}: {', '.join(rungs)}"))
        parts.append(Panel(Group(*flow), title=lab["FLOW"], title_align="left"))
    if v.baseline:
        base = Table(title=lab["BASELINE"], title_justify="left", expand=True)
        base.add_column("", overflow="fold", ratio=3)
        base.add_column(lab["NOW"], overflow="fold", ratio=2)
        for item, now in v.baseline:
            base.add_row(f"☐ {item}", escape(now))
        parts.append(base)
    for section in v.sections:
        parts.append(_section(section))
    constraints = Table.grid(padding=(0, 2))
    constraints.add_column(style="bold")
    constraints.add_column()
    for label, value in v.constraints:
        constraints.add_row(label, escape(value))
    parts.append(Panel(constraints, title=lab["CONSTRAINTS"], title_align="left"))
    if v.assumptions:
        parts.append(_bullets(lab["ASSUMPTIONS"], v.assumptions, "bold yellow"))
    if v.notes:
        parts.append(_bullets(lab["NOTES"], v.notes, "bold yellow"))
    return Group(*parts)


def _bullets(title: str, items: list[str], style: str) -> Text:
    text = Text()
    text.append(f"{title}\n", style=style or None)
    for item in items:
        text.append(f"  • {item}\n")
    return text


def _section(section: Section) -> Text:
    text = Text()
    text.append(f"{section.title}\n", style="bold")
    for number, item in enumerate(section.items, start=1):
        mark = {"checklist": "☐", "numbered": f"{number}."}.get(section.style, "•")
        text.append(f"  {mark} {item}\n")
    return text


# --- markdown ----------------------------------------------------------------------------------


def _env() -> Environment:
    from vllm_triage.render.jinja import markdown_environment

    return markdown_environment()


def plan_markdown(plan: Plan, language: Language = "en") -> str:
    """The plan as markdown, ready to paste into a ticket (its checklists as task lists)."""
    return _env().get_template("plan.md.j2").render(v=plan_view(plan, language))
