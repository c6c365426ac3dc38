"""The node's facts as preflight reads them: the driver and GPUs (nvidia-smi, which reads NVML),
/dev/shm (os.statvfs), the GPUs the container runtime exposes (/dev/nvidia*, nvidia-container-cli,
CDI specs) and the RDMA devices. Every read is bounded (a deadline per command, a cap per output
and per file) and every failure is a value, never an exception: a check that cannot run is a
warning, not a crash.
"""

from __future__ import annotations

import contextlib
import os
import re
import selectors
import shutil
import signal
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from vllm_triage.knowledge import KnowledgeBase
from vllm_triage.preflight.limits import Limits

MAX_OUTPUT_BYTES = 8 * 1024**2
"""nvidia-smi -q -x on 8 GPUs prints about 200 KiB; anything past 8 MiB is not nvidia-smi."""
MAX_SPEC_BYTES = 4 * 1024**2
MAX_SPEC_FILES = 32
MAX_DEVICE_ENTRIES = 4096

# r610 and newer print "KMD Version: ... CUDA UMD Version: ..." instead.
_TABLE_HEADER = re.compile(
    r"(?:Driver|KMD) Version:\s*([0-9][0-9.]*)\s+CUDA (?:UMD )?Version:\s*([0-9][0-9.]*)"
)
_TABLE_GPU = re.compile(r"^\|\s+([0-9]+)\s+(\S.*?)\s+(?:On|Off|WDDM|TCC)\s+\|")
_TABLE_MEMORY = re.compile(r"\|\s*[0-9]+MiB\s*/\s*([0-9]+)MiB\s*\|")
_SMI_FAILURE = re.compile(
    r"(Failed to initialize NVML[^\n]*|NVIDIA-SMI has failed[^\n]*|Driver/library version "
    r"mismatch[^\n]*|No devices were found[^\n]*)"
)
_CLI_FIELD = re.compile(
    r"^(NVRM version|CUDA version|Device Index|Model|Brand|Architecture):\s*(.*)$"
)
_CDI_DRIVER = re.compile(
    r"(?:libcuda\.so\.|--host-driver-version=)([0-9]{3,4}\.[0-9]+(?:\.[0-9]+)?)"
)
_DEVICE_NODE = re.compile(r"^nvidia([0-9]+)$")


@dataclass(frozen=True)
class CommandOutcome:
    """What a command did: `missing` (not on PATH), `timeout`, or its exit code and output."""

    argv: tuple[str, ...]
    missing: bool = False
    timeout: bool = False
    returncode: int | None = None
    stdout: str = ""
    stderr: str = ""

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def first_error_line(self) -> str:
        """The line that says why it failed, for a one-line message."""
        if self.missing:
            return f"{self.argv[0]} is not installed here"
        if self.timeout:
            return f"{' '.join(self.argv)} did not answer in time"
        text = f"{self.stderr}\n{self.stdout}"
        lines = [line.strip() for line in text.splitlines() if line.strip()]
        line = lines[0] if lines else "no output"
        return f"{' '.join(self.argv)} exited {self.returncode}: {line[:300]}"


