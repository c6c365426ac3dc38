"""The bundle archive: pack is reproducible and plain; unpack refuses hostile archives cleanly.

Every hostile archive is built here, on the fly, with tarfile/gzip. For each refusal the test checks
a one-line ArchiveError that names the archive and the problem, and that nothing changed anywhere
under tmp_path (the destination and the folders unpack created are gone again).
"""

from __future__ import annotations

import gzip
import io
import os
import random
import shutil
import subprocess
import tarfile
import uuid
from pathlib import Path

import pytest

from vllm_triage.bundle import archive as archive_module
from vllm_triage.bundle.archive import ArchiveError, ArchiveLimits, pack, unpack
from vllm_triage.errors import InputError

MiB = 1024**2


# ------------------------------------------------------------------------------------ helpers


def snapshot(root: Path) -> dict[str, object]:
    """Every path under root with its content (files), 'dir', or its link target; links unfollowed."""
    seen: dict[str, object] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder, name)
            rel = path.relative_to(root).as_posix()
            if path.is_symlink():
                seen[rel] = ("link", os.readlink(path))
            elif path.is_dir():
                seen[rel] = "dir"
            elif path.is_file():
                seen[rel] = path.read_bytes()
            else:
                seen[rel] = "special"
    return seen


def regular(name: str, data: bytes = b"x") -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    return info, data


def folder(name: str) -> tuple[tarfile.TarInfo, bytes | None]:
    info = tarfile.TarInfo(name)
    info.type, info.mode = tarfile.DIRTYPE, 0o755
    return info, None


def link(name: str, target: str, kind: bytes = tarfile.SYMTYPE) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.linkname = kind, target
    return info, None


def special(name: str, kind: bytes) -> tuple[tarfile.TarInfo, None]:
    info = tarfile.TarInfo(name)
    info.type, info.devmajor, info.devminor = kind, 1, 3
    return info, None


def make_tar_gz(path: Path, *members: tuple[tarfile.TarInfo, bytes | None]) -> Path:
    """A .tar.gz holding exactly these members, in this order."""
    with tarfile.open(path, "w:gz") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return path


