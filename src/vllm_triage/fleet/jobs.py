"""`fleet run` on Kubernetes: one Job per selected node, from the tool's own image.

Each Job is pinned to its node (`nodeName`, tolerating every taint: GPU nodes are usually
tainted), runs as a non-root user with a read-only root file system, mounts the host's `/`
read-only at /host (collect and preflight read the host's files there), and asks for no GPU:
with the NVIDIA runtime class and NVIDIA_VISIBLE_DEVICES=all the runtime mounts nvidia-smi and
NVML without taking a GPU from the node's workloads. The container runs
`python -m vllm_triage.fleet.remote KIND --inline-archive -- ARGS` and its one JSON line is read
back from the pod's log (a bundle travels in it as base64: a pod's files are gone when it ends).

Manifests are generated as data and loaded into the Kubernetes client's models before anything
is sent: a field the models do not know, or a value of the wrong type, is an error here.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from vllm_triage.errors import InputError
from vllm_triage.fleet.envelope import HostOutcome, envelope_from_text
from vllm_triage.fleet.kube import KubeError, api_error, status_message
from vllm_triage.fleet.stream import parse_large_json

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

TOOL_UID = 10001  # the user of deploy/Dockerfile's image
MAX_LOG_BYTES = 32 * 1024**2
REQUEST_TIMEOUT = (10.0, 60.0)
_NAME = re.compile(r"[^a-z0-9-]+")


@dataclass(frozen=True)
class JobRun:
    """The Jobs to run: the kind and its arguments, the nodes, and where and as what."""

    kind: str
    arguments: tuple[str, ...]
    nodes: tuple[str, ...]
    tool_image: str
    namespace: str = "default"
    runtime_class: str | None = "nvidia"
    service_account: str | None = None
    timeout: float = 900.0
    poll_seconds: float = 2.0
    keep_jobs: bool = False
    remote_timeout: float = 600.0


def job_name(kind: str, node: str) -> str:
    """A DNS-1123 name per (kind, node): readable, unique through a hash of the node's name."""
    digest = hashlib.sha256(node.encode()).hexdigest()[:8]
    stem = _NAME.sub("-", node.lower()).strip("-")[:30].strip("-")
    return f"vllm-triage-{kind}-{stem}-{digest}".replace("--", "-")[:63].strip("-")


def job_manifest(run: JobRun, node: str) -> dict[str, Any]:
    """The Job for one node, as the API takes it."""
    name = job_name(run.kind, node)
    labels = {
        "app.kubernetes.io/name": "vllm-triage",
        "app.kubernetes.io/component": f"fleet-{run.kind}",
    }
    args = [
        "-m",
        "vllm_triage.fleet.remote",
        run.kind,
        "--inline-archive",
        "--timeout",
        f"{run.remote_timeout:g}",
        "--",
        "--host-root",
        "/host",
        *run.arguments,
    ]
    pod_spec: dict[str, Any] = {
        "nodeName": node,
        "restartPolicy": "Never",
        "tolerations": [{"operator": "Exists"}],
        "automountServiceAccountToken": False,
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": TOOL_UID,
            "runAsGroup": TOOL_UID,
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "containers": [
            {
                "name": "vllm-triage",
                "image": run.tool_image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["python"],
                "args": args,
                "env": [
                    {"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"},
                    {"name": "NVIDIA_DRIVER_CAPABILITIES", "value": "utility"},
                    {"name": "HOME", "value": "/tmp"},
                ],
                "resources": {
                    "requests": {"cpu": "100m", "memory": "256Mi"},
                    "limits": {"cpu": "1", "memory": "1Gi"},
                },
                "securityContext": {
                    "allowPrivilegeEscalation": False,
                    "readOnlyRootFilesystem": True,
                    "capabilities": {"drop": ["ALL"]},
                },
                "volumeMounts": [
                    {"name": "host", "mountPath": "/host", "readOnly": True},
                    {"name": "tmp", "mountPath": "/tmp"},
                ],
            }
        ],
        "volumes": [
            {"name": "host", "hostPath": {"path": "/", "type": "Directory"}},
            {"name": "tmp", "emptyDir": {"sizeLimit": "1Gi"}},
        ],
    }
    if run.runtime_class:
        pod_spec["runtimeClassName"] = run.runtime_class
    if run.service_account:
        pod_spec["serviceAccountName"] = run.service_account
        pod_spec["automountServiceAccountToken"] = True
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": run.namespace,
            "labels": {**labels, "vllm-triage/node-hash": name.rsplit("-", 1)[-1]},
            "annotations": {"vllm-triage/node": node},
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": int(run.remote_timeout) + 300,
            "ttlSecondsAfterFinished": 3600,
            "template": {"metadata": {"labels": labels}, "spec": pod_spec},
        },
    }


