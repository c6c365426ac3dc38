"""Markdown reports, ready to paste into a ticket (jinja2 templates)."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined

from vllm_triage.models import CompatVerdict, Diagnosis

_ENV = Environment(
    loader=PackageLoader("vllm_triage.render", "templates"),
    undefined=StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
    keep_trailing_newline=True,
)


def _cell(text: object) -> str:
    return str(text).replace("|", "\\|").replace("`", "'")


_ENV.filters["cell"] = _cell


def diagnosis_markdown(diagnosis: Diagnosis) -> str:
    return _ENV.get_template("diagnosis.md.j2").render(d=diagnosis)


def compat_markdown(verdict: CompatVerdict) -> str:
    return _ENV.get_template("compat.md.j2").render(v=verdict)
