"""Container: the engine's version, `inspect` of the failed container, its log as it stands (never
restarted), the image config, the NVIDIA Container Toolkit's versions and the runtime
configuration (daemon.json, CDI specs).
"""

from __future__ import annotations

import re
from typing import Any

from vllm_triage.bundle.models import ContainerFacts, Mount
from vllm_triage.collect import reasons
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import (
    NotAvailable,
    Probe,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
)
from vllm_triage.image.config import ImageError, image_cuda_from_document
from vllm_triage.safejson import JsonError, parse_json

_RUNTIME_FILES = ("/etc/docker/daemon.json", "/etc/containers/containers.conf")
_CDI_FOLDERS = ("/etc/cdi", "/var/run/cdi")
_CDI_LIMIT = 16
_VERSION = re.compile(r"version[: ]+v?([0-9]+\.[0-9]+\.[0-9]+)", re.IGNORECASE)
_ENGINE_JSON_MAX = 4 * 1024 * 1024


def container_inspect(ctx: ProbeContext) -> dict[str, Any] | None:
    """`inspect` of --container, shared by the probes that need it (None without --container)."""
    container = ctx.options.container
    if container is None:
        return None

    def ask() -> dict[str, Any]:
        _, document = ctx.json_command(f"{ctx.engine()}_inspect", container=container)
        if isinstance(document, list) and document and isinstance(document[0], dict):
            return document[0]
        raise ProbeFailed(
            reasons.NO_SUCH_CONTAINER.format(engine=ctx.engine(), container=container)
        )

    return ctx.once("container_inspect", ask)


def inspected_container(ctx: ProbeContext) -> ContainerFacts | None:
    """The parsed `inspect` of --container (env, command, mounts, user, image), for any probe."""
    document = container_inspect(ctx)
    return parse_container_inspect(document, ctx.engine()) if document is not None else None


def container_for(ctx: ProbeContext, notes: list[str]) -> ContainerFacts | None:
    """inspected_container for a probe that only uses it on the side: when the inspect failed,
    a note, not the probe's failure (the container probe reports it)."""
    if ctx.options.container is None:
        return None
    try:
        return inspected_container(ctx)
    except (NotAvailable, ProbeFailed, TimeoutError, ValueError) as exc:
        notes.append(f"container inspect: {exc}; what it would tell is missing here")
        return None


def image_inspect(ctx: ProbeContext, image: str) -> Any:
    """`image inspect` of the image, shared by the probes that need it."""
    return ctx.once(
        f"image_inspect:{image}",
        lambda: ctx.json_command(f"{ctx.engine()}_image_inspect", image=image)[1],
    )


def _mapping(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}


