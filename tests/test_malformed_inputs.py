"""Malformed and hostile input to `diagnose`, `diagnose --bundle` and `prefix-check`.

Through the real console script in a child process: each case ends in one `vllm-triage: error:`
line with exit 2, or in an honest result with exit 0; never a traceback, never a hang. The child's
peak memory is measured (os.wait4) and stays under RSS_LIMIT_MB, even for 1 GiB inputs. The child
runs in a work folder with its own TMPDIR, and neither holds anything new after the run: nothing is
written outside the case ($VLLM_TRIAGE_CASE, a folder of its own). Shapes too many to run one
process each go through the library, with hypothesis.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from deadlines import ends_in_time
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from peak_memory import run_measured
from rich.console import Console

from vllm_triage.bundle.read import (
    MAX_FACTS_BYTES,
    MAX_MANIFEST_BYTES,
    BundleError,
    open_bundle,
)
from vllm_triage.diagnose import CompatOptions, DiagnoseOptions, compat, diagnose
from vllm_triage.errors import InputError
from vllm_triage.image.config import image_cuda_from_document
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.prefix.check import (
    MAX_LINE_WEIGHT,
    MAX_REQUESTS,
    MAX_SAMPLE_WEIGHT,
    PrefixCheckOptions,
    load_requests,
    prefix_check,
)
from vllm_triage.render.markdown import prefix_markdown
from vllm_triage.render.prefix_check import prefix_renderable
from vllm_triage.render.printable import printable

MB = 1 << 20
GiB = 1 << 30
RSS_LIMIT_MB = 300
EXIT_OK, EXIT_BAD_INPUT = 0, 2
REAL = Path(__file__).parent / "data" / "collect" / "h200-580.159.04" / "real-bundle"
NAME = "bundle-20261130T203859633796Z"
NO_GPU = b"RuntimeError: No CUDA GPUs are available\n"
SECRET = "MARKER-outside-the-bundle-7f3a"


# ---------------------------------------------------------------------------------------------
# running the console script


@dataclass
class Run:
    code: int
    stdout: bytes
    stderr: bytes
    peak_rss_mb: float

    @property
    def text(self) -> str:
        return (self.stdout + self.stderr).decode("utf-8", "replace")


@dataclass
class Case:
    """One test's case: `work` is the child's working folder, `tmp` its TMPDIR; `root` holds
    inputs made outside both (they stand for things outside the case)."""

    root: Path
    work: Path
    tmp: Path

    def run(
        self,
        *args: str,
        stdin: bytes | int = b"",
        close_stdin: bool = False,
        timeout: float = 60,
    ) -> Run:
        """Run `vllm-triage ARGS` and check it wrote nothing in the work folder or TMPDIR."""
        before = _snapshot(self.work), _snapshot(self.tmp)
        stdin_file = self.root / "stdin"
        stdin_file.write_bytes(stdin if isinstance(stdin, bytes) else b"")
        # The artifacts go to a case folder of their own: the work folder must stay as it was.
        env = {**os.environ, "TMPDIR": str(self.tmp), "VLLM_TRIAGE_CASE": str(self.root / "case")}
        env.pop("VLLM_TRIAGE_TRACEBACK", None)
        with (
            (self.root / "stdout").open("wb") as out,
            (self.root / "stderr").open("wb") as err,
            stdin_file.open("rb") as given_stdin,
        ):
            code, peak = run_measured(
                [sys.executable, "-m", "vllm_triage", *args],
                timeout=timeout,
                cwd=self.work,
                env=env,
                stdin=stdin if isinstance(stdin, int) else given_stdin,
                stdout=out,
                stderr=err,
                close_stdin=close_stdin,
            )
        run = Run(
            code, (self.root / "stdout").read_bytes(), (self.root / "stderr").read_bytes(), peak
        )
        assert b"Traceback" not in run.stderr, run.text[-3000:]
        assert run.peak_rss_mb < RSS_LIMIT_MB, f"peak RSS {run.peak_rss_mb:.0f} MB"
        assert (_snapshot(self.work), _snapshot(self.tmp)) == before, "wrote outside the case"
        return run


def _snapshot(folder: Path) -> dict[str, tuple[int, int]]:
    """Every entry under folder (links not followed) with its size and modification time."""
    found = {}
    for parent, folders, files in os.walk(folder):
        for name in folders + files:
            info = os.lstat(os.path.join(parent, name))
            found[os.path.relpath(os.path.join(parent, name), folder)] = (
                info.st_size,
                info.st_mtime_ns,
            )
    return found


def bad_input(run: Run, *words: str) -> str:
    """Exit 2, nothing on stdout, exactly one `vllm-triage: error:` line naming `words`."""
    lines = [line for line in run.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    assert run.code == EXIT_BAD_INPUT, (run.code, run.text[-2000:])
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error:"), lines
    assert run.stdout == b""
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def ok_json(run: Run) -> dict[str, Any]:
    assert run.code == EXIT_OK, run.text[-2000:]
    document: dict[str, Any] = json.loads(run.stdout)
    return document


@pytest.fixture
def case(tmp_path: Path) -> Iterator[Case]:
    made = Case(tmp_path, tmp_path / "work", tmp_path / "tmp")
    made.work.mkdir()
    made.tmp.mkdir()
    yield made
    for big in tmp_path.rglob("*"):  # the sparse and 1 GiB files are not kept by pytest
        if big.is_file() and not big.is_symlink() and big.stat().st_size > 64 * MB:
            big.unlink()


def _sparse(path: Path, head: bytes, size: int) -> Path:
    """head, then zeros up to size, without writing the zeros (a hole in the file)."""
    with path.open("wb") as stream:
        stream.write(head)
        stream.truncate(size)
    return path


def _filled(path: Path, head: bytes, byte: bytes, size: int, tail: bytes = b"") -> Path:
    """head, then `byte` repeated up to size, then tail (written in 16 MiB chunks)."""
    chunk = byte * (16 * MB)
    with path.open("wb") as stream:
        stream.write(head)
        left = size - len(head)
        while left > 0:
            stream.write(chunk[: min(left, len(chunk))])
            left -= len(chunk)
        stream.write(tail)
    return path


def _request(text: str) -> dict[str, Any]:
    return {
        "model": "m",
        "messages": [
            {"role": "system", "content": "You are a careful assistant for the platform team."},
            {"role": "user", "content": text},
        ],
    }


def _jsonl(path: Path, bodies: list[Any]) -> Path:
    path.write_text("".join(json.dumps(body) + "\n" for body in bodies))
    return path


def _bundle(folder: Path) -> Path:
    """A copy of the real bundle written by collect on an H200 host."""
    shutil.copytree(REAL / NAME, folder)
    return folder


# ---------------------------------------------------------------------------------------------
# inputs that are not regular files: refused at once, never waited on


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("diagnose", "{fifo}"), ("fifo", "a FIFO")),
        (("diagnose", "--bundle", "{fifo}"), ("fifo", "a FIFO")),
        (("prefix-check", "{requests}", "--launch-cmd", "{fifo}"), ("--launch-cmd", "a FIFO")),
    ],
    ids=["log", "bundle", "launch-cmd"],
)
def test_a_fifo_is_refused_without_blocking(
    case: Case, args: tuple[str, ...], words: tuple[str, ...]
) -> None:
    fifo = case.root / "fifo"
    os.mkfifo(fifo)
    requests = _jsonl(case.root / "requests.jsonl", [_request("a"), _request("b")])
    with ends_in_time(what="a command given a FIFO nobody writes"):
        run = case.run(*(a.format(fifo=fifo, requests=requests) for a in args), timeout=30)
    bad_input(run, *words)


def test_a_fifo_as_requests_or_image_config_is_refused(tmp_path: Path) -> None:
    """The same refusal through the library (a writer never comes: blocking would hang)."""
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    with pytest.raises(InputError, match="fifo: a FIFO, not a regular file"):
        prefix_check(PrefixCheckOptions(fifo))
    with pytest.raises(InputError, match="fifo: not a regular file"):
        compat(CompatOptions("575.57.08", image_config=fifo))
    for kind in ("a device", "a directory"):
        path = Path("/dev/zero") if kind == "a device" else tmp_path
        with pytest.raises(InputError, match=kind.split()[-1]):
            load_requests(path)


# ---------------------------------------------------------------------------------------------
# standard input: closed, a directory, empty


def test_closed_stdin(case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    bad_input(case.run("diagnose", "-", close_stdin=True), "standard input is closed")
    monkeypatch.setattr(sys, "stdin", None)  # what Python sets when fd 0 is closed at start
    with pytest.raises(InputError, match="standard input is closed"):
        prefix_check(PrefixCheckOptions("-"))


def test_stdin_that_is_a_directory_once_running(case: Case) -> None:
    """fd 0 turned into a directory after start-up: refused by the check on standard input."""
    script = (
        "import os, sys; from vllm_triage.cli import main; "
        f"os.dup2(os.open({str(case.root)!r}, os.O_RDONLY), 0); "
        "sys.argv = ['vllm-triage', 'diagnose', '-']; main()"
    )
    before = _snapshot(case.work)
    result = subprocess.run(
        [sys.executable, "-c", script], cwd=case.work, capture_output=True, timeout=60, check=False
    )
    run = Run(result.returncode, result.stdout, result.stderr, 0.0)
    assert "Traceback" not in run.text
    bad_input(run, "standard input is a directory")
    assert _snapshot(case.work) == before


def test_stdin_that_is_a_directory_from_the_start(case: Case) -> None:
    """`vllm-triage diagnose - < folder`: CPython itself refuses to start (`<stdin> is a
    directory, cannot continue`) before any of the tool's code runs; no hang, no traceback."""
    fd = os.open(case.root, os.O_RDONLY)
    try:
        run = case.run("diagnose", "-", stdin=fd, timeout=30)
    finally:
        os.close(fd)
    assert run.code != EXIT_OK
    assert b"directory" in run.stderr


