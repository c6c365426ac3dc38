"""README.md stays true: every ```console example is the real output of its command, run now in a
fresh sandbox (scripts/readme_examples.py, which also rewrites them with --update), and every flag
the README's code blocks give a command is one that command's --help lists."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).parent.parent
SCRIPT = REPO / "scripts" / "readme_examples.py"


def _load_runner() -> ModuleType:
    """scripts/readme_examples.py as a module (scripts/ is not a package)."""
    spec = importlib.util.spec_from_file_location("readme_examples", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    return module


readme_examples = _load_runner()


@pytest.mark.slow
def test_every_console_example_is_the_real_output() -> None:
    mismatches = readme_examples.check()
    assert not mismatches, (
        "README examples differ from what the commands print now "
        "(.venv/bin/python scripts/readme_examples.py --update rewrites them):\n\n"
        + "\n\n".join(mismatch.diff() for mismatch in mismatches)
    )


def test_the_readme_has_an_example_of_each_command_of_the_map() -> None:
    blocks = readme_examples.parse_blocks(readme_examples.README.read_text(encoding="utf-8"))
    commands = [command.text for block in blocks for command in block.commands]
    for name in (
        "collect", "diagnose", "plan", "baseline capture", "baseline compare", "record",
        "record check", "report", "case show", "compat", "preflight", "capacity", "fleet scan",
        "prefix-check",
    ):  # fmt: skip
        assert any(f"{text} ".startswith(f"vllm-triage {name} ") for text in commands), name
    served = readme_examples.real_server_blocks(readme_examples.README.read_text(encoding="utf-8"))
    assert [block.commands[0].text.split()[1] for block in served] == ["validate"]


def test_the_incident_runs_in_the_runbooks_order() -> None:
    """collect -> diagnose -> plan -> baseline capture -> validate -> baseline compare -> record
    -> report, as the map says; the upgraded node only for the capture after the change."""
    text = readme_examples.README.read_text(encoding="utf-8")
    order = [
        "collect", "diagnose", "plan", "baseline capture", "validate", "baseline compare",
        "record", "report",
    ]  # fmt: skip
    blocks = sorted(
        readme_examples.parse_blocks(text)
        + readme_examples.parse_blocks(text, readme_examples.REAL_SERVER_FENCE),
        key=lambda block: block.start,
    )
    firsts = []
    for block in blocks:
        for command in block.commands:
            words = command.text.split()
            name = words[1]
            if name in ("baseline", "record", "case") and words[2:3] and words[2].isalpha():
                name = f"{name} {words[2]}"
            if name in order and name not in firsts:
                firsts.append(name)
    assert firsts == order
    upgraded = [block for block in blocks if block.driver is not None]
    assert [block.driver for block in upgraded] == [readme_examples.UPGRADED_DRIVER]
    assert upgraded[0].commands[0].text.startswith("vllm-triage baseline capture --label after")


@pytest.mark.slow
def test_a_block_after_a_node_marker_runs_on_the_upgraded_node() -> None:
    text = (
        "```console\n$ nvidia-smi -q -x | head -n 40\n```\n"
        "<!-- readme-examples: node on driver 580.105.08 -->\n"
        "```console\n$ nvidia-smi -q -x | head -n 40\n$ nvidia-container-cli info | head -n 1\n```\n"
        "```console\n$ nvidia-smi -q -x | head -n 40\n```\n"
    )
    blocks = readme_examples.parse_blocks(text)
    assert [block.driver for block in blocks] == [None, "580.105.08", None]
    seen = []
    with readme_examples.sandbox() as box:
        for block in blocks:
            with box.on_driver(block.driver):
                seen.append("\n".join(line for c in block.commands for line in box.run(c)))
        module = (box.work / "host" / "proc" / "driver" / "nvidia" / "version").read_text()
    assert "<driver_version>575.57.08</driver_version>" in seen[0]
    assert "<driver_version>580.105.08</driver_version>" in seen[1]
    assert "NVRM version:   580.105.08" in seen[1]
    assert "<driver_version>575.57.08</driver_version>" in seen[2]
    assert "575.57.08" in module and "580.105.08" not in module


def test_a_node_marker_for_a_driver_without_a_capture_is_named() -> None:
    text = "<!-- readme-examples: node on driver 590.44.01 -->\n```console\n$ x\n```\n"
    with pytest.raises(readme_examples.ExampleError) as error:
        readme_examples.parse_blocks(text)
    assert str(error.value).startswith("README.md:1: ") and "590.44.01" in str(error.value)


@pytest.mark.slow
def test_every_documented_flag_exists() -> None:
    assert readme_examples.flag_problems() == []


def test_a_flag_that_does_not_exist_is_found(tmp_path: Path) -> None:
    readme = tmp_path / "README.md"
    readme.write_text(
        "```\n"
        "vllm-triage compat --driver V [--cuda V]\n"
        "                   [--no-such-flag]        # a comment --not-read\n"
        "```\n"
        "```console\n"
        "$ vllm-triage case show --format json --pretty\n"
        "  --max-model-len is output, not read\n"
        "$ vllm-triage nosuchcommand --x\n"
        "$ vllm-triage record --answered-by x --no-such-answer\n"
        "$ vllm-triage record check --registry URL\n"
        "$ vllm-triage baseline --label x\n"
        "```\n",
        encoding="utf-8",
    )
    # `record` is a command with options and a group (`record check`); `baseline` is a group only.
    assert readme_examples.flag_problems(readme) == [
        "vllm-triage baseline: no such command",
        "vllm-triage case show --pretty: not in its --help",
        "vllm-triage compat --no-such-flag: not in its --help",
        "vllm-triage nosuchcommand: no such command",
        "vllm-triage record --no-such-answer: not in its --help",
    ]


def test_blocks_are_parsed_into_commands_and_their_output() -> None:
    text = (
        "intro\n```console\n$ vllm-triage a\none\n\ntwo\n$ vllm-triage b\n```\n```text\n$ x\n```\n"
    )
    (block,) = readme_examples.parse_blocks(text)
    assert [(c.line, c.text, c.output) for c in block.commands] == [
        (3, "vllm-triage a", ["one", "", "two"]),
        (7, "vllm-triage b", []),
    ]
    assert (block.start, block.end) == (2, 7)


@pytest.mark.parametrize(
    ("text", "words"),
    [
        ("```console\nno prompt\n```\n", "output before the first `$ ` line"),
        ("```console\n$ vllm-triage a\n", "never closed"),
        ("```console\n```\n", "without a `$ ` line"),
    ],
)
def test_a_malformed_block_is_named(text: str, words: str) -> None:
    with pytest.raises(readme_examples.ExampleError) as error:
        readme_examples.parse_blocks(text)
    assert str(error.value).startswith("README.md:") and words in str(error.value)


def test_what_varies_between_runs_is_normalised_and_nothing_else(tmp_path: Path) -> None:
    box = readme_examples.Sandbox(tmp_path / "work", {}, "0.1.0", "bash")
    first = [
        "bundle   triage/bundles/bundle-20261201T101952929645Z   ",
        "│ bundle │ bundles/bundle-20261201T10195 │ 2026-12-01 10:19:52 │",
        "│        │ 2929645Z                      │                     │",
        ' "created_at": "2026-12-01T10:19:54.171645+00:00", "tool_version": "0.1.0"',
        " gpu           │ ok            │ 0.29    │ 3     │",
        f"{tmp_path / 'work'}/x [REDACTED:secret_env:1a2b3c4d] 0.04 s",
        "review on 2026-12-31 (answered 2026-12-01 11:27; today is 2026-12-01)",
        "│ ready (2026-12-01        │",
        "│ 11:27); rollback         │",
        "ERROR 11-28 09:14:18 [core.py:1083]",
        "confidence 0.97",
        "",
        "",
    ]
    second = [
        "bundle   triage/bundles/bundle-20261202T080000000001Z",
        "│ bundle │ bundles/bundle-20261202T08000 │ 2026-12-02 08:00:00 │",
        "│        │ 0000001Z                      │                     │",
        ' "created_at": "2026-12-02T08:00:00.000001+00:00", "tool_version": "0.1.0"',
        " gpu           │ ok            │ 1.05    │ 3     │",
        f"{tmp_path / 'work'}/x [REDACTED:secret_env:99999999] 1.50 s",
        "review on 2027-01-30 (answered 2026-12-31 08:05; today is 2026-12-31)",
        "│ ready (2026-12-31        │",
        "│ 08:05); rollback         │",
        "ERROR 11-28 09:14:18 [core.py:1083]",
        "confidence 0.97",
    ]
    assert box.normalise(first) == box.normalise(second)
    assert box.normalise(first)[-1] == "confidence 0.97"
    changed = [*second[:-1], "confidence 0.96"]
    assert box.normalise(first) != box.normalise(changed)
    # A time of a log line (with seconds) is the example's content, not the moment of the run.
    log_line = [*second[:-2], "ERROR 11-28 09:14:19 [core.py:1083]", second[-1]]
    assert box.normalise(first) != box.normalise(log_line)


def test_the_layout_of_the_code_is_the_codes() -> None:
    assert readme_examples.layout_problems() == []


def test_a_layer_or_package_the_readme_misses_is_found(tmp_path: Path) -> None:
    text = readme_examples.README.read_text(encoding="utf-8")
    readme = tmp_path / "README.md"
    readme.write_text(
        text.replace("\nbundle        ", "\nbundles       ", 1).replace(
            "  ties.py ", "  tie.py  ", 1
        ),
        encoding="utf-8",
    )
    problems = readme_examples.layout_problems(readme)
    assert len(problems) == 2, problems
    assert "is not pyproject.toml's layers contract" in problems[0]
    assert problems[1] == "README.md: the code's tree does not name src/vllm_triage/ties.py"
