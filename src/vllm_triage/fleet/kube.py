"""The Kubernetes API through the official Python client (`kubernetes`): nodes and pods listed
page by page (`limit` / `continue`), each answer's body parsed as it arrives (fleet/stream.py,
the code that reads a `--nodes` file, into plain dicts: deserialising 10,000 nodes into the
client's models would cost more than the whole scan), and every API error as one line.

A list is held to what a file is: its bytes capped (every page together), its nodes capped, and
the whole list read by one deadline, so that an API server answering a million nodes in one
page, or trickling its answer, costs the memory and the time of a `--nodes` file.

A continue token that expired while the list was read (410 Gone, reason Expired) restarts the
list once from the beginning, so the scan sees one consistent snapshot (a Restart marker tells
the consumer to drop what it had); a second expiry is an error that says what to do.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from vllm_triage.errors import InputError
from vllm_triage.fleet.errors import FleetInputError
from vllm_triage.fleet.labels import NodeFacts, node_facts
from vllm_triage.fleet.sources import (
    MAX_NODE_LIST_BYTES,
    MAX_POD_LIST_BYTES,
    Nodes,
    Restart,
    check_node_count,
    count_pod,
)
from vllm_triage.fleet.stream import ListFile, stream_page
from vllm_triage.safejson import parse_json

if TYPE_CHECKING:
    from kubernetes.client import ApiClient

DEFAULT_PAGE_SIZE = 500
REQUEST_TIMEOUT = (10.0, 60.0)  # connect, read: seconds, each clamped to the list's time left
# One list, every page of it: 512 MiB (the node list's cap) at under 1 MB/s, and the scan's own
# work on it (a million nodes classified in about 10 s).
LIST_DEADLINE_S = 600.0
_MAX_PAGES = 10_000
NODES = "Kubernetes nodes"
PODS = "Kubernetes pods"


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


def stream_list(
    call: Callable[..., Any],
    what: str,
    page_size: int,
    cap: int,
    hint: str = "",
    deadline_s: float = LIST_DEADLINE_S,
    **query: Any,
) -> Iterator[Any]:
    """Every item of a list call as its pages' bodies are read (never a page held whole), the
    bytes of all pages capped and the whole list read within `deadline_s`; Restart.LIST when
    the continue token expired and the list begins again (once)."""
    from kubernetes.client.exceptions import ApiException

    deadline = time.monotonic() + deadline_s
    found = ListFile(what)
    token: str | None = None
    restarted = False
    pages = 0
    with _Watchdog(deadline) as watchdog:
        while True:
            try:
                response = call(
                    limit=page_size,
                    _continue=token,
                    _preload_content=False,
                    _request_timeout=_request_timeout(deadline, what, deadline_s),
                    **query,
                )
            except ApiException as exc:
                if exc.status != 410 or token is None:
                    raise api_error(exc, what, hint) from None
                if restarted:
                    raise _expired_twice(exc, what) from None
                restarted, token, pages, found = True, None, 0, ListFile(what)
                yield Restart.LIST
                continue
            except KubeError:
                raise
            except Exception as exc:  # urllib3: connection refused, timeout, TLS
                raise _failed(exc, what, deadline, deadline_s) from None
            before = found.count
            with watchdog.reading(response):
                try:
                    yield from stream_page(response, found, cap)
                except FleetInputError:
                    if time.monotonic() >= deadline:  # the answer was cut off at the deadline
                        raise _late(what, deadline_s) from None
                    raise
                except Exception as exc:  # urllib3: the connection broke, or was shut
                    raise _failed(exc, what, deadline, deadline_s) from None
            if time.monotonic() >= deadline:
                raise _late(what, deadline_s)
            if found.count == before and not _empty_list(found.whole):
                raise KubeError(f"{what}: the API server's answer is not a list")
            token, pages = _continue_token(found.metadata), pages + 1
            if token is None:
                return
            if pages >= _MAX_PAGES:
                raise KubeError(f"{what}: more than {_MAX_PAGES} pages; give a larger --page-size")


def _expired_twice(exc: Any, what: str) -> KubeError:
    return KubeError(
        f"{what}: the list's continue token expired twice while it was read (410 Gone: "
        f"{status_message(exc.body)}); run again, or give a larger --page-size so the list "
        "takes fewer requests"
    )


def _continue_token(metadata: Any) -> str | None:
    """A page's continue token: None on the last page."""
    token = metadata.get("continue") if isinstance(metadata, dict) else None
    return token if isinstance(token, str) and token else None


def _empty_list(document: Any) -> bool:
    """A page without items that is still a list (a selector that matches nothing)."""
    return isinstance(document, dict) and "items" in document and document["items"] in ([], None)


