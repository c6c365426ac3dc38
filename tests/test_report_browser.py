"""The report page in a real headless Chromium (Debian's `chromium`, installed by `make
system-deps`; driven through Playwright's Python API with `executable_path`, nothing downloaded):
in English, Korean and Japanese, no console error, no request beyond the page itself, every
section there, the CJK text drawn with a CJK font, the injected script inert; a screenshot of
each language kept under .cache/test-artifacts/ (printed); and --pdf makes a real PDF.

Without a browser or Playwright these tests skip, unless VLLM_TRIAGE_REQUIRE_BROWSER=1 (as `make
test` sets), where they fail.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from cli import run_cli
from deadlines import wait_for, watchdog_s
from test_report import SCRIPT, _hostile, build_case

from vllm_triage.i18n import catalog
from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.report.pdf import BROWSERS
from vllm_triage.report.texts import MESSAGES, SECTIONS

pytestmark = pytest.mark.browser

REPO = Path(__file__).parent.parent
ARTIFACTS = REPO / ".cache" / "test-artifacts"
EXAMPLE_LOG = REPO / "examples" / "kimi-k3-r575" / "vllm-serve.log"
ENV_REQUIRE = "VLLM_TRIAGE_REQUIRE_BROWSER"
LANGUAGES = ("en", "ko", "ja")
# Text of each language: Hangul syllables; kana or kanji.
SCRIPTS = {"ko": re.compile(r"[\uac00-\ud7a3]"), "ja": re.compile(r"[\u3040-\u30ff\u4e00-\u9fff]")}


def _skip_or_fail(reason: str) -> None:
    if os.environ.get(ENV_REQUIRE) == "1":
        pytest.fail(f"{ENV_REQUIRE}=1 and {reason} (`make system-deps` installs it)", pytrace=False)
    pytest.skip(reason)


def _browser() -> str:
    for name in BROWSERS:
        found = shutil.which(name)
        if found:
            return found
    _skip_or_fail("no Chromium on PATH (Debian: apt-get install chromium)")
    raise AssertionError("unreachable")


@contextlib.contextmanager
def chromium() -> Iterator[Any]:
    """Debian's Chromium driven by Playwright (never a downloaded browser)."""
    executable = _browser()
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        _skip_or_fail("Playwright is not installed (pip install -e '.[dev]')")
    args = ["--no-sandbox"] if os.geteuid() == 0 else []
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, args=args)
        yield launched
        launched.close()


def watch(page: Any) -> list[str]:
    """The page's console errors and warnings, page errors and dialogs, as they happen."""
    problems: list[str] = []
    page.on(
        "console",
        lambda m: (
            problems.append(f"console {m.type}: {m.text}")
            if m.type in ("error", "warning")
            else None
        ),
    )
    page.on("pageerror", lambda e: problems.append(f"page error: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.url}"))
    page.on("dialog", lambda d: (problems.append(f"dialog: {d.message}"), d.dismiss()))
    return problems


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium() as launched:
        yield launched


@pytest.fixture(scope="module")
def case(tmp_path_factory: pytest.TempPathFactory, kb: KnowledgeBase) -> Path:
    """The whole case, with hostile values in it (tests/test_report.py)."""
    case = build_case(tmp_path_factory.mktemp("report-browser"), kb)
    _hostile(case)
    return case


