"""A file system that refuses the case's writes (full, read-only, no permission) is one line and
exit 2 naming the path, for every command that writes: collect, baseline capture, diagnose,
report. Nothing half-written is left behind, and what the case held before is kept as it was.
When only collect's .tar.gz is refused, the bundle folder it packs (evidence taken once) is kept
whole, and the line says where it is.

Full and read-only are real: a 256 KiB tmpfs filled to the last page, and a read-only bind mount
(the tests run as root in their container; they skip, saying why, where mount is refused).
Permission is faked: root bypasses permission bits, so EACCES cannot be had on demand from a real
file system here; a fake os.open / os.mkdir raises it for paths inside the case only.
"""

from __future__ import annotations

import errno
import os
import shutil
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from cli import Result, run_cli
from fakehost import FakeHost
from test_baseline import NCCL_LOG, _node

from vllm_triage.bundle.read import open_bundle
from vllm_triage.case import LOCK

REPO = Path(__file__).parent.parent
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
H200 = Path(__file__).parent / "data" / "collect" / "h200-580.159.04"


def _mount(*args: str) -> None:
    if shutil.which("mount") is None:
        pytest.skip("no mount command on this machine")
    done = subprocess.run(["mount", *args], capture_output=True, text=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"mount {' '.join(args)} refused (needs root in a container that may mount): "
                    f"{done.stderr.strip()}")  # fmt: skip


def _umount(folder: Path) -> None:
    subprocess.run(["umount", "-l", str(folder)], capture_output=True, check=False)


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Path]:
    """A folder on its own 256 KiB tmpfs."""
    folder = tmp_path / "tiny"
    folder.mkdir()
    _mount("-t", "tmpfs", "-o", "size=256k,mode=0755", "tmpfs", str(folder))
    try:
        yield folder
    finally:
        _umount(folder)


@pytest.fixture
def read_only(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """(writable, read-only): one folder, and a read-only bind mount of it."""
    writable, view = tmp_path / "rw", tmp_path / "ro"
    writable.mkdir()
    view.mkdir()
    _mount("--bind", str(writable), str(view))
    try:
        _mount("-o", "remount,ro,bind", str(view))
        yield writable, view
    finally:
        _umount(view)


def _fill(folder: Path) -> None:
    """Write into `folder` until its file system has no page left."""
    with (folder / "filler").open("wb", buffering=0) as out:
        try:
            while True:
                out.write(b"\0" * 4096)
        except OSError as exc:
            assert exc.errno == errno.ENOSPC, exc


def _one_line(result: Result, *words: str) -> str:
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.exit_code == 2, (result.exit_code, result.stderr)
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].startswith("vllm-triage: error: "), result.stderr
    assert "internal error" not in lines[0], lines[0]
    for word in words:
        assert word in lines[0], lines[0]
    return lines[0]


