"""The bundle as one .tar.gz: `pack` writes it reproducibly, `unpack` reads one from anyone, safely.

Bundles travel as ticket attachments, so `unpack` treats every archive as hostile. It reads all the
member headers first and refuses, before writing anything, names that are absolute or climb with
`..`, links of any kind (`pack` never writes one), devices, FIFOs, sparse or unknown members, more
than one top-level folder, too many members and declared sizes over the caps; tarfile's `data`
filter runs on every member on top of those checks. Only then does it write, counting the bytes it
really writes against the same caps, into a destination that was empty, and on any failure it
removes what it wrote. Anything unreadable (not gzip, corrupt, truncated) is one-line ArchiveError.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import stat
import tarfile
import tempfile
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Literal

from vllm_triage.errors import InputError

_GZIP_MAGIC = b"\x1f\x8b"
_CHUNK = 64 * 1024
# tarfile reads a pax extended header or a GNU long name whole, in one read; cap those reads so a
# header that declares gigabytes cannot fill memory (real ones are a few KiB: paths are < 4 KiB).
_MAX_HEADER_READ = 64 * 1024
_MAX_HEADER_TOTAL = 64 * 1024**2
# What may follow the end-of-archive marker: zero padding to the record size (10 KiB for tar).
_MAX_TAIL = 1024**2
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_O_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
_O_NONBLOCK = getattr(os, "O_NONBLOCK", 0)

_Kind = Literal["dir", "file"]


class ArchiveError(InputError):
    """A bundle archive that cannot be packed or safely unpacked; the message is one line."""


class ArchiveNotWritten(ArchiveError):
    """The archive itself could not be written (the file system is full, read-only or refuses
    it; not a file being packed that could not be read): nothing of it is left. `error` is the
    file system's own."""

    def __init__(self, message: str, error: OSError) -> None:
        super().__init__(message)
        self.error = error


@dataclass(frozen=True)
class ArchiveLimits:
    """Caps `unpack` enforces on an archive, both on declared sizes and on bytes really written."""

    max_total_bytes: int = 4 * 1024**3
    max_members: int = 10_000
    max_member_bytes: int = 2 * 1024**3


DEFAULT_LIMITS = ArchiveLimits()


def _fail(where: object, text: str) -> ArchiveError:
    """An ArchiveError `<where>: <text>`, kept to one line whatever the text holds."""
    return ArchiveError(" ".join(f"{where}: {text}".split()))


def _show(name: str) -> str:
    """A member name quoted for a one-line message (control characters escaped)."""
    return repr(name)


def _size(count: int) -> str:
    """A byte count for messages: exact below 10 KiB, else in KiB/MiB/GiB."""
    if count < 10 * 1024:
        return f"{count} bytes"
    value = float(count)
    for unit in ("KiB", "MiB", "GiB", "TiB"):
        value /= 1024
        if value < 1024 or unit == "TiB":
            break
    return f"{value:.1f} {unit}"


def _reason(exc: BaseException) -> str:
    """The OS's words for an error (`No space left on device`), else the exception's text."""
    if isinstance(exc, OSError) and exc.strerror:
        return exc.strerror
    return str(exc) or exc.__class__.__name__


def _kind_of(mode: int) -> str:
    """What a non-regular, non-folder file is, in words."""
    if stat.S_ISLNK(mode):
        return "a symlink"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device file"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


# --------------------------------------------------------------------------------------- pack


@dataclass(frozen=True)
class _Source:
    """One file or folder to pack: its path on disk and its member name."""

    kind: _Kind
    path: Path
    name: str
    mtime: int