def test_empty_stdin_for_prefix_check(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"")))
    with pytest.raises(InputError, match="<stdin>: no requests"):
        prefix_check(PrefixCheckOptions("-"))


# ---------------------------------------------------------------------------------------------
# diagnose: names, binary files among logs, huge lines


def test_file_name_that_is_not_utf8_in_json(case: Case) -> None:
    name = os.fsdecode(b"bad\xff\x1b.log")
    (case.root / name).write_bytes(NO_GPU)
    document = ok_json(case.run("diagnose", str(case.root / name), "--format", "json"))
    shown = document["inputs"][0]
    assert shown.endswith("bad\\xff\\x1b.log")
    assert document["primary"]["cause"] == "no_gpu_visible"
    assert document["primary"]["evidence"][0]["file"] == shown


def test_a_binary_file_among_logs_is_named_and_the_others_are_diagnosed(case: Case) -> None:
    (case.root / "ok.log").write_bytes(b"INFO starting\n" + NO_GPU)
    (case.root / "core").write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 64)
    document = ok_json(case.run("diagnose", "../core", "../ok.log", "--format", "json"))
    assert document["primary"]["cause"] == "no_gpu_visible"
    assert document["inputs"] == ["../ok.log"]
    assert any(note.startswith("../core: not a text log") for note in document["notes"])


