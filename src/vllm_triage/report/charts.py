"""Charts drawn on the server as inline SVG: the report page is read offline, in a ticket or as a
PDF, so it carries its pictures itself and runs no script to draw them.

Every text that goes into a chart (a rung name, a label, a figure) is escaped here with
markupsafe, the same escaping jinja2's autoescape applies to the page: a value from a server or a
log cannot become markup. Colours come from CSS classes (report.css), and every bar carries its
number as text, so a chart reads in black and white (a printed PDF) too.

No text is cut: the layout measures each one (`text_width`, a conservative estimate of the
system fonts the page names: DejaVu or Noto Sans, CJK a full em) and makes room for it. A label
too long for its place wraps onto a second line, and its column widens when two lines are not
enough; value labels that would collide side by side are turned upright above their bars.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

# The font sizes of the chart's texts (report.css: svg.chart text 12px; ticks and statuses 11px),
# and the distance between two lines of a label: a CJK font's line box is 1.45 em tall (Noto Sans
# CJK: ascent 1.16, descent 0.29), and two lines must not touch.
TEXT_PX = 12.0
SMALL_PX = 11.0
LINE_PX = 18.0
# The most lines a label wraps onto before its column widens instead.
MAX_LINES = 2
_NARROW = frozenset(" .,:;'|!()[]{}-/ilItfjr")
# What a line does not start with (small kana, the prolonged sound mark, closing punctuation):
# kept with the character before it.
_NO_LINE_START = frozenset(
    "ぁぃぅぇぉっゃゅょゎゕゖァィゥェォッャュョヮヵヶー、。」』】〉》・,.):;!?%"
    # the full-width comma, full stop, parenthesis, bracket, colon, semicolon, ! and ?
    "\uff0c\uff0e\uff09\u3015\uff1a\uff1b\uff01\uff1f"
)


def text_width(text: str, size: float = TEXT_PX) -> float:
    """The width a text takes, in px at `size`, estimated on the safe side: wide (CJK) characters
    one em, Latin letters and digits by the advance widths of DejaVu Sans (the widest of the
    fonts the page names), rounded up."""
    em = 0.0
    for char in text:
        if unicodedata.east_asian_width(char) in ("W", "F"):
            em += 1.0
        elif char in _NARROW:
            em += 0.36
        elif char in "mwMW":
            em += 0.92
        elif char.isupper():
            em += 0.74
        elif char.isdigit():
            em += 0.64
        elif char.isascii():
            em += 0.62
        else:
            em += 0.8
    return em * size


def _tokens(text: str) -> list[str]:
    """The pieces a line may break between: words, and each wide character on its own (Japanese
    and Chinese have no spaces; a break between two of their characters is a normal one)."""
    pieces: list[str] = []
    word = ""
    for char in text:
        if char == " ":
            if word:
                pieces.append(word)
            pieces.append(" ")
            word = ""
        elif char in _NO_LINE_START and (word or (pieces and pieces[-1] != " ")):
            if word:
                word += char
            else:
                pieces[-1] += char
        elif unicodedata.east_asian_width(char) in ("W", "F"):
            if word:
                pieces.append(word)
            word = char
        else:
            word += char
    if word:
        pieces.append(word)
    return pieces


def wrap(text: str, width: float, size: float = TEXT_PX) -> list[str]:
    """A text broken into lines of at most `width` px where it can break (a word longer than
    the width stays whole on its line: the caller widens the column for it)."""
    lines: list[str] = []
    line = ""
    for piece in _tokens(text):
        if piece == " ":
            if line:
                line += " "
            continue
        candidate = line + piece
        if line and text_width(candidate.rstrip(), size) > width:
            lines.append(line.rstrip())
            line = piece
        else:
            line = candidate
    if line.strip() or not lines:
        lines.append(line.rstrip())
    return lines


def fit(text: str, width: float, size: float = TEXT_PX, lines: int = MAX_LINES) -> list[str]:
    """A text in at most `lines` lines of `width` px, the width grown where it must be (a long
    word, or a text three lines long): the lines, whose widest one gives the width taken."""
    width = max(width, 1.0)
    wrapped = wrap(text, width, size)
    while len(wrapped) > lines:
        width += size
        wrapped = wrap(text, width, size)
    return wrapped


def figure(value: float) -> str:
    """A measured value as a chart writes it: three significant digits and no exponent
    (0.0372, 0.152, 1.24, 12.3, 1234), so that close values stay apart (0.0100, 0.0110)."""
    magnitude = abs(value)
    if magnitude == 0 or not math.isfinite(value):
        return "0" if magnitude == 0 else str(value)
    digits = max(0, min(6, 2 - math.floor(math.log10(magnitude))))
    return f"{value:.{digits}f}"


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


def _svg(width: float, height: float, title: str, body: list[str]) -> Markup:
    """An <svg> element that scales with the page, titled for screen readers."""
    width, height = math.ceil(width), math.ceil(height)
    head = (
        f'<svg class="chart" xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width} {height}" '
        f'width="{width}" height="{height}" role="img" aria-label="{escape(title)}">'
        f"<title>{escape(title)}</title>"
    )
    return Markup(head + "".join(body) + "</svg>")


def _text(
    x: float, y: float, text: str, css: str = "", anchor: str = "middle", rotate: bool = False
) -> str:
    klass = f' class="{css}"' if css else ""
    turn = f' transform="rotate(-90 {x:.1f} {y:.1f})"' if rotate else ""
    return (
        f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}"{turn}{klass}>{escape(text)}</text>'
    )


def _lines(x: float, y: float, lines: Sequence[str], css: str, anchor: str = "middle") -> str:
    """A wrapped label: one <text> per line, the first line's baseline at y."""
    return "".join(
        _text(x, y + index * LINE_PX, line, css, anchor) for index, line in enumerate(lines)
    )