def _walk(directory: Path, top: str, archive: Path) -> list[_Source]:
    """Everything under directory, sorted; refuse anything but regular files and folders."""
    sources: list[_Source] = []
    stack: list[tuple[Path, str]] = [(directory, top)]
    while stack:
        folder, prefix = stack.pop()
        try:
            with os.scandir(folder) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
            children: list[tuple[Path, str]] = []
            for entry in entries:
                path, name = Path(entry.path), f"{prefix}/{entry.name}"
                info = entry.stat(follow_symlinks=False)
                if stat.S_ISDIR(info.st_mode):
                    sources.append(_Source("dir", path, name, int(info.st_mtime)))
                    children.append((path, name))
                elif stat.S_ISREG(info.st_mode):
                    sources.append(_Source("file", path, name, int(info.st_mtime)))
                else:
                    raise _fail(
                        archive,
                        f"cannot pack {path}: it is {_kind_of(info.st_mode)}; "
                        "a bundle holds only regular files and folders",
                    )
        except OSError as exc:
            raise _fail(archive, f"cannot pack {folder}: {_reason(exc)}") from None
        stack.extend(children)
    # By path components: a folder, then its contents, then its next sibling; the same every time.
    return sorted(sources, key=lambda source: source.name.split("/"))


def _add(tar: tarfile.TarFile, source: _Source, archive: Path) -> None:
    """Add one file or folder as a plain member, owner 0/"", modes 644/755, nothing followed."""
    info = tarfile.TarInfo(source.name)
    info.mtime = source.mtime
    if source.kind == "dir":
        info.type, info.mode = tarfile.DIRTYPE, 0o755
        tar.addfile(info)
        return
    try:
        fd = os.open(source.path, os.O_RDONLY | _O_NOFOLLOW | _O_NONBLOCK | _O_CLOEXEC)
    except OSError as exc:
        raise _fail(archive, f"cannot pack {source.path}: {_reason(exc)}") from None
    with os.fdopen(fd, "rb") as handle:
        status = os.fstat(fd)
        if not stat.S_ISREG(status.st_mode):
            raise _fail(
                archive,
                f"cannot pack {source.path}: it is {_kind_of(status.st_mode)}; "
                "a bundle holds only regular files and folders",
            )
        info.type, info.size = tarfile.REGTYPE, status.st_size
        info.mode = 0o755 if status.st_mode & stat.S_IXUSR else 0o644
        try:
            tar.addfile(info, handle)
        except OSError as exc:
            raise _fail(archive, f"cannot pack {source.path}: {_reason(exc)}") from None


class _WriteFailed(Exception):
    """A write into the archive failed: tarfile reads a member and writes the archive in one
    call, and this tells the two apart (not an OSError, so no read's handler takes it)."""

    def __init__(self, error: OSError) -> None:
        super().__init__(str(error))
        self.error = error


class _Sink:
    """The temporary archive as gzip writes into it, each failed write a _WriteFailed."""

    def __init__(self, raw: BinaryIO) -> None:
        self.raw = raw

    def write(self, data: bytes) -> int:
        try:
            return self.raw.write(data)
        except OSError as exc:
            raise _WriteFailed(exc) from None

    def flush(self) -> None:
        try:
            self.raw.flush()
        except OSError as exc:
            raise _WriteFailed(exc) from None


def _not_written(archive: Path, error: OSError) -> ArchiveNotWritten:
    return ArchiveNotWritten(" ".join(f"{archive}: cannot write: {_reason(error)}".split()), error)


def _discard(temporary: str) -> None:
    """The temporary archive removed (a file system that went read-only meanwhile keeps it)."""
    with contextlib.suppress(OSError):
        os.unlink(temporary)


