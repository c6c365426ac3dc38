"""Reading a bundle from anyone: a folder or a .tar.gz (safely unpacked), its manifest and facts
checked against caps and the schema, its files opened without following links out of it.
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from pydantic import ValidationError

from vllm_triage.bundle.archive import unpack
from vllm_triage.bundle.layout import FACTS, LOGS, MANIFEST, stream_sha256
from vllm_triage.bundle.models import BundleFacts, Manifest
from vllm_triage.case import Case
from vllm_triage.errors import InputError
from vllm_triage.inputs import display_name, file_kind
from vllm_triage.models import SCHEMA_VERSION, Artifact
from vllm_triage.safejson import JsonError, parse_json


class BundleError(InputError):
    """A bundle that cannot be read: missing manifest, bad JSON, wrong schema; one line."""


# Caps on reading a bundle from anyone. collect writes a few KiB of manifest and facts (the real
# H200 bundle: 4.3 and 2.5 KiB); even the archive's 10,000 members make a manifest of ~2.5 MiB.
# Parsed JSON can take ~50 times its size in memory, so the caps bound memory too: both files at
# their caps, filled with the densest JSON there is, peak at ~270 MB (tests/test_malformed_inputs).
MAX_MANIFEST_BYTES = 4 * 1024**2
MAX_FACTS_BYTES = 4 * 1024**2
MAX_BUNDLE_LOGS = 200
_MAX_LISTED = 20
_MAX_SHOWN = 120
_O_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FLAGS = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0) | getattr(os, "O_CLOEXEC", 0)
_FILE_FLAGS = os.O_RDONLY | _O_NOFOLLOW | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class _MissingFile(BundleError):
    """A file the bundle should hold is not there."""


@dataclass
class Bundle:
    """A bundle opened for reading: its folder, manifest, facts, logs and integrity problems.

    Nothing outside the folder is ever read: every file is opened relative to it without following
    a symlink on any part of its path, and only regular files are read (never a FIFO or device)."""

    folder: Path
    manifest: Manifest
    facts: BundleFacts
    problems: list[str]
    source: Path
    """What was opened: the bundle folder, or the .tar.gz unpacked into `folder`."""
    logs: list[PurePosixPath] = field(default_factory=list)
    """The log files (relative to the folder), the previous (crashed) run of a pod first."""

    def open(self, relative: PurePosixPath) -> BinaryIO:
        """A regular file of the bundle, for reading; BundleError when it cannot be (a link...)."""
        return _open_inside(self.folder, relative)

    def show(self, relative: PurePosixPath) -> str:
        """How a file of the bundle is named in output: `<bundle folder>/<path>`, printable."""
        return display_name(f"{self.folder.name}/{relative}")


def _load_model(folder: Path, name: str, model: type[Artifact], max_bytes: int) -> Any:
    """A bundle's JSON file as a model: read capped, parsed by safejson, validated by pydantic."""
    shown = display_name(folder / name)
    try:
        with _open_inside(folder, PurePosixPath(name)) as stream:
            data = stream.read(max_bytes + 1)
    except _MissingFile:
        raise BundleError(f"{shown}: missing: not a vllm-triage bundle") from None
    except OSError as exc:
        raise BundleError(f"{shown}: cannot read ({exc.strerror or exc})") from None
    try:
        document = parse_json(data, name, max_bytes=max_bytes)
    except JsonError as exc:
        reason = str(exc).removeprefix(f"{name}: ")
        raise BundleError(f"{shown}: not a valid {name} ({reason})") from None
    version = document.get("schema_version") if isinstance(document, dict) else None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise BundleError(
            f"{display_name(folder)}: bundle schema {version} is newer than this vllm-triage "
            f"reads ({SCHEMA_VERSION}); upgrade vllm-triage"
        )
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])[:_MAX_SHOWN] or "document"
        raise BundleError(f"{shown}: not a valid {name} ({where}: {first['msg']})") from None


