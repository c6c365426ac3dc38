"""A large input is hashed ahead on another core (inputs.hash_ahead, Fingerprint(ahead=True)):
whatever the interleaving of the helper and the reads, the sha256 and size are those of the bytes
read; a file that shrinks under the helper is a one-line error, never a wrong digest."""

from __future__ import annotations

import hashlib
import json
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from cli import run_cli
from deadlines import wait_for
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from vllm_triage import inputs
from vllm_triage.errors import InputError
from vllm_triage.inputs import Fingerprint, hash_ahead, open_input


@pytest.fixture
def small_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    """Helpers for files of any size, hashing in small pieces (so reads and helper interleave)."""
    monkeypatch.setattr(inputs, "HASH_AHEAD_MIN_BYTES", 1)
    monkeypatch.setattr(inputs._HashAhead, "_PIECE_BYTES", 4096)


@settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    data=st.tuples(st.integers(1, 4000), st.integers(0, 1000)).map(
        lambda size_seed: hashlib.shake_256(b"%d" % size_seed[1]).digest(size_seed[0])
    ),
    sizes=st.lists(st.integers(1, 1000), max_size=12),
    stop_at=st.none() | st.integers(0, 12),
    early=st.booleans(),
    pieces_ahead=st.integers(0, 40),
)
@pytest.mark.slow
def test_the_digest_is_the_bytes_read_whatever_the_interleaving(
    small_pieces: None,
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    data: bytes,
    sizes: list[int],
    stop_at: int | None,
    early: bool,
    pieces_ahead: int,
) -> None:
    """The helper hashes exactly `pieces_ahead` pieces before the reads start (then waits), so the
    reads catch up with it anywhere in the file: at a piece's edge, inside a read, or never."""
    path = tmp_path_factory.mktemp("ahead") / "input.log"
    path.write_bytes(data)
    permits, opened = threading.Semaphore(0), threading.Event()
    pread, stop = os.pread, inputs._HashAhead.stop

    def gated_pread(fd: int, size: int, offset: int) -> bytes:
        while not opened.is_set() and not permits.acquire(timeout=0.005):
            pass
        return pread(fd, size, offset)

    def stop_and_open_the_gate(helper: inputs._HashAhead) -> tuple[object, int]:
        helper._stopping.set()
        opened.set()  # a piece waiting at the gate finishes, then the helper stops
        return stop(helper)

    with monkeypatch.context() as patch, _opened_at_the_end(opened):
        patch.setattr(inputs._HashAhead, "_PIECE_BYTES", 64)
        patch.setattr(inputs.os, "pread", gated_pread)
        patch.setattr(inputs._HashAhead, "stop", stop_and_open_the_gate)
        if early:
            hash_ahead([str(path)])  # as the CLI does, before the reader opens the file
        with open_input(path, "a log file") as (stream, name):
            reader = Fingerprint(stream, ahead=True, name=name)
            assert reader._ahead is not None
            if pieces_ahead:
                permits.release(pieces_ahead)
            _wait_until_hashed(reader, min(len(data), pieces_ahead * 64))
            for index, size in enumerate(sizes):
                if index == stop_at:
                    reader.stop_hashing_ahead()
                if not reader.read(size):
                    break
            while reader.read(65536):
                pass
            reader.close()
    assert reader.size == len(data)
    assert reader.sha256 == hashlib.sha256(data).hexdigest()


@contextmanager
def _opened_at_the_end(opened: threading.Event) -> Iterator[None]:
    """However the example ends, a helper waiting at the gate is let go."""
    try:
        yield
    finally:
        opened.set()


def _wait_until_hashed(reader: Fingerprint, size: int) -> None:
    wait_for(
        lambda: reader._ahead is None or reader._ahead.frontier >= size,
        "the helper did not hash the file",
    )


def test_a_file_that_grows_is_hashed_as_far_as_it_is_read(small_pieces: None, tmp_path: Path):
    path = tmp_path / "live.log"
    path.write_bytes(b"INFO started\n" * 2000)
    with open_input(path, "a log file") as (stream, _):
        reader = Fingerprint(stream, ahead=True)
        _wait_until_hashed(reader, path.stat().st_size)
        with path.open("ab") as log:
            log.write(b"ERROR appended while it was read\n" * 100)
        while reader.read(10_000):
            pass
        reader.close()
    assert reader.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_file_that_shrinks_under_the_helper_is_one_line_error(
    small_pieces: None, tmp_path: Path
) -> None:
    path = tmp_path / "rotated.log"
    path.write_bytes(b"INFO serving\n" * 5000)
    with open_input(path, "a log file") as (stream, name):
        reader = Fingerprint(stream, ahead=True, name=name)
        _wait_until_hashed(reader, path.stat().st_size)
        os.truncate(path, 1000)  # copytruncate: the rest of the file is gone
        while reader.read(4096):
            pass
        reader.close()
    with pytest.raises(InputError) as raised:
        _ = reader.sha256
    message = str(raised.value)
    assert message.startswith(f"{path}: the file shrank while it was read")
    assert "\n" not in message


def test_nothing_is_hashed_ahead_for_what_is_not_a_large_regular_file(tmp_path: Path) -> None:
    small = tmp_path / "small.log"
    small.write_bytes(b"INFO a small log\n")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    waiting = dict(inputs._WAITING)
    given = [str(tmp_path / "missing.log"), str(fifo), str(small), "-", str(tmp_path), "a\x00b"]
    hash_ahead(given)
    assert waiting == inputs._WAITING  # returned at once: no FIFO waited for, no helper
    with open_input(small, "a log file") as (stream, _):
        reader = Fingerprint(stream, ahead=True)
        assert reader._ahead is None
        assert reader.read() == small.read_bytes()
    assert reader.sha256 == hashlib.sha256(small.read_bytes()).hexdigest()


@pytest.mark.slow
def test_diagnose_names_a_large_log_by_its_sha256(tmp_path: Path) -> None:
    """The CLI path: hashed ahead from the start, handed over when the scan reads ahead."""
    line = b"(APIServer pid=1) INFO 12-01 10:15:00 [loggers.py:123] Avg prompt throughput: 1.0\n"
    log = tmp_path / "large.log"
    log.write_bytes(line * (inputs.HASH_AHEAD_MIN_BYTES // len(line) * 2))
    done = run_cli("diagnose", str(log), "--format", "json", "--case", str(tmp_path / "case"))
    assert done.exit_code == 0, done.stderr
    made_from = json.loads(done.stdout)["made_from"]
    assert made_from == [
        {
            "name": str(log),
            "sha256": hashlib.sha256(log.read_bytes()).hexdigest(),
            "size": log.stat().st_size,
        }
    ]


def test_a_path_with_a_nul_byte_is_a_one_line_input_error() -> None:
    with (
        pytest.raises(InputError, match=r"^a\\x00b: not a valid path"),
        open_input("a\x00b", "a log"),
    ):
        pass