def _items(value: Any) -> list[Any]:
    """A list, or a lone string (podman writes "Entrypoint": ""); anything else is no items."""
    if isinstance(value, str):
        return [value] if value else []
    return value if isinstance(value, list) else []


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def _integer(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _flag(value: Any) -> bool | None:
    return value if isinstance(value, bool) else None


def _mounts(document: dict[str, Any]) -> list[Mount]:
    mounts = []
    for mount in _items(document.get("Mounts")):
        if isinstance(mount, dict) and mount.get("Destination"):
            mounts.append(
                Mount(
                    source=str(mount.get("Source") or mount.get("Name") or ""),
                    destination=str(mount["Destination"]),
                    read_write=mount.get("RW") is not False,
                    type=_text(mount.get("Type")),
                )
            )
    return mounts


def _gpu_requested(host_config: dict[str, Any]) -> bool:
    for request in _items(host_config.get("DeviceRequests")):
        request = _mapping(request)
        capabilities = [str(c) for c in _items(request.get("Capabilities"))]
        if request.get("Driver") == "nvidia" or any("gpu" in c for c in capabilities):
            return True
    devices = _items(host_config.get("Devices"))
    return any("nvidia" in str(d.get("PathOnHost", "")) for d in devices if isinstance(d, dict))


def parse_container_inspect(document: dict[str, Any], engine: str) -> ContainerFacts:
    """The facts of one `docker inspect` / `podman inspect` entry (env still unredacted); a field
    of an unexpected type is left out, never an error."""
    config = _mapping(document.get("Config"))
    state = _mapping(document.get("State"))
    host_config = _mapping(document.get("HostConfig"))
    env = {}
    for item in _items(config.get("Env")):
        key, _, value = str(item).partition("=")
        env[key] = value
    command = [*_items(config.get("Entrypoint")), *_items(config.get("Cmd"))]
    return ContainerFacts(
        engine=engine,
        id=_text(document.get("Id")),
        name=str(document.get("Name") or "").lstrip("/") or None,
        image=_text(config.get("Image")) or _text(document.get("ImageName")),
        image_id=_text(document.get("Image")),
        command=[str(part) for part in command],
        env=env,
        user=_text(config.get("User")),
        mounts=_mounts(document),
        status=_text(state.get("Status")),
        exit_code=_integer(state.get("ExitCode")),
        oom_killed=_flag(state.get("OOMKilled")),
        restart_count=_integer(document.get("RestartCount")),
        started_at=_text(state.get("StartedAt")),
        finished_at=_text(state.get("FinishedAt")),
        runtime=_text(host_config.get("Runtime")),
        gpu_requested=_gpu_requested(host_config),
        shm_size_bytes=_integer(host_config.get("ShmSize")),
        ipc_mode=_text(host_config.get("IpcMode")),
    )


def _apply_image_config(facts: ContainerFacts, document: Any, where: str) -> list[str]:
    entry = document[0] if isinstance(document, list) and document else document
    notes = []
    try:
        cuda = image_cuda_from_document(entry, where)
    except ImageError as exc:
        notes.append(str(exc))
    else:
        facts.image_cuda = str(cuda.cuda)
        facts.image_require_cuda = cuda.require
    if isinstance(entry, dict):
        facts.image_created = _text(entry.get("Created"))
        labels = _mapping(_mapping(entry.get("Config")).get("Labels"))
        facts.image_labels = {str(k): str(v) for k, v in labels.items()}
    return notes


def _tool_version(ctx: ProbeContext, name: str, out: list[CapturedFile]) -> str | None:
    result = ctx.run(name)
    if result.missing:
        return None
    text = result.text() + result.stderr
    out.append(CapturedFile(f"container/{name}.txt", text=text))
    match = _VERSION.search(text)
    return match.group(1) if match else None


def _runtime_configuration(ctx: ProbeContext) -> list[CapturedFile]:
    files = []
    for path in _RUNTIME_FILES:
        if (text := ctx.read_host_text(path)) is not None:
            files.append(CapturedFile(f"container/runtime{path}", text=text))
    for folder in _CDI_FOLDERS:
        try:
            specs = sorted(ctx.host_file(folder).iterdir())[:_CDI_LIMIT]
        except OSError:
            continue
        for spec in specs:
            if (
                spec.suffix in (".yaml", ".yml", ".json")
                and (text := ctx.read_host_text(f"{folder}/{spec.name}")) is not None
            ):
                files.append(CapturedFile(f"container/cdi{folder}/{spec.name}", text=text))
    return files


def collect(ctx: ProbeContext) -> ProbeOutput:
    out = ProbeOutput()
    out.files.extend(_runtime_configuration(ctx))
    toolkit = _tool_version(ctx, "nvidia_ctk_version", out.files)
    container_cli = _tool_version(ctx, "nvidia_container_cli_version", out.files)
    try:
        engine = ctx.engine()
    except NotAvailable:
        if ctx.options.container or ctx.options.image:
            raise
        if not out.files:
            raise NotAvailable(reasons.NO_CONTAINER_STACK) from None
        out.notes.append("no container engine installed")
        out.facts = ContainerFacts(
            engine="none", toolkit_version=toolkit, container_cli_version=container_cli
        )
        return out

    facts = ContainerFacts(engine=engine)
    version = ctx.run(f"{engine}_version")
    if version.ok:
        out.files.append(ctx.output_file("container/version.json", version))
        facts.engine_version = _client_version(version.text())
    else:
        out.notes.append(version.failure())
    info = ctx.run(f"{engine}_info")
    if info.ok:
        out.files.append(ctx.output_file("container/info.json", info))
        facts.runtimes = _runtimes(info.text())

    document = container_inspect(ctx)
    if document is not None:
        out.files.append(CapturedFile("container/inspect.json", document=[document]))
        facts = parse_container_inspect(document, engine).model_copy(
            update={"engine_version": facts.engine_version, "runtimes": facts.runtimes}
        )
        logs = ctx.run(f"{engine}_logs", container=str(ctx.options.container))
        if logs.output_path is not None:
            out.files.append(ctx.output_file("logs/container.log", logs))
        if not logs.ok:
            out.notes.append(logs.failure())
        if logs.truncated:
            out.notes.append(logs.cut_note())

    image = ctx.options.image or facts.image
    if image:
        facts.image = facts.image or image
        try:
            config = image_inspect(ctx, image)
        except (NotAvailable, ProbeFailed) as exc:
            out.notes.append(f"image config: {exc}")
        else:
            out.files.append(CapturedFile("container/image-inspect.json", document=config))
            out.notes.extend(_apply_image_config(facts, config, f"image {image}"))
    facts.toolkit_version, facts.container_cli_version = toolkit, container_cli
    out.facts = facts
    return out


def _document(text: str) -> dict[str, Any] | None:
    try:
        document = parse_json(text, "engine output", max_bytes=_ENGINE_JSON_MAX)
    except JsonError:
        return None
    return document if isinstance(document, dict) else None


def _client_version(text: str) -> str | None:
    document = _document(text)
    if document is None:
        match = _VERSION.search(text)
        return match.group(1) if match else None
    client = _mapping(document.get("Client"))
    server = _mapping(document.get("Server"))
    return _text(server.get("Version")) or _text(client.get("Version"))


def _runtimes(text: str) -> list[str]:
    document = _document(text) or {}
    runtimes = document.get("Runtimes") or _mapping(document.get("host")).get("runtimes") or {}
    return sorted(str(name) for name in runtimes) if isinstance(runtimes, dict) else []


PROBE = Probe("container", collect, "engine, inspect, container log, image config, toolkit, CDI")
