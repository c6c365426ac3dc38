"""Markdown reports, ready to paste into a ticket (jinja2 templates)."""

from __future__ import annotations

from jinja2 import Environment, PackageLoader, StrictUndefined

from vllm_triage.models import CompatVerdict, Diagnosis
from vllm_triage.prefix.models import PrefixReport

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


def prefix_markdown(report: PrefixReport, max_rows: int = 20) -> str:
    ordered = sorted(report.divergences, key=lambda d: d.expected)
    return _ENV.get_template("prefix_check.md.j2").render(
        r=report, divergences=ordered[:max_rows], hidden=max(0, len(ordered) - max_rows)
    )