def test_only_binary_logs_is_an_error_naming_them(tmp_path: Path) -> None:
    for name in ("a.bin", "b.bin"):
        (tmp_path / name).write_bytes(b"\x00\x01\x02" * 100)
    with pytest.raises(InputError, match=r"a\.bin: not a text log .*\(and 1 more log"):
        diagnose(
            DiagnoseOptions(
                logs=(
                    str(tmp_path / "a.bin"),
                    str(tmp_path / "b.bin"),
                )
            )
        )


def test_a_binary_log_inside_a_bundle_or_beside_it_is_a_note(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / NAME)
    (bundle / "logs" / "core.log").write_bytes(b"\x00" * 4096)
    given = tmp_path / "given.bin"
    given.write_bytes(b"\x00\x01" * 100)
    verdict = diagnose(DiagnoseOptions(logs=(str(given),), bundle=bundle))
    assert verdict.inputs == [str(bundle), f"{NAME}/logs/given-1-k3.log"]
    assert any(n.startswith(f"{NAME}/logs/core.log: not a text log") for n in verdict.notes)
    assert any(n.startswith(f"{given}: not a text log") for n in verdict.notes)


def test_terminal_controls_and_surrogates_are_made_printable() -> None:
    """What a log or a request says is quoted in the output: an escape sequence must not reach
    the reader's terminal (text, markdown), and a lone surrogate must not break any format."""
    report = prefix_check(
        PrefixCheckOptions(
            [
                {"messages": [{"role": "system", "content": "sys"}, {"role": "user", "content": c}]}
                for c in ("a\ud800 \x1b]0;owned\x07 \x9b2J", "b")
            ]
        )
    )
    for terminal in (True, False):
        shown = printable(report, terminal=terminal).model_dump_json()
        text = json.loads(shown)["divergences"][0]["a_excerpt"]
        assert "\ud800" not in text and "\ufffd" in text
        assert ("\x1b" in text) is not terminal and ("\x9b" in text) is not terminal
        assert ("\u241b]0;owned\u2407" in text) is terminal


@pytest.mark.slow
def test_a_1gib_line_of_nuls_after_text_is_streamed(case: Case) -> None:
    """A log whose end is a hole of zeros (a crashed writer): one 1 GiB line, bounded memory."""
    head = b"INFO starting engine\n" * 500 + NO_GPU
    log = _sparse(case.root / "crashed.log", head, GiB)
    document = ok_json(case.run("diagnose", str(log), "--format", "json"))
    assert document["primary"]["cause"] == "no_gpu_visible"
    assert document["lines_read"] == 502


