"""The case folder: one incident's artifacts in one folder that can be attached to a ticket.

This module owns the layout (where each artifact lives), writes every file atomically (a temporary
file in the same folder, fsync, then a rename) and never over an earlier one (a new diagnosis keeps
the current one in history/), and reads artifacts back with their schema_version checked: one
written by a newer vllm-triage, or a corrupt one, is a one-line error naming the file.

Several commands may run on one case at once (a loop in a script, two terminals): the moves of
artifacts happen under the case's lock (flock on .vllm-triage.lock), so none is lost, and the
current file is replaced in one rename, so a reader sees the earlier or the new one, never none.
A file system that refuses a write (full, read-only, no permission) is a one-line error naming the
file, and the temporary is removed.

    bundles/bundle-<UTC>/ + .tar.gz   collect (cases of vllm-triage 0.1 hold them at the top level)
    diagnosis.json + diagnosis.md     diagnose; the earlier ones in history/diagnosis-<UTC>.*
    runs/<UTC>/                       validate: summary.json, requests.jsonl (0.1: validate-<UTC>/)
    prefix-check/<UTC>.json           prefix-check
    plan.json, baselines/, record.json, report.html     the steps that come next
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import re
import tempfile
import time
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ValidationError

from vllm_triage.errors import InputError, file_system_reason
from vllm_triage.inputs import Fingerprint, display_name, open_input, read_errors
from vllm_triage.models import SCHEMA_VERSION, CaseArtifact, Diagnosis, InputFile
from vllm_triage.safejson import read_json_file

CASE_ENV = "VLLM_TRIAGE_CASE"
DEFAULT_CASE = Path("triage")

BUNDLES = "bundles"
BUNDLE_PREFIX = "bundle-"
ARCHIVE_SUFFIX = ".tar.gz"
DIAGNOSIS = "diagnosis.json"
DIAGNOSIS_MARKDOWN = "diagnosis.md"
HISTORY = "history"
RUNS = "runs"
LEGACY_RUN_PREFIX = "validate-"
SUMMARY = "summary.json"
REQUESTS = "requests.jsonl"
PREFIX_CHECKS = "prefix-check"
PLAN = "plan.json"
BASELINES = "baselines"
BASELINE_FILE = "baseline.json"
RECORD = "record.json"
REPORT = "report.html"
LOCK = ".vllm-triage.lock"

# An artifact is a few KiB to a few MiB (a prefix-check of 200 requests); more is not one of ours.
MAX_ARTIFACT_BYTES = 16 * 1024**2
_STAMP = "%Y%m%dT%H%M%S%fZ"
_LABEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")
_NO_HARD_LINKS = (errno.EPERM, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EMLINK)
# Where flock cannot lock (some network file systems), the case is written unlocked, as before.
_NO_LOCKS = (errno.ENOLCK, errno.ENOTSUP, errno.EOPNOTSUPP, errno.EINVAL, errno.EBADF)
# A holder keeps the lock for the few renames of one artifact (milliseconds); one that holds it
# this long is stopped (Ctrl-Z) or hung, and waiting on is no answer.
LOCK_WAIT_S = 30.0
_LOCK_FLAGS = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0)

Model = TypeVar("Model", bound=BaseModel)


class CaseError(InputError):
    """A case folder or an artifact in it that cannot be used; the message names the file."""


def case_folder(given: Path | None = None) -> Path:
    """The case folder a command works in: the one given, else $VLLM_TRIAGE_CASE, else ./triage."""
    if given is not None:
        return given
    return Path(os.environ.get(CASE_ENV) or DEFAULT_CASE)


def stamp(moment: datetime) -> str:
    """A moment as the case names files after it: 20261201T101500123456Z (UTC, sorts in time)."""
    return moment.astimezone(UTC).strftime(_STAMP)


def parse_stamp(text: str) -> datetime | None:
    """The moment a stamp names (None for a name that is not one)."""
    try:
        return datetime.strptime(text, _STAMP).replace(tzinfo=UTC)
    except ValueError:
        return None


def fingerprint(path: Path, name: str | None = None) -> InputFile:
    """A regular file as an input an artifact was made from: name, sha256 and size."""
    with open_input(path, "an input file") as (stream, shown), read_errors(shown):
        reader = Fingerprint(stream)
        while reader.read(1024**2):
            pass
    return InputFile(name=name or shown, sha256=reader.sha256, size=reader.size)


def read_artifact(path: Path, model: type[Model]) -> Model:
    """An artifact of the case as its model: read capped, its schema_version no newer than this
    tool's, validated; CaseError (one line naming the file) otherwise."""
    shown = display_name(path)
    document = read_json_file(path, shown, max_bytes=MAX_ARTIFACT_BYTES)
    if not isinstance(document, dict):
        raise CaseError(f"{shown}: not a vllm-triage artifact (expected a JSON object)")
    version = document.get("schema_version")
    if isinstance(version, int) and not isinstance(version, bool) and version > SCHEMA_VERSION:
        raise CaseError(
            f"{shown}: schema_version {version} is newer than this vllm-triage reads "
            f"({SCHEMA_VERSION}); upgrade vllm-triage to read it"
        )
    try:
        return model.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])[:120] or "document"
        raise CaseError(f"{shown}: not a valid {path.name} ({where}: {first['msg']})") from None