def pack(directory: Path, archive: Path) -> None:
    """Write directory as a reproducible .tar.gz whose one top folder is directory's name;
    ArchiveNotWritten, nothing of the archive left, when the file system refuses it."""
    if not directory.is_dir():
        raise _fail(directory, "not a folder, cannot pack it")
    top = Path(os.path.abspath(directory)).name
    if not top or top in (".", ".."):
        raise _fail(directory, "cannot pack a folder without a name")
    if Path(os.path.abspath(archive)).parent.resolve().is_relative_to(directory.resolve()):
        raise _fail(archive, f"cannot write the archive inside the folder it packs ({directory})")
    try:
        top_mtime = int(directory.stat().st_mtime)
    except OSError as exc:
        raise _fail(directory, f"cannot pack: {_reason(exc)}") from None
    sources = [_Source("dir", directory, top, top_mtime), *_walk(directory, top, archive)]
    try:
        fd, temporary = tempfile.mkstemp(
            prefix=f".{archive.name}.", suffix=".partial", dir=archive.parent
        )
    except OSError as exc:
        raise _not_written(archive, exc) from None
    try:
        with os.fdopen(fd, "wb") as raw:
            # No file name and a zero timestamp in the gzip header: same input, same bytes.
            with (
                gzip.GzipFile(
                    filename="", mode="wb", fileobj=_Sink(raw), mtime=0, compresslevel=6
                ) as gz,
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as tar,
            ):
                for source in sources:
                    _add(tar, source, archive)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, archive)
    except _WriteFailed as failed:
        _discard(temporary)
        raise _not_written(archive, failed.error) from None
    except OSError as exc:  # the temporary's last flush, fsync, close or rename
        _discard(temporary)
        raise _not_written(archive, exc) from None
    except BaseException:
        _discard(temporary)
        raise


# ------------------------------------------------------------------------------------- unpack


class _Stream:
    """The decompressed archive as tarfile reads it: header reads capped, the last read kept."""

    def __init__(self, gz: gzip.GzipFile, archive: Path) -> None:
        self._gz = gz
        self._archive = archive
        self.scanning = True
        self.header_bytes = 0
        self.last = b""
        self.last_at = 0

    def read(self, size: int = -1, /) -> bytes:
        """Read like GzipFile; while scanning headers, refuse oversized or unbounded reads."""
        if self.scanning:
            if size < 0 or size > _MAX_HEADER_READ:
                declared = _size(size) if size >= 0 else "unbounded size"
                raise _fail(
                    self._archive,
                    f"an extended tar header or long name of {declared} "
                    f"(over the {_size(_MAX_HEADER_READ)} limit)",
                )
            self.header_bytes += size
            if self.header_bytes > _MAX_HEADER_TOTAL:
                raise _fail(
                    self._archive, f"over {_size(_MAX_HEADER_TOTAL)} of tar headers (the limit)"
                )
        self.last_at = self._gz.tell()
        self.last = self._gz.read(size)
        return self.last

    def write(self, data: bytes, /) -> int:
        """Never: the stream is read-only."""
        raise io.UnsupportedOperation("write")

    def seek(self, offset: int, whence: int = os.SEEK_SET, /) -> int:
        """Seek in the decompressed data (backwards means decompressing again from the start)."""
        return self._gz.seek(offset, whence)

    def tell(self) -> int:
        """The position in the decompressed data."""
        return self._gz.tell()

    def close(self) -> None:
        """Nothing: the caller closes the gzip file."""


@dataclass(frozen=True)
class _Entry:
    """A member that passed every check: where it goes and how."""

    kind: _Kind
    parts: tuple[str, ...]
    member: tarfile.TarInfo
    mode: int | None


