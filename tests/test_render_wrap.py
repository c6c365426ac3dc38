"""Japanese at a terminal (render/wrap.py): lines break between characters, never before
closing punctuation (。、」...), never inside an ASCII token, never right after a bullet, and a
panel never cuts a sentence short with "…"; English breaks exactly as rich breaks it.

The end-to-end check renders `vllm-triage plan --lang ja` from a real diagnosis (the bundled
Kimi K3 cu130-on-r575 case, as tests/test_plan.py makes it) at 80 and 100 columns."""

from __future__ import annotations

import itertools
import re
from pathlib import Path

import pytest
from cli import run_cli
from hypothesis import given
from hypothesis import strategies as st
from rich._wrap import divide_line
from rich.cells import cell_len
from test_plan import EXAMPLE_LOG, _diagnose

from vllm_triage.render.wrap import Prose, ProseConsole, break_offsets

# What may not start a line (JIS X 4051), and the marks a line may lead with.
NO_START = (
    "。、・ー」』】〉》ぁぃぅぇぉっゃゅょァィゥェォッャュョ"
    "\uff0c\uff0e\uff1a\uff1b\uff1f\uff01\uff09\u3015\uff3d\uff5d"  # full-width , . : ; ? ! ) and brackets
)
LONE_MARK = re.compile(r"(?:[•☐]|\d+\.)")
# Box drawing, borders and padding of panels and tables.
FRAME = re.compile(r"[\u2500-\u257f]")
ASCII_TOKEN = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-/:=+]*[A-Za-z0-9_]|[A-Za-z0-9_]")

SENTENCE = (
    "ドライバーがすでにイメージの最小要件を満たしている環境(別のノードプール、検証用ノード)で、"
    "段階before_weightsのまま cuda-compat-13-0 を使わずに検証してください。「隔離ノード」は"
    "サービストラフィックのないノードです。"
)


def _lines(text: str, width: int) -> list[str]:
    offsets = break_offsets(text, width)
    bounds = [0, *offsets, len(text)]
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


@pytest.mark.parametrize("width", range(16, 61))  # the longest ASCII token fits
def test_japanese_breaks_between_characters_by_the_rules(width: int) -> None:
    lines = _lines(SENTENCE, width)
    assert "".join(lines) == SENTENCE
    tokens = set(ASCII_TOKEN.findall(SENTENCE))
    for number, line in enumerate(lines):
        assert cell_len(line.rstrip()) <= width, (width, line)
        if number:
            assert line[0] not in NO_START, (width, line)
        assert not line.rstrip().endswith(("(", "「", "\uff08")), (width, line)
        for token in ASCII_TOKEN.findall(line):
            assert token in tokens, (width, token, lines)  # no token cut in two


@pytest.mark.parametrize("width", range(12, 41))
def test_a_bullet_keeps_its_first_word(width: int) -> None:
    for text in (
        f"  • {SENTENCE}",
        "  ☐ nvidia-smi とドライバーバージョンを確認",
        "  1. 隔離ノードで検証",
    ):
        first = _lines(text, width)[0]
        assert not LONE_MARK.fullmatch(first.strip()), (width, first)


@given(
    st.lists(
        st.text(alphabet="abcdefghijklmnopqrstuvwxyz0123456789-_./", min_size=1, max_size=14),
        min_size=1,
        max_size=30,
    ),
    st.integers(min_value=4, max_value=100),
)
def test_english_breaks_as_rich_does(words: list[str], width: int) -> None:
    text = " ".join(words)
    assert break_offsets(text, width) == divide_line(text, width)
    assert break_offsets(text, width, fold=False) == divide_line(text, width, fold=False)


def test_a_grid_cell_wraps_a_sentence_instead_of_cutting_it() -> None:
    """rich counts trailing spaces in characters, so a line of wide characters kept one past the
    edge and a grid cell (overflow "ellipsis") cut the sentence there."""
    from rich.table import Table

    grid = Table.grid(padding=(0, 2))
    grid.add_column()
    grid.add_column()
    grid.add_row("推奨ターゲット", Prose(SENTENCE * 2, overflow="ellipsis"))
    console = ProseConsole(width=60, record=True)
    console.print(grid)
    assert "…" not in console.export_text()


def _content(line: str) -> str:
    """A rendered line without its frame, borders and padding."""
    return FRAME.sub(" ", line).strip()


@pytest.fixture(scope="module")
def japanese_plan(tmp_path_factory: pytest.TempPathFactory) -> dict[int, str]:
    """`plan --lang ja` of the bundled case at 80, 100 and (unwrapped) 400 columns."""
    tmp = tmp_path_factory.mktemp("wrap")
    k3 = {"recipe": "kimi-k3", "image_cuda": "13.0.2"}
    diagnosis = _diagnose(tmp, EXAMPLE_LOG, "k3-r575", driver="575.57.08", gpu="NVIDIA B200", **k3)
    shown = {}
    for columns in (80, 100, 400):
        result = run_cli(
            "plan", "--diagnosis", str(diagnosis), "--case", str(tmp / f"case-{columns}"),
            "--no-maintenance-window", "--cluster-cannot-change", "--deadline-hours", "24",
            "--can-maintain-build", "--lang", "ja", env={"COLUMNS": str(columns)},
        )  # fmt: skip
        assert result.exit_code == 0, result.stderr
        shown[columns] = result.stdout.split("\ncase ")[0]  # without where the files went
    return shown


@pytest.mark.parametrize("columns", [80, 100])
def test_a_japanese_plan_reads_at_a_terminal(japanese_plan: dict[int, str], columns: int) -> None:
    out, whole = japanese_plan[columns], japanese_plan[400]
    tokens = set(ASCII_TOKEN.findall(whole))
    lines = out.splitlines()
    assert len(re.findall(r"[\u3040-\u30ff]", out)) > 500
    for line in lines:
        assert cell_len(line) <= columns, line
        content = _content(line)
        assert not content.startswith(tuple(NO_START)), line
        assert not LONE_MARK.fullmatch(content), line
        for cell in FRAME.split(line):
            for token in ASCII_TOKEN.findall(cell):
                assert token in tokens, (token, line)  # an ASCII word cut across lines
    assert out.count("…") == whole.count("…"), "a sentence cut short with …"


def test_english_plan_is_laid_out_as_before(tmp_path: Path) -> None:
    """The prose console changes nothing for English: the same lines as rich's own console."""
    from rich.console import Console

    from vllm_triage.plan import Plan
    from vllm_triage.render.plan import plan_renderable

    k3 = {"recipe": "kimi-k3", "image_cuda": "13.0.2"}
    diagnosis = _diagnose(tmp_path, EXAMPLE_LOG, "k3", driver="575.57.08", gpu="NVIDIA B200", **k3)
    result = run_cli("plan", "--diagnosis", str(diagnosis), "--case", str(tmp_path / "case"))
    assert result.exit_code == 0, result.stderr
    plan = Plan.model_validate_json((tmp_path / "case" / "plan.json").read_text())
    for width in (80, 100):
        ours, theirs = ProseConsole(width=width, record=True), Console(width=width, record=True)
        for console in (ours, theirs):
            console.print(plan_renderable(plan, "en"))
        assert ours.export_text() == theirs.export_text()