def _files(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` (not folders, not the case's lock), with its bytes."""
    return {
        str(p.relative_to(folder)): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and p.name not in (LOCK, "filler")
    }


def _diagnose(case: Path) -> Result:
    return run_cli("diagnose", str(EXAMPLE_LOG), "--case", str(case), "--format", "json")


def _collect(case: Path, host: FakeHost, *more: str) -> Result:
    return run_cli(
        "collect", "--case", str(case), "--host-root", str(host.root), "--timeout", "5", *more,
        env={"PATH": str(host.bin)},
    )  # fmt: skip


def _capture(case: Path, host: FakeHost) -> Result:
    return run_cli(
        "baseline", "capture", "--label", "before", "--case", str(case),
        "--host-root", str(host.root), "--log", str(NCCL_LOG), "--timeout", "5",
        env={"PATH": str(host.bin)},
    )  # fmt: skip


def _h200(base: Path) -> FakeHost:
    host = FakeHost(base).install()
    host.reply("nvidia-smi -q -x", stdout_file=H200 / "nvidia-smi-q-x.xml")
    host.file("/proc/driver/nvidia/version", H200 / "proc-driver-nvidia-version.txt")
    return host


# --- a full disk ------------------------------------------------------------------------------


@pytest.mark.slow
def test_diagnose_and_report_on_a_full_disk_keep_the_case_as_it_was(tiny: Path) -> None:
    case = tiny / "triage"
    assert _diagnose(case).exit_code == 0
    before = _files(case)
    _fill(tiny)
    _one_line(_diagnose(case), f"{case}/diagnosis.", "no space left on device")
    _one_line(run_cli("report", "--case", str(case)), f"{case}/report.html", "no space left")
    assert _files(case) == before  # the diagnosis kept, no history entry, no temporary
    assert not (case / "history").exists()


@pytest.mark.slow
def test_collect_on_a_full_disk_leaves_no_bundle(tiny: Path, tmp_path: Path) -> None:
    case = tiny / "triage"
    big = tmp_path / "big.log"  # more than the whole file system holds
    big.write_bytes(b"INFO 12-01 10:00:00 [core.py:1] a line of the engine's log\n" * 8192)
    _one_line(_collect(case, _h200(tmp_path / "host"), "--log", str(big)), "no space left")
    assert _files(case) == {}


def _refuse_the_archive(monkeypatch: pytest.MonkeyPatch, refuse: Callable[[], None]) -> None:
    """collect's archive step preceded by `refuse` (the disk fills, goes read-only or refuses):
    the bundle folder is written, its .tar.gz is not."""
    from vllm_triage.collect import api as collect_api

    real_pack = collect_api.pack

    def pack(directory: Path, archive: Path) -> None:
        refuse()
        real_pack(directory, archive)

    monkeypatch.setattr(collect_api, "pack", pack)


def _kept_whole(case: Path, message: str) -> None:
    """The bundle folder alone is left (no .tar.gz, no temporary), whole, and the line names it."""
    left = os.listdir(case / "bundles")
    assert len(left) == 1 and left[0].startswith("bundle-") and "." not in left[0], left
    folder = case / "bundles" / left[0]
    assert f"{folder}.tar.gz: the archive could not be written (" in message, message
    assert message.endswith(f"; the bundle is kept, whole, in its folder {folder}"), message
    with open_bundle(case) as bundle:
        assert bundle.folder == folder and bundle.problems == []
        assert "gpu" in {entry.probe for entry in bundle.manifest.files}


@pytest.mark.slow
def test_collect_keeps_the_bundle_folder_when_the_disk_fills_before_its_archive(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = tiny / "triage"
    _refuse_the_archive(monkeypatch, lambda: _fill(tiny))
    _kept_whole(case, _one_line(_collect(case, _h200(tmp_path / "host")), "no space left"))


@pytest.mark.slow
def test_baseline_capture_on_a_full_disk_leaves_no_baseline(tiny: Path, tmp_path: Path) -> None:
    case = tiny / "triage"
    host = _node(tmp_path / "host", "580.105.08")
    _fill(tiny)
    _one_line(_capture(case, host), str(case), "no space left on device")
    assert _files(case) == {}
    assert not (case / "baselines" / "before").exists()  # the label is free for a later try


# --- a read-only file system ------------------------------------------------------------------


@pytest.mark.slow
def test_every_writing_command_on_a_read_only_case_is_one_line(
    read_only: tuple[Path, Path], tmp_path: Path
) -> None:
    writable, view = read_only
    assert _diagnose(writable / "triage").exit_code == 0
    case = view / "triage"
    before = _files(case)
    _one_line(_diagnose(case), f"{case}/diagnosis.", "read-only file system")
    _one_line(run_cli("report", "--case", str(case)), f"{case}/report.html", "read-only")
    _one_line(_collect(case, _h200(tmp_path / "host")), f"{case}/bundles", "read-only")
    _one_line(_capture(case, _node(tmp_path / "node", "580.105.08")), "read-only file system")
    assert _files(case) == before
    assert case_reads_back(case)


@pytest.mark.slow
def test_collect_keeps_the_bundle_folder_when_the_disk_goes_read_only_before_its_archive(
    tiny: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    case = tiny / "triage"
    mount = shutil.which("mount")  # before collect runs on the fake host's PATH
    assert mount is not None  # the tiny tmpfs was mounted with it
    remount = [mount, "-o", "remount,ro", str(tiny)]
    _refuse_the_archive(monkeypatch, lambda: subprocess.run(remount, check=True))
    _kept_whole(case, _one_line(_collect(case, _h200(tmp_path / "host")), "read-only"))


def case_reads_back(case: Path) -> bool:
    """A read-only case still reads: case show writes nothing."""
    shown = run_cli("case", "show", str(case), "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    return "driver_too_old" in shown.stdout


# --- no permission (faked: root bypasses permission bits) -------------------------------------


@pytest.fixture
def forbidden(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A case folder whose every new file or folder is refused with EACCES, as a folder of
    another user would refuse them to a non-root user (a fake: root passes permission checks)."""
    case = tmp_path / "triage"
    real_open, real_mkdir = os.open, os.mkdir

    def inside(path: object) -> bool:
        return isinstance(path, str | os.PathLike) and str(path).startswith(str(case) + os.sep)

    def refusing_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        if flags & os.O_CREAT and inside(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    def refusing_mkdir(path: object, *args: object, **kwargs: object) -> None:
        if inside(path):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        real_mkdir(path, *args, **kwargs)  # type: ignore[arg-type]

    assert _diagnose(case).exit_code == 0
    monkeypatch.setattr(os, "open", refusing_open)
    monkeypatch.setattr(os, "mkdir", refusing_mkdir)
    return case


def test_no_permission_is_one_line_for_each_writing_command(
    forbidden: Path, tmp_path: Path
) -> None:
    case = forbidden
    before = _files(case)
    _one_line(_diagnose(case), f"{case}/diagnosis.", "permission denied")
    _one_line(run_cli("report", "--case", str(case)), f"{case}/report.html", "permission denied")
    _one_line(_collect(case, _h200(tmp_path / "host")), f"{case}/bundles", "permission denied")
    _one_line(_capture(case, _node(tmp_path / "node", "580.105.08")), "permission denied")
    assert _files(case) == before


def test_collect_keeps_the_bundle_folder_when_its_archive_is_not_permitted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The .tar.gz's temporary file refused with EACCES, the bundle folder already written."""
    case = tmp_path / "triage"
    real_open = os.open

    def refusing_open(path: object, flags: int, *args: object, **kwargs: object) -> int:
        name = os.path.basename(str(path))
        if flags & os.O_CREAT and ".tar.gz." in name and name.endswith(".partial"):
            raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(path))
        return real_open(path, flags, *args, **kwargs)  # type: ignore[arg-type]

    _refuse_the_archive(monkeypatch, lambda: monkeypatch.setattr(os, "open", refusing_open))
    result = _collect(case, _h200(tmp_path / "host"))
    _kept_whole(case, _one_line(result, "(permission denied)"))