class _Scan:
    """The checks on member headers, run on all of them before anything is written."""

    def __init__(self, archive: Path, destination: Path, limits: ArchiveLimits) -> None:
        self.archive = archive
        self.destination = os.path.abspath(destination)
        self.limits = limits
        self.entries: list[_Entry] = []
        self.top: str | None = None
        self.total = 0
        self.count = 0
        self.seen: dict[str, _Kind] = {}

    def refuse(self, member: tarfile.TarInfo, text: str) -> ArchiveError:
        """A refusal naming the archive and the member."""
        return _fail(self.archive, f"member {_show(member.name)} {text}")

    def add(self, member: tarfile.TarInfo) -> None:
        """Check one member header; keep it for extraction or raise ArchiveError."""
        self.count += 1
        if self.count > self.limits.max_members:
            raise _fail(
                self.archive,
                f"more than {self.limits.max_members} members (the limit); refusing the archive",
            )
        name = member.name
        if "\x00" in name:
            raise self.refuse(member, "has a NUL byte in its name")
        if name.startswith("/") or os.path.isabs(name):
            raise self.refuse(member, "has an absolute name; bundle members are relative paths")
        parts = tuple(part for part in name.split("/") if part not in ("", "."))
        if ".." in parts:
            raise self.refuse(member, "climbs out of the destination with '..'")
        kind = self.kind(member)
        if not parts:
            if kind == "dir":
                return  # "./": the destination itself
            raise self.refuse(member, "has an empty name")
        if kind == "file":
            self.check_size(member)
        self.check_place(member, parts, kind)
        try:
            filtered = tarfile.data_filter(member, self.destination)
        except tarfile.FilterError as exc:
            raise self.refuse(member, f"is refused by tarfile's data filter ({exc})") from None
        self.entries.append(_Entry(kind, parts, member, filtered.mode))

    def kind(self, member: tarfile.TarInfo) -> _Kind:
        """A folder or a regular file; refuse links, devices, FIFOs, sparse and unknown types."""
        if member.issym() or member.islnk():
            what = "symlink" if member.issym() else "hardlink"
            base = os.path.dirname(member.name) if member.issym() else ""
            target = os.path.normpath(os.path.join(base, member.linkname))
            outside = os.path.isabs(member.linkname) or target.split(os.sep)[0] == ".."
            where = "outside the destination " if outside else ""
            raise self.refuse(
                member,
                f"is a {what} pointing {where}to {_show(member.linkname)}; "
                "a bundle holds only regular files and folders",
            )
        if member.ischr() or member.isblk():
            raise self.refuse(
                member, "is a device file; a bundle holds only regular files and folders"
            )
        if member.isfifo():
            raise self.refuse(member, "is a FIFO; a bundle holds only regular files and folders")
        if member.issparse():
            raise self.refuse(member, "is a sparse file; a bundle holds only plain files")
        if member.isdir():
            return "dir"
        if member.isreg():
            return "file"
        raise self.refuse(member, f"has an unsupported tar type {member.type!r}")

    def check_size(self, member: tarfile.TarInfo) -> None:
        """Refuse declared sizes over the caps, before any data is read."""
        limits = self.limits
        if member.size < 0:
            raise self.refuse(member, f"declares an invalid size ({member.size})")
        if member.size > limits.max_member_bytes:
            raise self.refuse(
                member,
                f"declares {_size(member.size)}, over the "
                f"{_size(limits.max_member_bytes)} per-member cap",
            )
        self.total += member.size
        if self.total > limits.max_total_bytes:
            raise self.refuse(
                member,
                f"brings the declared total to {_size(self.total)}, over the "
                f"{_size(limits.max_total_bytes)} cap",
            )

    def check_place(self, member: tarfile.TarInfo, parts: tuple[str, ...], kind: _Kind) -> None:
        """One top-level folder; no file where a folder is, no folder where a file is, no twins."""
        top = parts[0]
        if self.top is None:
            self.top = top
        elif top != self.top:
            raise _fail(
                self.archive,
                f"more than one top-level folder ({_show(self.top)} and {_show(top)}) at member "
                f"{_show(member.name)}; a bundle is a single folder",
            )
        if len(parts) == 1 and kind == "file":
            raise self.refuse(member, "is a file at the top level; a bundle is a single folder")
        for depth in range(1, len(parts)):
            prefix = "/".join(parts[:depth])
            if self.seen.setdefault(prefix, "dir") == "file":
                raise self.refuse(member, f"lies inside {_show(prefix)}, which is a file")
        path = "/".join(parts)
        before = self.seen.get(path)
        if before == "file" or (before == "dir" and kind == "file"):
            raise self.refuse(member, "appears twice in the archive")
        self.seen[path] = kind


