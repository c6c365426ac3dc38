"""The decision record and its review check for people, in their language: rich text for the
terminal, markdown (jinja2 templates) for the ticket and the case's record.md.

Both are made from one view: every stored judgement is a sentence key and its fields
(vllm_triage.record.messages.BASIS), every stored text from the plan or the knowledge base is its
English message id, and both are translated through the reader's catalog here; machine values
(path ids, artifacts, figures) are shown as they are."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.markup import escape
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from vllm_triage.i18n import Catalog, Language, catalog
from vllm_triage.record import messages as m
from vllm_triage.record.models import DecisionRecord, Proof, RecordReview
from vllm_triage.render.diagnosis import CERTAINTIES
from vllm_triage.validate.reasons import REASONS as RUN_REASONS

if TYPE_CHECKING:
    from jinja2 import Environment

DASH = "\u2013"
_MAX_FIGURES_SHOWN = 8


class _Fields(dict[str, str]):
    """Fields of a stored sentence; one a sentence asks for and the record lacks shows a dash (a
    record written by an older vllm-triage still renders)."""

    def __missing__(self, key: str) -> str:
        return DASH


def say(tr: Catalog, basis: str, fields: Mapping[str, str]) -> str:
    """A stored judgement as a sentence in the reader's language; the rung's reason it quotes
    (a `reason` field, as the run recorded it) is said through the catalog too."""
    template = m.BASIS.get(basis)
    if template is None:
        return basis
    return tr(template).format_map(_said_fields(tr, fields))


def _said_fields(tr: Catalog, fields: Mapping[str, str]) -> _Fields:
    """The fields of a stored sentence, a rung's `reason` among them said in the language."""
    return _Fields(
        {
            name: tr.composed(value, RUN_REASONS) if name == "reason" else value
            for name, value in fields.items()
        }
    )


def _text(tr: Catalog, text: str, fields: Mapping[str, str]) -> str:
    """A stored English text (a message id), filled with its fields when it has any."""
    translated = tr(text) if text else text
    return translated.format_map(_said_fields(tr, fields)) if fields else translated


def _value(value: Any) -> str:
    if isinstance(value, list):
        return ", ".join(_value(v) for v in value) or DASH
    if isinstance(value, float):
        return f"{value:.4f}".rstrip("0").rstrip(".") if value else "0"
    if value is None:
        return DASH
    return str(value)


def figures_text(proof: Proof | None) -> str:
    """A proof's figures on one line: key value · key value."""
    if proof is None:
        return ""
    shown = list(proof.figures.items())[:_MAX_FIGURES_SHOWN]
    return " · ".join(f"{key} {_value(value)}" for key, value in shown)


def evidence(proofs: list[Proof]) -> list[str]:
    """The artifacts behind a judgement, each once, with the endpoint a run validated."""
    shown: dict[str, None] = {}
    for proof in proofs:
        shown[proof.artifact + (f" ({proof.url})" if proof.url else "")] = None
    return list(shown)


def compared_text(tr: Catalog, proof: Proof | None) -> str:
    """The same rung on the second endpoint, side by side."""
    if proof is None or proof.compared is None:
        return ""
    compared = proof.compared
    head = tr(m.COMPARED_WITH, url=compared.url, status=compared.status or DASH)
    pairs = [
        f"{key} {_value(pair[0] if pair else None)} / {_value(pair[1] if len(pair) > 1 else None)}"
        for key, pair in list(compared.figures.items())[:_MAX_FIGURES_SHOWN]
    ]
    return head + (" · " + " · ".join(pairs) if pairs else "")


@dataclass
class Row:
    """One judged line: what, its status (id and words), why, and the artifacts behind it."""

    name: str
    status: str
    status_label: str
    why: str
    evidence: list[str] = field(default_factory=list)
    figures: str = ""
    compared: str = ""
    good: bool | None = None


@dataclass
class Trig:
    name: str
    watch: str
    note: str
    source: str