@pytest.mark.slow
def test_a_128mib_single_text_line_is_streamed(case: Case) -> None:
    log = _filled(case.root / "one-line.log", NO_GPU.rstrip(), b"y", 128 * MB, b"\n")
    document = ok_json(case.run("diagnose", str(log), "--format", "json"))
    assert document["lines_read"] == 1
    assert document["primary"]["cause"] == "no_gpu_visible"


@pytest.mark.slow
def test_a_1gib_file_of_nuls_is_refused_at_once(case: Case) -> None:
    log = _sparse(case.root / "zeros.log", b"", GiB)
    with ends_in_time(what="diagnose of 1 GiB of NUL bytes"):
        bad_input(case.run("diagnose", str(log)), "zeros.log", "not a text log")


# ---------------------------------------------------------------------------------------------
# diagnose --bundle: sizes, nesting, symlinks out of the bundle, case folders with junk


@pytest.mark.slow
def test_a_1gib_manifest_is_refused_before_parsing(case: Case) -> None:
    bundle = _bundle(case.root / NAME)
    _filled(bundle / "manifest.json", b"", b" ", GiB, b"{}")
    bad_input(case.run("diagnose", "--bundle", str(bundle)), "manifest.json", "larger than")


def test_a_manifest_nested_100k_deep(case: Case) -> None:
    bundle = _bundle(case.root / NAME)
    (bundle / "manifest.json").write_bytes(b"[" * 100_000 + b"]" * 100_000)
    bad_input(case.run("diagnose", "--bundle", str(bundle)), "manifest.json", "nested too deep")


