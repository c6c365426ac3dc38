"""Line breaking for the terminal that reads Japanese (and Chinese) as prose, not as one word.

rich breaks a line at spaces only, so a Japanese sentence, which has none, is one long word: it
goes whole to the next line (leaving a bullet alone on its own), is cut at the column's edge
wherever that falls (a line that starts with 。, half an ASCII token on each side), or in a grid
cell is cut short with "…". Here a line may break at a space, as before, and also between two
characters where either is CJK (kana, kanji, full-width forms), following the Japanese rules
(kinsoku shori, JIS X 4051): never before closing punctuation, small kana or the prolonged
sound mark (。、」ー and the like), never after opening punctuation (「 and the like), never
inside a run of ASCII (a version, a flag, a path, a word), and never right after a line's
leading bullet, number or check box. Korean breaks at spaces, as rich does: its words are spaced.

`ProseConsole` is the console the CLI prints with: every text it renders breaks lines this way,
so no renderer has to ask for it, and English comes out as rich lays it out (but for a bullet
whose first word does not fit after it, which rich leaves alone on its line).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable
from typing import TYPE_CHECKING

from rich.cells import cell_len, chop_cells
from rich.console import Console, ConsoleOptions, RenderableType
from rich.containers import Lines
from rich.text import Text

if TYPE_CHECKING:
    from rich.console import HighlighterType, JustifyMethod, OverflowMethod
    from rich.segment import Segment
    from rich.style import Style

# Characters a line may break before or after (Unicode blocks): CJK punctuation, kana, the CJK
# ideographs (with extension A and the compatibility ones), full-width and half-width forms, and
# the supplementary ideographic planes.
_CJK = re.compile(
    "[\u3000-\u303f\u3040-\u309f\u30a0-\u30ff\u31f0-\u31ff\u3400-\u4dbf\u4e00-\u9fff"
    "\uf900-\ufaff\uff00-\uffef\U00020000-\U0003ffff]"
)
# JIS X 4051's characters that may not start a line: closing brackets and quotes, full stops and
# commas, the middle dot and colons, iteration marks, the prolonged sound mark, small kana.
_NO_START = frozenset(
    ")]}>,.:;!?%"
    "\u3001\u3002\uff0c\uff0e\u30fb\uff1a\uff1b\uff1f\uff01\u30fc\uff09\u300d\u300f\u3011"
    "\u3015\u3009\u300b\uff3d\uff5d\u3019\u3017\u301f\u2019\u201d\uff60\u00bb\u301c\uff5e"
    "\u309d\u309e\u30fd\u30fe\u3005\u303b\u2026\u2025"
    "\u3041\u3043\u3045\u3047\u3049\u3063\u3083\u3085\u3087\u308e\u3095\u3096"
    "\u30a1\u30a3\u30a5\u30a7\u30a9\u30c3\u30e3\u30e5\u30e7\u30ee\u30f5\u30f6"
)
# ...and that may not end one: opening brackets and quotes.
_NO_END = frozenset(
    "([{<\uff08\u300c\u300e\u3010\u3014\u3008\u300a\uff3b\uff5b\u3018\u3016\u301d\u2018\u201c"
    "\uff5f\u00ab"
)
# A line's lead that stays with the first word after it: indent, a bullet, a check box or a
# number ("1." or "1)"), and the spaces after it.
_LEAD = re.compile(
    r"[ \t]*(?:[\u2022\u2610\u2611\u2612\u2713\u2717\u00b7\u2023\u25e6*-]|\d{1,3}[.)])[ \t]+"
)


def _cjk_break(before: str, after: str) -> bool:
    """May a line break between these two characters (no space between them)?"""
    if not (_CJK.match(before) or _CJK.match(after)):
        return False  # inside a run of ASCII or of Hangul: a word
    return after not in _NO_START and before not in _NO_END


def break_opportunities(line: str) -> list[int]:
    """The offsets where a line may start anew: after spaces, and between characters that
    `_cjk_break` allows; none inside or right after the line's leading bullet or number."""
    lead = _LEAD.match(line)
    first = lead.end() + 1 if lead else 1
    found = []
    for index in range(first, len(line)):
        before, after = line[index - 1], line[index]
        if after.isspace():
            continue
        if before.isspace() or _cjk_break(before, after):
            found.append(index)
    return found


