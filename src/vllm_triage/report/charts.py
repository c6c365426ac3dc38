"""Charts drawn on the server as inline SVG: the report page is read offline, in a ticket or as a
PDF, so it carries its pictures itself and runs no script to draw them.

Every text that goes into a chart (a rung name, a label, a figure) is escaped here with
markupsafe, the same escaping jinja2's autoescape applies to the page: a value from a server or a
log cannot become markup. Colours come from CSS classes (report.css), and every bar carries its
number as text, so a chart reads in black and white (a printed PDF) too.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape


@dataclass(frozen=True)
class Step:
    """One rung of the ladder as the chart shows it: its name, a status class and its label."""

    name: str
    status: str
    label: str
    seconds: float | None


@dataclass(frozen=True)
class Series:
    """One series of a bar chart: its name in the legend, its values (None: not measured) and
    the CSS class of its bars."""

    name: str
    values: Sequence[float | None]
    css: str


def _svg(width: int, height: int, title: str, body: list[str]) -> Markup:
    """An <svg> element that scales with the page, titled for screen readers."""
    head = (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
    )
    return Markup(head + "".join(body) + "</svg>")


def _text(x: float, y: float, text: str, css: str = "", anchor: str = "middle") -> str:
    klass = f' class="{css}"' if css else ""
    return f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{klass}>{escape(text)}</text>'


def _cut(text: str, length: int) -> str:
    return text if len(text) <= length else text[: length - 1] + "\u2026"


def ladder_chart(
    title: str, steps: Sequence[Step], seconds_label: Callable[[float], str]
) -> Markup:
    """The ladder's rungs left to right, one box each coloured by its status, its status and
    duration written in it: where a run stopped is seen at a glance."""
    box_w, gap, box_h, top = 128, 8, 56, 8
    width = max(1, len(steps)) * (box_w + gap) + gap
    height = top + box_h + 8
    body: list[str] = []
    for index, step in enumerate(steps):
        x = gap + index * (box_w + gap)
        middle = x + box_w / 2
        body.append(
            f'<rect x="{x}" y="{top}" width="{box_w}" height="{box_h}" rx="6" '
            f'class="rung rung-{escape(step.status)}"/>'
        )
        body.append(_text(middle, top + 18, _cut(step.name, 18), "rung-name"))
        body.append(_text(middle, top + 34, _cut(step.label, 18), "rung-status"))
        if step.seconds is not None:
            body.append(_text(middle, top + 49, seconds_label(step.seconds), "rung-seconds"))
    return _svg(width, height, title, body)


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    value_label: Callable[[float], str],
    axis_label: str,
) -> Markup:
    """Grouped vertical bars: one group per category (a concurrency step), one bar per series,
    each bar with its value written above it; a missing value is drawn as a dash."""
    group_gap, bar_w, left, bottom, plot_h, top = 24, 28, 56, 40, 160, 40
    groups = max(1, len(categories))
    group_w = max(bar_w * max(1, len(series)) + group_gap, 120)
    width = left + groups * group_w + 16
    legend_w = sum(40 + 7 * len(s.name) for s in series)
    width = max(width, left + legend_w + 16)
    height = top + plot_h + bottom
    values = [v for s in series for v in s.values if v is not None and v > 0]
    peak = max(values) if values else 1.0
    base = top + plot_h
    body = [
        f'<line x1="{left}" y1="{base}" x2="{width - 8}" y2="{base}" class="axis"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{base}" class="axis"/>',
        _text(left - 6, top + 4, value_label(peak), "tick", "end"),
        _text(left - 6, base, "0", "tick", "end"),
        _text(left, 14, axis_label, "axis-label", "start"),
    ]
    for c, category in enumerate(categories):
        x0 = left + c * group_w + (group_w - bar_w * len(series)) / 2
        for s, one in enumerate(series):
            value = one.values[c] if c < len(one.values) else None
            x = x0 + s * bar_w
            if value is None:
                body.append(_text(x + bar_w / 2, base - 4, "\u2013", "bar-value"))
                continue
            h = max(1.0, plot_h * max(0.0, value) / peak)
            body.append(
                f'<rect x="{x + 2:.1f}" y="{base - h:.1f}" width="{bar_w - 4}" '
                f'height="{h:.1f}" class="bar {escape(one.css)}"/>'
            )
            body.append(_text(x + bar_w / 2, base - h - 4, value_label(value), "bar-value"))
        body.append(_text(x0 + bar_w * len(series) / 2, base + 16, _cut(category, 14), "category"))
    x = left
    for one in series:
        body.append(
            f'<rect x="{x}" y="{height - 14}" width="10" height="10" class="bar {escape(one.css)}"/>'
        )
        body.append(_text(x + 14, height - 5, one.name, "legend", "start"))
        x += 40 + 7 * len(one.name)
    return _svg(int(width), height, title, body)


def share_chart(title: str, rows: Sequence[tuple[str, float | None, str]]) -> Markup:
    """Horizontal bars of shares (0..1): prefix-cache hits per query, the reusable share of a
    prompt sample; each row's label, its bar over a full-width track, and its percentage."""
    label_w, track_w, row_h, top = 300, 340, 26, 6
    width = label_w + track_w + 70
    height = top + row_h * max(1, len(rows)) + 4
    body: list[str] = []
    for index, (label, share, note) in enumerate(rows):
        y = top + index * row_h
        body.append(_text(label_w - 8, y + 15, _cut(label, 48), "legend", "end"))
        body.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{track_w}" height="14" rx="3" class="track"/>'
        )
        if share is None:
            body.append(
                _text(label_w + track_w + 8, y + 15, note or "\u2013", "bar-value", "start")
            )
            continue
        share = min(1.0, max(0.0, share))
        body.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{track_w * share:.1f}" height="14" rx="3" '
            'class="bar share"/>'
        )
        shown = f"{share:.0%}" + (f" ({note})" if note else "")
        body.append(_text(label_w + track_w + 8, y + 15, shown, "bar-value", "start"))
    return _svg(width, height, title, body)
