"""Counting the lines in a log's blocks.

A large log is read, hashed and counted on one thread while another searches it with Hyperscan.
`bytes.count` holds the GIL, so the searching thread waited for it each time a scan returned;
numpy's compare-and-count releases the GIL and runs about three times faster. Importing numpy
takes about a tenth of a second, so a small log, read on one thread, keeps `bytes.count` and only
the read-ahead of a large one asks for `block_counter` (bench/README.md has the figures).
"""

from __future__ import annotations

from collections.abc import Callable

# Below this many bytes `bytes.count` is quicker than numpy's per-call overhead.
NUMPY_MIN_BYTES = 64 << 10

NewlineCounter = Callable[[bytes, int, int], int]


def count_newlines(buf: bytes, lo: int, hi: int) -> int:
    """How many newlines buf[lo:hi] holds."""
    return buf.count(b"\n", lo, hi)


def block_counter() -> NewlineCounter:
    """`count_newlines` for large blocks: numpy's, which releases the GIL (imports numpy)."""
    import numpy

    frombuffer, count_nonzero, uint8 = numpy.frombuffer, numpy.count_nonzero, numpy.uint8

    def count(buf: bytes, lo: int, hi: int) -> int:
        if hi - lo < NUMPY_MIN_BYTES:
            return buf.count(b"\n", lo, hi)
        return int(count_nonzero(frombuffer(buf, uint8, hi - lo, lo) == 10))

    return count