def break_offsets(line: str, width: int, fold: bool = True) -> list[int]:
    """Where to divide one line of text to fit `width` cells: the last break opportunity that
    fits, as rich's own divide_line does with words; a piece wider than a whole line (a long
    path, a URL) is folded across lines when `fold`, else left for the caller to crop."""
    offsets: list[int] = []
    column = 0
    bounds = [0, *break_opportunities(line), len(line)]
    for start, end in itertools.pairwise(bounds):
        piece = line[start:end]
        needed = cell_len(piece.rstrip())
        if width - column >= needed:
            column += cell_len(piece)
        elif needed > width:
            if fold:
                chunks = chop_cells(piece, width)
                for chunk in chunks[:-1]:
                    if start:
                        offsets.append(start)
                    start += len(chunk)
                if start:
                    offsets.append(start)
                column = cell_len(chunks[-1])
            else:
                if start:
                    offsets.append(start)
                column = cell_len(piece)
        elif column and start:
            offsets.append(start)
            column = cell_len(piece)
    return offsets


def _trim_spaces_beyond(line: Text, width: int) -> None:
    """Drop the spaces a line ends with that lie beyond `width` cells (rich's rstrip_end counts
    characters, so a line of wide characters kept them and was then cut with "…")."""
    excess = line.cell_len - width
    trailing = len(line.plain) - len(line.plain.rstrip())
    if excess > 0 and trailing:
        line.right_crop(min(excess, trailing))


class Prose(Text):
    """A rich Text whose lines break at `break_offsets` instead of at spaces only."""

    @classmethod
    def of(cls, text: Text) -> Prose:
        """The same text, styles and settings, wrapping as prose."""
        prose = cls(
            text.plain,
            style=text.style,
            justify=text.justify,
            overflow=text.overflow,
            no_wrap=text.no_wrap,
            end=text.end,
            tab_size=text.tab_size,
        )
        prose.spans = list(text.spans)
        return prose

    def wrap(
        self,
        console: Console,
        width: int,
        *,
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        tab_size: int = 8,
        no_wrap: bool | None = None,
    ) -> Lines:
        """Text.wrap with prose's break offsets (everything else as rich does it)."""
        keep_whole = self.no_wrap if no_wrap is None else no_wrap
        if keep_whole or overflow == "ignore":
            return super().wrap(
                console, width, justify=justify, overflow=overflow, tab_size=tab_size,
                no_wrap=no_wrap,
            )  # fmt: skip
        how = justify or self.justify or "default"
        cut = overflow or self.overflow or "fold"
        lines = Lines()
        for line in self.split(allow_blank=True):
            if "\t" in line:
                line.expand_tabs(tab_size)
            pieces = line.divide(break_offsets(line.plain, width, fold=cut == "fold"))
            for piece in pieces:
                _trim_spaces_beyond(piece, width)
            pieces.justify(console, width, justify=how, overflow=cut)
            for piece in pieces:
                piece.truncate(width, overflow=cut)
            lines.extend(pieces)
        return lines


class ProseConsole(Console):
    """A rich Console that renders every text as `Prose`: the texts renderers build and the
    strings it makes texts of (table cells, panel titles)."""

    def render(
        self, renderable: RenderableType, options: ConsoleOptions | None = None
    ) -> Iterable[Segment]:
        if type(renderable) is Text:
            renderable = Prose.of(renderable)
        return super().render(renderable, options)

    def render_str(
        self,
        text: str,
        *,
        style: str | Style = "",
        justify: JustifyMethod | None = None,
        overflow: OverflowMethod | None = None,
        emoji: bool | None = None,
        markup: bool | None = None,
        highlight: bool | None = None,
        highlighter: HighlighterType | None = None,
    ) -> Text:
        made = super().render_str(
            text, style=style, justify=justify, overflow=overflow, emoji=emoji, markup=markup,
            highlight=highlight, highlighter=highlighter,
        )  # fmt: skip
        return Prose.of(made)
