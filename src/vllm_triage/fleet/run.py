"""The library behind `fleet run preflight|collect`: the tool run on many hosts through the engine
the team already has (Kubernetes Jobs, or Ansible without Kubernetes), each host's result
gathered into the case:

    fleet/<UTC>/<host>/preflight.json         preflight's JSON
    fleet/<UTC>/<host>/bundle-<UTC>.tar.gz    collect's bundle (and collect.json, its manifest)

A host that cannot be reached or whose command fails is reported with its reason; the others'
results stand (the run fails only when no host ran at all).
"""

from __future__ import annotations

import base64
import binascii
import json
import os
import re
import shutil
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

from vllm_triage.case import stamp
from vllm_triage.errors import InputError
from vllm_triage.fleet.envelope import HostOutcome
from vllm_triage.fleet.models import FleetRun
from vllm_triage.fleet.names import host_folders
from vllm_triage.inputs import display_name

Kind = Literal["preflight", "collect"]
FLEET_FOLDER = "fleet"
# Arguments fleet run sets itself (the remote side adds them): refused when given.
_OWN_ARGUMENTS = ("--format", "--case")


@dataclass(frozen=True)
class FleetRunOptions:
    """What to run (preflight or collect, with the remote command's own arguments), where
    (an Ansible inventory, or Kubernetes nodes), and the case the results go into."""

    kind: Kind
    case: Path
    arguments: tuple[str, ...] = ()
    inventory: Path | None = None
    limit: str | None = None
    forks: int = 10
    kube: bool = False
    kubeconfig: Path | None = None
    context: str | None = None
    selector: str | None = None
    nodes: tuple[str, ...] = ()
    namespace: str = "default"
    tool_image: str | None = None
    runtime_class: str | None = "nvidia"
    service_account: str | None = None
    keep_jobs: bool = False
    timeout: float = 900.0
    remote_timeout: float = 600.0
    poll_seconds: float = 2.0


def _check(options: FleetRunOptions) -> None:
    if options.kind not in ("preflight", "collect"):
        raise InputError(f"fleet run: choose preflight or collect, not {options.kind!r}")
    if options.kube == (options.inventory is not None):
        raise InputError("fleet run: give --kube or --inventory FILE (one of them)")
    for argument in options.arguments:
        if argument.split("=", 1)[0] in _OWN_ARGUMENTS:
            raise InputError(f"fleet run sets {argument.split('=', 1)[0]} itself; leave it out")
    if options.kube and not options.tool_image:
        raise InputError("fleet run --kube needs --tool-image (the vllm-triage image to run)")
    if options.kube and not (options.nodes or options.selector):
        raise InputError("fleet run --kube: choose the nodes with --node NAME or --selector")
    if options.timeout <= 0 or options.remote_timeout <= 0:
        raise InputError("fleet run: timeouts must be positive")


def _write(path: Path, data: bytes) -> None:
    """Write a file atomically (a temporary file beside it, then a rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(handle, "wb") as stream:
            stream.write(data)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


_BUNDLE_NAME = re.compile(r"bundle-[0-9A-Za-z]+\.tar\.gz")


def _bundle_name(name: str) -> str:
    """A bundle's file name from a host (its own choice) as one of ours."""
    name = Path(name).name
    return name if _BUNDLE_NAME.fullmatch(name) else "bundle.tar.gz"


def _keep(outcome: HostOutcome, kind: str, target: Path, case: Path) -> list[str]:
    """Write the host's result into its folder of the case (fetched files are moved there
    from the staging folder); the files, relative to the case."""
    files: list[Path] = []
    if outcome.result is not None:
        path = target / f"{kind}.json"
        _write(path, (json.dumps(outcome.result, indent=2) + "\n").encode())
        files.append(path)
    if outcome.archive_base64:
        try:
            data = base64.b64decode(outcome.archive_base64, validate=True)
        except (binascii.Error, ValueError):
            outcome.state, outcome.error = "failed", "the bundle in the pod's log is not base64"
        else:
            path = target / _bundle_name(outcome.archive or "")
            _write(path, data)
            files.append(path)
        outcome.archive_base64 = None
    for fetched in outcome.fetched:
        if fetched.is_file() and not fetched.is_symlink():
            target.mkdir(parents=True, exist_ok=True)
            path = target / _bundle_name(fetched.name)
            os.replace(fetched, path)
            files.append(path)
    return [
        display_name(path.relative_to(case) if path.is_relative_to(case) else path)
        for path in files
    ]


def fleet_run(options: FleetRunOptions) -> FleetRun:
    """Run the command on every selected host; the run's artifact (files already in the case)."""
    _check(options)
    moment = datetime.now(UTC)
    case = options.case
    folder = case / FLEET_FOLDER / stamp(moment)
    if options.kube:
        outcomes, notes = _kube(options)
        engine: Literal["ansible", "kubernetes"] = "kubernetes"
    else:
        from vllm_triage.fleet.ansible import AnsibleRun, run_ansible

        assert options.inventory is not None
        folder.mkdir(parents=True, exist_ok=True)
        outcomes, notes = run_ansible(
            AnsibleRun(
                kind=options.kind,
                arguments=options.arguments,
                inventory=options.inventory,
                fetch_into=folder.resolve(),
                limit=options.limit,
                forks=options.forks,
                timeout=options.timeout,
                remote_timeout=options.remote_timeout,
            )
        )
        engine = "ansible"
    root = case.resolve()
    hosts = []
    folders = host_folders(outcome.host for outcome in outcomes)
    for outcome in sorted(outcomes, key=lambda o: o.host):
        target = folder.resolve() / folders[outcome.host]
        files = _keep(outcome, options.kind, target, root)
        hosts.append(outcome.artifact(files))
    if not options.kube:
        from vllm_triage.fleet.ansible import STAGING_FOLDER

        shutil.rmtree(folder / STAGING_FOLDER, ignore_errors=True)
    counted = Counter(host.state for host in hosts)
    run = FleetRun(
        kind=options.kind,
        engine=engine,
        arguments=list(options.arguments),
        hosts=hosts,
        counts={state: counted.get(state, 0) for state in ("ok", "failed", "unreachable")},
        notes=notes,
    )
    return run.stamped()


def _kube(options: FleetRunOptions) -> tuple[list[HostOutcome], list[str]]:
    from vllm_triage.fleet.jobs import JobRun, run_jobs
    from vllm_triage.fleet.kube import KubeTarget, api_client, node_items
    from vllm_triage.fleet.sources import Restart

    client = api_client(KubeTarget(options.kubeconfig, options.context))
    with client:
        nodes = list(options.nodes)
        if options.selector:
            for item in node_items(client, options.selector):
                if item is Restart.LIST:  # the list began again: only what it says now
                    nodes = list(options.nodes)
                    continue
                name = (item.get("metadata") or {}).get("name") if isinstance(item, dict) else None
                if isinstance(name, str) and name not in nodes:
                    nodes.append(name)
        if not nodes:
            raise InputError(f"no node matches the selector {options.selector!r}")
        assert options.tool_image is not None
        return run_jobs(
            client,
            JobRun(
                kind=options.kind,
                arguments=options.arguments,
                nodes=tuple(nodes),
                tool_image=options.tool_image,
                namespace=options.namespace,
                runtime_class=options.runtime_class,
                service_account=options.service_account,
                timeout=options.timeout,
                poll_seconds=options.poll_seconds,
                keep_jobs=options.keep_jobs,
                remote_timeout=options.remote_timeout,
            ),
        )