@dataclass
class View:
    """Everything a rendering of the record shows, already in the reader's language."""

    title: str
    labels: dict[str, str]
    adopted_name: str
    adopted_path: str
    adopted_note: str
    reason: str
    other_reasons: list[str]
    given: str | None
    constraints: list[tuple[str, str]]
    scope: list[Row]
    unverified: list[tuple[str, str]]
    comparisons: list[Row]
    widening: list[Row]
    rollback: list[tuple[str, str]]
    procedure: list[str]
    review: str
    triggers: list[Trig]
    based_on: list[str]
    notes: list[str]
    created_at: str | None


_LABELS = (
    *("ADOPTED", "REASON", "OTHER_REASONS", "THEIR_WORDS", "VERIFIED", "UNVERIFIED", "SCOPE"),
    *("STATUS", "EVIDENCE", "FIGURES", "COMPARISONS", "QUESTION", "ANSWER", "WIDENING"),
    *("CONDITION", "ROLLBACK", "ROLLBACK_PROCEDURE", "REVIEW", "TRIGGERS", "NOTES", "BASED_ON"),
    *("TIME_AVAILABLE", "DEADLINE", "MAINTAIN"),
)


def _status(tr: Catalog, status: str) -> str:
    return tr(m.STATUSES[status]) if status in m.STATUSES else status


def _constraints(record: DecisionRecord, tr: Catalog) -> list[tuple[str, str]]:
    c = record.reason.constraints
    window = {True: m.WINDOW_YES, False: m.WINDOW_NO, None: m.WINDOW_UNKNOWN}
    cluster = {True: m.CLUSTER_YES, False: m.CLUSTER_NO, None: m.CLUSTER_UNKNOWN}
    build = {True: m.MAINTAIN_YES, False: m.MAINTAIN_NO, None: m.MAINTAIN_UNKNOWN}
    deadline = (
        tr(m.HOURS, hours=f"{c.deadline_hours:g}")
        if c.deadline_hours is not None
        else tr(m.NONE_GIVEN)
    )
    return [
        (
            tr(m.TIME_AVAILABLE),
            f"{tr(window[c.maintenance_window])}; {tr(cluster[c.cluster_can_change])}",
        ),
        (tr(m.DEADLINE), deadline),
        (tr(m.MAINTAIN), tr(build[c.can_maintain_build])),
        *_driver(record, tr),
        *(
            [(tr(m.VALIDATED_ON), validated)]
            if (validated := validated_on_text(record, tr)) is not None
            else []
        ),
    ]


def _driver(record: DecisionRecord, tr: Catalog) -> list[tuple[str, str]]:
    """The driver change decided: from, to, the image's floor and toolkit driver, the way back."""
    change = record.driver
    if change is None:
        return []
    target = (
        f"{change.recommended_driver} ({change.recommended_branch})"
        if change.recommended_driver
        else change.recommended_branch or DASH
    )
    return [
        (
            tr(m.DRIVER_CHANGE),
            tr(
                m.DRIVER_CHANGE_LINE,
                installed=change.installed or DASH,
                target=target,
                floor=change.min_driver or DASH,
                toolkit=change.toolkit_driver or DASH,
                rollback=change.rollback_driver or DASH,
            ),
        )
    ]


def validated_on_text(record: DecisionRecord, tr: Catalog) -> str | None:
    """The node, driver, GPUs and image the evidence was validated on, or why none is known
    (None: a record written before it was kept)."""
    on = record.validated_on
    if on is None:
        return None
    why = say(tr, on.basis, on.fields)
    if not on.tied:
        return tr(m.NOT_TIED, why=why)
    parts = [why]
    if on.gpus:
        parts.append(tr(m.VALIDATED_GPUS, gpus=on.gpus, model=on.gpu_model or DASH))
    parts.append(tr(m.VALIDATED_IMAGE, image=on.image) if on.image else tr(m.IMAGE_NOT_NAMED))
    return "; ".join(parts)