@pytest.fixture(scope="module")
def pages(case: Path) -> dict[str, Path]:
    """The case reported in each language, each page kept under ARTIFACTS."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    kept = {}
    for lang in LANGUAGES:
        result = run_cli("report", "--case", str(case), "--lang", lang)
        assert result.exit_code == 0, result.stderr
        page = ARTIFACTS / f"report-{lang}.html"
        shutil.copyfile(case / "report.html", page)
        kept[lang] = page
    return kept


@pytest.fixture(scope="module", autouse=True)
def _say_where_the_artifacts_are(request: pytest.FixtureRequest) -> Iterator[None]:
    """Print where the pages, screenshots and PDF were kept (past pytest's output capture)."""
    yield
    if ARTIFACTS.is_dir():
        capture = request.config.pluginmanager.getplugin("capturemanager")
        with capture.global_and_fixture_disabled():
            print(f"\nreport test artifacts (pages, screenshots, PDF): {ARTIFACTS}")


@pytest.mark.parametrize("lang", LANGUAGES)
def test_the_page_renders_cleanly_in_chromium(
    browser: Any, pages: dict[str, Path], lang: str
) -> None:
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    problems = watch(page)
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    uri = pages[lang].as_uri()
    page.goto(uri, wait_until="load")
    shot = ARTIFACTS / f"report-{lang}.png"
    page.screenshot(path=str(shot), full_page=True)

    assert problems == [], problems
    assert requests == [uri], "the page fetches nothing but itself"
    assert page.get_attribute("html", "lang") == lang
    for section in (*SECTIONS, "prefix-check"):
        assert page.locator(f"#{section}").count() == 1, section
        assert page.locator(f"#{section}").is_visible(), section
    assert page.locator("script").count() == 0, "the injected script is text, not an element"
    assert page.locator("img").count() == 0
    assert SCRIPT in page.locator("#diagnosis").inner_text()
    assert SCRIPT in page.locator("#baseline").inner_text(), "the model's answer, as text"
    assert page.locator("svg.chart").count() >= 5
    headings = page.locator("h2").all_inner_texts()
    assert len(headings) == len(SECTIONS) + 1
    if lang == "en":
        assert MESSAGES["plan_title"] in headings
    else:
        tr = catalog(lang)  # type: ignore[arg-type]
        assert tr(MESSAGES["plan_title"]) in headings
        for heading in headings:
            assert SCRIPTS[lang].search(heading), (lang, heading)
        _assert_cjk_font(page, lang)
    assert shot.stat().st_size > 10_000
    page.close()


def _assert_cjk_font(page: Any, lang: str) -> None:
    """The headings are drawn with the language's own CJK font (Korean or Japanese glyph forms,
    not boxes), a font of the system: the fonts Chromium used for the plan's heading, as the
    DevTools protocol reports them."""
    session = page.context.new_cdp_session(page)
    session.send("DOM.enable")
    session.send("CSS.enable")
    root = session.send("DOM.getDocument")["root"]["nodeId"]
    node = session.send("DOM.querySelector", {"nodeId": root, "selector": "#plan h2"})["nodeId"]
    fonts = session.send("CSS.getPlatformFontsForNode", {"nodeId": node})["fonts"]
    region = {"ko": "KR", "ja": "JP"}[lang]
    assert any(font["familyName"] == f"Noto Sans CJK {region}" for font in fonts), (lang, fonts)
    assert not any(font["isCustomFont"] for font in fonts), "a system font, no web font"
    session.detach()


def test_pdf_is_printed_by_chromium(case: Path) -> None:
    _browser()
    result = run_cli("report", "--case", str(case), "--lang", "ja", "--pdf")
    assert result.exit_code == 0, result.stderr
    assert result.stdout.splitlines() == [str(case / "report.html"), str(case / "report.pdf")]
    pdf = (case / "report.pdf").read_bytes()
    assert pdf.startswith(b"%PDF-") and b"%%EOF" in pdf[-1024:]
    fonts = set(re.findall(rb"/FontName\s*/[A-Z]{6}\+([A-Za-z0-9-]+)", pdf))
    assert any(font.startswith(b"NotoSansCJKjp") for font in fonts), fonts
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(case / "report.pdf", ARTIFACTS / "report-ja.pdf")


def _processes() -> dict[int, tuple[int, int, str]]:
    """Every live process (not a zombie): pid -> (parent pid, process group, command line)."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError, IndexError, ValueError):
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            if fields[0] not in ("Z", "X"):
                found[int(entry.name)] = (int(fields[1]), int(fields[2]), command)
    return found


@contextlib.contextmanager
def _held_page() -> Iterator[tuple[str, threading.Event]]:
    """A page that starts and never ends: (its URL, set when a browser asked for it). A browser
    printing it waits for the rest, so it is still printing whenever the test interrupts it."""
    listener = socket.create_server(("127.0.0.1", 0))
    asked = threading.Event()
    done = threading.Event()
    accepted: list[socket.socket] = []

    def answer(connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            if connection.recv(65536).startswith(b"GET "):  # Chromium also opens idle sockets
                connection.sendall(
                    b"HTTP/1.1 200 OK\r\nContent-Type: text/html\r\n\r\n<!DOCTYPE html><p>half"
                )
                asked.set()
            done.wait(watchdog_s())

    def serve() -> None:
        with contextlib.suppress(OSError):
            while not done.is_set():
                connection, _ = listener.accept()
                accepted.append(connection)
                threading.Thread(target=answer, args=(connection,), daemon=True).start()

    server = threading.Thread(target=serve, daemon=True)
    server.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}/report.html", asked
    finally:
        done.set()
        with contextlib.suppress(OSError):  # wakes the accept() the server waits in
            listener.shutdown(socket.SHUT_RDWR)
        listener.close()
        for connection in accepted:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            connection.close()
        server.join(watchdog_s())


def _pointed_at(url: str, folder: Path) -> Path:
    """A --browser that is the real Chromium (exec'ed, same process) printing `url` instead of
    the report's own file (its last argument)."""
    wrapper = folder / "chromium-held"
    wrapper.write_text(
        f"#!{sys.executable}\nimport os, sys\n"
        f"os.execv({_browser()!r}, [{_browser()!r}, *sys.argv[1:-1], {url!r}])\n"
    )
    wrapper.chmod(0o755)
    return wrapper


@pytest.fixture
def short_tmpdir() -> Iterator[Path]:
    """A fresh TMPDIR with a short path (Chromium's socket in it must fit 107 bytes)."""
    folder = Path(tempfile.mkdtemp(prefix="vt-", dir="/tmp"))
    try:
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _child_env(tmpdir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k != "VLLM_TRIAGE_CASE"}
    return env | {"TMPDIR": str(tmpdir), "TMP": str(tmpdir), "TEMP": str(tmpdir)}


@pytest.mark.slow
def test_ctrl_c_while_printing_exits_130_and_leaves_nothing_in_tmpdir(
    tmp_path: Path, short_tmpdir: Path
) -> None:
    """Ctrl-C (SIGINT to the CLI) while the real Chromium prints: exit 130, one line
    "interrupted", Chromium and its helpers gone, and nothing left in TMPDIR (its profile, its
    singleton lock, socket and cookie). The browser prints a page the test holds half-sent, so
    it cannot finish first however fast the machine; the test interrupts once the browser has
    asked for the page and made its singleton lock (events)."""
    case = tmp_path / "triage"
    assert run_cli("diagnose", str(EXAMPLE_LOG), "--case", str(case)).exit_code == 0
    scratch = short_tmpdir
    with _held_page() as (url, asked):
        browser = _pointed_at(url, tmp_path)
        child = subprocess.Popen(
            [sys.executable, "-m", "vllm_triage", "report", "--case", str(case), "--pdf",
             "--browser", str(browser)],
            env=_child_env(scratch), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        )  # fmt: skip
        try:
            wait_for(lambda: asked.is_set() or child.poll() is not None, "Chromium asking")
            assert asked.is_set(), child.communicate()
            wait_for(
                lambda: any(os.path.lexists(p / "SingletonLock") for p in scratch.glob("*/*")),
                "Chromium's singleton lock under TMPDIR",
            )
            (group,) = {g for ppid, g, _ in _processes().values() if ppid == child.pid}
            assert group != os.getpgid(child.pid), "Chromium runs in a process group of its own"
            members = {pid for pid, (_, g, _) in _processes().items() if g == group}
            child.send_signal(signal.SIGINT)
            stdout, stderr = child.communicate(timeout=watchdog_s(30))
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    assert child.returncode == 130, stderr
    assert stderr.decode().splitlines() == ["vllm-triage: error: interrupted"], stderr
    assert stdout == b""
    assert not (case / "report.html").exists() and not (case / "report.pdf").exists()
    alive = _processes()
    assert not members & alive.keys(), [alive[pid] for pid in members & alive.keys()]
    assert list(scratch.iterdir()) == [], sorted(str(p) for p in scratch.rglob("*"))


@pytest.mark.slow
def test_a_tmpdir_too_long_for_chromiums_socket_still_prints(tmp_path: Path) -> None:
    """Chromium aborts where TMPDIR's path leaves its singleton socket no room; the tool prints
    from a folder in /tmp then, and leaves nothing in either."""
    _browser()
    case = tmp_path / "triage"
    assert run_cli("diagnose", str(EXAMPLE_LOG), "--case", str(case)).exit_code == 0
    long = tmp_path / ("t" * 80)
    long.mkdir()
    done = subprocess.run(
        [sys.executable, "-m", "vllm_triage", "report", "--case", str(case), "--pdf"],
        env=_child_env(long), capture_output=True, timeout=watchdog_s(120), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (case / "report.pdf").read_bytes().startswith(b"%PDF-")
    assert list(long.iterdir()) == []