def _open_inside(folder: Path, relative: PurePosixPath) -> BinaryIO:
    """Open folder/relative for reading, following no symlink below the folder and refusing
    anything but a regular file; BundleError (one line) says why it cannot be read."""
    shown = display_name(f"{folder.name}/{relative}")
    parts = relative.parts
    if not parts or relative.is_absolute() or ".." in parts:
        raise BundleError(f"{shown}: not a plain relative path inside the bundle")
    try:
        fd = os.open(folder, _DIR_FLAGS)
    except (OSError, ValueError) as exc:
        raise BundleError(
            f"{display_name(folder)}: cannot open the bundle folder ({exc})"
        ) from None
    at_folder = True
    try:
        for part in parts[:-1]:
            inner = os.open(part, _DIR_FLAGS | _O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = inner
        at_folder = False
        file_fd = os.open(parts[-1], _FILE_FLAGS, dir_fd=fd)
    except FileNotFoundError:
        raise _MissingFile(f"{shown}: missing") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            what = "a folder on its path is a symlink or a file" if at_folder else "a symlink"
            raise BundleError(
                f"{shown}: {what}; not read, a bundle holds only regular files and folders"
            ) from None
        raise BundleError(f"{shown}: cannot open ({exc.strerror or exc})") from None
    except ValueError:  # a NUL byte in a name from the manifest
        raise BundleError(f"{shown}: not a valid file name") from None
    finally:
        os.close(fd)
    mode = os.fstat(file_fd).st_mode
    if not stat.S_ISREG(mode):
        os.close(file_fd)
        raise BundleError(
            f"{shown}: {file_kind(mode)}; not read, a bundle holds only regular files and folders"
        )
    return os.fdopen(file_fd, "rb")


def _verify(folder: Path, manifest: Manifest) -> list[str]:
    """Each file the manifest lists: present, a regular file inside the bundle, same checksum."""
    problems = []
    seen: set[str] = set()
    for entry in manifest.files:
        if entry.path in seen:
            problems.append(f"{display_name(entry.path)}: listed twice in the manifest")
            continue
        seen.add(entry.path)
        try:
            with _open_inside(folder, PurePosixPath(entry.path)) as stream:
                # A size that differs needs no hashing (a huge file is not read for nothing).
                size = os.fstat(stream.fileno()).st_size
                if size != entry.size or stream_sha256(stream) != entry.sha256:
                    problems.append(
                        f"{display_name(entry.path)}: checksum differs from the manifest "
                        "(changed after collect)"
                    )
        except _MissingFile:
            problems.append(f"{display_name(entry.path)}: listed in the manifest but missing")
        except BundleError as exc:
            problems.append(str(exc))
        except OSError as exc:
            problems.append(f"{display_name(entry.path)}: cannot read ({exc.strerror or exc})")
    return _at_most(problems, "problems")


def _list_logs(folder: Path) -> tuple[list[PurePosixPath], list[str]]:
    """The regular files under logs/ (previous run first) and a note for anything else there."""
    shown = display_name(f"{folder.name}/{LOGS}")
    try:
        fd = os.open(folder / LOGS, _DIR_FLAGS | _O_NOFOLLOW)
    except FileNotFoundError:
        return [], []
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            return [], [f"{shown}: not a folder (a symlink or a file); its logs were not read"]
        return [], [f"{shown}: cannot list ({exc.strerror or exc})"]
    names, notes = [], []
    try:
        with os.scandir(fd) as entries:
            for entry in entries:
                if entry.is_file(follow_symlinks=False):
                    names.append(entry.name)
                else:
                    kind = file_kind(entry.stat(follow_symlinks=False).st_mode)
                    notes.append(
                        f"{shown}/{display_name(entry.name)}: {kind}; not read, a bundle holds "
                        "only regular files and folders"
                    )
    except OSError as exc:
        notes.append(f"{shown}: cannot list ({exc.strerror or exc})")
    finally:
        os.close(fd)
    names.sort(key=lambda name: (0 if "previous" in name else 1, name))
    if len(names) > MAX_BUNDLE_LOGS:
        notes.append(
            f"{shown}: {len(names)} logs; only the first {MAX_BUNDLE_LOGS} were read (the cap)"
        )
    logs = [PurePosixPath(LOGS, name) for name in names[:MAX_BUNDLE_LOGS]]
    return logs, _at_most(notes, "notes on logs")


def _at_most(lines: list[str], what: str) -> list[str]:
    """The first few lines, and a count of the rest (a hostile manifest can list thousands)."""
    if len(lines) <= _MAX_LISTED:
        return lines
    return [*lines[:_MAX_LISTED], f"... and {len(lines) - _MAX_LISTED} more {what}"]


@contextmanager
def open_bundle(path: Path) -> Iterator[Bundle]:
    """Open a bundle folder, a bundle .tar.gz, or a case folder (its newest bundle)."""
    if not os.path.lexists(path):
        raise BundleError(f"{display_name(path)}: no such bundle")
    if path.is_dir() and not os.path.lexists(path / MANIFEST):
        newest = Case(path).newest_bundle()
        if newest is None:
            raise BundleError(
                f"{display_name(path)}: no bundle in this folder (no manifest.json, no "
                "bundle-* in it or in its bundles/)"
            )
        path = newest
    if path.is_dir():
        yield _read_folder(path, path)
        return
    with tempfile.TemporaryDirectory(prefix="vllm-triage-bundle-") as scratch:
        folder = unpack(path, Path(scratch) / "bundle")
        yield _read_folder(folder, path)


def _read_folder(folder: Path, source: Path) -> Bundle:
    manifest: Manifest = _load_model(folder, MANIFEST, Manifest, MAX_MANIFEST_BYTES)
    facts: BundleFacts = _load_model(folder, FACTS, BundleFacts, MAX_FACTS_BYTES)
    logs, notes = _list_logs(folder)
    return Bundle(folder, manifest, facts, [*_verify(folder, manifest), *notes], source, logs)
