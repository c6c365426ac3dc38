"""What a baseline reads from the raw outputs beyond the collect probes' facts: the GPU processes
and lifetime ECC counters of `nvidia-smi -q -x`, the RDMA devices of `ibstat`, the default runtime
of `docker info`, the interfaces of `ip -json address show`, and the transport NCCL uses.

Every parser takes text (already capped by the command runner) and never raises for what a host
printed: a part it cannot read is left out, and the probe's own status says why.
"""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterable, Mapping

from vllm_triage.baseline.models import (
    GpuProcess,
    NetworkInterface,
    RdmaDevice,
    RdmaPortState,
)
from vllm_triage.bundle.models import RdmaPort
from vllm_triage.safejson import JsonError, parse_json

_MIB = re.compile(r"([0-9]+)\s*MiB")
_CA = re.compile(r"^CA '([^']+)'", re.MULTILINE)
_IBSTAT_PORT = re.compile(r"^\s*Port ([0-9]+):", re.MULTILINE)
_IBSTAT_FIELD = re.compile(r"^\s*(State|Physical state|Rate|Link layer):\s*(.*?)\s*$", re.MULTILINE)
_USING_NETWORK = re.compile(r"NCCL INFO Using network (\S+)")
_NET_IB_USING = re.compile(r"NCCL INFO NET/IB : Using (.*?)(?: ;|$)", re.MULTILINE)
_JSON_CAP = 4 * 1024 * 1024
# The most GPU processes, devices and interfaces a baseline keeps (a node has tens, not thousands).
MAX_ITEMS = 512
_TRUE = ("1", "true", "yes", "on")


def _text(element: ET.Element | None, path: str) -> str | None:
    if element is None:
        return None
    found = element.find(path)
    if found is None or found.text is None:
        return None
    value = found.text.strip()
    return None if value in ("", "N/A", "[N/A]", "Not Supported", "[Not Supported]") else value


def _int(value: str | None) -> int | None:
    match = re.match(r"-?[0-9]+", value or "")
    return int(match.group(0)) if match else None


def smi_root(text: str) -> ET.Element | None:
    """The <nvidia_smi_log> of `nvidia-smi -q -x`, or None when the text is not one."""
    try:
        root = ET.fromstring(text)
    except ET.ParseError:
        return None
    return root if root.tag == "nvidia_smi_log" else None


def gpu_processes(root: ET.Element) -> list[GpuProcess]:
    """Every process holding a GPU, with the GPU's bus id (names as printed: redact them)."""
    found = []
    for gpu in root.findall("gpu"):
        for process in gpu.findall("processes/process_info"):
            memory = _MIB.search(_text(process, "used_memory") or "")
            found.append(
                GpuProcess(
                    bus_id=gpu.get("id"),
                    pid=_int(_text(process, "pid")),
                    type=_text(process, "type"),
                    name=_text(process, "process_name") or "",
                    used_memory_mib=int(memory.group(1)) if memory else None,
                )
            )
    return found[:MAX_ITEMS]


def aggregate_uncorrectable(root: ET.Element) -> dict[str, int]:
    """Lifetime uncorrectable ECC errors per GPU bus id: the `*uncorrectable*` counters of
    ecc_errors/aggregate (DTD v11+) or its double_bit total (older); volatile counters reset when
    the driver reloads, these do not, so they compare across a driver change."""
    counts = {}
    for gpu in root.findall("gpu"):
        aggregate = gpu.find("ecc_errors/aggregate")
        if aggregate is None:
            continue
        values = [c.text for c in aggregate if "uncorrectable" in c.tag]
        values.append(_text(aggregate, "double_bit/total"))
        numbers = [n for n in (_int(v.strip()) for v in values if v) if n is not None]
        if numbers:
            counts[gpu.get("id") or ""] = sum(numbers)
    return counts


def parse_ibstat(text: str) -> list[RdmaDevice]:
    """Each CA of `ibstat` with its ports' state, physical state, rate and link layer."""
    devices = []
    for block in re.split(r"(?=^CA ')", text, flags=re.MULTILINE):
        name = _CA.search(block)
        if not name:
            continue
        ports = []
        for port_block in re.split(r"(?=^\s*Port [0-9]+:)", block, flags=re.MULTILINE)[1:]:
            number = _IBSTAT_PORT.search(port_block)
            if not number:
                continue
            fields = dict(_IBSTAT_FIELD.findall(port_block))
            ports.append(
                RdmaPortState(
                    port=int(number.group(1)),
                    state=fields.get("State"),
                    physical_state=fields.get("Physical state"),
                    rate=fields.get("Rate"),
                    link_layer=fields.get("Link layer"),
                )
            )
        devices.append(RdmaDevice(name=name.group(1), source="ibstat", ports=ports))
    return devices[:MAX_ITEMS]


