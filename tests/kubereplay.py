"""A Kubernetes API server replay for the fleet tests: there is no API server on these machines,
so the official Python client is pointed (through a real kubeconfig) at this local HTTP server,
which answers the requests the fleet code makes in the API's real format:

- GET /api/v1/nodes and /api/v1/pods: NodeList / PodList pages honouring `limit` and `continue`
  (metadata.continue on every page but the last, metadata.remainingItemCount), `labelSelector`
  (key=value) and `fieldSelector=status.phase=Running`;
- an expired continue token: 410 Gone with the Status the API server sends (reason Expired and
  its real message), on the first N continued requests (`expire_continues`);
- a forbidden list: 403 with the RBAC Status message (`forbid`);
- pages whose metadata (the continue token) comes after the items (`metadata_last`), which the
  API server's own encoder never writes but JSON allows;
- the whole NodeList as one answer, `limit` ignored as the API allows a server to, sent in HTTP
  chunks while it is made (`node_body`: never held whole; an endless one for the deadlines);
- Jobs: POST /apis/batch/v1/namespaces/NS/jobs (201, the Job echoed with uid and
  creationTimestamp), GET .../jobs/NAME/status, DELETE .../jobs/NAME (a Status), 409 AlreadyExists
  for a name that exists; the pods of a Job (label job-name=NAME) and their logs, scripted per
  node: a log text and whether the Job succeeds, fails or never ends (ImagePullBackOff).

Every request is recorded (method, path, query) so a test can prove the pagination and the calls.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import orjson

EXPIRED_MESSAGE = (
    "The provided continue parameter is too old to display a consistent list result. You can "
    "start a new list without the continue parameter, or use the continue token in this response "
    "to retrieve the remainder of the results. Continuing with the provided token results in an "
    "inconsistent list - objects that were created, modified, or deleted between the time the "
    "first chunk was returned and now may show up in the list."
)


CHUNK_BYTES = 64 * 1024


def node_list_body(nodes: Iterable[dict[str, Any]]) -> Iterator[bytes]:
    """A NodeList written node by node as the API server's streaming encoder writes it (kind,
    apiVersion, metadata, then the items), in pieces of about CHUNK_BYTES."""
    piece = bytearray(b'{"kind":"NodeList","apiVersion":"v1","metadata":{"resourceVersion":"1"},')
    piece += b'"items":['
    for index, node in enumerate(nodes):
        piece += (b"," if index else b"") + orjson.dumps(node)
        if len(piece) >= CHUNK_BYTES:
            yield bytes(piece)
            piece.clear()
    yield bytes(piece + b"]}")


@dataclass
class JobScript:
    """How the Job on one node ends: its pod's log, and succeeded / failed / pending."""

    log: str
    outcome: str = "succeeded"  # succeeded | failed | pending


@dataclass
class Replay:
    nodes: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    expire_continues: int = 0  # answer 410 to this many continued list requests
    metadata_last: bool = False  # list pages write their metadata after the items
    # GET /api/v1/nodes answers this body, made anew for each request, in HTTP chunks
    node_body: Callable[[], Iterable[bytes]] | None = None
    stopped: threading.Event = field(default_factory=threading.Event)  # set when the server ends
    forbid: set[str] = field(default_factory=set)  # "nodes", "pods", "jobs"
    jobs_by_node: dict[str, JobScript] = field(default_factory=dict)
    requests: list[tuple[str, str, dict[str, list[str]]]] = field(default_factory=list)
    created_jobs: dict[str, dict[str, Any]] = field(default_factory=dict)
    deleted_jobs: list[str] = field(default_factory=list)
    existing_jobs: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        assert self._server is not None
        host, port = self._server.server_address[:2]
        return f"http://{host}:{port}"

    def kubeconfig(self, folder: Path, context: str = "replay") -> Path:
        """A real kubeconfig (token auth) pointing at this server."""
        path = folder / "kubeconfig"
        path.write_text(
            json.dumps(
                {
                    "apiVersion": "v1",
                    "kind": "Config",
                    "clusters": [{"name": "replay", "cluster": {"server": self.url}}],
                    "users": [{"name": "triage", "user": {"token": "replay-token"}}],
                    "contexts": [
                        {"name": context, "context": {"cluster": "replay", "user": "triage"}}
                    ],
                    "current-context": context,
                }
            )
        )
        return path

    def __enter__(self) -> Replay:
        handler = type("Handler", (_Handler,), {"replay": self})
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        assert self._server is not None
        self.stopped.set()
        self._server.shutdown()
        self._server.server_close()

    def list_requests(self, path: str) -> list[dict[str, list[str]]]:
        return [query for method, p, query in self.requests if method == "GET" and p == path]


