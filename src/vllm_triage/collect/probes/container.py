"""Container: the engine's version, `inspect` of the failed container, its log as it stands (never
restarted), the image config, the NVIDIA Container Toolkit's versions and the runtime
configuration (daemon.json, CDI specs).
"""

from __future__ import annotations

import json
import re
from typing import Any

from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.models import ContainerFacts, Mount
from vllm_triage.collect.probes.base import (
    NotAvailable,
    Probe,
    ProbeContext,
    ProbeFailed,
    ProbeOutput,
)
from vllm_triage.diagnose.image import ImageError, image_cuda_from_document

_RUNTIME_FILES = ("/etc/docker/daemon.json", "/etc/containers/containers.conf")
_CDI_FOLDERS = ("/etc/cdi", "/var/run/cdi")
_CDI_LIMIT = 16
_VERSION = re.compile(r"version[: ]+v?([0-9]+\.[0-9]+\.[0-9]+)", re.IGNORECASE)


def container_inspect(ctx: ProbeContext) -> dict[str, Any] | None:
    """`inspect` of --container, shared by the probes that need it (None without --container)."""
    container = ctx.options.container
    if container is None:
        return None

    def ask() -> dict[str, Any]:
        _, document = ctx.json_command(f"{ctx.engine()}_inspect", container=container)
        if isinstance(document, list) and document and isinstance(document[0], dict):
            return document[0]
        raise ProbeFailed(f"{ctx.engine()} inspect {container}: no such container in its answer")

    return ctx.once("container_inspect", ask)


def inspected_container(ctx: ProbeContext) -> ContainerFacts | None:
    """The parsed `inspect` of --container (env, command, mounts, user, image), for any probe."""
    document = container_inspect(ctx)
    return parse_container_inspect(document, ctx.engine()) if document is not None else None


def image_inspect(ctx: ProbeContext, image: str) -> Any:
    """`image inspect` of the image, shared by the probes that need it."""
    return ctx.once(
        f"image_inspect:{image}",
        lambda: ctx.json_command(f"{ctx.engine()}_image_inspect", image=image)[1],
    )


def _mounts(document: dict[str, Any]) -> list[Mount]:
    mounts = []
    for mount in document.get("Mounts") or []:
        if isinstance(mount, dict) and mount.get("Destination"):
            mounts.append(
                Mount(
                    source=str(mount.get("Source") or mount.get("Name") or ""),
                    destination=str(mount["Destination"]),
                    read_write=bool(mount.get("RW", True)),
                    type=mount.get("Type"),
                )
            )
    return mounts


def _gpu_requested(host_config: dict[str, Any]) -> bool:
    for request in host_config.get("DeviceRequests") or []:
        capabilities = request.get("Capabilities") or []
        if request.get("Driver") == "nvidia" or any("gpu" in c for c in capabilities):
            return True
    devices = host_config.get("Devices") or []
    return any("nvidia" in str(d.get("PathOnHost", "")) for d in devices if isinstance(d, dict))


def parse_container_inspect(document: dict[str, Any], engine: str) -> ContainerFacts:
    """The facts of one `docker inspect` / `podman inspect` entry (env still unredacted)."""
    config = document.get("Config") or {}
    state = document.get("State") or {}
    host_config = document.get("HostConfig") or {}
    env = {}
    for item in config.get("Env") or []:
        key, _, value = str(item).partition("=")
        env[key] = value
    command = [*(config.get("Entrypoint") or []), *(config.get("Cmd") or [])]
    return ContainerFacts(
        engine=engine,
        id=document.get("Id"),
        name=str(document.get("Name") or "").lstrip("/") or None,
        image=config.get("Image") or document.get("ImageName"),
        image_id=document.get("Image"),
        command=[str(part) for part in command],
        env=env,
        user=config.get("User") or None,
        mounts=_mounts(document),
        status=state.get("Status"),
        exit_code=state.get("ExitCode"),
        oom_killed=state.get("OOMKilled"),
        restart_count=document.get("RestartCount"),
        started_at=state.get("StartedAt"),
        finished_at=state.get("FinishedAt"),
        runtime=host_config.get("Runtime"),
        gpu_requested=_gpu_requested(host_config),
        shm_size_bytes=host_config.get("ShmSize"),
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
        facts.image_created = entry.get("Created")
        labels = (entry.get("Config") or {}).get("Labels") or {}
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
            raise NotAvailable(
                "no container engine, no Container Toolkit, no runtime config"
            ) from None
        out.notes.append("no container engine installed")
        out.facts = ContainerFacts(
            engine="none", toolkit_version=toolkit, container_cli_version=container_cli
        )
        return out

    facts = ContainerFacts(engine=engine)
    version = ctx.run(f"{engine}_version")
    if version.ok:
        out.files.append(CapturedFile("container/version.json", source=version.output_path))
        facts.engine_version = _client_version(version.text())
    else:
        out.notes.append(version.failure())
    info = ctx.run(f"{engine}_info")
    if info.ok:
        out.files.append(CapturedFile("container/info.json", source=info.output_path))
        facts.runtimes = _runtimes(info.text())

    document = container_inspect(ctx)
    if document is not None:
        out.files.append(CapturedFile("container/inspect.json", document=[document]))
        facts = parse_container_inspect(document, engine).model_copy(
            update={"engine_version": facts.engine_version, "runtimes": facts.runtimes}
        )
        logs = ctx.run(f"{engine}_logs", container=str(ctx.options.container))
        if logs.output_path is not None:
            out.files.append(CapturedFile("logs/container.log", source=logs.output_path))
        if not logs.ok:
            out.notes.append(logs.failure())
        elif logs.truncated:
            out.notes.append("the container log was cut at the output cap")

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


def _client_version(text: str) -> str | None:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        match = _VERSION.search(text)
        return match.group(1) if match else None
    client = document.get("Client") or {}
    server = document.get("Server") or {}
    return server.get("Version") or client.get("Version")


def _runtimes(text: str) -> list[str]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return []
    runtimes = document.get("Runtimes") or (document.get("host") or {}).get("runtimes") or {}
    return sorted(str(name) for name in runtimes) if isinstance(runtimes, dict) else []


PROBE = Probe("container", collect, "engine, inspect, container log, image config, toolkit, CDI")