def tar_bytes(*members: tuple[tarfile.TarInfo, bytes | None]) -> bytes:
    """The uncompressed tar of these members (end marker included)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        for info, data in members:
            tar.addfile(info, io.BytesIO(data) if data is not None else None)
    return buffer.getvalue()


def assert_refused(
    archive: Path,
    root: Path,
    *words: str,
    limits: ArchiveLimits | None = None,
    destination: Path | None = None,
) -> str:
    """unpack refuses with a one-line message naming archive and words; nothing under root moved."""
    destination = destination or root / "out" / "dest"
    before = snapshot(root)
    with pytest.raises(ArchiveError) as caught:
        if limits is None:
            unpack(archive, destination)
        else:
            unpack(archive, destination, limits)
    message = str(caught.value)
    assert "\n" not in message and "\r" not in message, message
    assert str(archive) in message, message
    for word in words:
        assert word in message, message
    assert snapshot(root) == before
    return message


@pytest.fixture
def bundle(tmp_path: Path) -> Path:
    """A small bundle folder: nested files, binary and non-ASCII names, an empty folder."""
    root = tmp_path / "src" / "bundle-2026"
    (root / "probes" / "gpu").mkdir(parents=True)
    (root / "empty").mkdir()
    (root / "manifest.json").write_text('{"schema_version": 1}\n', encoding="utf-8")
    (root / "probes" / "gpu" / "nvidia-smi.txt").write_text("Driver Version: 575.57.08\n")
    (root / "probes" / "résumé ✓.log").write_bytes(bytes(range(256)) * 4)
    (root / "vllm-serve.log").write_bytes(b"")
    script = root / "probes" / "rerun.sh"
    script.write_text("#!/bin/sh\necho hi\n")
    script.chmod(0o755)
    return root


def incompressible_bundle(tmp_path: Path) -> Path:
    """A packed bundle of 256 KiB of random bytes (so cutting the .tar.gz cuts real data)."""
    root = tmp_path / "src" / "bundle"
    root.mkdir(parents=True)
    data = random.Random(7).randbytes(256 * 1024)
    (root / "a.bin").write_bytes(data[: 128 * 1024])
    (root / "b.bin").write_bytes(data[128 * 1024 :])
    archive = tmp_path / "good.tar.gz"
    pack(root, archive)
    shutil.rmtree(tmp_path / "src")
    return archive


# ---------------------------------------------------------------------------------- positive


def test_archive_error_is_an_input_error() -> None:
    assert issubclass(ArchiveError, InputError)


def test_round_trip_keeps_paths_and_contents(bundle: Path, tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    pack(bundle, archive)
    unpacked = unpack(archive, tmp_path / "out" / "new")
    assert unpacked == tmp_path / "out" / "new" / "bundle-2026"
    assert snapshot(unpacked) == snapshot(bundle)
    assert os.listdir(tmp_path / "out" / "new") == ["bundle-2026"]
    assert os.access(unpacked / "probes" / "rerun.sh", os.X_OK)
    assert not os.access(unpacked / "manifest.json", os.X_OK)


def test_unpack_into_an_existing_empty_folder(bundle: Path, tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    pack(bundle, archive)
    destination = tmp_path / "empty"
    destination.mkdir()
    assert unpack(archive, destination) == destination / "bundle-2026"


def test_pack_is_reproducible_sorted_and_anonymous(bundle: Path, tmp_path: Path) -> None:
    first, second = tmp_path / "one.tar.gz", tmp_path / "two.tar.gz"
    pack(bundle, first)
    pack(bundle, second)
    assert first.read_bytes() == second.read_bytes()
    with tarfile.open(first) as tar:
        members = tar.getmembers()
        names = [member.name for member in members]
        assert names == sorted(names, key=lambda name: name.split("/"))
        assert names[0] == "bundle-2026"
        assert names == [
            "bundle-2026",
            "bundle-2026/empty",
            "bundle-2026/manifest.json",
            "bundle-2026/probes",
            "bundle-2026/probes/gpu",
            "bundle-2026/probes/gpu/nvidia-smi.txt",
            "bundle-2026/probes/rerun.sh",
            "bundle-2026/probes/résumé ✓.log",
            "bundle-2026/vllm-serve.log",
        ]
        for member in members:
            assert (member.uid, member.gid, member.uname, member.gname) == (0, 0, "", "")
            assert member.isdir() or member.isreg()
            assert member.mode in (0o644, 0o755)
        contents = {}
        for member in members:
            handle = tar.extractfile(member)
            if handle is not None:
                contents[member.name] = handle.read()
    assert contents["bundle-2026/probes/résumé ✓.log"] == bytes(range(256)) * 4
    with gzip.open(first) as gz:
        gz.read()
    assert first.read_bytes()[4:8] == b"\0\0\0\0"  # no timestamp in the gzip header


def test_pack_replaces_an_existing_archive(bundle: Path, tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(b"old")
    pack(bundle, archive)
    assert archive.read_bytes()[:2] == b"\x1f\x8b"
    assert sorted(os.listdir(tmp_path)) == ["bundle.tar.gz", "src"]


def test_unpack_accepts_dot_slash_names(tmp_path: Path) -> None:
    archive = make_tar_gz(
        tmp_path / "dot.tar.gz", folder("./"), folder("./b"), regular("./b/f.txt", b"ok")
    )
    unpacked = unpack(archive, tmp_path / "out")
    assert (unpacked / "f.txt").read_bytes() == b"ok"


def test_unpack_reads_an_archive_made_by_system_tar(bundle: Path, tmp_path: Path) -> None:
    if shutil.which("tar") is None:
        pytest.skip("no tar on PATH")
    archive = tmp_path / "system.tar.gz"
    subprocess.run(["tar", "-czf", str(archive), "-C", str(bundle.parent), bundle.name], check=True)
    unpacked = unpack(archive, tmp_path / "out")
    assert snapshot(unpacked) == snapshot(bundle)


# --------------------------------------------------------------------------- pack refusals


def test_pack_refuses_a_symlink_and_leaves_no_file(bundle: Path, tmp_path: Path) -> None:
    (bundle / "probes" / "escape").symlink_to("/etc/passwd")
    archive = tmp_path / "bundle.tar.gz"
    with pytest.raises(ArchiveError, match=r"escape: it is a symlink"):
        pack(bundle, archive)
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_pack_refuses_a_fifo(bundle: Path, tmp_path: Path) -> None:
    os.mkfifo(bundle / "pipe")
    with pytest.raises(ArchiveError, match=r"pipe: it is a FIFO"):
        pack(bundle, tmp_path / "bundle.tar.gz")
    assert sorted(os.listdir(tmp_path)) == ["src"]


def test_pack_refuses_to_write_inside_the_folder(bundle: Path) -> None:
    with pytest.raises(ArchiveError, match=r"inside the folder it packs"):
        pack(bundle, bundle / "self.tar.gz")
    assert not (bundle / "self.tar.gz").exists()


def test_pack_refuses_a_missing_folder(tmp_path: Path) -> None:
    with pytest.raises(ArchiveError, match=r"not a folder"):
        pack(tmp_path / "nope", tmp_path / "nope.tar.gz")


@pytest.mark.parametrize("failure", [OSError(28, "No space left on device"), KeyboardInterrupt()])
def test_pack_never_leaves_a_partial_archive(
    bundle: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failure: BaseException
) -> None:
    archive = tmp_path / "bundle.tar.gz"
    archive.write_bytes(b"previous archive")
    real_add = archive_module._add
    calls: list[archive_module._Source] = []

    def failing_add(tar: tarfile.TarFile, source: archive_module._Source, where: Path) -> None:
        calls.append(source)
        if len(calls) == 4:
            assert any(name.endswith(".partial") for name in os.listdir(tmp_path))
            raise failure
        real_add(tar, source, where)

    monkeypatch.setattr(archive_module, "_add", failing_add)
    with (
        pytest.raises(type(failure))
        if isinstance(failure, KeyboardInterrupt)
        else pytest.raises(ArchiveError, match=r"cannot write: No space left on device")
    ):
        pack(bundle, archive)
    assert sorted(os.listdir(tmp_path)) == ["bundle.tar.gz", "src"]
    assert archive.read_bytes() == b"previous archive"


# ------------------------------------------------------------------------- unpack refusals


@pytest.mark.parametrize("name", ["../evil", "a/../../evil", "bundle/../../evil"])
def test_traversal(tmp_path: Path, name: str) -> None:
    archive = make_tar_gz(tmp_path / "t.tar.gz", regular(name, b"pwned"))
    assert_refused(archive, tmp_path, repr(name), "climbs out of the destination with '..'")
    assert not (tmp_path / "evil").exists() and not (tmp_path / "out" / "evil").exists()


def test_absolute_name(tmp_path: Path) -> None:
    target = tmp_path / f"abs-evil-{uuid.uuid4().hex}"
    archive = make_tar_gz(tmp_path / "abs.tar.gz", regular(str(target), b"pwned"))
    with tarfile.open(archive) as tar:
        assert tar.getnames() == [str(target)]  # the name really is absolute in the archive
    assert_refused(archive, tmp_path, repr(str(target)), "absolute name")
    assert not target.exists()


def test_symlink_escape_then_write_through_it(tmp_path: Path) -> None:
    archive = make_tar_gz(
        tmp_path / "sym.tar.gz",
        folder("bundle"),
        link("bundle/link", "../../outside"),
        regular("bundle/link/file", b"pwned"),
    )
    assert_refused(archive, tmp_path, "'bundle/link'", "symlink pointing outside the destination")
    assert not (tmp_path / "outside").exists()
    assert not (tmp_path / "out" / "outside").exists()


def test_symlink_inside_is_refused_too(tmp_path: Path) -> None:
    archive = make_tar_gz(tmp_path / "sym.tar.gz", regular("bundle/a", b"a"), link("bundle/b", "a"))
    message = assert_refused(archive, tmp_path, "'bundle/b'", "is a symlink pointing to 'a'")
    assert "outside" not in message


@pytest.mark.parametrize("relative", [True, False])
def test_hardlink_to_a_file_outside(tmp_path: Path, relative: bool) -> None:
    secret = tmp_path / "secret.txt"
    secret.write_text("do not touch")
    target = "../../secret.txt" if relative else str(secret)
    archive = make_tar_gz(
        tmp_path / "hard.tar.gz",
        folder("bundle"),
        link("bundle/h", target, tarfile.LNKTYPE),
        regular("bundle/h", b"overwrite the secret through the link"),
    )
    assert_refused(archive, tmp_path, "'bundle/h'", "hardlink pointing outside the destination")
    assert secret.read_text() == "do not touch"


@pytest.mark.parametrize(
    ("kind", "words"),
    [
        (tarfile.CHRTYPE, "is a device file"),
        (tarfile.BLKTYPE, "is a device file"),
        (tarfile.FIFOTYPE, "is a FIFO"),
    ],
)
def test_special_files(tmp_path: Path, kind: bytes, words: str) -> None:
    archive = make_tar_gz(tmp_path / "dev.tar.gz", folder("bundle"), special("bundle/null", kind))
    assert_refused(archive, tmp_path, "'bundle/null'", words)


def test_two_top_level_folders(tmp_path: Path) -> None:
    archive = make_tar_gz(tmp_path / "two.tar.gz", regular("a/x", b"1"), regular("b/y", b"2"))
    assert_refused(archive, tmp_path, "more than one top-level folder ('a' and 'b')")


def test_a_file_at_the_top_level(tmp_path: Path) -> None:
    archive = make_tar_gz(tmp_path / "flat.tar.gz", regular("loose.txt", b"1"))
    assert_refused(archive, tmp_path, "'loose.txt'", "is a file at the top level")


def test_a_duplicate_member(tmp_path: Path) -> None:
    archive = make_tar_gz(
        tmp_path / "dup.tar.gz", regular("bundle/x", b"1"), regular("bundle/x", b"2")
    )
    assert_refused(archive, tmp_path, "'bundle/x'", "appears twice")


def test_declared_size_over_the_member_cap(tmp_path: Path) -> None:
    # Only the headers: the 3 GiB of data are never there, and never needed to refuse.
    huge = tarfile.TarInfo("bundle/huge.bin")
    huge.size = 3 * 1024**3
    archive = tmp_path / "declared.tar.gz"
    archive.write_bytes(gzip.compress(folder("bundle")[0].tobuf() + huge.tobuf() + bytes(1024)))
    assert_refused(archive, tmp_path, "'bundle/huge.bin'", "declares 3.0 GiB, over the 2.0 GiB")


def test_negative_declared_size(tmp_path: Path) -> None:
    # GNU base-256 allows a negative size; tarfile < 3.11.14 would then loop on the next header.
    liar = tarfile.TarInfo("bundle/neg")
    liar.size = -1024
    archive = tmp_path / "negative.tar.gz"
    archive.write_bytes(gzip.compress(liar.tobuf(format=tarfile.GNU_FORMAT) + bytes(2048)))
    assert_refused(archive, tmp_path, "'bundle/neg'", "declares an invalid size (-1024)")


def test_declared_total_over_the_cap(tmp_path: Path) -> None:
    archive = make_tar_gz(
        tmp_path / "total.tar.gz", regular("b/one", bytes(600)), regular("b/two", bytes(600))
    )
    limits = ArchiveLimits(max_total_bytes=1000, max_member_bytes=800)
    assert_refused(
        archive,
        tmp_path,
        "'b/two'",
        "declared total to 1200 bytes, over the 1000 bytes cap",
        limits=limits,
    )


def test_zip_bomb_of_zeros(tmp_path: Path) -> None:
    archive = make_tar_gz(tmp_path / "bomb.tar.gz", regular("bundle/zeros", bytes(64 * MiB)))
    assert archive.stat().st_size < 200 * 1024  # ~1000:1
    assert_refused(
        archive,
        tmp_path,
        "'bundle/zeros'",
        "declares 64.0 MiB, over the 1.0 MiB per-member cap",
        limits=ArchiveLimits(max_member_bytes=MiB),
    )
    assert_refused(
        archive, tmp_path, "over the 8.0 MiB cap", limits=ArchiveLimits(max_total_bytes=8 * MiB)
    )


def test_too_many_members(tmp_path: Path) -> None:
    members = [folder("bundle")] + [regular(f"bundle/{n}", b"") for n in range(6)]
    archive = make_tar_gz(tmp_path / "many.tar.gz", *members)
    assert_refused(archive, tmp_path, "more than 5 members", limits=ArchiveLimits(max_members=5))
    unpack(archive, tmp_path / "ok", ArchiveLimits(max_members=7))


def test_a_huge_extended_header(tmp_path: Path) -> None:
    # A pax header tarfile would read whole into memory: refused by its size, before the read.
    info = tarfile.TarInfo("bundle/x")
    info.pax_headers = {"comment": "A" * (256 * 1024)}
    archive = make_tar_gz(tmp_path / "pax.tar.gz", (info, None))
    assert_refused(
        archive, tmp_path, "extended tar header or long name of 256.5 KiB (over the 64.0 KiB limit)"
    )


def test_lying_header_is_caught_by_counting_written_bytes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A tar header cannot really undercount its data, so simulate a reader that yields more.
    archive = make_tar_gz(
        tmp_path / "liar.tar.gz", regular("bundle/first", b"kept?"), regular("bundle/liar", b"1")
    )

    def generous(self: tarfile.TarFile, member: tarfile.TarInfo) -> io.BytesIO:
        return io.BytesIO(b"z" * (member.size + 5 * MiB))

    monkeypatch.setattr(tarfile.TarFile, "extractfile", generous)
    assert_refused(archive, tmp_path, "'bundle/first'", "more data than its header declares")
    # The existing, empty destination stays, empty.
    destination = tmp_path / "pre"
    destination.mkdir()
    assert_refused(archive, tmp_path, "more data", destination=destination)
    assert list(destination.iterdir()) == []


def test_write_failure_midway_removes_what_was_written(tmp_path: Path) -> None:
    archive = make_tar_gz(
        tmp_path / "long.tar.gz",
        regular("bundle/first.txt", b"written, then removed"),
        regular("bundle/" + "n" * 300, b"name too long for the file system"),
    )
    assert_refused(archive, tmp_path, "cannot write member 'bundle/nnn", "too long")


def test_truncated_archive(tmp_path: Path) -> None:
    good = incompressible_bundle(tmp_path)
    data = good.read_bytes()
    cut = tmp_path / "cut.tar.gz"
    cut.write_bytes(data[: len(data) // 2])
    good.unlink()
    assert_refused(cut, tmp_path, "truncated archive")


def test_corrupted_gzip_bytes(tmp_path: Path) -> None:
    good = incompressible_bundle(tmp_path)
    data = bytearray(good.read_bytes())
    middle = len(data) // 2
    data[middle : middle + 16] = bytes(byte ^ 0xFF for byte in data[middle : middle + 16])
    bad = tmp_path / "bad.tar.gz"
    bad.write_bytes(bytes(data))
    good.unlink()
    assert_refused(bad, tmp_path, "corrupt gzip data")


def test_wrong_gzip_checksum(tmp_path: Path, bundle: Path) -> None:
    # The CRC is in the gzip trailer, after the tar's end marker: tarfile alone never checks it.
    good = tmp_path / "good.tar.gz"
    pack(bundle, good)
    data = bytearray(good.read_bytes())
    data[-8] ^= 0xFF
    bad = tmp_path / "crc.tar.gz"
    bad.write_bytes(bytes(data))
    good.unlink()
    shutil.rmtree(tmp_path / "src")
    assert_refused(bad, tmp_path, "corrupt gzip data (CRC check failed")


def test_corrupt_tar_inside_good_gzip(tmp_path: Path) -> None:
    # tarfile alone stops quietly at a bad header after the first member; unpack does not.
    body = tar_bytes(regular("bundle/a", b"a"))
    junk = body[:1024] + b"garbage!" * 64 + bytes(1024)
    archive = tmp_path / "junk.tar.gz"
    archive.write_bytes(gzip.compress(junk))
    assert_refused(archive, tmp_path, "corrupt tar data")


def test_tar_without_end_marker(tmp_path: Path) -> None:
    body = tar_bytes(regular("bundle/a", b"a"))[:1024]  # header + data block, no zero blocks
    archive = tmp_path / "noend.tar.gz"
    archive.write_bytes(gzip.compress(body))
    assert_refused(archive, tmp_path, "truncated archive (no end-of-archive marker)")


def test_text_file_renamed(tmp_path: Path) -> None:
    archive = tmp_path / "notes.tar.gz"
    archive.write_text("INFO vLLM API server version 0.11.0\n")
    assert_refused(archive, tmp_path, "not a gzip-compressed tar archive")


def test_gzipped_text_is_not_a_tar(tmp_path: Path) -> None:
    archive = tmp_path / "log.tar.gz"
    archive.write_bytes(gzip.compress(b"INFO vLLM API server version 0.11.0\n" * 100))
    assert_refused(archive, tmp_path, "not a readable tar archive")


@pytest.mark.parametrize(
    ("content", "words"),
    [(b"", "empty file"), (gzip.compress(b"", mtime=0), "empty")],
    ids=["empty file", "empty gzip"],
)
def test_empty(tmp_path: Path, content: bytes, words: str) -> None:
    archive = tmp_path / "empty.tar.gz"
    archive.write_bytes(content)
    assert_refused(archive, tmp_path, words)


def test_tar_with_no_members(tmp_path: Path) -> None:
    archive = make_tar_gz(tmp_path / "none.tar.gz")
    assert_refused(archive, tmp_path, "no bundle folder")


def test_missing_archive(tmp_path: Path) -> None:
    assert_refused(tmp_path / "missing.tar.gz", tmp_path, "cannot read: No such file")


def test_destination_not_empty_or_not_a_folder(bundle: Path, tmp_path: Path) -> None:
    archive = tmp_path / "bundle.tar.gz"
    pack(bundle, archive)
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "keep.txt").write_text("keep")
    before = snapshot(tmp_path)
    with pytest.raises(ArchiveError, match=r"destination is not empty"):
        unpack(archive, busy)
    with pytest.raises(ArchiveError, match=r"destination is not a folder"):
        unpack(archive, busy / "keep.txt")
    assert snapshot(tmp_path) == before
