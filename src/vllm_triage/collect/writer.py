"""Writing the bundle folder: every file through the redactor, within the collect deadline and a
size budget, recorded with its checksum for the manifest.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, BinaryIO

from vllm_triage.bundle.layout import safe_relative, stream_sha256
from vllm_triage.bundle.models import BundleFile
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.excerpt import FileExcerpt
from vllm_triage.inputs import open_input
from vllm_triage.redact import Redactor

# What one streamed file keeps at most (head and tail), and the least a share of the budget gives.
STREAM_FILE_CAP = 32 * 1024 * 1024
_MIN_FILE_CAP = 1024 * 1024


@dataclass
class BundleWriter:
    """Writes files into a bundle folder under construction, redacting names and contents.

    Streamed files (command outputs, logs) keep at most `file_cap` bytes each (head and tail, see
    excerpt.py) and are written within a deadline and a size budget shared between them: what
    does not fit is left out with a line saying so in the file and a note in the manifest, never
    written unredacted.
    """

    folder: Path
    redactor: Redactor
    file_cap: int = STREAM_FILE_CAP
    files: list[BundleFile] = field(default_factory=list)

    def add(self, captured: CapturedFile, probe: str) -> str:
        """Write one captured file (redacted) and record it; returns its path in the bundle."""
        return self._write(captured, probe, self.file_cap, None)

    def add_streams(
        self, streams: Sequence[tuple[CapturedFile, str]], deadline: float, budget: int
    ) -> list[str]:
        """Write (file, probe) pairs that stream from a source, sharing what is left of the time
        and of `budget` bytes fairly (unused shares pass on); their paths in the bundle."""
        paths = []
        used = 0
        for index, (captured, probe) in enumerate(streams):
            left = len(streams) - index
            now = time.monotonic()
            share = now + max(0.0, deadline - now) / left
            cap = min(self.file_cap, max(_MIN_FILE_CAP, (budget - used) // left))
            paths.append(self._write(captured, probe, cap, share))
            used += self.files[-1].size
        return paths

    def write_json(self, name: str, document: Any, probe: str) -> None:
        self.add(CapturedFile(name, document=document), probe)

    def _write(self, captured: CapturedFile, probe: str, cap: int, deadline: float | None) -> str:
        self.redactor.end_of_file()
        relative = safe_relative(self.redactor.text(captured.path))
        target = self.folder / relative
        taken = {f.path for f in self.files}
        stem, counter = str(relative), 1
        while str(relative) in taken:
            counter += 1
            relative = PurePosixPath(f"{stem}.{counter}")
            target = self.folder / relative
        target.parent.mkdir(parents=True, exist_ok=True)
        notes = [captured.note] if captured.note else []
        with target.open("wb") as out:
            if captured.document is not None:
                text = json.dumps(
                    self.redactor.json(captured.document), indent=2, ensure_ascii=False
                )
                out.write((text + "\n").encode("utf-8", errors="surrogateescape"))
            elif captured.source is not None:
                # A regular file only: a FIFO or a device given as a log would block.
                with open_input(captured.source, "a log file") as (raw, _):
                    size = os.fstat(raw.fileno()).st_size
                    notes += self._copy_redacted(raw, size, out, cap, deadline)
            else:
                data = (captured.text or "").encode("utf-8", errors="surrogateescape")
                notes += self._copy_redacted(io.BytesIO(data), len(data), out, cap, deadline)
        self.redactor.end_of_file()
        self.files.append(
            BundleFile(
                path=str(relative),
                sha256=_sha256(target),
                size=target.stat().st_size,
                probe=probe,
                truncated=bool(notes),
                note=self.redactor.text("; ".join(notes)) if notes else None,
            )
        )
        return str(relative)

    def _copy_redacted(
        self, raw: BinaryIO, size: int, out: BinaryIO, cap: int, deadline: float | None
    ) -> list[str]:
        """Stream text through the redactor in bounded pieces (head and tail when it is over the
        cap) until the deadline; what was left out."""
        notes = []
        excerpt = FileExcerpt(raw, size, cap)
        done = self.redactor.stream(excerpt.blocks(), out, deadline)
        if excerpt.omitted:
            notes.append(
                f"{excerpt.omitted} of {size} bytes left out in the middle (the first and "
                "the last parts are kept)"
            )
        if not done.complete:
            kept = size - excerpt.omitted
            out.write(
                f"\n[vllm-triage: the collect deadline came here; {kept - done.read} more "
                "bytes were not redacted in time and are not in the bundle]\n".encode()
            )
            notes.append(
                f"redaction stopped at the collect deadline after {done.read} of {kept} bytes"
            )
        return notes


def _sha256(path: Path) -> str:
    with path.open("rb") as handle:
        return stream_sha256(handle)


def remove_partial(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
