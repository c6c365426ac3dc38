"""Line counting for large blocks (numpy) counts exactly what bytes.count counts."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from vllm_triage.diagnose import newlines
from vllm_triage.diagnose.newlines import block_counter, count_newlines


@given(
    data=st.binary(max_size=3000).map(lambda b: b.replace(b"x", b"\n")),
    cut=st.tuples(st.integers(0, 3000), st.integers(0, 3000)),
)
def test_numpy_counts_like_bytes_count_at_any_offsets(data: bytes, cut: tuple[int, int]) -> None:
    lo, hi = sorted(min(c, len(data)) for c in cut)
    saved = newlines.NUMPY_MIN_BYTES
    newlines.NUMPY_MIN_BYTES = 0  # numpy for every span, down to an empty one
    try:
        assert block_counter()(data, lo, hi) == data.count(b"\n", lo, hi)
    finally:
        newlines.NUMPY_MIN_BYTES = saved


@pytest.mark.parametrize("size", [newlines.NUMPY_MIN_BYTES - 1, 2 << 20])
def test_small_and_large_spans_count_every_newline(size: int) -> None:
    line = b"INFO 12-01 10:15:00 [loggers.py:123] Avg prompt throughput: 1.0 tokens/s\r\n"
    block = (line * (size // len(line) + 2))[: size + 7]
    count = block_counter()
    assert count(block, 7, size + 7) == count_newlines(block, 7, size + 7) > 0
