"""vLLM: its version and where it came from (image-bundled, pip, built from source with a commit),
and the launch arguments parsed into fields (from --launch-cmd, else the container's or the pod's
command).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import re

from vllm_triage.bundle.models import VllmFacts
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import Probe, ProbeContext, ProbeOutput
from vllm_triage.collect.probes.container import container_for
from vllm_triage.collect.probes.kubernetes import pod_for
from vllm_triage.errors import InputError
from vllm_triage.launch import LaunchArgs, parse_launch_command

_LOG_VERSION = re.compile(
    r"(?:vLLM API server version|vLLM version|LLM engine \(v|engine \(v)\s*v?([0-9]+\.[0-9]+\.[0-9]+[0-9A-Za-z.+]*)"
)
_TAG_VERSION = re.compile(r":v?([0-9]+\.[0-9]+\.[0-9]+)(?:-|$)")
_SOURCE_COMMIT = re.compile(r"\+g([0-9a-f]{7,40})")


def _launch_tokens(ctx: ProbeContext) -> tuple[list[str] | str, str] | None:
    """The launch command: --launch-cmd first (it needs nothing else), then the container's or
    the pod's (when their probe failed, that probe says so; here there is none)."""
    if ctx.options.launch_cmd is not None:
        return ctx.options.launch_cmd, "--launch-cmd"
    container = container_for(ctx, [])
    if container is not None:
        env = [f"{key}={value}" for key, value in container.env.items()]
        return [*env, *container.command], "container inspect"
    pod = pod_for(ctx, []) or {}
    spec = pod.get("spec")
    for entry in _list(spec.get("containers") if isinstance(spec, dict) else None):
        if not isinstance(entry, dict):
            continue
        env = [
            f"{e['name']}={e.get('value') or ''}"
            for e in _list(entry.get("env"))
            if isinstance(e, dict) and "name" in e
        ]
        command = [*_list(entry.get("command")), *_list(entry.get("args"))]
        if command:
            return [*env, *(str(c) for c in command)], f"pod container {entry.get('name')}"
    return None


def _list(value: object) -> list[object]:
    return value if isinstance(value, list) else []


def launch_args(ctx: ProbeContext) -> LaunchArgs | None:
    """The parsed launch command, shared by the probes that need it (None when none is known)."""

    def parse() -> tuple[LaunchArgs | None, str | None]:
        found = _launch_tokens(ctx)
        if found is None:
            return None, None
        tokens, source = found
        try:
            return parse_launch_command(tokens, ctx.kb), source
        except InputError:
            return None, source

    return ctx.once("launch", parse)[0]


def version_from_log(text: str) -> str | None:
    match = _LOG_VERSION.search(text)
    return match.group(1) if match else None


def _origin(
    version: str | None, image: str | None, host_version: str | None
) -> tuple[str, str | None]:
    commit = _SOURCE_COMMIT.search(version or "")
    if commit:
        return "source", commit.group(1)
    if image:
        return "image-bundled", None
    if host_version:
        return "pip", None
    return "unknown", None


def collect(ctx: ProbeContext) -> ProbeOutput:
    out = ProbeOutput()
    facts = VllmFacts()
    if ctx.options.launch_cmd is not None:
        out.files.append(CapturedFile("vllm/launch-command.txt", text=ctx.options.launch_cmd))
    launch = launch_args(ctx)
    facts.launch = launch
    facts.launch_source = ctx.once("launch", lambda: (None, None))[1]
    if facts.launch_source and launch is None:
        out.notes.append(f"the launch command from {facts.launch_source} names no vLLM entry point")

    container = container_for(ctx, out.notes)
    image = ctx.options.image or (container.image if container else None)
    version = None
    for log in ctx.options.logs:
        if (head := ctx.log_head(log)) is not None and (version := version_from_log(head)):
            break
    if version is None and image and (match := _TAG_VERSION.search(image)):
        version = match.group(1)
    host_version = None
    if not image:
        with contextlib.suppress(importlib.metadata.PackageNotFoundError):
            host_version = importlib.metadata.version("vllm")
    facts.version = version or host_version
    facts.origin, facts.commit = _origin(facts.version, image, host_version)
    out.facts = facts
    return out


PROBE = Probe("vllm", collect, "vLLM version and origin, launch arguments")
