"""Stream a log and hand over only the lines worth reading, with their line numbers.

Logs can be gigabytes. The file is read in fixed-size blocks, and the lines in which an active
pattern may match are found inside each block by compiled code (one combined RE2 pattern, or
Hyperscan for large inputs: see fastscan); only those lines are decoded and normalised. Past the
first megabytes a second thread reads, hashes and counts ahead (readahead; lines counted with
numpy, which releases the GIL: newlines). Memory stays bounded whatever the file size or line
length.
"""

from __future__ import annotations

import contextlib
import re
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from dataclasses import dataclass
from itertools import compress, repeat
from operator import itemgetter
from typing import TYPE_CHECKING, Any, BinaryIO

import re2

from vllm_triage.diagnose.literals import group_literals
from vllm_triage.diagnose.newlines import NewlineCounter, block_counter, count_newlines
from vllm_triage.diagnose.readahead import ReadAhead, read_ahead
from vllm_triage.errors import InputError
from vllm_triage.safejson import JsonError, parse_json

if TYPE_CHECKING:
    from vllm_triage.diagnose.fastscan import FastCompile, FastFinder

BLOCK_SIZE = 8 << 20
MAX_LINE_BYTES = 64 << 10
EVIDENCE_CHARS = 400
TAIL_LINES = 8
# After groups were switched off, the combined RE2 pattern is compiled again (a new DFA to build,
# tens of milliseconds for the knowledge's patterns) only once the old one has proposed this many
# lines that only switched-off groups match, and when at least RECOMPILE_MIN_BYTES of the block
# are left to search.
RECOMPILE_MIN_BYTES = 1 << 20
RECOMPILE_AFTER_REFUSED = 64
# A pattern whose Hyperscan tail (fastscan.from_longest_literal) proposed this many lines that RE2
# refused is compiled whole into a new database (on dense input each refusal costs a scan call);
# at most MAX_REFINED_DATABASES times per scan.
REFINE_AFTER_REFUSED = 64
MAX_REFINED_DATABASES = 3
# Inputs larger than this are read ahead by other threads and searched with Hyperscan (its
# database takes a few tenths of a second to compile: not worth it for a small log).
PARALLEL_MIN_BYTES = 8 << 20
# The blocks read ahead are smaller: the stages (read and hash, count, search) then find a block
# still in the processor's cache when their turn comes.
AHEAD_BLOCK_SIZE = 2 << 20
# How many blocks the reading thread may have ready.
AHEAD_DEPTH = 4
# A followed group's lines are read from a block's end in windows of this many bytes at first,
# twice as many each time (the last lines cost little whatever the block holds before them).
BACKWARD_WINDOW = 1024
_BINARY_PROBE = 8192
# The characters of a token a secret may be (base64, base64url, hex, ids, user:password pieces).
_TOKEN_CHAR = re.compile(r"[A-Za-z0-9+/=_.~@%-]")
_TOKEN_PAIR = re.compile(r"[A-Za-z0-9+/=_.~@%-]{2}")

