"""The scan on dense input: a log where every few lines match (a start-up repeated, as a crash
loop in one file shows it) costs work per kept line, not per matching line, and memory that does
not grow with the log, while the diagnosis stays what the uncapped scan says.

What is capped (scan.py): a first-phase milestone is proposed line by line MAX_MILESTONE_SIGHTINGS
times per attempt, then only its last line per block is found (Prefilter.track); a fact rule keeps
each value once, at most MAX_FACT_VALUES values; a pattern whose Hyperscan tail keeps proposing
lines RE2 refuses is compiled whole (logreader.REFINE_AFTER_REFUSED). A signature past its
cap is followed block by block: tests/test_scan_counts.py.
"""

from __future__ import annotations

import io
import tracemalloc
from pathlib import Path
from typing import Any

import pytest

from vllm_triage.diagnose import logreader, newlines, scan
from vllm_triage.diagnose.literals import group_literals, required_literal
from vllm_triage.diagnose.logreader import LogScanner, Prefilter
from vllm_triage.diagnose.scan import FileScan, scan_log
from vllm_triage.knowledge import KnowledgeBase

REPO = Path(__file__).parent.parent
EXAMPLE = (REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log").read_bytes()
EXAMPLE_LINES = EXAMPLE.count(b"\n")
# the example's engine_init milestone line ("Initializing a V1 LLM engine"), 1-based
ENGINE_INIT_LINE = next(
    i for i, line in enumerate(EXAMPLE.splitlines(), 1) if b"Initializing a V1 LLM engine" in line
)


def _summary(result: FileScan) -> dict[str, Any]:
    return {
        "lines": result.lines_read,
        "hits": {
            key: (h.first_line, h.last_line, h.count, [(e.line, e.text) for e in h.evidence])
            for key, h in sorted(result.hits.items())
        },
        "milestones": result.milestones,
        "phase": result.phase_reached,
        "restarts": result.restarts,
        "last": result.last_milestone
        and (
            result.last_milestone[0],
            result.last_milestone[1].line,
            result.last_milestone[1].text,
        ),
        "facts": sorted({(f.key, f.value, f.evidence and f.evidence.line) for f in result.facts}),
        "events": {kind: e.line for kind, e in result.events.items()},
    }


def _scan(
    data: bytes, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, *, fast: bool
) -> FileScan:
    if fast:  # Hyperscan and the read-ahead thread after the first block of 64 KiB
        monkeypatch.setattr(logreader, "BLOCK_SIZE", 64 << 10)
        monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 1)
        monkeypatch.setattr(newlines, "NUMPY_MIN_BYTES", 0)
    return scan_log(io.BytesIO(data), "log", kb)


@pytest.mark.slow
@pytest.mark.parametrize("fast", [False, True], ids=["re2", "hyperscan"])
def test_a_repeated_start_up_scans_as_without_the_cap(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, fast: bool
) -> None:
    """Hits, milestones, the last milestone (its line and text), facts and line count are the
    ones the scan finds when every line of every milestone is proposed."""
    repeats = 300
    data = EXAMPLE * repeats
    capped = _scan(data, kb, monkeypatch, fast=fast)
    monkeypatch.setattr(scan, "MAX_MILESTONE_SIGHTINGS", 1 << 30)
    monkeypatch.setattr(scan, "MAX_FACT_VALUES", 1 << 30)
    uncapped = _scan(data, kb, monkeypatch, fast=fast)
    assert _summary(capped) == _summary(uncapped)
    # the last occurrence is the last repeat's, however many lines were not proposed one by one
    assert capped.last_milestone is not None
    assert capped.last_milestone[0] == "engine_init"
    assert capped.last_milestone[1].line == (repeats - 1) * EXAMPLE_LINES + ENGINE_INIT_LINE
    assert capped.lines_read == repeats * EXAMPLE_LINES


def _lines_handled(data: bytes, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch) -> int:
    handled = 0
    line = scan._Scan.line

    def counting(self: scan._Scan, candidate: Any) -> None:
        nonlocal handled
        handled += 1
        line(self, candidate)

    with monkeypatch.context() as patch:
        patch.setattr(scan._Scan, "line", counting)
        scan_log(io.BytesIO(data), "log", kb)
    return handled