@pytest.mark.slow
def test_bundle_json_at_its_caps_in_the_densest_form_stays_bounded(case: Case) -> None:
    """Under the caps but as dense as JSON gets (empty arrays, one-byte keys): parsed, validated
    and diagnosed within the memory limit."""
    bundle = _bundle(case.root / NAME)
    manifest = json.loads((bundle / "manifest.json").read_text())
    manifest["options"]["junk"] = None
    text = json.dumps(manifest)
    room = (MAX_MANIFEST_BYTES - len(text)) // 3
    text = text.replace('"junk": null', '"junk": [' + "[]," * (room - 1) + "[]]")
    (bundle / "manifest.json").write_text(text)
    facts = json.loads((bundle / "facts.json").read_text())
    facts["container"] = {"engine": "docker", "env": {"k": ""}}
    text = json.dumps(facts)
    keys = ",".join(f'"{i:x}":""' for i in range((MAX_FACTS_BYTES - len(text)) // 12))
    (bundle / "facts.json").write_text(text.replace('"k": ""', keys))
    assert MAX_MANIFEST_BYTES - 8 < (bundle / "manifest.json").stat().st_size <= MAX_MANIFEST_BYTES
    assert (bundle / "facts.json").stat().st_size > MAX_FACTS_BYTES * 0.8
    document = ok_json(case.run("diagnose", "--bundle", str(bundle), "--format", "json"))
    assert any("checksum differs" in note for note in document["notes"])


@pytest.mark.parametrize(
    ("name", "content", "words"),
    [
        ("facts.json", b'{"gpu": {"gpus": [' * 30_000, "facts.json .*nested too deep"),
        ("facts.json", b'{"host": {"uptime_s": ' + b"7" * 5000 + b"}}", "facts.json .*too long"),
        ("manifest.json", b'{"files": ' + b"1" * 5000 + b"}", "manifest.json .*too long"),
        ("manifest.json", b'{"x": "\xff"}', "manifest.json .*not UTF-8"),
    ],
    ids=["deep-facts", "5000-digit-facts", "5000-digit-manifest", "not-utf8"],
)
def test_bundle_json_nested_huge_numbers_or_bytes(
    tmp_path: Path, name: str, content: bytes, words: str
) -> None:
    bundle = _bundle(tmp_path / NAME)
    (bundle / name).write_bytes(content)
    with pytest.raises(BundleError, match=words):
        diagnose(DiagnoseOptions(bundle=bundle))


def test_facts_that_link_to_a_huge_file_outside_are_not_read(case: Case) -> None:
    bundle = _bundle(case.root / NAME)
    huge = _sparse(case.root / "huge.json", b'{"host": ', GiB)
    (bundle / "facts.json").unlink()
    (bundle / "facts.json").symlink_to(huge)
    bad_input(case.run("diagnose", "--bundle", str(bundle)), "facts.json", "a symlink")


def test_a_manifest_that_is_a_symlink_is_refused(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / NAME)
    outside = tmp_path / "manifest-elsewhere.json"
    (bundle / "manifest.json").rename(outside)
    (bundle / "manifest.json").symlink_to(outside)
    with pytest.raises(BundleError, match=r"manifest\.json: a symlink; not read"):
        diagnose(DiagnoseOptions(bundle=bundle))


@pytest.mark.slow
def test_links_out_of_the_bundle_are_never_followed(case: Case) -> None:
    """Logs that link outside (a secret file, a FIFO), and folders that are links: each is a
    note, nothing outside is read, and the bundle's own log is still diagnosed."""
    bundle = _bundle(case.root / NAME)
    secret = case.root / "shadow"
    secret.write_text(f"RuntimeError: No CUDA GPUs are available {SECRET}\n")
    fifo = case.root / "pipe"
    os.mkfifo(fifo)
    (bundle / "logs" / "x.log").symlink_to(secret)
    (bundle / "logs" / "f.log").symlink_to(fifo)
    os.mkfifo(bundle / "logs" / "raw-fifo.log")
    outside = case.root / "gpu-elsewhere"
    (bundle / "gpu").rename(outside)
    (bundle / "gpu").symlink_to(outside, target_is_directory=True)
    document = ok_json(case.run("diagnose", "--bundle", str(bundle), "--format", "json"))
    assert SECRET not in json.dumps(document)
    assert document["inputs"] == [str(bundle), f"{NAME}/logs/given-1-k3.log"]
    notes = "\n".join(document["notes"])
    for name in ("x.log: a symlink", "f.log: a symlink", "raw-fifo.log: a FIFO"):
        assert f"{NAME}/logs/{name}; not read" in notes, notes
    assert f"{NAME}/gpu/nvidia-smi-q.xml: a folder on its path is a symlink" in notes


def test_a_logs_folder_that_links_outside_is_not_listed(case: Case) -> None:
    bundle = _bundle(case.root / NAME)
    elsewhere = case.root / "var-log"
    elsewhere.mkdir()
    (elsewhere / "secret.log").write_text(f"RuntimeError: No CUDA GPUs are available {SECRET}\n")
    shutil.rmtree(bundle / "logs")
    (bundle / "logs").symlink_to(elsewhere, target_is_directory=True)
    with open_bundle(bundle) as opened:
        assert opened.logs == []
        assert any("logs: not a folder" in problem for problem in opened.problems)
    verdict = diagnose(DiagnoseOptions(bundle=bundle))
    assert SECRET not in verdict.model_dump_json()


def test_a_case_folder_never_picks_a_linked_or_odd_bundle(case: Case) -> None:
    case_folder = case.root / "triage"
    case_folder.mkdir()
    _bundle(case_folder / "bundle-00000000T000000000000Z")
    elsewhere = _bundle(case.root / "elsewhere")
    (elsewhere / "logs" / "given-1-k3.log").write_text(f"{SECRET}\n")
    (case_folder / "bundle-99999999T999999999999Z").symlink_to(elsewhere)
    os.mkfifo(case_folder / "bundle-99999999T999999999999Z.tar.gz")
    (case_folder / "notes.txt").write_text("junk")
    with open_bundle(case_folder) as opened:
        assert opened.folder.name == "bundle-00000000T000000000000Z"
    only_junk = case.root / "junk-case"
    only_junk.mkdir()
    (only_junk / "bundle-x").symlink_to(elsewhere)
    with pytest.raises(BundleError, match="no bundle in this folder"):
        diagnose(DiagnoseOptions(bundle=only_junk))


@pytest.mark.slow
def test_an_archive_unpacks_in_tmpdir_and_leaves_nothing(case: Case) -> None:
    document = ok_json(
        case.run("diagnose", "--bundle", str(REAL / f"{NAME}.tar.gz"), "--format", "json")
    )
    assert document["inputs"][1] == f"{NAME}/logs/given-1-k3.log"


@pytest.mark.parametrize(
    ("name", "document", "words"),
    [
        ("manifest.json", [], "not a valid manifest.json"),
        ("manifest.json", {"files": "x"}, "not a valid manifest.json"),
        ("facts.json", {"gpu": {"gpus": [{"index": "zero", "name": 1}]}}, "not a valid facts"),
        ("facts.json", "just a string", "not a valid facts.json"),
        ("facts.json", {"schema_version": 10**9}, "newer than this vllm-triage"),
    ],
)
def test_bundle_json_of_the_wrong_shape(
    tmp_path: Path, name: str, document: Any, words: str
) -> None:
    bundle = _bundle(tmp_path / NAME)
    (bundle / name).write_text(json.dumps(document))
    with pytest.raises(BundleError, match=words):
        diagnose(DiagnoseOptions(bundle=bundle))


def test_a_manifest_listing_thousands_of_odd_paths(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / NAME)
    manifest = json.loads((bundle / "manifest.json").read_text())
    odd = ["/etc/passwd", "../../etc/passwd", "", "logs/\x00x", "logs/given-1-k3.log"]
    odd += [f"missing/{i}" for i in range(5000)]
    manifest["files"] = [
        {"path": path, "sha256": "0" * 64, "size": 1, "probe": "x"} for path in odd
    ]
    (bundle / "manifest.json").write_text(json.dumps(manifest))
    with open_bundle(bundle) as opened:
        problems = opened.problems
    assert len(problems) <= 21 and problems[-1].startswith("... and ")
    assert any("not a plain relative path" in p for p in problems)
    assert any("logs/given-1-k3.log: checksum differs" in p for p in problems)


def test_bundle_facts_with_unusable_versions_are_notes(tmp_path: Path) -> None:
    bundle = _bundle(tmp_path / NAME)
    facts = json.loads((bundle / "facts.json").read_text())
    facts["gpu"]["driver_version"] = "N/A"
    (bundle / "facts.json").write_text(json.dumps(facts))
    verdict = diagnose(DiagnoseOptions(bundle=bundle, image_cuda="13.0"))
    assert verdict.compat is None
    assert any("malformed driver version 'N/A'" in note for note in verdict.notes)


# ---------------------------------------------------------------------------------------------
# prefix-check


def test_prefix_check_nested_deep(case: Case, tmp_path: Path) -> None:
    """50,000 levels reach the parser and its depth limit; 100,000 are refused before parsing
    (as dense as JSON gets): a one-line error either way."""
    (case.work / "requests.jsonl").write_bytes(b"[" * 50_000 + b"\n")
    bad_input(case.run("prefix-check", "requests.jsonl"), "requests.jsonl:1", "nested too deep")
    (tmp_path / "deeper.jsonl").write_bytes(b"[" * 100_000 + b"\n")
    with pytest.raises(InputError, match="line 1: too dense to compare"):
        prefix_check(PrefixCheckOptions(tmp_path / "deeper.jsonl"))


def test_prefix_check_5000_digit_integer(tmp_path: Path) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_text(json.dumps(_request("a")) + "\n" + '{"n": ' + "9" * 5000 + "}\n")
    with pytest.raises(InputError, match=r"requests\.jsonl:2: a number in the JSON is too long"):
        prefix_check(PrefixCheckOptions(path))


@pytest.mark.parametrize("output_format", ["text", "markdown", "json"])
@pytest.mark.slow
def test_lone_surrogates_in_request_content(case: Case, output_format: str) -> None:
    lines = [
        '{"messages": [{"role": "system", "content": "sys \\ud800 prompt"}, '
        '{"role": "user", "content": "hello \\udfff there"}], "model": "m\\ud800"}',
        '{"messages": [{"role": "system", "content": "sys \\ud800 prompt"}, '
        '{"role": "user", "content": "other \\udbff question"}], "model": "m\\ud800"}',
    ]
    (case.root / "requests.jsonl").write_text("\n".join(lines) + "\n")
    run = case.run("prefix-check", str(case.root / "requests.jsonl"), "--format", output_format)
    assert run.code == EXIT_OK, run.text
    text = run.stdout.decode("utf-8")  # strict: no surrogate escaped into the output
    assert "\ufffd" in (
        json.loads(text)["divergences"][0]["a_excerpt"] if output_format == "json" else text
    )


@pytest.mark.slow
def test_a_1gib_line_after_the_request_cap_is_not_read(case: Case) -> None:
    path = case.root / "requests.jsonl"
    _jsonl(path, [_request(f"question {i}") for i in range(MAX_REQUESTS)])
    with path.open("ab") as stream:
        stream.write(b'{"messages": "')
    _sparse(path, path.read_bytes(), path.stat().st_size + GiB)
    with ends_in_time(what="prefix-check of requests followed by a 1 GiB line"):
        document = ok_json(case.run("prefix-check", str(path), "--format", "json"))
    assert document["requests_compared"] == MAX_REQUESTS and document["unread_input"] is True
    assert any(
        "stopped at the cap (200 requests); the rest was not read" in n for n in document["notes"]
    )


@pytest.mark.slow
def test_a_1gib_line_before_the_cap_is_skipped_unread(case: Case) -> None:
    path = _jsonl(case.root / "requests.jsonl", [_request("a"), _request("b")])
    _sparse(path, path.read_bytes() + b'{"messages": [{"role": "user", "content": "', GiB)
    document = ok_json(case.run("prefix-check", str(path), "--format", "json"))
    assert document["requests_compared"] == 2 and document["requests_read"] == 3
    assert any("line 3: longer than 16 MiB; skipped unread" in n for n in document["notes"])


def test_a_launch_command_file_over_the_cap(case: Case) -> None:
    requests = _jsonl(case.root / "requests.jsonl", [_request("a"), _request("b")])
    launch = _sparse(case.root / "launch.sh", b"vllm serve m ", 3 * MB)
    bad_input(
        case.run("prefix-check", str(requests), "--launch-cmd", str(launch)),
        "--launch-cmd",
        "larger than 2 MiB",
    )


def test_a_line_too_dense_to_parse_is_skipped(tmp_path: Path) -> None:
    """300 KB of empty arrays would take ~50 times that once parsed: skipped, and named."""
    dense = json.dumps(_request("x") | {"junk": [[]] * (MAX_LINE_WEIGHT // 300)})
    path = tmp_path / "requests.jsonl"
    path.write_text("\n".join([json.dumps(_request("a")), dense, json.dumps(_request("b"))]))
    sample = load_requests(path)
    assert [r.line for r in sample.requests] == [1, 3]
    assert len(sample.skipped) == 1
    assert sample.skipped[0].startswith("line 2: too dense to compare within the memory cap")


def test_reading_stops_at_the_sample_memory_cap(tmp_path: Path) -> None:
    """Each line weighs about 30% of the cap once parsed: the fourth is not parsed, and the
    report says reading stopped there."""
    comma_heavy = "a," * (MAX_SAMPLE_WEIGHT * 3 // 10 // 66)
    path = _jsonl(tmp_path / "requests.jsonl", [_request(f"{i} {comma_heavy}") for i in range(6)])
    report = prefix_check(PrefixCheckOptions(path))
    assert report.requests_compared == 3 and report.unread_input
    assert any(
        "reading stopped at the cap (48 MiB of parsed requests)" in note for note in report.notes
    )


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("42", "not a JSON object"),
        ('"text"', "not a JSON object"),
        ("null", "not a JSON object"),
        ('{"messages": {"role": "user"}}', "`messages` must be a non-empty list"),
        ('{"messages": []}', "`messages` must be a non-empty list"),
        ('{"messages": ["hi"]}', "messages[0] is not an object with a `role`"),
        ('{"messages": [{"role": 1}]}', "messages[0] is not an object with a `role`"),
        ('{"messages": [{"role": "user", "content": 5}]}', "content must be a string or a list"),
        ('{"messages": [{"role": "user", "content": ["x"]}]}', "part that is not an object"),
        ('{"messages": [{"role": "user", "tool_calls": 3}]}', "tool_calls must be a list"),
        ('{"messages": [{"role": "user", "tool_calls": [1]}]}', "tool_calls must be a list"),
        ('{"messages": [{"role": "user"}], "tools": {"a": 1}}', "`tools` must be a list"),
        ('{"messages": [{"role": "user"}], "tools": ["search"]}', "`tools` must be a list"),
        ('{"messages": [{"role": "user"}], "chat_template_kwargs": [1]}', "must be an object"),
        ('{"messages": [{"role": "user", "content": "caf\xe9"}]}', "not UTF-8"),
    ],
)
def test_request_lines_of_the_wrong_shape(tmp_path: Path, line: str, message: str) -> None:
    path = tmp_path / "requests.jsonl"
    path.write_bytes(json.dumps(_request("a")).encode() + b"\n" + line.encode("latin-1") + b"\n")
    with pytest.raises(InputError, match=f"requests.jsonl:2: .*{re.escape(message)}"):
        prefix_check(PrefixCheckOptions(path))


# ---------------------------------------------------------------------------------------------
# shapes by the thousand, through the library (hypothesis)

_SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(),
    st.text(max_size=12),
)
_JSON = st.recursive(
    _SCALARS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3), st.dictionaries(st.text(max_size=6), inner, max_size=3)
    ),
    max_leaves=8,
)
_PART = st.fixed_dictionaries(
    {"type": st.sampled_from(["text", "image_url", "input_audio", "video_url", "odd"])},
    optional={"text": _JSON, "image_url": _JSON, "input_audio": _JSON, "odd": _JSON},
)
_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["system", "developer", "user", "assistant", "tool"])},
    optional={
        "content": st.one_of(_JSON, st.text(max_size=60), st.lists(_PART, max_size=3)),
        "name": _JSON,
        "tool_call_id": _JSON,
        "tool_calls": st.one_of(_JSON, st.lists(st.dictionaries(st.text(max_size=8), _JSON))),
    },
)
_BODY = st.fixed_dictionaries(
    {"messages": st.one_of(st.lists(_MESSAGE, min_size=1, max_size=4), _JSON)},
    optional={
        "tools": st.one_of(
            _JSON,
            st.lists(st.dictionaries(st.sampled_from(["type", "function", "name"]), _JSON)),
        ),
        "model": _JSON,
        "chat_template_kwargs": _JSON,
    },
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    bodies=st.lists(st.one_of(_BODY, _JSON), min_size=1, max_size=4),
    launch=st.sampled_from([None, "vllm serve m --no-enable-prefix-caching", "vllm serve x/y"]),
)
@pytest.mark.slow
def test_prefix_check_any_shape_is_an_input_error_or_a_printable_report(
    kb: KnowledgeBase, bodies: list[Any], launch: str | None
) -> None:
    try:
        report = prefix_check(PrefixCheckOptions(bodies, launch), kb=kb)
    except InputError:
        return
    for terminal in (True, False):
        safe = printable(report, terminal=terminal)
        json.loads(safe.model_dump_json())
        prefix_markdown(safe).encode("utf-8")
        Console(file=io.StringIO(), width=100).print(prefix_renderable(safe))


