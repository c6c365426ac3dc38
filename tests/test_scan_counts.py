"""A signature's count and last line past its cap (scan.py: `_Scan.block`, logreader:
`Prefilter.follow`): however many lines match, the first evidence lines are the first ones, and
the count and the last line (number and text) are the ones a line-by-line reading gives, or say
they are not (`count_exact`, `last_exact`), with no Python call per matching line.

A refused-request or stall rule counts on every line that shows it: past the cap its lines are
counted block by block in C, exactly. An error rule counts only where the line's level and the
rules beside it let it, which takes reading the line: its last line is read from each block's
end; its count stays exact while its blocks hold few of its lines, else it is a lower bound.
"""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from test_scan_engines import _agree, reference_scan

from vllm_triage.diagnose import logreader, newlines, scan
from vllm_triage.diagnose.logreader import Block
from vllm_triage.diagnose.scan import FileScan, scan_log
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.models import Evidence, Finding
from vllm_triage.render.markdown import diagnosis_markdown
from vllm_triage.render.text import diagnosis_renderable

REPO = Path(__file__).parent.parent
# Lines that show no signature: the real CPU server's throughput and access lines.
FILLERS = [
    "(APIServer pid=1) INFO 11-30 18:55:41 [loggers.py:257] Engine 000: Avg prompt throughput: "
    "12.3 tokens/s, Avg generation throughput: 4.5 tokens/s, Running: 1 reqs, Waiting: 0 reqs",
    '(APIServer pid=1) INFO:     127.0.0.1:50012 - "POST /v1/completions HTTP/1.1" 200 OK',
    "(APIServer pid=1) INFO 11-30 18:55:42 [logger.py:71] Received request cmpl-7: params: "
    "SamplingParams(n=1, temperature=0.0, max_tokens=16)",
]
ABORTED = "(APIServer pid=1) INFO 11-30 18:56:{s:02d} [async_llm.py:417] Aborted request cmpl-{n}."
NCCL = "(Worker_TP1 pid=77) INFO 11-30 18:55:{s:02d} [pynccl.py:70] vLLM is using nccl==2.27.{n}"
# No ERROR level (the catch-all's "ERROR " pattern would propose each line) and one driver
# version (a fact rule is looked for until it has read a value).
DRIVER = (
    "/usr/local/lib/python3.12/dist-packages/torch/cuda/__init__.py:182: UserWarning: CUDA "
    "initialization: The NVIDIA driver on your system is too old (found version 12090)."
)
ENGINES = ["re2", "hyperscan"]


def _log(shape: str, matching: int, every: int = 3) -> tuple[bytes, list[int], list[str]]:
    """A log with `matching` lines of `shape` (each with its own number), every `every` lines,
    fillers between; the numbers and texts of those lines."""
    lines: list[str] = []
    numbers: list[int] = []
    for n in range(matching):
        lines += [FILLERS[(n + k) % len(FILLERS)] for k in range(every - 1)]
        lines.append(shape.format(s=n % 60, n=n))
        numbers.append(len(lines))
    return ("\n".join(lines) + "\n").encode(), numbers, [lines[i - 1] for i in numbers]


def _engine(monkeypatch: pytest.MonkeyPatch, engine: str, block: int = 64 << 10) -> None:
    """RE2 alone in blocks of `block` bytes, or Hyperscan and the read-ahead thread after the
    first one."""
    monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
    if engine == "re2":
        monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 1 << 40)
    else:
        monkeypatch.setattr(logreader, "PARALLEL_MIN_BYTES", 1)
        monkeypatch.setattr(newlines, "NUMPY_MIN_BYTES", 0)


def _scan(data: bytes, kb: KnowledgeBase) -> FileScan:
    return scan_log(io.BytesIO(data), "log", kb)


