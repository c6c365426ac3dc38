"""fleet run: the tool run on many hosts through an existing engine.

Ansible runs for real: tests/sshhosts.py starts sshd test hosts in network namespaces (keys made
for the run), one deliberately unreachable, one whose nvidia-smi replays an r575 driver, the
others r580; the remote side runs vllm-triage from this checkout (the hosts share the file
system). Kubernetes has no API server here: the Jobs path runs the official client against
tests/kubereplay.py, which answers in the API's real format, and the pod logs it serves are
real envelopes printed by fleet/remote.py on this machine.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli import run_cli
from kubereplay import JobScript, Replay
from sshhosts import REQUIRE_ENV, Host, SshHosts, unavailable

from vllm_triage.errors import InputError
from vllm_triage.fleet import FleetRunOptions, fleet_run
from vllm_triage.fleet.jobs import JobRun, job_manifest, job_name, load_model

DATA = Path(__file__).parent / "data"
K3_CONFIG = DATA / "image-configs" / "vllm-openai-cu130.inspect.json"  # CUDA 13.0.2


@pytest.fixture(scope="module")
def ssh_hosts(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SshHosts]:
    why = unavailable()
    if why is not None:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail(f"the sshd test hosts cannot run here: {why} ({REQUIRE_ENV}=1)")
        pytest.skip(f"the sshd test hosts cannot run here: {why}")
    hosts = [
        Host("gpu-r575", "575.57.08", 0),
        Host("gpu-r580-a", "580.105.08", 1),
        Host("gpu-r580-b", "580.95.05", 2),
        Host("gpu-down", None, 3),
    ]
    with SshHosts(tmp_path_factory.mktemp("sshhosts"), hosts) as made:
        yield made


def _checks(result: dict[str, object]) -> dict[str, dict[str, object]]:
    return {check["id"]: check for check in result["checks"]}  # type: ignore[index,union-attr]


def test_ansible_preflight_gathers_every_reachable_host(
    ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.ini")
    case = tmp_path / "case"
    result = run_cli(
        "fleet", "run", "preflight", "--inventory", str(inventory), "--case", str(case),
        "--format", "json", "--", "--image-config", str(K3_CONFIG),
    )  # fmt: skip
    assert result.exit_code == 1, result.stderr  # a no-go and an unreachable host
    run = json.loads(result.stdout)
    hosts = {host["host"]: host for host in run["hosts"]}
    assert set(hosts) == {"gpu-r575", "gpu-r580-a", "gpu-r580-b", "gpu-down"}
    assert run["engine"] == "ansible" and run["counts"] == {"ok": 3, "failed": 0, "unreachable": 1}
    down = hosts["gpu-down"]
    assert down["state"] == "unreachable" and down["result"] is None
    assert "Connection refused" in down["error"] and "\n" not in down["error"]
    r575 = hosts["gpu-r575"]
    assert r575["state"] == "ok" and r575["go"] is False and r575["exit_code"] == 1
    driver = _checks(r575["result"])["driver"]
    assert driver["ok"] is False and "575.57.08" in driver["message"]
    for name in ("gpu-r580-a", "gpu-r580-b"):
        assert hosts[name]["state"] == "ok"
        check = _checks(hosts[name]["result"])["driver"]
        assert check["ok"] is True, check
    for name in ("gpu-r575", "gpu-r580-a", "gpu-r580-b"):
        (saved,) = hosts[name]["files"]
        assert saved.startswith("fleet/") and saved.endswith(f"/{name}/preflight.json")
        assert json.loads((case / saved).read_text()) == hosts[name]["result"]
    assert json.loads((case / "fleet-preflight.json").read_text())["hosts"] == run["hosts"]


def test_ansible_collect_fetches_each_bundle_into_the_case(
    ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    inventory = ssh_hosts.inventory(tmp_path / "hosts.ini")
    reachable = [host for host in ssh_hosts.hosts if host.driver is not None]
    run = fleet_run(
        FleetRunOptions(
            kind="collect",
            case=tmp_path / "case",
            inventory=inventory,
            arguments=("--timeout", "8"),
            timeout=300,
        )
    )
    hosts = {host.host: host for host in run.hosts}
    assert hosts["gpu-down"].state == "unreachable"
    for name, driver in (
        ("gpu-r575", "575.57.08"),
        ("gpu-r580-a", "580.105.08"),
        ("gpu-r580-b", "580.95.05"),
    ):
        host = hosts[name]
        assert host.state == "ok", host.error
        archives = [f for f in host.files if f.endswith(".tar.gz")]
        assert len(archives) == 1 and f"/{name}/bundle-" in archives[0]
        with tarfile.open(tmp_path / "case" / archives[0]) as archive:
            names = archive.getnames()
            xml = next(n for n in names if n.endswith("gpu/nvidia-smi-q.xml"))
            text = archive.extractfile(xml).read().decode()  # type: ignore[union-attr]
        assert f"<driver_version>{driver}</driver_version>" in text
        assert any(f.endswith(f"/{name}/collect.json") for f in host.files)
    # The hosts' work folders (made in each host's own TMPDIR) were removed after the fetch.
    for host in reachable:
        assert list(ssh_hosts.tmp_dir(host).glob("vllm-triage-fleet-*")) == [], host.name


def test_ansible_refusals(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no such inventory file"):
        fleet_run(FleetRunOptions(kind="preflight", case=tmp_path, inventory=tmp_path / "none"))
    with pytest.raises(InputError, match="sets --format itself"):
        fleet_run(
            FleetRunOptions(
                kind="preflight", case=tmp_path, inventory=tmp_path, arguments=("--format", "text")
            )
        )
    with pytest.raises(InputError, match="give --kube or --inventory"):
        fleet_run(FleetRunOptions(kind="collect", case=tmp_path))
    result = run_cli("fleet", "run", "validate", "--inventory", str(tmp_path))
    assert result.exit_code == 2 and "choose preflight or collect" in result.stderr


# --- Kubernetes Jobs --------------------------------------------------------------------------


def _envelope(kind: str, *arguments: str) -> str:
    """A real envelope, printed by fleet/remote.py on this machine."""
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "vllm_triage.fleet.remote",
            kind,
            "--inline-archive",
            "--",
            *arguments,
        ],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    return done.stdout


def test_job_manifests_load_into_the_client_models() -> None:
    run = JobRun(
        kind="collect",
        arguments=("--timeout", "20"),
        nodes=("gpu-node-7.dc1.example.com",),
        tool_image="registry.example/vllm-triage:0.1.0",
        namespace="ops",
    )
    manifest = job_manifest(run, "gpu-node-7.dc1.example.com")
    job = load_model(manifest)
    spec = job.spec.template.spec
    assert spec.node_name == "gpu-node-7.dc1.example.com" and spec.runtime_class_name == "nvidia"
    container = spec.containers[0]
    assert container.security_context.read_only_root_filesystem is True
    assert spec.security_context.run_as_non_root is True
    assert "nvidia.com/gpu" not in (container.resources.limits or {})
    assert container.args[:4] == ["-m", "vllm_triage.fleet.remote", "collect", "--inline-archive"]
    assert job.metadata.name == job_name("collect", "gpu-node-7.dc1.example.com")
    assert len(job.metadata.name) <= 63
    manifest["spec"]["template"]["spec"]["containers"][0]["resource"] = {}  # a typo
    with pytest.raises(
        InputError, match=r"does not know: spec.template.spec.containers\[0\].resource"
    ):
        load_model(manifest)
    manifest["spec"]["template"]["spec"]["containers"][0].pop("resource")
    manifest["spec"]["backoffLimit"] = "none"
    with pytest.raises(InputError, match="does not load into the client's model"):
        load_model(manifest)


@pytest.mark.slow
def test_kube_jobs_gather_logs_and_report_each_failure(tmp_path: Path) -> None:
    go = _envelope("preflight", "--image-config", str(K3_CONFIG), "--driver", "580.95.05", "--gpu", "NVIDIA B200", "--shm-size", "64g")  # fmt: skip
    no_go = _envelope("preflight", "--image-config", str(K3_CONFIG), "--driver", "575.57.08", "--gpu", "NVIDIA B200")  # fmt: skip
    replay = Replay(
        jobs_by_node={
            "node-a": JobScript(log="starting\n" + go),
            "node-b": JobScript(log=no_go),
            "node-c": JobScript(
                log="Traceback (most recent call last):\nModuleNotFoundError: No module named 'vllm_triage'\n",
                outcome="failed",
            ),
            "node-d": JobScript(log="", outcome="pending"),
        }
    )
    replay.existing_jobs.add(job_name("preflight", "node-e"))
    with replay:
        run = fleet_run(
            FleetRunOptions(
                kind="preflight",
                case=tmp_path / "case",
                kube=True,
                kubeconfig=replay.kubeconfig(tmp_path),
                nodes=("node-a", "node-b", "node-c", "node-d", "node-e"),
                tool_image="registry.example/vllm-triage:0.1.0",
                namespace="ops",
                arguments=("--image-config", "/etc/triage/image.json"),
                timeout=2,
                poll_seconds=0.2,
            )
        )
    hosts = {host.host: host for host in run.hosts}
    assert run.engine == "kubernetes"
    assert hosts["node-a"].state == "ok" and hosts["node-a"].go is True
    assert hosts["node-b"].state == "ok" and hosts["node-b"].go is False
    assert _checks(hosts["node-b"].result)["driver"]["ok"] is False  # type: ignore[arg-type]
    assert hosts["node-c"].state == "failed"
    assert "No module named 'vllm_triage'" in (hosts["node-c"].error or "")
    assert hosts["node-d"].state == "failed"
    assert "did not finish within 2 s (ImagePullBackOff" in (hosts["node-d"].error or "")
    assert "already exists" in (hosts["node-e"].error or "")
    # One Job per node, pinned to it, as generated; all deleted afterwards.
    created = replay.created_jobs
    assert {job["spec"]["template"]["spec"]["nodeName"] for job in created.values()} == {
        "node-a", "node-b", "node-c", "node-d"
    }  # fmt: skip
    args = next(iter(created.values()))["spec"]["template"]["spec"]["containers"][0]["args"]
    assert args[-4:] == ["--host-root", "/host", "--image-config", "/etc/triage/image.json"]
    assert sorted(replay.deleted_jobs) == sorted(created)
    assert (tmp_path / "case" / hosts["node-a"].files[0]).is_file()


@pytest.mark.slow
def test_kube_collect_brings_the_bundle_back_from_the_log(tmp_path: Path) -> None:
    envelope = _envelope("collect", "--timeout", "5")
    replay = Replay(jobs_by_node={"node-a": JobScript(log=envelope)})
    with replay:
        run = fleet_run(
            FleetRunOptions(
                kind="collect",
                case=tmp_path / "case",
                kube=True,
                kubeconfig=replay.kubeconfig(tmp_path),
                nodes=("node-a",),
                tool_image="registry.example/vllm-triage:0.1.0",
                poll_seconds=0.1,
            )
        )
    (host,) = run.hosts
    assert host.state == "ok", host.error
    bundle = next(f for f in host.files if f.endswith(".tar.gz"))
    with tarfile.open(tmp_path / "case" / bundle) as archive:
        assert any(name.endswith("manifest.json") for name in archive.getnames())


@pytest.mark.slow
def test_kube_forbidden_job_creation_is_one_line(tmp_path: Path) -> None:
    replay = Replay(forbid={"jobs"})
    with replay, pytest.raises(InputError) as caught:
        fleet_run(
            FleetRunOptions(
                kind="preflight",
                case=tmp_path,
                kube=True,
                kubeconfig=replay.kubeconfig(tmp_path),
                nodes=("node-a",),
                tool_image="registry.example/vllm-triage:0.1.0",
            )
        )
    message = str(caught.value)
    assert "forbidden (403)" in message and "cannot create resource" in message
    assert "\n" not in message


def _pipe(mark: Path) -> str:
    """A Jinja lookup that, if Ansible templated it on the controller, would create `mark`."""
    return "{{ lookup('pipe', 'touch " + str(mark) + "') }}"


@pytest.mark.slow
def test_ansible_never_templates_the_remote_arguments(ssh_hosts: SshHosts, tmp_path: Path) -> None:
    """Arguments after -- reach the host as the text given: no lookup runs on the controller
    (the hosts share its file system: none runs there either)."""
    inventory = ssh_hosts.inventory(tmp_path / "hosts.ini")
    mark = tmp_path / "templated-argument"
    result = run_cli(
        "fleet", "run", "preflight", "--inventory", str(inventory), "--limit", "gpu-r580-a",
        "--case", str(tmp_path / "case"), "--format", "json", "--", "--image", _pipe(mark),
    )  # fmt: skip
    run = json.loads(result.stdout)
    assert [host["host"] for host in run["hosts"]] == ["gpu-r580-a"]
    assert run["arguments"] == ["--image", _pipe(mark)]
    assert run["hosts"][0]["exit_code"] is not None  # the command ran on the host
    assert not mark.exists()


def test_a_templated_limit_is_refused_before_ansible(tmp_path: Path) -> None:
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("node1 ansible_host=127.0.0.1\n")
    mark = tmp_path / "templated-limit"
    for limit in (f"node1{_pipe(mark)}", "@/etc/passwd", "node1 node2"):
        result = run_cli(
            "fleet", "run", "preflight", "--inventory", str(inventory), "--limit", limit,
            "--case", str(tmp_path / "case"),
        )  # fmt: skip
        assert result.exit_code == 2, result.stderr
        assert "--limit" in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert not mark.exists()


@pytest.mark.parametrize(
    "inventory_text",
    [
        'node1 ansible_host=127.0.0.1 vllm_triage_python="{pipe}"\n',
        '[gpu]\nnode1 ansible_host=127.0.0.1\n[gpu:vars]\nnote="{pipe}"\n',
        "node1{pipe_compact} ansible_host=127.0.0.1\n",
    ],
    ids=["host-var", "group-var", "host-name"],
)
def test_a_templated_inventory_is_refused_before_ansible(
    tmp_path: Path, inventory_text: str
) -> None:
    mark = tmp_path / "templated-inventory"
    compact = "{{lookup('pipe','touch " + str(mark) + "')}}"
    inventory = tmp_path / "hosts.ini"
    inventory.write_text(inventory_text.format(pipe=_pipe(mark), pipe_compact=compact))
    result = run_cli(
        "fleet", "run", "preflight", "--inventory", str(inventory), "--case", str(tmp_path / "c")
    )
    assert result.exit_code == 2 and "Jinja template" in result.stderr, result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    assert not mark.exists()


def test_templated_group_vars_beside_the_inventory_are_refused(tmp_path: Path) -> None:
    mark = tmp_path / "templated-group-vars"
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu]\nnode1 ansible_host=127.0.0.1\n")
    (tmp_path / "group_vars").mkdir()
    (tmp_path / "group_vars" / "gpu.yml").write_text(f'ansible_user: "{_pipe(mark)}"\n')
    result = run_cli("fleet", "run", "preflight", "--inventory", str(inventory))
    assert result.exit_code == 2 and "group_vars" in result.stderr and "Jinja" in result.stderr
    assert not mark.exists()


@pytest.mark.slow
def test_hosts_named_dot_dot_and_alike_stay_in_their_own_folders(
    ssh_hosts: SshHosts, tmp_path: Path
) -> None:
    """A host named `..` (and one whose safe name would be another's) gets a folder of its own
    inside the run's folder: nothing lands one level up, nothing is overwritten."""
    inventory = ssh_hosts.inventory(tmp_path / "hosts.ini")
    text = inventory.read_text()
    for old, new in (("gpu-r580-a ", ".. "), ("gpu-r580-b ", "gpu-r575_ ")):
        text = text.replace(old, new)
    inventory.write_text(text.replace("gpu-down ", "# gpu-down "))
    case = tmp_path / "case"
    run = fleet_run(
        FleetRunOptions(
            kind="preflight",
            case=case,
            inventory=inventory,
            arguments=("--image-config", str(K3_CONFIG)),
            timeout=300,
        )
    )
    hosts = {host.host: host for host in run.hosts}
    assert set(hosts) == {"..", "gpu-r575", "gpu-r575_"}
    (runs,) = (case / "fleet").iterdir()
    files = [file for host in run.hosts for file in host.files]
    assert len(files) == 3 and len({Path(file).parent for file in files}) == 3
    for host in run.hosts:
        assert host.state == "ok", host.error
        (saved,) = host.files
        path = (case / saved).resolve()
        assert path.parent.parent == runs.resolve()
        assert json.loads(path.read_text()) == host.result
    assert sorted(p.name for p in runs.iterdir()) == sorted(Path(f).parent.name for f in files)
