"""The streaming log reader: LogScanner + Prefilter line numbers, normalize, and scan_log."""

from __future__ import annotations

import io
import json
import re
import tracemalloc
from pathlib import Path

import pytest
from deadlines import ends_in_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

# `import vllm_triage.diagnose.logreader` does not work: the package attribute
# `vllm_triage.diagnose` is shadowed by the `diagnose()` function. A from-import does work.
from vllm_triage.diagnose import logreader
from vllm_triage.diagnose.logreader import LogError, LogScanner, Prefilter, normalize
from vllm_triage.diagnose.scan import scan_log
from vllm_triage.errors import InputError

MARK = "MARK[0-9]"
MB = 1 << 20


# ---------------------------------------------------------------------------------------------
# helpers


def reference(data: bytes, pattern: str = MARK) -> tuple[list[tuple[int, bytes]], int]:
    """The naive answer: split the whole file, search every line on its own."""
    lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        lines.pop()
    regex = re.compile(pattern.encode())
    return [(i + 1, line) for i, line in enumerate(lines) if regex.search(line)], len(lines)


def scan(
    data: bytes, groups: dict[str, list[str]] | None = None
) -> tuple[list[tuple[int, bytes]], LogScanner]:
    scanner = LogScanner(io.BytesIO(data), Prefilter(groups or {"m": [MARK]}))
    return list(scanner.candidates()), scanner


def _hits_by_cause(result) -> dict[str, list[int]]:
    found: dict[str, list[int]] = {}
    for hit in result.hits.values():
        found.setdefault(hit.rule.signature.cause, []).extend(e.line for e in hit.evidence)
    return found


# ---------------------------------------------------------------------------------------------
# normalize


def test_ansi_colour_codes_removed() -> None:
    raw = b"\x1b[1;36m(EngineCore_DP0 pid=406)\x1b[0;0m \x1b[31mERROR\x1b[0m 10-16 05:20:48 [core.py:1083] boom\x1b[0m"
    line = normalize(raw, 7)
    assert line.number == 7
    assert "\x1b" not in line.message and "\x1b" not in line.display
    assert line.process == "EngineCore_DP0 pid=406"
    assert line.level == "ERROR"
    assert line.message == "boom"


def test_ansi_cursor_and_erase_sequences_removed() -> None:
    line = normalize(b"\x1b[2K\x1b[1GLoading safetensors checkpoint shards: 50%\x1b[?25l", 1)
    assert line.message == "Loading safetensors checkpoint shards: 50%"


def test_crlf_line_endings() -> None:
    line = normalize(b"ERROR 10-16 05:20:48 [core.py:1083] boom\r\n", 1)
    assert line.message == "boom"
    assert "\r" not in line.display
    data = b"a\r\nMARK1 one\r\nb\r\nMARK2 two\r\n"
    found, scanner = scan(data)
    assert [n for n, _ in found] == [2, 4]
    assert [normalize(raw, n).message for n, raw in found] == ["MARK1 one", "MARK2 two"]
    assert scanner.lines_read == 4


@pytest.mark.parametrize(
    "stamp",
    [
        "2025-10-16T05:20:48.123456789Z ",
        "2025-10-16T05:20:48Z ",
        "2025-10-16T05:20:48.123456789+00:00 ",
        "2025-10-16 05:20:48,123 ",
    ],
)
def test_docker_timestamps_prefix(stamp: str) -> None:
    raw = f"{stamp}(EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] boom".encode()
    line = normalize(raw, 3)
    assert line.process == "EngineCore_DP0 pid=406"
    assert line.level == "ERROR"
    assert line.message == "boom"
    assert line.display.startswith("(EngineCore_DP0 pid=406)")


@pytest.mark.parametrize("service", ["api-1  | ", "vllm-1 | ", "vllm_openai-2   | ", "api | "])
def test_docker_compose_service_prefix(service: str) -> None:
    line = normalize(
        f"{service}(APIServer pid=1) ERROR 10-16 05:20:48 [api_server.py:9] boom".encode(), 1
    )
    assert line.process == "APIServer pid=1"
    assert line.level == "ERROR"
    assert line.message == "boom"