def test_the_lines_read_one_by_one_stop_growing_at_the_cap(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Past the cap, more repeats add no line to read one by one: what the scan reads in full
    is bounded by the caps (sightings per milestone, evidence per rule), not by the log."""
    once = _lines_handled(EXAMPLE, kb, monkeypatch)
    enough = scan.MAX_MILESTONE_SIGHTINGS + 2
    at_cap = _lines_handled(EXAMPLE * enough, kb, monkeypatch)
    far_past = _lines_handled(EXAMPLE * enough * 4, kb, monkeypatch)
    assert far_past == at_cap
    # each milestone line of a repeat is read up to the cap, every other kind far less
    milestone_lines = 4  # args (3 lines) and engine_init (1) in the example
    assert at_cap <= once + milestone_lines * scan.MAX_MILESTONE_SIGHTINGS


def test_a_fact_read_again_is_kept_once(kb: KnowledgeBase) -> None:
    one = scan_log(io.BytesIO(EXAMPLE), "log", kb)
    many = scan_log(io.BytesIO(EXAMPLE * 50), "log", kb)
    assert [(f.key, f.value, f.evidence) for f in many.facts] == [
        (f.key, f.value, f.evidence) for f in one.facts
    ]


def test_a_restart_after_the_cap_is_still_seen(kb: KnowledgeBase) -> None:
    """A first-phase milestone stops being proposed only until the attempt goes further: the
    one after the load started is a restart, as without the cap."""
    stuck = b"(APIServer pid=1) INFO 11-28 09:14:09 [model.py:2152] Using max model len 4096\n"
    loading = b"(Worker pid=2) INFO 11-28 09:15:00 [loader.py:1] Starting to load model /m\n"
    lines = stuck * (scan.MAX_MILESTONE_SIGHTINGS * 3) + loading + stuck * 2
    result = scan_log(io.BytesIO(lines), "log", kb)
    assert result.restarts == 1
    assert result.last_milestone is not None
    assert result.last_milestone == ("args", result.last_milestone[1])
    assert result.last_milestone[1].line == scan.MAX_MILESTONE_SIGHTINGS * 3 + 3


def test_a_tracked_group_reports_its_last_confirmed_line() -> None:
    """The literal proposes, RE2 decides: a line with the literal that the pattern refuses, or
    with the match past MAX_LINE_BYTES, is not the group's last line."""
    prefilter = Prefilter({"g": ["max model len [0-9]+"], "other": ["ZZZ"]})
    assert prefilter.track("g")
    assert "g" not in prefilter.active_groups and prefilter.tracked == {"g"}
    long_line = b"x" * logreader.MAX_LINE_BYTES + b" max model len 5"
    block = b"max model len 1\nmax model len 2\nmax model len x\n" + long_line + b"\nnothing\n"
    found = prefilter.last_tracked(block, 0, len(block))
    assert [(key, block[start:stop]) for key, start, stop in found] == [("g", b"max model len 2")]
    assert prefilter.last_tracked(b"nothing\n", 0, 8) == []
    prefilter.activate(["g"])
    assert prefilter.tracked == frozenset() and "g" in prefilter.active_groups


def test_a_group_without_a_literal_is_not_tracked() -> None:
    prefilter = Prefilter({"g": ["[A-Z][a-z]+(Error|Exception): "]})
    assert not prefilter.track("g")
    assert "g" in prefilter.active_groups


def test_the_scanner_numbers_the_tracked_lines() -> None:
    prefilter = Prefilter({"g": ["load ok"], "h": ["START"]})
    data = b"START\n" + b"load ok\nfiller\n" * 50
    reported: list[tuple[str, int, bytes]] = []
    scanner = LogScanner(io.BytesIO(data), prefilter, tracked=lambda *found: reported.append(found))
    for number, _ in scanner.candidates():
        if number == 1:
            prefilter.track("g")
    assert reported == [("g", 100, b"load ok")]


@pytest.mark.parametrize(
    ("pattern", "literal"),
    [
        ("non-default args: ", "non-default args: "),
        ("Using max model len [0-9]+", "Using max model len "),
        ("EngineCore.*Waiting for init message", "Waiting for init message"),
        ("GPU( because it)? is too old", " is too old"),
        ("abc\\.defg?", "abc.def"),
        ('"POST /v1 HTTP"', "POST /v1 HTTP"),
        ("[A-Z][A-Za-z]*(Error|Exception): ", None),
        ("one|two words", None),
        ("x{2}yz", None),
    ],
)
def test_required_literal(pattern: str, literal: str | None) -> None:
    assert required_literal(pattern) == literal


def test_the_knowledge_first_phase_milestones_can_be_tracked(kb: KnowledgeBase) -> None:
    """The cap needs literals for every first-phase milestone (else it never applies to it)."""
    for milestone in kb.phases.milestones:
        if milestone.phase == "before_weights":
            assert group_literals(milestone.patterns) is not None, milestone.id


# What the interpreter's and the libraries' own structures and the scan's kept state (a few
# pieces of evidence per rule, the milestones, the tail) may add to the blocks in flight.
_STATE_ALLOWANCE = 1 << 20


@pytest.mark.slow
def test_a_dense_log_is_scanned_in_bounded_memory(
    tmp_path: Path, kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """24 MiB of the example repeated (every few lines a match) through 1 MiB blocks: peak traced
    memory within the blocks the read-ahead may hold (test_scan_engines' _streaming_bound) and
    an allowance for the scan's state. Without the caps (every engine_init line read in full,
    the version fact on it kept each time) the peak was about 67 MiB against this bound of
    about 11 MiB."""
    from test_scan_engines import _streaming_bound

    monkeypatch.setattr(logreader, "BLOCK_SIZE", 1 << 20)
    monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 1 << 20)
    path = tmp_path / "dense.log"
    repeats = (24 << 20) // len(EXAMPLE)
    with path.open("wb") as stream:
        for _ in range(repeats // 100):
            stream.write(EXAMPLE * 100)
    written = (repeats // 100) * 100
    # what a first large scan pays once (imports, Hyperscan's database) is paid before tracing
    warm_up = tmp_path / "warm-up.log"
    warm_up.write_bytes(EXAMPLE * 400)
    with warm_up.open("rb") as stream:
        scan_log(stream, "warm-up", kb)
    tracemalloc.start()
    try:
        with path.open("rb") as stream:
            result = scan_log(stream, "dense", kb)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.lines_read == written * EXAMPLE_LINES
    assert result.last_milestone is not None
    assert result.last_milestone[1].line == (written - 1) * EXAMPLE_LINES + ENGINE_INIT_LINE
    bound = _streaming_bound(1 << 20) + _STATE_ALLOWANCE
    assert bound < path.stat().st_size // 2
    assert peak < bound, f"peak {peak:,} bytes against a bound of {bound:,}"