def devices_from_ports(ports: Iterable[RdmaPort]) -> list[RdmaDevice]:
    """The ports collect parsed from `ibv_devinfo`, grouped by device."""
    devices: dict[str, RdmaDevice] = {}
    for port in ports:
        device = devices.setdefault(port.device, RdmaDevice(name=port.device, source="ibv_devinfo"))
        device.ports.append(
            RdmaPortState(port=port.port, state=port.state, link_layer=port.link_layer)
        )
    return list(devices.values())[:MAX_ITEMS]


def merge_devices(*sources: list[RdmaDevice]) -> list[RdmaDevice]:
    """One entry per device name: the first source that lists it (ibv_devinfo before ibstat);
    port fields it lacks (rate, physical state) come from the others."""
    merged: dict[str, RdmaDevice] = {}
    for devices in sources:
        for device in devices:
            known = merged.get(device.name)
            if known is None:
                merged[device.name] = device.model_copy(deep=True)
                continue
            by_port = {port.port: port for port in device.ports}
            for port in known.ports:
                other = by_port.get(port.port)
                if other is not None:
                    port.rate = port.rate or other.rate
                    port.physical_state = port.physical_state or other.physical_state
    return sorted(merged.values(), key=lambda d: d.name)[:MAX_ITEMS]


def default_runtime(text: str) -> str | None:
    """DefaultRuntime of `docker info --format {{json .}}` (podman has none: runc/crun)."""
    document = _document(text)
    value = document.get("DefaultRuntime") if isinstance(document, dict) else None
    return value if isinstance(value, str) and value else None


def interfaces(text: str) -> list[NetworkInterface]:
    """Each interface of `ip -json address show`: name, operational state, MTU."""
    document = _document(text)
    found = []
    for item in document if isinstance(document, list) else []:
        if isinstance(item, dict) and isinstance(item.get("ifname"), str):
            mtu = item.get("mtu")
            state = item.get("operstate")
            found.append(
                NetworkInterface(
                    name=item["ifname"],
                    state=state if isinstance(state, str) else None,
                    mtu=mtu if isinstance(mtu, int) and not isinstance(mtu, bool) else None,
                )
            )
    return found[:MAX_ITEMS]


def _document(text: str) -> object:
    try:
        return parse_json(text, "command output", max_bytes=_JSON_CAP)
    except JsonError:
        return None


def nccl_transport_from_log(text: str) -> str | None:
    """The transport an NCCL_DEBUG=INFO log says NCCL chose: `Using network Socket|IB`, and for
    IB whether the devices it names are RoCE (`[0]mlx5_0:1/RoCE`) or InfiniBand (`/IB`)."""
    network = _USING_NETWORK.search(text)
    if network is None:
        return None
    if network.group(1).lower() == "socket":
        return "socket"
    using = _NET_IB_USING.search(text)
    kinds = set(re.findall(r"/(IB|RoCE)\b", using.group(1))) if using else set()
    layers = {"infiniband" if kind == "IB" else "roce" for kind in kinds}
    return "+".join(sorted(layers)) if layers else network.group(1).lower()


def nccl_transport(settings: Mapping[str, str], devices: list[RdmaDevice]) -> str | None:
    """The transport NCCL would take from its settings and the RDMA ports that are up: sockets
    when IB is disabled or asked for (NCCL_IB_DISABLE, NCCL_NET=Socket) or no RDMA port is
    active; else InfiniBand or RoCE by the link layer of the active ports NCCL_IB_HCA selects.
    None when no RDMA tool answered (nothing says)."""
    if settings.get("NCCL_IB_DISABLE", "").strip().lower() in _TRUE:
        return "socket"
    if settings.get("NCCL_NET", "").strip().lower() == "socket":
        return "socket"
    selected = [d for d in devices if _selected(d.name, settings.get("NCCL_IB_HCA", ""))]
    layers = {
        "infiniband" if (port.link_layer or "").lower() == "infiniband" else "roce"
        for device in selected
        for port in device.ports
        if port_active(port.state)
    }
    if layers:
        return "+".join(sorted(layers))
    return "socket" if devices else None


def port_active(state: str | None) -> bool:
    """Whether a port state means up: `PORT_ACTIVE` (ibv_devinfo) or `Active` (ibstat)."""
    return (state or "").upper().removeprefix("PORT_").split(" ")[0] == "ACTIVE"


def _selected(device: str, hca: str) -> bool:
    """Whether NCCL_IB_HCA selects a device: a comma list of name prefixes (`=` exact, a leading
    `^` excludes), with optional `:port`; empty selects every device."""
    spec = hca.strip()
    if not spec:
        return True
    exclude = spec.startswith("^")
    spec = spec.lstrip("^")
    exact = spec.startswith("=")
    spec = spec.lstrip("=")
    names = [item.split(":")[0].strip() for item in spec.split(",") if item.strip()]
    matched = any(device == name if exact else device.startswith(name) for name in names)
    return matched != exclude
