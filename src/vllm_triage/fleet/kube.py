"""The Kubernetes API through the official Python client (`kubernetes`): nodes and pods listed
page by page (`limit` / `continue`), read as raw JSON (orjson into plain dicts: deserialising
10,000 nodes into the client's models would cost more than the whole scan), and every API error
as one line.

A continue token that expired while the list was read (410 Gone, reason Expired) restarts the
list once from the beginning, so the scan sees one consistent snapshot; a second expiry is an
error that says what to do.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_triage.errors import InputError
from vllm_triage.fleet.stream import parse_large_json
from vllm_triage.safejson import parse_json

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

DEFAULT_PAGE_SIZE = 500
REQUEST_TIMEOUT = (10.0, 60.0)  # connect, read: seconds
MAX_PAGE_BYTES = 256 * 1024**2
_MAX_PAGES = 10_000


class KubeError(InputError):
    """The API server refused or could not be reached; one line."""


@dataclass(frozen=True)
class KubeTarget:
    """Which cluster: a kubeconfig (default: $KUBECONFIG, else ~/.kube/config, else the pod's
    service account when running in a cluster) and a context in it."""

    kubeconfig: Path | None = None
    context: str | None = None


def api_client(target: KubeTarget) -> ApiClient:
    """A client for the target cluster (the global client configuration is left alone)."""
    try:
        from kubernetes import client
        from kubernetes import config as kube_config
    except ImportError:  # pragma: no cover - a dependency; a broken install says so
        raise KubeError(
            "the Kubernetes Python client is not installed (pip install kubernetes)"
        ) from None
    kubeconfig = target.kubeconfig or (
        Path(os.environ["KUBECONFIG"].split(os.pathsep)[0])
        if os.environ.get("KUBECONFIG")
        else None
    )
    default = Path("~/.kube/config").expanduser()
    config: Any = kube_config  # untyped functions
    try:
        if kubeconfig is not None or target.context is not None or default.exists():
            made: ApiClient = config.new_client_from_config(
                config_file=str(kubeconfig) if kubeconfig else None, context=target.context
            )
            return made
        configuration = client.Configuration()
        try:
            config.load_incluster_config(client_configuration=configuration)
        except kube_config.ConfigException:
            raise KubeError(
                "Kubernetes: no kubeconfig ($KUBECONFIG, ~/.kube/config, --kubeconfig) and not "
                "running in a pod with a service account"
            ) from None
        return client.ApiClient(configuration)
    except KubeError:
        raise
    except kube_config.ConfigException as exc:
        raise KubeError(f"Kubernetes configuration: {_one_line(str(exc))}") from None
    except FileNotFoundError as exc:
        raise KubeError(f"kubeconfig {exc.filename}: no such file") from None
    except Exception as exc:  # a malformed kubeconfig raises what its parser raises
        raise KubeError(
            f"Kubernetes configuration: {type(exc).__name__}: {_one_line(str(exc))}"
        ) from None


def _one_line(text: str) -> str:
    return " ".join(text.split())[:300]


def status_message(body: Any) -> str:
    """The `message` of a Kubernetes Status body (or the body's first line)."""
    if not body:
        return ""
    text = body.decode("utf-8", "replace") if isinstance(body, bytes) else str(body)
    try:
        document = parse_json(text, "a Status", max_bytes=1024**2)
    except InputError:
        return _one_line(text)
    if isinstance(document, dict) and isinstance(document.get("message"), str):
        return _one_line(document["message"])
    return _one_line(text)


def api_error(exc: Exception, what: str, hint: str = "") -> KubeError:
    """An ApiException or a connection failure as one line."""
    status = getattr(exc, "status", None)
    if isinstance(status, int) and status:
        message = status_message(getattr(exc, "body", None)) or str(getattr(exc, "reason", ""))
        if status == 401:
            return KubeError(f"{what}: unauthorized (401): the credentials were refused")
        if status == 403:
            return KubeError(f"{what}: forbidden (403): {message}{hint}")
        return KubeError(f"{what}: HTTP {status}: {message}")
    reason = getattr(exc, "reason", None) or exc
    return KubeError(f"{what}: cannot reach the API server ({_one_line(str(reason))})")


def list_all(
    call: Callable[..., Any], what: str, page_size: int, hint: str = "", **query: Any
) -> list[Any]:
    """Every item of a list call, page by page; one restart when the continue token expires."""
    from kubernetes.client.exceptions import ApiException

    items: list[Any] = []
    token: str | None = None
    restarted = False
    pages = 0
    while True:
        try:
            response = call(
                limit=page_size,
                _continue=token,
                _preload_content=False,
                _request_timeout=REQUEST_TIMEOUT,
                **query,
            )
            data = response.data
        except ApiException as exc:
            if exc.status == 410 and token is not None:
                if restarted:
                    raise KubeError(
                        f"{what}: the list's continue token expired twice while it was read (410 "
                        f"Gone: {status_message(exc.body)}); run again, or give a larger "
                        "--page-size so the list takes fewer requests"
                    ) from None
                restarted, token, items, pages = True, None, [], 0
                continue
            raise api_error(exc, what, hint) from None
        except Exception as exc:  # urllib3: connection refused, timeout, TLS
            raise api_error(exc, what) from None
        if len(data) > MAX_PAGE_BYTES:
            raise KubeError(f"{what}: a page larger than {MAX_PAGE_BYTES // 1024**2} MiB")
        document = parse_large_json(data, what)
        if not isinstance(document, dict) or not isinstance(document.get("items"), list):
            raise KubeError(f"{what}: the API server's answer is not a list")
        items.extend(document["items"])
        metadata = document.get("metadata")
        token = metadata.get("continue") if isinstance(metadata, dict) else None
        pages += 1
        if not token:
            return items
        if pages >= _MAX_PAGES:
            raise KubeError(f"{what}: more than {_MAX_PAGES} pages; give a larger --page-size")


def list_nodes(
    client: ApiClient, selector: str | None, page_size: int = DEFAULT_PAGE_SIZE
) -> list[Any]:
    """Every node (matching the label selector), as plain dicts."""
    from kubernetes.client import CoreV1Api

    query = {"label_selector": selector} if selector else {}
    return list_all(
        CoreV1Api(client).list_node,
        "Kubernetes nodes",
        page_size,
        "; the account needs `list` on nodes (a ClusterRole)",
        **query,
    )


def list_running_pods(client: ApiClient, page_size: int = DEFAULT_PAGE_SIZE) -> list[Any]:
    """Every running pod of the cluster, as plain dicts (for the GPU work on each node)."""
    from kubernetes.client import CoreV1Api

    return list_all(
        CoreV1Api(client).list_pod_for_all_namespaces,
        "Kubernetes pods",
        page_size,
        "; the account needs `list` on pods in all namespaces",
        field_selector="status.phase=Running",
    )
