"""The report as a PDF, printed by a headless Chromium the machine already has: Debian's
`chromium`, `chromium-browser` or Google Chrome on PATH, or the one `--browser` names. Nothing is
downloaded; a machine without a browser gets a one-line error saying how to get one.

The browser prints the page from a file in a private temporary folder, with a profile of its own
and its TMPDIR there, no network fetches to make (the page is self-contained and forbids them) and
a deadline. It runs in a process group of its own, killed whole when it is done, on the deadline
and on Ctrl-C, and the folder is removed whatever happens: nothing of it outlives the command. Root cannot use Chromium's sandbox, so as root it runs without it (the page
it prints is this tool's own, and runs no script).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from vllm_triage.errors import InputError, TriageError
from vllm_triage.inputs import display_name
from vllm_triage.interrupts import stopped_by_signals

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PRINT_TIMEOUT_S = 120.0
MAX_PDF_BYTES = 256 * 1024**2
_MAX_SHOWN = 300
_MAX_STDERR_BYTES = 64 * 1024
_STDERR = "browser-stderr.txt"
# How long the killed browser's processes may take to go (they end within milliseconds).
_REAP_S = 5.0
_SCRATCH_PREFIX = "vllm-triage-report-"
_SHORT_TMP = "/tmp"
# A Unix socket's path holds 107 bytes; Chromium's is <TMPDIR>/org.chromium.Chromium.XXXXXX/
# SingletonSocket (some versions start its folder with a dot).
_MAX_SCRATCH_PATH = 107 - len("/.org.chromium.Chromium.XXXXXX/SingletonSocket")


class BrowserError(TriageError):
    """The browser ran but made no PDF (it crashed, or missed its deadline); one line."""


def find_browser(given: Path | None = None) -> Path:
    """The browser to print with: the one given (it must be an executable file), else the first
    of BROWSERS on PATH; InputError (exit 2) when there is none."""
    if given is not None:
        if not given.is_file() or not os.access(given, os.X_OK):
            raise InputError(f"--browser {display_name(given)}: not an executable file")
        return given
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return Path(found)
    raise InputError(
        "--pdf needs a headless Chromium and none was found on PATH (chromium, chromium-browser, "
        "google-chrome): install Debian's `chromium` package or give --browser PATH"
    )


def print_pdf(browser: Path, html: str, timeout: float = PRINT_TIMEOUT_S) -> bytes:
    """The page printed to PDF (A4, as the page's print style sets), as bytes."""
    scratch = _scratch()
    try:
        page = scratch / "report.html"
        page.write_text(html, encoding="utf-8")
        target = scratch / "report.pdf"
        command = [
            str(browser.absolute()),  # `chromium` given as a relative path is not looked up on PATH
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={scratch / 'profile'}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={target}",
            page.as_uri(),
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.insert(1, "--no-sandbox")
        returncode = _run(browser, command, scratch, timeout)
        data = target.read_bytes()[: MAX_PDF_BYTES + 1] if target.is_file() else b""
        if not data.startswith(b"%PDF"):
            said = " ".join(_tail(scratch / _STDERR).split())[-_MAX_SHOWN:]
            raise BrowserError(
                f"{display_name(browser)} made no PDF (exit code {returncode})"
                + (f": {said}" if said else "")
            )
        return data
    finally:
        _remove(scratch)


def _run(browser: Path, command: list[str], scratch: Path, timeout: float) -> int:
    """Run the browser in a process group of its own, with its home and TMPDIR in `scratch`;
    its exit code. The whole group is killed afterwards, and at once on the deadline, Ctrl-C
    or SIGTERM, so that no helper of the browser outlives it or writes into `scratch` later."""
    # Chromium's singleton socket, its crash reports and fontconfig's cache follow these.
    environment = {**os.environ, "HOME": str(scratch)}
    environment |= dict.fromkeys(("TMPDIR", "TMP", "TEMP"), str(scratch))
    with (scratch / _STDERR).open("wb") as stderr, stopped_by_signals():
        try:
            process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                env=environment,
                start_new_session=True,  # a terminal's Ctrl-C reaches the tool alone
            )
        except OSError as exc:
            raise InputError(
                f"{display_name(browser)}: cannot run ({exc.strerror or exc})"
            ) from None
        try:
            return process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise BrowserError(
                f"{display_name(browser)} did not print the report within {timeout:g} s"
            ) from None
        finally:
            _kill_group(process)


def _scratch() -> Path:
    """A new private folder for one print: in TMPDIR, else in /tmp where TMPDIR's path is too
    long for the Unix socket Chromium makes in it (it aborts: "Socket path too long")."""
    folder = Path(tempfile.mkdtemp(prefix=_SCRATCH_PREFIX))
    if len(os.fsencode(folder)) <= _MAX_SCRATCH_PATH:
        return folder
    with contextlib.suppress(OSError):
        shorter = Path(tempfile.mkdtemp(prefix=_SCRATCH_PREFIX, dir=_SHORT_TMP))
        os.rmdir(folder)
        return shorter
    return folder


def _kill_group(process: subprocess.Popen[bytes]) -> None:
    """SIGKILL to the browser's process group (its helpers too), and the browser reaped."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=_REAP_S)
    deadline = time.monotonic() + _REAP_S
    while _group_alive(process.pid) and time.monotonic() < deadline:
        time.sleep(0.01)  # the helpers, killed, end within milliseconds; init reaps them


def _group_alive(group: int) -> bool:
    """Whether any process of `group` still runs (a zombie waiting for its reaper does not)."""
    try:
        os.killpg(group, 0)
    except (ProcessLookupError, PermissionError):
        return False
    proc = Path("/proc")
    if not proc.is_dir():
        return True
    for entry in proc.iterdir():
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if int(fields[2]) == group and fields[0] not in ("Z", "X"):
                return True
    return False


def _tail(path: Path) -> str:
    """The last bytes the browser wrote to its standard error, as text."""
    try:
        with path.open("rb") as stream:
            stream.seek(max(0, path.stat().st_size - _MAX_STDERR_BYTES))
            return stream.read(_MAX_STDERR_BYTES).decode("utf-8", "replace")
    except OSError:
        return ""


def _remove(scratch: Path) -> None:
    """The scratch folder gone, even with a file a dying helper made while it was removed."""
    for _ in range(3):
        shutil.rmtree(scratch, ignore_errors=True)
        if not os.path.lexists(scratch):
            return