def _artifact_bytes(artifact: BaseModel) -> bytes:
    return (artifact.model_dump_json(indent=2) + "\n").encode("utf-8")


@dataclass(frozen=True)
class Case:
    """One case folder (it need not exist yet: writing creates it)."""

    root: Path

    def relative(self, path: Path) -> str:
        """How a file of the case is named in artifacts and output: relative to the case."""
        with contextlib.suppress(ValueError):
            return display_name(path.relative_to(self.root))
        return display_name(path)

    # --- bundles ------------------------------------------------------------------------------

    def bundles_folder(self) -> Path:
        """Where collect writes (created)."""
        return self._folder(BUNDLES)

    def bundles(self) -> list[Path]:
        """Every bundle, oldest first: bundle-<UTC> folders and .tar.gz files in bundles/ and, in
        cases made by vllm-triage 0.1, the top level. Links and other kinds of file are passed
        over, so a case folder cannot point outside itself."""
        found = [*self._bundle_entries(self.root), *self._bundle_entries(self.root / BUNDLES)]
        return sorted(found, key=lambda path: (_bundle_name(path), path.is_file()))

    def newest_bundle(self) -> Path | None:
        """The newest bundle; its folder rather than its archive (the same bundle, read faster)."""
        found = self.bundles()
        if not found:
            return None
        newest = _bundle_name(found[-1])
        return next(path for path in found if _bundle_name(path) == newest)

    # --- diagnosis ----------------------------------------------------------------------------

    @property
    def diagnosis_path(self) -> Path:
        return self.root / DIAGNOSIS

    def diagnosis(self) -> Diagnosis | None:
        """The current diagnosis, or None when there is none yet."""
        return self.current("diagnosis", Diagnosis)

    def save_diagnosis(self, diagnosis: Diagnosis, markdown: str) -> list[Path]:
        """Write diagnosis.json and diagnosis.md (an earlier diagnosis moves to history/)."""
        return self.save_current("diagnosis", _artifact_bytes(diagnosis), {".md": markdown})

    # --- one current artifact each, earlier ones kept: diagnosis, plan, record, report -------

    def current(self, stem: str, model: type[Model]) -> Model | None:
        """The current <stem>.json as its model, or None when the case has none yet."""
        path = self.root / f"{stem}.json"
        if not os.path.lexists(path):
            return None
        return read_artifact(path, model)

    def history(self, stem: str) -> list[Path]:
        """The earlier versions of <stem>.json, oldest first."""
        folder = self.root / HISTORY
        return sorted(
            (
                p
                for p in self._files(folder)
                if p.name.startswith(f"{stem}-") and p.suffix == ".json"
            ),
            key=lambda p: p.name,
        )

    def save_artifact(
        self, stem: str, artifact: BaseModel, renderings: dict[str, str]
    ) -> list[Path]:
        """Write <stem>.json and its renderings (suffix -> text, e.g. {".md": ...}); the current
        ones move to history/ first, named after the time they were made. Returns every path
        written (the moved ones too)."""
        return self.save_current(stem, _artifact_bytes(artifact), renderings)

    def save_current(
        self, stem: str, data: bytes | Iterable[bytes], renderings: Mapping[str, str | bytes]
    ) -> list[Path]:
        """save_artifact for an artifact already serialised (or a page with no JSON: data b"");
        a rendering given as bytes (a PDF) is written as it is. `data` may come in pieces,
        written one after another (fleet scan's million nodes are never one string)."""
        self._folder()
        files = {".json": data} if data else {}
        files |= {
            suffix: text.encode("utf-8") if isinstance(text, str) else text
            for suffix, text in renderings.items()
        }
        written: list[Path] = []
        with contextlib.ExitStack() as stack:
            new = {
                suffix: stack.enter_context(self._temporary(stem + suffix, content))
                for suffix, content in files.items()
            }
            stack.enter_context(self.locked())
            current = [
                self.root / (stem + suffix)
                for suffix in files
                if os.path.lexists(self.root / (stem + suffix))
            ]
            if current:
                history = self._folder(HISTORY)
                suffixes = [path.suffix for path in current]
                base = _free_stem(history, f"{stem}-{self._made_at(current[0])}", suffixes)
                for path in current:
                    _place(path, history / (base + path.suffix), keep_source=True)
                    written.append(history / (base + path.suffix))
                _sync_folder(history)
            for suffix, temporary in new.items():
                os.replace(temporary, self.root / (stem + suffix))
            _sync_folder(self.root)
        return [*(self.root / (stem + suffix) for suffix in files), *written]

    def save_to_history(
        self, stem: str, tag: str, artifact: BaseModel, renderings: dict[str, str]
    ) -> list[Path]:
        """Write an artifact straight into history/ as <stem>-<tag>-<made at> (and its
        renderings), leaving the current <stem>.json as it is: an answer kept for the record
        that must not replace the one the runbook reads."""
        self._folder()
        history = self._folder(HISTORY)
        files = {".json": _artifact_bytes(artifact)}
        files |= {suffix: text.encode("utf-8") for suffix, text in renderings.items()}
        made = getattr(artifact, "created_at", None)
        when = stamp(datetime.fromisoformat(made) if isinstance(made, str) else datetime.now(UTC))
        written: list[Path] = []
        with contextlib.ExitStack() as stack:
            new = {
                suffix: stack.enter_context(self._temporary(stem + suffix, content, history))
                for suffix, content in files.items()
            }
            stack.enter_context(self.locked())
            base = _free_stem(history, f"{stem}-{tag}-{when}", list(files))
            for suffix, temporary in new.items():
                _place(temporary, history / (base + suffix))
                written.append(history / (base + suffix))
            _sync_folder(history)
        return written

    # --- baselines ----------------------------------------------------------------------------

    def new_baseline(self, label: str) -> Path:
        """A new, empty folder for one baseline: baselines/<label>/ (created; a label already
        captured is an error, never overwritten)."""
        if not _LABEL.fullmatch(label):
            raise CaseError(
                f"baseline label {label!r}: use letters, digits, '.', '_' or '-' (at most 64)"
            )
        folder = self._folder(BASELINES) / label
        try:
            folder.mkdir()
        except FileExistsError:
            raise CaseError(
                f"{display_name(folder)}: already captured; choose another label"
            ) from None
        except OSError as exc:
            raise CaseError(
                f"{display_name(folder)}: cannot create: {file_system_reason(exc)}"
            ) from None
        return folder

    def baselines(self) -> list[Path]:
        """Every baseline folder, by label."""
        return sorted(self._folders(self.root / BASELINES), key=lambda p: p.name)

    # --- validation runs ----------------------------------------------------------------------

    def new_run(self, moment: datetime) -> Path:
        """A new, empty folder for one validation run: runs/<UTC>/ (created)."""
        runs = self._folder(RUNS)
        name = stamp(moment)
        for attempt in range(1, 100):
            folder = runs / (name if attempt == 1 else f"{name}-{attempt}")
            try:
                folder.mkdir()
                return folder
            except FileExistsError:
                continue
            except OSError as exc:
                raise CaseError(
                    f"{display_name(folder)}: cannot create: {file_system_reason(exc)}"
                ) from None
        raise CaseError(f"{display_name(runs)}: no free name for a run at {name}")

    def runs(self) -> list[Path]:
        """Every validation run folder, oldest first (runs/ and 0.1's validate-<UTC>/)."""
        legacy = [p for p in self._folders(self.root) if p.name.startswith(LEGACY_RUN_PREFIX)]
        found = [*self._folders(self.root / RUNS), *legacy]
        return sorted(found, key=lambda p: p.name.removeprefix(LEGACY_RUN_PREFIX))

    def write_summary(self, run_folder: Path, summary: CaseArtifact) -> Path:
        """A run's summary.json, atomically."""
        path = run_folder / SUMMARY
        self.write_new(path, _artifact_bytes(summary))
        return path

    # --- prefix checks ------------------------------------------------------------------------

    def save_prefix_check(self, report: CaseArtifact) -> Path:
        """A new prefix-check/<UTC>.json, named after the time the report was made."""
        folder = self._folder(PREFIX_CHECKS)
        made = datetime.fromisoformat(report.created_at) if report.created_at else None
        name = stamp(made or datetime.now(UTC))
        return self._write_new(folder, name, ".json", _artifact_bytes(report), free_name=True)

    def prefix_checks(self) -> list[Path]:
        """Every prefix-check report, oldest first."""
        folder = self.root / PREFIX_CHECKS
        return sorted((p for p in self._files(folder) if p.suffix == ".json"), key=lambda p: p.name)

    # --- writing ------------------------------------------------------------------------------

    def write_new(self, path: Path, data: bytes) -> Path:
        """Write a new file into a folder of the case atomically; one already there is an error,
        never replaced."""
        return self._write_new(path.parent, path.stem, path.suffix, data, free_name=False)

    @contextlib.contextmanager
    def locked(self) -> Iterator[None]:
        """The case's lock, held while artifacts move (a second vllm-triage on the same case
        waits for it); CaseError after LOCK_WAIT_S. Not reentrant: take it once."""
        path = self._folder() / LOCK
        try:
            fd = os.open(path, _LOCK_FLAGS, 0o666)
        except OSError as exc:
            raise CaseError(
                f"{display_name(path)}: cannot lock the case: {file_system_reason(exc)}"
            ) from None
        try:  # closing the descriptor releases the lock, whichever way the block ends
            _lock(fd, path, time.monotonic() + LOCK_WAIT_S)
            yield
        finally:
            os.close(fd)

    def _write_new(
        self, folder: Path, stem: str, suffix: str, data: bytes, free_name: bool
    ) -> Path:
        """write_new of folder/<stem><suffix>; with `free_name`, under the first free name
        (`stem-2`...) instead of an error, chosen under the lock."""
        with self._temporary(stem + suffix, data, folder) as temporary, self.locked():
            if free_name:
                stem = _free_stem(folder, stem, [suffix])
            path = folder / (stem + suffix)
            try:
                _place(temporary, path)
            except FileExistsError:
                raise CaseError(f"{display_name(path)}: already exists; not overwritten") from None
        _sync_folder(folder)
        return path

    def _folder(self, name: str = "") -> Path:
        folder = self.root / name if name else self.root
        if os.path.lexists(self.root) and not self.root.is_dir():
            raise CaseError(f"{display_name(self.root)}: not a folder; give --case a folder")
        try:
            folder.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise CaseError(
                f"{display_name(folder)}: cannot create the case folder: {file_system_reason(exc)}"
            ) from None
        if name and (folder.is_symlink() or not folder.is_dir()):
            raise CaseError(f"{display_name(folder)}: not a folder of the case (a link or a file)")
        return folder

    @contextlib.contextmanager
    def _temporary(
        self, name: str, data: bytes | Iterable[bytes], folder: Path | None = None
    ) -> Iterator[Path]:
        """`data` in a temporary file next to where it goes, synced; removed if not placed."""
        folder = folder or self.root
        temporary: str | None = None
        try:
            fd, temporary = tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
            with os.fdopen(fd, "wb") as stream:
                if isinstance(data, bytes):
                    stream.write(data)
                else:
                    stream.writelines(data)
                stream.flush()
                os.fsync(stream.fileno())
            yield Path(temporary)
        except OSError as exc:
            raise CaseError(
                f"{display_name(folder / name)}: cannot write: {file_system_reason(exc)}"
            ) from None
        finally:
            if temporary is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(temporary)

    def _made_at(self, path: Path) -> str:
        """The stamp of an artifact about to move to history: when it says it was made, else
        when the file was last written (an artifact of an older tool, or an unreadable one)."""
        with contextlib.suppress(InputError, ValueError, TypeError):
            created = _envelope_time(path)
            if created is not None:
                return stamp(created)
        return stamp(datetime.fromtimestamp(os.lstat(path).st_mtime, UTC))

    # --- reading ------------------------------------------------------------------------------

    def _bundle_entries(self, folder: Path) -> list[Path]:
        """The bundle-* folders and bundle-*.tar.gz files directly in `folder`."""
        return [
            Path(entry.path)
            for entry in self._scan(folder)
            if entry.name.startswith(BUNDLE_PREFIX)
            and (
                entry.is_dir(follow_symlinks=False)
                or (entry.name.endswith(ARCHIVE_SUFFIX) and entry.is_file(follow_symlinks=False))
            )
        ]

    def _folders(self, folder: Path) -> list[Path]:
        return [Path(e.path) for e in self._scan(folder) if e.is_dir(follow_symlinks=False)]

    def _files(self, folder: Path) -> list[Path]:
        return [Path(e.path) for e in self._scan(folder) if e.is_file(follow_symlinks=False)]

    def _scan(self, folder: Path) -> list[os.DirEntry[str]]:
        """The entries of a folder of the case; none when it does not exist (yet)."""
        if not os.path.lexists(folder) or (folder != self.root and folder.is_symlink()):
            return []
        try:
            with os.scandir(folder) as entries:
                return list(entries)
        except NotADirectoryError:
            raise CaseError(f"{display_name(folder)}: not a folder") from None
        except OSError as exc:
            raise CaseError(
                f"{display_name(folder)}: cannot list: {file_system_reason(exc)}"
            ) from None