def load_model(manifest: dict[str, Any], model: str = "V1Job") -> Any:
    """The manifest loaded into the Kubernetes client's model; InputError when a field is
    unknown to the model (it would be dropped silently) or a value does not validate."""
    from kubernetes import client

    api: Any = client.ApiClient()  # untyped, and its deserialize changed between releases
    kind = getattr(client, model)
    name = (manifest.get("metadata") or {}).get("name", "?")
    try:
        if hasattr(kind, "from_dict"):  # kubernetes >= 36: pydantic models
            loaded = kind.from_dict(manifest)
        else:  # earlier releases: the generated deserializer

            class _Response:
                data = json.dumps(manifest)

            loaded = api.deserialize(_Response(), model)
    except Exception as exc:
        first = " ".join(str(exc).split())[:300]
        raise InputError(
            f"{model} {name}: does not load into the client's model: {first}"
        ) from None
    again = api.sanitize_for_serialization(loaded)
    if again != manifest:
        raise InputError(
            f"{model} {name}: fields the client's model does not know: {_difference(manifest, again)}"
        )
    return loaded


def _difference(given: Any, loaded: Any, path: str = "") -> str:
    """The first place where the manifest and its loaded model differ."""
    if isinstance(given, dict) and isinstance(loaded, dict):
        for key in given:
            if key not in loaded:
                return f"{path}.{key}".lstrip(".")
            found = _difference(given[key], loaded[key], f"{path}.{key}")
            if found:
                return found
        return ""
    if isinstance(given, list) and isinstance(loaded, list):
        for index, (a, b) in enumerate(zip(given, loaded, strict=False)):
            found = _difference(a, b, f"{path}[{index}]")
            if found:
                return found
        return ""
    return "" if given == loaded else path.lstrip(".") or "document"


def _json(response: Any, what: str) -> Any:
    data = response.data
    if len(data) > MAX_LOG_BYTES:
        raise KubeError(f"{what}: answer larger than {MAX_LOG_BYTES // 1024**2} MiB")
    return parse_large_json(data, what)


def _job_done(job: Any) -> bool | None:
    """True succeeded, False failed, None still running."""
    status = job.get("status") if isinstance(job, dict) else None
    if not isinstance(status, dict):
        return None
    for condition in status.get("conditions") or []:
        if isinstance(condition, dict) and condition.get("status") == "True":
            if condition.get("type") == "Complete":
                return True
            if condition.get("type") == "Failed":
                return False
    if status.get("succeeded"):
        return True
    if status.get("failed"):
        return False
    return None


def _waiting_reason(pod: Any) -> str | None:
    """Why a pod has not run: Pending's reason, a container's waiting reason (ImagePullBackOff)."""
    status = pod.get("status") if isinstance(pod, dict) else None
    if not isinstance(status, dict):
        return None
    for container in status.get("containerStatuses") or []:
        state = container.get("state") if isinstance(container, dict) else None
        waiting = state.get("waiting") if isinstance(state, dict) else None
        if isinstance(waiting, dict) and waiting.get("reason"):
            message = waiting.get("message") or ""
            return f"{waiting['reason']}" + (f": {message}" if message else "")
    phase = status.get("phase")
    reason = status.get("reason") or status.get("message")
    return f"{phase}" + (f" ({reason})" if reason else "") if phase else None


