"""The bundle on disk: written once, every byte through the redactor, with a manifest of checksums;
read back from a folder or a .tar.gz (safely unpacked) by `diagnose --bundle`.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from pydantic import ValidationError

from vllm_triage.collect.archive import unpack
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.models import BundleFacts, BundleFile, Manifest
from vllm_triage.collect.redact import Redactor
from vllm_triage.errors import InputError
from vllm_triage.models import SCHEMA_VERSION

MANIFEST = "manifest.json"
FACTS = "facts.json"
LOGS = "logs"
BUNDLE_PREFIX = "bundle-"
_CHUNK = 1024 * 1024


class BundleError(InputError):
    """A bundle that cannot be read: missing manifest, bad JSON, wrong schema; one line."""


def _safe_relative(path: str) -> PurePosixPath:
    relative = PurePosixPath(path)
    if relative.is_absolute() or ".." in relative.parts or not relative.parts:
        raise ValueError(f"bundle path {path!r} is not a plain relative path")
    return relative


@dataclass
class BundleWriter:
    """Writes files into a bundle folder under construction, redacting names and contents."""

    folder: Path
    redactor: Redactor
    files: list[BundleFile] = field(default_factory=list)

    def add(self, captured: CapturedFile, probe: str) -> str:
        """Write one captured file (redacted) and record it; returns its path in the bundle."""
        self.redactor.end_of_file()
        relative = _safe_relative(self.redactor.text(captured.path))
        target = self.folder / relative
        taken = {f.path for f in self.files}
        stem, counter = str(relative), 1
        while str(relative) in taken:
            counter += 1
            relative = PurePosixPath(f"{stem}.{counter}")
            target = self.folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        if captured.document is not None:
            text = json.dumps(self.redactor.json(captured.document), indent=2, ensure_ascii=False)
            target.write_text(text + "\n", encoding="utf-8", errors="surrogateescape")
        elif captured.source is not None:
            self._copy_redacted(captured.source, target)
        else:
            target.write_text(
                self.redactor.text(captured.text or ""), encoding="utf-8", errors="surrogateescape"
            )
        self.redactor.end_of_file()
        self.files.append(
            BundleFile(
                path=str(relative), sha256=_sha256(target), size=target.stat().st_size, probe=probe
            )
        )
        return str(relative)

    def _copy_redacted(self, source: Path, target: Path) -> None:
        """Stream a raw output through the redactor line by line (bounded memory for big logs)."""
        with source.open("rb") as raw, target.open("wb") as out:
            for line in raw:
                text = line.decode("utf-8", errors="surrogateescape")
                out.write(self.redactor.text(text).encode("utf-8", errors="surrogateescape"))

    def write_json(self, name: str, document: Any, probe: str) -> None:
        self.add(CapturedFile(name, document=document), probe)


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass
class Bundle:
    """A bundle opened for reading: its folder, manifest, facts, logs and integrity problems."""

    folder: Path
    manifest: Manifest
    facts: BundleFacts
    problems: list[str]

    @property
    def logs(self) -> list[Path]:
        """The log files, the previous (crashed) run of a pod first."""
        folder = self.folder / LOGS
        if not folder.is_dir():
            return []
        return sorted(
            (p for p in folder.iterdir() if p.is_file()),
            key=lambda p: (0 if "previous" in p.name else 1, p.name),
        )


def _newest_bundle(case: Path) -> Path:
    candidates = sorted(
        p for p in case.iterdir() if p.is_dir() and p.name.startswith(BUNDLE_PREFIX)
    )
    if not candidates:
        archives = sorted(case.glob(f"{BUNDLE_PREFIX}*.tar.gz"))
        if archives:
            return archives[-1]
        raise BundleError(f"{case}: no bundle in this folder (no manifest.json, no bundle-*)")
    return candidates[-1]


def _load_model(path: Path, model: type[Manifest] | type[BundleFacts]) -> Any:
    try:
        return model.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        raise BundleError(f"{path}: missing: not a vllm-triage bundle") from None
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "document"
        raise BundleError(f"{path}: not a valid {path.name} ({where}: {first['msg']})") from None


def _verify(folder: Path, manifest: Manifest) -> list[str]:
    problems = []
    for entry in manifest.files:
        try:
            path = folder / _safe_relative(entry.path)
        except ValueError as exc:
            problems.append(str(exc))
            continue
        if not path.is_file():
            problems.append(f"{entry.path}: listed in the manifest but missing")
        elif _sha256(path) != entry.sha256:
            problems.append(
                f"{entry.path}: checksum differs from the manifest (changed after collect)"
            )
    return problems


@contextmanager
def open_bundle(path: Path) -> Iterator[Bundle]:
    """Open a bundle folder, a bundle .tar.gz, or a case folder (its newest bundle)."""
    if not path.exists():
        raise BundleError(f"{path}: no such bundle")
    if path.is_dir() and not (path / MANIFEST).exists():
        path = _newest_bundle(path)
    if path.is_dir():
        yield _read_folder(path)
        return
    with tempfile.TemporaryDirectory(prefix="vllm-triage-bundle-") as scratch:
        folder = unpack(path, Path(scratch) / "bundle")
        yield _read_folder(folder)


def _read_folder(folder: Path) -> Bundle:
    try:
        version = json.loads((folder / MANIFEST).read_bytes()).get("schema_version")
    except (OSError, ValueError, AttributeError):
        version = None
    if isinstance(version, int) and version > SCHEMA_VERSION:
        raise BundleError(
            f"{folder}: bundle schema {version} is newer than this vllm-triage reads "
            f"({SCHEMA_VERSION}); upgrade vllm-triage"
        )
    manifest: Manifest = _load_model(folder / MANIFEST, Manifest)
    facts: BundleFacts = _load_model(folder / FACTS, BundleFacts)
    return Bundle(folder, manifest, facts, _verify(folder, manifest))


def remove_partial(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