def run_command(argv: list[str], timeout: float, path: str | None = None) -> CommandOutcome:
    """Run a read-only command with no input, in its own session (its whole group is killed when
    it ends or at the deadline), keeping at most MAX_OUTPUT_BYTES of each output. Pipes, not
    temporary files: an init container's root file system is often read-only."""
    program = shutil.which(argv[0], path=path if path is not None else os.environ.get("PATH"))
    if program is None:
        return CommandOutcome(tuple(argv), missing=True)
    deadline = time.monotonic() + timeout
    try:
        process = subprocess.Popen(
            [program, *argv[1:]],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return CommandOutcome(tuple(argv), returncode=126, stderr=str(exc.strerror))
    assert process.stdout is not None and process.stderr is not None
    out_fd, err_fd = process.stdout.fileno(), process.stderr.fileno()
    kept: dict[int, bytearray] = {out_fd: bytearray(), err_fd: bytearray()}
    timed_out = False
    with selectors.DefaultSelector() as selector:
        for stream in (process.stdout, process.stderr):
            selector.register(stream, selectors.EVENT_READ)
        while selector.get_map():
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            for key, _ in selector.select(timeout=min(left, 0.5)):
                chunk = os.read(key.fd, 65536)
                if not chunk:
                    selector.unregister(key.fileobj)
                    continue
                buffer = kept[key.fd]
                buffer += chunk[: max(0, MAX_OUTPUT_BYTES - len(buffer))]
            if process.poll() is not None:
                _kill_group(process.pid)  # what it left behind holds the pipes open
    _kill_group(process.pid)
    process.stdout.close()
    process.stderr.close()
    returncode = process.wait()
    if timed_out:
        return CommandOutcome(tuple(argv), timeout=True)
    return CommandOutcome(
        tuple(argv),
        returncode=returncode,
        stdout=kept[out_fd].decode("utf-8", errors="replace"),
        stderr=kept[err_fd].decode("utf-8", errors="replace"),
    )


def _kill_group(pid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)


# --- driver and GPUs --------------------------------------------------------------------------


@dataclass(frozen=True)
class HostGpus:
    """The driver and GPUs as nvidia-smi reports them; `problem` when it ran and failed."""

    driver: str | None = None
    cuda_ceiling: str | None = None
    names: tuple[str, ...] = ()
    memory_mib: int | None = None
    source: str = ""
    problem: str | None = None
    missing: bool = False


def parse_nvidia_smi_table(text: str) -> HostGpus:
    """The header and GPU rows of plain `nvidia-smi` (the table everyone pastes): driver, its
    CUDA ceiling, each GPU's name (cut short by nvidia-smi past about 25 characters) and memory."""
    header = _TABLE_HEADER.search(text)
    names, memory = [], []
    for line in text.splitlines():
        if (match := _TABLE_GPU.match(line)) and not line.startswith("| GPU "):
            names.append(match.group(2))
        elif match := _TABLE_MEMORY.search(line):
            memory.append(int(match.group(1)))
    return HostGpus(
        driver=header.group(1) if header else None,
        cuda_ceiling=header.group(2) if header else None,
        names=tuple(names),
        memory_mib=memory[0] if memory else None,
        source="nvidia-smi",
    )


def detect_gpus(kb: KnowledgeBase, timeout: float, path: str | None = None) -> HostGpus:
    """`nvidia-smi -q -x` (exact names, through collect's parser), else plain `nvidia-smi`."""
    from vllm_triage.collect.probes.base import ProbeFailed
    from vllm_triage.collect.probes.gpu import parse_nvidia_smi_xml

    xml = run_command(["nvidia-smi", "-q", "-x"], timeout, path)
    if xml.missing:
        return HostGpus(missing=True, problem="nvidia-smi is not installed here")
    if xml.timeout:  # a hung driver: the table would hang as long
        return HostGpus(problem=f"nvidia-smi did not answer in {timeout:g} s", source="nvidia-smi")
    if xml.ok:
        try:
            facts = parse_nvidia_smi_xml(xml.stdout, kb)
        except ProbeFailed:
            pass
        else:
            if facts.driver_version:
                first = facts.gpus[0] if facts.gpus else None
                return HostGpus(
                    driver=facts.driver_version,
                    cuda_ceiling=facts.cuda_ceiling,
                    names=tuple(gpu.name for gpu in facts.gpus),
                    memory_mib=first.memory_total_mib if first else None,
                    source="nvidia-smi -q -x",
                )
    failure = _SMI_FAILURE.search(f"{xml.stdout}\n{xml.stderr}")
    if failure:  # the driver itself is not usable: the table would say the same
        return HostGpus(problem=f"nvidia-smi: {failure.group(1).strip()}", source="nvidia-smi")
    table = run_command(["nvidia-smi"], timeout, path)
    if table.ok:
        parsed = parse_nvidia_smi_table(table.stdout)
        if parsed.driver:
            return parsed
    failure = _SMI_FAILURE.search(f"{table.stdout}\n{table.stderr}")
    line = f"nvidia-smi: {failure.group(1).strip()}" if failure else table.first_error_line()
    return HostGpus(problem=line, source="nvidia-smi")


# --- /dev/shm ---------------------------------------------------------------------------------


def shm_bytes(host_root: Path) -> int | None:
    """The size of /dev/shm (statvfs: fragment size x blocks); None when there is none."""
    try:
        stats = os.statvfs(host_root / "dev" / "shm")
    except OSError:
        return None
    return stats.f_frsize * stats.f_blocks


_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]+)?)\s*([kmgt]?)(i?b?)\s*$", re.IGNORECASE)


def parse_size(text: str) -> int:
    """Docker's and Kubernetes' sizes: 64m, 1g, 1GiB, 2Gi, 16G, 1073741824 (binary units, as
    docker --shm-size reads them). ValueError for anything else."""
    match = _SIZE.match(text)
    if not match:
        raise ValueError(text)
    number = float(match.group(1))
    unit = match.group(2).lower()
    return int(number * 1024 ** " kmgt".index(unit or " "))


# --- what the container runtime exposes ------------------------------------------------------