def _request_timeout(deadline: float, what: str, deadline_s: float) -> tuple[float, float]:
    """The connect and read timeouts of the next request, none past the list's deadline."""
    left = deadline - time.monotonic()
    if left <= 0:
        raise _late(what, deadline_s)
    return min(REQUEST_TIMEOUT[0], left), min(REQUEST_TIMEOUT[1], left)


def _late(what: str, deadline_s: float) -> KubeError:
    return KubeError(
        f"{what}: the list was not read within {deadline_s:g} s (the API server is slow or stalled)"
    )


def _failed(exc: Exception, what: str, deadline: float, deadline_s: float) -> KubeError:
    """A request or a read that failed: past the deadline, because the deadline cut it off."""
    if time.monotonic() >= deadline:
        return _late(what, deadline_s)
    return api_error(exc, what)


class _Watchdog:
    """Shuts the socket of the answer being read when the list's deadline passes: a read timeout
    bounds each read, not the whole, so a server that trickles would otherwise keep the scan."""

    def __init__(self, deadline: float) -> None:
        self.lock = threading.Lock()
        self.response: Any = None
        self.fired = False
        self.timer = threading.Timer(max(0.0, deadline - time.monotonic()), self._fire)
        self.timer.daemon = True

    def __enter__(self) -> _Watchdog:
        self.timer.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.timer.cancel()

    def _fire(self) -> None:
        with self.lock:
            self.fired = True
            self._shut()

    def _shut(self) -> None:
        if self.response is not None:
            # Released or closed meanwhile (the read ended by itself): nothing left to stop.
            with contextlib.suppress(Exception):
                self.response.shutdown()

    @contextlib.contextmanager
    def reading(self, response: Any) -> Iterator[None]:
        """The block reads `response` (a urllib3 response): shut at the deadline, released to
        the pool when read to its end, closed otherwise."""
        with self.lock:
            self.response = response
            if self.fired:
                self._shut()
        complete = False
        try:
            yield
            complete = True
        finally:
            with self.lock:
                self.response = None
            if complete:
                response.release_conn()
            else:  # a connection left mid-answer is never reused
                response.close()


def node_items(
    client: ApiClient,
    selector: str | None,
    page_size: int = DEFAULT_PAGE_SIZE,
    deadline_s: float = LIST_DEADLINE_S,
) -> Iterator[Any]:
    """Every node (matching the label selector) as a plain dict, streamed; Restart.LIST when
    the list begins again."""
    from kubernetes.client import CoreV1Api

    query = {"label_selector": selector} if selector else {}
    return stream_list(
        CoreV1Api(client).list_node,
        NODES,
        page_size,
        MAX_NODE_LIST_BYTES,
        "; the account needs `list` on nodes (a ClusterRole)",
        deadline_s,
        **query,
    )


def nodes_from_kube(
    client: ApiClient,
    selector: str | None,
    page_size: int,
    gpu_pods: Mapping[str, int] | None,
    deadline_s: float = LIST_DEADLINE_S,
) -> Nodes:
    """The cluster's GPU nodes, reduced to their facts as the pages are read, capped as a
    `--nodes` file is."""
    nodes = Nodes(iter(()), "nodes")
    nodes.facts = _kube_facts(node_items(client, selector, page_size, deadline_s), gpu_pods, nodes)
    return nodes


def _kube_facts(
    items: Iterator[Any], gpu_pods: Mapping[str, int] | None, nodes: Nodes
) -> Iterator[NodeFacts | Restart]:
    for item in items:
        if item is Restart.LIST:
            nodes.total = 0
            yield item
            continue
        nodes.total += 1
        check_node_count(nodes.total, NODES)
        facts = node_facts(item, gpu_pods)
        if facts is not None:
            yield facts


def gpu_pods_from_kube(
    client: ApiClient, page_size: int = DEFAULT_PAGE_SIZE, deadline_s: float = LIST_DEADLINE_S
) -> dict[str, int]:
    """Running pods requesting nvidia.com/gpu per node, counted as the pages are read."""
    from kubernetes.client import CoreV1Api

    busy: dict[str, int] = {}
    for pod in stream_list(
        CoreV1Api(client).list_pod_for_all_namespaces,
        PODS,
        page_size,
        MAX_POD_LIST_BYTES,
        "; the account needs `list` on pods in all namespaces",
        deadline_s,
        field_selector="status.phase=Running",
    ):
        if pod is Restart.LIST:
            busy.clear()
        else:
            count_pod(busy, pod, PODS)
    return busy
