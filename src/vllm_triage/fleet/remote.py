"""The host side of `fleet run`: run one vllm-triage command and print one JSON line (the
envelope) that the controller gathers, whatever the engine (Ansible reads it from the task's
standard output, Kubernetes from the Job's pod log).

    python -m vllm_triage.fleet.remote preflight|collect [--inline-archive] -- ARGS...

The command runs as `python -m vllm_triage KIND ARGS --format json` in a process of its own (this
module imports nothing of the CLI); collect writes its case into a fresh work folder whose
archive the envelope names (Ansible fetches it, then removes the folder) or carries in base64
(`--inline-archive`, for a pod whose files are gone when it ends). The envelope:

    {"vllm_triage_fleet": 1, "kind": ..., "host": ..., "exit_code": ..., "result": {...} | null,
     "error": "..." | null, "workdir": ..., "archive": ... | null, "archive_base64": ... | null}
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

MARKER = "vllm_triage_fleet"
ENVELOPE_VERSION = 1
KINDS = ("preflight", "collect")
MAX_OUTPUT_BYTES = 16 * 1024**2
MAX_INLINE_ARCHIVE_BYTES = 8 * 1024**2
DEFAULT_TIMEOUT = 600.0


def _last_line(text: str) -> str | None:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:500] if lines else None


def run_remote(
    kind: str, arguments: list[str], inline_archive: bool, timeout: float = DEFAULT_TIMEOUT
) -> dict[str, Any]:
    """Run the command and build the envelope (never raises for the command's own failure)."""
    command = [sys.executable, "-m", "vllm_triage", kind, *arguments, "--format", "json"]
    workdir = None
    if kind == "collect":
        workdir = Path(tempfile.mkdtemp(prefix="vllm-triage-fleet-"))
        command += ["--case", str(workdir / "case")]
    envelope: dict[str, Any] = {
        MARKER: ENVELOPE_VERSION,
        "kind": kind,
        "host": socket.gethostname(),
        "exit_code": None,
        "result": None,
        "error": None,
        "workdir": str(workdir) if workdir else None,
        "archive": None,
        "archive_base64": None,
    }
    try:
        done = subprocess.run(
            command, capture_output=True, timeout=timeout, check=False, stdin=subprocess.DEVNULL
        )
    except subprocess.TimeoutExpired:
        envelope["error"] = f"vllm-triage {kind} did not finish within {timeout:g} s"
        return envelope
    except OSError as exc:
        envelope["error"] = f"cannot run {sys.executable}: {exc.strerror}"
        return envelope
    envelope["exit_code"] = done.returncode
    stdout = done.stdout[:MAX_OUTPUT_BYTES].decode("utf-8", "replace")
    try:
        result = json.loads(stdout) if stdout.strip() else None
    except ValueError:
        result = None
        envelope["error"] = "its output is not JSON: " + (_last_line(stdout) or "")
    envelope["result"] = result if isinstance(result, dict) else None
    if done.returncode not in (0, 1) or envelope["result"] is None:
        stderr = _last_line(done.stderr[-65536:].decode("utf-8", "replace"))
        envelope["error"] = stderr or envelope["error"] or f"exit status {done.returncode}"
    if workdir is not None:
        archives = sorted((workdir / "case" / "bundles").glob("*.tar.gz"))
        if archives:
            envelope["archive"] = str(archives[-1])
            size = archives[-1].stat().st_size
            if inline_archive and size <= MAX_INLINE_ARCHIVE_BYTES:
                envelope["archive_base64"] = base64.b64encode(archives[-1].read_bytes()).decode()
            elif inline_archive:
                envelope["error"] = (
                    f"the bundle is {size} bytes, more than a pod log carries "
                    f"({MAX_INLINE_ARCHIVE_BYTES}); collect on the node itself"
                )
    return envelope


def main(argv: list[str] | None = None) -> int:
    """Entry point: print the envelope on one line; exit 0 when it was printed."""
    given = list(sys.argv[1:] if argv is None else argv)
    head, tail = (
        (given, [])
        if "--" not in given
        else (
            given[: given.index("--")],
            given[given.index("--") + 1 :],
        )
    )
    parser = argparse.ArgumentParser(prog="python -m vllm_triage.fleet.remote")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--inline-archive", action="store_true")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT)
    options = parser.parse_args(head)
    arguments = tail
    envelope = run_remote(options.kind, arguments, options.inline_archive, options.timeout)
    if options.inline_archive and envelope["workdir"]:
        # Nothing is left behind in a pod: the archive travels in the envelope.
        shutil.rmtree(envelope["workdir"], ignore_errors=True)
    sys.stdout.write(json.dumps(envelope, separators=(",", ":")) + "\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    sys.exit(main())
