"""fleet scan: every GPU node's status for an image from GPU Feature Discovery labels, a node
list, an inventory or the Kubernetes API, and the rollout waves.

There is no Kubernetes API server on these machines: the client path runs the official Python
client against tests/kubereplay.py, a local HTTP server that answers in the API's real format
(pages with limit/continue, a 410 Gone for an expired continue token, a 403 from RBAC).
"""

from __future__ import annotations

import json
from pathlib import Path

import orjson
import pytest
from cli import run_cli
from fleetnodes import (
    AWS_DEPRECATED,
    LKE,
    MIN_DRIVER_13_0_2,
    NOW,
    RKE2,
    TOOLKIT_DRIVER_13_0_2,
    gpu_pod,
    make_fleet,
    node_object,
    pod_list,
)
from kubereplay import Replay

from vllm_triage.errors import InputError
from vllm_triage.fleet import FleetScanOptions, fleet_scan
from vllm_triage.fleet.inventory import expand_pattern, ini_hosts
from vllm_triage.knowledge import KnowledgeBase

DATA = Path(__file__).parent / "data"
K3_CONFIG = DATA / "image-configs" / "vllm-openai-cu130.inspect.json"  # CUDA 13.0.2


def scan(kb: KnowledgeBase, **options: object) -> object:
    options.setdefault("image_config", K3_CONFIG)
    options.setdefault("now", NOW)
    return fleet_scan(FleetScanOptions(**options), kb=kb)  # type: ignore[arg-type]


def by_name(result: object) -> dict[str, object]:
    return {node.name: node for node in result.nodes}  # type: ignore[attr-defined]


def write_nodes(path: Path, items: list[dict[str, object]]) -> Path:
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return path


# --- the 10,000-node NodeList -----------------------------------------------------------------


@pytest.mark.slow
def test_a_10000_node_list_is_classified_right(kb: KnowledgeBase, tmp_path: Path) -> None:
    """Every node of a recorded-shape NodeList; bench/bench_fleet.py measures how fast."""
    fleet = make_fleet(10_000)
    path = tmp_path / "nodes.json"
    path.write_bytes(orjson.dumps(fleet.document, option=orjson.OPT_INDENT_2))
    assert path.stat().st_size > 80 * 1024**2  # the real shape: about 12 KB a node
    result = scan(kb, nodes=path)
    nodes = by_name(result)
    assert len(nodes) == len(fleet.expected) == 10_000 - fleet.cpu_nodes
    wrong = [
        (name, nodes[name].status, nodes[name].min_driver, want)
        for name, want in fleet.expected.items()
        if (nodes[name].status, nodes[name].min_driver) != want
    ]
    assert not wrong, wrong[:5]
    assert {name for name, node in nodes.items() if node.stale} == fleet.stale
    counts = {status: 0 for status in ("ready", "forward_compat", "needs_upgrade", "unknown")}
    for want, _ in fleet.expected.values():
        counts[want] += 1
    assert all(result.counts[status] == count for status, count in counts.items())
    assert all(count > 200 for count in counts.values())  # every status is well represented
    assert f"{fleet.cpu_nodes} of 10000 nodes have no NVIDIA GPU: not scanned" in result.notes
    # Every node that a driver change helps is in exactly one wave; ready ones in none.
    waved = [name for wave in result.waves for name in wave]
    assert len(waved) == len(set(waved)) == counts["needs_upgrade"] + counts["forward_compat"]
    assert len(result.waves[0]) == 1 and all(len(w) <= 10 for w in result.waves)


# --- real label sets --------------------------------------------------------------------------


