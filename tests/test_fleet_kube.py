"""fleet scan --kube reads the API's answers as --nodes reads a file: each body parsed as it
arrives (never a page held whole), node by node into the same records, under the same caps (the
list's bytes, its nodes) and one deadline for the whole list.

The API server is tests/kubereplay.py: here it answers the whole NodeList in one response,
`limit` ignored as the API lets a server do, sent in HTTP chunks as it is made; an endless one
trickles or stalls for the deadline tests, whose only clock is the failure detector.
"""

from __future__ import annotations

import itertools
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import ijson  # type: ignore[import-untyped]
import pytest
from deadlines import ends_in_time
from fleetnodes import NOW, fleet_nodes, make_fleet, node_object
from kubereplay import Replay, node_list_body
from peak_memory import run_measured

from vllm_triage.errors import InputError
from vllm_triage.fleet import FleetScanOptions, scan_fleet, sources
from vllm_triage.fleet.kube import KubeError, KubeTarget, api_client, nodes_from_kube
from vllm_triage.fleet.stream import CHUNK_BYTES, MAX_WHOLE_DOCUMENT_BYTES

TOOL = str(Path(sys.executable).parent / "vllm-triage")
MIB = 1024**2
# The large answer: GPU nodes of the recorded shape, each followed by CPU-only nodes (a GPU pool
# in a larger cluster), so that the bytes grow far past the bound while the records stay few.
GPU_NODES = 8_000
CPU_PER_GPU_NODE = 8
# What the scan may keep beyond the command's own start-up, from the design: one record per GPU
# node (a NodeRecord with its strings is about 300 bytes, the JSON written 4096 records at a
# time; 1 KiB each is the allowance), the head of the document kept until its first item, a few
# reads in flight (the reader's, ijson's, urllib3's and http.client's buffers), and the
# allocator's and interpreter's own variation.
RECORD_ALLOWANCE = 1024
READS_IN_FLIGHT = 8
SLACK = 16 * MIB
LIST_DEADLINE_S = 1.0  # the deadline tests' own, for the library call