def ladder_chart(
    title: str, steps: Sequence[Step], seconds_label: Callable[[float], str]
) -> Markup:
    """The ladder's rungs left to right, one box each coloured by its status, its status and
    duration written in it: where a run stopped is seen at a glance. Every box is as wide as its
    widest text needs (a rung name, a status in the reader's language)."""
    gap, box_h, top, pad = 8, 60, 8, 12
    needed = [
        max(
            text_width(step.name, TEXT_PX) * 1.08,  # the name is bold
            text_width(step.label, SMALL_PX),
            text_width(seconds_label(step.seconds), SMALL_PX) if step.seconds is not None else 0,
        )
        for step in steps
    ]
    box_w = max([128.0, *(width + pad for width in needed)])
    width = max(1, len(steps)) * (box_w + gap) + gap
    height = top + box_h + 8
    body: list[str] = []
    for index, step in enumerate(steps):
        x = gap + index * (box_w + gap)
        middle = x + box_w / 2
        body.append(
            f'<rect x="{x:.1f}" y="{top}" width="{box_w:.1f}" height="{box_h}" rx="6" '
            f'class="rung rung-{escape(step.status)}"/>'
        )
        body.append(_text(middle, top + 18, step.name, "rung-name"))
        body.append(_text(middle, top + 35, step.label, "rung-status"))
        if step.seconds is not None:
            body.append(_text(middle, top + 52, seconds_label(step.seconds), "rung-seconds"))
    return _svg(width, height, title, body)


@dataclass(frozen=True)
class _Label:
    """A value label placed above its bar: the centre of the bar, the bar's top, the text."""

    x: float
    top: float
    text: str


def _collide(labels: Sequence[_Label], size: float, bar_w: float, base: float) -> bool:
    """Whether any value label, written level above its bar, would touch another one or run
    into a neighbouring bar."""
    boxes = []
    for label in labels:
        half = text_width(label.text, size) / 2
        boxes.append((label.x - half, label.x + half, label.top - 4 - size, label.top - 4))
    bars = [(label.x - bar_w / 2, label.x + bar_w / 2, label.top, base) for label in labels]
    for index, (left, right, up, down) in enumerate(boxes):
        for other in boxes[index + 1 :]:
            if left < other[1] + 2 and other[0] < right + 2 and up < other[3] and other[2] < down:
                return True
        for number, bar in enumerate(bars):
            if (
                number != index
                and left < bar[1]
                and bar[0] < right
                and up < bar[3]
                and bar[2] < down
            ):
                return True
    return False


