"""The report as a PDF, printed by a headless Chromium the machine already has: Debian's
`chromium`, `chromium-browser` or Google Chrome on PATH, or the one `--browser` names. Nothing is
downloaded; a machine without a browser gets a one-line error saying how to get one.

The browser prints the page from a file in a private temporary folder, with a profile of its own
that is removed afterwards, no network fetches to make (the page is self-contained and forbids
them) and a deadline. Root cannot use Chromium's sandbox, so as root it runs without it (the page
it prints is this tool's own, and runs no script).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from vllm_triage.errors import InputError, TriageError
from vllm_triage.inputs import display_name

BROWSERS = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
PRINT_TIMEOUT_S = 120.0
MAX_PDF_BYTES = 256 * 1024**2
_MAX_SHOWN = 300


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
    with tempfile.TemporaryDirectory(prefix="vllm-triage-report-") as scratch:
        folder = Path(scratch)
        page = folder / "report.html"
        page.write_text(html, encoding="utf-8")
        target = folder / "report.pdf"
        profile = folder / "profile"
        command = [
            str(browser),
            "--headless",
            "--disable-gpu",
            "--no-first-run",
            "--no-default-browser-check",
            "--disable-extensions",
            "--disable-background-networking",
            "--disable-sync",
            "--disable-dev-shm-usage",
            f"--user-data-dir={profile}",
            "--no-pdf-header-footer",
            f"--print-to-pdf={target}",
            page.as_uri(),
        ]
        if hasattr(os, "geteuid") and os.geteuid() == 0:
            command.insert(1, "--no-sandbox")
        environment = {**os.environ, "HOME": str(folder)}
        try:
            done = subprocess.run(
                command,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
                env=environment,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise BrowserError(
                f"{display_name(browser)} did not print the report within {timeout:g} s"
            ) from None
        except OSError as exc:
            raise InputError(
                f"{display_name(browser)}: cannot run ({exc.strerror or exc})"
            ) from None
        data = target.read_bytes()[: MAX_PDF_BYTES + 1] if target.is_file() else b""
        if not data.startswith(b"%PDF"):
            said = " ".join(done.stderr.decode("utf-8", "replace").split())[-_MAX_SHOWN:]
            raise BrowserError(
                f"{display_name(browser)} made no PDF (exit code {done.returncode})"
                + (f": {said}" if said else "")
            )
        return data