def _bundle_name(path: Path) -> str:
    return path.name.removesuffix(ARCHIVE_SUFFIX)


def _envelope_time(path: Path) -> datetime | None:
    document = read_json_file(path, display_name(path), max_bytes=MAX_ARTIFACT_BYTES)
    created = document.get("created_at") if isinstance(document, dict) else None
    return datetime.fromisoformat(created) if isinstance(created, str) else None


def _free_stem(folder: Path, stem: str, suffixes: list[str]) -> str:
    """`stem`, or `stem-2`, `stem-3`...: the first under which none of the files exists."""
    for attempt in range(1, 1000):
        candidate = stem if attempt == 1 else f"{stem}-{attempt}"
        if not any(os.path.lexists(folder / (candidate + s)) for s in suffixes):
            return candidate
    raise CaseError(f"{display_name(folder)}: no free name for {stem}")


def _place(source: Path, target: Path, keep_source: bool = False) -> None:
    """Move a file to `target`, never over an existing one (FileExistsError): a hard link, then
    the source removed (kept with `keep_source`: it is about to be replaced in one rename); a
    rename after a check where the file system has no hard links (under the case's lock)."""
    try:
        os.link(source, target, follow_symlinks=False)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno not in _NO_HARD_LINKS:
            raise
        if os.path.lexists(target):
            raise FileExistsError(errno.EEXIST, "exists", str(target)) from None
        os.rename(source, target)
        return
    if not keep_source:
        os.unlink(source)


def _lock(fd: int, path: Path, deadline: float) -> None:
    """flock(fd) exclusively by `deadline` (waiting on the holder's few renames), or CaseError."""
    pause = 0.001
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return
        except BlockingIOError:
            if time.monotonic() >= deadline:
                raise CaseError(
                    f"{display_name(path)}: another vllm-triage has held this case's lock for "
                    f"{LOCK_WAIT_S:g} s (is one stopped, e.g. with Ctrl-Z?); try again when it ends"
                ) from None
        except OSError as exc:
            if exc.errno in _NO_LOCKS:
                return
            raise
        time.sleep(pause)
        pause = min(pause * 2, 0.05)


def _sync_folder(folder: Path) -> None:
    """Make the renames in a folder durable (where the platform can open a folder)."""
    with contextlib.suppress(OSError):
        fd = os.open(folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