def _naive_count(kb: KnowledgeBase, rule: str, data: bytes) -> int:
    """How many lines the rule's patterns match, one regex search per line."""
    patterns = next(s.patterns for s in kb.signatures if s.id == rule)
    regex = re.compile("|".join(f"(?:{p})" for p in patterns))
    return sum(1 for line in data.decode().splitlines() if regex.search(line))


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize(("rule", "shape"), [("VT625", ABORTED), ("VT521", NCCL)])
def test_a_rule_on_50000_lines_has_its_exact_count_and_last_line(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, engine: str, rule: str, shape: str
) -> None:
    """A refused request and a stall line, 50,000 times among other lines: the count is every
    one of them (as a regex search per line counts them), the last line is the last one, the
    evidence the first three."""
    data, numbers, texts = _log(shape, 50_000)
    _engine(monkeypatch, engine)
    hit = _scan(data, kb).hits[rule]
    assert hit.count == 50_000 == _naive_count(kb, rule, data)
    assert hit.count_exact and hit.last_exact
    assert (hit.last_line, hit.last_text) == (numbers[-1], texts[-1])
    assert [(e.line, e.text) for e in hit.evidence] == list(zip(numbers, texts, strict=False))[:3]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_error_rule_on_every_block_keeps_its_last_line_and_bounds_its_count(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """An error rule on 20,000 lines: its last line is exact; its count, which would take
    reading each line's level, is a lower bound and says so."""
    data, numbers, texts = _log(DRIVER, 20_000)
    _engine(monkeypatch, engine)
    hit = _scan(data, kb).hits["VT101"]
    assert (hit.last_line, hit.last_text, hit.last_exact) == (numbers[-1], texts[-1], True)
    assert not hit.count_exact
    assert scan.MAX_EVIDENCE_PER_RULE < hit.count < 20_000
    assert [e.line for e in hit.evidence] == numbers[:3]


@pytest.mark.parametrize("engine", ENGINES)
def test_an_error_rule_a_few_times_a_block_keeps_an_exact_count(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """Spread out (fewer than MAX_FOLLOW_PROBES lines a block), every line of an error rule past
    its cap is read from the block's end: the count stays exact."""
    data, numbers, texts = _log(DRIVER, 400, every=400)
    _engine(monkeypatch, engine, block=16 << 10)
    hit = _scan(data, kb).hits["VT101"]
    assert (hit.count, hit.count_exact) == (400, True)
    assert (hit.last_line, hit.last_text, hit.last_exact) == (numbers[-1], texts[-1], True)


@pytest.mark.parametrize("engine", ENGINES)
def test_an_error_phrase_in_later_info_lines_is_not_its_last_line(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """The last line is the last one the rule counts on: an INFO line quoting the phrase after
    it is not (an error phrase in an INFO line is not an error)."""
    data, numbers, texts = _log(DRIVER, 5_000)
    quoting = "(APIServer pid=1) INFO 11-30 18:57:00 [x.py:1] " + DRIVER
    data += ((quoting + "\n") * 3).encode()
    _engine(monkeypatch, engine)
    hit = _scan(data, kb).hits["VT101"]
    assert (hit.last_line, hit.last_text, hit.last_exact) == (numbers[-1], texts[-1], True)


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("block", [4096, 4099, 10_007])
def test_counts_across_block_boundaries(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, engine: str, block: int
) -> None:
    """Blocks a little over a few lines long, of sizes that cut lines anywhere (the reads carry
    the cut line over): the counts, last lines and evidence are the line-by-line reference's."""
    monkeypatch.setattr(scan, "MAX_COUNTED_PER_RULE", 50)
    parts = [_log(shape, 700, every)[0] for shape, every in ((ABORTED, 2), (NCCL, 5), (DRIVER, 3))]
    data = b"".join(parts) + parts[0]
    _engine(monkeypatch, engine, block)
    result = _scan(data, kb)
    expected = reference_scan(data, "log", kb)
    _agree(result, expected)
    counted = {
        rule: (result.hits[rule].count, result.hits[rule].count_exact) for rule in expected.hits
    }
    assert counted["VT625"] == (1400, True) and counted["VT521"] == (700, True)


def test_a_line_two_request_rules_show_counts_once_for_the_more_certain(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch
) -> None:
    """One refused request, one finding: past both caps, a context-length refusal that also
    shows the generic bad-request rule counts for the context-length rule only."""
    monkeypatch.setattr(scan, "MAX_COUNTED_PER_RULE", 20)
    both = (
        "(APIServer pid=1) ERROR 11-30 18:56:{s:02d} [serving.py:200] Error with model "
        'error=ErrorInfo(message="This model\'s maximum context length is 4096 tokens", n={n})'
    )
    generic = (
        "(APIServer pid=1) INFO 11-30 18:56:{s:02d} [serving.py:201] Input validation error {n}"
    )
    data = _log(both, 3_000)[0] + _log(generic, 2_000)[0] + _log(both, 1_000)[0]
    _engine(monkeypatch, "hyperscan")
    result = _scan(data, kb)
    assert (result.hits["VT621"].count, result.hits["VT624"].count) == (4_000, 2_000)
    _agree(result, reference_scan(data, "log", kb))


def test_a_rule_switched_off_before_its_first_hit_says_its_count_is_not_exact(
    kb: KnowledgeBase,
) -> None:
    """A phrase only ever quoted in INFO lines stops being looked for (MAX_QUIET_MATCHES); when
    lines another rule proposes make it count later, its lines past the cap are not followed
    (nothing says where it shows): its count and last line say they may be short."""
    quoted = "(APIServer pid=1) INFO 11-30 18:55:20 [x.py:1] " + DRIVER
    erroring = "(EngineCore_DP0 pid=2) ERROR 11-30 18:55:21 [core.py:9] " + DRIVER
    data = ((quoted + "\n") * scan.MAX_QUIET_MATCHES + (erroring + "\n") * 10).encode()
    result = _scan(data, kb)
    hit = result.hits["VT101"]
    assert not hit.count_exact and not hit.last_exact
    _agree(result, reference_scan(data, "log", kb))


def _calls(monkeypatch: pytest.MonkeyPatch, data: bytes, kb: KnowledgeBase) -> dict[str, int]:
    """How often the scan read a line one by one, decided whether a rule counts on a line, and
    was handed a block."""
    calls = {"line": 0, "counting": 0, "block": 0}

    def counting(name: str) -> Any:
        original = getattr(scan._Scan, name)

        def spy(self: scan._Scan, *args: Any) -> Any:
            calls[name] += 1
            return original(self, *args)

        return spy

    with monkeypatch.context() as patch:
        for name in calls:
            patch.setattr(scan._Scan, name, counting(name))
        _scan(data, kb)
    return calls


@pytest.mark.parametrize("engine", ENGINES)
def test_no_python_call_per_matching_line_past_the_cap(
    kb: KnowledgeBase, monkeypatch: pytest.MonkeyPatch, engine: str
) -> None:
    """Four times the matching lines read no more lines one by one; a refused request past its
    cap costs no line decision at all, an error rule a bounded number per block."""
    _engine(monkeypatch, engine, block=32 << 10)
    for shape in (ABORTED, DRIVER):
        few, many = (_calls(monkeypatch, _log(shape, n)[0], kb) for n in (4_000, 16_000))
        assert many["line"] == few["line"]
        if shape is ABORTED:
            assert many["counting"] == 0
        else:
            assert 0 < many["counting"] <= many["block"] * (scan.MAX_FOLLOW_PROBES + 1)


def _example_lines(kb: KnowledgeBase) -> list[str]:
    """Every signature's positive and negative examples: lines the rules do and do not fire on,
    several rules on some."""
    return [line for s in kb.signatures for line in (*s.examples.positive, *s.examples.negative)]


HEADS = [
    "",
    "(APIServer pid=1) INFO 11-30 18:55:20 [api_server.py:1] ",
    "(EngineCore_DP0 pid=2) ERROR 11-30 18:55:20 [core.py:9] ",
    "(Worker pid=3) WARNING 11-30 18:55:20 [worker.py:3] ",
    "2026-11-30T18:55:20.123456789Z ",
    "INFO:     ",
]


@st.composite
def _random_logs(draw: st.DrawFn, examples: list[str]) -> bytes:
    """A few example lines, each with one of the usual prefixes, among fillers, repeated (most
    rules go past their cap)."""
    chosen = draw(st.lists(st.sampled_from(examples), min_size=1, max_size=4))
    body = st.tuples(st.sampled_from(HEADS), st.sampled_from(chosen)).map("".join)
    lines = draw(st.lists(st.one_of(body, body, st.sampled_from(FILLERS)), min_size=1, max_size=30))
    return (("\n".join(lines) + "\n") * draw(st.integers(1, 40))).encode()


@pytest.fixture(scope="module")
def examples(kb: KnowledgeBase) -> list[str]:
    return _example_lines(kb)


@given(data=st.data())
@settings(max_examples=100)
def test_counts_and_last_lines_are_the_line_by_line_readings(
    kb: KnowledgeBase, examples: list[str], data: st.DataObject
) -> None:
    """Small random logs of the knowledge's example lines, small blocks and caps (so that most
    rules are past theirs): the line-by-line RE2 reference finds the same evidence, count and
    last line, or a count (last line) the scan marks as a lower bound of it."""
    log = data.draw(_random_logs(examples))
    block = data.draw(st.sampled_from([256, 1000, 4096]))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(scan, "MAX_COUNTED_PER_RULE", scan.MAX_EVIDENCE_PER_RULE)
        patch.setattr(scan, "MAX_FOLLOW_PROBES", 2)
        _engine(patch, "re2", block)
        _agree(_scan(log, kb), reference_scan(log, "log", kb))


def test_a_block_numbers_lines_from_its_end() -> None:
    buf = b"a\nb\nc\nd\n"
    block = Block(buf, (0, len(buf)), 10, 4, set(), lambda b, lo, hi: b.count(b"\n", lo, hi))
    assert [block.number(stop) for stop in (7, 3, 5, 1)] == [14, 12, 13, 11]


def _request_finding(count_exact: bool | None) -> Finding:
    return Finding(
        cause="no_failure",
        phase="after_start",
        confidence=0.3,
        evidence=[Evidence(file="log", line=7, text="Aborted request cmpl-1.")],
        summary="",
        next_steps=[],
        avoid=[],
        driver_change_advised=False,
        rule="VT625 request-aborted",
        role="request",
        count=1200,
        count_exact=count_exact,
    )


@pytest.mark.parametrize(("exact", "shown"), [(True, "1200"), (False, "1200+")])
def test_a_count_that_is_a_lower_bound_says_so(diagnose_text: Any, exact: bool, shown: str) -> None:
    diagnosis = diagnose_text("Aborted request cmpl-1.\n")
    diagnosis = diagnosis.model_copy(update={"findings": [_request_finding(exact)]})
    assert f"| {shown} |" in diagnosis_markdown(diagnosis)
    text = _rendered(diagnosis)
    assert shown in text and (exact or "1200+" in text)


def _rendered(diagnosis: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True, file=io.StringIO())
    console.print(diagnosis_renderable(diagnosis))
    return console.export_text()


def test_a_diagnosis_counts_every_refused_request(diagnose_text: Any) -> None:
    """The request finding's count is the number of refused requests however many there are,
    and says it is exact."""
    data, numbers, _ = _log(ABORTED, 3_000)
    diagnosis = diagnose_text(data.decode())
    finding = next(f for f in diagnosis.findings if f.rule and f.rule.startswith("VT625"))
    assert (finding.count, finding.count_exact) == (3_000, True)
    assert finding.evidence[0].line == numbers[0]