def test_kubectl_prefix() -> None:
    line = normalize(
        b"[pod/vllm-0/vllm] (APIServer pid=1) WARNING 10-16 05:20:48 [x.py:1] careful", 1
    )
    assert line.process == "APIServer pid=1"
    assert line.level == "WARNING"
    assert line.message == "careful"
    assert line.display.startswith("(APIServer pid=1)")


def test_prefixes_stack() -> None:
    raw = (
        b"[pod/vllm-0/vllm] 2025-10-16T05:20:48.123456789Z api-1  | "
        b"\x1b[1;36m(EngineCore_DP0 pid=406)\x1b[0;0m ERROR 10-16 05:20:48 [core.py:1083] boom\r\n"
    )
    line = normalize(raw, 1)
    assert (line.process, line.level, line.message) == ("EngineCore_DP0 pid=406", "ERROR", "boom")


@pytest.mark.parametrize(
    ("raw", "process", "level", "message"),
    [
        (
            b"(EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] msg",
            "EngineCore_DP0 pid=406",
            "ERROR",
            "msg",
        ),
        (
            b"(APIServer pid=1) INFO 10-16 05:20:48 [api_server.py:1] started",
            "APIServer pid=1",
            "INFO",
            "started",
        ),
        (
            b"(Worker_TP0_EP1 pid=77) WARNING 10-16 05:20:48.512 [w.py:2] careful",
            "Worker_TP0_EP1 pid=77",
            "WARNING",
            "careful",
        ),
        (
            b"(Worker_TP1 pid=78) WARN 10-16 05:20:48 [w.py:2] careful",
            "Worker_TP1 pid=78",
            "WARNING",
            "careful",
        ),
        (
            b"(EngineCore_DP0 pid=406) CRITICAL 10-16 05:20:48 [core.py:1] dead",
            "EngineCore_DP0 pid=406",
            "CRITICAL",
            "dead",
        ),
        (b"ERROR: Traceback follows", None, "ERROR", "Traceback follows"),
        (
            b"RuntimeError: No CUDA GPUs are available",
            None,
            None,
            "RuntimeError: No CUDA GPUs are available",
        ),
    ],
)
def test_vllm_process_and_level(raw: bytes, process, level, message) -> None:
    line = normalize(raw, 1)
    assert (line.process, line.level, line.message) == (process, level, message)


def _json_file_line(payload: str) -> bytes:
    """One line as Docker's json-file driver writes it: compact JSON, UTF-8 kept, control
    characters as \\u00XX, and (like moby's jsonlog writer) <, > and & escaped as \\u003c etc."""
    text = json.dumps(
        {"log": payload, "stream": "stderr", "time": "2025-10-16T05:20:48.123456789Z"},
        ensure_ascii=False,
        separators=(",", ":"),
    )
    for char in "<>&":
        text = text.replace(char, f"\\u{ord(char):04x}")
    return text.encode()


def test_docker_json_file_line() -> None:
    raw = _json_file_line("(EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] boom\n")
    assert raw.startswith(b'{"log":"')
    line = normalize(raw, 5)
    assert (line.process, line.level, line.message) == ("EngineCore_DP0 pid=406", "ERROR", "boom")
    assert line.display == "(EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] boom"


def test_docker_json_file_line_with_crlf_payload() -> None:
    line = normalize(_json_file_line("ERROR 10-16 05:20:48 [core.py:1083] boom\r\n"), 1)
    assert (line.level, line.message) == ("ERROR", "boom")
    assert "\r" not in line.display


def test_docker_json_file_line_with_colours_inside() -> None:
    """`docker run -t` stores vLLM's coloured prefix inside the JSON string, as \\u001b escapes."""
    raw = _json_file_line(
        "\x1b[1;36m(EngineCore_DP0 pid=406)\x1b[0;0m ERROR 10-16 05:20:48 [core.py:1083] boom\n"
    )
    assert b"\\u001b" in raw
    line = normalize(raw, 1)
    assert "\x1b" not in line.display
    assert (line.process, line.level, line.message) == ("EngineCore_DP0 pid=406", "ERROR", "boom")