def _check_tail(tar: tarfile.TarFile, stream: _Stream, archive: Path) -> None:
    """After the last member: only zero blocks, then the gzip trailer (its CRC is checked)."""
    if stream.last_at == tar.offset:
        tail = stream.last  # the block tarfile read where it found no further member
    else:
        stream.seek(tar.offset)
        tail = b""
    stream.scanning = False
    while chunk := stream.read(_CHUNK):
        tail += chunk
        if len(tail) > _MAX_TAIL:
            raise _fail(archive, "unexpected data after the end of the tar archive")
    if len(tail) < tarfile.BLOCKSIZE:
        raise _fail(archive, "truncated archive (no end-of-archive marker)")
    if tail[: tarfile.BLOCKSIZE].count(0) != tarfile.BLOCKSIZE:
        raise _fail(
            archive,
            f"corrupt tar data at byte {tar.offset} of the tar stream "
            "(neither a member header nor the end of the archive)",
        )
    if tail.count(0) != len(tail):
        raise _fail(archive, "unexpected data after the end of the tar archive")


@contextlib.contextmanager
def _writing(archive: Path, what: str) -> Iterator[None]:
    """Turn an OSError while writing into a one-line ArchiveError."""
    try:
        yield
    except OSError as exc:
        raise _fail(archive, f"cannot write {what}: {_reason(exc)}") from None


def _extract(
    tar: tarfile.TarFile,
    entries: list[_Entry],
    archive: Path,
    destination: Path,
    limits: ArchiveLimits,
) -> None:
    """Write the checked members, counting the bytes really written against the caps."""
    total = 0
    folders: list[tuple[Path, _Entry]] = []
    for entry in entries:
        target = destination.joinpath(*entry.parts)
        what = f"member {_show(entry.member.name)}"
        if entry.kind == "dir":
            with _writing(archive, what):
                os.makedirs(target, exist_ok=True)
            folders.append((target, entry))
            continue
        with _writing(archive, what):
            os.makedirs(target.parent, exist_ok=True)
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _O_NOFOLLOW | _O_CLOEXEC
            out = os.fdopen(os.open(target, flags, 0o600), "wb")
        source = tar.extractfile(entry.member)
        if source is None:  # cannot happen for a regular member; refuse rather than guess
            out.close()
            raise _fail(archive, f"{what} has no data")
        written = 0
        try:
            while chunk := source.read(_CHUNK):
                written += len(chunk)
                total += len(chunk)
                if written > entry.member.size or written > limits.max_member_bytes:
                    raise _fail(
                        archive,
                        f"{what} holds more data than its header declares "
                        f"({_size(entry.member.size)}); refusing the archive",
                    )
                if total > limits.max_total_bytes:
                    raise _fail(
                        archive,
                        f"{what} takes the bytes written past the "
                        f"{_size(limits.max_total_bytes)} cap",
                    )
                with _writing(archive, what):
                    out.write(chunk)
            with _writing(archive, what):
                if entry.mode is not None:
                    os.fchmod(out.fileno(), entry.mode)
                out.close()
        finally:
            with contextlib.suppress(OSError):
                out.close()
        _set_mtime(target, entry.member.mtime)
    for target, entry in reversed(folders):
        _set_mtime(target, entry.member.mtime)


def _set_mtime(path: Path, mtime: float) -> None:
    """Keep the member's modification time where the OS allows it (best effort, like tar)."""
    with contextlib.suppress(OSError, OverflowError, ValueError):
        os.utime(path, (mtime, mtime), follow_symlinks=False)


def _read_failure(archive: Path, exc: BaseException) -> ArchiveError:
    """A one-line ArchiveError for an archive that cannot be read as .tar.gz."""
    if isinstance(exc, EOFError):
        return _fail(archive, "truncated archive (the compressed data ends early)")
    if isinstance(exc, gzip.BadGzipFile | zlib.error):
        return _fail(archive, f"corrupt gzip data ({exc})")
    if isinstance(exc, tarfile.ReadError) and "unexpected end" in str(exc):
        return _fail(archive, f"truncated archive ({exc})")
    if isinstance(exc, tarfile.TarError):
        return _fail(archive, f"not a readable tar archive ({exc})")
    if isinstance(exc, OSError):
        return _fail(archive, f"cannot read: {_reason(exc)}")
    return _fail(archive, f"unreadable archive ({exc.__class__.__name__}: {exc})")