_VERSIONS = st.one_of(
    st.text(max_size=24),
    st.from_regex(r"[rv]?\d{1,7}(\.\d{1,6}){0,4}", fullmatch=True),
    st.from_regex(r"(cu|cuda )?\d{1,5}(\.\d{1,5}){0,2}", fullmatch=True),
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    driver=_VERSIONS,
    cuda=_VERSIONS,
    gpu=st.one_of(st.none(), st.text(max_size=30), st.sampled_from(["NVIDIA H100 80GB HBM3"])),
    image=st.one_of(
        st.none(),
        st.text(max_size=30),
        st.from_regex(
            r"vllm/vllm-openai:v?[0-9a-z.+-]{0,24}(@sha256:[0-9a-f]{0,8})?", fullmatch=True
        ),
    ),
)
@pytest.mark.slow
def test_compat_any_version_is_an_input_error_or_a_verdict(
    kb: KnowledgeBase, driver: str, cuda: str, gpu: str | None, image: str | None
) -> None:
    try:
        verdict = compat(CompatOptions(driver, None if image else cuda, gpu, None, image), kb=kb)
    except InputError:
        return
    assert verdict.verdict in ("compatible", "conditional", "forward_compat_only", "incompatible")


@pytest.mark.parametrize(
    "image",
    ["vllm/vllm-openai:v" + "9" * 5000 + ".0.0", "vllm/vllm-openai:" + "x" * 100_000, "@", ":"],
)
def test_compat_image_references_of_any_length(kb: KnowledgeBase, image: str) -> None:
    with pytest.raises(InputError, match="image"):
        compat(CompatOptions("575.57.08", image=image), kb=kb)