def _watch(tr: Catalog, trigger: Any) -> str:
    if trigger.kind == "date":
        return trigger.date or DASH
    parts = []
    if trigger.tags:
        parts.append(tr(m.WATCH_TAGS, tags=", ".join(trigger.tags)))
    if trigger.tag_pattern and trigger.min_version:
        parts.append(tr(m.WATCH_PATTERN, pattern=trigger.tag_pattern, version=trigger.min_version))
    elif trigger.tag_pattern:
        parts.append(tr(m.WATCH_PATTERN_ANY, pattern=trigger.tag_pattern))
    return tr(
        m.WATCH,
        repository=trigger.repository or DASH,
        registry=trigger.registry or DASH,
        what="; ".join(parts),
    )


def record_view(record: DecisionRecord, language: Language = "en") -> View:
    """The record as one language's view (labels, judgements and stored texts translated)."""
    tr = catalog(language)
    adopted = record.adopted
    scope = [
        Row(
            name=tr(m.SCOPE_NAMES[item.id]),
            status=item.status,
            status_label=_status(tr, item.status),
            why=say(tr, item.basis, item.fields),
            evidence=evidence([item.proof] if item.proof else []),
            figures=figures_text(item.proof),
            compared=compared_text(tr, item.proof),
        )
        for item in record.verified
    ]
    comparisons = []
    for comparison in record.comparisons:
        why = say(tr, comparison.basis, comparison.fields)
        comparisons.append(
            Row(
                name=tr(m.QUESTIONS[comparison.id]),
                status=comparison.answer,
                status_label=_status(tr, comparison.answer),
                why=why,
                evidence=evidence(comparison.proof),
                good=comparison.good,
                figures=" | ".join(filter(None, (figures_text(p) for p in comparison.proof))),
                compared=" | ".join(filter(None, (compared_text(tr, p) for p in comparison.proof))),
            )
        )
    widening = [
        Row(
            name=tr(w.condition),
            status=w.status,
            status_label=_status(tr, w.status),
            why=say(tr, w.basis, w.fields),
            evidence=evidence(w.proof),
            figures=" | ".join(filter(None, (figures_text(p) for p in w.proof))),
        )
        for w in record.widening
    ]
    triggers = [
        Trig(
            name=tr(t.name),
            watch=_watch(tr, t),
            note=tr(t.note) if t.note else "",
            source=(
                tr(
                    m.SOURCE,
                    source=t.source,
                    as_of=t.as_of or DASH,
                    certainty=tr.word(CERTAINTIES, t.certainty) if t.certainty else DASH,
                )
                if t.source
                else ""
            ),
        )
        for t in record.review.triggers
    ]
    based_on = [
        tr(
            m.DIAGNOSIS_LINE,
            artifact=record.diagnosis.artifact,
            cause=record.diagnosis.cause,
            phase=record.diagnosis.phase,
        ),
        tr(m.PLAN_LINE, artifact=record.plan, path=adopted.recommended),
        tr(m.RUNS_LINE, count=len(record.runs))
        + (f": {', '.join(record.runs)}" if record.runs else ""),
    ]
    if record.recipe:
        based_on.append(tr(m.RECIPE_LINE, recipe=record.recipe))
    return View(
        title=tr(m.TITLE),
        labels={key: tr(getattr(m, key)) for key in _LABELS},
        adopted_name=tr(adopted.name),
        adopted_path=adopted.path,
        adopted_note=(
            tr(m.FOLLOWS_PLAN)
            if adopted.follows_plan
            else tr(m.DIFFERS_FROM_PLAN, recommended=adopted.recommended)
        ),
        reason=tr(record.reason.plan_reason),
        other_reasons=[tr(text) for text in record.reason.other_reasons],
        given=record.reason.given,
        constraints=_constraints(record, tr),
        scope=scope,
        unverified=[(tr(u.name), _text(tr, u.why, u.fields)) for u in record.unverified],
        comparisons=comparisons,
        widening=widening,
        rollback=[(tr(m.TARGETS[r.target]), tr(r.when)) for r in record.rollback],
        procedure=[tr(step) for step in record.rollback_procedure],
        review=tr(m.REVIEW_DATE, date=record.review.date, days=record.review.days),
        triggers=triggers,
        based_on=based_on,
        notes=[say(tr, note.basis, note.fields) for note in record.notes],
        created_at=record.created_at,
    )


