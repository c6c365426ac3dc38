"""Image platforms as OCI indexes name them (os/architecture[/variant]), and this host's."""

from __future__ import annotations

import platform as host_platform
import re
import sys
from dataclasses import dataclass

from vllm_triage.image.config import ImageError

_PLATFORM = re.compile(r"^([a-z0-9]+)/([a-z0-9_]+)(?:/([a-z0-9]+))?$")
# Python's machine names to the architectures of OCI / Go (GOARCH).
_MACHINES = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
}


@dataclass(frozen=True)
class Platform:
    """os/architecture[/variant] as OCI indexes name them (linux/amd64, linux/arm64/v8)."""

    os: str
    architecture: str
    variant: str | None = None

    @classmethod
    def parse(cls, text: str) -> Platform:
        match = _PLATFORM.match(text.strip().lower())
        if match is None:
            raise ImageError(
                f"--platform {text[:40]!r}: expected os/architecture[/variant], e.g. linux/amd64"
            )
        return cls(match.group(1), match.group(2), match.group(3))

    @classmethod
    def host(cls) -> Platform:
        """This machine's platform when it is Linux on a known CPU, else linux/amd64."""
        machine = _MACHINES.get(host_platform.machine().lower())
        if sys.platform.startswith("linux") and machine is not None:
            return cls("linux", machine)
        return cls("linux", "amd64")

    def matches(self, entry: Platform) -> bool:
        if (self.os, self.architecture) != (entry.os, entry.architecture):
            return False
        if self.variant is None:
            return True
        default = "v8" if self.architecture == "arm64" else None
        return (entry.variant or default) == self.variant

    def __str__(self) -> str:
        return f"{self.os}/{self.architecture}" + (f"/{self.variant}" if self.variant else "")