@dataclass
class RuntimeView:
    """The GPUs the container runtime can give a container, per source found."""

    device_nodes: int | None = None
    cli_devices: int | None = None
    cli_driver: str | None = None
    cli_brand: str | None = None
    cli_problem: str | None = None
    cdi_devices: int | None = None
    cdi_driver: str | None = None
    cdi_files: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def sources(self) -> list[str]:
        found = []
        if self.device_nodes is not None:
            found.append("/dev/nvidia*")
        if self.cli_devices is not None or self.cli_problem is not None:
            found.append("nvidia-container-cli")
        if self.cdi_devices is not None:
            found.append("CDI spec")
        return found


def _device_nodes(host_root: Path) -> int | None:
    folder = host_root / "dev"
    try:
        with os.scandir(folder) as entries:
            names = [
                entry.name for _, entry in zip(range(MAX_DEVICE_ENTRIES), entries, strict=False)
            ]
    except OSError:
        return None
    nodes = [name for name in names if _DEVICE_NODE.match(name)]
    has_control = "nvidiactl" in names
    return len(nodes) if nodes or has_control else None


def parse_container_cli_info(text: str) -> tuple[int, str | None, str | None]:
    """`nvidia-container-cli info`: the devices it lists, the driver (NVRM version) and the first
    device's brand (NVIDIA_REQUIRE_CUDA's brand= clauses compare it)."""
    devices, driver, brand = 0, None, None
    for line in text.splitlines():
        match = _CLI_FIELD.match(line.strip())
        if not match:
            continue
        key, value = match.group(1), match.group(2).strip()
        if key == "Device Index":
            devices += 1
        elif key == "NVRM version" and value not in ("", "(null)"):
            driver = value
        elif key == "Brand" and brand is None and value not in ("", "(null)"):
            brand = value
    return devices, driver, brand


def _cdi_specs(host_root: Path, limits: Limits) -> tuple[int | None, str | None, list[str]]:
    """The NVIDIA devices named in the CDI specs (the `all` device not counted) and the driver
    version the specs were generated for (its libcuda.so.<version> mounts)."""
    import yaml

    loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    devices: set[str] = set()
    drivers: set[str] = set()
    files: list[str] = []
    seen = 0
    for folder in limits.cdi.spec_dirs:
        base = host_root / folder.lstrip("/")
        try:
            candidates = sorted(base.iterdir())[:MAX_SPEC_FILES]
        except OSError:
            continue
        for spec in candidates:
            if spec.suffix not in (".yaml", ".yml", ".json") or seen >= MAX_SPEC_FILES:
                continue
            seen += 1
            try:
                with spec.open("rb") as stream:
                    data = stream.read(MAX_SPEC_BYTES + 1)
            except OSError:
                continue
            if len(data) > MAX_SPEC_BYTES:
                continue
            text = data.decode("utf-8", errors="replace")
            try:
                document = yaml.load(text, Loader=loader)
            except yaml.YAMLError:
                continue
            if not isinstance(document, dict) or document.get("kind") != limits.cdi.kind:
                continue
            files.append(str(Path("/") / folder.lstrip("/") / spec.name))
            for device in document.get("devices") or []:
                if isinstance(device, dict) and str(device.get("name")) != "all":
                    nodes = (device.get("containerEdits") or {}).get("deviceNodes") or []
                    paths = [n.get("path") for n in nodes if isinstance(n, dict)]
                    gpu = next((p for p in paths if p and _DEVICE_NODE.match(Path(p).name)), None)
                    devices.add(gpu or str(device.get("name")))
            drivers.update(_CDI_DRIVER.findall(text))
    if not files:
        return None, None, []
    driver = max(drivers, key=_version_key) if drivers else None
    return len(devices), driver, files


def _version_key(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(".") if part.isdigit())


def runtime_view(
    host_root: Path, limits: Limits, timeout: float, path: str | None = None
) -> RuntimeView:
    """What each source says; the sources not present stay None."""
    view = RuntimeView(device_nodes=_device_nodes(host_root))
    info = run_command(["nvidia-container-cli", "info"], timeout, path)
    if info.ok:
        view.cli_devices, view.cli_driver, view.cli_brand = parse_container_cli_info(info.stdout)
    elif not info.missing:
        view.cli_problem = info.first_error_line()
    view.cdi_devices, view.cdi_driver, view.cdi_files = _cdi_specs(host_root, limits)
    return view


def rdma_devices(host_root: Path, limits: Limits) -> list[str] | None:
    """The node's RDMA devices (mlx5_0, ...); None when the kernel lists none at all."""
    folder = host_root / limits.rdma.class_dir.lstrip("/")
    try:
        with os.scandir(folder) as entries:
            names = sorted(entry.name for _, entry in zip(range(256), entries, strict=False))
    except OSError:
        return None
    return names or None