def test_docker_json_file_line_with_lone_surrogate_escape() -> None:
    """A JSON \\ud800 escape decodes to a lone surrogate, which cannot be written out as UTF-8."""
    line = normalize(
        b'{"log":"\\ud800 RuntimeError: No CUDA GPUs are available\\n","stream":"stderr"}', 1
    )
    line.display.encode("utf-8")
    line.message.encode("utf-8")
    assert "No CUDA GPUs are available" in line.message


def test_docker_json_file_line_deeply_nested() -> None:
    """Garbage that starts like a json-file line must be treated as text, not crash the decoder."""
    raw = b'{"log":' + b"[" * 20_000 + b" No CUDA GPUs are available"
    line = normalize(raw, 1)
    assert "No CUDA GPUs are available" in line.message


@pytest.mark.parametrize(
    "raw",
    [
        b'{"log": 5}',
        b'{"log":"x"} trailing',
        b'{"log":',
        b'{"log":null}',
        b'{"log": ' + b"9" * 5000 + b', "x": "No CUDA GPUs are available"}',
        b'{"log": ["a", {"b": "\\ud800"}]}',
    ],
)
def test_broken_json_file_lines_do_not_crash(raw: bytes) -> None:
    normalize(raw, 1)


def test_invalid_utf8_does_not_crash() -> None:
    line = normalize(b"\xff\xfe\xc3( ERROR: bad \x80 bytes", 1)
    assert "\ufffd" in line.display
    line.display.encode("utf-8")


def test_long_line_is_cut_for_normalize() -> None:
    raw = b"ERROR: " + b"x" * (logreader.MAX_LINE_BYTES * 3)
    line = normalize(raw, 1)
    assert len(line.message) <= logreader.MAX_LINE_BYTES
    assert len(line.display) <= logreader.EVIDENCE_CHARS


@given(st.binary(max_size=300))
def test_normalize_never_crashes(raw: bytes) -> None:
    line = normalize(raw, 1)
    assert line.number == 1
    line.display.encode("utf-8")
    assert len(line.display) <= logreader.EVIDENCE_CHARS


# ---------------------------------------------------------------------------------------------
# LogScanner: line numbers, odd files


def test_invalid_utf8_keeps_line_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"\xff\xfe\n\xc3(MARK1\n\x80\x80\x80\nplain\n\xedMARK2\xa0\x80\n"
    for block in (4096, 7, 3, 1):
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
        found, scanner = scan(data)
        assert found == reference(data)[0] == [(2, b"\xc3(MARK1"), (5, b"\xedMARK2\xa0\x80")]
        assert scanner.lines_read == 5


def test_file_without_trailing_newline() -> None:
    found, scanner = scan(b"a\nb\nMARK1 last")
    assert found == [(3, b"MARK1 last")]
    assert scanner.lines_read == 3
    assert list(scanner.tail)[-1] == (3, b"MARK1 last")


def test_single_line_without_newline() -> None:
    found, scanner = scan(b"MARK1")
    assert found == [(1, b"MARK1")]
    assert scanner.lines_read == 1


def test_empty_file() -> None:
    found, scanner = scan(b"")
    assert found == []
    assert scanner.lines_read == 0
    assert list(scanner.tail) == []


def test_only_newlines() -> None:
    found, scanner = scan(b"\n\n\n")
    assert found == []
    assert scanner.lines_read == 3


@pytest.mark.parametrize(
    "data",
    [
        b"\x00\x00\x00\x00MARK1\n",
        b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256)) * 4,
        "MARK1 utf-16 text\n".encode("utf-16"),
        b"MARK1 ok\n" * 10 + b"\x00" + b"MARK2\n",
    ],
)
def test_binary_data_raises_log_error(data: bytes) -> None:
    with pytest.raises(LogError) as info:
        scan(data)
    assert isinstance(info.value, InputError)
    assert isinstance(info.value, ValueError)
    assert "\n" not in str(info.value)


