"""Host: node name, OS release, kernel, uptime, /dev/shm size, cgroup limits, nvidia modules.
All from files (under --host-root) and the os module; no command runs.
"""

from __future__ import annotations

import os
import platform
from collections.abc import Callable
from pathlib import Path

from vllm_triage.bundle.models import HostFacts
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import Probe, ProbeContext, ProbeOutput

_HOST_FILES = {
    "host/os-release.txt": "/etc/os-release",
    "host/uptime.txt": "/proc/uptime",
    "host/modules.txt": "/proc/modules",
    "host/cgroup.txt": "/proc/self/cgroup",
}
_CGROUP_LIMITS = {
    "memory": ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"),
    "cpu": ("/sys/fs/cgroup/cpu.max", "/sys/fs/cgroup/cpu/cpu.cfs_quota_us"),
}


def parse_os_release(text: str) -> str | None:
    """PRETTY_NAME (else NAME VERSION) of an os-release file."""
    fields = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep:
            fields[key.strip()] = value.strip().strip('"')
    return fields.get("PRETTY_NAME") or (
        " ".join(filter(None, (fields.get("NAME"), fields.get("VERSION")))) or None
    )


def nvidia_modules(text: str) -> list[str]:
    """Loaded kernel modules whose name starts with nvidia, from /proc/modules."""
    return sorted({line.split()[0] for line in text.splitlines() if line.startswith("nvidia")})


def _shm_bytes(ctx: ProbeContext) -> int | None:
    try:
        stats = os.statvfs(ctx.host_file("/dev/shm"))
    except OSError:
        return None
    return stats.f_blocks * stats.f_frsize


def collect(ctx: ProbeContext) -> ProbeOutput:
    out = ProbeOutput()
    texts = {}
    for name, path in _HOST_FILES.items():
        text = ctx.read_host_text(path)
        if text is not None:
            texts[path] = text
            out.files.append(CapturedFile(name, text=text))
    limits = {}
    for kind, paths in _CGROUP_LIMITS.items():
        limits[kind] = next(
            (value.strip() for p in paths if (value := ctx.read_host_text(p)) is not None), None
        )
    uptime = texts.get("/proc/uptime", "").split()
    out.facts = HostFacts(
        node_name=_own_or_node(ctx, out, "/etc/hostname", platform.node, "node name"),
        os_release=parse_os_release(texts.get("/etc/os-release", "")),
        kernel=_own_or_node(ctx, out, "/proc/sys/kernel/osrelease", platform.release, "kernel"),
        uptime_s=float(uptime[0]) if uptime else None,
        shm_bytes=_shm_bytes(ctx),
        cgroup_memory_max=limits["memory"],
        cgroup_cpu_max=limits["cpu"],
        nvidia_modules=nvidia_modules(texts.get("/proc/modules", "")),
    )
    return out


def _own_or_node(
    ctx: ProbeContext, out: ProbeOutput, path: str, own: Callable[[], str], what: str
) -> str | None:
    """The node's value from its file; this machine's own only when the node is this machine:
    under --host-root, the machine running the tool (a debug pod) is not the node."""
    text = ctx.read_host_text(path)
    if text is not None and text.strip():
        return text.strip()
    if ctx.options.host_root == Path("/"):
        return own()
    out.notes.append(f"{what}: {path} not readable under the host root; not recorded")
    return None


PROBE = Probe("host", collect, "node, OS, kernel, uptime, /dev/shm, cgroup limits, modules")