def _check_destination(destination: Path) -> None:
    """The destination must be an empty folder or not exist yet."""
    if not os.path.lexists(destination):
        return
    if not destination.is_dir():
        raise _fail(destination, "destination is not a folder")
    try:
        with os.scandir(destination) as scan:
            empty = next(scan, None) is None
    except OSError as exc:
        raise _fail(destination, f"cannot read the destination: {_reason(exc)}") from None
    if not empty:
        raise _fail(destination, "destination is not empty; unpack into a new or empty folder")


def _create_destination(destination: Path) -> list[Path]:
    """Create the destination (and missing parents); return what was created, outermost first."""
    missing: list[Path] = []
    folder = Path(os.path.abspath(destination))
    while not os.path.lexists(folder):
        missing.append(folder)
        folder = folder.parent
    missing.reverse()
    created: list[Path] = []
    try:
        for path in missing:
            path.mkdir()
            created.append(path)
    except OSError as exc:
        _remove_created(created)
        raise _fail(destination, f"cannot create the destination: {_reason(exc)}") from None
    return created


def _remove_created(created: list[Path]) -> None:
    """Remove folders this call created (innermost first) if they are empty again."""
    for path in reversed(created):
        with contextlib.suppress(OSError):
            path.rmdir()


def _remove_extracted(destination: Path) -> None:
    """Remove everything inside destination (which was empty before unpack), links unfollowed."""
    try:
        with os.scandir(destination) as scan:
            children = list(scan)
    except OSError:
        return
    for child in children:
        with contextlib.suppress(OSError):
            if child.is_dir(follow_symlinks=False):
                shutil.rmtree(child.path)
            else:
                os.unlink(child.path)


def _open_regular(archive: Path) -> BinaryIO:
    """The archive opened for reading; a FIFO or device is refused without blocking on it."""
    try:
        fd = os.open(archive, os.O_RDONLY | _O_NONBLOCK | _O_CLOEXEC)
    except OSError as exc:
        raise _fail(archive, f"cannot read: {_reason(exc)}") from None
    mode = os.fstat(fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(fd)
        what = "a folder" if stat.S_ISDIR(mode) else _kind_of(mode)
        raise _fail(archive, f"it is {what}, not a .tar.gz bundle")
    return os.fdopen(fd, "rb")


def unpack(archive: Path, destination: Path, limits: ArchiveLimits = DEFAULT_LIMITS) -> Path:
    """Safely extract a bundle .tar.gz into an empty or new folder; return its bundle folder."""
    _check_destination(destination)
    with _open_regular(archive) as raw:
        try:
            magic = raw.read(2)
            raw.seek(0)
        except OSError as exc:
            raise _fail(archive, f"cannot read: {_reason(exc)}") from None
        if not magic:
            raise _fail(archive, "empty file, not a .tar.gz bundle")
        if magic != _GZIP_MAGIC:
            raise _fail(archive, "not a gzip-compressed tar archive (.tar.gz)")
        with gzip.GzipFile(fileobj=raw, mode="rb") as gz:
            stream = _Stream(gz, archive)
            created: list[Path] | None = None
            try:
                with tarfile.TarFile(mode="r", fileobj=stream) as tar:
                    scan = _Scan(archive, destination, limits)
                    while (member := tar.next()) is not None:
                        scan.add(member)
                    _check_tail(tar, stream, archive)
                    if scan.top is None:
                        raise _fail(archive, "holds no bundle folder (the archive has no members)")
                    created = _create_destination(destination)
                    _extract(tar, scan.entries, archive, destination, limits)
                    return destination / scan.top
            except BaseException as exc:
                if created is not None:
                    _remove_extracted(destination)
                    _remove_created(created)
                if isinstance(exc, ArchiveError) or not isinstance(exc, Exception):
                    raise
                raise _read_failure(archive, exc) from None
