"""Driver and CUDA version numbers: parsing, ordering and the encodings tools print them in."""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import total_ordering

from vllm_triage.errors import InputError

_DRIVER_RE = re.compile(
    r"^\s*r?(\d{2,4})(?:\.(\d{1,3}))?(?:\.(\d{1,3}))?\s*$", re.IGNORECASE | re.ASCII
)
_CUDA_DOTTED_RE = re.compile(
    r"^\s*(?:cuda\s*)?v?(\d{1,2})\.(\d{1,2})(?:\.(\d{1,3}))?\s*$", re.IGNORECASE | re.ASCII
)
_CUDA_TAG_RE = re.compile(r"^\s*cu(\d{1,2})(\d)\s*$", re.IGNORECASE | re.ASCII)
_CUDA_INT_RE = re.compile(r"^\s*(\d{4,6})\s*$", re.ASCII)


class VersionError(InputError):
    """A version string that cannot be read; the message is a one-line explanation."""


@total_ordering
@dataclass(frozen=True)
class DriverVersion:
    """An NVIDIA driver version such as 575.57.08; the branch is the first number (r575)."""

    major: int
    minor: int = 0
    patch: int = 0
    text: str = ""

    @classmethod
    def parse(cls, value: str) -> DriverVersion:
        match = _DRIVER_RE.match(value or "")
        if not match:
            raise VersionError(
                f"malformed driver version {value!r}: expected something like 575.57.08"
            )
        major = int(match.group(1))
        if not 100 <= major <= 9999:
            raise VersionError(
                f"malformed driver version {value!r}: branch {major} is out of range"
            )
        minor = int(match.group(2) or 0)
        patch = int(match.group(3) or 0)
        return cls(major, minor, patch, value.strip().lstrip("rR"))

    @property
    def branch(self) -> str:
        return f"r{self.major}"

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, DriverVersion):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        return self.text or f"{self.major}.{self.minor:02d}.{self.patch:02d}"


@total_ordering
@dataclass(frozen=True)
class CudaVersion:
    """A CUDA version (13.0, 12.9.1); also read from cu130 tags and the 12080 driver-API encoding."""

    major: int
    minor: int
    patch: int | None = None

    @classmethod
    def parse(cls, value: str) -> CudaVersion:
        text = (value or "").strip()
        if match := _CUDA_DOTTED_RE.match(text):
            patch = int(match.group(3)) if match.group(3) is not None else None
            return cls._checked(int(match.group(1)), int(match.group(2)), patch, value)
        if match := _CUDA_TAG_RE.match(text):
            return cls._checked(int(match.group(1)), int(match.group(2)), None, value)
        if match := _CUDA_INT_RE.match(text):
            return cls.from_api_int(int(match.group(1)))
        raise VersionError(
            f"malformed CUDA version {value!r}: expected something like 13.0 or cu130"
        )

    @classmethod
    def from_api_int(cls, number: int) -> CudaVersion:
        """Decode cudaDriverGetVersion's 1000*major + 10*minor (12080 is CUDA 12.8)."""
        major, rest = divmod(number, 1000)
        return cls._checked(major, rest // 10, None, str(number))

    @classmethod
    def _checked(cls, major: int, minor: int, patch: int | None, raw: str) -> CudaVersion:
        if not 7 <= major <= 30:
            raise VersionError(f"malformed CUDA version {raw!r}: major {major} is out of range")
        return cls(major, minor, patch)

    @property
    def minor_release(self) -> tuple[int, int]:
        return (self.major, self.minor)

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch or 0)

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, CudaVersion):
            return NotImplemented
        return self._key() < other._key()

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, CudaVersion):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __str__(self) -> str:
        base = f"{self.major}.{self.minor}"
        return base if self.patch is None else f"{base}.{self.patch}"
