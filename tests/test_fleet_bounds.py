"""fleet scan's inputs are bounded before they expand: inventory and node-list bombs end in one
line (exit 2) soon and in little memory; the streamed JSON is the artifact's own; host names
become folder names through one function, distinct for every host."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from deadlines import ends_in_time
from fleetnodes import NOW, make_fleet
from peak_memory import run_measured

from vllm_triage.fleet import FleetScanOptions, scan_fleet
from vllm_triage.fleet.names import host_folder, host_folders

TOOL = str(Path(sys.executable).parent / "vllm-triage")
MAX_MB = 300


def _alias_bomb(levels: int = 30) -> str:
    """Each group has two children that are both the previous group: 2**levels paths."""
    lines = [
        "all:",
        "  children:",
        "    g0: &g0",
        "      hosts:",
        "        n1: {driver: 575.57.08}",
    ]
    for level in range(1, levels + 1):
        lines += [f"    g{level}: &g{level}", "      children:"]
        lines += [f"        a{level}: *g{level - 1}", f"        b{level}: *g{level - 1}"]
    return "\n".join(lines) + "\n"


def _deep_yaml(depth: int = 50_000) -> str:
    return "all: " + "[" * depth + "]" * depth + "\n"


BOMBS = {
    "yaml-alias-bomb.yaml": _alias_bomb(),
    "yaml-pattern.yaml": "all:\n  hosts:\n    n[0:9999]x[0:9999]:\n      driver: 575.57.08\n",
    "ini-pattern.ini": "[gpu]\nn[0:9999]x[0:9999] driver=575.57.08\n",
    "ini-many-patterns.ini": "".join(f"[g{i}]\nn{i}x[0:99999]\n" for i in range(50)),
    "yaml-deep.yaml": _deep_yaml(),
    "csv-field.csv": "name,driver\nn1," + "x" * 60 * 1024**2 + "\n",
    "ini-children-diamonds.ini": "[g0]\nn1 driver=575.57.08\n"
    + "".join(
        f"[a{i}:children]\ng{i - 1}\n[b{i}:children]\ng{i - 1}\n[g{i}:children]\na{i}\nb{i}\n"
        for i in range(1, 31)
    ),
}
WANTED = {
    "yaml-alias-bomb.yaml": "group visits",
    "yaml-pattern.yaml": "100,000,000 hosts",
    "ini-pattern.ini": "100,000,000 hosts",
    "ini-many-patterns.ini": "more than 100,000",
    "yaml-deep.yaml": "nested deeper than 64",
    "csv-field.csv": "not CSV",
    "ini-children-diamonds.ini": "group visits",
}


def _scan(path: Path, case: Path, source: str = "--inventory") -> tuple[int, float, str]:
    with ends_in_time(10, f"fleet scan of {path.name}"):
        err = path.with_suffix(".err")
        with err.open("wb") as stderr:
            code, peak = run_measured(
                [TOOL, "fleet", "scan", source, str(path), "--cuda", "13.0", "--case", str(case)],
                timeout=120,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                close_stdin=True,
            )
    return code, peak, err.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BOMBS))
def test_inventory_bombs_end_in_one_line_soon_and_small(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(BOMBS[name])
    code, peak, stderr = _scan(path, tmp_path / "case")
    assert code == 2, stderr
    assert len(stderr.strip().splitlines()) == 1 and WANTED[name] in stderr, stderr
    assert "internal error" not in stderr and "Traceback" not in stderr
    assert peak < MAX_MB, f"{name}: {peak:.0f} MB"


@pytest.mark.slow
@pytest.mark.parametrize(
    "body, wanted",
    [
        (b'{"items": [' + b"[" * 50_000 + b"]" * 50_000 + b"]}", "nested deeper than 256"),
        (b'{"items": [{"metadata": {"name": "n"}}, ' + b"[" * 100, "not JSON"),
        (b'{"kind": "NodeList", "metadata": {"x": "' + b"y" * 20 * 1024**2 + b'"}}', "no items"),
        (b"\xff\xfe", "not JSON"),
    ],
    ids=["deep-item", "truncated", "large-without-items", "not-utf8"],
)
def test_node_list_bombs_end_in_one_line_soon_and_small(
    tmp_path: Path, body: bytes, wanted: str | None
) -> None:
    path = tmp_path / "nodes.json"
    path.write_bytes(body)
    code, peak, stderr = _scan(path, tmp_path / "case", "--nodes")
    if wanted is None:
        assert code == 0, stderr
    else:
        assert code == 2 and wanted in stderr and len(stderr.strip().splitlines()) == 1, stderr
    assert peak < MAX_MB, f"{peak:.0f} MB"


@pytest.mark.slow
def test_the_streamed_json_is_the_artifacts_own(tmp_path: Path) -> None:
    """Node by node, the command writes the same bytes as the FleetScan model would."""
    fleet = make_fleet(300)
    nodes = fleet.write(tmp_path / "nodes.json")
    for now in (NOW, None):  # label ages as the tests fix them, and as they are today
        scanned = scan_fleet(FleetScanOptions(cuda="13.0.2", nodes=nodes, now=now, wave_size=7))
        streamed = b"".join(scanned.json_chunks())
        assert streamed == (scanned.artifact().model_dump_json(indent=2) + "\n").encode()
        document = orjson.loads(streamed)
        assert len(document["nodes"]) == len(fleet.expected)
        assert {n["name"]: (n["status"], n["min_driver"]) for n in document["nodes"]} == (
            fleet.expected
        )


def test_a_bare_array_and_an_empty_list_stream_too(tmp_path: Path) -> None:
    fleet = make_fleet(40)
    bare = tmp_path / "bare.json"
    bare.write_bytes(orjson.dumps(fleet.document["items"]))
    scanned = scan_fleet(FleetScanOptions(cuda="13.0.2", nodes=bare, now=NOW))
    assert {n.name: (n.status, n.min_driver) for n in scanned.records} == fleet.expected
    empty = tmp_path / "empty.json"
    empty.write_bytes(b'{"kind": "List", "items": []}')
    scanned = scan_fleet(FleetScanOptions(cuda="13.0.2", nodes=empty))
    assert scanned.records == [] and "no GPU node found among 0 nodes" in scanned.notes


@pytest.mark.parametrize(
    "host", ["..", ".", "", "a/b", "a\x00b", "x" * 5000, "../../etc", "\u00e9t\u00e9"]
)
def test_a_host_name_becomes_one_safe_folder_name(host: str) -> None:
    folder = host_folder(host)
    assert folder not in ("", ".", "..") and "/" not in folder and "\x00" not in folder
    assert len(folder) <= 100 and not folder.startswith(".")
    assert all(c.isascii() and (c.isalnum() or c in "._-") for c in folder)


def test_hosts_whose_safe_names_collide_get_distinct_folders() -> None:
    a_b = host_folder("a/b")
    hosts = ["a/b", "a_b", "a:b", a_b, "Node1", "node1", "..", ".", ""]
    folders = host_folders(hosts)
    assert set(folders) == set(hosts)
    assert len({folder.lower() for folder in folders.values()}) == len(hosts)
    assert folders["a_b"] == "a_b" and folders["node1"] in ("node1", "node1-2")


def _depth(value: object) -> int:
    if isinstance(value, dict):
        return 1 + max(map(_depth, value.values()), default=0)
    if isinstance(value, list):
        return 1 + max(map(_depth, value), default=0)
    return 0


def test_the_depth_guard_skips_brackets_and_quotes_in_strings() -> None:
    """The depth the reader computes chunk by chunk is the document's, whatever the strings
    hold (brackets, escaped quotes, backslashes) and wherever the chunks are cut."""
    import json
    import random

    from vllm_triage.fleet.stream import _Depth

    rng = random.Random(7)
    texts = ['a"b\\', "[{", '\\\\"]', "x", "\\", "}}]]"]

    def made(level: int) -> object:
        roll = rng.random()
        if level > 6 or roll < 0.3:
            return rng.choice([*texts, 3])
        if roll < 0.65:
            return [made(level + 1) for _ in range(rng.randrange(4))]
        return {rng.choice(texts) + str(i): made(level + 1) for i in range(rng.randrange(4))}

    for _ in range(2000):
        document = made(0)
        text = json.dumps(document).encode()
        depth, deepest, start = _Depth(), 0, 0
        while start < len(text):
            size = rng.randrange(1, 8)
            deepest = max(deepest, depth.feed(text[start : start + size]))
            start += size
        assert deepest == _depth(document) and depth.depth == 0, text