def _cpu_node(index: int, rng: random.Random) -> dict[str, Any]:
    name = f"cpu-{index:06d}"
    labels = {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"}
    return node_object(name, labels, 0, index, rng)


def _large_fleet() -> Iterator[dict[str, Any]]:
    """The large answer's nodes, made one at a time."""
    rng = random.Random(3)
    cpu = itertools.count()
    for made in fleet_nodes(GPU_NODES):
        yield made.node
        for _ in range(CPU_PER_GPU_NODE):
            yield _cpu_node(next(cpu), rng)


def _expected() -> dict[str, tuple[str, str | None]]:
    return {
        made.node["metadata"]["name"]: made.expected
        for made in fleet_nodes(GPU_NODES)
        if made.expected is not None
    }


class _Counted:
    """A replay's node body that counts the bytes it sends."""

    def __init__(self, nodes: Any) -> None:
        self.nodes, self.sent = nodes, 0

    def __call__(self) -> Iterator[bytes]:
        for chunk in node_list_body(self.nodes()):
            self.sent += len(chunk)
            yield chunk


def _scan_command(config: Path, case: Path, output: Path) -> float:
    """The command's peak RSS (MB) scanning the cluster; its JSON into `output`."""
    argv = [TOOL, "fleet", "scan", "--kube", "--kubeconfig", str(config), "--cuda", "13.0.2"]
    argv += ["--case", str(case), "--format", "json"]
    errors = output.with_suffix(".err")
    with output.open("wb") as out, errors.open("wb") as err:
        code, peak = run_measured(argv, timeout=600, stdout=out, stderr=err, close_stdin=True)
    assert code == 0, errors.read_text()
    return peak


def _classified(output: Path) -> dict[str, tuple[str, str | None]]:
    with output.open("rb") as stream:
        return {
            node["name"]: (node["status"], node["min_driver"])
            for node in ijson.items(stream, "nodes.item")
        }


@pytest.mark.slow
def test_one_huge_answer_is_streamed_in_bounded_memory(tmp_path: Path) -> None:
    """A NodeList several times the memory bound, in one chunked answer: every node classified,
    and the command's peak over a small list's stays within the design's allowance (the whole
    answer held, as before, took 877 MB for 20,000 such nodes)."""
    small = Replay(node_body=lambda: node_list_body(made.node for made in fleet_nodes(50)))
    with small:
        config = small.kubeconfig(tmp_path)
        # The first run may build the knowledge cache: the second is the baseline.
        baseline = min(
            _scan_command(config, tmp_path / "case", tmp_path / f"small-{run}.json")
            for run in range(2)
        )
    large = _Counted(_large_fleet)
    with Replay(node_body=large) as replay:
        peak = _scan_command(replay.kubeconfig(tmp_path), tmp_path / "case", tmp_path / "l.json")
    expected = _expected()
    got = _classified(tmp_path / "l.json")
    assert len(expected) > 7_000
    assert got == expected  # every GPU node, as NVIDIA's rules say; no CPU node
    assert len(replay.list_requests("/api/v1/nodes")) == 1  # one answer, all of it
    allowance = (
        len(expected) * RECORD_ALLOWANCE
        + MAX_WHOLE_DOCUMENT_BYTES
        + READS_IN_FLIGHT * CHUNK_BYTES
        + SLACK
    ) / MIB
    bound = baseline + allowance
    assert large.sent / MIB > 2 * bound, "the answer must be far larger than the bound"
    assert peak < bound, (
        f"peak {peak:.0f} MB over a {large.sent / MIB:.0f} MiB answer; bound {bound:.0f} MB "
        f"(the small list's {baseline:.0f} MB + {allowance:.0f} MB)"
    )


def _endless_trickle(replay: Replay) -> Iterator[bytes]:
    """A NodeList that never ends: a chunk of nodes every 50 ms while the server runs."""
    rng = random.Random(5)
    nodes = (_cpu_node(index, rng) for index in itertools.count())
    for chunk in node_list_body(nodes):
        yield chunk
        if replay.stopped.wait(0.05):
            return


def _endless_stall(replay: Replay) -> Iterator[bytes]:
    """The head of a NodeList, then nothing while the server runs."""
    yield b'{"kind":"NodeList","apiVersion":"v1","metadata":{},"items":['
    replay.stopped.wait()


@pytest.mark.parametrize("adversary", [_endless_trickle, _endless_stall], ids=["trickle", "stall"])
def test_the_whole_list_ends_by_its_deadline(tmp_path: Path, adversary: Any) -> None:
    """Each read gets data (trickle) or waits under its read timeout (stall): only the list's
    own deadline ends it, with one line."""
    replay = Replay()
    replay.node_body = lambda: adversary(replay)
    with replay, api_client(KubeTarget(replay.kubeconfig(tmp_path))) as client:
        nodes = nodes_from_kube(client, None, 500, None, deadline_s=LIST_DEADLINE_S)
        with ends_in_time(LIST_DEADLINE_S), pytest.raises(KubeError) as caught:
            for _ in nodes.facts:
                pass
    message = str(caught.value)
    assert message.startswith("Kubernetes nodes: the list was not read within 1 s"), message
    assert "\n" not in message


@pytest.mark.slow
def test_a_continue_token_after_the_items_is_followed(tmp_path: Path) -> None:
    fleet = make_fleet(230, seed=5)
    replay = Replay(nodes=fleet.document["items"], metadata_last=True)
    with replay:
        config = replay.kubeconfig(tmp_path)
        scanned = scan_fleet(
            FleetScanOptions(cuda="13.0.2", kube=True, kubeconfig=config, page_size=50, now=NOW)
        )
    assert len(replay.list_requests("/api/v1/nodes")) == 5
    assert {n.name: (n.status, n.min_driver) for n in scanned.records} == fleet.expected


@pytest.mark.slow
def test_the_caps_hold_across_pages(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Pages each under the caps, the list over them: refused in one line, as a file is."""
    fleet = make_fleet(230, seed=5)
    replay = Replay(nodes=fleet.document["items"])
    with replay:
        options = FleetScanOptions(
            cuda="13.0.2", kube=True, kubeconfig=replay.kubeconfig(tmp_path), page_size=50
        )
        monkeypatch.setattr(sources, "MAX_NODES", 120)
        with pytest.raises(InputError, match=r"^Kubernetes nodes: more than 120 nodes; scan"):
            scan_fleet(options)
        monkeypatch.setattr(sources, "MAX_NODES", 1_000_000)
        monkeypatch.setattr("vllm_triage.fleet.kube.MAX_NODE_LIST_BYTES", MIB)
        with pytest.raises(InputError, match=r"^Kubernetes nodes: larger than 1 MiB; not read$"):
            scan_fleet(options)
    assert len(replay.list_requests("/api/v1/nodes")) > 2  # refused on a later page


def test_a_node_file_past_the_node_cap_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fleet = make_fleet(40)
    path = fleet.write(tmp_path / "nodes.json")
    monkeypatch.setattr(sources, "MAX_NODES", 39)
    with pytest.raises(
        InputError, match=r"nodes.json: more than 39 nodes; scan the fleet in parts"
    ):
        scan_fleet(FleetScanOptions(cuda="13.0.2", nodes=path))