class _Jobs:
    """The API calls of one run (raw JSON everywhere: no model deserialisation)."""

    def __init__(self, api_client: ApiClient, namespace: str) -> None:
        from kubernetes.client import BatchV1Api, CoreV1Api

        self.batch = BatchV1Api(api_client)
        self.core = CoreV1Api(api_client)
        self.namespace = namespace

    def create(self, body: Any) -> None:
        self.batch.create_namespaced_job(
            self.namespace, body, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )

    def status(self, name: str) -> Any:
        response = self.batch.read_namespaced_job_status(
            name, self.namespace, _preload_content=False, _request_timeout=REQUEST_TIMEOUT
        )
        return _json(response, f"job {name}")

    def pods(self, name: str) -> list[Any]:
        response = self.core.list_namespaced_pod(
            self.namespace,
            label_selector=f"job-name={name}",
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        document = _json(response, f"pods of job {name}")
        items = document.get("items") if isinstance(document, dict) else None
        return items if isinstance(items, list) else []

    def log(self, pod: str) -> str:
        response: Any = self.core.read_namespaced_pod_log(
            pod,
            self.namespace,
            limit_bytes=MAX_LOG_BYTES,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        return bytes(response.data[:MAX_LOG_BYTES]).decode("utf-8", "replace")

    def delete(self, name: str) -> None:
        self.batch.delete_namespaced_job(
            name,
            self.namespace,
            propagation_policy="Background",
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )


def run_jobs(api_client: ApiClient, run: JobRun) -> tuple[list[HostOutcome], list[str]]:
    """Create the Jobs, wait for them (at most run.timeout), read each pod's log, clean up."""
    from kubernetes.client.exceptions import ApiException

    if not run.nodes:
        raise InputError("no node selected: give --node NAME or --selector")
    manifests = {node: job_manifest(run, node) for node in run.nodes}
    bodies = {node: load_model(manifest) for node, manifest in manifests.items()}
    jobs = _Jobs(api_client, run.namespace)
    outcomes = {node: HostOutcome(host=node) for node in run.nodes}
    created: dict[str, str] = {}
    notes: list[str] = []
    try:
        for node, body in bodies.items():
            name = manifests[node]["metadata"]["name"]
            try:
                jobs.create(body)
            except ApiException as exc:
                if exc.status == 409:
                    outcomes[node].error = (
                        f"job {name} already exists in {run.namespace} (an earlier run): "
                        f"kubectl delete job -n {run.namespace} {name}"
                    )
                    continue
                raise api_error(
                    exc, f"creating job {name}", "; the account needs `create` on jobs"
                ) from None
            except Exception as exc:
                raise api_error(exc, f"creating job {name}") from None
            created[node] = name
        _wait(jobs, run, created, outcomes)
    finally:
        if not run.keep_jobs:
            for name in created.values():
                try:
                    jobs.delete(name)
                except Exception as exc:  # the run's results stand; say what was left
                    notes.append(
                        f"job {name} was not deleted ({type(exc).__name__}); its TTL removes it"
                    )
    return list(outcomes.values()), notes


def _wait(
    jobs: _Jobs, run: JobRun, created: dict[str, str], outcomes: dict[str, HostOutcome]
) -> None:
    """Poll the Jobs until each has ended or the run's time is up; read the ended ones' logs."""
    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + run.timeout
    pending = dict(created)
    while pending:
        for node, name in list(pending.items()):
            try:
                done = _job_done(jobs.status(name))
            except ApiException as exc:
                outcomes[node].error = f"job {name}: {exc.status} {status_message(exc.body)}"
                del pending[node]
                continue
            if done is None:
                continue
            del pending[node]
            _gather(jobs, name, done, outcomes[node])
        if not pending:
            return
        if time.monotonic() >= deadline:
            for node, name in pending.items():
                pods = jobs.pods(name)
                why = _waiting_reason(pods[0]) if pods else "no pod yet"
                outcomes[node].error = f"job {name} did not finish within {run.timeout:g} s ({why})"
            return
        time.sleep(run.poll_seconds)


def _gather(jobs: _Jobs, name: str, succeeded: bool, outcome: HostOutcome) -> None:
    """The envelope from the job's pod log."""
    pods = jobs.pods(name)
    if not pods:
        outcome.error = f"job {name} {'succeeded' if succeeded else 'failed'} but has no pod"
        return
    pod = pods[-1]
    pod_name = (pod.get("metadata") or {}).get("name") if isinstance(pod, dict) else None
    if not isinstance(pod_name, str):
        outcome.error = f"job {name}: its pod has no name"
        return
    try:
        text = jobs.log(pod_name)
    except Exception as exc:
        reason = _waiting_reason(pod)
        outcome.error = f"pod {pod_name}: log not readable ({api_error(exc, 'log')})" + (
            f"; {reason}" if reason else ""
        )
        return
    envelope = envelope_from_text(text, f"pod {pod_name} log")
    outcome.apply(envelope)
    if envelope is None:
        lines = [line for line in text.splitlines() if line.strip()]
        last = lines[-1].strip()[:300] if lines else _waiting_reason(pod) or "empty log"
        outcome.error = f"pod {pod_name} printed no vllm-triage result: {last}"
