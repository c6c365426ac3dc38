"""Communication: the NCCL version (image env, pip metadata or the log), NCCL_/UCX_/GLOO_ settings
of the launch, RDMA devices and port states (ibv_devinfo, ibstat), network interfaces.
"""

from __future__ import annotations

import json
import re

from vllm_triage.bundle.models import CommunicationFacts, RdmaPort
from vllm_triage.collect.captured import CapturedFile
from vllm_triage.collect.probes.base import Probe, ProbeContext, ProbeOutput
from vllm_triage.collect.probes.container import container_for
from vllm_triage.collect.probes.vllm import launch_args

_SETTING_PREFIXES = ("NCCL_", "UCX_", "GLOO_", "NVSHMEM_", "VLLM_ALL2ALL", "MASTER_")
_HCA = re.compile(r"^hca_id:\s*(\S+)", re.MULTILINE)
_PORT = re.compile(r"^\s*port:\s*([0-9]+)", re.MULTILINE)
_STATE = re.compile(r"^\s*state:\s*(\S+)", re.MULTILINE)
_LINK = re.compile(r"^\s*link_layer:\s*(\S+)", re.MULTILINE)
_LOG_NCCL = re.compile(r"NCCL version ([0-9]+\.[0-9]+\.[0-9]+)")


def parse_ibv_devinfo(text: str) -> list[RdmaPort]:
    """Each HCA port with its state and link layer (InfiniBand or Ethernet for RoCE)."""
    ports = []
    for block in re.split(r"(?=^hca_id:)", text, flags=re.MULTILINE):
        device = _HCA.search(block)
        if not device:
            continue
        for port_block in re.split(r"(?=^\s*port:)", block, flags=re.MULTILINE)[1:]:
            port = _PORT.search(port_block)
            state = _STATE.search(port_block)
            link = _LINK.search(port_block)
            if port:
                ports.append(
                    RdmaPort(
                        device=device.group(1),
                        port=int(port.group(1)),
                        state=state.group(1) if state else None,
                        link_layer=link.group(1) if link else None,
                    )
                )
    return ports


def nccl_from_log(text: str) -> str | None:
    """The NCCL version a log reports (`NCCL version 2.21.5+cuda12.4`)."""
    match = _LOG_NCCL.search(text)
    return match.group(1) if match else None


def _interfaces(text: str) -> list[str]:
    try:
        document = json.loads(text)
    except json.JSONDecodeError:
        return []
    return [
        f"{item.get('ifname')} {item.get('operstate', '?')} mtu {item.get('mtu', '?')}"
        for item in document
        if isinstance(item, dict) and item.get("ifname")
    ]


def collect(ctx: ProbeContext) -> ProbeOutput:
    out = ProbeOutput()
    facts = CommunicationFacts()
    container = container_for(ctx, out.notes)
    env = dict(container.env) if container else {}
    launch = launch_args(ctx)
    if launch is not None:
        env.update(launch.env)
    facts.settings = {k: v for k, v in sorted(env.items()) if k.startswith(_SETTING_PREFIXES)}
    if env.get("NCCL_VERSION"):
        facts.nccl_version, facts.nccl_version_source = (
            env["NCCL_VERSION"],
            "image env NCCL_VERSION",
        )
    else:
        for log in ctx.options.logs:
            if (head := ctx.log_head(log)) is not None and (version := nccl_from_log(head)):
                facts.nccl_version, facts.nccl_version_source = version, f"log {log.name}"
                break
    for name, parse in (("ibv_devinfo", parse_ibv_devinfo), ("ibstat", None)):
        result = ctx.run(name)
        if result.missing:
            continue
        out.files.append(
            CapturedFile(f"communication/{name}.txt", text=result.text() + result.stderr)
        )
        if parse and result.ok:
            facts.rdma_ports = parse(result.text())
    addresses = ctx.run("ip_address")
    if addresses.ok:
        out.files.append(ctx.output_file("communication/ip-address.json", addresses))
        facts.interfaces = _interfaces(addresses.text())
    out.facts = facts
    return out


PROBE = Probe("communication", collect, "NCCL version and settings, RDMA ports, interfaces")