def test_binary_data_raises_log_error_through_scan_log(kb) -> None:
    with pytest.raises(LogError):
        scan_log(io.BytesIO(b"\x00\x01\x02 No CUDA GPUs are available\n"), "bin", kb)


def test_tail_keeps_the_last_lines_with_numbers(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [f"line {i}".encode() for i in range(1, 31)]
    data = b"\n".join(lines) + b"\n"
    for block in (logreader.BLOCK_SIZE, 16, 5, 1):
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
        _, scanner = scan(data)
        expected = [(i + 1, line) for i, line in enumerate(lines)][-logreader.TAIL_LINES :]
        assert list(scanner.tail) == expected


def _varied_log(lines: int) -> bytes:
    """A deterministic log with empty, short, long and marked lines, some of them CRLF."""
    out = []
    for i in range(lines):
        body = (b"abcdefghij" * ((i * 7919) % 23))[: (i * 31) % 200]
        if i % 5 == 0:
            body = body[: len(body) // 2] + b"MARK" + str(i % 10).encode() + body[len(body) // 2 :]
        if i % 11 == 0:
            body += b"\r"
        if i % 13 == 0:
            body = b""
        out.append(body)
    return b"\n".join(out) + b"\n"


def test_line_numbers_across_many_tiny_blocks(monkeypatch: pytest.MonkeyPatch) -> None:
    data = _varied_log(3000)
    monkeypatch.setattr(logreader, "BLOCK_SIZE", 64)
    found, scanner = scan(data)
    expected, count = reference(data)
    assert len(expected) > 500
    assert found == expected
    assert scanner.lines_read == count == 3000


@pytest.mark.parametrize("block", [1, 2, 3, 5, 8, 13, 63, 64, 65, 127, 199, 200, 201, 4096])
def test_line_numbers_for_every_block_alignment(
    monkeypatch: pytest.MonkeyPatch, block: int
) -> None:
    data = _varied_log(300)
    monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
    for payload in (data, data.rstrip(b"\n")):
        found, scanner = scan(payload)
        expected, count = reference(payload)
        assert found == expected
        assert scanner.lines_read == count


def test_many_matches_in_one_line_yield_it_once() -> None:
    found, _ = scan(b"MARK1 MARK2 MARK3\nx\nMARK4MARK5\n")
    assert [n for n, _ in found] == [1, 3]


def test_matches_do_not_span_lines() -> None:
    """Patterns with classes that could match a newline still only match inside one line."""
    data = b"start ERR\nOR end\nfoo\n\nbar\nERR OR\n"
    found, _ = scan(data, {"a": ["ERR[^a-z]{0,2}OR"], "b": ["foo[^x]*bar"]})
    assert found == [(6, b"ERR OR")]


def test_anchored_patterns_match_at_line_start_and_end(monkeypatch: pytest.MonkeyPatch) -> None:
    """Knowledge patterns are line-oriented (RE2, Python re and grep -E): ^ and $ are line anchors.

    phases.yaml uses "Connected$" for the server_start milestone.
    """
    data = b"noise\nINFO 10-16 05:20:48 [x.py:1] Connected\nStarting now\nnot Starting\nConnected too\n"
    expected = [(2, b"INFO 10-16 05:20:48 [x.py:1] Connected"), (3, b"Starting now")]
    for block in (4096, 16):
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
        found, _ = scan(data, {"end": ["Connected$"], "start": ["^Starting"]})
        assert found == expected


# ---------------------------------------------------------------------------------------------
# long lines and bounded memory


def test_line_longer_than_max_line_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    long_line = b"y" * (logreader.MAX_LINE_BYTES * 3 + 17)
    data = b"MARK1 first\n" + long_line + b"\nplain\nMARK2 after\n"
    for block in (logreader.BLOCK_SIZE, logreader.MAX_LINE_BYTES // 2, 4096, 1000):
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
        found, scanner = scan(data)
        assert found == [(1, b"MARK1 first"), (4, b"MARK2 after")]
        assert scanner.lines_read == 4


def test_long_line_with_marker_at_start_is_yielded_cut(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"a\nMARK1" + b"z" * (logreader.MAX_LINE_BYTES * 2) + b"\nMARK2 tail\n"
    for block in (logreader.BLOCK_SIZE, 4096, 777):
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
        found, scanner = scan(data)
        assert [n for n, _ in found] == [2, 3]
        assert found[0][1].startswith(b"MARK1")
        assert len(normalize(found[0][1], 2).message) <= logreader.MAX_LINE_BYTES
        assert found[1] == (3, b"MARK2 tail")
        assert scanner.lines_read == 3


def _scan_file_measured(path: Path) -> tuple[list[tuple[int, int]], int, int]:
    """(candidates, lines read, peak traced memory); a scan that is not linear never ends."""
    tracemalloc.start()
    try:
        with path.open("rb") as stream, ends_in_time(what=f"a scan of {path.name}"):
            scanner = LogScanner(stream, Prefilter({"m": [MARK]}))
            found = [(n, len(raw)) for n, raw in scanner.candidates()]
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return found, scanner.lines_read, peak


@pytest.mark.parametrize("block", [None, MB])
def test_50mb_single_line_without_newline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, block
) -> None:
    if block:
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
    size = 50 * MB
    path = tmp_path / "one-line.log"
    with path.open("wb") as stream:
        stream.write(b"MARK1 ")
        chunk = b"q" * MB
        for _ in range(size // MB):
            stream.write(chunk)
    found, lines, peak = _scan_file_measured(path)
    assert found == [(1, logreader.MAX_LINE_BYTES)]
    assert lines == 1
    assert peak < 4 * logreader.BLOCK_SIZE + 4 * logreader.MAX_LINE_BYTES
    assert peak < size // 2


def test_50mb_line_between_normal_lines(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(logreader, "BLOCK_SIZE", MB)
    path = tmp_path / "big-middle.log"
    with path.open("wb") as stream:
        stream.write(b"MARK1 one\n")
        chunk = b"MARK9 is not at the start of a line here " * 25_000  # ~1 MB
        for _ in range(50):
            stream.write(chunk.replace(b"MARK9", b"mark9"))
        stream.write(b"\nplain three\nMARK2 four\n")
    found, lines, peak = _scan_file_measured(path)
    assert found == [(1, 9), (4, 10)]
    assert lines == 4
    assert peak < 8 * MB


# ---------------------------------------------------------------------------------------------
# property: the scanner agrees with the naive reference

_FRAGMENTS = [
    b"MARK1",
    b"MARK",
    b"7",
    b"ERR",
    b"OR",
    b"ERR OR",
    b"\r",
    b"\xff\xfe",
    b"\xc3(",
    b"\x1b[31m",
    b" ",
    b"\xe2\x82",
    b"\xf0\x9f\x98\x80",
    b"MAR",
    b"K5",
]
_line = st.lists(st.one_of(st.sampled_from(_FRAGMENTS), st.binary(max_size=12)), max_size=6).map(
    lambda parts: b"".join(parts).replace(b"\n", b"").replace(b"\x00", b"")
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    lines=st.lists(_line, max_size=40),
    trailing_newline=st.booleans(),
    block=st.integers(min_value=1, max_value=96),
)
@pytest.mark.slow
def test_scanner_matches_naive_reference(
    lines: list[bytes], trailing_newline: bool, block: int
) -> None:
    data = b"\n".join(lines) + (b"\n" if trailing_newline and lines else b"")
    # ASCII-only classes: bytes (the reference) and RE2's UTF-8 characters agree on them, so this
    # checks block splitting; a negated class would differ on multi-byte and invalid sequences.
    pattern = "MARK[0-9]|ERR[-_ ]{0,2}OR"
    saved = logreader.BLOCK_SIZE
    logreader.BLOCK_SIZE = block
    try:
        found, scanner = scan(data, {"m": ["MARK[0-9]"], "e": ["ERR[-_ ]{0,2}OR"]})
    finally:
        logreader.BLOCK_SIZE = saved
    expected, count = reference(data, pattern)
    assert found == expected
    assert scanner.lines_read == count
    all_lines = data.split(b"\n")
    if data.endswith(b"\n") or not data:
        all_lines.pop()
    assert (
        list(scanner.tail) == [(i + 1, x) for i, x in enumerate(all_lines)][-logreader.TAIL_LINES :]
    )


# ---------------------------------------------------------------------------------------------
# Prefilter


def test_prefilter_deactivate_stops_matching_a_group(monkeypatch: pytest.MonkeyPatch) -> None:
    data = b"alpha 1\nbeta 1\nalpha 2\nbeta 2\nalpha 3\n"
    for block in (4096, 8):
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
        prefilter = Prefilter({"a": ["alpha"], "b": ["beta"]})
        scanner = LogScanner(io.BytesIO(data), prefilter)
        seen = []
        for number, raw in scanner.candidates():
            seen.append(number)
            if raw.startswith(b"alpha"):
                prefilter.deactivate("a")
        assert seen == [1, 2, 4]
        assert scanner.lines_read == 5


def test_prefilter_deactivate_everything_still_counts_lines() -> None:
    prefilter = Prefilter({"a": ["alpha"]})
    scanner = LogScanner(io.BytesIO(b"alpha\nalpha\nalpha\nx\n"), prefilter)
    seen = []
    for number, _ in scanner.candidates():
        seen.append(number)
        prefilter.deactivate("a")
    assert seen == [1]
    assert prefilter.regex is None
    assert scanner.lines_read == 4


def test_prefilter_deactivate_unknown_or_twice_is_harmless() -> None:
    prefilter = Prefilter({"a": ["alpha"], "b": ["beta"]})
    prefilter.deactivate("zzz")
    prefilter.deactivate("a")
    prefilter.deactivate("a")
    found = list(LogScanner(io.BytesIO(b"alpha\nbeta\n"), prefilter).candidates())
    assert found == [(2, b"beta")]


def test_prefilter_activate_brings_a_group_back() -> None:
    prefilter = Prefilter({"a": ["alpha"], "b": ["beta"]})
    scanner = LogScanner(io.BytesIO(b"alpha\nbeta\nalpha\nbeta\n"), prefilter)
    seen = []
    for number, raw in scanner.candidates():
        seen.append(number)
        if number == 1:
            prefilter.deactivate("a")
        if raw == b"beta" and number == 2:
            prefilter.activate(["a"])
    assert seen == [1, 2, 3, 4]


# ---------------------------------------------------------------------------------------------
# scan_log with the real knowledge base


_WRAPPERS = [
    lambda s: s,
    lambda s: (
        "\x1b[1;36m(EngineCore_DP0 pid=406)\x1b[0;0m ERROR 10-16 05:20:48 [core.py:1083] " + s
    ),
    lambda s: (
        "2025-10-16T05:20:48.123456789Z (EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] "
        + s
    ),
    lambda s: "api-1  | (EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] " + s,
    lambda s: "[pod/vllm-0/vllm] (EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] " + s,
    lambda s: _json_file_line(
        "(EngineCore_DP0 pid=406) ERROR 10-16 05:20:48 [core.py:1083] " + s + "\n"
    ).decode(),
]


@pytest.mark.parametrize("wrap", range(len(_WRAPPERS)))
@pytest.mark.parametrize("block", [None, 64])
def test_scan_log_finds_error_line_with_exact_number(
    kb, monkeypatch: pytest.MonkeyPatch, wrap: int, block
) -> None:
    if block:
        monkeypatch.setattr(logreader, "BLOCK_SIZE", block)
    filler = "".join(
        f"(APIServer pid=1) DEBUG 10-16 05:20:{i % 60:02d} [x.py:1] filler {i}\r\n"
        for i in range(500)
    )
    error = _WRAPPERS[wrap]("RuntimeError: No CUDA GPUs are available")
    data = (filler + error + "\r\n" + "trailing line\n").encode()
    result = scan_log(io.BytesIO(data), "log", kb)
    assert result.lines_read == 502
    assert _hits_by_cause(result).get("no_gpu_visible", [None])[0] == 501


def test_scan_log_ignores_error_phrase_in_info_line(kb) -> None:
    data = b"(APIServer pid=1) INFO 10-16 05:20:48 [x.py:1] checking: No CUDA GPUs are available\n"
    result = scan_log(io.BytesIO(data), "log", kb)
    assert "no_gpu_visible" not in _hits_by_cause(result)


def test_scan_log_ignores_error_phrase_in_coloured_json_file_info_line(kb) -> None:
    data = (
        _json_file_line(
            "\x1b[1;36m(APIServer pid=1)\x1b[0;0m INFO 10-16 05:20:48 [x.py:1] checking: No CUDA GPUs are available\n"
        )
        + b"\n"
    )
    result = scan_log(io.BytesIO(data), "log", kb)
    assert "no_gpu_visible" not in _hits_by_cause(result)


_SHM_ERROR = "RuntimeError: unable to mmap 9437184 bytes from file </torch_3519_2893081396_0>: Cannot allocate memory (12)"
_MODELS_REQUEST = '(APIServer pid=1) INFO:     10.0.0.7:51234 - "GET /v1/models HTTP/1.1" 200 OK'


def test_docker_json_file_helper_escapes_like_docker() -> None:
    raw = _json_file_line(_SHM_ERROR + "\n")
    assert raw.startswith(b'{"log":"RuntimeError: unable to mmap')
    assert b"\\u003c/torch_" in raw
    assert normalize(raw, 1).message == _SHM_ERROR


@pytest.mark.parametrize("json_file", [False, True])
def test_scan_log_json_file_line_with_escaped_characters(kb, json_file: bool) -> None:
    """A pattern with <, > or " in it must match a json-file line as it matches the plain line."""
    line = _json_file_line(_SHM_ERROR + "\n") if json_file else _SHM_ERROR.encode()
    result = scan_log(io.BytesIO(b"first line\n" + line + b"\n"), "log", kb)
    assert _hits_by_cause(result).get("shm_insufficient") == [2]


@pytest.mark.parametrize("json_file", [False, True])
def test_scan_log_json_file_serving_milestone(kb, json_file: bool) -> None:
    line = _json_file_line(_MODELS_REQUEST + "\n") if json_file else _MODELS_REQUEST.encode()
    result = scan_log(io.BytesIO(line + b"\n"), "log", kb)
    assert result.milestones.get("serving") == 1


def test_scan_log_connected_milestone(kb) -> None:
    """phases.yaml's server_start milestone includes the pattern "Connected$"."""
    data = b"(APIServer pid=1) INFO 10-16 05:20:48 [x.py:1] Connected\n"
    result = scan_log(io.BytesIO(data), "log", kb)
    assert result.milestones.get("server_start") == 1
    assert result.phase_reached == "after_start"


def test_scan_log_empty(kb) -> None:
    result = scan_log(io.BytesIO(b""), "empty", kb)
    assert result.lines_read == 0
    assert result.hits == {}
    assert result.tail == []


@pytest.mark.parametrize("offset", range(-12, 3))
def test_evidence_is_never_cut_inside_a_token(offset: int) -> None:
    """Half a secret matches no redaction rule: the cut drops the token it would split."""
    secret = "hf_AbCdEfGhIjKlMnOpQrStUvWxYz01234567"
    start = logreader.EVIDENCE_CHARS - 1 + offset
    line = "w" * (start - 1) + " " + secret + " and the rest of the line"
    display = normalize(line.encode(), 1).display
    assert display.endswith("…") and len(display) <= logreader.EVIDENCE_CHARS
    shown = display[:-1].rsplit(" ", 1)[-1]
    assert shown in ("", secret) or not secret.startswith(shown), display[-60:]