def bar_chart(
    title: str,
    categories: Sequence[str],
    series: Sequence[Series],
    value_label: Callable[[float], str],
    axis_label: str,
) -> Markup:
    """Grouped vertical bars: one group per category (a concurrency step), one bar per series,
    each bar with its value written above it (upright, reading upwards, when level labels would
    run into each other or into a neighbouring bar); a missing value is drawn as a dash. A
    category's label wraps onto two lines under its group, and its group widens when two lines
    are not enough."""
    group_gap, bar_w, plot_h = 24, 28, 160
    count = max(1, len(series))
    values = [v for s in series for v in s.values if v is not None and v > 0]
    peak = max(values) if values else 1.0
    texts = {
        (c, s): value_label(v)
        for s, one in enumerate(series)
        for c, v in enumerate(one.values)
        if c < len(categories) and v is not None
    }
    ticks = [value_label(peak), "0"]
    left = max(40.0, max(text_width(t, SMALL_PX) for t in ticks) + 14)
    least = max(bar_w * count + group_gap, 120.0)
    wrapped = [fit(category, least - 8) for category in categories]
    widths = [max([least, *(text_width(line) + 10 for line in lines)]) for lines in wrapped]
    starts = [left + sum(widths[:c]) for c in range(len(categories))]
    label_lines = max((len(lines) for lines in wrapped), default=1)

    def first_bar(c: int) -> float:
        return starts[c] + (widths[c] - bar_w * len(series)) / 2

    def bar_height(value: float) -> float:
        return max(1.0, plot_h * max(0.0, value) / peak)

    level = [
        _Label(first_bar(c) + s * bar_w + bar_w / 2, plot_h - bar_height(v), texts[(c, s)])
        for s, one in enumerate(series)
        for c, v in enumerate(one.values)
        if c < len(categories) and v is not None
    ]
    upright = _collide(level, TEXT_PX, bar_w - 4, plot_h)
    tallest = max((text_width(t) for t in texts.values()), default=0.0)
    top = 22 + (tallest + 10 if upright else TEXT_PX + 10)
    base = top + plot_h
    legend_y = base + 8 + label_lines * LINE_PX + 10
    height = legend_y + 16
    legend_w = sum(text_width(s.name) + 30 for s in series)
    width = max(
        left + sum(widths) + 16, left + legend_w + 16, text_width(axis_label, SMALL_PX) + 16
    )
    body = [
        f'<line x1="{left:.1f}" y1="{base:.1f}" x2="{width - 8:.1f}" y2="{base:.1f}" '
        'class="axis"/>',
        f'<line x1="{left:.1f}" y1="{top:.1f}" x2="{left:.1f}" y2="{base:.1f}" class="axis"/>',
        _text(left - 6, top + 4, ticks[0], "tick", "end"),
        _text(left - 6, base, "0", "tick", "end"),
        _text(8, 14, axis_label, "axis-label", "start"),
    ]
    for c, lines in enumerate(wrapped):
        x0 = first_bar(c)
        for s, one in enumerate(series):
            value = one.values[c] if c < len(one.values) else None
            x = x0 + s * bar_w
            if value is None:
                body.append(_text(x + bar_w / 2, base - 4, "\u2013", "bar-value"))
                continue
            h = bar_height(value)
            body.append(
                f'<rect x="{x + 2:.1f}" y="{base - h:.1f}" width="{bar_w - 4}" '
                f'height="{h:.1f}" class="bar {escape(one.css)}"/>'
            )
            shown = texts[(c, s)]
            if upright:  # reads upwards from just above the bar, centred on it
                body.append(
                    _text(x + bar_w / 2 + 4, base - h - 4, shown, "bar-value", "start", True)
                )
            else:
                body.append(_text(x + bar_w / 2, base - h - 4, shown, "bar-value"))
        body.append(_lines(starts[c] + widths[c] / 2, base + 16, lines, "category"))
    x = left
    for one in series:
        body.append(
            f'<rect x="{x:.1f}" y="{legend_y - 10:.1f}" width="10" height="10" '
            f'class="bar {escape(one.css)}"/>'
        )
        body.append(_text(x + 14, legend_y - 1, one.name, "legend", "start"))
        x += text_width(one.name) + 30
    return _svg(width, height, title, body)


def share_chart(title: str, rows: Sequence[tuple[str, float | None, str]]) -> Markup:
    """Horizontal bars of shares (0..1): prefix-cache hits per query, the reusable share of a
    prompt sample; each row's label (wrapped onto two lines where it is long), its bar over a
    full-width track, and its percentage."""
    track_w, bar_h, pad = 340, 14, 6
    labels = [fit(label, 300) for label, _, _ in rows]
    label_w = max(
        [120.0, *(text_width(line) + 16 for lines in labels for line in lines)],
    )
    shown = [
        (f"{min(1.0, max(0.0, share)):.0%}" + (f" ({note})" if note else ""))
        if share is not None
        else (note or "\u2013")
        for _, share, note in rows
    ]
    width = label_w + track_w + 8 + max([40.0, *(text_width(s) + 8 for s in shown)])
    y = float(pad)
    body: list[str] = []
    for (_, share, _), lines, text in zip(rows, labels, shown, strict=True):
        row_h = max(26.0, len(lines) * LINE_PX + 8)
        middle = y + row_h / 2
        first = middle + 4 - (len(lines) - 1) * LINE_PX / 2
        body.append(_lines(label_w - 8, first, lines, "legend", "end"))
        body.append(
            f'<rect x="{label_w:.1f}" y="{middle - bar_h / 2:.1f}" width="{track_w}" '
            f'height="{bar_h}" rx="3" class="track"/>'
        )
        if share is not None:
            share = min(1.0, max(0.0, share))
            body.append(
                f'<rect x="{label_w:.1f}" y="{middle - bar_h / 2:.1f}" '
                f'width="{track_w * share:.1f}" height="{bar_h}" rx="3" class="bar share"/>'
            )
        body.append(_text(label_w + track_w + 8, middle + 4, text, "bar-value", "start"))
        y += row_h
    return _svg(width, max(y, 26.0) + 4, title, body)