_ENV_ITEMS = st.one_of(
    _SCALARS,
    st.sampled_from(
        ["CUDA_VERSION=13.0", "CUDA_VERSION=", "CUDA_VERSION=99999", "NVIDIA_REQUIRE_CUDA=cuda>=x"]
    ),
)
_CONFIG = st.recursive(
    _ENV_ITEMS,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.sampled_from(["Config", "config", "ContainerConfig", "Env"]), inner),
    ),
    max_leaves=10,
)


@settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
@given(document=_CONFIG)
@pytest.mark.slow
def test_image_config_any_shape_is_an_input_error_or_a_cuda(document: Any) -> None:
    try:
        found = image_cuda_from_document(document, "config.json")
    except InputError:
        return
    assert 7 <= found.cuda.major <= 30


@pytest.mark.slow
def test_bad_archive_bytes_are_an_input_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Byte changes in the real archive's first blocks, and cuts all along it: an InputError or a
    clean read, nothing else, and no scratch folder left behind either way."""
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    data = (REAL / f"{NAME}.tar.gz").read_bytes()
    variants = [data[:cut] for cut in range(0, len(data), 97)]
    variants += [data[:i] + bytes([data[i] ^ 0xFF]) + data[i + 1 :] for i in range(0, 400, 7)]
    with tarfile.open(fileobj=io.BytesIO(data)) as whole:
        assert whole.getmembers()  # the source is a good archive
    for index, variant in enumerate(variants):
        path = tmp_path / f"v{index}.tar.gz"
        path.write_bytes(variant)
        with contextlib.suppress(InputError), open_bundle(path):
            pass
        path.unlink()
        assert list(scratch.iterdir()) == []
