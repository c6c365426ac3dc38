"""One probe per source of evidence (the sos model): each runs alone, with its own deadline, and
may fail without sinking the bundle.
"""

from vllm_triage.collect.probes import (
    communication,
    container,
    gpu,
    host,
    image,
    kubernetes,
    model_files,
    vllm,
)
from vllm_triage.collect.probes.base import CollectOptions, Probe

PROBES: tuple[Probe, ...] = (
    gpu.PROBE,
    host.PROBE,
    container.PROBE,
    kubernetes.PROBE,
    image.PROBE,
    communication.PROBE,
    model_files.PROBE,
    vllm.PROBE,
)

__all__ = ["PROBES", "CollectOptions", "Probe"]
