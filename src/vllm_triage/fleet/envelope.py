"""The controller's side of fleet/remote.py: find a host's envelope in the text an engine gives
back (a task's standard output, a pod's log), and keep each host's outcome."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from vllm_triage.errors import InputError
from vllm_triage.fleet.models import FleetHost, HostState
from vllm_triage.fleet.remote import ENVELOPE_VERSION, MARKER
from vllm_triage.safejson import parse_json

# An envelope carries at most an 8 MiB archive in base64 (11 MiB) and the command's JSON.
MAX_ENVELOPE_BYTES = 32 * 1024**2


def envelope_from_text(text: str, what: str) -> dict[str, Any] | None:
    """The last envelope line in the text (None when there is none)."""
    for line in reversed(text.splitlines()):
        line = line.strip()
        if not line.startswith("{") or MARKER not in line[:40]:
            continue
        try:
            document = parse_json(line, what, max_bytes=MAX_ENVELOPE_BYTES)
        except InputError:
            continue
        if isinstance(document, dict) and document.get(MARKER) == ENVELOPE_VERSION:
            return document
    return None


@dataclass
class HostOutcome:
    """One host's outcome while the run gathers it."""

    host: str
    state: HostState = "failed"
    exit_code: int | None = None
    result: dict[str, Any] | None = None
    error: str | None = "no result came back"
    kind: str | None = None
    archive: str | None = None
    archive_base64: str | None = None
    fetched: list[Path] = field(default_factory=list)

    def apply(self, envelope: dict[str, Any] | None) -> None:
        """Take a host's envelope: its command ran (ok: exit 0, or 1 for a preflight no-go)."""
        if envelope is None:
            self.state, self.error = "failed", "the host printed no vllm-triage result"
            return
        code = envelope.get("exit_code")
        self.exit_code = code if isinstance(code, int) else None
        result = envelope.get("result")
        self.result = result if isinstance(result, dict) else None
        error = envelope.get("error")
        self.error = " ".join(str(error).split())[:500] if error else None
        archive = envelope.get("archive")
        self.archive = archive if isinstance(archive, str) else None
        inline = envelope.get("archive_base64")
        self.archive_base64 = inline if isinstance(inline, str) else None
        kind = envelope.get("kind")
        allowed = (0, 1) if kind == "preflight" else (0,)
        if self.result is not None and self.exit_code in allowed:
            self.state = "ok"
        else:
            self.state = "failed"
            self.error = self.error or f"exit status {self.exit_code}"

    def artifact(self, files: list[str]) -> FleetHost:
        go = self.result.get("go") if self.result else None
        return FleetHost(
            host=self.host,
            state=self.state,
            exit_code=self.exit_code,
            go=go if isinstance(go, bool) else None,
            result=self.result,
            error=None if self.state == "ok" else self.error,
            files=files,
        )
