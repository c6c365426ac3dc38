"""Markdown reports, ready to paste into a ticket (jinja2 templates, loaded on first use: a
command that prints text does not pay for jinja2; see render/jinja.py)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # each command imports only the artifact it renders
    from jinja2 import Environment

    from vllm_triage.i18n import Language
    from vllm_triage.models import CompatVerdict, Diagnosis
    from vllm_triage.prefix.models import PrefixReport


def _env() -> Environment:
    from vllm_triage.render.jinja import markdown_environment

    return markdown_environment()


def diagnosis_markdown(
    diagnosis: Diagnosis, explain: bool = False, language: Language = "en"
) -> str:
    """The diagnosis for a ticket (and the case's diagnosis.md), in `language`."""
    from vllm_triage.render.diagnosis import ROLES, VERDICTS, Words, differential_line, localized

    words = Words(language)
    said = localized(diagnosis, language)
    return (
        _env()
        .get_template("diagnosis.md.j2")
        .render(
            d=said, explain=explain, t=words.label, word=words.tr.word,
            shown=words.shown, verdicts=VERDICTS, roles=ROLES,
            differential=differential_line(said, words),
        )
    )  # fmt: skip


def compat_markdown(verdict: CompatVerdict, language: Language = "en") -> str:
    """The compat verdict for a ticket, in `language`."""
    from vllm_triage.render.diagnosis import VERDICTS, Words, localized_compat

    words = Words(language)
    return (
        _env()
        .get_template("compat.md.j2")
        .render(
            v=localized_compat(verdict, words), t=words.label, shown=words.shown, verdicts=VERDICTS
        )
    )


def prefix_markdown(report: PrefixReport, max_rows: int = 20) -> str:
    ordered = sorted(report.divergences, key=lambda d: d.expected)
    return (
        _env()
        .get_template("prefix_check.md.j2")
        .render(r=report, divergences=ordered[:max_rows], hidden=max(0, len(ordered) - max_rows))
    )


def render_markdown(template: str, **values: object) -> str:
    """One of the templates (render/templates) rendered with the shared environment: for the
    renderers of other commands that keep their view-building next to their terminal output."""
    return _env().get_template(template).render(**values)
