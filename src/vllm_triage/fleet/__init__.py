"""fleet: which GPU nodes of a cluster can run an image (GPU Feature Discovery labels, a node list
or an inventory), in which waves to change the rest, and the tool run across many hosts through
an existing engine (Kubernetes Jobs, or Ansible without Kubernetes)."""

from typing import TYPE_CHECKING

from vllm_triage.lazy import lazy_exports

if TYPE_CHECKING:
    from vllm_triage.fleet.api import FleetScanOptions, fleet_scan, scan_fleet
    from vllm_triage.fleet.models import FleetRun, FleetScan
    from vllm_triage.fleet.output import ScannedFleet
    from vllm_triage.fleet.run import FleetRunOptions, fleet_run

__all__ = [
    "FleetRun",
    "FleetRunOptions",
    "FleetScan",
    "FleetScanOptions",
    "ScannedFleet",
    "fleet_run",
    "fleet_scan",
    "scan_fleet",
]
__getattr__ = lazy_exports(
    __name__,
    {
        "FleetScanOptions": "vllm_triage.fleet.api",
        "fleet_scan": "vllm_triage.fleet.api",
        "scan_fleet": "vllm_triage.fleet.api",
        "ScannedFleet": "vllm_triage.fleet.output",
        "FleetScan": "vllm_triage.fleet.models",
        "FleetRun": "vllm_triage.fleet.models",
        "FleetRunOptions": "vllm_triage.fleet.run",
        "fleet_run": "vllm_triage.fleet.run",
    },
)
