"""An image's config from the local container engine: `docker image inspect REF`, else
`podman image inspect REF`, each with a deadline and its output capped. No engine installed, a
daemon that does not answer, or an image the engine does not have: the next source is asked
(the registry), and the reason is kept for the message if nothing answers."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from dataclasses import dataclass
from typing import Any

from vllm_triage.image.config import MAX_CONFIG_BYTES
from vllm_triage.safejson import JsonError, parse_json

ENGINES = ("docker", "podman")
_MAX_STDERR = 4096


@dataclass(frozen=True)
class EngineImage:
    """The engine's `image inspect` entry for the image, and which engine gave it."""

    engine: str
    document: dict[str, Any]


@dataclass(frozen=True)
class EngineMiss:
    """Why the local engines could not tell (none installed, not answering, no such image)."""

    reasons: tuple[str, ...]


def _run(argv: list[str], timeout: float) -> tuple[int | None, bytes, str]:
    """Run one engine command in its own process group; stdout into a private temporary file
    (read back capped), stderr capped. On the deadline the whole group is killed: (None, ...)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        try:
            process = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                start_new_session=True,
                env={**os.environ, "LC_ALL": "C"},
            )
        except OSError as exc:
            return -1, b"", exc.strerror or str(exc)
        try:
            code: int | None = process.wait(timeout=max(timeout, 0.1))
        except subprocess.TimeoutExpired:
            code = None
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        out.seek(0)
        err.seek(0)
        data = out.read(MAX_CONFIG_BYTES + 1)
        message = err.read(_MAX_STDERR).decode("utf-8", "replace")
    return code, data, " ".join(message.split())[:300]


def inspect_local(reference: str, *, path: str | None, timeout: float) -> EngineImage | EngineMiss:
    """The local engine's description of `reference` (docker first, then podman), or why not."""
    reasons = []
    deadline = time.monotonic() + timeout
    for engine in ENGINES:
        program = shutil.which(engine, path=path)
        if program is None:
            reasons.append(f"no {engine}")
            continue
        left = deadline - time.monotonic()
        if left <= 0:
            reasons.append(f"{engine}: no time left")
            break
        code, data, message = _run([program, "image", "inspect", reference], left)
        if code is None:
            reasons.append(f"{engine} image inspect did not answer within {left:.0f} s")
            continue
        if code != 0:
            reasons.append(f"{engine}: {message or f'exit {code}'}")
            continue
        if len(data) > MAX_CONFIG_BYTES:
            reasons.append(f"{engine}: image inspect output over {MAX_CONFIG_BYTES} bytes")
            continue
        try:
            document = parse_json(data, f"{engine} image inspect", max_bytes=MAX_CONFIG_BYTES)
        except JsonError as exc:
            reasons.append(str(exc))
            continue
        entry = document[0] if isinstance(document, list) and document else document
        if not isinstance(entry, dict):
            reasons.append(f"{engine} image inspect: no image in its output")
            continue
        return EngineImage(engine, entry)
    return EngineMiss(tuple(reasons))