# --- rich text ---------------------------------------------------------------------------------

_STYLES = {
    "verified": "green",
    "met": "green",
    "failed": "red",
    "not_met": "red",
    "not_verified": "yellow",
    "unknown": "yellow",
}


def _answer_style(status: str, good: bool | None = None) -> str:
    if good is not None:
        return "green" if good else "red"
    return _STYLES.get(status, "")


def record_renderable(record: DecisionRecord, language: Language = "en") -> RenderableType:
    """The record for the terminal."""
    v = record_view(record, language)
    lab = v.labels
    head = Text()
    head.append(v.adopted_name, style="bold green")
    head.append(f"  {v.adopted_path}  ", style="dim")
    head.append(f"({v.adopted_note})", style="dim")
    top: list[RenderableType] = [head, Text(f"{lab['REASON']}: {v.reason}")]
    if v.other_reasons:
        top.append(_bullets(lab["OTHER_REASONS"], v.other_reasons))
    if v.given:
        top.append(Text(f"{lab['THEIR_WORDS']}: {v.given}"))
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    for label, value in v.constraints:
        grid.add_row(label, escape(value))
    top.append(grid)
    parts: list[RenderableType] = [
        Panel(Group(*top), title=f"{v.title}: {lab['ADOPTED']}", title_align="left")
    ]
    parts.append(_rows_table(lab["VERIFIED"], lab["SCOPE"], v.scope, lab))
    unverified = Table(title=lab["UNVERIFIED"], title_justify="left", expand=True)
    unverified.add_column(lab["SCOPE"], overflow="fold", ratio=1)
    unverified.add_column("", overflow="fold", ratio=3)
    for name, why in v.unverified:
        unverified.add_row(name, escape(why))
    parts.append(unverified)
    parts.append(_rows_table(lab["COMPARISONS"], lab["QUESTION"], v.comparisons, lab, "ANSWER"))
    if v.widening:
        parts.append(_rows_table(lab["WIDENING"], lab["CONDITION"], v.widening, lab))
    rollback = Text()
    rollback.append(f"{lab['ROLLBACK']}\n", style="bold")
    for target, when in v.rollback:
        rollback.append(f"  • {target}: ", style="bold")
        rollback.append(f"{when}\n")
    if v.procedure:
        rollback.append(f"{lab['ROLLBACK_PROCEDURE']}\n", style="bold")
        for number, step in enumerate(v.procedure, start=1):
            rollback.append(f"  {number}. {step}\n")
    parts.append(rollback)
    review: list[RenderableType] = [Text(v.review, style="bold")]
    for trigger in v.triggers:
        line = Text()
        line.append(f"• {trigger.name}\n", style="bold")
        line.append(f"  {trigger.watch}\n")
        if trigger.note:
            line.append(f"  {trigger.note}\n", style="dim")
        if trigger.source:
            line.append(f"  {trigger.source}\n", style="dim")
        review.append(line)
    parts.append(Panel(Group(*review), title=lab["REVIEW"], title_align="left"))
    parts.append(_bullets(lab["BASED_ON"], v.based_on))
    if v.notes:
        parts.append(_bullets(lab["NOTES"], v.notes, "bold yellow"))
    return Group(*parts)