def test_real_gfd_label_sets_current_deprecated_and_hosted(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    """Each real sample as `kubectl get node N -o jsonpath='{.metadata.labels}'` prints it."""
    a30 = by_name(scan(kb, nodes=RKE2))["gpu-worker-02"]
    # 535.274.02: r535 is a supported base branch of cuda-compat-13-0 and the A30 a data-center GPU.
    assert (a30.status, a30.driver, a30.min_driver) == (
        "forward_compat",
        "535.274.02",
        MIN_DRIVER_13_0_2,
    )
    assert a30.gpu == "NVIDIA-A30" and a30.gpu_count == 1 and a30.cuda_ceiling == "12.2"
    assert "cuda-compat-13-0" in a30.reason
    # Only the deprecated nvidia.com/cuda.driver.* names: 545.23.08 (r545 is no compat base).
    t4 = scan(kb, nodes=AWS_DEPRECATED).nodes[0]
    assert (t4.status, t4.driver, t4.min_driver, t4.cuda_ceiling) == (
        "needs_upgrade",
        "545.23.08",
        MIN_DRIVER_13_0_2,
        "12.3",
    )
    assert t4.stale and t4.labels_age_hours > 24 * 365  # gfd.timestamp 1710736196: March 2024
    rtx = scan(kb, nodes=LKE).nodes[0]
    assert rtx.name == "lke529760-766837-0a634ab30000"
    assert (rtx.status, rtx.driver) == ("ready", "580.95.05")
    assert "not in the GPU table" in rtx.reason  # NVIDIA-RTX-4000-Ada-Generation


def test_labels_that_disagree_or_only_give_the_ceiling(kb: KnowledgeBase, tmp_path: Path) -> None:
    labels = json.loads(RKE2.read_text())
    both = {
        **labels,
        "kubernetes.io/hostname": "both",
        "nvidia.com/cuda.driver-version.full": "580.95.05",
    }
    both.update({"nvidia.com/cuda.driver-version.major": "580", "nvidia.com/cuda.driver-version.minor": "95", "nvidia.com/cuda.driver-version.revision": "05"})  # fmt: skip
    ceiling_only = {
        k: v for k, v in labels.items() if "driver-version" not in k and "cuda.driver." not in k
    }
    old_ceiling = dict(ceiling_only)
    for name, source in (("new", "13.1"), ("old", "12.8")):
        target = ceiling_only if name == "new" else old_ceiling
        target.update({"nvidia.com/cuda.runtime-version.full": source, "nvidia.com/cuda.runtime-version.major": source.split(".")[0], "nvidia.com/cuda.runtime-version.minor": source.split(".")[1]})  # fmt: skip
    rng = __import__("random").Random(1)
    path = write_nodes(
        tmp_path / "n.json",
        [
            node_object("both", both, 8, 0, rng),
            node_object("ceiling-13-1", ceiling_only, 8, 1, rng),
            node_object("ceiling-12-8", old_ceiling, 8, 2, rng),
            node_object(
                "volta", {**both, "nvidia.com/gpu.product": "Tesla-V100-SXM2-32GB"}, 8, 3, rng
            ),
            node_object("cpu-only", {"kubernetes.io/os": "linux"}, 0, 4, rng),
        ],
    )
    nodes = by_name(scan(kb, nodes=path))
    assert set(nodes) == {"both", "ceiling-13-1", "ceiling-12-8", "volta"}
    assert nodes["both"].status == "ready" and nodes["both"].driver == "580.95.05"
    assert "labels disagree" in nodes["both"].reason and "535.274.02" in nodes["both"].reason
    assert nodes["ceiling-13-1"].status == "ready" and nodes["ceiling-13-1"].driver is None
    assert (nodes["ceiling-12-8"].status, nodes["ceiling-12-8"].min_driver) == (
        "needs_upgrade",
        MIN_DRIVER_13_0_2,
    )
    # CUDA 13 carries no kernels for Volta: no driver helps, and no wave includes it.
    volta = nodes["volta"]
    assert volta.status == "unsupported" and volta.min_driver is None
    assert "V100" in volta.reason


# --- waves ------------------------------------------------------------------------------------


def _small_fleet(tmp_path: Path) -> tuple[Path, Path]:
    rng = __import__("random").Random(3)
    labels = json.loads(RKE2.read_text())
    items = []
    drivers = {
        "n01": "575.57.08", "n02": "575.57.08", "n03": "575.57.08", "n04": "575.64.03",
        "n05": "570.172.08", "n06": "575.57.08", "n07": "580.95.05", "n08": "575.57.08",
    }  # fmt: skip
    for index, (name, driver) in enumerate(drivers.items()):
        major, minor, rev = driver.split(".")
        node_labels = {
            **labels,
            "kubernetes.io/hostname": name,
            "nvidia.com/gfd.timestamp": str(NOW - 600),
        }
        node_labels.update({"nvidia.com/cuda.driver-version.full": driver, "nvidia.com/cuda.driver-version.major": major, "nvidia.com/cuda.driver-version.minor": minor, "nvidia.com/cuda.driver-version.revision": rev, "nvidia.com/cuda.driver.major": major, "nvidia.com/cuda.driver.minor": minor, "nvidia.com/cuda.driver.rev": rev})  # fmt: skip
        items.append(node_object(name, node_labels, 8, index, rng))
    nodes = write_nodes(tmp_path / "nodes.json", items)
    pods = tmp_path / "pods.json"
    pods.write_text(
        json.dumps(
            pod_list(
                [
                    gpu_pod("vllm-a", "n01", 8),
                    gpu_pod("vllm-b", "n02", 4),
                    gpu_pod("vllm-c", "n02", 4),
                    gpu_pod("done", "n03", 8, phase="Succeeded"),  # finished: not work
                    gpu_pod("sidecar", "n04", 0),  # no GPU: not GPU work
                    gpu_pod("vllm-d", "n07", 8),  # ready node: skipped anyway
                ]
            )
        )
    )
    return nodes, pods


def test_waves_canary_first_busy_nodes_last_ready_ones_skipped(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    nodes, pods = _small_fleet(tmp_path)
    result = scan(kb, nodes=nodes, pods=pods, wave_size=2)
    found = by_name(result)
    assert found["n01"].gpu_pods == 1 and found["n02"].gpu_pods == 2 and found["n03"].gpu_pods == 0
    # n05 (r570 on an A30): forward_compat, changed too; n07 ready: left out.
    assert result.waves == [["n03"], ["n04", "n06"], ["n08", "n05"], ["n01", "n02"]]
    assert not any("runs GPU work" in note for note in result.notes)


def test_waves_when_every_candidate_is_busy_say_to_drain(kb: KnowledgeBase, tmp_path: Path) -> None:
    nodes, _ = _small_fleet(tmp_path)
    pods = tmp_path / "busy.json"
    pods.write_text(json.dumps(pod_list([gpu_pod(f"p{n}", f"n0{n}", 1) for n in range(1, 9)])))
    result = scan(kb, nodes=nodes, pods=pods, wave_size=3)
    assert result.waves[0] == ["n01"]
    assert any("drain the canary n01 first" in note for note in result.notes)


def test_without_pod_information_the_scan_says_so(kb: KnowledgeBase, tmp_path: Path) -> None:
    nodes, _ = _small_fleet(tmp_path)
    result = scan(kb, nodes=nodes)
    assert all(node.gpu_pods is None for node in result.nodes)
    assert any("which nodes run GPU work is not known" in note for note in result.notes)


# --- inventories ------------------------------------------------------------------------------


def test_ansible_ini_inventory_with_groups_vars_and_ranges(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    inventory = tmp_path / "hosts"
    inventory.write_text(
        """# GPU hosts without Kubernetes
[h100]
gpu[01:03].dc1 nvidia_driver_version=575.57.08
gpu04.dc1 nvidia_driver_version=580.95.05 gpu_pods=2

[h100:vars]
nvidia_gpu_product="NVIDIA H100 80GB HBM3"
nvidia_gpu_count=8

[rtx]
ws1 ansible_host=192.0.2.10 driver=570.172.08 gpu="NVIDIA GeForce RTX 4090" gpu_work=yes

[gpu:children]
h100
rtx

[gpu:vars]
gpu_work=no

[other]
bastion ansible_host=192.0.2.1
"""
    )
    result = scan(kb, inventory=inventory, wave_size=5)
    nodes = by_name(result)
    assert set(nodes) == {"gpu01.dc1", "gpu02.dc1", "gpu03.dc1", "gpu04.dc1", "ws1"}
    assert nodes["gpu02.dc1"].status == "needs_upgrade" and nodes["gpu02.dc1"].gpu_count == 8
    assert nodes["gpu02.dc1"].gpu_pods == 0  # [gpu:vars] through the children
    assert nodes["gpu04.dc1"].status == "ready" and nodes["gpu04.dc1"].gpu_pods == 2
    assert nodes["ws1"].status == "needs_upgrade" and nodes["ws1"].gpu_pods == 1
    assert "not a data-center GPU" in nodes["ws1"].reason
    assert result.waves == [["gpu01.dc1"], ["gpu02.dc1", "gpu03.dc1", "ws1"]]
    assert "1 of 6 hosts have no NVIDIA GPU: not scanned" in result.notes


def test_yaml_and_csv_inventories(kb: KnowledgeBase, tmp_path: Path) -> None:
    ansible_yaml = tmp_path / "inventory.yml"
    ansible_yaml.write_text(
        """all:
  vars:
    nvidia_gpu_product: NVIDIA-B200
  children:
    r575:
      vars: {nvidia_driver_version: 575.57.08}
      hosts:
        b200-[a:c]:
    r580:
      hosts:
        b200-d: {nvidia_driver_version: 580.105.08, gpu_pods: 1}
"""
    )
    nodes = by_name(scan(kb, inventory=ansible_yaml))
    assert {name: node.status for name, node in nodes.items()} == {
        "b200-a": "needs_upgrade", "b200-b": "needs_upgrade", "b200-c": "needs_upgrade",
        "b200-d": "ready",
    }  # fmt: skip
    listed = tmp_path / "nodes.yaml"
    listed.write_text(
        "nodes:\n"
        "  - {name: a, labels: {nvidia.com/cuda.driver-version.full: 570.172.08, nvidia.com/gpu.product: NVIDIA-H200}}\n"
        "  - {name: b, driver: 590.48.01, gpu: NVIDIA H200}\n"
    )
    assert {n.name: n.status for n in scan(kb, inventory=listed).nodes} == {
        "a": "forward_compat",
        "b": "ready",
    }
    table = tmp_path / "nodes.csv"
    table.write_text(
        "hostname,driver,gpu,gpu_count,gpu_pods\nc1,575.64.03,NVIDIA A100-SXM4-80GB,8,0\nc2,,,,\n"
    )
    result = scan(kb, inventory=table)
    assert [(n.name, n.status, n.gpu_count) for n in result.nodes] == [("c1", "needs_upgrade", 8)]


def test_host_patterns_expand_like_ansible() -> None:
    assert expand_pattern("gpu[08:11].x") == ["gpu08.x", "gpu09.x", "gpu10.x", "gpu11.x"]
    assert expand_pattern("r[a:c]") == ["ra", "rb", "rc"]
    assert expand_pattern("n[1:5:2]") == ["n1", "n3", "n5"]
    assert ini_hosts("[a]\nh1 x=1\n[a:vars]\ny=2\n[all:vars]\nz=3\n", "inv") == {
        "h1": {"x": "1", "y": "2", "z": "3"}
    }


# --- inputs the scan refuses in one line ------------------------------------------------------


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({}, "give one source of nodes"),
        ({"nodes": RKE2, "inventory": RKE2}, "not --nodes and --inventory"),
        ({"inventory": RKE2, "pods": RKE2}, "--pods goes with --nodes"),
        ({"nodes": RKE2, "wave_size": 0}, "--wave-size must be at least 1"),
        ({"nodes": RKE2, "image_config": None}, "say which image"),
    ],
)
def test_refused_options(kb: KnowledgeBase, options: dict[str, object], message: str) -> None:
    with pytest.raises(InputError, match=message):
        scan(kb, **options)


def test_refused_files(kb: KnowledgeBase, tmp_path: Path) -> None:
    broken = tmp_path / "broken.json"
    broken.write_text('{"items": [')
    with pytest.raises(InputError, match=r"broken.json: not JSON"):
        scan(kb, nodes=broken)
    pod_like = tmp_path / "other.json"
    pod_like.write_text('{"kind": "ConfigMap", "data": {}}')
    with pytest.raises(InputError, match="no items"):
        scan(kb, nodes=pod_like)
    with pytest.raises(InputError, match="no such file"):
        scan(kb, nodes=tmp_path / "missing.json")
    bad_ini = tmp_path / "hosts.ini"
    bad_ini.write_text("[gpu]\nh1 novalue\n")
    with pytest.raises(InputError, match=r"hosts.ini:2: expected key=value"):
        scan(kb, inventory=bad_ini)


# --- the Kubernetes client against the API replay ---------------------------------------------


def _replay_fleet(count: int) -> tuple[Replay, dict[str, tuple[str, str | None]]]:
    fleet = make_fleet(count, seed=5)
    replay = Replay(nodes=fleet.document["items"])
    busy = [name for name, (status, _) in fleet.expected.items() if status != "ready"][:3]
    replay.pods = [gpu_pod(f"vllm-{n}", n, 8) for n in busy] + [
        gpu_pod("old", busy[0], 8, phase="Failed")
    ]
    return replay, fleet.expected


@pytest.mark.slow
def test_kube_pages_through_limit_and_continue(kb: KnowledgeBase, tmp_path: Path) -> None:
    replay, expected = _replay_fleet(230)
    with replay:
        result = scan(kb, kube=True, kubeconfig=replay.kubeconfig(tmp_path), page_size=50)
    listed = replay.list_requests("/api/v1/nodes")
    assert [q["limit"] for q in listed] == [["50"]] * 5
    assert "continue" not in listed[0] and all("continue" in q for q in listed[1:])
    pods = replay.list_requests("/api/v1/pods")
    assert pods and pods[0]["fieldSelector"] == ["status.phase=Running"]
    nodes = by_name(result)
    assert {name: (node.status, node.min_driver) for name, node in nodes.items()} == expected
    assert sum(1 for node in result.nodes if node.gpu_pods) == 3
    assert result.source == "Kubernetes (current context)"


@pytest.mark.slow
def test_kube_expired_continue_restarts_the_list_once(kb: KnowledgeBase, tmp_path: Path) -> None:
    replay, expected = _replay_fleet(120)
    replay.expire_continues = 1
    with replay:
        result = scan(kb, kube=True, kubeconfig=replay.kubeconfig(tmp_path), page_size=50)
    listed = replay.list_requests("/api/v1/nodes")
    # page 1, page 2 -> 410, restart: page 1, 2, 3
    assert ["continue" in q for q in listed] == [False, True, False, True, True]
    assert len(result.nodes) == len(expected)  # no node twice, none missing


@pytest.mark.slow
def test_kube_expired_twice_is_one_clear_line(kb: KnowledgeBase, tmp_path: Path) -> None:
    replay, _ = _replay_fleet(120)
    replay.expire_continues = 2
    with replay, pytest.raises(InputError) as caught:
        scan(kb, kube=True, kubeconfig=replay.kubeconfig(tmp_path), page_size=50)
    message = str(caught.value)
    assert "continue token expired twice" in message and "410 Gone" in message
    assert "--page-size" in message and "\n" not in message


@pytest.mark.slow
def test_kube_forbidden_nodes_is_one_line_and_forbidden_pods_a_note(
    kb: KnowledgeBase, tmp_path: Path
) -> None:
    replay, expected = _replay_fleet(20)
    replay.forbid = {"pods"}
    with replay:
        config = replay.kubeconfig(tmp_path, context="prod")
        result = scan(
            kb, kube=True, kubeconfig=config, context="prod", selector="kubernetes.io/os=linux"
        )
        assert len(result.nodes) == len(expected)
        assert any(
            "forbidden (403)" in note and "list on pods" in note.replace("`", "")
            for note in result.notes
        )
        assert all(node.gpu_pods is None for node in result.nodes)
        assert replay.list_requests("/api/v1/nodes")[0]["labelSelector"] == [
            "kubernetes.io/os=linux"
        ]
        replay.forbid = {"nodes"}
        with pytest.raises(InputError) as caught:
            scan(kb, kube=True, kubeconfig=config)
    assert str(caught.value).startswith(
        "Kubernetes nodes: forbidden (403): nodes is forbidden: User"
    )
    assert "ClusterRole" in str(caught.value)


def test_kube_without_any_configuration(
    kb: KnowledgeBase, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    with pytest.raises(InputError, match=r"no kubeconfig .* not running in a pod"):
        scan(kb, kube=True)


@pytest.mark.slow
def test_kube_unreachable_and_bad_context(kb: KnowledgeBase, tmp_path: Path) -> None:
    replay = Replay()
    with replay:
        config = replay.kubeconfig(tmp_path)
    # The server is gone: connection refused.
    with pytest.raises(InputError, match="Kubernetes nodes: cannot reach the API server"):
        scan(kb, kube=True, kubeconfig=config)
    with pytest.raises(InputError, match=r"Kubernetes configuration:.*nowhere"):
        scan(kb, kube=True, kubeconfig=config, context="nowhere")


# --- the command line -------------------------------------------------------------------------


def test_cli_json_schema_and_the_case_artifact(tmp_path: Path) -> None:
    nodes, pods = _small_fleet(tmp_path)
    case = tmp_path / "case"
    result = run_cli(
        "fleet", "scan", "--image-config", str(K3_CONFIG), "--nodes", str(nodes), "--pods",
        str(pods), "--wave-size", "3", "--case", str(case), "--format", "json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    document = json.loads(result.stdout)
    assert document["schema_version"] == 1
    assert set(document["nodes"][0]) >= {"name", "status", "driver", "min_driver", "reason"}
    # the image's three figures, the same as compat's for its CUDA (13.0.2)
    figures = ("min_driver", "toolkit_driver", "recommended_driver", "recommended_branch")
    assert tuple(document[name] for name in figures) == (
        MIN_DRIVER_13_0_2,
        TOOLKIT_DRIVER_13_0_2,
        "580.173.02",
        "r580",
    )
    verdict = json.loads(
        run_cli("compat", "--driver", "575.57.08", "--cuda", "13.0.2", "--format", "json").stdout
    )
    assert tuple(verdict[name] for name in figures) == tuple(document[name] for name in figures)
    assert document["waves"][0] == ["n03"] and document["waves"][1] == ["n04", "n06", "n08"]
    saved = json.loads((case / "fleet-scan.json").read_text())
    assert saved["nodes"] == document["nodes"] and saved["waves"] == document["waves"]
    markdown = (case / "fleet-scan.md").read_text()
    assert "| needs_upgrade | 575.57.08 |" in markdown and "1. canary: n03" in markdown
    text = run_cli(
        "fleet", "scan", "--cuda", "13.0", "--nodes", str(nodes), "--case", str(case)
    )  # fmt: skip
    assert text.exit_code == 0, text.output
    assert "needs_upgrade" in text.stdout and "rollout waves" in text.stdout
    assert "case     " in text.stdout and (case / "history").is_dir()


def test_cli_errors_are_one_line(tmp_path: Path) -> None:
    result = run_cli("fleet", "scan", "--cuda", "13.0", "--case", str(tmp_path))
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1 and "give one source of nodes" in result.stderr


def test_text_from_outside_is_made_printable(kb: KnowledgeBase, tmp_path: Path) -> None:
    """A node list or an inventory is text from anyone: a terminal escape in a name or a value
    reaches no output as it is (not the JSON, not the terminal)."""
    inventory = tmp_path / "nodes.yaml"
    inventory.write_text(
        'nodes:\n  - {name: "evil\\e[2Jnode", driver: "575.57.08\\x07", gpu: "NVIDIA-B200\\ud800"}\n'
    )
    (node,) = scan(kb, inventory=inventory).nodes
    assert node.name == "evil\u241b[2Jnode"
    assert "\x1b" not in node.reason and "\x07" not in json.dumps(node.model_dump())
    assert (
        node.gpu == "NVIDIA-B200\ufffd" and node.status == "unknown"
    )  # the bell breaks the version
    result = run_cli(
        "fleet", "scan", "--cuda", "13.0", "--inventory", str(inventory), "--case", str(tmp_path)
    )
    assert result.exit_code == 0 and "\x1b[2J" not in result.stdout