def _status(code: int, reason: str, message: str, **details: Any) -> dict[str, Any]:
    document: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        document["details"] = details
    return document


def _selected(item: dict[str, Any], query: dict[str, list[str]]) -> bool:
    for selector in query.get("labelSelector", []):
        labels = item.get("metadata", {}).get("labels", {})
        for term in selector.split(","):
            key, _, value = term.partition("=")
            if labels.get(key) != value:
                return False
    for selector in query.get("fieldSelector", []):
        if selector == "status.phase=Running" and item.get("status", {}).get("phase") != "Running":
            return False
    return True


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    replay: Replay

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, code: int, document: Any, content_type: str = "application/json") -> None:
        body = document if isinstance(document, bytes) else json.dumps(document).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_chunked(self, chunks: Iterable[bytes]) -> None:
        """A 200 answer in HTTP chunks, each sent as it is made; a client that hangs up ends it."""
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        try:
            for chunk in chunks:
                if chunk:
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            self.wfile.write(b"0\r\n\r\n")
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True

    def _record(self) -> tuple[str, dict[str, list[str]]]:
        parts = urlsplit(self.path)
        query = parse_qs(parts.query)
        with self.replay.lock:
            self.replay.requests.append((self.command, parts.path, query))
        return parts.path, query

    def _page(self, kind: str, items: list[dict[str, Any]], query: dict[str, list[str]]) -> None:
        if kind.lower() + "s" in self.replay.forbid:
            resource = kind.lower() + "s"
            self._send(
                403,
                _status(
                    403,
                    "Forbidden",
                    f'{resource} is forbidden: User "system:serviceaccount:ops:triage" cannot '
                    f'list resource "{resource}" in API group "" at the cluster scope',
                    kind=resource,
                ),
            )
            return
        token = query.get("continue", [None])[0]
        start = 0
        if token:
            with self.replay.lock:
                expire = self.replay.expire_continues > 0
                if expire:
                    self.replay.expire_continues -= 1
            if expire:
                self._send(410, _status(410, "Expired", EXPIRED_MESSAGE))
                return
            start = int(json.loads(bytes.fromhex(token))["start"])
        chosen = [item for item in items if _selected(item, query)]
        limit = int(query.get("limit", ["0"])[0]) or len(chosen) or 1
        page = chosen[start : start + limit]
        metadata: dict[str, Any] = {"resourceVersion": "48211936"}
        if start + limit < len(chosen):
            metadata["continue"] = (
                json.dumps({"start": start + limit, "rv": 48211936}).encode().hex()
            )
            metadata["remainingItemCount"] = len(chosen) - start - limit
        document = {"kind": f"{kind}List", "apiVersion": "v1", "metadata": metadata, "items": page}
        if self.replay.metadata_last:
            document["metadata"] = document.pop("metadata")
        self._send(200, document)

    def do_GET(self) -> None:
        path, query = self._record()
        replay = self.replay
        if path == "/api/v1/nodes" and replay.node_body is not None:
            return self._send_chunked(replay.node_body())
        if path == "/api/v1/nodes":
            return self._page("Node", replay.nodes, query)
        if path == "/api/v1/pods":
            return self._page("Pod", replay.pods, query)
        parts = path.strip("/").split("/")
        # /apis/batch/v1/namespaces/NS/jobs/NAME/status
        if parts[:3] == ["apis", "batch", "v1"] and len(parts) == 8 and parts[7] == "status":
            job = replay.created_jobs.get(parts[6])
            if job is None:
                return self._send(
                    404, _status(404, "NotFound", f'jobs.batch "{parts[6]}" not found')
                )
            return self._send(200, job)
        # /api/v1/namespaces/NS/pods?labelSelector=job-name=NAME
        if parts[:2] == ["api", "v1"] and len(parts) == 5 and parts[4] == "pods":
            selector = query.get("labelSelector", [""])[0]
            name = selector.removeprefix("job-name=")
            items = [self._pod(name)] if name in replay.created_jobs else []
            return self._send(
                200, {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}
            )
        # /api/v1/namespaces/NS/pods/POD/log
        if parts[:2] == ["api", "v1"] and len(parts) == 7 and parts[6] == "log":
            job = parts[5].rsplit("-", 1)[0]
            script = self._script(job)
            if script is None:
                return self._send(404, _status(404, "NotFound", f'pods "{parts[5]}" not found'))
            if script.outcome == "pending":
                return self._send(
                    400,
                    _status(
                        400,
                        "BadRequest",
                        f'container "vllm-triage" in pod "{parts[5]}" is waiting to start: '
                        "trying and failing to pull image",
                    ),
                )
            return self._send(200, script.log.encode(), "text/plain")
        self._send(404, _status(404, "NotFound", f"the server could not find {path}"))

    def _script(self, job: str) -> JobScript | None:
        manifest = self.replay.created_jobs.get(job)
        if manifest is None:
            return None
        node = manifest["metadata"]["annotations"]["vllm-triage/node"]
        return self.replay.jobs_by_node.get(node, JobScript(log="", outcome="failed"))

    def _pod(self, job: str) -> dict[str, Any]:
        script = self._script(job)
        assert script is not None
        phase = {"succeeded": "Succeeded", "failed": "Failed", "pending": "Pending"}[script.outcome]
        state: dict[str, Any]
        if script.outcome == "pending":
            state = {
                "waiting": {
                    "reason": "ImagePullBackOff",
                    "message": 'Back-off pulling image "registry.example/vllm-triage:0.1.0"',
                }
            }
        else:
            state = {
                "terminated": {
                    "exitCode": 0 if script.outcome == "succeeded" else 1,
                    "reason": "Completed" if script.outcome == "succeeded" else "Error",
                }
            }
        return {
            "kind": "Pod",
            "apiVersion": "v1",
            "metadata": {"name": f"{job}-x7k2p", "labels": {"job-name": job}},
            "status": {
                "phase": phase,
                "containerStatuses": [
                    {"name": "vllm-triage", "ready": False, "restartCount": 0, "state": state}
                ],
            },
        }

    def do_POST(self) -> None:
        path, _ = self._record()
        length = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(length) or b"{}")
        parts = path.strip("/").split("/")
        if parts[:3] == ["apis", "batch", "v1"] and len(parts) == 6 and parts[5] == "jobs":
            if "jobs" in self.replay.forbid:
                return self._send(
                    403,
                    _status(
                        403,
                        "Forbidden",
                        'jobs.batch is forbidden: User "system:serviceaccount:ops:triage" cannot '
                        f'create resource "jobs" in API group "batch" in the namespace "{parts[4]}"',
                    ),
                )
            name = body["metadata"]["name"]
            if name in self.replay.existing_jobs or name in self.replay.created_jobs:
                return self._send(
                    409, _status(409, "AlreadyExists", f'jobs.batch "{name}" already exists')
                )
            body["metadata"]["uid"] = f"uid-{len(self.replay.created_jobs)}"
            body["metadata"]["creationTimestamp"] = "2026-12-01T10:00:00Z"
            node = body["metadata"]["annotations"]["vllm-triage/node"]
            script = self.replay.jobs_by_node.get(node, JobScript(log="", outcome="failed"))
            status: dict[str, Any] = {"active": 1, "startTime": "2026-12-01T10:00:01Z"}
            if script.outcome == "succeeded":
                status = {"succeeded": 1, "conditions": [{"type": "Complete", "status": "True"}]}
            elif script.outcome == "failed":
                status = {
                    "failed": 1,
                    "conditions": [
                        {"type": "Failed", "status": "True", "reason": "BackoffLimitExceeded"}
                    ],
                }
            job = {**body, "status": status}
            with self.replay.lock:
                self.replay.created_jobs[name] = job
            return self._send(201, body)
        self._send(404, _status(404, "NotFound", f"the server could not find {path}"))

    def do_DELETE(self) -> None:
        path, _ = self._record()
        name = path.rstrip("/").rsplit("/", 1)[-1]
        with self.replay.lock:
            self.replay.deleted_jobs.append(name)
        self._send(
            200,
            {
                "kind": "Status",
                "apiVersion": "v1",
                "metadata": {},
                "status": "Success",
                "details": {"name": name, "group": "batch", "kind": "jobs"},
            },
        )