def _rows_table(
    title: str, first: str, rows: list[Row], lab: dict[str, str], status: str = "STATUS"
) -> Table:
    table = Table(title=title, title_justify="left", expand=True, show_lines=True)
    table.add_column(first, overflow="fold", ratio=2)
    table.add_column(lab[status], overflow="fold", ratio=1)
    table.add_column(lab["EVIDENCE"], overflow="fold", ratio=4)
    for row in rows:
        cell = Text(row.why)
        if row.evidence:
            cell.append("\n" + ", ".join(row.evidence), style="dim")
        if row.figures:
            cell.append("\n" + row.figures, style="dim")
        if row.compared:
            cell.append("\n" + row.compared, style="dim")
        style = _answer_style(row.status, row.good)
        table.add_row(row.name, Text(row.status_label, style=style), cell)
    return table


def _bullets(title: str, items: list[str], style: str = "bold") -> Text:
    text = Text()
    text.append(f"{title}\n", style=style)
    for item in items:
        text.append(f"  • {item}\n")
    return text


# --- the review check ----------------------------------------------------------------------------


@dataclass
class ReviewView:
    title: str
    due: bool
    verdict: str
    line: str
    unknown: str | None
    labels: dict[str, str]
    triggers: list[Row]


def review_view(review: RecordReview, language: Language = "en") -> ReviewView:
    """`record check`'s answer as one language's view."""
    tr = catalog(language)
    rows = [
        Row(
            name=tr(t.name),
            status=t.status,
            status_label=_status(tr, t.status),
            why=say(tr, t.basis, t.fields),
        )
        for t in review.triggers
    ]
    met = [row.name for row in rows if row.status == "met"]
    recorded = (review.record_created_at or DASH)[:10]
    line = (
        tr(m.DUE_LINE, path=review.adopted, recorded=recorded, reasons="; ".join(met))
        if review.due
        else tr(m.NOT_DUE_LINE, path=review.adopted, recorded=recorded, date=review.review_date)
    )
    unknown = [row.name for row in rows if row.status == "unknown"]
    return ReviewView(
        title=tr(m.CHECK_TITLE),
        due=review.due,
        verdict=tr(m.DUE) if review.due else tr(m.NOT_DUE),
        line=line,
        unknown=(
            tr(m.UNKNOWN_TRIGGERS, count=len(unknown), names="; ".join(unknown))
            if unknown
            else None
        ),
        labels={"TRIGGER": tr(m.TRIGGER), "STATUS": tr(m.STATUS), "EVIDENCE": tr(m.EVIDENCE)},
        triggers=rows,
    )


def review_renderable(review: RecordReview, language: Language = "en") -> RenderableType:
    """The review check for the terminal."""
    v = review_view(review, language)
    head = Text()
    head.append(v.verdict, style="bold red" if v.due else "bold green")
    parts: list[RenderableType] = [
        Panel(Group(head, Text(v.line)), title=v.title, title_align="left")
    ]
    table = Table(expand=True, show_lines=True)
    table.add_column(v.labels["TRIGGER"], overflow="fold", ratio=2)
    table.add_column(v.labels["STATUS"], overflow="fold", ratio=1)
    table.add_column(v.labels["EVIDENCE"], overflow="fold", ratio=4)
    for row in v.triggers:
        table.add_row(row.name, Text(row.status_label, style=_STYLES.get(row.status, "")), row.why)
    parts.append(table)
    if v.unknown:
        parts.append(Text(v.unknown, style="yellow"))
    return Group(*parts)


# --- markdown ----------------------------------------------------------------------------------


def _env() -> Environment:
    from vllm_triage.render.jinja import markdown_environment

    return markdown_environment()


def record_markdown(record: DecisionRecord, language: Language = "en") -> str:
    """The record as markdown, ready to paste into a ticket (the case's record.md)."""
    return _env().get_template("record.md.j2").render(v=record_view(record, language))


def review_markdown(review: RecordReview, language: Language = "en") -> str:
    """The review check as markdown."""
    return _env().get_template("record_check.md.j2").render(v=review_view(review, language))