_ANSI = re.compile(r"\x1b\[[0-9;?]*[ -/]*[@-~]|\x1b[@-Z\\-_]|#033\[[0-9;]*m")
_PREFIXES = (
    # Docker/Kubernetes --timestamps, RFC 3339
    re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\s+"),
    # docker compose service prefix
    re.compile(r"^[\w.-]+(?:-\d+)?\s+\|\s"),
    # kubectl logs --prefix
    re.compile(r"^\[pod/[^\]]+\]\s"),
    # CI line numbers (Buildkite, GitHub Actions raw logs): a number and a tab
    re.compile(r"^\d+\t"),
    # what a paste into an issue adds: a markdown quote, a stray backtick, bold markers
    re.compile(r"^(?:>\s?|`+|\*\*(?=\S))"),
    # journalctl / syslog: "Feb 24 15:36:32 host unit[pid]: "
    re.compile(r"^[A-Z][a-z]{2} [ \d]\d \d{2}:\d{2}:\d{2} \S+ [\w@./-]+(?:\[\d+\])?: "),
)
_PROCESS = re.compile(r"^\((?P<process>[A-Za-z_][\w:.-]*(?: pid=\d+)?)\)\s*")
_LEVEL = re.compile(
    r"^(?P<level>DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL)"
    r"(?:\s+\d{2}-\d{2} \d{2}:\d{2}:\d{2}(?:\.\d+)?\s*(?:\[[^\]]*\]\s*)?|:\s+|\s+(?=[\w.:-]+:\s))"
)
# glog / klog and PyTorch's C++ warnings: "E0101 12:00:00.000000 1 file.go:12] ", "[W1130 ...] "
_GLOG = re.compile(
    r"^\[?(?P<level>[IWEF])\d{4} \d{2}:\d{2}:\d{2}\.\d+\s+(?:\d+\s+)?[\w.-]+:\d+\]\s*"
)
_GLOG_LEVELS = {"I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}


class LogError(InputError):
    """A log that cannot be read as text; one-line message."""


@dataclass(frozen=True)
class LogLine:
    """One candidate line: its number, the message to match, and the text to show as evidence."""

    number: int
    message: str
    display: str
    process: str | None
    level: str | None


def normalize(raw: bytes, number: int) -> LogLine:
    """Decode and strip what varies between log sources: colours, timestamps, process prefixes."""
    text = raw[:MAX_LINE_BYTES].decode("utf-8", errors="replace").rstrip("\r\n")
    text = _ANSI.sub("", text).replace("\r", "")
    if text.startswith('{"log":'):
        # Docker's json-file driver: the message (with its own colour codes) is inside "log".
        with contextlib.suppress(JsonError):
            document = parse_json(text, "a json-file log line")
            if isinstance(document, dict):
                decoded = str(document.get("log", text)).rstrip("\n")
                text = _ANSI.sub("", decoded).replace("\r", "")
    stripped = True
    while stripped:
        stripped = False
        for prefix in _PREFIXES:
            if match := prefix.match(text):
                text = text[match.end() :]
                stripped = True
    display = text.strip()
    process = None
    if match := _PROCESS.match(text):
        process = match.group("process")
        text = text[match.end() :]
    level = None
    if match := _LEVEL.match(text):
        level = "WARNING" if match.group("level") == "WARN" else match.group("level")
        text = text[match.end() :]
    elif match := _GLOG.match(text):
        level = _GLOG_LEVELS[match.group("level")]
        text = text[match.end() :]
    if len(display) > EVIDENCE_CHARS:
        display = _cut(display, EVIDENCE_CHARS - 1) + "…"
    return LogLine(number, text.strip(), display, process, level)


def _cut(text: str, size: int) -> str:
    """The first `size` characters, less a token the cut would split: half a secret would show,
    and no redaction rule knows half a secret's shape."""
    if text[size - 1 : size + 1].isascii() and _TOKEN_PAIR.fullmatch(text[size - 1 : size + 1]):
        start = size - 1
        while start > 0 and _TOKEN_CHAR.fullmatch(text[start - 1]):
            start -= 1
        return text[:start]
    return text[:size]


def _raw(pattern: str) -> str:
    """A pattern as it must read a raw line: Docker's json-file logs escape quotes (\\")."""
    return pattern.replace('"', r'\\?"')


def _re2_options() -> Any:
    options = re2.Options()
    options.max_mem = 256 << 20
    options.never_capture = True
    options.never_nl = True
    return options


# Compiled once per process and pattern list: a bundle's logs, or many tests, share them.
_SETS: dict[tuple[str, ...], Any] = {}


def _pattern_set(patterns: tuple[str, ...]) -> Any:
    """An RE2 set over the patterns: one pass over a line names every pattern it matches."""
    found = _SETS.get(patterns)
    if found is None:
        found = re2.Set.SearchSet(_re2_options())
        for pattern in patterns:
            found.Add(pattern.encode())
        found.Compile()
        if len(_SETS) >= 8:
            _SETS.clear()
        _SETS[patterns] = found
    return found


def _line_at(buf: bytes, position: int, found: int, end: int) -> tuple[int, int] | None:
    """(start, newline) of the line in buf[position:end] that holds the byte before `found`, a
    match's end (the byte at `found` for an empty match at the start of the run)."""
    anchor = found - 1 if found > position else position
    newline = buf.rfind(b"\n", position, anchor)
    start = newline + 1 if newline >= 0 else position
    stop = buf.find(b"\n", anchor, end)
    return None if stop < 0 else (start, stop)


class Block:
    """A block just searched, buf[lo:hi] (whole lines): how its lines are numbered, and which of
    them were handed over one by one (the indexes of their newlines)."""

    def __init__(
        self,
        buf: bytes,
        span: tuple[int, int],
        lines_before: int,
        lines: int,
        proposed: set[int],
        count: NewlineCounter,
    ):
        self.buf = buf
        self.lo, self.hi = span
        self.proposed = proposed
        self._count = count
        self._last = lines_before + lines
        # a newline index and its line's number: lines read from the end are numbered on from
        # the one read before (counting from the block's end each time would read it again)
        self._mark = (self.hi - 1, self._last)

    def number(self, stop: int) -> int:
        """The number of the line whose newline is buf[stop]."""
        at, number = self._mark
        if stop > at:
            at, number = self.hi - 1, self._last
        number -= self._count(self.buf, stop + 1, at + 1)
        self._mark = (stop, number)
        return number

    def line(self, start: int, stop: int) -> bytes:
        """The line buf[start:stop] as the prefilter reads it: its first MAX_LINE_BYTES bytes."""
        return self.buf[start : min(stop, start + MAX_LINE_BYTES)]


# RE2's Match answers [(start, end)] ((-1, -1): no match).
_UNANCHORED = re2._Anchor.UNANCHORED
_FIRST = itemgetter(0)
_NO_MATCH = -1


@dataclass(frozen=True)
class _Followed:
    """How a followed group's lines are found in a block (see Prefilter.follow)."""

    # RE2's C++ Match (the wrapper's `search` is Python code around it) over a run of lines, ^
    # and $ at each line; and over one line, called through `map`: no Python frame per line
    lines: Any
    one_line: Any
    # per pattern, the literal every line that shows it holds (`bytes.find` looks for it);
    # None when a pattern has none
    tails: tuple[bytes, ...] | None

    @classmethod
    def of(cls, patterns: list[str]) -> _Followed:
        raw = "|".join(f"(?:{_raw(p)})" for p in patterns)
        tails = group_literals(patterns)
        lines = re2.compile(f"(?m){raw}".encode(), _re2_options())._regexp.Match
        one_line = re2.compile(raw.encode(), _re2_options())._regexp.Match
        return cls(lines, one_line, tails)


def _line_ends(buf: bytes, literal: bytes, lo: int, hi: int) -> Iterator[int]:
    """The newline index of each line of buf[lo:hi] (whole lines) that holds `literal`, once
    each: `bytes.find` searches at C speed, twice as fast as a regex for the same literal."""
    find = buf.find
    at = find(literal, lo, hi)
    while at >= 0:
        newline = find(b"\n", at, hi)
        if newline < 0:
            return
        yield newline
        at = find(literal, newline + 1, hi)


class Prefilter:
    """Named groups of patterns, looked for in raw lines; groups can be switched off and on, or
    followed: switched off, their lines still found block by block (`follow`).

    A line is a candidate when RE2 finds a pattern of an active group in it (the raw line,
    through its first MAX_LINE_BYTES bytes). Two engines find candidates with exactly that
    meaning: one combined RE2 pattern over a block (small inputs, and always correct), and
    Hyperscan (fastscan) for large inputs once its database is compiled; every line Hyperscan
    proposes, and every line an outdated RE2 pattern proposes, is checked with the RE2 set
    (`wanted`)."""

    def __init__(self, groups: dict[str, list[str]]):
        self._groups = groups
        self._active = set(groups)
        patterns: list[str] = []
        self._owners: list[str] = []
        self._indexes: dict[str, list[int]] = {}
        for key in sorted(groups):
            for pattern in groups[key]:
                self._indexes.setdefault(key, []).append(len(patterns))
                patterns.append(_raw(pattern))
                self._owners.append(key)
        self._patterns = tuple(patterns)
        # per pattern: whether its group is active (what Hyperscan's callback reads)
        self._on = [True] * len(patterns)
        self._regex: Any = None
        self._regex_keys: frozenset[str] = frozenset()
        self._refused = 0
        self._fast: FastFinder | None = None
        self._fast_keys: frozenset[str] = frozenset()
        self._compiling: FastCompile | None = None
        self._compiling_keys: frozenset[str] = frozenset()
        self._broken = False
        # per pattern: lines its Hyperscan tail proposed that RE2 refused; the ones compiled whole
        self._tail_refused: dict[int, int] = {}
        self._whole: frozenset[int] = frozenset()
        self._refined = 0
        self._view: memoryview | None = None
        self._view_of: bytes | None = None
        # switched-off groups whose last line is still wanted: their literals and RE2 pattern
        self._tracked: dict[str, tuple[tuple[bytes, ...], Any]] = {}
        # switched-off groups whose lines are still counted block by block (`follow`), and,
        # for those followed in the block being read, the offset they are followed from
        self._followed: dict[str, _Followed] = {}
        self._follow_from: dict[str, int] = {}
        # where the search of the block goes on: after the line handed over last (LogScanner)
        self.position = 0
        # in the block being read: patterns Hyperscan reported and passed over, and whether RE2
        # searched some of it (it reports nothing, see `followed_in`)
        self._reported: set[int] = set()
        self._re2_searched = False

    @property
    def active(self) -> bool:
        """Whether any group is still looked for."""
        return bool(self._active)

    @property
    def active_groups(self) -> frozenset[str]:
        """The groups still looked for."""
        return frozenset(self._active)

    @property
    def engine(self) -> str:
        """Which engine finds the next candidates: "hyperscan" or "re2"."""
        return "hyperscan" if self._fast_engine() is not None else "re2"

    @property
    def regex(self) -> object | None:
        """The compiled alternation of the active groups (None when nothing is left to look for)."""
        if self._regex_keys != self._active:
            self._regex = None
        regex: object | None = self._regex_for(RECOMPILE_MIN_BYTES + 1)
        return regex

    def deactivate(self, key: str) -> None:
        """Stop looking for a group (it has told what it could: a milestone seen, enough
        evidence); an unknown or inactive key is ignored."""
        if key in self._active:
            self._active.discard(key)
            for index in self._indexes.get(key, ()):
                self._on[index] = False

    def track(self, key: str) -> bool:
        """Stop proposing the lines of an active group but still find its last line in each
        block (`last_tracked`); False (and nothing changed) when its patterns lack the literals
        that search needs."""
        if key not in self._active:
            return False
        literals = group_literals(self._groups[key])
        if literals is None:
            return False
        pattern = "|".join(f"(?:{p})" for p in self._groups[key])
        self._tracked[key] = (literals, re2.compile(_raw(pattern), _re2_options()))
        self.deactivate(key)
        return True

    @property
    def tracked(self) -> frozenset[str]:
        """The groups switched off whose last line is still found."""
        return frozenset(self._tracked)

    def last_tracked(self, buf: bytes, lo: int, hi: int) -> list[tuple[str, int, int]]:
        """(group, start, index of its newline) of the last line in buf[lo:hi], a run of whole
        lines, in which RE2 finds a pattern of each tracked group (seen through its first
        MAX_LINE_BYTES bytes, as `wanted`); a group with no such line is left out. Searched from
        the end with `bytes.rfind` for the group's literals, each line found confirmed by RE2."""
        found = []
        for key, (literals, regex) in self._tracked.items():
            end = hi
            while end > lo:
                at = max(buf.rfind(literal, lo, end) for literal in literals)
                if at < 0:
                    break
                start = buf.rfind(b"\n", lo, at) + 1 or lo
                stop = buf.find(b"\n", at, hi)
                if regex.search(buf[start : min(stop, start + MAX_LINE_BYTES)]) is not None:
                    found.append((key, start, stop))
                    break
                end = start
        return found

    def follow(self, key: str) -> bool:
        """Stop proposing the lines of an active group but keep finding, in each block, the lines
        that show it (`followed_in`, `showing`, `showing_backwards`): a signature past its cap.
        Its patterns stay in the Hyperscan database, which then says in which blocks it shows.
        False (nothing changed) for a group already switched off."""
        if key not in self._active:
            return False
        self._followed[key] = _Followed.of(self._groups[key])
        self._follow_from[key] = self.position
        self.deactivate(key)
        return True

    @property
    def followed(self) -> frozenset[str]:
        """The groups switched off whose lines are still counted."""
        return frozenset(self._followed)

    def start_block(self, lo: int) -> None:
        """A block is about to be searched from buf[lo] on."""
        self.position = lo
        self._reported.clear()
        self._re2_searched = False

    def end_block(self) -> None:
        """The block is done: the groups followed during it are followed from the next one's
        start."""
        self._follow_from.clear()

    def followed_in(self, block: Block) -> list[str]:
        """The followed groups that may show a line in the block: those Hyperscan reported when
        it searched all of it, else (RE2 searched some) those the RE2 set finds in it."""
        if self._re2_searched:
            # (?m): ^ and $ at each line of the block, as for one line in `wanted`
            patterns = [
                (key, f"(?m){self._patterns[i]}")
                for key in self._followed
                for i in self._indexes[key]
            ]
            found = _pattern_set(tuple(p for _, p in patterns)).Match(
                memoryview(block.buf)[block.lo : block.hi]
            )
            shown = {patterns[i][0] for i in found or ()}
        else:
            shown = {self._owners[i] for i in self._reported}
        return [key for key in self._followed if key in shown]

    def showing(self, key: str, block: Block) -> set[int] | None:
        """The newline indexes of the lines of the block, from where the group is followed, that
        show it (RE2 finds one of its patterns in the line's first MAX_LINE_BYTES bytes, as
        `wanted`) and were not handed over one by one; None when a pattern of the group has no
        required literal to find its lines by. `bytes.find` finds each literal's lines (one
        generator step per line that holds it), `map` calls bytes methods and RE2's Match on
        each candidate."""
        followed = self._followed[key]
        if followed.tails is None:
            return None
        buf = block.buf
        start = self._follow_from.get(key, block.lo)
        stops: set[int] = set()
        for literal in followed.tails:
            stops.update(_line_ends(buf, literal, start, block.hi))
        stops -= block.proposed
        ordered = list(stops)
        starts = list(map((1).__add__, map(buf.rfind, repeat(b"\n"), repeat(0), ordered)))
        ends = map(min, ordered, map(MAX_LINE_BYTES.__add__, starts))
        lines = list(map(buf.__getitem__, map(slice, starts, ends)))
        spans = map(followed.one_line, repeat(_UNANCHORED), lines, repeat(0), map(len, lines))
        matched = map(_NO_MATCH.__lt__, map(_FIRST, map(_FIRST, spans)))
        return set(compress(ordered, matched))

    def showing_backwards(self, key: str, block: Block) -> Iterator[tuple[int, int]]:
        """(start, newline index) of the lines of the block that show the group, from the last
        one back to where it is followed, less those handed over one by one: RE2 searches
        windows from the block's end (BACKWARD_WINDOW bytes, then twice as many each time)."""
        followed = self._followed[key]
        buf, floor = block.buf, self._follow_from.get(key, block.lo)
        end, window = block.hi, BACKWARD_WINDOW
        while end > floor:
            # the window starts at a line's start (the floor is one)
            begin = floor
            if end - window > floor:
                begin = max(floor, buf.rfind(b"\n", floor, end - window) + 1)
            found: list[tuple[int, int]] = []
            position = begin
            while (at := followed.lines(_UNANCHORED, buf, position, end)[0][0]) > _NO_MATCH:
                start = buf.rfind(b"\n", begin, at) + 1 or begin
                stop = buf.find(b"\n", at, end)
                found.append((start, stop))
                position = stop + 1
            for start, stop in reversed(found):
                line = block.line(start, stop)
                if (
                    stop not in block.proposed
                    and followed.one_line(_UNANCHORED, line, 0, len(line))[0][0] > _NO_MATCH
                ):
                    yield start, stop
            end, window = begin, window * 2

    def activate(self, keys: Iterable[str]) -> None:
        """Look for these groups again (the start-up milestones after a restart); a tracked one
        is no longer tracked."""
        keys = set(keys)
        for key in keys:
            self._tracked.pop(key, None)
        added = (keys & set(self._groups)) - self._active
        if added:
            self._active |= added
            for key in added:
                for index in self._indexes.get(key, ()):
                    self._on[index] = True

    def wanted(self, line: bytes) -> bool:
        """Whether RE2 finds a pattern of an active group in this raw line. The patterns of
        switched-off groups it finds count as reported (Hyperscan stopped in the line: what
        follows the stop in it was not reported, see `followed_in`)."""
        matches: list[int] | None = _pattern_set(self._patterns).Match(line)
        on = self._on
        self._reported.update(matches or ())
        return any(on[i] for i in matches or ())

    def prepare_fast(self, *, wait: bool = False) -> None:
        """Compile the Hyperscan engine for the groups active now (in the background unless
        `wait`); RE2 finds the candidates until it is ready, and for good if it cannot be had."""
        from vllm_triage.diagnose.fastscan import FastCompile

        wanted = self._active or self._followed
        if self._compiling is None and self._fast is None and wanted and not self._broken:
            # a followed group's patterns stay: Hyperscan reports in which blocks it shows
            chosen = {
                i: pattern
                for i, (pattern, on) in enumerate(zip(self._patterns, self._on, strict=True))
                if on or self._owners[i] in self._followed
            }
            self._compiling = FastCompile(chosen, self._whole)
            self._compiling_keys = frozenset(self._active)
        if wait and self._compiling is not None:
            self._compiling.result(wait=True)

    def next_line(self, buf: bytes, position: int, end: int) -> tuple[int, int] | None:
        """(start, index of its newline) of the first candidate line in buf[position:end], a
        run of whole lines each ending with a newline; None when there is none."""
        if not self._active and not self._followed:
            return None
        fast = self._fast_engine()
        if fast is not None:
            return self._next_fast(fast, buf, position, end)
        return self._next_re2(buf, position, end)

    def release(self) -> None:
        """Forget the block being read (its memory can go)."""
        if self._view is not None:
            self._view.release()
        self._view, self._view_of = None, None

    def _fast_engine(self) -> FastFinder | None:
        compiling = self._compiling
        if compiling is not None and compiling.ready:
            self._compiling = None
            finder = compiling.result()
            if finder is not None:
                self._fast, self._fast_keys = finder, self._compiling_keys
        if self._fast is not None and not self._active <= self._fast_keys:
            # groups switched back on that the database lacks (a restart): RE2 meanwhile
            self._fast = None
            self.prepare_fast()
        return self._fast

    def _next_fast(
        self, fast: FastFinder, buf: bytes, position: int, end: int
    ) -> tuple[int, int] | None:
        from vllm_triage.diagnose.fastscan import FastFailed  # imported with the finder

        if self._view_of is not buf:
            self.release()
            self._view, self._view_of = memoryview(buf), buf
        assert self._view is not None
        while position < end:
            try:
                found = fast.first_end(self._view, position, end, self._on, self._reported)
            except FastFailed:
                self._fast, self._broken = None, True  # RE2 from here on, same results
                return self._next_re2(buf, position, end)
            if found is None:
                return None
            line = _line_at(buf, position, found, end)
            if line is None:
                return None
            if self.wanted(buf[line[0] : line[1]]):
                return line
            if fast.stopped_by is not None:
                self._refine(fast.stopped_by)
                if self._fast is None:
                    return self._next_re2(buf, line[1] + 1, end)
            position = line[1] + 1
        return None

    def _refine(self, pattern: int) -> None:
        """Count a line that a pattern's Hyperscan tail proposed and RE2 refused; past
        REFINE_AFTER_REFUSED, compile a database with that pattern whole (RE2 meanwhile)."""
        refused = self._tail_refused[pattern] = self._tail_refused.get(pattern, 0) + 1
        if (
            refused >= REFINE_AFTER_REFUSED
            and pattern not in self._whole
            and self._refined < MAX_REFINED_DATABASES
            and self._compiling is None
        ):
            self._refined += 1
            self._whole = self._whole | {
                i for i, n in self._tail_refused.items() if n >= REFINE_AFTER_REFUSED // 2
            }
            self._fast = None
            self.prepare_fast()

    def _regex_for(self, remaining: int) -> Any:
        """The combined pattern of the active groups. After groups were switched off, the one
        compiled before still finds every candidate (and some lines `wanted` then refuses): it is
        compiled again only when those refusals add up and enough is left to read for that to
        pay. After groups were switched on, it is compiled again at once."""
        outdated = self._regex is not None and self._regex_keys != self._active
        costly = self._refused >= RECOMPILE_AFTER_REFUSED and remaining > RECOMPILE_MIN_BYTES
        if outdated and (not self._active <= self._regex_keys or costly):
            self._regex = None
        if self._regex is None and self._active:
            self._refused = 0
            patterns = [self._patterns[i] for i, on in enumerate(self._on) if on]
            # (?m): ^ and $ mean a line's start and end, as in grep, not the block's.
            alternation = "|".join(f"(?:{p})" for p in patterns)
            self._regex = re2.compile(f"(?m){alternation}", _re2_options())
            self._regex_keys = frozenset(self._active)
        return self._regex

    def _next_re2(self, buf: bytes, position: int, end: int) -> tuple[int, int] | None:
        self._re2_searched = True
        while position < end:
            regex = self._regex_for(end - position)
            if regex is None:
                return None
            match = regex.search(buf, position, end)
            if match is None or match.start() >= end:
                return None
            newline = buf.rfind(b"\n", position, match.start())
            start = newline + 1 if newline >= 0 else position
            stop = buf.find(b"\n", match.start(), end)
            if stop < 0:
                return None
            if self._regex_keys == self._active or self.wanted(buf[start:stop]):
                return start, stop
            self._refused += 1
            position = stop + 1
        return None


# A run of whole lines, buf[lo:hi], each ending with a newline.
Span = tuple[bytes, int, int]
# A span and how many lines it holds; None when the searching thread is to count them itself.
Chunk = tuple[bytes, int, int, int | None]


def _one_line(line: bytes) -> Span:
    return line, 0, len(line)


class LogScanner:
    """Reads a stream block by block; yields candidate lines; counts lines; keeps the last few.

    Past PARALLEL_MIN_BYTES the rest is read, hashed (by the stream) and counted by a second
    thread while this one searches (readahead), and the prefilter switches to Hyperscan."""

    def __init__(
        self,
        stream: BinaryIO,
        prefilter: Prefilter,
        *,
        fast: bool | None = None,
        reading_ahead: Callable[[], None] | None = None,
        tracked: Callable[[str, int, bytes], None] | None = None,
        followed: Callable[[Block], None] | None = None,
    ):
        self._stream = stream
        self._prefilter = prefilter
        # called when the search reaches the blocks read ahead: both threads are busy from then on
        # (a helper hashing the input ahead stops, see inputs.Fingerprint)
        self._reading_ahead = reading_ahead
        # called at the end of each block with (group, line number, raw line) for the last line
        # of each group the prefilter tracks (see Prefilter.track)
        self._tracked = tracked
        # called at the end of each block while the prefilter follows groups (Prefilter.follow)
        self._followed = followed
        # None: Hyperscan and the read-ahead thread for large inputs only; True: both from the
        # start (tests); False: neither
        self._fast = fast
        self.lines_read = 0
        self.tail: deque[tuple[int, bytes]] = deque(maxlen=TAIL_LINES)
        self._read_size = 0
        self._count: NewlineCounter = count_newlines
        self._ahead: ReadAhead[Chunk] | None = None

    def _spans(self) -> Iterator[Span]:
        """Runs of whole lines in read order; a line longer than MAX_LINE_BYTES that runs past
        the end of a read is cut there and the rest of it skipped (memory stays bounded)."""
        carry = b""
        skipping = False
        first = True
        while data := self._stream.read(self._read_size or BLOCK_SIZE):
            if first:
                first = False
                if b"\x00" in data[:_BINARY_PROBE]:
                    raise LogError("not a text log (binary data, or UTF-16)")
            lo = 0
            if skipping:
                newline = data.find(b"\n")
                if newline < 0:
                    continue
                lo, skipping = newline + 1, False
            last = data.rfind(b"\n", lo)
            if last < 0:
                carry += data[lo:]
                if len(carry) > MAX_LINE_BYTES:
                    yield _one_line(carry[:MAX_LINE_BYTES] + b"\n")
                    carry, skipping = b"", True
                continue
            if carry:
                newline = data.find(b"\n", lo)
                yield _one_line(carry + data[lo : newline + 1])
                carry, lo = b"", newline + 1
            if last + 1 > lo:
                yield data, lo, last + 1
            carry = data[last + 1 :]
            if len(carry) > MAX_LINE_BYTES:
                yield _one_line(carry[:MAX_LINE_BYTES] + b"\n")
                carry, skipping = b"", True
        if carry:
            yield _one_line(carry[:MAX_LINE_BYTES] + b"\n")

    def _pipeline(self) -> Iterator[Chunk]:
        """The chunks. Up to PARALLEL_MIN_BYTES they are read, counted and searched (with RE2) on
        this thread. Once a chunk takes the input past that, another thread reads on (the stream
        hashes what it reads) and counts lines, while this one searches that chunk with RE2, then
        the rest with Hyperscan (its database made for the groups still active)."""
        spans = self._spans()
        if self._fast is True:
            self._prefilter.prepare_fast(wait=True)
        seen = 0
        for span in spans:
            seen += span[2] - span[1]
            if self._fast is True or (self._fast is None and seen >= PARALLEL_MIN_BYTES):
                self._read_size = min(BLOCK_SIZE, AHEAD_BLOCK_SIZE)
                ahead = read_ahead(self._counted(spans), AHEAD_DEPTH)
                self._ahead = ahead
                try:
                    yield (*span, None)
                    self._prefilter.prepare_fast(wait=True)
                    if self._reading_ahead is not None:
                        self._reading_ahead()
                    yield from ahead
                finally:
                    ahead.close()
                return
            yield (*span, None)

    def _counted(self, spans: Iterator[Span]) -> Iterator[Chunk]:
        """On the reading thread: the spans with their line counts, except while the searching
        thread waits for blocks (it then counts, so that neither thread idles while the other
        works). Both count with the large-block counter from here on (its import is paid here,
        off the searching thread)."""
        self._count = block_counter()
        for buf, lo, hi in spans:
            ahead = self._ahead
            hungry = ahead is not None and ahead.backlog == 0
            yield buf, lo, hi, None if hungry else self._count(buf, lo, hi)

    def candidates(self) -> Generator[tuple[int, bytes], None, None]:
        """(line number, raw line) for every line in which RE2 finds a pattern of a group that is
        active when the line is reached; a line is seen through its first MAX_LINE_BYTES bytes."""
        prefilter = self._prefilter
        try:
            for buf, lo, hi, lines in self._pipeline():
                # the lines that end before `counted_to`, counted as far as the candidates need
                before, counted_to = 0, lo
                position = lo
                proposed: set[int] = set()
                prefilter.start_block(lo)
                while position < hi:
                    found = prefilter.next_line(buf, position, hi)
                    if found is None:
                        break
                    start, stop = found
                    position = prefilter.position = stop + 1
                    if stop - start > MAX_LINE_BYTES:
                        line = buf[start : start + MAX_LINE_BYTES]
                        if not prefilter.wanted(line):
                            continue
                    else:
                        line = buf[start:stop]
                    before += self._count(buf, counted_to, start)
                    counted_to = start
                    proposed.add(stop)
                    yield self.lines_read + before + 1, line
                if lines is None:
                    lines = before + self._count(buf, counted_to, hi)
                if self._tracked is not None and prefilter.tracked:
                    self._report_tracked(buf, lo, hi, lines)
                if self._followed is not None and prefilter.followed:
                    self._followed(
                        Block(buf, (lo, hi), self.lines_read, lines, proposed, self._count)
                    )
                prefilter.end_block()
                self.lines_read += lines
                self._remember_tail(buf, lo, hi)
        finally:
            prefilter.release()

    def _report_tracked(self, buf: bytes, lo: int, hi: int, lines: int) -> None:
        """Hand over the last line of each tracked group in buf[lo:hi] (the block just searched,
        `lines` lines), numbered by counting back from the block's end."""
        assert self._tracked is not None
        for key, start, stop in self._prefilter.last_tracked(buf, lo, hi):
            number = self.lines_read + lines - self._count(buf, stop + 1, hi)
            self._tracked(key, number, buf[start : min(stop, start + MAX_LINE_BYTES)])

    def _remember_tail(self, buf: bytes, lo: int, hi: int) -> None:
        pieces: list[bytes] = []
        end = hi - 1
        while end >= lo and len(pieces) < TAIL_LINES:
            start = max(buf.rfind(b"\n", lo, end) + 1, lo)
            pieces.append(buf[start : min(end, start + MAX_LINE_BYTES)])
            end = start - 1
        for offset, piece in enumerate(reversed(pieces)):
            self.tail.append((self.lines_read - len(pieces) + 1 + offset, piece))
